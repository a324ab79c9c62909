//! [`QuantizedKernel`]: a quantized gather compiled for one [`QuantizedSignature`], its raw
//! and checked calls, and the process-wide cache behind the `jit_*` functions.
#![allow(
    unsafe_code,
    reason = "owns and calls a quantized kernel's JIT code on raw buffers"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use cranelift_codegen::Context;
use cranelift_codegen::ir::UserFuncName;
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};
use ndarray::{ArrayD, ArrayView, Dimension, IxDyn};

use super::{BlockQuantization, GgufFormat, QuantizedLayout, QuantizedSignature, lower};
use crate::codegen::ModuleMemory;
use crate::error::{Error, Result};
#[cfg(doc)]
use crate::ir::OutOfRange;
use crate::ir::{DType, unravel};
use crate::kernel::safe::{check_len, check_shape, contiguous};
use crate::{Element, IndexElement, IndexType, KernelCache};

/// The C signature of a quantized kernel:
/// `(data, indices, scales, zero_points, output, bad_index) -> status`.
type QuantizedFn =
    unsafe extern "C" fn(*const u8, *const u8, *const u8, *const u8, *mut u8, *mut u64) -> u32;

/// The symbol under which [`f16_bits`] is linked into kernels with `f16` output.
const F16_BITS: &str = "gather_jit_f16_bits";

/// `value` rounded to `f16` (nearest, ties to even), as bits in the low half: the kernels call
/// it for each `f16` output value.
extern "C" fn f16_bits(value: f32) -> u32 {
    u32::from(half::f16::from_f32(value).to_bits())
}

/// A quantized gather compiled for one [`QuantizedSignature`].
///
/// `Send + Sync`: call it from many threads at once. The code is freed with the kernel.
pub struct QuantizedKernel {
    layout: QuantizedLayout,
    /// Owns the executable memory that `entry` points into.
    _memory: ModuleMemory,
    entry: QuantizedFn,
    code_bytes: usize,
    compile_time: Duration,
}

impl std::fmt::Debug for QuantizedKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuantizedKernel")
            .field("signature", self.signature())
            .field("code_bytes", &self.code_bytes)
            .finish_non_exhaustive()
    }
}

