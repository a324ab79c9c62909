//! gather-jit: JIT-compiled kernels for three op families, with the exact semantics of ONNX,
//! OpenVINO and TensorRT: the gathers (Gather, GatherElements, GatherND), the quantized
//! gathers (ONNX Runtime's GatherBlockQuantized, GGUF rows) and the scatters (ScatterND,
//! ScatterElements, ScatterUpdate, with their reductions).
//!
//! A runtime that knows an op's shapes asks once for a kernel ([`jit_gather`],
//! [`jit_gather_elements`], [`jit_gather_nd`], or [`jit`] for any [`Signature`]); Cranelift
//! compiles a loop nest with every shape folded into constants, the crate caches it by the
//! full signature, and the runtime calls it as often as it likes, safely on ndarray views
//! ([`Kernel::run`]) and byte slices ([`Kernel::run_bytes`]), or on raw pointers
//! ([`Kernel::call`]). [`interp::interpret`], a reference interpreter written straight from
//! the specifications, is what every kernel is tested against.
//!
//! # Whose rules
//!
//! A [`Flavor`] says which framework's operator a signature follows; each has its default
//! [`IndexPolicy`] for negative and out-of-range indices (override it with
//! [`Signature::with_policy`]):
//!
//! | flavor | ops | negative indices | out of range |
//! |---|---|---|---|
//! | [`Flavor::Onnx`] (opset 13) | Gather, GatherElements, GatherND | count from the end | error |
//! | [`Flavor::OpenvinoGather1`], [`Gather7`](Flavor::OpenvinoGather7), [`Gather8`](Flavor::OpenvinoGather8) | Gather (7 and 8 with `batch_dims`) | count from the end | zeros |
//! | [`Flavor::OpenvinoGatherNd5`], [`GatherNd8`](Flavor::OpenvinoGatherNd8) | GatherND (5 flattens the batch dims) | count from the end | error |
//! | [`Flavor::OpenvinoGatherElements6`] | GatherElements | error | error |
//! | [`Flavor::TensorRt`] | all three (`IGatherLayer` modes) | error | error |
//!
//! # A two-minute tour
//!
//! ```
//! use gather_jit::{Flavor, Options, jit_gather, jit_gather_nd};
//! use ndarray::array;
//!
//! // An embedding lookup: ONNX Gather along axis 0 (f32 data and i64 indices by default).
//! let table = array![[0.0f32, 0.1], [1.0, 1.1], [2.0, 2.1]];
//! let kernel = jit_gather(&[3, 2], &[2], 0, 0, &Options::default())?;
//! let rows = kernel.run(table.view(), array![2i64, -3].view())?;
//! assert_eq!(rows, array![[2.0f32, 2.1], [0.0, 0.1]].into_dyn());
//!
//! // What it compiled to: the signature, the output shape and the loop plan.
//! println!("{}", kernel.explain());
//!
//! // OpenVINO GatherND-8 with one batch dim: one index per batch picks a row.
//! let options = Options { flavor: Flavor::OpenvinoGatherNd8, ..Options::default() };
//! let kernel = jit_gather_nd(&[2, 3, 2], &[2, 1], 1, &options)?;
//! let data = ndarray::Array::from_shape_fn((2, 3, 2), |(b, r, c)| (b * 6 + r * 2 + c) as f32);
//! let picked = kernel.run(data.view(), array![[1i64], [-1]].view())?;
//! assert_eq!(picked, array![[2.0f32, 3.0], [10.0, 11.0]].into_dyn());
//!
//! // A bad index is an error naming its position and value; nothing is returned.
//! let err = kernel.run(data.view(), array![[0i64], [3]].view()).unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "GatherND: index 3 at position [1, 0] of indices is out of range for data dim 1 of size 3"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Contents
//! - [`Signature`] (in [`ir`]): op, flavor, policy, types and shapes; [`Signature::validate`]
//!   checks it and infers the output shape ([`ir::Validated`]).
//! - [`Kernel`]: a compiled gather; [`Kernel::run`], [`Kernel::run_bytes`] check their
//!   arguments, [`Kernel::call`], [`Kernel::call_range`] and [`Kernel::call_parallel`] are
//!   the raw entry points for runtimes that own their buffers and threads.
//! - [`KernelCache`]: signature -> `Arc<Kernel>`, compiled once, bounded; the `jit*`
//!   functions use a process-wide one.
//! - [`Error`]: what went wrong and where, with a stable [`Error::category`].
//! - [`interp::interpret`]: the reference interpreter.
//! - Scatters ([`scatter`]): ScatterND, ScatterElements and ScatterUpdate with reductions,
//!   under ONNX, OpenVINO and TensorRT rules ([`scatter::ScatterSignature`]), with their
//!   reference interpreter ([`interp::interpret_scatter`], in place and out of place).
//! - Quantized gathers ([`quant`]): rows of a quantized table dequantized as they are gathered,
//!   ONNX Runtime's `GatherBlockQuantized` ([`jit_gather_block_quantized`]) and GGUF `Q4_0` /
//!   `Q8_0` rows ([`jit_gather_gguf`]), with their interpreter [`interp::interpret_quantized`];
//!   [`QuantizedKernel`] has the same kinds of calls as [`Kernel`] (raw, range, parallel,
//!   checked), and [`CompiledOp`] is what the two answer alike, for code that handles any op.
//!
//! `docs/` in the repository has the design, the semantics of each flavor, the safety
//! contract and the performance figures; `examples/` has an embedding lookup, a runtime's
//! cache and a 4-bit quantized embedding lookup.
#![deny(unsafe_op_in_unsafe_fn)]
// `unsafe` only where a module owns or calls JIT code, shares memory between threads or
// promises a layout: each such module says which with an `allow` and a reason.
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "aot")]
pub mod aot;
mod cache;
mod codegen;
mod copy;
pub mod error;
pub mod interp;
pub mod ir;
mod kernel;
mod pool;
pub mod quant;
pub mod scatter;
mod types;
// The loop plan and its tuning: public only under the `unstable` feature, for the CLI's
// `explain` and `bench`, the benches and the tests; an embedder sees `Kernel::explain`.
#[cfg(feature = "unstable")]
#[doc(hidden)]
pub mod specialize;
#[cfg(not(feature = "unstable"))]
mod specialize;

