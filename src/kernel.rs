//! [`Kernel`]: a compiled gather, its raw-pointer entry point and the safe APIs over it.

use std::borrow::Cow;
use std::cell::RefCell;
use std::ops::Range;
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::{Duration, Instant};

use ndarray::{ArrayD, ArrayView, Dimension, IxDyn};

use crate::codegen::{self, CodeShare, JitCode};
use crate::error::{Error, Result};
use crate::ir::{DType, IndexType, OutOfRange, Signature, Validated, unravel};
use crate::pool;
use crate::specialize::{Band, Loop, Plan, Tuning};

/// Outputs of at least this many bytes are split across threads when the thread count is left
/// to the kernel. Measured with spinning workers (`gather-jit bench --threads 1|2`, GatherElements
/// rows of 1024 f32): 2 threads gave 1.1-1.4x at 64 KiB, 1.8x at 128 KiB, 1.8-2x above.
pub const PARALLEL_MIN_BYTES: u64 = 128 << 10;

thread_local! {
    /// Each thread's scratch buffer for banded kernels: it only grows, up to the largest band a
    /// kernel run on this thread has used (1 MiB at most under the default `Tuning`).
    static BAND_SCRATCH: RefCell<Vec<u128>> = const { RefCell::new(Vec::new()) };
}

/// The loops of a banded plan that its Rust driver walks, outermost first (the compiled code
/// walks the rest: the rows of a band and its columns).
#[derive(Clone, Copy)]
struct BandLoops {
    batches: Option<Loop>,
    bands: Loop,
    rows: Loop,
}

/// How many rows ahead [`pack_band`] prefetches its source. The rows of a band are usually a
/// page or more apart, where the hardware prefetchers do not follow. Measured on S7 (rows 4
/// KiB apart) on a Zen 3 host, against no prefetch: 0.908, 1.005, 0.960 and 0.971 (13, 7, 14
/// and 9 of 16 alternating pairs faster), 0.970 with the table in the L1 (11 of 12); 16 rows
/// ahead was slower than 8 (1.052), 4 not clearly better (docs/performance.md).
const PACK_PREFETCH_ROWS_AHEAD: usize = 8;

/// Copies `band.rows` rows of `band.row_bytes` bytes, `band.row_stride` bytes apart from
/// `source` on, into `scratch`, packed (`row_bytes` apart), and returns where they start.
/// The source rows [`PACK_PREFETCH_ROWS_AHEAD`] ahead are prefetched (past the last row
/// too: a prefetch never faults).
///
/// # Safety
/// `source + r * row_stride .. + row_bytes` is readable for every `r < rows`, and `rows *
/// row_bytes` fits in `isize` (both hold for a plan's band, whose rows lie inside data).
unsafe fn pack_band(source: *const u8, band: Band, scratch: &mut Vec<u128>) -> *const u8 {
    let (rows, row_stride, row_bytes) = (
        band.rows as usize,
        band.row_stride as usize,
        band.row_bytes as usize,
    );
    let words = (rows * row_bytes).div_ceil(16);
    if scratch.len() < words {
        scratch.resize(words, 0);
    }
    let dest = scratch.as_mut_ptr().cast::<u8>();
    for row in 0..rows {
        let ahead = (row + PACK_PREFETCH_ROWS_AHEAD).wrapping_mul(row_stride);
        let ahead = source.wrapping_add(ahead);
        // SAFETY: the caller guarantees the source row; the destination row lies within the
        // `rows * row_bytes` bytes just ensured; `scratch` is ours, so they do not overlap;
        // `ahead` is only prefetched.
        unsafe {
            codegen::copy_prefetching(
                dest.add(row * row_bytes),
                source.add(row * row_stride),
                row_bytes,
                ahead,
            )
        };
    }
    dest
}

