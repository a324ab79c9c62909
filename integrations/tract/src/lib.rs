//! gather-jit as the gather backend of [tract](https://github.com/sonos/tract): ONNX `Gather`,
//! `GatherElements` and `GatherND` (every opset tract reads, `batch_dims` included) become
//! [`JitGather`] ops, whose kernels gather-jit compiles for each concrete shape and caches.
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
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

use gather_jit::{DType, IndexType, KernelCache, Op as GatherOp, Signature};
use tract_onnx::model::ParsingContext;
use tract_onnx::pb::NodeProto;
use tract_onnx::tract_hir::internal::*;
use tract_onnx::tract_hir::ops::array as hir;
use tract_onnx::tract_hir::ops::expandable::{Expansion, expand};

/// Makes `onnx` build JIT-backed ops for ONNX `Gather`, `GatherElements` and `GatherND`.
pub fn register(onnx: &mut tract_onnx::Onnx) {
    onnx.op_register.insert("Gather", gather);
    onnx.op_register.insert("GatherElements", gather_elements);
    onnx.op_register.insert("GatherND", gather_nd);
}

/// tract's ONNX framework with the JIT-backed gathers registered.
pub fn onnx() -> tract_onnx::Onnx {
    let mut onnx = tract_onnx::onnx();
    register(&mut onnx);
    onnx
}

fn gather(
    _ctx: &ParsingContext,
    node: &NodeProto,
) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let axis = node.get_attr_opt("axis")?.unwrap_or(0);
    let native = hir::Gather::new(axis);
    Ok((expand(JitGatherExpansion::Gather { axis, native }), vec![]))
}

fn gather_elements(
    _ctx: &ParsingContext,
    node: &NodeProto,
) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let axis = node.get_attr_opt("axis")?.unwrap_or(0);
    let native = hir::GatherElements::new(axis);
    Ok((
        expand(JitGatherExpansion::GatherElements { axis, native }),
        vec![],
    ))
}

fn gather_nd(
    _ctx: &ParsingContext,
    node: &NodeProto,
) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let batch_dims = node.get_attr_opt("batch_dims")?.unwrap_or(0);
    let native = hir::GatherNd::new(batch_dims);
    Ok((
        expand(JitGatherExpansion::GatherNd { batch_dims, native }),
        vec![],
    ))
}

/// The inference-time op: tract's own type and shape rules, then, when the model is typed, a
/// [`JitGather`] (or tract's op, for data gather-jit does not handle).
#[derive(Debug, Clone, Hash)]
enum JitGatherExpansion {
    Gather {
        axis: i64,
        native: hir::Gather,
    },
    GatherElements {
        axis: i64,
        native: hir::GatherElements,
    },
    GatherNd {
        batch_dims: usize,
        native: hir::GatherNd,
    },
}

impl Expansion for JitGatherExpansion {
    fn name(&self) -> StaticName {
        match self {
            JitGatherExpansion::Gather { .. } => "JitGather".into(),
            JitGatherExpansion::GatherElements { .. } => "JitGatherElements".into(),
            JitGatherExpansion::GatherNd { .. } => "JitGatherND".into(),
        }
    }

    fn rules<'r, 'p: 'r, 's: 'r>(
        &'s self,
        s: &mut Solver<'r>,
        inputs: &'p [TensorProxy],
        outputs: &'p [TensorProxy],
    ) -> InferenceResult {
        match self {
            JitGatherExpansion::Gather { native, .. } => {
                Expansion::rules(native, s, inputs, outputs)
            }
            JitGatherExpansion::GatherElements { native, .. } => {
                Expansion::rules(native, s, inputs, outputs)
            }
            JitGatherExpansion::GatherNd { batch_dims, .. } => {
                gather_nd_rules(*batch_dims, s, inputs, outputs)
            }
        }
    }

    fn wire(
        &self,
        prefix: &str,
        model: &mut TypedModel,
        inputs: &[OutletId],
    ) -> TractResult<TVec<OutletId>> {
        let data = model.outlet_fact(inputs[0])?.clone();
        let indices = model.outlet_fact(inputs[1])?.clone();
        let rank = data.rank() as i64;
        let normalise = |axis: i64| if axis < 0 { axis + rank } else { axis };
        let op = match self {
            JitGatherExpansion::Gather { axis, .. } => GatherOp::Gather {
                axis: normalise(*axis),
                batch_dims: 0,
            },
            JitGatherExpansion::GatherElements { axis, .. } => GatherOp::GatherElements {
                axis: normalise(*axis),
            },
            JitGatherExpansion::GatherNd { batch_dims, .. } => GatherOp::GatherNd {
                batch_dims: *batch_dims as i64,
            },
        };
        if dtype_of(data.datum_type).is_some() && index_type_of(indices.datum_type).is_some() {
            return model.wire_node(prefix, JitGather { op }, inputs);
        }
        // Shape tensors, strings and the like: tract's own ops, as tract would wire them.
        match self {
            JitGatherExpansion::Gather { native, .. } => native.wire(prefix, model, inputs),
            JitGatherExpansion::GatherElements { native, .. } => native.wire(prefix, model, inputs),
            JitGatherExpansion::GatherNd { native, .. } => {
                model.wire_node(prefix, native.clone(), inputs)
            }
        }
    }
}

