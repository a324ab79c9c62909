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
//! tract's own GatherND rules loop, growing memory, when the index depth exceeds the indices'
//! rank: [`onnx_native`] gives tract's ops behind this crate's rules. An allocation that Rust's
//! global allocator refuses outside tract's tensors (a `Vec` sized by the file) aborts the
//! process, which no wrapper can catch. Untrusted models belong in a process of their own,
//! under a memory limit; [`check_allocation`] checks a tensor of a size from such input before
//! tract allocates it.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

use gather_jit::ir::{Dim, ShapeRule, output_shape};
use gather_jit::{DType, Flavor, IndexType, KernelCache, Op as GatherOp, Signature};
use tract_onnx::model::ParsingContext;
use tract_onnx::pb::NodeProto;
use tract_onnx::tract_hir::internal::*;
use tract_onnx::tract_hir::ops::array as hir;
use tract_onnx::tract_hir::ops::expandable::{Expansion, expand};

/// Runs `f`, turning a panic inside it into an error `"{phase} panicked: {message}"`, so that
/// tract's calls on an untrusted model (see the crate docs) fail like any other. The process's
/// panic hook still runs first; this function leaves it alone.
///
/// Whatever `f` had borrowed may be left half-updated by the panic (which is why `f` need not be
/// `UnwindSafe`): drop it rather than use it again. tract's models and plans taken by value
/// go with the unwinding.
///
/// # Errors
/// `f`'s own error, or the panic as an error naming `phase`.
pub fn catch_panic<T>(phase: &str, f: impl FnOnce() -> TractResult<T>) -> TractResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("a panic without a message")
                .to_string();
            // A payload whose drop panics as well must not unwind out of here; one whose drop
            // panics twice is leaked.
            if let Err(again) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                drop(payload);
            })) {
                std::mem::forget(again);
            }
            Err(format_err!("{phase} panicked: {message}"))
        }
    }
}

/// Runs `plan` on `inputs` as `plan.run(inputs)` does, after checking before each node's
/// evaluation that the outputs its op declares for these very inputs have sizes that fit in
/// memory's address range: tract computes a tensor's bytes with wrapping arithmetic, so a
/// shape taken from a hostile value (TopK's `k` of `2^62 + 5` on 3 rows: 60 bytes allocated,
/// 3,600 written) would make it write past the allocation. A refused node is an error naming
/// it.
///
/// The check asks each op for its output facts, given the inputs' types and shapes and, for
/// inputs of at most 64 elements (the counts and shapes that ops such as TopK, Reshape or
/// Range read), their values; an op that cannot state its facts from these, or states
/// symbolic ones, is not checked. It narrows what a hostile model can do at run time; tract's
/// analysis and constant folding (`into_typed`, `into_optimized`) run its ops without it. It
/// costs a few allocations per node: time runs with `plan.run`, once a checked run on the
/// same inputs has passed.
///
/// # Errors
/// As `plan.run`, or a node whose output would not fit.
pub fn run_checked(
    plan: &TypedSimplePlan<TypedModel>,
    inputs: TVec<TValue>,
) -> TractResult<TVec<TValue>> {
    let mut state = SimpleState::new(plan)?;
    state.run_plan_with_eval(inputs, |session, op_state, node, inputs| {
        check_output_sizes(node, &inputs)?;
        tract_onnx::tract_core::plan::eval(session, op_state, node, inputs)
    })
}

/// Inputs of at most this many elements reach an op's `output_facts` with their values, so
/// that the shape an op reads from a value is the one checked; larger ones by type and shape.
const VALUE_FACT_ELEMENTS: usize = 64;

