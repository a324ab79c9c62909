//! [`QuantizedKernel`]: a quantized gather compiled for one [`QuantizedSignature`] through
//! the one compile driver, with its raw, range, parallel and checked calls.
#![allow(
    unsafe_code,
    reason = "calls a quantized kernel's JIT code on raw buffers and names its C ABI"
)]

use std::ops::Range;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use cranelift_codegen::ir::{Signature, Type};
use cranelift_codegen::isa::CallConv;
use ndarray::{ArrayD, ArrayView, Dimension};

use super::parallel::PARALLEL_MIN_BYTES;
use super::safe::{check_len, check_shape, contiguous, new_output};
use super::{Element, IndexElement};
use crate::codegen::driver::{self, Code, EntryPoint};
use crate::error::{Error, Result};
#[cfg(doc)]
use crate::ir::OutOfRange;
use crate::ir::unravel;
use crate::pool;
use crate::quant::{QuantizedLayout, QuantizedSignature, lower};

/// The C signature of a quantized kernel (see [`lower::kernel_signature`]):
/// `(data, indices, scales, zero_points, output, start, end, bad_index) -> status`.
type QuantizedFn = unsafe extern "C" fn(
    *const u8,
    *const u8,
    *const u8,
    *const u8,
    *mut u8,
    u64,
    u64,
    *mut u64,
) -> u32;

// SAFETY: `lower::kernel_signature` is five pointers, two `i64`s and a pointer, returning an
// `i32`: `QuantizedFn` (`u64` and `u32` have the ABI of `i64` and `i32`).
unsafe impl EntryPoint for QuantizedFn {
    fn signature(call_conv: CallConv, pointer: Type) -> Signature {
        lower::kernel_signature(call_conv, pointer)
    }

    unsafe fn from_address(address: *const u8) -> Self {
        // SAFETY: the caller's contract: `address` is code with `signature`'s ABI.
        unsafe { std::mem::transmute::<*const u8, QuantizedFn>(address) }
    }

    fn address(self) -> *const u8 {
        self as *const u8
    }
}

/// A quantized gather compiled for one [`QuantizedSignature`].
///
/// `Send + Sync`: call it from many threads at once. The code is freed with the kernel.
pub struct QuantizedKernel {
    layout: QuantizedLayout,
    code: Code<QuantizedFn>,
    compile_time: Duration,
}

impl std::fmt::Debug for QuantizedKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuantizedKernel")
            .field("signature", self.signature())
            .field("code_bytes", &self.code_bytes())
            .finish_non_exhaustive()
    }
}

impl QuantizedKernel {
    /// Validates and compiles `signature` (no cache: see [`crate::jit_quantized`]).
    ///
    /// # Errors
    /// Any error of [`QuantizedSignature::validate`]; [`Error::Codegen`] if Cranelift rejects
    /// the generated code (a bug).
    pub fn compile(signature: &QuantizedSignature) -> Result<QuantizedKernel> {
        let started = Instant::now();
        QuantizedKernel::build(signature.validate()?, started)
    }

    /// Compiles a validated signature; `started` is when the request began (its time is
    /// reported by [`QuantizedKernel::compile_time`]).
    pub(crate) fn build(layout: QuantizedLayout, started: Instant) -> Result<QuantizedKernel> {
        // The kernels call nothing (`f16` output is rounded inline).
        let code =
            driver::compile::<QuantizedFn>("quantized_gather", &[], |func, context, config, _| {
                lower::lower(&layout, func, context, config)
            })?;
        Ok(QuantizedKernel {
            layout,
            code,
            compile_time: started.elapsed(),
        })
    }

    /// Defines the kernel for `layout` in `module` as the local function `name` (quantized
    /// kernels call no helper): the code of an object for any target.
    #[cfg(feature = "aot")]
    pub(crate) fn define_in_object<M: cranelift_module::Module>(
        module: &mut M,
        name: &str,
        layout: &QuantizedLayout,
    ) -> Result<(cranelift_module::FuncId, driver::ObjectCode)> {
        driver::define_in_object::<QuantizedFn, M>(module, name, |func, context, config, _| {
            lower::lower(layout, func, context, config)
        })
    }