/// A Rust type that can be the element type of `data` (the gathered values).
///
/// # Safety
/// [`Kernel::run`] hands `Self`'s memory to machine code that reads and writes it as
/// `Self::DTYPE`, and returns the bytes it wrote as values of `Self`. An implementation
/// promises that:
/// - `size_of::<Self>() == Self::DTYPE.size()`, and `Self` has no padding (kernels read
///   every byte);
/// - all zero bytes are a valid `Self` (kernels zero-fill the slices of rejected indices
///   under [`OutOfRange::Zero`]), and so is a byte-wise copy of a valid `Self` (every
///   other output element is one, of an element of data).
///
/// The crate implements it for the primitive types of every [`DType`]. A type of your own
/// needs `unsafe impl`, so a safe crate cannot make a 1-byte type claim `F64`:
/// ```compile_fail,E0200
/// #[derive(Clone, Copy, Default)]
/// struct Tiny(u8);
/// impl gather_jit::Element for Tiny {
///     const DTYPE: gather_jit::DType = gather_jit::DType::F64;
/// }
/// ```
/// With `unsafe impl` (and the promises above kept), it compiles:
/// ```
/// #[derive(Clone, Copy, Default)]
/// #[repr(transparent)]
/// struct Meters(f64);
/// // SAFETY: `Meters` is an `f64`: 8 bytes, no padding, all zeros is 0.0.
/// unsafe impl gather_jit::Element for Meters {
///     const DTYPE: gather_jit::DType = gather_jit::DType::F64;
/// }
/// ```
pub unsafe trait Element: Copy + Default + 'static {
    /// The IR element type of `Self`.
    const DTYPE: DType;
}

/// A Rust integer type that can be the element type of `indices`.
///
/// # Safety
/// Kernels read `Self`'s memory as `Self::INDEX_TYPE`: an implementation promises that
/// `size_of::<Self>() == Self::INDEX_TYPE.size()` and that `Self` has no padding (every
/// byte is initialised).
///
/// The crate implements it for the primitive integers of every [`IndexType`]. A type of
/// your own needs `unsafe impl`, so a safe crate cannot make a 1-byte type claim `U64`:
/// ```compile_fail,E0200
/// #[derive(Clone, Copy)]
/// struct Narrow(u8);
/// impl gather_jit::IndexElement for Narrow {
///     const INDEX_TYPE: gather_jit::IndexType = gather_jit::IndexType::U64;
/// }
/// ```
pub unsafe trait IndexElement: Copy + 'static {
    /// The IR index type of `Self`.
    const INDEX_TYPE: IndexType;
}

macro_rules! elements {
    ($($t:ty => $d:ident),* $(,)?) => {
        // SAFETY: each is a primitive of exactly its dtype's size, without padding, for which
        // all zero bytes are a valid value (`false` for `bool`, 0 or +0.0 for the rest).
        $(unsafe impl Element for $t { const DTYPE: DType = DType::$d; })*
    };
}
elements!(
    f32 => F32, f64 => F64, i8 => I8, u8 => U8, i16 => I16, u16 => U16, i32 => I32,
    u32 => U32, i64 => I64, u64 => U64, bool => Bool, half::f16 => F16, half::bf16 => Bf16,
);

macro_rules! index_elements {
    ($($t:ty => $d:ident),* $(,)?) => {
        // SAFETY: each is a primitive integer of exactly its index type's size, no padding.
        $(unsafe impl IndexElement for $t { const INDEX_TYPE: IndexType = IndexType::$d; })*
    };
}
index_elements!(i8 => I8, u8 => U8, i16 => I16, u16 => U16, i32 => I32, u32 => U32, i64 => I64, u64 => U64);

/// A gather compiled for one [`Signature`]: native code plus what is needed to call it.
///
/// Kernels are `Send + Sync` and can be called from many threads at once; the code is freed
/// when the last kernel holding it (see [`Kernel::compile_shared`]) is dropped.
pub struct Kernel {
    validated: Validated,
    plan: Plan,
    /// Shared with other kernels whose plans differ only where the code does not look (see
    /// [`Kernel::compile_shared`]).
    code: Arc<JitCode>,
    /// Whether `code` was compiled for another kernel.
    reuses_code: bool,
    compile_time: Duration,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("signature", self.signature())
            .field("code_bytes", &self.code.code_bytes())
            .finish_non_exhaustive()
    }
}

impl Kernel {
    /// Validates, specialises and compiles `signature`, without any cache: the machine code
    /// is always freshly compiled (see [`Kernel::compile_shared`] for reuse).
    ///
    /// # Errors
    /// Any validation error of [`Signature::validate`]; [`Error::Codegen`] if Cranelift rejects
    /// the generated code (a bug).
    pub fn compile(signature: &Signature) -> Result<Kernel> {
        Kernel::compile_tuned(signature, Tuning::default())
    }

