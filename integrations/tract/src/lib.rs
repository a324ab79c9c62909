//! gather-jit as the gather backend of [tract](https://github.com/sonos/tract): ONNX `Gather`,
//! `GatherElements` and `GatherND` (every opset tract reads, `batch_dims` included) become
//! [`JitGather`] ops, whose kernels gather-jit compiles for each concrete shape and caches;
//! ONNX `ScatterND`, `ScatterElements` and `Scatter` (every reduction) become [`JitScatter`]
//! ops, which write into their data tensor when tract hands them the only reference to it.
//!
//! ```no_run
//! use tract_onnx::prelude::*;
//!
//! let model = gather_jit_tract::onnx()
//!     .model_for_path("model.onnx")?
//!     .into_optimized()?
//!     .into_runnable()?;
//! # Ok::<(), TractError>(())
//! ```
//!
//! Type inference and output facts use the same rules as tract's own ops (symbolic dims such
//! as a batch or sequence length stay symbolic until the model runs); at run time each call
//! builds the concrete [`gather_jit::Signature`] and asks the process-wide kernel cache for its
//! kernel (a hit costs tens of nanoseconds). A gather whose data is not a plain number type
//! (`TDim` shape tensors, as in `Shape -> Gather`, strings) stays tract's own op, and tract may
//! still fold a gather whose inputs are constants.
//!
//! Indices follow ONNX: negative values count from the end of the axis, anything else out of
//! range is an error naming the index's position and value (tract's own GatherND panics on
//! negative indices).
//!
//! ONNX Runtime's `com.microsoft.GatherBlockQuantized` (the embedding tables its quantizer
//! quantizes) becomes a [`GatherBlockQuantized`] op run by gather-jit's quantized kernels. Its
//! quantizer stores those tables as INT4 / UINT4 tensors, which tract's parser cannot read:
//! load such a model with [`model_for_path`], which converts them first (see
//! [`convert_4bit_tensors`]).
//!
//! # Hostile models
//!
//! The JIT ops and their rules return errors rather than panic: impossible ranks, axes,
//! `batch_dims` or index depths fail at load (as in ONNX Runtime), and an output too large for
//! memory is an error naming its bytes. tract itself is not so careful. On a damaged or hostile
//! file these calls can panic (and unwind) instead of returning an error:
//!
//! - the parser, `model_for_path` / `model_for_read` (tract-onnx indexes and unwraps what the
//!   protobuf holds; a single flipped bit in a valid model is enough);
//! - `into_typed`, `into_optimized` and `into_decluttered`, whose analysis and constant folding
//!   run tract's own ops on the model's constants (tract's GatherND panics on a negative
//!   index, and tract's tensors panic when an allocation fails);
//! - `into_runnable`, and `run` of the runnable model (tract's own ops on the inputs).
//!
//! Wrap each in [`catch_panic`] to get an error instead. A panic still reaches the process's
//! panic hook first (by default, a message and perhaps a backtrace on stderr); a program that
//! wants only the error can install a silent hook of its own, which a library must not do.
//!
//! Some of tract's failures are worse than a panic. It sizes tensors with wrapping arithmetic,
//! so an op that takes its output's shape from a value can write past its allocation (TopK
//! with `k = 2^62 + 5` does): [`run_checked`] runs a plan with each node's outputs checked for
//! size first, but the constant folding of `into_optimized` runs tract's ops unchecked.
//! tract's own GatherND rules loop, growing memory, on indices of rank 0: [`onnx_native`] gives
//! tract's ops behind this crate's rules. An allocation that Rust's
//! global allocator refuses outside tract's tensors (a `Vec` sized by the file) aborts the
//! process, which no wrapper can catch. Untrusted models belong in a process of their own,
//! under a memory limit; [`check_allocation`] checks a tensor of a size from such input before
//! tract allocates it.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod dims;
mod guard;
mod load;
mod onnx;
mod op;
mod quantized;
mod scatter;

pub use guard::{catch_panic, check_allocation, run_checked};
pub use load::{convert_4bit_tensors, model_for_path, model_for_proto, model_for_read};
pub use onnx::{onnx, onnx_native, register, register_native};
pub use op::{JitGather, datum_of, dtype_of, index_type_of};
pub use quantized::{GatherBlockQuantized, QuantizedEngine};
pub use scatter::{JitScatter, reduction_of};