    /// What this kernel does, for people: the signature, every buffer's shape and the loop
    /// nest (what `gather-jit explain` prints above the code).
    pub fn explain(&self) -> String {
        let l = &self.layout;
        let zero_points = match l.zero_points_bytes_shape() {
            Some(shape) => format!("{shape:?} bytes"),
            None => "none".into(),
        };
        format!(
            "signature:     {}\noutput shape:  {:?}\ndata:          {:?} bytes\nscales:        {:?}\nzero points:   {zero_points}\n\n{}",
            self.signature(),
            self.output_shape(),
            l.data_bytes_shape(),
            l.scales_shape(),
            lower::loop_text(l),
        )
    }

    /// The CLIF text of this kernel (before Cranelift's optimisations).
    ///
    /// # Errors
    /// [`Error::Codegen`] if the host ISA is unavailable.
    pub fn clif(&self) -> Result<String> {
        let layout = &self.layout;
        driver::clif_text::<QuantizedFn>(&[], |func, context, config, _| {
            lower::lower(layout, func, context, config);
        })
    }

    /// Number of indices: the range [`QuantizedKernel::call_range`] splits.
    pub fn outer_extent(&self) -> u64 {
        self.layout.index_count() as u64
    }

    /// The signature.
    pub fn signature(&self) -> &QuantizedSignature {
        self.layout.signature()
    }

    /// The shapes of every buffer.
    pub fn layout(&self) -> &QuantizedLayout {
        &self.layout
    }

    /// The output's shape.
    pub fn output_shape(&self) -> &[usize] {
        self.layout.output_shape()
    }

    /// Size of the machine code in bytes.
    pub fn code_bytes(&self) -> usize {
        self.code.code_bytes()
    }

    /// How long validation and compilation took.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// The machine code, for disassembly.
    pub fn machine_code(&self) -> &[u8] {
        self.code.machine_code()
    }

    /// Runs the gather on raw buffers: no check but the indices'.
    ///
    /// `data` holds [`QuantizedLayout::data_bytes_shape`] bytes, `indices` the indices in the
    /// signature's type, `scales` the scales in the signature's dtype (block quantization;
    /// anything, even null, for GGUF), `zero_points` the packed zero points if the signature
    /// has them (anything otherwise), `output` room for the output; all native-endian and C
    /// order, none aligned.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] with the position and value of the first bad index (in
    /// row-major order) under [`OutOfRange::Error`]; the output is then partly written.
    ///
    /// # Safety
    /// Each pointer is valid for its buffer's full length (reads; writes for `output`): for a
    /// buffer of 0 bytes any pointer, null included. `output` overlaps none of the others.
    pub unsafe fn call(
        &self,
        data: *const u8,
        indices: *const u8,
        scales: *const u8,
        zero_points: *const u8,
        output: *mut u8,
    ) -> Result<()> {
        // SAFETY: forwarded contract; the range is all the indices.
        unsafe {
            self.call_range(
                data,
                indices,
                scales,
                zero_points,
                output,
                0..self.outer_extent(),
            )
        }
    }

    /// As [`QuantizedKernel::call`], for the indices at element positions `range` only (at
    /// every position of the dims before the gather axis): the output bytes of those indices
    /// are written, no others. Ranges that partition `0..`[`QuantizedKernel::outer_extent`]
    /// write the output of one call, from as many threads as there are ranges.
    ///
    /// # Errors
    /// As [`QuantizedKernel::call`], for the first bad index within `range`.
    ///
    /// # Safety
    /// As [`QuantizedKernel::call`], and `range.start <= range.end <= outer_extent()`.
    pub unsafe fn call_range(
        &self,
        data: *const u8,
        indices: *const u8,
        scales: *const u8,
        zero_points: *const u8,
        output: *mut u8,
        range: Range<u64>,
    ) -> Result<()> {
        debug_assert!(range.start <= range.end && range.end <= self.outer_extent());
        let mut bad = 0u64;
        let entry = self.code.entry();
        // SAFETY: forwarded from this function's contract: the code reads within the
        // layout's sizes of each buffer and writes within the output's, at the slices of the
        // indices in `range`.
        let status = unsafe {
            entry(
                data,
                indices,
                scales,
                zero_points,
                output,
                range.start,
                range.end,
                &mut bad,
            )
        };
        if status == 0 {
            return Ok(());
        }
        // SAFETY: the caller's contract makes the whole indices buffer readable.
        let all = unsafe { std::slice::from_raw_parts(indices, self.layout.indices_bytes()) };
        Err(self.index_error(all, bad as usize))
    }