    /// As [`Kernel::compile`], with the specialisation choices `tuning` instead of the
    /// defaults (results are the same; speed and [`Kernel::outer_extent`] may differ).
    ///
    /// # Errors
    /// As [`Kernel::compile`].
    pub fn compile_tuned(signature: &Signature, tuning: Tuning) -> Result<Kernel> {
        let started = Instant::now();
        Kernel::build(signature.validate()?, tuning, started, None)
    }

    /// As [`Kernel::compile`], but reusing the machine code of a live kernel made by this
    /// function whose loop nest differs at most in the outermost loop's length (each
    /// [`crate::KernelCache`] does the same among its own kernels). Signatures that differ
    /// only in an outer dim, such as a dynamic batch or sequence length, then cost a
    /// validation and a plan instead of a Cranelift compile. The kernel behaves exactly as a
    /// freshly compiled one; [`Kernel::reuses_code`] says which it got.
    ///
    /// # Errors
    /// As [`Kernel::compile`].
    pub fn compile_shared(signature: &Signature) -> Result<Kernel> {
        static SHARE: LazyLock<CodeShare> = LazyLock::new(CodeShare::default);
        let started = Instant::now();
        Kernel::build(
            signature.validate()?,
            Tuning::default(),
            started,
            Some(&SHARE),
        )
    }

    /// Specialises and compiles an already validated signature, with fresh code or with code
    /// from `share`; `started` is when the request began (its time is reported by
    /// [`Kernel::compile_time`]).
    pub(crate) fn build(
        validated: Validated,
        tuning: Tuning,
        started: Instant,
        share: Option<&CodeShare>,
    ) -> Result<Kernel> {
        let plan = Plan::with_tuning(&validated, tuning)?;
        let (code, reuses_code) = match share {
            Some(share) => share.code_for(&plan)?,
            None => (Arc::new(JitCode::compile(&plan)?), false),
        };
        Ok(Kernel {
            validated,
            plan,
            code,
            reuses_code,
            compile_time: started.elapsed(),
        })
    }

    /// The signature this kernel was compiled for.
    pub fn signature(&self) -> &Signature {
        self.validated.signature()
    }

    /// The validated signature (normalised attributes, output shape).
    pub fn validated(&self) -> &Validated {
        &self.validated
    }

    /// The inferred output shape.
    pub fn output_shape(&self) -> &[usize] {
        self.validated.output_shape()
    }

    /// The loop plan the code was generated from.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The CLIF text of this kernel (before Cranelift's optimisations).
    ///
    /// # Errors
    /// [`Error::Codegen`] if the host ISA is unavailable.
    pub fn clif(&self) -> Result<String> {
        codegen::clif_text(&self.plan)
    }

    /// Size of the machine code in bytes.
    pub fn code_bytes(&self) -> usize {
        self.code.code_bytes()
    }

    /// The kernel's machine code (`code_bytes` bytes from its entry point), e.g. to
    /// disassemble it (`gather-jit explain` does).
    pub fn machine_code(&self) -> &[u8] {
        self.code.machine_code()
    }

    /// Whether this kernel runs machine code compiled for another kernel (see
    /// [`Kernel::compile_shared`]).
    pub fn reuses_code(&self) -> bool {
        self.reuses_code
    }