/// GatherND's type and shape rules (tract's own take the output's trailing dims from the
/// indices instead of from data when `batch_dims > 0`): `output = indices[:-1] +
/// data[batch_dims + n:]`, with `n = indices.shape[-1]`.
fn gather_nd_rules<'r, 'p: 'r>(
    batch_dims: usize,
    s: &mut Solver<'r>,
    inputs: &'p [TensorProxy],
    outputs: &'p [TensorProxy],
) -> InferenceResult {
    check_input_arity(inputs, 2)?;
    check_output_arity(outputs, 1)?;
    s.equals(&outputs[0].datum_type, &inputs[0].datum_type)?;
    s.given(&inputs[1].rank, move |s, indices_rank| {
        let indices_rank = indices_rank as usize;
        for i in 0..indices_rank - 1 {
            s.equals(&outputs[0].shape[i], &inputs[1].shape[i])?;
        }
        s.given_2(
            &inputs[1].shape[indices_rank - 1],
            &inputs[0].rank,
            move |s, depth, data_rank| {
                if let Ok(depth) = depth.to_i64() {
                    let from = batch_dims as i64 + depth;
                    s.equals(&outputs[0].rank, indices_rank as i64 - 1 + data_rank - from)?;
                    for j in 0..(data_rank - from).max(0) as usize {
                        s.equals(
                            &outputs[0].shape[indices_rank - 1 + j],
                            &inputs[0].shape[from as usize + j],
                        )?;
                    }
                }
                Ok(())
            },
        )
    })
}

/// gather-jit's element type for a tract datum type, if it has one.
pub fn dtype_of(datum: DatumType) -> Option<DType> {
    Some(match datum {
        DatumType::Bool => DType::Bool,
        DatumType::U8 => DType::U8,
        DatumType::U16 => DType::U16,
        DatumType::U32 => DType::U32,
        DatumType::U64 => DType::U64,
        DatumType::I8 => DType::I8,
        DatumType::I16 => DType::I16,
        DatumType::I32 => DType::I32,
        DatumType::I64 => DType::I64,
        DatumType::F16 => DType::F16,
        DatumType::F32 => DType::F32,
        DatumType::F64 => DType::F64,
        _ => return None,
    })
}

/// tract's datum type for a gather-jit element type (the inverse of [`dtype_of`]), if it has one.
pub fn datum_of(dtype: DType) -> Option<DatumType> {
    Some(match dtype {
        DType::Bool => DatumType::Bool,
        DType::U8 => DatumType::U8,
        DType::U16 => DatumType::U16,
        DType::U32 => DatumType::U32,
        DType::U64 => DatumType::U64,
        DType::I8 => DatumType::I8,
        DType::I16 => DatumType::I16,
        DType::I32 => DatumType::I32,
        DType::I64 => DatumType::I64,
        DType::F16 => DatumType::F16,
        DType::F32 => DatumType::F32,
        DType::F64 => DatumType::F64,
        _ => return None,
    })
}

/// gather-jit's index type for a tract datum type, if it has one.
pub fn index_type_of(datum: DatumType) -> Option<IndexType> {
    Some(match datum {
        DatumType::U8 => IndexType::U8,
        DatumType::U16 => IndexType::U16,
        DatumType::U32 => IndexType::U32,
        DatumType::U64 => IndexType::U64,
        DatumType::I8 => IndexType::I8,
        DatumType::I16 => IndexType::I16,
        DatumType::I32 => IndexType::I32,
        DatumType::I64 => IndexType::I64,
        _ => return None,
    })
}

/// A gather run by gather-jit kernels: ONNX rules, the op's attributes normalised (a
/// non-negative axis). Its output facts follow the same shape rules as its kernels, over
/// symbolic dims too.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JitGather {
    /// The op and its attributes.
    pub op: GatherOp,
}

