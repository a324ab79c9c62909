//! [`ScatterKernel`]: a scatter compiled for one [`ScatterSignature`] through the one compile
//! driver, with its raw calls (out of place and in place, sequential and parallel) and its
//! checked calls on byte slices and ndarray views.
//!
//! A call checks every index before it writes anything (the kernel's first pass), then, for
//! the flavor that forbids them, looks for duplicate indices, then allocates `mean`'s counts;
//! only then does it write. An in-place call that fails therefore leaves data as it was.
//! A parallel call splits data's elements into ranges on slice boundaries: each part runs
//! every update but writes only its range's elements, so each element sees its updates in
//! index order, and the result is the sequential call's bit for bit.
#![allow(
    unsafe_code,
    reason = "calls a scatter kernel's JIT code on raw buffers and names its C ABI"
)]

use std::time::{Duration, Instant};

use cranelift_codegen::ir::{Signature, Type};
use cranelift_codegen::isa::CallConv;

mod checked;

use super::parallel::PARALLEL_MIN_BYTES;
use crate::codegen::driver::{self, Code, EntryPoint};
use crate::error::{Error, Result};
use crate::pool;
use crate::scatter::lower::{
    self, MODE_CHECK, MODE_NO_NEGATIVE, MODE_WRITE, STATUS_BAD_INDEX, STATUS_OK,
};
use crate::scatter::{
    Reduction, ScatterLayout, ScatterSignature, check_no_duplicates, finish_means, index_error,
};

/// The C signature of a scatter kernel (see [`lower::kernel_signature`]):
/// `(indices, updates, output, counts, lo, hi, mode, bad_index) -> status`.
type ScatterFn =
    unsafe extern "C" fn(*const u8, *const u8, *mut u8, *mut u64, u64, u64, u64, *mut u64) -> u32;

// SAFETY: `lower::kernel_signature` is four pointers, three `i64`s and a pointer, returning an
// `i32`: `ScatterFn` (`u64` and `u32` have the ABI of `i64` and `i32`).
unsafe impl EntryPoint for ScatterFn {
    fn signature(call_conv: CallConv, pointer: Type) -> Signature {
        lower::kernel_signature(call_conv, pointer)
    }

    unsafe fn from_address(address: *const u8) -> Self {
        // SAFETY: the caller's contract: `address` is code with `signature`'s ABI.
        unsafe { std::mem::transmute::<*const u8, ScatterFn>(address) }
    }

    fn address(self) -> *const u8 {
        self as *const u8
    }
}

/// The most parts a parallel scatter uses on a machine with fewer cores (see
/// [`ScatterKernel::parallel_parts`]).
pub const MAX_PARTS_BEYOND_CORES: usize = 4;

/// A scatter (ScatterND, ScatterElements, ScatterUpdate) compiled for one
/// [`ScatterSignature`].
///
/// `Send + Sync`: call it from many threads at once. The code is freed with the kernel.
///
/// ```
/// use gather_jit::ScatterKernel;
/// use gather_jit::scatter::{Reduction, ScatterSignature};
/// use ndarray::{array, Array2};
///
/// // A KV-cache write: rows 1 and 3 of a [4, 2] cache, in place.
/// let kernel = ScatterKernel::compile(&ScatterSignature::scatter_nd(&[4, 2], &[2, 1], &[2, 2]))?;
/// let mut cache = Array2::<f32>::zeros((4, 2));
/// kernel.run_in_place(cache.view_mut(), array![[1i64], [3]].view(), array![[1.0f32, 2.0], [3.0, 4.0]].view())?;
/// assert_eq!(cache, array![[0.0, 0.0], [1.0, 2.0], [0.0, 0.0], [3.0, 4.0]]);
///
/// // A scatter-add out of place, duplicates folded in index order.
/// let sig = ScatterSignature::scatter_nd(&[3], &[3, 1], &[3]).with_reduction(Reduction::Sum);
/// let kernel = ScatterKernel::compile(&sig)?;
/// let out = kernel.run(array![1.0f32, 1.0, 1.0].view(), array![[0i64], [2], [0]].view(), array![5.0f32, 6.0, 7.0].view())?;
/// assert_eq!(out.into_raw_vec_and_offset().0, [13.0, 1.0, 7.0]);
///
/// // A bad index is an error naming it; in place, data is left as it was.
/// let mut data = array![1.0f32, 1.0, 1.0];
/// let ids = array![[0i64], [3], [1]];
/// let error = kernel.run_in_place(data.view_mut(), ids.view(), array![5.0f32, 6.0, 7.0].view());
/// assert!(error.unwrap_err().to_string().contains("index 3 at position [1, 0]"));
/// assert_eq!(data, array![1.0, 1.0, 1.0]);
/// # Ok::<(), gather_jit::Error>(())
/// ```
pub struct ScatterKernel {
    layout: ScatterLayout,
    code: Code<ScatterFn>,
    compile_time: Duration,
}