impl QuantizedKernel {
    /// Validates and compiles `signature` (no cache: see [`jit_quantized`]).
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
        let f16_output = layout.signature().dtype == DType::F16;
        let isa = crate::codegen::isa()?;
        let call_conv = isa.default_call_conv();
        let mut builder = JITBuilder::with_isa(isa.clone(), default_libcall_names());
        builder.symbol(F16_BITS, f16_bits as *const u8);
        let mut module = JITModule::new(builder);
        let pointer = module.target_config().pointer_type();
        let codegen_err = |e: &dyn std::fmt::Display| Error::Codegen(e.to_string());
        let kernel_sig = lower::kernel_signature(call_conv, pointer);
        let id = module
            .declare_function("quantized_gather", Linkage::Export, &kernel_sig)
            .map_err(|e| codegen_err(&e))?;
        let f16_helper = if f16_output {
            let sig = lower::f16_helper_signature(call_conv);
            let id = module
                .declare_function(F16_BITS, Linkage::Import, &sig)
                .map_err(|e| codegen_err(&e))?;
            Some(id)
        } else {
            None
        };
        let mut ctx = Context::new();
        ctx.func.name = UserFuncName::user(0, id.as_u32());
        ctx.func.signature = kernel_sig;
        let helpers = lower::Helpers {
            f16_bits: f16_helper.map(|id| module.declare_func_in_func(id, &mut ctx.func)),
        };
        let mut builder_context = FunctionBuilderContext::new();
        lower::lower(
            &layout,
            &mut ctx.func,
            &mut builder_context,
            module.target_config(),
            helpers,
        );
        module.define_function(id, &mut ctx).map_err(|e| match e {
            cranelift_module::ModuleError::Compilation(err) => Error::Codegen(
                cranelift_codegen::print_errors::pretty_error(&ctx.func, err),
            ),
            other => codegen_err(&other),
        })?;
        let code_bytes = ctx
            .compiled_code()
            .map_or(0, |c| c.code_info().total_size as usize);
        module.finalize_definitions().map_err(|e| codegen_err(&e))?;
        let pointer = module.get_finalized_function(id);
        // SAFETY: `pointer` is the finalized code of a function declared with
        // `kernel_signature`, which is `QuantizedFn`'s C ABI; it stays valid while `module`
        // lives, and `module` lives as long as this kernel.
        let entry = unsafe { std::mem::transmute::<*const u8, QuantizedFn>(pointer) };
        Ok(QuantizedKernel {
            layout,
            _memory: ModuleMemory::new(module),
            entry,
            code_bytes,
            compile_time: started.elapsed(),
        })
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
        self.code_bytes
    }

    /// How long validation and compilation took.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// The machine code, for disassembly.
    pub fn machine_code(&self) -> &[u8] {
        // SAFETY: `entry` is the start of this function's finalized code, `code_bytes` long;
        // the module keeps those pages mapped until `self` drops, which the borrow prevents.
        unsafe { std::slice::from_raw_parts(self.entry as *const u8, self.code_bytes) }
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
    /// Each pointer is valid for its buffer's full length (reads; writes for `output`), and
    /// `output` overlaps none of the others.
    pub unsafe fn call(
        &self,
        data: *const u8,
        indices: *const u8,
        scales: *const u8,
        zero_points: *const u8,
        output: *mut u8,
    ) -> Result<()> {
        let mut bad = 0u64;
        // SAFETY: forwarded from this function's contract: the code reads within the
        // layout's sizes of each buffer and writes within the output's.
        let status = unsafe { (self.entry)(data, indices, scales, zero_points, output, &mut bad) };
        if status == 0 {
            return Ok(());
        }
        // SAFETY: the caller's contract makes the whole indices buffer readable.
        let all = unsafe { std::slice::from_raw_parts(indices, self.layout.indices_bytes) };
        Err(self.index_error(all, bad as usize))
    }

    /// The error for the index at element `position`, which the code rejected.
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
        let l = &self.layout;
        check_len("output", output.len(), l.output_bytes as u64)?;
        let zero_points = l
            .check_buffers(data, indices, scales, zero_points)?
            .map_or(std::ptr::null(), <[u8]>::as_ptr);
        // SAFETY: every length is the layout's (checked above), a null `zero_points` is never
        // read (the signature has none), and `output` is a unique borrow.
        unsafe {
            self.call(
                data.as_ptr(),
                indices.as_ptr(),
                scales.as_ptr(),
                zero_points,
                output.as_mut_ptr(),
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
        let mut output: Vec<T> = Vec::new();
        output
            .try_reserve_exact(len)
            .map_err(|_| Error::Allocation {
                what: "the output",
                bytes: l.output_bytes,
            })?;
        let scale_bytes = if l.scales_shape().is_empty() {
            &[][..]
        } else {
            as_bytes(&scales)
        };
        // SAFETY: the element sizes are the signature's (checked above), so each buffer's
        // bytes are the layout's; the output's capacity holds `len` elements.
        let spare = unsafe {
            std::slice::from_raw_parts_mut(output.as_mut_ptr().cast::<u8>(), l.output_bytes)
        };
        // `run_bytes` writes every output byte when it succeeds (each value, or the zeros of
        // an out-of-range slice); the capacity is not read before.
        self.run_bytes(
            as_bytes(&data),
            as_bytes(&indices),
            scale_bytes,
            zero_points.as_deref(),
            spare,
        )?;
        // SAFETY: after `Ok`, all `len` elements hold floats of `T`'s dtype written by the
        // kernel, valid `T`s by `Element`'s contract.
        unsafe { output.set_len(len) };
        ArrayD::from_shape_vec(IxDyn(self.output_shape()), output).map_err(|e| {
            Error::BufferMismatch {
                what: "output",
                expected: format!("{:?}", self.output_shape()),
                actual: e.to_string(),
            }
        })
    }
}

/// The bytes of a slice of plain values.
fn as_bytes<T: Copy>(values: &[T]) -> &[u8] {
    // SAFETY: any initialised `T: Copy` from this crate's `Element`/`IndexElement` impls (or
    // `u8`) is plain bytes without padding (their contracts); the length covers the slice.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), std::mem::size_of_val(values)) }
}

/// The quantized kernel for `signature` from the process-wide cache
/// ([`KernelCache::global`]), compiled on first use.
///
/// # Errors
/// As [`QuantizedKernel::compile`].
pub fn jit_quantized(signature: &QuantizedSignature) -> Result<Arc<QuantizedKernel>> {
    KernelCache::global().get_quantized(signature)
}

/// A `GatherBlockQuantized` kernel on logical data of `data_shape`, with scales and output of
/// type `dtype` and indices of `index_type` (ONNX Runtime's index rules; see
/// [`QuantizedSignature::block_quantized`]).
///
/// # Errors
/// As [`jit_quantized`].
pub fn jit_gather_block_quantized(
    data_shape: &[usize],
    indices_shape: &[usize],
    quantization: BlockQuantization,
    dtype: DType,
    index_type: IndexType,
) -> Result<Arc<QuantizedKernel>> {
    jit_quantized(
        &QuantizedSignature::block_quantized(data_shape, indices_shape, quantization)
            .with_dtype(dtype)
            .with_index_type(index_type),
    )
}

/// A kernel gathering rows of `row_len` values from a GGUF table of `rows` rows, into output
/// of type `dtype` (see [`QuantizedSignature::gguf`]).
///
/// # Errors
/// As [`jit_quantized`].
pub fn jit_gather_gguf(
    format: GgufFormat,
    rows: usize,
    row_len: usize,
    indices_shape: &[usize],
    dtype: DType,
    index_type: IndexType,
) -> Result<Arc<QuantizedKernel>> {
    jit_quantized(
        &QuantizedSignature::gguf(format, rows, row_len, indices_shape)
            .with_dtype(dtype)
            .with_index_type(index_type),
    )
}