impl JitGather {
    /// The output shape for these input shapes, dims symbolic or not: gather-jit's own
    /// inference when every dim is known, the same rule over `TDim`s otherwise.
    fn output_shape(&self, data: &[TDim], indices: &[TDim]) -> TractResult<TVec<TDim>> {
        let concrete = |dims: &[TDim]| {
            dims.iter()
                .map(|d| d.to_usize().ok())
                .collect::<Option<Vec<usize>>>()
        };
        if let (Some(data), Some(indices)) = (concrete(data), concrete(indices)) {
            let validated = Signature::new(self.op, &data, &indices).validate()?;
            return Ok(validated
                .output_shape()
                .iter()
                .map(|&d| d.to_dim())
                .collect());
        }
        let mut shape: TVec<TDim> = tvec!();
        match self.op {
            GatherOp::Gather { axis, .. } => {
                let axis = axis as usize;
                ensure!(
                    axis < data.len(),
                    "Gather: axis {axis} out of range for rank {}",
                    data.len()
                );
                shape.extend(data[..axis].iter().cloned());
                shape.extend(indices.iter().cloned());
                shape.extend(data[axis + 1..].iter().cloned());
            }
            GatherOp::GatherElements { .. } => shape.extend(indices.iter().cloned()),
            GatherOp::GatherNd { batch_dims } => {
                let (last, tuples) = indices
                    .split_last()
                    .ok_or_else(|| format_err!("GatherND: indices of rank 0"))?;
                let depth = last
                    .to_usize()
                    .context("GatherND: the indices' last dim must be known")?;
                let from = batch_dims as usize + depth;
                ensure!(
                    from <= data.len(),
                    "GatherND: index depth {depth} too large for data of rank {}",
                    data.len()
                );
                shape.extend(tuples.iter().cloned());
                shape.extend(data[from..].iter().cloned());
            }
        }
        Ok(shape)
    }

    /// The signature of one call on `data` and `indices`.
    fn signature(&self, data: &Tensor, indices: &Tensor) -> TractResult<Signature> {
        let dtype = dtype_of(data.datum_type()).ok_or_else(|| {
            format_err!(
                "{}: unsupported data type {:?}",
                self.name(),
                data.datum_type()
            )
        })?;
        let index_type = index_type_of(indices.datum_type()).ok_or_else(|| {
            format_err!(
                "{}: unsupported index type {:?}",
                self.name(),
                indices.datum_type()
            )
        })?;
        Ok(Signature::new(self.op, data.shape(), indices.shape())
            .with_dtype(dtype)
            .with_index_type(index_type))
    }
}

impl Op for JitGather {
    fn name(&self) -> StaticName {
        match self.op {
            GatherOp::Gather { .. } => "JitGather".into(),
            GatherOp::GatherElements { .. } => "JitGatherElements".into(),
            GatherOp::GatherNd { .. } => "JitGatherND".into(),
        }
    }

    fn info(&self) -> TractResult<Vec<String>> {
        Ok(vec![format!("{}", self.op)])
    }

    op_as_typed_op!();
}

impl EvalOp for JitGather {
    fn is_stateless(&self) -> bool {
        true
    }

    fn eval(&self, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let (data, indices) = args_2!(inputs);
        let signature = self.signature(&data, &indices)?;
        let output = KernelCache::global().with(&signature, |kernel| {
            // SAFETY: the element type is plain data (`dtype_of` accepted it), and the kernel
            // writes every byte before the tensor is returned (on an error it is dropped
            // unread).
            let mut output =
                unsafe { Tensor::uninitialized_dt(data.datum_type(), kernel.output_shape())? };
            // SAFETY: the signature was built from these tensors' shapes and plain-data types,
            // so each holds exactly the bytes the kernel reads or writes, native-endian and
            // C-contiguous (tract tensors always are); the output is a fresh allocation, so it
            // overlaps neither input; no other thread sees it during the call. The pointers are
            // taken without making a reference to the uninitialised output bytes.
            unsafe {
                kernel.call(
                    data.as_ptr_unchecked::<u8>(),
                    indices.as_ptr_unchecked::<u8>(),
                    output.as_ptr_mut_unchecked::<u8>(),
                )?
            };
            TractResult::Ok(output)
        })??;
        Ok(tvec!(output.into_tvalue()))
    }
}

impl TypedOp for JitGather {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let shape = self.output_shape(&inputs[0].shape.to_tvec(), &inputs[1].shape.to_tvec())?;
        Ok(tvec!(inputs[0].datum_type.fact(&*shape)))
    }

    as_op!();
}
