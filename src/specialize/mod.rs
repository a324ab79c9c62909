//! Specialisation: a validated signature becomes a [`Plan`], a loop nest whose every extent and
//! stride is a constant.
//!
//! All three ops share one form: a nest of [`Loop`]s walks the output in row-major order; the
//! innermost body reads one index tuple (a [`Lookup`] of one coordinate for Gather and
//! GatherElements, `indices.shape[-1]` for GatherND), turns it into a data offset and copies one
//! contiguous slice of `slice_bytes`. Each loop advances three pointers by constant byte strides:
//! data, indices and output. Loops of extent 1 are dropped and adjacent loops that are contiguous
//! in all three buffers are merged, so GatherND on data `[1000,256,10,15]` with indices
//! `[25,125,3]` is one loop of 3125 lookups, each copying 60 bytes.
//!
//! GatherElements along the leading axis of a table too large for the cache (S7: `[1024,1024]`
//! f32, axis 0) is *banded*: an outer loop walks bands of columns, and each band is first copied
//! into a small scratch buffer, so every lookup of the band hits the L2 cache instead of
//! pulling a fresh line from L3 (see [`Band`]).
//!
//! The plan is plain data, independent of Cranelift; checked arithmetic happens here, once, so
//! the generated code can use the constants without overflow checks. Every stride is in bytes.

mod host;

use std::fmt;

pub use host::Host;
// The threshold is public for the CLI's `explain` and the benches (`unstable`) and read by the
// tests; the planner itself reads it through `Host`.
#[cfg(any(test, feature = "unstable"))]
pub use host::{STREAMING_OUTPUT_BYTES, streaming_output_bytes};

use crate::error::{Error, Result};
use crate::ir::{IndexPolicy, IndexType, OutOfRange, OutputMemory, ResolvedOp, Validated};

/// One loop of the nest. Strides are in bytes and advance the pointers per iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Loop {
    /// Number of iterations.
    pub extent: u64,
    /// Bytes the data pointer advances per iteration.
    pub data_stride: u64,
    /// Bytes the indices pointer advances per iteration.
    pub indices_stride: u64,
    /// Bytes the output pointer advances per iteration.
    pub output_stride: u64,
}

impl Loop {
    /// The strides of the data, indices and output pointers, in that order (the order of the
    /// generated code's pointer triples).
    pub fn strides(&self) -> [u64; 3] {
        [self.data_stride, self.indices_stride, self.output_stride]
    }
}

/// One coordinate of an index tuple: where it is read and what it selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Coordinate {
    /// Byte offset of this coordinate from the tuple's start in the indices buffer.
    pub index_offset: u64,
    /// Size of the data dimension it indexes (valid indices are `0..dim_size` after wrapping).
    pub dim_size: u64,
    /// Bytes of data per unit of this coordinate.
    pub data_stride: u64,
}

/// The body of the innermost loop: read a tuple, check it, copy one slice.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lookup {
    /// The tuple's coordinates, in the order they are stored (and checked).
    pub coordinates: Vec<Coordinate>,
    /// Contiguous bytes copied per tuple (0 when only the indices are checked).
    pub slice_bytes: u64,
    /// Whether slices are written with non-temporal (streaming) stores: for large slices into
    /// an output of a quarter of the last-level cache or more ([`streaming_output_bytes`]),
    /// where reading the destination lines for ownership would add to the memory traffic.
    pub streaming: bool,
}

/// Slices of at least this many bytes may stream (smaller ones are inlined moves).
pub const STREAMING_SLICE_BYTES: u64 = 512;

/// A band of columns copied to a scratch buffer before the inner loops of each iteration of
/// the bands loop: `rows` rows of `row_bytes` bytes, `row_stride` bytes apart, starting at
/// that iteration's data pointer (of its batch, when the plan has a batches loop). The inner
/// loops then read the scratch buffer (its rows are `row_bytes` apart, which the coordinate's
/// `data_stride` already says) instead of data.
///
/// Rows of a large table lie a multiple of 4 KiB apart, so a column band of the table itself
/// maps into a few cache sets and is evicted as fast as the whole table would be; the packed
/// copy does not (`cargo bench --bench gather -- 'S7/jit'` against `S7/jit_no_bands`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Band {
    /// Rows copied: the size of the indexed dimension.
    pub rows: u64,
    /// Bytes between rows in data.
    pub row_stride: u64,
    /// Bytes copied per row: the band's width.
    pub row_bytes: u64,
}

