//! One signature, layout and kernel type over every op family, as `run`, `explain` and `bench`
//! see them: the library's [`Kernel`] (Gather, GatherElements, GatherND), [`QuantizedKernel`]
//! (GatherBlockQuantized, GGUF rows) and [`ScatterKernel`] (ScatterND, ScatterElements,
//! ScatterUpdate) behind one enum each.
//!
//! What every kernel offers, the commands take from the library's [`CompiledOp`] (through
//! [`OpKernel::compiled`]); this file adds what the trait does not have (validation before
//! compiling, the cache, buffer sizes, the plan, the interpreter, GB/s's byte count) and is
//! all the commands know of the difference between the families.

use std::fmt;
use std::sync::Arc;

use gather_jit::aot::{AotKernel, ObjectBuilder};
use gather_jit::interp::{interpret, interpret_quantized};
use gather_jit::ir::Validated;
use gather_jit::quant::QuantizedLayout;
use gather_jit::scatter::{Reduction, ScatterLayout, ScatterSignature, interpret_scatter};
use gather_jit::specialize::Plan;
use gather_jit::{
    CompiledOp, DType, Error, IndexPolicy, IndexType, Inputs, Kernel, KernelCache, NegativeIndices,
    OutOfRange, QuantizedKernel, QuantizedSignature, ScatterKernel, Signature, Tuning,
};

use crate::buffer;
use crate::failure::{Failure, Result};

/// The signature of any op.
#[derive(Clone, Debug)]
pub enum OpSignature {
    /// Gather, GatherElements, GatherND.
    Plain(Signature),
    /// GatherBlockQuantized, GGUF rows.
    Quantized(QuantizedSignature),
    /// ScatterND, ScatterElements, ScatterUpdate.
    Scatter(ScatterSignature),
}

impl OpSignature {
    /// Checks the signature and works out its buffers.
    ///
    /// # Errors
    /// The library's validation error.
    pub fn validate(&self) -> Result<Validation> {
        Ok(match self {
            OpSignature::Plain(sig) => Validation::Plain(sig.validate()?),
            OpSignature::Quantized(sig) => Validation::Quantized(sig.validate()?),
            OpSignature::Scatter(sig) => Validation::Scatter(sig.validate()?),
        })
    }

    /// A fresh compile (no cache), with `tuning` for the plain gathers.
    ///
    /// # Errors
    /// An invalid signature; a tuning other than the default for a quantized op or a scatter.
    pub fn compile(&self, tuning: Tuning) -> Result<OpKernel> {
        if !matches!(self, OpSignature::Plain(_)) && tuning != Tuning::default() {
            return Err(Failure::usage(format!(
                "{}: a tuning applies to the plain gathers only",
                self.op_text()
            )));
        }
        Ok(match self {
            OpSignature::Plain(sig) => {
                OpKernel::Plain(Arc::new(Kernel::compile_tuned(sig, tuning)?))
            }
            OpSignature::Quantized(sig) => {
                OpKernel::Quantized(Arc::new(QuantizedKernel::compile(sig)?))
            }
            OpSignature::Scatter(sig) => OpKernel::Scatter(Arc::new(ScatterKernel::compile(sig)?)),
        })
    }

    /// The kernel from `cache` (compiled on a miss).
    ///
    /// # Errors
    /// An invalid signature.
    pub fn cached(&self, cache: &KernelCache) -> Result<OpKernel> {
        Ok(match self {
            OpSignature::Plain(sig) => OpKernel::Plain(cache.get(sig)?),
            OpSignature::Quantized(sig) => OpKernel::Quantized(cache.get_quantized(sig)?),
            OpSignature::Scatter(sig) => OpKernel::Scatter(cache.get_scatter(sig)?),
        })
    }

    /// The code size of the kernel `cache` lends for the signature (a cache hit without a
    /// reference count).
    ///
    /// # Errors
    /// An invalid signature.
    pub fn lent_code_bytes(&self, cache: &KernelCache) -> Result<usize> {
        Ok(match self {
            OpSignature::Plain(sig) => cache.with(sig, Kernel::code_bytes)?,
            OpSignature::Quantized(sig) => {
                cache.with_quantized(sig, QuantizedKernel::code_bytes)?
            }
            OpSignature::Scatter(sig) => cache.with_scatter(sig, ScatterKernel::code_bytes)?,
        })
    }

    /// A kernel on the machine code of a live kernel of the same op where one fits
    /// (`Kernel::compile_shared`); `None` for the ops without code sharing.
    ///
    /// # Errors
    /// An invalid signature.
    pub fn compile_shared(&self) -> Option<Result<OpKernel>> {
        match self {
            OpSignature::Plain(sig) => Some(
                Kernel::compile_shared(sig)
                    .map(|k| OpKernel::Plain(Arc::new(k)))
                    .map_err(Failure::from),
            ),
            OpSignature::Quantized(_) | OpSignature::Scatter(_) => None,
        }
    }

