//! The raw entry points ([`Kernel::call`], [`Kernel::call_range`]) and the Rust driver of
//! banded plans, which packs each band into a per-thread scratch buffer before the compiled
//! code walks its rows.
#![allow(unsafe_code, reason = "calls JIT code on the caller's raw buffers")]

use std::cell::RefCell;
use std::ops::Range;

use super::Kernel;
use crate::copy::{grow_band_scratch, pack_band};
use crate::error::{Error, Result};
use crate::specialize::{Band, Loop};

thread_local! {
    /// Each thread's scratch buffer for banded kernels: it only grows, up to the largest band a
    /// kernel run on this thread has used (1 MiB at most under the default `Tuning`).
    static BAND_SCRATCH: RefCell<Vec<u128>> = const { RefCell::new(Vec::new()) };
}

/// The loops of a banded plan that its Rust driver walks, outermost first (the compiled code
/// walks the rest: the rows of a band and its columns).
#[derive(Clone, Copy)]
pub(super) struct BandLoops {
    pub(super) batches: Option<Loop>,
    pub(super) bands: Loop,
    pub(super) rows: Loop,
}

impl Kernel {
    /// Runs the whole gather on raw buffers.
    ///
    /// # Safety
    /// See [`Kernel::call_range`], with `range = 0..self.outer_extent()`.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for a rejected index (see `call_range`).
    pub unsafe fn call(&self, data: *const u8, indices: *const u8, output: *mut u8) -> Result<()> {
        // SAFETY: forwarded contract; the whole loop is `0..outer_extent()` iterations, that is
        // `cells_per_iteration()` cells each.
        unsafe {
            self.call_cells(
                data,
                indices,
                output,
                0..self.outer_extent() * self.cells_per_iteration(),
            )
        }
    }

    /// Runs iterations `range` of the outermost loop, for splitting one gather across threads
    /// (disjoint ranges write disjoint parts of the output). No check beyond the indices
    /// themselves, and no allocation except that a banded plan's scratch buffer (one per
    /// thread) grows on the thread's first use.
    ///
    /// # Safety
    /// - `data` points to `data_len * dtype.size()` readable bytes holding the data tensor
    ///   C-contiguous (row-major); `indices` to `indices_len * index_type.size()` readable bytes
    ///   holding the indices C-contiguous, in native byte order; `output` to `output_len *
    ///   dtype.size()` writable bytes (lengths from [`Kernel::validated`]). No alignment is
    ///   required.
    /// - `output` does not overlap `data` or `indices`, and no other thread reads or writes the
    ///   part of `output` this range writes while the call runs.
    /// - A pointer to a buffer of 0 bytes may be anything, null included (every pointer is
    ///   valid for a zero-length access), as for every family's raw calls.
    ///
    /// # Errors
    /// Under `OutOfRange::Error` (and for an index into an empty dimension under `Clamp`):
    /// [`Error::IndexOutOfRange`] naming the first rejected index of the range in row-major
    /// order of the indices. The output slices before it have been written; the rest of the
    /// range's output is unchanged. A banded plan (a GatherElements of a table of megabytes, see `docs/design.md`) differs: its ranges are
    /// ranges of column bands (or of batches, each walked band by band), so after an error
    /// any part of the range's output may have been written, and the error names the gather's
    /// first rejected index in row-major order up to the one the range met, which may lie in
    /// another range. Either way, running ranges in order and stopping at the first failing
    /// one reports the gather's first bad index. An invalid `range` gives
    /// [`Error::BufferMismatch`] and touches nothing.
    /// If a banded plan's scratch buffer cannot grow to its band (at most
    /// `MAX_BAND_BYTES`), [`Error::Allocation`], before anything is written.
    pub unsafe fn call_range(
        &self,
        data: *const u8,
        indices: *const u8,
        output: *mut u8,
        range: Range<u64>,
    ) -> Result<()> {
        if range.start > range.end || range.end > self.outer_extent() {
            return Err(Error::BufferMismatch {
                what: "range",
                expected: format!("a range within 0..{}", self.outer_extent()),
                actual: format!("{}..{}", range.start, range.end),
            });
        }
        // A banded plan's code runs rows of one band: `rows` cells per band.
        let cells = self.cells_per_iteration();
        // SAFETY: forwarded contract; the range was checked above, so the cells lie within
        // `0..extent * cells`.
        unsafe {
            self.call_cells(
                data,
                indices,
                output,
                range.start * cells..range.end * cells,
            )
        }
    }

    /// How many cells (units of [`Kernel::call_cells`]) one iteration of the outer loop has:
    /// one, or for a banded plan the rows of a band (times the bands of a batch, when the
    /// outer loop walks batches).
    pub(super) fn cells_per_iteration(&self) -> u64 {
        match self.band_loops() {
            Some(BandLoops {
                batches: Some(_),
                bands,
                rows,
            }) => bands.extent * rows.extent,
            Some(BandLoops { rows, .. }) => rows.extent,
            None => 1,
        }
    }

