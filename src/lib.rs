//! gather-jit: JIT-compiled Gather, GatherElements and GatherND kernels.
//!
//! # Contents
//! - [`Signature`]: the IR of one gather (op, [`Flavor`], [`IndexPolicy`], types, shapes);
//!   [`Signature::validate`] checks it and infers the output shape.
//! - [`interp::interpret`]: the reference interpreter, straight from the specs.
//! - [`specialize::Plan`]: the loop nest with every shape folded into constants.
//! - [`Kernel`]: native code from Cranelift, called with raw pointers ([`Kernel::call`]) or
//!   safely on byte slices ([`Kernel::run_bytes`]) and ndarray views ([`Kernel::run`]).
//! - [`KernelCache`]: signature -> `Arc<Kernel>`, compiled once; [`jit`], [`jit_gather`],
//!   [`jit_gather_elements`] and [`jit_gather_nd`] use the process-wide one.
//!
//! # Example
//! ```
//! use gather_jit::{jit_gather_nd, Options};
//! use ndarray::array;
//!
//! // ONNX GatherND, batch_dims 0: pick elements (0,1) and (1,0).
//! let kernel = jit_gather_nd(&[2, 2], &[2, 2], 0, &Options::default())?;
//! let data = array![[1.0f32, 2.0], [3.0, 4.0]];
//! let indices = array![[0i64, 1], [1, 0]];
//! let out = kernel.run(data.view(), indices.view())?;
//! assert_eq!(out.into_raw_vec_and_offset().0, vec![2.0, 3.0]);
//!
//! // Out-of-range indices are reported with their position and value.
//! let bad = array![[0i64, 1], [2, 0]];
//! let err = kernel.run(data.view(), bad.view()).unwrap_err();
//! assert!(err.to_string().contains("index 2 at position [1, 0]"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod cache;
mod codegen;
mod copy;
pub mod error;
pub mod interp;
pub mod ir;
mod kernel;
mod pool;
pub mod specialize;
pub mod workloads;

use std::sync::Arc;

/// The README's examples run as doc-tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use cache::{CacheStats, KernelCache};
pub use error::{Error, Result};
pub use ir::{
    DType, Flavor, IndexPolicy, IndexType, MAX_RANK, NegativeIndices, Op, OpName, OutOfRange,
    ResolvedOp, Signature, Validated,
};
pub use kernel::{Element, IndexElement, Kernel, PARALLEL_MIN_BYTES};
pub use pool::{DEFAULT_WORKER_SPIN, set_worker_spin, worker_spin};
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