    /// Compiles the op into `object`, exported as `symbol` (`gather-jit aot`, `explain
    /// --target`).
    ///
    /// # Errors
    /// An invalid signature or symbol; a kernel the object's target cannot take; a scatter,
    /// which objects do not hold.
    pub fn add_to<'o>(&self, object: &'o mut ObjectBuilder, symbol: &str) -> Result<&'o AotKernel> {
        Ok(match self {
            OpSignature::Plain(sig) => object.add(symbol, sig)?,
            OpSignature::Quantized(sig) => object.add_quantized(symbol, sig)?,
            OpSignature::Scatter(sig) => {
                // Validation's errors first, as for the other ops.
                sig.validate()?;
                return Err(Failure::usage(format!(
                    "{}: objects hold gathers only; a scatter is compiled at run time \
                     (gather-jit run, explain and bench without --target)",
                    sig.op
                )));
            }
        })
    }

    /// The tuning of the kernel whose plan and CLIF an object's kernel has: without bands for
    /// the plain gathers (an object's plans never band, see `gather_jit::aot`), the default
    /// for the quantized ones (which have no tuning).
    pub fn object_tuning(&self) -> Tuning {
        match self {
            OpSignature::Plain(_) => Tuning::NO_BANDS,
            OpSignature::Quantized(_) | OpSignature::Scatter(_) => Tuning::default(),
        }
    }

    /// The op and its attributes (`Gather(axis=0, batch_dims=0)`, `GatherGGUF(q4_0)`).
    pub fn op_text(&self) -> String {
        match self {
            OpSignature::Plain(sig) => sig.op.to_string(),
            OpSignature::Quantized(sig) => sig.op_name().to_string(),
            OpSignature::Scatter(sig) => sig.op.to_string(),
        }
    }

    /// The flavor's name, where the signature has one (the quantized ops follow their own rule
    /// unless `--flavor` is given).
    pub fn flavor(&self) -> Option<&'static str> {
        match self {
            OpSignature::Plain(sig) => Some(sig.flavor.name()),
            OpSignature::Quantized(_) => None,
            OpSignature::Scatter(sig) => Some(sig.flavor.name()),
        }
    }

    /// What negative and out-of-range indices do (for a scatter an out-of-range index is
    /// always an error).
    pub fn policy(&self) -> IndexPolicy {
        match self {
            OpSignature::Plain(sig) => sig.policy,
            OpSignature::Quantized(sig) => sig.policy,
            OpSignature::Scatter(sig) => IndexPolicy {
                negative: sig.negative,
                out_of_range: OutOfRange::Error,
            },
        }
    }

    /// The output's element type.
    pub fn dtype(&self) -> DType {
        match self {
            OpSignature::Plain(sig) => sig.dtype,
            OpSignature::Quantized(sig) => sig.dtype,
            OpSignature::Scatter(sig) => sig.dtype,
        }
    }

    /// The indices' type.
    pub fn index_type(&self) -> IndexType {
        match self {
            OpSignature::Plain(sig) => sig.index_type,
            OpSignature::Quantized(sig) => sig.index_type,
            OpSignature::Scatter(sig) => sig.index_type,
        }
    }

    /// The (logical) data shape.
    pub fn data_shape(&self) -> &[usize] {
        match self {
            OpSignature::Plain(sig) => &sig.data_shape,
            OpSignature::Quantized(sig) => &sig.data_shape,
            OpSignature::Scatter(sig) => &sig.data_shape,
        }
    }

    /// The indices' shape.
    pub fn indices_shape(&self) -> &[usize] {
        match self {
            OpSignature::Plain(sig) => &sig.indices_shape,
            OpSignature::Quantized(sig) => &sig.indices_shape,
            OpSignature::Scatter(sig) => &sig.indices_shape,
        }
    }

    /// `error` as the user should read it: a negative index that a quantized op's own rule
    /// rejects names the flags under which it counts from the end.
    pub fn index_failure(&self, error: Error) -> Failure {
        let negative = matches!(&error, Error::IndexOutOfRange { value, .. } if *value < 0);
        match self {
            OpSignature::Quantized(sig)
                if negative && sig.policy.negative == NegativeIndices::Invalid =>
            {
                Failure::usage(format!(
                    "{error} (negative ids are out of range under {}'s own rule; --negative \
                     wrap or --flavor onnx counts them from the end)",
                    sig.op_name()
                ))
            }
            _ => Failure::from(error),
        }
    }
}

