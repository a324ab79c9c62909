//! gather-jit: JIT-compiled Gather, GatherElements and GatherND kernels.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod error;
pub mod interp;
pub mod ir;

pub use error::{Error, Result};
pub use ir::{
    DType, Flavor, IndexPolicy, IndexType, NegativeIndices, Op, OpName, OutOfRange, ResolvedOp,
    Signature, Validated,
};