/// Choices of the specialisation pass that change the loop order, never the result. The
/// default is what measured best (`cargo bench --bench gather -- S7/`);
/// [`crate::Kernel::compile_tuned`] takes others, e.g. to test banding on small shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// Band GatherElements (see [`Band`]) when the indexed table (dim size times row stride)
    /// has at least this many bytes; `u64::MAX` never bands.
    pub band_min_table_bytes: u64,
    /// Scratch a band aims for, in bytes (per thread); a table of many rows exceeds it to
    /// reach `band_min_row_bytes`, up to `band_max_rows * band_min_row_bytes`.
    pub band_scratch_bytes: u64,
    /// Narrowest band row worth packing, in bytes.
    pub band_min_row_bytes: u64,
    /// Most table rows worth packing: every band walks one row of indices and of output per
    /// table row, each on its own page, so many rows cost more TLB misses than bands save.
    pub band_max_rows: u64,
}

#[cfg_attr(
    not(feature = "unstable"),
    expect(dead_code, reason = "only the `unstable` API uses them")
)]
impl Tuning {
    /// Never band.
    pub const NO_BANDS: Tuning = Tuning {
        band_min_table_bytes: u64::MAX,
        band_scratch_bytes: 0,
        band_min_row_bytes: u64::MAX,
        band_max_rows: 0,
    };

    /// Band every element gather that the plan's own rules allow (rows and contiguous columns,
    /// maybe inside a batches loop, a non-empty table, at least half as many index rows as
    /// table rows, a band width that divides the columns), within `scratch_bytes` of scratch
    /// (for tests: small tables then take the banded path too).
    pub const fn bands_always(scratch_bytes: u64) -> Tuning {
        Tuning {
            band_min_table_bytes: 0,
            band_scratch_bytes: scratch_bytes,
            band_min_row_bytes: 1,
            band_max_rows: u64::MAX,
        }
    }
}

impl Default for Tuning {
    /// The fastest settings of `gather-jit bench --op gather-elements --axis 0 [--no-bands |
    /// --band-scratch-kib N]` on square-ish tables.
    fn default() -> Tuning {
        Tuning {
            band_min_table_bytes: 2 << 20,
            band_scratch_bytes: 512 << 10,
            band_min_row_bytes: 256,
            band_max_rows: 4096,
        }
    }
}

/// A loop nest with every shape and stride folded into constants.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Plan {
    /// The loops, outermost first; never empty. The kernel's `start..end` range is over the
    /// first loop's extent.
    pub loops: Vec<Loop>,
    /// What the innermost body does.
    pub lookup: Lookup,
    /// The band copied to scratch per iteration of the bands loop, if banded: the plan's
    /// loops are then `[bands, rows, band columns]`, or `[batches, bands, rows, band
    /// columns]` (see `specialize::band`).
    pub band: Option<Band>,
    /// Type of the indices.
    pub index_type: IndexType,
    /// How bad indices are handled.
    pub policy: IndexPolicy,
    /// Total bytes of data, indices and output (for buffer checks).
    pub data_bytes: u64,
    /// Total bytes of indices.
    pub indices_bytes: u64,
    /// Total bytes of the output.
    pub output_bytes: u64,
}