/// Fails if `node`'s op declares, for `inputs`, an output whose bytes exceed `isize::MAX` (or
/// overflow) or whose shape holds a negative dim.
fn check_output_sizes(node: &TypedNode, inputs: &[TValue]) -> TractResult<()> {
    if let Some(topk) = node.op_as::<tract_onnx::tract_core::ops::array::Topk>() {
        return check_topk(node, topk.axis, inputs);
    }
    let facts: TVec<TypedFact> = inputs
        .iter()
        .map(|value| match value.len() <= VALUE_FACT_ELEMENTS {
            true => TypedFact::from(value.clone().into_arc_tensor()),
            false => TypedFact::dt_shape(value.datum_type(), value.shape()),
        })
        .collect();
    let facts: TVec<&TypedFact> = facts.iter().collect();
    // An op that cannot say (say, one that needs the value of a large input) is not checked.
    let Ok(outputs) = node.op.output_facts(&facts) else {
        return Ok(());
    };
    'outputs: for (slot, fact) in outputs.iter().enumerate() {
        let mut dims = Vec::with_capacity(fact.rank());
        for dim in fact.shape.iter() {
            match dim.to_i64() {
                Ok(dim) => dims.push(dim),
                Err(_) => continue 'outputs,
            }
        }
        let refuse = || {
            format_err!(
                "{}: output {slot} of shape {dims:?} ({:?}) does not fit in memory",
                node.name,
                fact.datum_type
            )
        };
        let mut bytes = Some(fact.datum_type.size_of());
        for &dim in &dims {
            let dim = usize::try_from(dim).map_err(|_| refuse())?;
            bytes = bytes.and_then(|b| b.checked_mul(dim));
        }
        let empty = dims.contains(&0);
        if !empty && bytes.is_none_or(|b| b > isize::MAX as usize) {
            return Err(refuse());
        }
    }
    Ok(())
}

/// tract's TopK takes its output's shape from `k` without a check (and its `output_facts`
/// cannot state it when `k` has rank 1, as ONNX gives it), so `k` is checked here: ONNX
/// requires `0 <= k <= ` the axis's length, which also bounds the output by the input.
fn check_topk(node: &TypedNode, axis: usize, inputs: &[TValue]) -> TractResult<()> {
    let [input, k] = inputs else {
        bail!("{}: TopK takes 2 inputs, got {}", node.name, inputs.len());
    };
    let len = *input.shape().get(axis).ok_or_else(|| {
        format_err!(
            "{}: TopK axis {axis} is out of range for rank {}",
            node.name,
            input.rank()
        )
    })?;
    ensure!(
        k.len() == 1,
        "{}: TopK's k must hold one value, it has shape {:?}",
        node.name,
        k.shape()
    );
    let k = k.cast_to::<i64>()?.as_slice::<i64>()?[0];
    ensure!(
        usize::try_from(k).is_ok_and(|k| k <= len),
        "{}: TopK's k {k} is out of range for axis {axis} of length {len}",
        node.name
    );
    Ok(())
}

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

/// tract's ONNX framework with tract's own gather ops, GatherND's behind this crate's checked
/// type and shape rules: what to compare the JIT-backed ops with. tract's own GatherND rules
/// count to `usize::MAX`, growing memory until the process aborts, when the index depth exceeds
/// the indices' rank, as in the valid `GatherND(data [2, 2], indices [2])`.
pub fn onnx_native() -> tract_onnx::Onnx {
    let mut onnx = tract_onnx::onnx();
    register_native(&mut onnx);
    onnx
}

/// Puts tract's own GatherND behind this crate's checked rules in `onnx` (see
/// [`onnx_native`]); Gather and GatherElements keep tract's own ops and rules.
pub fn register_native(onnx: &mut tract_onnx::Onnx) {
    onnx.op_register.insert("GatherND", native_gather_nd);
}

fn native_gather_nd(
    _ctx: &ParsingContext,
    node: &NodeProto,
) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let batch_dims = node.get_attr_opt("batch_dims")?.unwrap_or(0);
    Ok((expand(NativeGatherNd { batch_dims }), vec![]))
}