impl fmt::Display for OpSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpSignature::Plain(sig) => sig.fmt(f),
            OpSignature::Quantized(sig) => sig.fmt(f),
            OpSignature::Scatter(sig) => sig.fmt(f),
        }
    }
}

/// A validated signature of any op (owned; [`OpLayout`] reads it).
pub enum Validation {
    /// Gather, GatherElements, GatherND.
    Plain(Validated),
    /// GatherBlockQuantized, GGUF rows.
    Quantized(QuantizedLayout),
    /// ScatterND, ScatterElements, ScatterUpdate.
    Scatter(ScatterLayout),
}

impl Validation {
    /// The buffers' shapes and sizes.
    pub fn layout(&self) -> OpLayout<'_> {
        match self {
            Validation::Plain(v) => OpLayout::Plain(v),
            Validation::Quantized(l) => OpLayout::Quantized(l),
            Validation::Scatter(l) => OpLayout::Scatter(l),
        }
    }
}

/// The shapes and sizes of an op's buffers.
#[derive(Clone, Copy, Debug)]
pub enum OpLayout<'a> {
    /// Gather, GatherElements, GatherND.
    Plain(&'a Validated),
    /// GatherBlockQuantized, GGUF rows.
    Quantized(&'a QuantizedLayout),
    /// ScatterND, ScatterElements, ScatterUpdate.
    Scatter(&'a ScatterLayout),
}

impl<'a> OpLayout<'a> {
    /// The output's shape.
    pub fn output_shape(self) -> &'a [usize] {
        match self {
            OpLayout::Plain(v) => v.output_shape(),
            OpLayout::Quantized(l) => l.output_shape(),
            OpLayout::Scatter(l) => l.output_shape(),
        }
    }

    /// The output's element type.
    pub fn dtype(self) -> DType {
        match self {
            OpLayout::Plain(v) => v.signature().dtype,
            OpLayout::Quantized(l) => l.signature().dtype,
            OpLayout::Scatter(l) => l.signature().dtype,
        }
    }

    /// Bytes of data (packed for a quantized op).
    ///
    /// # Errors
    /// A size that overflows `usize`.
    pub fn data_bytes(self) -> Result<usize> {
        match self {
            OpLayout::Plain(v) => {
                buffer::byte_len(v.data_len(), v.signature().dtype.size(), "the data")
            }
            OpLayout::Quantized(l) => Ok(l.data_bytes()),
            OpLayout::Scatter(l) => {
                buffer::byte_len(l.data_len(), l.signature().dtype.size(), "the data")
            }
        }
    }

    /// Bytes of indices.
    ///
    /// # Errors
    /// A size that overflows `usize`.
    pub fn indices_bytes(self) -> Result<usize> {
        match self {
            OpLayout::Plain(v) => buffer::byte_len(
                v.indices_len(),
                v.signature().index_type.size(),
                "the indices",
            ),
            OpLayout::Quantized(l) => Ok(l.indices_bytes()),
            OpLayout::Scatter(l) => buffer::byte_len(
                l.indices_len(),
                l.signature().index_type.size(),
                "the indices",
            ),
        }
    }

    /// Bytes of the output.
    ///
    /// # Errors
    /// A size that overflows `usize`.
    pub fn output_bytes(self) -> Result<usize> {
        match self {
            OpLayout::Plain(v) => {
                buffer::byte_len(v.output_len(), v.signature().dtype.size(), "the output")
            }
            OpLayout::Quantized(l) => Ok(l.output_bytes()),
            OpLayout::Scatter(l) => {
                buffer::byte_len(l.data_len(), l.signature().dtype.size(), "the output")
            }
        }
    }

    /// The quantized layout (scales, zero points, packed data), for a quantized op.
    pub fn quantized(self) -> Option<&'a QuantizedLayout> {
        match self {
            OpLayout::Quantized(l) => Some(l),
            _ => None,
        }
    }

    /// The scatter layout (updates), for a scatter.
    pub fn scatter(self) -> Option<&'a ScatterLayout> {
        match self {
            OpLayout::Scatter(l) => Some(l),
            _ => None,
        }
    }
}

/// A compiled kernel of any op.
#[derive(Clone, Debug)]
pub enum OpKernel {
    /// Gather, GatherElements, GatherND.
    Plain(Arc<Kernel>),
    /// GatherBlockQuantized, GGUF rows.
    Quantized(Arc<QuantizedKernel>),
    /// ScatterND, ScatterElements, ScatterUpdate (out of place through [`CompiledOp`]; the
    /// in-place call is the kernel's own).
    Scatter(Arc<ScatterKernel>),
}