impl std::fmt::Debug for ScatterKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScatterKernel")
            .field("signature", self.signature())
            .field("code_bytes", &self.code_bytes())
            .finish_non_exhaustive()
    }
}

impl ScatterKernel {
    /// Validates and compiles `signature` (no cache: see [`crate::jit_scatter`]).
    ///
    /// # Errors
    /// Any error of [`ScatterSignature::validate`]; [`Error::Codegen`] if Cranelift rejects
    /// the generated code (a bug).
    pub fn compile(signature: &ScatterSignature) -> Result<ScatterKernel> {
        let started = Instant::now();
        ScatterKernel::build(signature.validate()?, started)
    }

    /// Compiles a validated signature; `started` is when the request began.
    pub(crate) fn build(layout: ScatterLayout, started: Instant) -> Result<ScatterKernel> {
        let code = driver::compile::<ScatterFn>("scatter", &[], |func, context, config, _| {
            lower::lower(&layout, func, context, config)
        })?;
        Ok(ScatterKernel {
            layout,
            code,
            compile_time: started.elapsed(),
        })
    }

    /// The signature.
    pub fn signature(&self) -> &ScatterSignature {
        self.layout.signature()
    }

    /// The validated signature (normalised attributes, sizes).
    pub fn layout(&self) -> &ScatterLayout {
        &self.layout
    }

    /// The output's shape: data's.
    pub fn output_shape(&self) -> &[usize] {
        self.layout.output_shape()
    }

    /// What this kernel does, for people: the signature, the resolved op and the two passes
    /// of its code (what `gather-jit explain` prints above the code).
    pub fn explain(&self) -> String {
        format!(
            "signature:     {}\nresolved:      {:?}\noutput shape:  {:?}\n\n{}",
            self.signature(),
            self.layout.op(),
            self.output_shape(),
            lower::write_text(&self.layout)
        )
    }

    /// The CLIF text of this kernel (before Cranelift's optimisations).
    ///
    /// # Errors
    /// [`Error::Codegen`] if the host ISA is unavailable.
    pub fn clif(&self) -> Result<String> {
        let layout = &self.layout;
        driver::clif_text::<ScatterFn>(&[], |func, context, config, _| {
            lower::lower(layout, func, context, config);
        })
    }

    /// Size of the machine code in bytes.
    pub fn code_bytes(&self) -> usize {
        self.code.code_bytes()
    }

    /// The machine code, for disassembly.
    pub fn machine_code(&self) -> &[u8] {
        self.code.machine_code()
    }