    /// How long validation, specialisation and compilation (or finding shared code) took.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// Number of iterations of the outermost loop: the range [`Kernel::call_range`] splits.
    pub fn outer_extent(&self) -> u64 {
        self.plan.loops[0].extent
    }

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
    /// - Pointers to zero-length buffers may be dangling but must not be null.
    ///
    /// # Errors
    /// Under `OutOfRange::Error` (and for an index into an empty dimension under `Clamp`):
    /// [`Error::IndexOutOfRange`] naming the first rejected index of the range in row-major
    /// order of the indices. The output slices before it have been written; the rest of the
    /// range's output is unchanged. A banded plan ([`Plan::band`]) differs: its ranges are
    /// ranges of column bands (or of batches, each walked band by band), so after an error
    /// any part of the range's output may have been written, and the error names the gather's
    /// first rejected index in row-major order up to the one the range met, which may lie in
    /// another range. Either way, running ranges in order and stopping at the first failing
    /// one reports the gather's first bad index. An invalid `range` gives
    /// [`Error::BufferMismatch`] and touches nothing.
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
    fn cells_per_iteration(&self) -> u64 {
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
    fn band_loops(&self) -> Option<BandLoops> {
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
    unsafe fn call_cells(
        &self,
        data: *const u8,
        indices: *const u8,
        output: *mut u8,
        cells: Range<u64>,
    ) -> Result<()> {
        let result = match self.plan.band {
            // SAFETY: forwarded contract.
            Some(band) => unsafe { self.call_bands(band, data, indices, output, cells) },
            // SAFETY: forwarded contract; cells are outer iterations here.
            None => unsafe {
                self.code
                    .call(data, indices, output, cells.start, cells.end)
            },
        };
        // SAFETY: forwarded contract (the whole indices buffer is readable).
        result.map_err(|position| unsafe { self.rejected(indices, position) })
    }

    /// The error for the rejected index that the code (or `call_bands`) reported at element
    /// `position`. Out of line: a tiny kernel's call then keeps only the branch to it.
    ///
    /// # Safety
    /// `indices` points to the whole indices buffer, readable.
    #[cold]
    #[inline(never)]
    unsafe fn rejected(&self, indices: *const u8, position: u64) -> Error {
        let index_type = self.signature().index_type;
        // SAFETY: the caller's contract makes the whole indices buffer readable.
        let all = unsafe { std::slice::from_raw_parts(indices, self.plan.indices_bytes as usize) };
        let position = match self.plan.band {
            // Bands visit indices column band by column band: find the gather's first
            // rejected index in row-major order, which is at or before `position`.
            Some(_) => self.first_rejected_before(all, position as usize),
            // The code reports the rejected tuple; its first bad coordinate is the error.
            None => self.first_rejected_in_tuple(all, position as usize),
        };
        self.index_error(position, index_type.read(all, position))
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
    ) -> std::result::Result<(), u64> {
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
            let mut cell = cells.start;
            while cell < cells.end {
                let (band_index, first_row) = (cell / rows.extent, cell % rows.extent);
                let (batch, b) = (band_index / bands.extent, band_index % bands.extent);
                let end_row = rows.extent.min(first_row + (cells.end - cell));
                let offset = |of: fn(&Loop) -> u64| batch * of(&batches) + b * of(&bands);
                let indices_offset = offset(|l| l.indices_stride);
                // SAFETY (all three offsets): band `b < bands.extent` of batch `batch <
                // batches.extent` starts this far into each buffer (the plan's strides, which
                // walk within the buffers).
                let (source, indices, output) = unsafe {
                    (
                        data.add(offset(|l| l.data_stride) as usize),
                        indices.add(indices_offset as usize),
                        output.add(offset(|l| l.output_stride) as usize),
                    )
                };
                // SAFETY: the band's rows lie inside data (see `specialize::band`).
                let packed = unsafe { pack_band(source, band, scratch) };
                // SAFETY: `packed` holds the band as the compiled inner loops read it (`rows`
                // rows of `row_bytes`), the indices and output pointers start at this band,
                // and `first_row..end_row` lies within the rows loop, so the code walks only
                // this band's part of each buffer.
                unsafe { self.code.call(packed, indices, output, first_row, end_row) }
                    .map_err(|position| position + indices_offset / index_size)?;
                cell += end_row - first_row;
            }
            Ok(())
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

    /// The first index in row-major order of the whole gather that a banded kernel rejects,
    /// given that the one at `found` is rejected (a range of bands meets its bad indices
    /// column band by column band, and an earlier one may lie in another range).
    fn first_rejected_before(&self, indices: &[u8], found: usize) -> usize {
        let dim = self.plan.lookup.coordinates[0].dim_size;
        (0..found)
            .find(|&position| self.rejects(indices, position, dim))
            .unwrap_or(found)
    }

    /// The position of the first coordinate the policy rejects in the tuple that starts at
    /// element `tuple` of the indices, which the code reported.
    fn first_rejected_in_tuple(&self, indices: &[u8], tuple: usize) -> usize {
        let size = self.signature().index_type.size();
        let first = (self.plan.lookup.coordinates.iter())
            .map(|c| (tuple + c.index_offset as usize / size, c.dim_size))
            .find(|&(position, dim)| self.rejects(indices, position, dim))
            .map(|(position, _)| position);
        debug_assert!(
            first.is_some(),
            "the code rejected a tuple the policy accepts"
        );
        first.unwrap_or(tuple)
    }

    /// Whether the policy rejects the index at element `position` of the indices, into a dim
    /// of `dim` (an error, not a zero-filled slice).
    fn rejects(&self, indices: &[u8], position: usize, dim: u64) -> bool {
        let sig = self.signature();
        let raw = sig.index_type.read(indices, position);
        sig.policy.resolve(raw, dim as usize).is_none()
            && sig.policy.out_of_range != OutOfRange::Zero
    }

    /// The error for the index at element `position` of the indices, whose value is `value`.
    fn index_error(&self, position: usize, value: i128) -> Error {
        let sig = self.signature();
        let position = unravel(position, &sig.indices_shape);
        let data_dim = self.validated.indexed_data_dim(&position);
        Error::IndexOutOfRange {
            op: sig.op.name(),
            position,
            value,
            data_dim,
            dim_size: sig.data_shape[data_dim],
        }
    }

    /// Runs the whole gather split into `threads` ranges of the outer loop, run by the calling
    /// thread and the crate's worker threads (one per further core; idle workers spin for a
    /// while before sleeping, see [`crate::set_worker_spin`]). `threads == 0` chooses: one range per core when the
    /// output is at least [`PARALLEL_MIN_BYTES`], else one. More ranges than cores are
    /// shared out among them. While another thread's parallel call runs, the ranges run on
    /// the calling thread alone. The bytes written equal one [`Kernel::call`]'s.
    ///
    /// A runtime with its own thread pool can instead split the range itself with
    /// [`Kernel::call_range`].
    ///
    /// # Safety
    /// As [`Kernel::call`]; additionally no other thread touches `output` during the call.
    ///
    /// # Errors
    /// As [`Kernel::call`]: the first rejected index in row-major order of the indices (every
    /// range stops at its own first bad index, and the first of their errors is reported).
    /// After an error, any part of the output may have been written.
    pub unsafe fn call_parallel(
        &self,
        data: *const u8,
        indices: *const u8,
        output: *mut u8,
        threads: usize,
    ) -> Result<()> {
        // One thread asked for (or chosen): no split to work out.
        let (threads, units, granule) = match self.threads_for(threads) {
            0 | 1 => (1, 0, 0),
            _ => self.parallel_split(threads),
        };
        if threads <= 1 {
            // SAFETY: forwarded contract.
            return unsafe { self.call(data, indices, output) };
        }
        // Addresses cross threads as integers; each part writes a disjoint part of `output`.
        let (data, indices, output) = (data as usize, indices as usize, output as usize);
        let results: Vec<OnceLock<Result<()>>> = (0..threads).map(|_| OnceLock::new()).collect();
        // In u128: `units * parts` may exceed u64 (both come from the caller); each bound is
        // at most `units`, so it fits u64 again.
        let bound = |t: usize| (u128::from(units) * t as u128 / threads as u128) as u64 * granule;
        pool::run(threads, &|part| {
            let cells = bound(part)..bound(part + 1);
            // SAFETY: forwarded contract; the parts partition all cells, so concurrent calls
            // write disjoint output bytes and only read the inputs, and `pool::run` returns
            // only after every part has finished.
            let result = unsafe {
                self.call_cells(
                    data as *const u8,
                    indices as *const u8,
                    output as *mut u8,
                    cells,
                )
            };
            let _ = results[part].set(result);
        });
        // The first bad index in row-major order: the earliest range's, except in a banded
        // plan, whose ranges are column bands.
        let errors = results
            .into_iter()
            .filter_map(|slot| slot.into_inner().and_then(Result::err));
        let position = |error: &Error| match error {
            Error::IndexOutOfRange { position, .. } => Some(position.clone()),
            _ => None,
        };
        match errors.min_by_key(position) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// How many parts (threads) `call_parallel(.., threads)` splits the gather into: `threads`
    /// (or one per core for 0, see there), at most one per unit of work (an iteration of the
    /// outer loop; a row of a band for a banded plan), at least one.
    pub fn parallel_parts(&self, threads: usize) -> usize {
        self.parallel_split(threads).0
    }

    /// `(parts, units, cells per unit)` of `call_parallel(.., threads)`: whole bands are split
    /// first; only with more threads than bands are the rows of a band split too (each part
    /// then packs the bands it meets).
    fn parallel_split(&self, threads: usize) -> (usize, u64, u64) {
        let cells = self.outer_extent() * self.cells_per_iteration();
        let band_cells = self.band_loops().map_or(1, |loops| loops.rows.extent);
        let threads = self.threads_for(threads);
        let granule = if threads as u64 <= cells / band_cells {
            band_cells
        } else {
            1
        };
        let units = cells / granule;
        (threads.min(units.max(1) as usize), units, granule)
    }

    /// The number of threads `call_parallel(.., threads)` uses before capping by the work.
    fn threads_for(&self, threads: usize) -> usize {
        match threads {
            0 if self.plan.output_bytes >= PARALLEL_MIN_BYTES => pool::threads(),
            0 => 1,
            n => n,
        }
    }

    /// Runs the gather on byte slices with `threads` threads (0 chooses; see
    /// [`Kernel::call_parallel`]), checking their lengths first.
    ///
    /// # Errors
    /// As [`Kernel::run_bytes`].
    pub fn run_bytes_parallel(
        &self,
        data: &[u8],
        indices: &[u8],
        output: &mut [u8],
        threads: usize,
    ) -> Result<()> {
        self.check_buffers(data, indices, output)?;
        // SAFETY: the lengths match the signature (checked above); slices are valid for their
        // length, non-null, and `output` is a unique borrow, so no one else touches it.
        unsafe {
            self.call_parallel(
                data.as_ptr(),
                indices.as_ptr(),
                output.as_mut_ptr(),
                threads,
            )
        }
    }

    fn check_buffers(&self, data: &[u8], indices: &[u8], output: &[u8]) -> Result<()> {
        let plan = &self.plan;
        check_len("data", data.len(), plan.data_bytes)?;
        check_len("indices", indices.len(), plan.indices_bytes)?;
        check_len("output", output.len(), plan.output_bytes)
    }

    /// Runs the gather on byte slices, checking their lengths first.
    ///
    /// # Errors
    /// [`Error::BufferMismatch`] if a slice's length does not match the signature; otherwise
    /// as [`Kernel::call`].
    pub fn run_bytes(&self, data: &[u8], indices: &[u8], output: &mut [u8]) -> Result<()> {
        self.run_bytes_parallel(data, indices, output, 1)
    }

    /// Runs the gather on ndarray views of any layout and returns a new array.
    ///
    /// C-contiguous views are read in place; others (strided, reversed, broadcast) are
    /// copied into standard layout first. Large outputs are split across the cores (see
    /// [`Kernel::call_parallel`]).
    ///
    /// # Errors
    /// [`Error::DTypeMismatch`] / [`Error::IndexTypeMismatch`] if `T` or `I` is not the
    /// signature's type, [`Error::BufferMismatch`] if a shape differs from the signature's,
    /// [`Error::Allocation`] if the output or a copy of a non-contiguous view cannot be
    /// allocated (a broadcast view can stand for far more elements than memory holds), and
    /// the index errors of
    /// [`Kernel::call`].
    pub fn run<T: Element, I: IndexElement, D1: Dimension, D2: Dimension>(
        &self,
        data: ArrayView<'_, T, D1>,
        indices: ArrayView<'_, I, D2>,
    ) -> Result<ArrayD<T>> {
        let sig = self.signature();
        if T::DTYPE != sig.dtype {
            return Err(Error::DTypeMismatch {
                what: "data",
                expected: sig.dtype,
                actual: T::DTYPE,
            });
        }
        if I::INDEX_TYPE != sig.index_type {
            return Err(Error::IndexTypeMismatch {
                expected: sig.index_type,
                actual: I::INDEX_TYPE,
            });
        }
        check_shape("data", data.shape(), &sig.data_shape)?;
        check_shape("indices", indices.shape(), &sig.indices_shape)?;
        // Both hold for the crate's own impls; an `unsafe impl` that breaks its promise is
        // caught here rather than by reading past a buffer.
        if size_of::<T>() != sig.dtype.size() || size_of::<I>() != sig.index_type.size() {
            return Err(Error::BufferMismatch {
                what: "element type",
                expected: format!("{} and {} bytes", sig.dtype.size(), sig.index_type.size()),
                actual: format!("{} and {} bytes", size_of::<T>(), size_of::<I>()),
            });
        }
        let data = contiguous("a contiguous copy of data", &data)?;
        let indices = contiguous("a contiguous copy of indices", &indices)?;
        let len = self.validated.output_len();
        let mut output: Vec<T> = Vec::new();
        output
            .try_reserve_exact(len)
            .map_err(|_| Error::Allocation {
                what: "the output",
                bytes: self.plan.output_bytes as usize,
            })?;
        // The output is not filled first: a successful call writes every byte of it (each
        // output slice belongs to exactly one lookup, copied or zero-filled), so a fill would
        // only write the whole output twice.
        // SAFETY: `data` and `indices` are contiguous with the signature's shapes, and their
        // element sizes are the signature's (checked above); `output` has capacity for
        // `output_len` elements of that size, and is a fresh allocation, so it overlaps
        // neither input. After `Ok`, all `len` elements are initialised with byte copies of
        // elements of `data` or zero bytes, both valid `T`s by `Element`'s contract, so
        // `set_len` is sound.
        unsafe {
            self.call_parallel(
                data.as_ptr().cast(),
                indices.as_ptr().cast(),
                output.as_mut_ptr().cast(),
                0,
            )?;
            output.set_len(len);
        }
        ArrayD::from_shape_vec(IxDyn(self.output_shape()), output).map_err(|e| {
            Error::BufferMismatch {
                what: "output",
                expected: format!("{:?}", self.output_shape()),
                actual: e.to_string(),
            }
        })
    }
}

/// `view`'s elements in row-major order: the view's own memory if it is C-contiguous, else a
/// copy in a fallibly allocated buffer (`what` names it in the error).
fn contiguous<'a, T: Copy, D: Dimension>(
    what: &'static str,
    view: &ArrayView<'a, T, D>,
) -> Result<Cow<'a, [T]>> {
    if let Some(slice) = view.to_slice() {
        return Ok(Cow::Borrowed(slice));
    }
    let mut copy = Vec::new();
    copy.try_reserve_exact(view.len())
        .map_err(|_| Error::Allocation {
            what,
            // The shape was checked against a validated signature: its byte size fits.
            bytes: view.len() * size_of::<T>(),
        })?;
    copy.extend(view.iter().copied());
    Ok(Cow::Owned(copy))
}

fn check_len(what: &'static str, actual: usize, expected: u64) -> Result<()> {
    if actual as u64 != expected {
        return Err(Error::BufferMismatch {
            what,
            expected: format!("{expected} bytes"),
            actual: format!("{actual} bytes"),
        });
    }
    Ok(())
}

fn check_shape(what: &'static str, actual: &[usize], expected: &[usize]) -> Result<()> {
    if actual != expected {
        return Err(Error::BufferMismatch {
            what,
            expected: format!("shape {expected:?}"),
            actual: format!("shape {actual:?}"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_band_packs_rows_and_reuses_its_buffer() {
        let source: Vec<u8> = (0..4096).map(|i| (i % 253) as u8).collect();
        let mut scratch = Vec::new();
        for (rows, row_stride, row_bytes) in [(0, 64, 16), (3, 100, 7), (16, 256, 64), (1, 0, 4096)]
        {
            let band = Band {
                rows,
                row_stride,
                row_bytes,
            };
            // SAFETY: every row `r * row_stride .. + row_bytes` lies within `source`.
            let packed = unsafe { pack_band(source.as_ptr(), band, &mut scratch) };
            let (rows, row_stride, row_bytes) =
                (rows as usize, row_stride as usize, row_bytes as usize);
            // SAFETY: `pack_band` wrote `rows * row_bytes` bytes at `packed`, inside `scratch`.
            let packed = unsafe { std::slice::from_raw_parts(packed, rows * row_bytes) };
            let expected: Vec<u8> = (0..rows)
                .flat_map(|r| &source[r * row_stride..r * row_stride + row_bytes])
                .copied()
                .collect();
            assert_eq!(
                packed, expected,
                "{rows} rows of {row_bytes}, {row_stride} apart"
            );
        }
        assert_eq!(scratch.len(), 4096 / 16, "grown to the largest band only");
    }

    #[test]
    fn batched_bands_split_across_threads_and_ranges() {
        use crate::interp::interpret;
        use crate::ir::Signature;
        // 3 batches of a [9, 64] f32 table along axis 1, 2 bands each: 1..16 threads split
        // batches, bands and rows; the bad index lies in the last batch only.
        let signature = Signature::gather_elements(&[3, 9, 64], &[3, 9, 64], 1);
        let kernel =
            Kernel::compile_tuned(&signature, Tuning::bands_always(9 * 128)).expect("compiles");
        assert_eq!(
            kernel.plan().loops.len(),
            4,
            "batches, bands, rows, columns"
        );
        assert_eq!(kernel.outer_extent(), 3, "three batches");
        assert_eq!(
            kernel.parallel_parts(4),
            4,
            "bands are split, not only batches"
        );
        assert_eq!(
            kernel.parallel_parts(100),
            3 * 9 * 2,
            "at most a part per band row"
        );
        let len = 3 * 9 * 64;
        let data: Vec<u8> = (0..len * 4).map(|i| (i * 7 % 251) as u8).collect();
        let mut raw: Vec<i64> = (0..len).map(|i| (i * 5 % 9) as i64).collect();
        let validated = signature.validate().expect("valid");
        for bad in [None, Some((2 * 9 * 64 + 4 * 64 + 40, 9))] {
            if let Some((at, value)) = bad {
                raw[at] = value;
            }
            let indices: Vec<u8> = raw.iter().flat_map(|v| v.to_ne_bytes()).collect();
            let expected = interpret(&validated, &data, &indices);
            for threads in 1..=16 {
                let mut output = vec![0xEEu8; len * 4];
                let actual = kernel
                    .run_bytes_parallel(&data, &indices, &mut output, threads)
                    .map(|()| output);
                assert_eq!(actual, expected, "{threads} threads, bad index {bad:?}");
            }
            // One range per batch, in order: the first two always succeed.
            let mut output = vec![0xEEu8; len * 4];
            for batch in 0..3 {
                // SAFETY: the buffers hold the signature's sizes and do not overlap; the
                // range lies within the outer loop.
                let result = unsafe {
                    kernel.call_range(
                        data.as_ptr(),
                        indices.as_ptr(),
                        output.as_mut_ptr(),
                        batch..batch + 1,
                    )
                };
                let expected_result = match (&expected, batch) {
                    (Err(e), 2) => Err(e.to_string()),
                    _ => Ok(()),
                };
                assert_eq!(
                    result.map_err(|e| e.to_string()),
                    expected_result,
                    "batch {batch}"
                );
            }
        }
    }

    #[test]
    fn more_threads_than_bands_split_the_rows_of_bands() {
        use crate::interp::interpret;
        use crate::ir::Signature;
        // 2 bands of 32 f32 columns, 9 rows: 16 threads give parts of one or two rows, most
        // of them starting and ending inside a band.
        let signature = Signature::gather_elements(&[9, 64], &[9, 64], 0);
        let kernel =
            Kernel::compile_tuned(&signature, Tuning::bands_always(9 * 128)).expect("compiles");
        assert_eq!(kernel.outer_extent(), 2, "two bands");
        let data: Vec<u8> = (0..9 * 64 * 4).map(|i| (i * 7 % 251) as u8).collect();
        let mut raw: Vec<i64> = (0..9 * 64).map(|i| (i * 5 % 9) as i64).collect();
        let validated = signature.validate().expect("valid");
        for bad in [None, Some((7 * 64 + 40, 9)), Some((2 * 64 + 3, -10))] {
            if let Some((at, value)) = bad {
                raw[at] = value;
            }
            let indices: Vec<u8> = raw.iter().flat_map(|v| v.to_ne_bytes()).collect();
            let expected = interpret(&validated, &data, &indices);
            for threads in [1, 2, 3, 5, 16] {
                let mut output = vec![0xEEu8; 9 * 64 * 4];
                let actual = kernel
                    .run_bytes_parallel(&data, &indices, &mut output, threads)
                    .map(|()| output);
                assert_eq!(actual, expected, "{threads} threads, bad index {bad:?}");
            }
        }
    }
}