/// tract's own GatherND op, typed by [`gather_nd_rules`].
#[derive(Debug, Clone, Hash)]
struct NativeGatherNd {
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
        ensure!(
            inputs.len() == 2,
            "{}: {} inputs, expected data and indices",
            self.name(),
            inputs.len()
        );
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
/// indices instead of from data when `batch_dims > 0`): gather-jit's rule
/// ([`gather_jit::ir::ShapeRule`]), `output = indices[:-1] + data[batch_dims + n:]` with
/// `n = indices.shape[-1]`, as equations between the output's dims and the inputs'.
///
/// Ranks, `batch_dims` and `n` come from the model file, so the rule checks every one before
/// it is used in arithmetic, with ONNX's limits (as ONNX Runtime, a model outside them fails to
/// load): both ranks at least 1, `batch_dims < min(ranks)`, `1 <= n <= rank(data) - batch_dims`.
/// The ranks are checked as soon as they are known, `n` once it is.
fn gather_nd_rules<'r, 'p: 'r>(
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

/// A dim of one of a GatherND's inputs, for [`gather_nd_rules`]: the shape rule moves dims
/// from the inputs to the output, and the solver equates each of the output's dims with the
/// input dim it came from. Only the index depth's value is known.
#[derive(Clone, Copy, Debug)]
struct InputDim {
    /// 0 for data, 1 for indices.
    input: usize,
    /// The dim of that input.
    dim: usize,
    /// The index depth's value.
    value: Option<usize>,
}

impl Dim for InputDim {
    fn value(&self) -> Option<usize> {
        self.value
    }

    // ONNX's GatherND multiplies no dims (only OpenVINO's GatherND-5 flattens its batch dims),
    // and an input dim cannot stand for a product.
    fn checked_mul_dim(&self, _: &InputDim) -> Option<InputDim> {
        None
    }

    fn checked_mul_value(&self, _: usize) -> Option<InputDim> {
        None
    }

    fn exact_div_value(&self, _: usize) -> Option<InputDim> {
        None
    }
}

/// A tract dim as gather-jit's shape rule takes it ([`gather_jit::ir::Dim`]): neither the
/// trait nor `TDim` is this crate's, hence the newtype. Its dims are never negative (see
/// [`tract_dims`]).
#[derive(Clone, Debug)]
struct TractDim(TDim);

impl Dim for TractDim {
    fn value(&self) -> Option<usize> {
        self.0.to_i64().ok().and_then(|v| usize::try_from(v).ok())
    }

    fn checked_mul_dim(&self, other: &TractDim) -> Option<TractDim> {
        match (self.value(), other.value()) {
            (Some(a), Some(b)) => a.checked_mul(b).and_then(TractDim::known),
            _ => Some(TractDim(self.0.clone() * &other.0)),
        }
    }

    fn checked_mul_value(&self, factor: usize) -> Option<TractDim> {
        self.checked_mul_dim(&TractDim::known(factor)?)
    }