use std::sync::Arc;

/// The README's examples run as doc-tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use cache::{CacheStats, KernelCache};
pub use error::{Error, Result};
pub use ir::{
    DType, Flavor, IndexPolicy, IndexType, NegativeIndices, Op, OutOfRange, OutputMemory, Signature,
};
pub use kernel::MAX_PARTS_BEYOND_CORES;
pub use kernel::{
    CompiledOp, Element, IndexElement, Inputs, Kernel, PARALLEL_MIN_BYTES, QuantizedKernel,
    ScatterKernel,
};
/// The ndarray crate (0.17) whose views [`Kernel::run`] and [`QuantizedKernel::run`] take:
/// name it through here when the program's graph holds another ndarray version.
pub use ndarray;
#[cfg(feature = "unstable")]
#[doc(hidden)]
pub use pool::{DEFAULT_WORKER_SPIN, run_parts, set_worker_spin, worker_spin};
pub use quant::{BlockQuantization, GgufFormat, QuantizedSignature};
#[cfg(feature = "unstable")]
#[doc(hidden)]
pub use specialize::Tuning;

/// The parts of a signature besides the op and shapes; `Default` is ONNX rules, `f32` data,
/// `i64` indices and the flavor's own index policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Whose rules apply.
    pub flavor: Flavor,
    /// Element type of data.
    pub dtype: DType,
    /// Type of the indices.
    pub index_type: IndexType,
    /// Overrides the flavor's default index policy.
    pub policy: Option<IndexPolicy>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            flavor: Flavor::Onnx,
            dtype: DType::F32,
            index_type: IndexType::I64,
            policy: None,
        }
    }
}

impl Options {
    /// The full signature of `op` on these shapes.
    pub fn signature(&self, op: Op, data_shape: &[usize], indices_shape: &[usize]) -> Signature {
        let sig = Signature::new(op, data_shape, indices_shape)
            .with_flavor(self.flavor)
            .with_dtype(self.dtype)
            .with_index_type(self.index_type);
        match self.policy {
            Some(policy) => sig.with_policy(policy),
            None => sig,
        }
    }
}

/// The kernel for `signature` from the process-wide cache, compiled on first use.
///
/// # Errors
/// The signature's validation error, or [`Error::Codegen`].
pub fn jit(signature: &Signature) -> Result<Arc<Kernel>> {
    KernelCache::global().get(signature)
}