impl OpKernel {
    /// The kernel as the library's [`CompiledOp`], which has what the commands need of every
    /// op: signature text, output shape and dtype, explanation, CLIF, machine code, compile
    /// time, outer extent, parallel parts, and the checked run on byte buffers (split across
    /// threads).
    pub fn compiled(&self) -> &dyn CompiledOp {
        match self {
            OpKernel::Plain(k) => &**k,
            OpKernel::Quantized(k) => &**k,
            OpKernel::Scatter(k) => &**k,
        }
    }

    /// Size of the machine code in bytes.
    pub fn code_bytes(&self) -> usize {
        self.compiled().machine_code().len()
    }

    /// The buffers' shapes and sizes.
    pub fn layout(&self) -> OpLayout<'_> {
        match self {
            OpKernel::Plain(k) => OpLayout::Plain(k.validated()),
            OpKernel::Quantized(k) => OpLayout::Quantized(k.layout()),
            OpKernel::Scatter(k) => OpLayout::Scatter(k.layout()),
        }
    }

    /// The loop plan, for the kernels built from one.
    pub fn plan(&self) -> Option<&Plan> {
        match self {
            OpKernel::Plain(k) => Some(k.plan()),
            OpKernel::Quantized(_) | OpKernel::Scatter(_) => None,
        }
    }

    /// The scatter kernel, for its in-place call.
    pub fn scatter(&self) -> Option<&ScatterKernel> {
        match self {
            OpKernel::Scatter(k) => Some(k),
            _ => None,
        }
    }

    /// The op with its attributes resolved (normalised axes, index depth), where the library
    /// resolves them.
    pub fn resolved_op(&self) -> Option<String> {
        match self {
            OpKernel::Plain(k) => Some(format!("{:?}", k.validated().op())),
            OpKernel::Quantized(_) => None,
            OpKernel::Scatter(k) => Some(format!("{:?}", k.layout().op())),
        }
    }

    /// Bytes a call reads and writes: the output written, the indices read, and the gathered
    /// part of data (and of the scales and zero points) read; for a scatter, as
    /// [`scatter_bytes_moved`] counts them (out of place unless `in_place`). The
    /// denominator of GB/s.
    pub fn bytes_moved(&self, in_place: bool) -> u64 {
        match self {
            OpKernel::Scatter(k) => scatter_bytes_moved(k.layout(), in_place),
            OpKernel::Plain(k) => plan_bytes_moved(k.plan()),
            OpKernel::Quantized(k) => {
                let l = k.layout();
                let sig = k.signature();
                let dim = sig.data_shape[l.gather_axis()] as u128;
                let count: u128 = sig.indices_shape.iter().map(|&d| d as u128).product();
                let table = (l.data_bytes() + l.scales_bytes() + l.zero_points_bytes()) as u128;
                let read = table.saturating_mul(count).checked_div(dim).unwrap_or(0);
                let total = l.output_bytes() as u128 + l.indices_bytes() as u128 + read;
                u64::try_from(total).unwrap_or(u64::MAX)
            }
        }
    }

    /// The reference interpreter's output on the same inputs.
    ///
    /// # Errors
    /// As [`CompiledOp::run_inputs`].
    pub fn interpret(&self, inputs: &Inputs) -> Result<Vec<u8>, Error> {
        match self {
            OpKernel::Plain(k) => interpret(k.validated(), inputs.data, inputs.indices),
            OpKernel::Quantized(k) => interpret_quantized(
                k.layout(),
                inputs.data,
                inputs.indices,
                inputs.scales,
                inputs.zero_points,
            ),
            OpKernel::Scatter(k) => {
                interpret_scatter(k.layout(), inputs.data, inputs.indices, inputs.updates)
            }
        }
    }
}

/// Bytes a gather reads and writes: the output's size read from data, the indices read, and the
/// output written. The denominator of every GB/s figure.
pub fn plan_bytes_moved(plan: &Plan) -> u64 {
    2 * plan.output_bytes + plan.indices_bytes
}

/// Bytes a scatter call reads and writes (the denominator of `bench`'s GB/s): the indices and
/// the updates read, and the elements the updates land on written (and read too under a
/// reduction); out of place, data read and the output written besides.
pub fn scatter_bytes_moved(layout: &ScatterLayout, in_place: bool) -> u64 {
    let sig = layout.signature();
    let size = sig.dtype.size() as u128;
    let updates = layout.updates_len() as u128 * size;
    let indices = layout.indices_len() as u128 * sig.index_type.size() as u128;
    let landed = match sig.reduction {
        Reduction::None => updates,
        _ => 2 * updates,
    };
    let copy = if in_place {
        0
    } else {
        2 * layout.data_len() as u128 * size
    };
    u64::try_from(indices + updates + landed + copy).unwrap_or(u64::MAX)
}