impl Plan {
    /// Builds the plan for a validated signature with the default [`Tuning`].
    ///
    /// # Errors
    /// [`Error::SizeOverflow`] if a stride does not fit in 64 bits (validation already bounds
    /// every tensor by `isize::MAX` bytes, so this is a safety net).
    #[cfg_attr(
        not(feature = "unstable"),
        expect(dead_code, reason = "only the `unstable` API uses it")
    )]
    pub fn new(signature: &Validated) -> Result<Plan> {
        Plan::with_tuning(signature, Tuning::default())
    }

    /// Builds the plan for a validated signature.
    ///
    /// # Errors
    /// As [`Plan::new`].
    pub fn with_tuning(signature: &Validated, tuning: Tuning) -> Result<Plan> {
        Plan::for_host(signature, tuning, Host::current())
    }

    /// Builds the plan for a validated signature on a machine described by `host`: a pure
    /// function of its arguments (golden tests pass [`Host::REFERENCE`]).
    ///
    /// # Errors
    /// As [`Plan::new`].
    pub fn for_host(signature: &Validated, tuning: Tuning, host: Host) -> Result<Plan> {
        let sig = signature.signature();
        let element = sig.dtype.size() as u64;
        let index_size = sig.index_type.size() as u64;
        let overflow = || Error::SizeOverflow {
            what: "plan",
            shape: sig.data_shape.clone(),
        };
        let data_strides = byte_strides(&sig.data_shape, element).ok_or_else(overflow)?;
        let indices_strides = byte_strides(&sig.indices_shape, index_size).ok_or_else(overflow)?;
        let data = &sig.data_shape;
        let indices = &sig.indices_shape;
        // Each dim walked: (extent, data stride, indices stride); output is row-major.
        let mut dims: Vec<(u64, u64, u64)> = Vec::new();
        let mut coordinates: Vec<Coordinate>;
        let slice_elements: u64;
        match signature.op() {
            ResolvedOp::Gather { axis, batch_dims } => {
                for d in 0..batch_dims {
                    dims.push((data[d] as u64, data_strides[d], indices_strides[d]));
                }
                let between: u64 = data[batch_dims..axis].iter().map(|&d| d as u64).product();
                let slice: u64 = data[axis + 1..].iter().map(|&d| d as u64).product();
                // An empty dim before or after the axis makes the output empty: nothing is
                // copied, but the indices are still checked (see `interp` for the rule), so walk
                // them once each, without the data dims; under `Zero` nothing is checked either.
                let empty_output = between == 0 || slice == 0;
                if !empty_output {
                    for d in batch_dims..axis {
                        dims.push((data[d] as u64, data_strides[d], 0));
                    }
                } else if sig.policy.out_of_range == OutOfRange::Zero {
                    dims.push((0, 0, 0));
                }
                for d in batch_dims..indices.len() {
                    dims.push((indices[d] as u64, 0, indices_strides[d]));
                }
                coordinates = vec![Coordinate {
                    index_offset: 0,
                    dim_size: data[axis] as u64,
                    data_stride: data_strides[axis],
                }];
                slice_elements = if empty_output { 0 } else { slice };
            }
            ResolvedOp::GatherElements { axis } => {
                for d in 0..indices.len() {
                    let data_stride = if d == axis { 0 } else { data_strides[d] };
                    dims.push((indices[d] as u64, data_stride, indices_strides[d]));
                }
                coordinates = vec![Coordinate {
                    index_offset: 0,
                    dim_size: data[axis] as u64,
                    data_stride: data_strides[axis],
                }];
                slice_elements = 1;
            }
            ResolvedOp::GatherNd {
                batch_dims,
                index_depth,
            } => {
                for d in 0..batch_dims {
                    dims.push((data[d] as u64, data_strides[d], indices_strides[d]));
                }
                for d in batch_dims..indices.len() - 1 {
                    dims.push((indices[d] as u64, 0, indices_strides[d]));
                }
                coordinates = (0..index_depth)
                    .map(|j| Coordinate {
                        index_offset: j as u64 * index_size,
                        dim_size: data[batch_dims + j] as u64,
                        data_stride: data_strides[batch_dims + j],
                    })
                    .collect();
                slice_elements = data[batch_dims + index_depth..]
                    .iter()
                    .map(|&d| d as u64)
                    .product();
            }
        }
        let slice_bytes = slice_elements.checked_mul(element).ok_or_else(overflow)?;
        let mut loops = build_loops(&dims, slice_bytes).ok_or_else(overflow)?;
        let band = match signature.op() {
            ResolvedOp::GatherElements { .. } => {
                band(&mut loops, &mut coordinates[0], element, index_size, tuning)
            }
            _ => None,
        };
        let output_bytes = (signature.output_len() as u64)
            .checked_mul(element)
            .ok_or_else(overflow)?;
        Ok(Plan {
            loops,
            lookup: Lookup {
                coordinates,
                slice_bytes,
                // A banded plan writes every element inline.
                streaming: band.is_none()
                    && sig.output_memory == OutputMemory::Reused
                    && slice_bytes >= STREAMING_SLICE_BYTES
                    && output_bytes >= host.streaming_output_bytes,
            },
            band,
            index_type: sig.index_type,
            policy: sig.policy,
            data_bytes: signature.data_len() as u64 * element,
            indices_bytes: signature.indices_len() as u64 * index_size,
            output_bytes,
        })
    }

    /// Number of lookups (innermost iterations) the whole nest performs.
    pub fn lookups(&self) -> u64 {
        self.loops.iter().map(|l| l.extent).product()
    }
}