    /// Runs the whole gather split into `threads` ranges of the indices, on the calling
    /// thread and the crate's worker threads, as [`crate::Kernel::call_parallel`] does:
    /// `threads == 0` chooses (one range per core when the output is at least
    /// [`PARALLEL_MIN_BYTES`], else one), and never more ranges than indices.
    ///
    /// # Errors
    /// As [`QuantizedKernel::call`]: the first rejected index in row-major order.
    ///
    /// # Safety
    /// As [`QuantizedKernel::call`]; additionally no other thread touches `output` during the
    /// call.
    pub unsafe fn call_parallel(
        &self,
        data: *const u8,
        indices: *const u8,
        scales: *const u8,
        zero_points: *const u8,
        output: *mut u8,
        threads: usize,
    ) -> Result<()> {
        let parts = self.parallel_parts(threads);
        if parts <= 1 {
            // SAFETY: forwarded contract.
            return unsafe { self.call(data, indices, scales, zero_points, output) };
        }
        let count = self.outer_extent();
        // Addresses cross threads as integers; each part writes a disjoint part of `output`.
        let inputs = [data, indices, scales, zero_points].map(|p| p as usize);
        let output = output as usize;
        let results: Vec<OnceLock<Result<()>>> = (0..parts).map(|_| OnceLock::new()).collect();
        let bound = |part: usize| (u128::from(count) * part as u128 / parts as u128) as u64;
        pool::run(parts, &|part| {
            let [data, indices, scales, zero_points] = inputs.map(|p| p as *const u8);
            // SAFETY: forwarded contract; the parts partition the indices, so concurrent
            // calls write disjoint output bytes and only read the inputs, and `pool::run`
            // returns only after every part has finished.
            let result = unsafe {
                self.call_range(
                    data,
                    indices,
                    scales,
                    zero_points,
                    output as *mut u8,
                    bound(part)..bound(part + 1),
                )
            };
            let _ = results[part].set(result);
        });
        // The parts are in index order: the first error is the first bad index.
        results
            .into_iter()
            .find_map(|slot| slot.into_inner().and_then(Result::err))
            .map_or(Ok(()), Err)
    }

    /// How many parts `call_parallel(.., threads)` splits the gather into.
    pub fn parallel_parts(&self, threads: usize) -> usize {
        let threads = match threads {
            0 if self.layout.output_bytes() as u64 >= PARALLEL_MIN_BYTES => pool::threads(),
            0 => 1,
            n => n,
        };
        threads.min(self.outer_extent().max(1) as usize)
    }

    /// The error for the index at element position `position`, which the code rejected.
    #[cold]
    fn index_error(&self, indices: &[u8], position: usize) -> Error {
        let sig = self.signature();
        let axis = self.layout.gather_axis;
        Error::IndexOutOfRange {
            op: sig.op_name(),
            position: unravel(position, &sig.indices_shape),
            value: sig.index_type.read(indices, position),
            data_dim: axis,
            dim_size: sig.data_shape[axis],
        }
    }

    /// Runs the gather on byte slices (native-endian), checking their lengths first;
    /// `zero_points` must be given exactly when the signature has them.
    ///
    /// # Errors
    /// [`Error::BufferMismatch`] for a slice of the wrong length (or a missing or extra
    /// zero-points buffer); otherwise as [`QuantizedKernel::call`].
    pub fn run_bytes(
        &self,
        data: &[u8],
        indices: &[u8],
        scales: &[u8],
        zero_points: Option<&[u8]>,
        output: &mut [u8],
    ) -> Result<()> {
        self.run_bytes_parallel(data, indices, scales, zero_points, output, 1)
    }

    /// As [`QuantizedKernel::run_bytes`], split across `threads` as
    /// [`QuantizedKernel::call_parallel`] splits it (0 chooses).
    ///
    /// # Errors
    /// As [`QuantizedKernel::run_bytes`].
    pub fn run_bytes_parallel(
        &self,
        data: &[u8],
        indices: &[u8],
        scales: &[u8],
        zero_points: Option<&[u8]>,
        output: &mut [u8],
        threads: usize,
    ) -> Result<()> {
        let l = &self.layout;
        check_len("output", output.len(), l.output_bytes() as u64)?;
        let zero_points = l
            .check_buffers(data, indices, scales, zero_points)?
            .map_or(std::ptr::null(), <[u8]>::as_ptr);
        // SAFETY: every length is the layout's (checked above), a null `zero_points` is never
        // read (the signature has none), and `output` is a unique borrow.
        unsafe {
            self.call_parallel(
                data.as_ptr(),
                indices.as_ptr(),
                scales.as_ptr(),
                zero_points,
                output.as_mut_ptr(),
                threads,
            )
        }
    }