    fn exact_div_value(&self, divisor: usize) -> Option<TractDim> {
        self.value()?
            .exact_div_value(divisor)
            .and_then(TractDim::known)
    }
}

impl TractDim {
    /// A known value, if tract's `i64` dims hold it.
    fn known(value: usize) -> Option<TractDim> {
        i64::try_from(value).ok().map(|v| TractDim(TDim::Val(v)))
    }
}

/// `dims` for gather-jit's shape rule; an error if one is negative (see [`known_dim`]).
fn tract_dims(op: &str, dims: &[TDim]) -> TractResult<Vec<TractDim>> {
    dims.iter()
        .map(|dim| {
            known_dim(dim).with_context(|| op.to_string())?;
            Ok(TractDim(dim.clone()))
        })
        .collect()
}

/// gather-jit's shape-rule error as tract's. The index depth keeps the words this crate's
/// rules have always used for it ("index depth"), which the errors of models that fail to
/// load name.
fn rule_error(error: gather_jit::Error) -> TractError {
    match error {
        gather_jit::Error::IndexDepthOutOfRange { op, depth, max, .. } => format_err!(
            "{op}: index depth {depth} (the indices' last dim) must be in 1..={max} (data rank minus batch_dims)"
        ),
        other => other.into(),
    }
}

/// A dim's value as a `usize`: `None` while symbolic, an error when negative. tract's facts
/// assert non-negative dims, but its own `to_usize` would cast a negative one to a huge one,
/// so this does not rely on that assertion.
fn known_dim(dim: &TDim) -> TractResult<Option<usize>> {
    match dim.to_i64() {
        Ok(value) => usize::try_from(value)
            .map(Some)
            .map_err(|_| format_err!("dim {value} is negative")),
        Err(_) => Ok(None),
    }
}

/// The bytes of a tensor of `dt` and `shape`; an error if they overflow a `usize`.
fn tensor_bytes(dt: DatumType, shape: &[usize]) -> TractResult<usize> {
    if shape.contains(&0) {
        return Ok(0);
    }
    shape
        .iter()
        .try_fold(dt.size_of(), |bytes, &dim| bytes.checked_mul(dim))
        .ok_or_else(|| {
            format_err!("a {dt:?} tensor of shape {shape:?} has more bytes than fit in memory")
        })
}

/// Outputs of at most this many bytes are allocated without [`probe_allocation`] first: a
/// refusal that small means the allocator cannot find one page, and then the allocations that
/// follow every evaluation whatever its output (the output value's `Arc`, tract's vectors of
/// values) abort the process anyway, so a probe could only move the abort, at a cost per call
/// (an aligned allocation and its release) that the smallest gathers would feel.
const PROBE_FROM_BYTES: usize = 4096;

/// Checks that a tensor of `dt` and `shape` fits in memory now: its size does not overflow, and
/// the allocator grants a block of its bytes at tract's alignment (then freed at once). Call
/// it before `Tensor::uninitialized_dt`, `Tensor::zero_dt`, `Tensor::from_raw_dt` and the like
/// when the shape comes from untrusted input: tract allocates a tensor's `Blob` infallibly and
/// panics ("failed to allocate") when the allocator refuses, where this returns an error that
/// names the bytes. Another thread may take the memory between this check and the
/// allocation, so it narrows that window rather than closing it.
///
/// # Errors
/// The size overflows, or the allocator refuses it.
pub fn check_allocation(dt: DatumType, shape: &[usize]) -> TractResult<()> {
    let bytes = tensor_bytes(dt, shape)?;
    probe_allocation(bytes, || format!("a {dt:?} tensor of shape {shape:?}"))
}

/// Asks the allocator for `bytes` at tract's tensor alignment (`vector_size()`, as
/// `Tensor::uninitialized_dt` asks), and frees them at once; `what` names them in the error.
fn probe_allocation(bytes: usize, what: impl FnOnce() -> String) -> TractResult<()> {
    if bytes == 0 {
        return Ok(());
    }
    let refused = |what: String| format_err!("could not allocate {bytes} bytes for {what}");
    let Ok(layout) = std::alloc::Layout::from_size_align(bytes, vector_size()) else {
        return Err(refused(what()));
    };
    // SAFETY: the layout's size is not zero. `black_box` keeps the optimiser from removing
    // the unused allocation and folding its null check to "granted" (which it does).
    let block = std::hint::black_box(unsafe { std::alloc::alloc(layout) });
    if block.is_null() {
        return Err(refused(what()));
    }
    // SAFETY: `block` was allocated just above with this layout and is not used after.
    unsafe { std::alloc::dealloc(block, layout) };
    Ok(())
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
    /// validation when every dim is known (its size checks too), gather-jit's rule over
    /// `TDim`s otherwise (every rank, axis, `batch_dims` and depth checked as gather-jit checks
    /// them, since a hand-built op or a model file may hold any).
    fn output_shape(&self, data: &[TDim], indices: &[TDim]) -> TractResult<TVec<TDim>> {
        let concrete = |dims: &[TDim]| -> TractResult<Option<Vec<usize>>> {
            let mut known = Vec::new();
            for dim in dims {
                match known_dim(dim).with_context(|| format!("{}", self.name()))? {
                    Some(dim) => known.push(dim),
                    None => return Ok(None),
                }
            }
            Ok(Some(known))
        };
        if let (Some(data), Some(indices)) = (concrete(data)?, concrete(indices)?) {
            let validated = Signature::new(self.op, &data, &indices).validate()?;
            return Ok(validated
                .output_shape()
                .iter()
                .map(|&d| d.to_dim())
                .collect());
        }
        let name = self.name();
        let data = tract_dims(&name, data)?;
        let indices = tract_dims(&name, indices)?;
        // As gather-jit's ONNX flavor, which `signature` builds.
        let (_, shape) =
            output_shape(self.op, Flavor::Onnx, &data, &indices).map_err(rule_error)?;
        Ok(shape.into_iter().map(|dim| dim.0).collect())
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
            let shape = kernel.output_shape();
            // The validated signature bounds the output's bytes by `isize::MAX`, but not by the
            // memory there is: tract's `Blob` panics when the allocator refuses, so the exact
            // layout it will ask for is asked for here first, and a refusal becomes an error.
            // The block is freed again because a `Blob` cannot adopt one; tract allocates its
            // own just after.
            let bytes = tensor_bytes(data.datum_type(), shape)?;
            if bytes > PROBE_FROM_BYTES {
                probe_allocation(bytes, || {
                    format!("{}'s output of shape {shape:?}", self.name())
                })?;
            }
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
        ensure!(
            inputs.len() == 2,
            "{}: {} inputs, expected data and indices",
            self.name(),
            inputs.len()
        );
        let shape = self.output_shape(&inputs[0].shape.to_tvec(), &inputs[1].shape.to_tvec())?;
        Ok(tvec!(inputs[0].datum_type.fact(&*shape)))
    }

    as_op!();
}

// Expected shapes written by hand from ONNX's Gather-13 and GatherND-13.
#[cfg(test)]
mod tests {
    use super::*;