/// The widest band row: wider ones gain nothing (the budget is for many rows).
pub const MAX_BAND_ROW_BYTES: u64 = 16 << 10;

/// The largest band, whatever the [`Tuning`]: each thread's scratch buffer grows to the
/// largest band it packs, and that allocation cannot fail gracefully mid-call. Far above any
/// band that pays (the default budget is 512 KiB).
pub const MAX_BAND_BYTES: u64 = 64 << 20;

/// Bands an element gather when it pays (see [`Band`]): rewrites `loops` from `[rows of
/// indices, columns]` to `[bands, rows of indices, columns of a band]`, or from `[batches,
/// rows of indices, columns]` to `[batches, bands, rows of indices, columns of a band]`, and
/// points `coordinate` at the scratch rows. Applies only to such a nest whose inner loop walks
/// data, indices and output contiguously and whose rows loop is the indexed axis (data stride
/// 0; this alone tells a batches loop from an outermost axis over two unmerged loops), with a
/// table of at least `tuning.band_min_table_bytes` and at most `tuning.band_max_rows` rows, at
/// least half as many rows of indices as table rows (each band copy is then read often
/// enough), and a band width that divides the columns into at least two bands of at least
/// `tuning.band_min_row_bytes` within the scratch budget.
fn band(
    loops: &mut Vec<Loop>,
    coordinate: &mut Coordinate,
    element: u64,
    index_size: u64,
    tuning: Tuning,
) -> Option<Band> {
    let (batches, rows_of_indices, columns) = match loops[..] {
        [rows_of_indices, columns] => (None, rows_of_indices, columns),
        [batches, rows_of_indices, columns] => (Some(batches), rows_of_indices, columns),
        _ => return None,
    };
    // `Kernel::call_range` relies on this too: a band's indices start `width` indices on.
    let contiguous = columns.data_stride == element
        && columns.output_stride == element
        && columns.indices_stride == index_size;
    let table_bytes = coordinate.dim_size.checked_mul(coordinate.data_stride)?;
    if !contiguous
        || rows_of_indices.data_stride != 0
        || table_bytes < tuning.band_min_table_bytes
        || coordinate.dim_size > tuning.band_max_rows
        // An empty table has no band to pack (nor a data pointer to advance).
        || coordinate.dim_size == 0
        || rows_of_indices.extent.checked_mul(2)? < coordinate.dim_size
    {
        return None;
    }
    // The widest band that fits the budget (and `MAX_BAND_BYTES`) and divides the columns; at most
    // `MAX_BAND_ROW_BYTES / element` candidates are tried, whatever the shape (a fuzzed
    // signature with 37e9 columns once made this search take 30 s).
    let max_band_bytes = (tuning.band_scratch_bytes / coordinate.dim_size)
        .max(tuning.band_min_row_bytes)
        .min(MAX_BAND_ROW_BYTES)
        .min(MAX_BAND_BYTES / coordinate.dim_size);
    let width = (1..=(columns.extent / 2).min(max_band_bytes / element))
        .rev()
        .find(|&w| columns.extent % w == 0)?;
    if width * element < tuning.band_min_row_bytes {
        return None;
    }
    let band = Band {
        rows: coordinate.dim_size,
        row_stride: coordinate.data_stride,
        row_bytes: width * element,
    };
    let bands = Loop {
        extent: columns.extent / width,
        data_stride: width * element,
        indices_stride: width.checked_mul(columns.indices_stride)?,
        output_stride: width * element,
    };
    let band_columns = Loop {
        extent: width,
        ..columns
    };
    *loops = batches
        .into_iter()
        .chain([bands, rows_of_indices, band_columns])
        .collect();
    coordinate.data_stride = band.row_bytes;
    Some(band)
}