    /// Runs the gather on ndarray views of any layout and returns a new array: `data` (and
    /// `zero_points`) are the stored `u8` tensors, `scales` of type `T` (block quantization;
    /// pass an empty view for GGUF), the output of type `T`.
    ///
    /// # Errors
    /// [`Error::DTypeMismatch`] / [`Error::IndexTypeMismatch`] for the wrong `T` or `I`,
    /// [`Error::BufferMismatch`] for a shape that is not the layout's, [`Error::Allocation`]
    /// if the output or a copy cannot be allocated, and the index errors of
    /// [`QuantizedKernel::call`].
    pub fn run<T: Element, I: IndexElement, D1: Dimension, D2: Dimension, D3: Dimension>(
        &self,
        data: ArrayView<'_, u8, D1>,
        indices: ArrayView<'_, I, D2>,
        scales: ArrayView<'_, T, D3>,
        zero_points: Option<ArrayView<'_, u8, D1>>,
    ) -> Result<ArrayD<T>> {
        let sig = self.signature();
        let l = &self.layout;
        if T::DTYPE != sig.dtype || size_of::<T>() != sig.dtype.size() {
            return Err(Error::DTypeMismatch {
                what: "output",
                expected: sig.dtype,
                actual: T::DTYPE,
            });
        }
        if I::INDEX_TYPE != sig.index_type || size_of::<I>() != sig.index_type.size() {
            return Err(Error::IndexTypeMismatch {
                expected: sig.index_type,
                actual: I::INDEX_TYPE,
            });
        }
        check_shape("data", data.shape(), l.data_bytes_shape())?;
        check_shape("indices", indices.shape(), &sig.indices_shape)?;
        if l.scales_shape().is_empty() {
            if !scales.is_empty() {
                return Err(Error::BufferMismatch {
                    what: "scales",
                    expected: "none (GGUF blocks hold their scales)".into(),
                    actual: format!("shape {:?}", scales.shape()),
                });
            }
        } else {
            check_shape("scales", scales.shape(), l.scales_shape())?;
        }
        if let (Some(zp), Some(shape)) = (&zero_points, l.zero_points_bytes_shape()) {
            check_shape("zero_points", zp.shape(), shape)?;
        }
        let data = contiguous("a contiguous copy of data", &data)?;
        let indices = contiguous("a contiguous copy of indices", &indices)?;
        let scales = contiguous("a contiguous copy of scales", &scales)?;
        let zero_points = match &zero_points {
            Some(zp) => Some(contiguous("a contiguous copy of zero_points", zp)?),
            None => None,
        };
        let len: usize = self.output_shape().iter().product();
        let scale_bytes = if l.scales_shape().is_empty() {
            &[][..]
        } else {
            as_bytes(&scales)
        };
        // SAFETY: the element sizes are the signature's (checked above), so each buffer's
        // bytes are the layout's and the output buffer holds `len` elements of `T`'s size;
        // `run_bytes` writes every output byte when it succeeds (each value, or the zeros of
        // an out-of-range slice), floats of `T`'s dtype: valid `T`s by `Element`'s contract.
        unsafe {
            new_output::<T>(self.output_shape(), len, |output| {
                let spare = std::slice::from_raw_parts_mut(output, l.output_bytes());
                self.run_bytes(
                    as_bytes(&data),
                    as_bytes(&indices),
                    scale_bytes,
                    zero_points.as_deref(),
                    spare,
                )
            })
        }
    }
}

/// The bytes of a slice of plain values.
fn as_bytes<T: Copy>(values: &[T]) -> &[u8] {
    // SAFETY: any initialised `T: Copy` from this crate's `Element`/`IndexElement` impls (or
    // `u8`) is plain bytes without padding (their contracts); the length covers the slice.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), std::mem::size_of_val(values)) }
}
