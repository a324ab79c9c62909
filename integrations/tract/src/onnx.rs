//! The ONNX side: the parsers that turn `Gather`, `GatherElements` and `GatherND` nodes into
//! JIT expansions (or tract's own ops behind this crate's rules), and their inference rules.

use crate::dims::{InputDim, rule_error};
use crate::op::{JitGather, dtype_of, index_type_of};
use crate::quantized::{gather_block_quantized, interpreted_gather_block_quantized};
use crate::scatter;
use gather_jit::ir::ShapeRule;
use gather_jit::{Flavor, Op as GatherOp};
use tract_onnx::model::ParsingContext;
use tract_onnx::pb::NodeProto;
use tract_onnx::tract_hir::internal::*;
use tract_onnx::tract_hir::ops::array as hir;
use tract_onnx::tract_hir::ops::expandable::{Expansion, expand};

/// Makes `onnx` build JIT-backed ops for ONNX `Gather`, `GatherElements` and `GatherND`, for
/// ONNX `ScatterND`, `ScatterElements` and `Scatter` (a [`JitScatter`](crate::JitScatter)), and
/// for ONNX Runtime's `com.microsoft.GatherBlockQuantized` (a [`GatherBlockQuantized`](crate::GatherBlockQuantized), which
/// tract lacks; load a model whose tables are INT4 / UINT4 with [`crate::model_for_path`]).
pub fn register(onnx: &mut tract_onnx::Onnx) {
    onnx.op_register.insert("Gather", gather);
    onnx.op_register.insert("GatherElements", gather_elements);
    onnx.op_register.insert("GatherND", gather_nd);
    onnx.op_register.insert("ScatterND", scatter::scatter_nd);
    onnx.op_register
        .insert("ScatterElements", scatter::scatter_elements);
    onnx.op_register
        .insert("Scatter", scatter::scatter_elements);
    onnx.op_register
        .insert("GatherBlockQuantized", gather_block_quantized);
}

/// tract's ONNX framework with the JIT-backed gathers and scatters registered.
pub fn onnx() -> tract_onnx::Onnx {
    let mut onnx = tract_onnx::onnx();
    register(&mut onnx);
    onnx
}

/// tract's ONNX framework with tract's own gather and scatter ops, GatherND's and the scatters'
/// behind this crate's checked type and shape rules: what to compare the JIT-backed ops with.
/// tract's own GatherND rules compute `indices_rank - 1` unchecked, so indices of rank 0
/// (which ONNX forbids) make them count to `usize::MAX`, growing memory until the process
/// aborts; its ScatterND rules compute the same. `GatherBlockQuantized` runs
/// in gather-jit's interpreter here ([`QuantizedEngine::Interpreter`](crate::QuantizedEngine)),
/// not in tract's own op.
pub fn onnx_native() -> tract_onnx::Onnx {
    let mut onnx = tract_onnx::onnx();
    register_native(&mut onnx);
    onnx
}

/// Puts tract's own GatherND, ScatterND and ScatterElements (and `Scatter`) behind this crate's
/// checked rules in `onnx` (see [`onnx_native`]), and `GatherBlockQuantized` as gather-jit's
/// interpreter; Gather and GatherElements keep tract's own ops and rules.
pub fn register_native(onnx: &mut tract_onnx::Onnx) {
    onnx.op_register.insert("GatherND", native_gather_nd);
    onnx.op_register
        .insert("ScatterND", scatter::native_scatter_nd);
    onnx.op_register
        .insert("ScatterElements", scatter::native_scatter_elements);
    onnx.op_register
        .insert("Scatter", scatter::native_scatter_elements);
    onnx.op_register
        .insert("GatherBlockQuantized", interpreted_gather_block_quantized);
}

pub(crate) fn native_gather_nd(
    _ctx: &ParsingContext,
    node: &NodeProto,
) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let batch_dims = node.get_attr_opt("batch_dims")?.unwrap_or(0);
    Ok((expand(NativeGatherNd { batch_dims }), vec![]))
}

/// tract's own GatherND op, typed by [`gather_nd_rules`].
#[derive(Debug, Clone, Hash)]
pub(crate) struct NativeGatherNd {
    batch_dims: usize,
}

impl Expansion for NativeGatherNd {
    fn name(&self) -> StaticName {
        "GatherND".into()
    }