    fn dims(scope: &SymbolScope, dims: &[&str]) -> Vec<TractDim> {
        dims.iter()
            .map(|d| match d.parse::<i64>() {
                Ok(n) => TractDim(TDim::Val(n)),
                Err(_) => TractDim(scope.sym(d).into()),
            })
            .collect()
    }

    fn shape(op: GatherOp, data: &[&str], indices: &[&str]) -> gather_jit::Result<String> {
        let scope = SymbolScope::default();
        let (_, out) = output_shape(
            op,
            Flavor::Onnx,
            &dims(&scope, data),
            &dims(&scope, indices),
        )?;
        let out: Vec<String> = out.iter().map(|d| d.0.to_string()).collect();
        Ok(out.join(","))
    }

    #[test]
    fn tdims_go_through_gather_jits_rule() {
        let gather = GatherOp::Gather {
            axis: 0,
            batch_dims: 0,
        };
        assert_eq!(shape(gather, &["V", "64"], &["B", "S"]).unwrap(), "B,S,64");
        let nd = GatherOp::GatherNd { batch_dims: 1 };
        assert_eq!(
            shape(nd, &["N", "3", "4"], &["N", "T", "1"]).unwrap(),
            "N,T,4"
        );
        let elements = GatherOp::GatherElements { axis: 1 };
        assert_eq!(shape(elements, &["N", "9"], &["N", "2"]).unwrap(), "N,2");
        let e = shape(nd, &["N", "3", "4"], &["N", "T", "D"]).unwrap_err();
        assert_eq!(e.category(), "symbolic dim");
    }

    #[test]
    fn tdim_arithmetic_is_checked_where_the_values_are_known() {
        let scope = SymbolScope::default();
        let [n, three] = [&scope.sym("N").into(), &TDim::Val(3)].map(|d| TractDim(d.clone()));
        assert_eq!(
            three.checked_mul_dim(&three).and_then(|d| d.value()),
            Some(9)
        );
        assert_eq!(
            n.checked_mul_value(3).map(|d| d.0.to_string()),
            Some("3*N".into())
        );
        assert!(n.exact_div_value(2).is_none());
        assert_eq!(
            TractDim(TDim::Val(36))
                .exact_div_value(18)
                .and_then(|d| d.value()),
            Some(2)
        );
        let huge = TractDim(TDim::Val(i64::MAX));
        assert!(huge.checked_mul_value(2).is_none());
        assert_eq!(TractDim(TDim::Val(-2)).value(), None);
    }
}