/// Row-major byte strides of `shape` (zero dims count as one, as in the size check).
fn byte_strides(shape: &[usize], element: u64) -> Option<Vec<u64>> {
    let mut strides = vec![0; shape.len()];
    let mut stride = element;
    for (s, &d) in strides.iter_mut().zip(shape).rev() {
        *s = stride;
        stride = stride.checked_mul((d as u64).max(1))?;
    }
    Some(strides)
}

/// Turns walked dims into loops: drops extent-1 dims, merges contiguous neighbours, and gives
/// each loop its output stride (the bytes its inner loops and the slice write).
fn build_loops(dims: &[(u64, u64, u64)], slice_bytes: u64) -> Option<Vec<Loop>> {
    if dims.iter().any(|d| d.0 == 0) {
        // Nothing is gathered and no index is read (the indices are empty too, or the walk
        // above already dropped the dims that made only the output empty).
        return Some(vec![Loop {
            extent: 0,
            data_stride: 0,
            indices_stride: 0,
            output_stride: 0,
        }]);
    }
    let mut merged: Vec<(u64, u64, u64)> = Vec::new();
    for &(extent, data, indices) in dims.iter().filter(|d| d.0 != 1) {
        if let Some(last) = merged.last_mut() {
            // Merge `last` (outer) with this (inner) when walking both is one linear walk.
            if last.1 == data.checked_mul(extent)? && last.2 == indices.checked_mul(extent)? {
                *last = (last.0.checked_mul(extent)?, data, indices);
                continue;
            }
        }
        merged.push((extent, data, indices));
    }
    if merged.is_empty() {
        merged.push((1, 0, 0));
    }
    let mut loops = Vec::with_capacity(merged.len());
    let mut output_stride = slice_bytes;
    for &(extent, data_stride, indices_stride) in merged.iter().rev() {
        loops.push(Loop {
            extent,
            data_stride,
            indices_stride,
            output_stride,
        });
        output_stride = output_stride.checked_mul(extent)?;
    }
    loops.reverse();
    Some(loops)
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "plan: {} lookup(s), index type {}, {}",
            self.lookups(),
            self.index_type,
            self.policy
        )?;
        for (depth, l) in self.loops.iter().enumerate() {
            writeln!(
                f,
                "{:indent$}loop {depth}: extent {}, strides (bytes) data {}, indices {}, output {}",
                "",
                l.extent,
                l.data_stride,
                l.indices_stride,
                l.output_stride,
                indent = 2 * depth + 2
            )?;
        }
        let indent = 2 * self.loops.len() + 2;
        for (j, c) in self.lookup.coordinates.iter().enumerate() {
            writeln!(
                f,
                "{:indent$}index {j}: at +{} bytes, dim size {}, data stride {} bytes",
                "", c.index_offset, c.dim_size, c.data_stride
            )?;
        }
        if let Some(band) = self.band {
            writeln!(
                f,
                "  each iteration of loop {} first copies {} rows of {} bytes ({} bytes apart) \
                 to scratch, which the loops inside read as data",
                self.loops.len() - 3,
                band.rows,
                band.row_bytes,
                band.row_stride
            )?;
        }
        let how = if self.lookup.streaming {
            " (streaming stores)"
        } else {
            ""
        };
        write!(
            f,
            "{:indent$}copy {} bytes{how}",
            "", self.lookup.slice_bytes
        )
    }
}

#[cfg(test)]
mod tests;