    fn rules<'r, 'p: 'r, 's: 'r>(
        &'s self,
        s: &mut Solver<'r>,
        inputs: &'p [TensorProxy],
        outputs: &'p [TensorProxy],
    ) -> InferenceResult {
        gather_nd_rules(self.batch_dims, s, inputs, outputs)
    }

    fn wire(
        &self,
        prefix: &str,
        model: &mut TypedModel,
        inputs: &[OutletId],
    ) -> TractResult<TVec<OutletId>> {
        model.wire_node(prefix, hir::GatherNd::new(self.batch_dims), inputs)
    }
}

pub(crate) fn gather(
    _ctx: &ParsingContext,
    node: &NodeProto,
) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let axis = node.get_attr_opt("axis")?.unwrap_or(0);
    let native = hir::Gather::new(axis);
    Ok((expand(JitGatherExpansion::Gather { axis, native }), vec![]))
}

pub(crate) fn gather_elements(
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

pub(crate) fn gather_nd(
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
pub(crate) enum JitGatherExpansion {
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
        ensure!(
            inputs.len() == 2,
            "{}: {} inputs, expected data and indices",
            self.name(),
            inputs.len()
        );
        let data = model.outlet_fact(inputs[0])?.clone();
        let indices = model.outlet_fact(inputs[1])?.clone();
        let rank = data.rank() as i64;
        // An axis below `-rank` stays as it is, for gather-jit's validation to refuse: adding
        // the rank to it would make another negative axis, one gather-jit accepts.
        let normalise = |axis: i64| match (-rank..0).contains(&axis) {
            true => axis + rank,
            false => axis,
        };
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

/// GatherND's type and shape rules (tract's own loop on rank-0 indices, see [`onnx_native`]):
/// gather-jit's rule
/// ([`gather_jit::ir::ShapeRule`]), `output = indices[:-1] + data[batch_dims + n:]` with
/// `n = indices.shape[-1]`, as equations between the output's dims and the inputs'.
///
/// Ranks, `batch_dims` and `n` come from the model file, so the rule checks every one before
/// it is used in arithmetic, with ONNX's limits (as ONNX Runtime, a model outside them fails to
/// load): both ranks at least 1, `batch_dims < min(ranks)`, `1 <= n <= rank(data) - batch_dims`.
/// The ranks are checked as soon as they are known, `n` once it is.
pub(crate) fn gather_nd_rules<'r, 'p: 'r>(
    batch_dims: usize,
    s: &mut Solver<'r>,
    inputs: &'p [TensorProxy],
    outputs: &'p [TensorProxy],
) -> InferenceResult {
    check_input_arity(inputs, 2)?;
    check_output_arity(outputs, 1)?;
    s.equals(&outputs[0].datum_type, &inputs[0].datum_type)?;
    // An attribute past `i64::MAX` is out of range whatever the ranks; the rule says so.
    let op = GatherOp::GatherNd {
        batch_dims: i64::try_from(batch_dims).unwrap_or(i64::MAX),
    };
    s.given_2(
        &inputs[0].rank,
        &inputs[1].rank,
        move |s, data_rank, indices_rank| {
            let rank = |rank: i64| {
                usize::try_from(rank).map_err(|_| format_err!("GatherND: a rank of {rank}"))
            };
            let (data_rank, indices_rank) = (rank(data_rank)?, rank(indices_rank)?);
            let rule =
                ShapeRule::new(op, Flavor::Onnx, data_rank, indices_rank).map_err(rule_error)?;
            // Ranks of at least 1 (the rule checked them).
            let depth_dim = indices_rank - 1;
            s.given(&inputs[1].shape[depth_dim], move |s, depth| {
                // A symbolic depth leaves the output's rank open, as it is in tract's own rules.
                let Ok(depth) = depth.to_i64() else {
                    return Ok(());
                };
                let depth = usize::try_from(depth).map_err(|_| {
                    format_err!("GatherND: index depth {depth} (the indices' last dim) is negative")
                })?;
                let dims = |input, rank| -> Vec<InputDim> {
                    (0..rank)
                        .map(|dim| InputDim {
                            input,
                            dim,
                            value: (input == 1 && dim == depth_dim).then_some(depth),
                        })
                        .collect()
                };
                let (_, output) = rule
                    .apply(&dims(0, data_rank), &dims(1, indices_rank))
                    .map_err(rule_error)?;
                s.equals(&outputs[0].rank, output.len() as i64)?;
                for (k, from) in output.iter().enumerate() {
                    s.equals(&outputs[0].shape[k], &inputs[from.input].shape[from.dim])?;
                }
                Ok(())
            })
        },
    )
}