    /// The loops a banded plan's Rust driver walks (see [`Plan::band`]); `None` if unbanded.
    pub(super) fn band_loops(&self) -> Option<BandLoops> {
        self.plan.band?;
        match self.plan.loops[..] {
            [bands, rows, _] => Some(BandLoops {
                batches: None,
                bands,
                rows,
            }),
            [batches, bands, rows, _] => Some(BandLoops {
                batches: Some(batches),
                bands,
                rows,
            }),
            _ => unreachable!("a banded plan has three or four loops"),
        }
    }

    /// Runs `cells` and maps a rejected index to its error: for a plain plan a cell is an
    /// iteration of the outer loop; for a banded plan, cell `(batch * bands + b) * rows + r`
    /// is row `r` of band `b` of that batch (`batch` is 0 without a batches loop), so ranges
    /// can split a band's rows too (as `call_parallel` does with more threads than bands).
    ///
    /// # Safety
    /// As [`Kernel::call_range`], with `cells` within `0..outer_extent() *
    /// cells_per_iteration()`.
    #[inline]
    pub(super) unsafe fn call_cells(
        &self,
        data: *const u8,
        indices: *const u8,
        output: *mut u8,
        cells: Range<u64>,
    ) -> Result<()> {
        let result = match self.plan.band {
            // SAFETY: forwarded contract.
            Some(band) => unsafe { self.call_bands(band, data, indices, output, cells) }?,
            // SAFETY: forwarded contract; cells are outer iterations here.
            None => unsafe {
                self.code
                    .call(data, indices, output, cells.start, cells.end)
            },
        };
        // SAFETY: forwarded contract (the whole indices buffer is readable).
        result.map_err(|position| unsafe { self.rejected(indices, position) })
    }

    /// Runs `cells` (see [`Kernel::call_cells`]) of a banded plan: packs each band met into
    /// this thread's scratch buffer, then runs the code (the plan's inner loops) on its rows.
    /// Returns the element position of the tuple holding a rejected index, like
    /// [`JitCode::call`] (a banded plan's tuples are single indices).
    ///
    /// # Safety
    /// As [`Kernel::call_range`], with `cells` within `0..batches * bands * rows`.
    #[inline(never)]
    unsafe fn call_bands(
        &self,
        band: Band,
        data: *const u8,
        indices: *const u8,
        output: *mut u8,
        cells: Range<u64>,
    ) -> Result<std::result::Result<(), u64>> {
        let Some(BandLoops {
            batches,
            bands,
            rows,
        }) = self.band_loops()
        else {
            unreachable!("call_bands runs banded plans only")
        };
        let batches = batches.unwrap_or(Loop {
            extent: 1,
            data_stride: 0,
            indices_stride: 0,
            output_stride: 0,
        });
        let index_size = self.signature().index_type.size() as u64;
        let run = |scratch: &mut Vec<u128>| {
            // The scratch grows here, fallibly, to the band's size (at most `MAX_BAND_BYTES`),
            // so that `pack_band` never allocates.
            grow_band_scratch(scratch, band).map_err(|bytes| Error::Allocation {
                what: "a band's scratch buffer",
                bytes,
            })?;
            let mut cell = cells.start;
            while cell < cells.end {
                let (band_index, first_row) = (cell / rows.extent, cell % rows.extent);
                let (batch, b) = (band_index / bands.extent, band_index % bands.extent);
                let end_row = rows.extent.min(first_row + (cells.end - cell));
                let offset = |of: fn(&Loop) -> u64| batch * of(&batches) + b * of(&bands);
                let indices_offset = offset(|l| l.indices_stride);
                // SAFETY: for all three offsets, band `b < bands.extent` of batch `batch <
                // batches.extent` starts this far into each buffer (the plan's strides, which
                // walk within the buffers).
                let (source, indices, output) = unsafe {
                    (
                        data.add(offset(|l| l.data_stride) as usize),
                        indices.add(indices_offset as usize),
                        output.add(offset(|l| l.output_stride) as usize),
                    )
                };
                // SAFETY: the band's rows lie inside data (see `specialize::band`), and the
                // scratch was grown to the band above.
                let packed = unsafe { pack_band(source, band, scratch) };
                // SAFETY: `packed` holds the band as the compiled inner loops read it (`rows`
                // rows of `row_bytes`), the indices and output pointers start at this band,
                // and `first_row..end_row` lies within the rows loop, so the code walks only
                // this band's part of each buffer.
                let called = unsafe { self.code.call(packed, indices, output, first_row, end_row) };
                if let Err(position) = called {
                    return Ok(Err(position + indices_offset / index_size));
                }
                cell += end_row - first_row;
            }
            Ok(Ok(()))
        };
        // A thread-local buffer (no allocation per call); a fresh one if it is unavailable
        // (during thread teardown).
        let result =
            BAND_SCRATCH.try_with(|cell| cell.try_borrow_mut().ok().map(|mut s| run(&mut s)));
        match result {
            Ok(Some(result)) => result,
            _ => run(&mut Vec::new()),
        }
    }
}