    /// How long validation and compilation took.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    pub(super) fn data_bytes(&self) -> usize {
        self.layout.data_len() * self.signature().dtype.size()
    }

    pub(super) fn indices_bytes(&self) -> usize {
        self.layout.indices_len() * self.signature().index_type.size()
    }

    pub(super) fn updates_bytes(&self) -> usize {
        self.layout.updates_len() * self.signature().dtype.size()
    }

    /// Runs the scatter out of place on raw buffers: `output` becomes a copy of `data` with
    /// the updates applied. No check but the indices' (and, under TensorRT's flavor, their
    /// duplicates').
    ///
    /// Buffers are native-endian and C order, none aligned: `data` and `output` of data's
    /// shape and type, `indices` in the signature's index type, `updates` of updates' shape.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for the first bad index in row-major order;
    /// [`Error::DuplicateIndex`] under a flavor that forbids duplicates;
    /// [`Error::Allocation`] if `mean`'s counts cannot be allocated. `output` is then
    /// unwritten.
    ///
    /// # Safety
    /// Each pointer is valid for its buffer's full length (reads; writes for `output`), and
    /// `output` overlaps none of the others.
    pub unsafe fn call(
        &self,
        data: *const u8,
        indices: *const u8,
        updates: *const u8,
        output: *mut u8,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.call_parallel(data, indices, updates, output, 1) }
    }

    /// Runs the scatter in place: `data` becomes the output. On an error `data` is unchanged.
    ///
    /// # Errors
    /// As [`ScatterKernel::call`].
    ///
    /// # Safety
    /// Each pointer is valid for its buffer's full length (`data` for reads and writes), and
    /// `data` overlaps neither of the others.
    pub unsafe fn call_in_place(
        &self,
        data: *mut u8,
        indices: *const u8,
        updates: *const u8,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.call_in_place_parallel(data, indices, updates, 1) }
    }

    /// As [`ScatterKernel::call`], split across `threads` (0 chooses: see
    /// [`ScatterKernel::parallel_parts`]) on the calling thread and the crate's workers. The
    /// result is the sequential call's, bit for bit.
    ///
    /// # Errors
    /// As [`ScatterKernel::call`].
    ///
    /// # Safety
    /// As [`ScatterKernel::call`]; additionally no other thread touches `output` during the
    /// call.
    pub unsafe fn call_parallel(
        &self,
        data: *const u8,
        indices: *const u8,
        updates: *const u8,
        output: *mut u8,
        threads: usize,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.scatter(Some(data), indices, updates, output, threads) }
    }

    /// As [`ScatterKernel::call_in_place`], split across `threads` as
    /// [`ScatterKernel::call_parallel`] splits it.
    ///
    /// # Errors
    /// As [`ScatterKernel::call`]; `data` is then unchanged.
    ///
    /// # Safety
    /// As [`ScatterKernel::call_in_place`]; additionally no other thread touches `data`
    /// during the call.
    pub unsafe fn call_in_place_parallel(
        &self,
        data: *mut u8,
        indices: *const u8,
        updates: *const u8,
        threads: usize,
    ) -> Result<()> {
        // SAFETY: forwarded contract; with no data to copy, `data` is the output.
        unsafe { self.scatter(None, indices, updates, data, threads) }
    }

    /// How many parts a parallel call on `threads` threads (0: the kernel chooses) uses, out
    /// of place or in place: with 0, one per core when the bytes a call moves (updates, plus
    /// data's copy out of place) reach [`PARALLEL_MIN_BYTES`], else one. Never more parts
    /// than slices of data, nor than [`MAX_PARTS_BEYOND_CORES`] or the cores, whichever is
    /// more: every part walks every update, so parts beyond the cores repeat that walk.
    pub fn parallel_parts(&self, threads: usize, in_place: bool) -> usize {
        let moved = self.updates_bytes() + if in_place { 0 } else { self.data_bytes() };
        let threads = match threads {
            0 if moved as u64 >= PARALLEL_MIN_BYTES => pool::threads(),
            0 => 1,
            n => n,
        };
        let most = pool::threads().max(MAX_PARTS_BEYOND_CORES);
        threads.min(most).min(self.slots().max(1))
    }

    /// Data's slices: the places one write can start at.
    fn slots(&self) -> usize {
        match self.layout.slice_len() {
            0 => 1,
            slice => self.layout.data_len() / slice,
        }
    }

    /// Checks every index, then (out of place) copies `data` into `output` and applies the
    /// updates, in `parts` ranges of data's elements.
    ///
    /// # Safety
    /// As [`ScatterKernel::call_parallel`] (with `data` `None`: `output` holds data).
    unsafe fn scatter(
        &self,
        data: Option<*const u8>,
        indices: *const u8,
        updates: *const u8,
        output: *mut u8,
        threads: usize,
    ) -> Result<()> {
        let entry = self.code.entry();
        // A buffer of 0 bytes may come as a null pointer, which a slice cannot have.
        let all_indices: &[u8] = match self.indices_bytes() {
            0 => &[],
            // SAFETY: the caller's contract makes the whole indices buffer readable, and a
            // pointer valid for a read of at least one byte is not null.
            len => unsafe { std::slice::from_raw_parts(indices, len) },
        };
        let mut bad = 0u64;
        // SAFETY: mode `MODE_CHECK` reads indices only, within their length (the caller's
        // contract), and writes nothing but `bad`.
        let status = unsafe {
            entry(
                indices,
                updates,
                output,
                std::ptr::null_mut(),
                0,
                0,
                MODE_CHECK,
                &mut bad,
            )
        };
        if status == STATUS_BAD_INDEX {
            return Err(index_error(&self.layout, all_indices, bad as usize));
        }
        let write_mode = if status == STATUS_OK {
            MODE_WRITE | MODE_NO_NEGATIVE
        } else {
            MODE_WRITE
        };
        check_no_duplicates(&self.layout, all_indices)?;
        let data_len = self.layout.data_len();
        let mean = self.signature().reduction == Reduction::Mean;
        let mut counts: Vec<u64> = Vec::new();
        if mean {
            counts
                .try_reserve_exact(data_len)
                .map_err(|_| Error::Allocation {
                    what: "the mean's update counts",
                    bytes: data_len.saturating_mul(8),
                })?;
            counts.resize(data_len, 0);
        }
        let parts = self.parallel_parts(threads, data.is_none());
        let slice = self.layout.slice_len().max(1);
        let slots = self.slots();
        let bound = |part: usize| (slots as u128 * part as u128 / parts as u128) as usize * slice;
        let element = self.signature().dtype.size();
        // Addresses cross threads as integers; each part writes only its own elements.
        let addresses = [
            data.map_or(0, |d| d as usize),
            indices as usize,
            updates as usize,
            output as usize,
            counts.as_mut_ptr() as usize,
        ];
        let run_part = |part: usize| {
            let [data, indices, updates, output, counts] = addresses;
            let (lo, hi) = (
                bound(part),
                if part + 1 == parts {
                    data_len
                } else {
                    bound(part + 1)
                },
            );
            let output = output as *mut u8;
            if data != 0 {
                // SAFETY: the caller's contract makes `data` and `output` valid for data's
                // bytes and disjoint; `lo..hi` lies within them, and no other part copies it.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        (data as *const u8).add(lo * element),
                        output.add(lo * element),
                        (hi - lo) * element,
                    );
                }
            }
            let mut bad = 0u64;
            // SAFETY: every index is in range (checked above), and `MODE_NO_NEGATIVE` is set
            // only if that check said no index is negative; mode `MODE_WRITE` reads indices
            // and updates within their lengths and writes only output elements (and, under
            // `mean`, counts) in `lo..hi`, which no other part writes.
            unsafe {
                entry(
                    indices as *const u8,
                    updates as *const u8,
                    output,
                    counts as *mut u64,
                    lo as u64,
                    hi as u64,
                    write_mode,
                    &mut bad,
                );
            }
            // An empty part has no means to finish (and its pointers may be null).
            if mean && hi > lo {
                // SAFETY: this part's elements `lo..hi` of output and counts, which the kernel
                // call above has finished writing and no other part touches.
                let (values, counts) = unsafe {
                    (
                        std::slice::from_raw_parts_mut(
                            output.add(lo * element),
                            (hi - lo) * element,
                        ),
                        std::slice::from_raw_parts((counts as *const u64).add(lo), hi - lo),
                    )
                };
                finish_means(&self.layout, values, counts);
            }
        };
        if parts <= 1 {
            run_part(0);
        } else {
            pool::run(parts, &run_part);
        }
        Ok(())
    }
}