/// A `Gather` kernel along `axis` with `batch_dims` (see [`jit`]).
///
/// # Errors
/// As [`jit`].
pub fn jit_gather(
    data_shape: &[usize],
    indices_shape: &[usize],
    axis: i64,
    batch_dims: i64,
    options: &Options,
) -> Result<Arc<Kernel>> {
    jit(&options.signature(Op::Gather { axis, batch_dims }, data_shape, indices_shape))
}

/// A `GatherElements` kernel along `axis` (see [`jit`]).
///
/// # Errors
/// As [`jit`].
pub fn jit_gather_elements(
    data_shape: &[usize],
    indices_shape: &[usize],
    axis: i64,
    options: &Options,
) -> Result<Arc<Kernel>> {
    jit(&options.signature(Op::GatherElements { axis }, data_shape, indices_shape))
}

/// A `GatherND` kernel with `batch_dims` (see [`jit`]).
///
/// # Errors
/// As [`jit`].
pub fn jit_gather_nd(
    data_shape: &[usize],
    indices_shape: &[usize],
    batch_dims: i64,
    options: &Options,
) -> Result<Arc<Kernel>> {
    jit(&options.signature(Op::GatherNd { batch_dims }, data_shape, indices_shape))
}

/// The parts of a quantized signature besides the storage form and the shapes; `Default` is
/// `f32` output (and scales), `i64` indices and the op's own index policy (see
/// [`QuantizedSignature::block_quantized`] and [`QuantizedSignature::gguf`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantizedOptions {
    /// Element type of the output (and of block quantization's scales): `F32`, `F16` or
    /// `Bf16`.
    pub dtype: DType,
    /// Type of the indices.
    pub index_type: IndexType,
    /// Overrides the op's default index policy.
    pub policy: Option<IndexPolicy>,
}

impl Default for QuantizedOptions {
    fn default() -> Self {
        QuantizedOptions {
            dtype: DType::F32,
            index_type: IndexType::I64,
            policy: None,
        }
    }
}

impl QuantizedOptions {
    /// `signature` with these options.
    pub fn apply(&self, signature: QuantizedSignature) -> QuantizedSignature {
        let signature = signature
            .with_dtype(self.dtype)
            .with_index_type(self.index_type);
        match self.policy {
            Some(policy) => signature.with_policy(policy),
            None => signature,
        }
    }
}

/// The quantized kernel for `signature` from the process-wide cache, compiled on first use.
///
/// # Errors
/// The signature's validation error ([`QuantizedSignature::validate`]), or
/// [`Error::Codegen`].
pub fn jit_quantized(signature: &QuantizedSignature) -> Result<Arc<QuantizedKernel>> {
    KernelCache::global().get_quantized(signature)
}

/// A `GatherBlockQuantized` kernel on logical data of `data_shape` (see
/// [`QuantizedSignature::block_quantized`] and [`jit_quantized`]).
///
/// # Errors
/// As [`jit_quantized`].
pub fn jit_gather_block_quantized(
    data_shape: &[usize],
    indices_shape: &[usize],
    quantization: BlockQuantization,
    options: &QuantizedOptions,
) -> Result<Arc<QuantizedKernel>> {
    jit_quantized(&options.apply(QuantizedSignature::block_quantized(
        data_shape,
        indices_shape,
        quantization,
    )))
}

/// A kernel gathering rows of `row_len` values from a GGUF table of `rows` rows (see
/// [`QuantizedSignature::gguf`] and [`jit_quantized`]).
///
/// # Errors
/// As [`jit_quantized`].
pub fn jit_gather_gguf(
    format: GgufFormat,
    rows: usize,
    row_len: usize,
    indices_shape: &[usize],
    options: &QuantizedOptions,
) -> Result<Arc<QuantizedKernel>> {
    jit_quantized(&options.apply(QuantizedSignature::gguf(
        format,
        rows,
        row_len,
        indices_shape,
    )))
}

/// The scatter kernel for `signature` from the process-wide [`KernelCache`], compiled on first
/// use (see [`scatter`] and [`ScatterKernel`]).
///
/// # Errors
/// The signature's validation error ([`scatter::ScatterSignature::validate`]), or
/// [`Error::Codegen`].
pub fn jit_scatter(signature: &scatter::ScatterSignature) -> Result<Arc<ScatterKernel>> {
    KernelCache::global().get_scatter(signature)
}
