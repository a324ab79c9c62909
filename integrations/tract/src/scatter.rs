//! The scatters: the parsers that turn ONNX `ScatterND`, `ScatterElements` and the deprecated
//! `Scatter` into [`JitScatter`] ops (or tract's own ops behind this crate's rules), their
//! inference rules, and [`JitScatter`], the typed op that runs a gather-jit scatter kernel.
//!
//! A scatter's output is its data with the updates written in, so the op writes into its data
//! tensor itself when tract hands it the only reference to that tensor (a value no other node
//! reads any more, a model input passed by value): the cost is then the updates', not the
//! tensor's, which is what a KV-cache write needs. Otherwise the kernel writes a fresh output
//! in one pass (data copied, updates applied).

use crate::guard::{PROBE_FROM_BYTES, plain_bytes, probe_allocation, tensor_bytes};
use crate::op::{dtype_of, index_type_of};
use gather_jit::KernelCache;
use gather_jit::scatter::{Reduction, ScatterOp, ScatterSignature};
use tract_onnx::model::ParsingContext;
use tract_onnx::pb::NodeProto;
use tract_onnx::tract_hir::internal::*;
use tract_onnx::tract_hir::ops::expandable::{Expansion, expand};
use tract_onnx::tract_hir::tract_core::ops::array::{
    ScatterElements as NativeScatterElements, ScatterNd as NativeScatterNd, ScatterReduction,
};
use tract_onnx::tract_hir::tract_core::ops::cast::wire_cast;

/// gather-jit's reduction for tract's (ONNX's `reduction` attribute).
pub fn reduction_of(reduction: ScatterReduction) -> Reduction {
    match reduction {
        ScatterReduction::None => Reduction::None,
        ScatterReduction::Add => Reduction::Sum,
        ScatterReduction::Mul => Reduction::Prod,
        ScatterReduction::Min => Reduction::Min,
        ScatterReduction::Max => Reduction::Max,
    }
}

/// Which scatter a node is, with its raw attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// `ScatterND`.
    Nd,
    /// `ScatterElements` and `Scatter` along `axis` (negative counts from data's rank).
    Elements { axis: i64 },
}

fn reduction_attr(node: &NodeProto) -> TractResult<ScatterReduction> {
    ScatterReduction::parse(node.get_attr_opt("reduction")?.unwrap_or("none"))
}

pub(crate) fn scatter_nd(
    _ctx: &ParsingContext,
    node: &NodeProto,
) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let reduction = reduction_attr(node)?;
    Ok((
        expand(ScatterExpansion {
            kind: Kind::Nd,
            reduction,
            jit: true,
        }),
        vec![],
    ))
}

pub(crate) fn scatter_elements(
    _ctx: &ParsingContext,
    node: &NodeProto,
) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let axis = node.get_attr_opt("axis")?.unwrap_or(0);
    let reduction = reduction_attr(node)?;
    Ok((
        expand(ScatterExpansion {
            kind: Kind::Elements { axis },
            reduction,
            jit: true,
        }),
        vec![],
    ))
}

/// As [`scatter_nd`], wiring tract's own op (behind this crate's rules).
pub(crate) fn native_scatter_nd(
    _ctx: &ParsingContext,
    node: &NodeProto,
) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let reduction = reduction_attr(node)?;
    Ok((
        expand(ScatterExpansion {
            kind: Kind::Nd,
            reduction,
            jit: false,
        }),
        vec![],
    ))
}

/// As [`scatter_elements`], wiring tract's own op (behind this crate's rules).
pub(crate) fn native_scatter_elements(
    _ctx: &ParsingContext,
    node: &NodeProto,
) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let axis = node.get_attr_opt("axis")?.unwrap_or(0);
    let reduction = reduction_attr(node)?;
    Ok((
        expand(ScatterExpansion {
            kind: Kind::Elements { axis },
            reduction,
            jit: false,
        }),
        vec![],
    ))
}

/// The inference-time op: checked type and shape rules, then, when the model is typed, a
/// [`JitScatter`] (`jit`, for data gather-jit handles) or tract's own op.
#[derive(Debug, Clone, Hash)]
pub(crate) struct ScatterExpansion {
    kind: Kind,
    reduction: ScatterReduction,
    jit: bool,
}

impl Expansion for ScatterExpansion {
    fn name(&self) -> StaticName {
        match (self.jit, self.kind) {
            (true, Kind::Nd) => "JitScatterND".into(),
            (true, Kind::Elements { .. }) => "JitScatterElements".into(),
            (false, Kind::Nd) => "ScatterND".into(),
            (false, Kind::Elements { .. }) => "ScatterElements".into(),
        }
    }

    fn rules<'r, 'p: 'r, 's: 'r>(
        &'s self,
        s: &mut Solver<'r>,
        inputs: &'p [TensorProxy],
        outputs: &'p [TensorProxy],
    ) -> InferenceResult {
        scatter_rules(self.kind, s, inputs, outputs)
    }

    fn wire(
        &self,
        prefix: &str,
        model: &mut TypedModel,
        inputs: &[OutletId],
    ) -> TractResult<TVec<OutletId>> {
        ensure!(
            inputs.len() == 3,
            "{}: {} inputs, expected data, indices and updates",
            self.name(),
            inputs.len()
        );
        // As tract: data and updates (one type in ONNX) are cast to their common type.
        let (data, updates) = (
            model.outlet_fact(inputs[0])?.datum_type,
            model.outlet_fact(inputs[2])?.datum_type,
        );
        let common = DatumType::super_type_for([data, updates]).ok_or_else(|| {
            format_err!(
                "{}: data of {data:?} and updates of {updates:?} have no common type",
                self.name()
            )
        })?;
        let cast = wire_cast(prefix, model, &[inputs[0], inputs[2]], common)?;
        let wires = [cast[0], inputs[1], cast[1]];
        let rank = model.outlet_fact(inputs[0])?.rank();
        let indices = model.outlet_fact(inputs[1])?.datum_type;
        let jit = self.jit && dtype_of(common).is_some() && index_type_of(indices).is_some();
        if jit {
            let op = match self.kind {
                Kind::Nd => ScatterOp::Nd,
                // An axis below `-rank` stays as it is, for gather-jit's validation to refuse.
                Kind::Elements { axis } => ScatterOp::Elements {
                    axis: normalise(axis, rank),
                },
            };
            let op = JitScatter {
                op,
                reduction: reduction_of(self.reduction),
            };
            return model.wire_node(prefix, op, &wires);
        }
        // Strings, shape tensors and the like, or `onnx_native`: tract's own ops (the rules
        // checked the axis).
        match self.kind {
            Kind::Nd => model.wire_node(prefix, NativeScatterNd::new(self.reduction), &wires),
            Kind::Elements { axis } => {
                let axis = usize::try_from(normalise(axis, rank))
                    .ok()
                    .filter(|&axis| axis < rank)
                    .ok_or_else(|| {
                        format_err!("ScatterElements: axis {axis} is out of range for rank {rank}")
                    })?;
                let op = NativeScatterElements {
                    axis,
                    reduction: self.reduction,
                };
                model.wire_node(prefix, op, &wires)
            }
        }
    }
}

/// `axis + rank` for an axis in `-rank..0`, any other axis unchanged.
fn normalise(axis: i64, rank: usize) -> i64 {
    let rank = rank as i64;
    match (-rank..0).contains(&axis) {
        true => axis + rank,
        false => axis,
    }
}

/// The scatters' type and shape rules, checked before any arithmetic (tract's own ScatterND
/// rules compute `rank(indices) - 1` unchecked): output of data's shape and of data's and
/// updates' common type (as tract); ScatterND: both ranks at least 1, the index depth `k =
/// indices.shape[-1]` in `1..=rank(data)` once known, then `updates.shape = indices.shape[:-1] +
/// data.shape[k:]`; ScatterElements: data, indices and updates of one rank (at least 1), `axis`
/// in `-rank..rank`, `updates.shape = indices.shape`.
pub(crate) fn scatter_rules<'r, 'p: 'r>(
    kind: Kind,
    s: &mut Solver<'r>,
    inputs: &'p [TensorProxy],
    outputs: &'p [TensorProxy],
) -> InferenceResult {
    check_input_arity(inputs, 3)?;
    check_output_arity(outputs, 1)?;
    s.given_2(
        &inputs[0].datum_type,
        &inputs[2].datum_type,
        move |s, data, updates| {
            let common = DatumType::super_type_for([data, updates]).ok_or_else(|| {
                format_err!("data of {data:?} and updates of {updates:?} have no common type")
            })?;
            s.equals(&outputs[0].datum_type, common)
        },
    )?;
    s.equals(&outputs[0].shape, &inputs[0].shape)?;
    match kind {
        Kind::Nd => s.given_2(
            &inputs[0].rank,
            &inputs[1].rank,
            move |s, data_rank, indices_rank| {
                ensure!(
                    data_rank >= 1 && indices_rank >= 1,
                    "ScatterND: data of rank {data_rank} and indices of rank {indices_rank} (both need at least 1)"
                );
                let (p, q) = (data_rank as usize, indices_rank as usize);
                s.given(&inputs[1].shape[q - 1], move |s, depth| {
                    // A symbolic depth leaves the updates' rank open.
                    let Ok(depth) = depth.to_i64() else {
                        return Ok(());
                    };
                    let k = usize::try_from(depth)
                        .ok()
                        .filter(|k| (1..=p).contains(k))
                        .ok_or_else(|| {
                            format_err!(
                                "ScatterND: index depth {depth} (the indices' last dim) must be in 1..={p} (data's rank)"
                            )
                        })?;
                    let updates_rank = q - 1 + p - k;
                    s.equals(&inputs[2].rank, updates_rank as i64)?;
                    for dim in 0..q - 1 {
                        s.equals(&inputs[2].shape[dim], &inputs[1].shape[dim])?;
                    }
                    for dim in k..p {
                        s.equals(&inputs[2].shape[q - 1 + dim - k], &inputs[0].shape[dim])?;
                    }
                    Ok(())
                })
            },
        ),
        Kind::Elements { axis } => {
            s.equals(&inputs[0].rank, &inputs[1].rank)?;
            s.equals(&inputs[1].rank, &inputs[2].rank)?;
            s.equals(&inputs[1].shape, &inputs[2].shape)?;
            s.given(&inputs[0].rank, move |_, rank| {
                ensure!(
                    rank >= 1,
                    "ScatterElements: data of rank {rank} (it needs at least 1)"
                );
                ensure!(
                    (-rank..rank).contains(&axis),
                    "ScatterElements: axis {axis} is out of range for rank {rank}"
                );
                Ok(())
            })
        }
    }
}

/// A scatter run by gather-jit kernels under ONNX rules (`ScatterND-18`, `ScatterElements-18`,
/// and the older opsets and `Scatter`, which are subsets): the output is data's type and shape,
/// the updates applied in index order (with `none` the last of duplicate indices wins, a
/// reduction folds in that order); negative indices count from the end; any other index out of
/// range is an error naming its position and value, found before anything is written.
///
/// When its data input is the only reference to its tensor, the op writes into that tensor
/// (in place); otherwise it writes a fresh output.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JitScatter {
    /// The op and its attributes (the axis normalised by the ONNX loader).
    pub op: ScatterOp,
    /// How an update combines with the element it lands on.
    pub reduction: Reduction,
}

impl JitScatter {
    /// The signature of one call on tensors of these types and shapes: ONNX rules, gather-jit's
    /// validation deciding.
    fn signature(
        &self,
        data: (DatumType, &[usize]),
        indices: (DatumType, &[usize]),
        updates: (DatumType, &[usize]),
    ) -> TractResult<ScatterSignature> {
        let name = self.name();
        ensure!(
            data.0 == updates.0,
            "{name}: data of {:?} and updates of {:?} (one type expected)",
            data.0,
            updates.0
        );
        let dtype = dtype_of(data.0)
            .ok_or_else(|| format_err!("{name}: unsupported data type {:?}", data.0))?;
        let index_type = index_type_of(indices.0)
            .ok_or_else(|| format_err!("{name}: unsupported index type {:?}", indices.0))?;
        Ok(ScatterSignature::new(self.op, data.1, indices.1, updates.1)
            .with_reduction(self.reduction)
            .with_dtype(dtype)
            .with_index_type(index_type))
    }

    /// The rank rules of [`scatter_rules`] on facts whose dims are not all known (gather-jit's
    /// validation decides the rest when the op runs).
    fn check_symbolic(
        &self,
        data: &TypedFact,
        indices: &TypedFact,
        updates: &TypedFact,
    ) -> TractResult<()> {
        let name = self.name();
        let (p, q, u) = (data.rank(), indices.rank(), updates.rank());
        match self.op {
            ScatterOp::Nd => {
                ensure!(
                    p >= 1 && q >= 1,
                    "{name}: data of rank {p} and indices of rank {q} (both need at least 1)"
                );
                if let Ok(depth) = indices.shape[q - 1].to_i64() {
                    let k = usize::try_from(depth)
                        .ok()
                        .filter(|k| (1..=p).contains(k))
                        .ok_or_else(|| {
                            format_err!("{name}: index depth {depth} must be in 1..={p}")
                        })?;
                    ensure!(
                        u == q - 1 + p - k,
                        "{name}: updates of rank {u}, expected {} (indices.shape[:-1] + data.shape[k:])",
                        q - 1 + p - k
                    );
                }
            }
            ScatterOp::Elements { axis } => {
                ensure!(
                    p >= 1 && p == q && q == u,
                    "{name}: data, indices and updates of ranks {p}, {q} and {u} (one rank, at least 1)"
                );
                ensure!(
                    usize::try_from(axis).is_ok_and(|axis| axis < p),
                    "{name}: axis {axis} is out of range for rank {p}"
                );
            }
            ScatterOp::Update { .. } => bail!("{name}: ScatterUpdate is not an ONNX op"),
        }
        Ok(())
    }
}

impl Op for JitScatter {
    fn name(&self) -> StaticName {
        match self.op {
            ScatterOp::Nd => "JitScatterND".into(),
            ScatterOp::Elements { .. } => "JitScatterElements".into(),
            ScatterOp::Update { .. } => "JitScatterUpdate".into(),
        }
    }

    fn info(&self) -> TractResult<Vec<String>> {
        Ok(vec![format!("{} reduction={}", self.op, self.reduction)])
    }

    op_as_typed_op!();
}

impl EvalOp for JitScatter {
    // The op reads nothing but its inputs, so tract's constant folding may run it too.
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let (data, indices, updates) = args_3!(inputs);
        let signature = self.signature(
            (data.datum_type(), data.shape()),
            (indices.datum_type(), indices.shape()),
            (updates.datum_type(), updates.shape()),
        )?;
        let name = self.name();
        let indices = plain_bytes(&indices, &name, "indices")?;
        let updates = plain_bytes(&updates, &name, "updates")?;
        let datum = data.datum_type();
        let output = KernelCache::global().with_scatter(&signature, |kernel| {
            let shape = kernel.output_shape();
            let bytes = tensor_bytes(datum, shape)?;
            let (indices, updates) = (
                &indices.as_bytes()[..tensor_bytes(indices.datum_type(), indices.shape())?],
                &updates.as_bytes()[..tensor_bytes(updates.datum_type(), updates.shape())?],
            );
            // The only reference to data's tensor: this call owns it, so the kernel writes
            // into it (on an error it is left as it was, and dropped).
            let data = match Arc::try_unwrap(data.into_arc_tensor()) {
                Ok(mut tensor) if tensor.is_plain_ram() => {
                    let mut plain = tensor.try_as_plain_ram_mut()?;
                    let target = plain.as_bytes_mut().get_mut(..bytes).ok_or_else(|| {
                        format_err!("{name}: the data tensor holds fewer bytes than its shape says")
                    })?;
                    kernel.run_bytes_in_place(target, indices, updates)?;
                    return TractResult::Ok(tensor);
                }
                Ok(tensor) => Arc::new(tensor),
                Err(shared) => shared,
            };
            let data = plain_bytes(&data, &name, "data")?;
            // A fresh output: probed first, as the gathers do, since tract's `Blob` panics
            // when the allocator refuses.
            if bytes > PROBE_FROM_BYTES {
                probe_allocation(bytes, || format!("{name}'s output of shape {shape:?}"))?;
            }
            // SAFETY: the element type is plain data (`dtype_of` accepted it), and the kernel
            // writes every byte of the output (data's, then the updates) before the tensor is
            // returned; on an error it is dropped unread.
            let mut output = unsafe { Tensor::uninitialized_dt(datum, shape)? };
            let mut out = output.try_as_plain_ram_mut()?;
            // SAFETY: the signature was built from these tensors' types and shapes (plain data,
            // data's and updates' one type), `plain_bytes` checked that each input holds at
            // least the bytes its type and shape say, native-endian and C-contiguous in host
            // memory (tract's plain tensors always are); the output is a fresh plain allocation
            // of data's type and shape, so it overlaps no input; no other thread sees it during
            // the call.
            unsafe {
                kernel.call(
                    data.as_ptr_unchecked::<u8>(),
                    indices.as_ptr(),
                    updates.as_ptr(),
                    out.as_ptr_mut_unchecked::<u8>(),
                )?
            };
            TractResult::Ok(output)
        })??;
        Ok(tvec!(output.into_tvalue()))
    }
}

impl TypedOp for JitScatter {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let name = self.name();
        let [data, indices, updates] = inputs else {
            bail!(
                "{name}: {} inputs, expected data, indices and updates",
                inputs.len()
            );
        };
        // An exotic fact (block-quantized weights, packed matrices) describes bytes that are
        // not its type and shape's, which the kernels cannot read.
        ensure!(
            inputs.iter().all(|fact| fact.is_plain()),
            "{name}: takes plain tensors, not {data:?}, {indices:?} and {updates:?}"
        );
        let concrete = |fact: &TypedFact| fact.shape.as_concrete().map(<[usize]>::to_vec);
        match (concrete(data), concrete(indices), concrete(updates)) {
            (Some(d), Some(i), Some(u)) => {
                self.signature(
                    (data.datum_type, &d),
                    (indices.datum_type, &i),
                    (updates.datum_type, &u),
                )?
                .validate()?;
            }
            _ => {
                ensure!(
                    data.datum_type == updates.datum_type,
                    "{name}: data of {:?} and updates of {:?} (one type expected)",
                    data.datum_type,
                    updates.datum_type
                );
                self.check_symbolic(data, indices, updates)?;
            }
        }
        Ok(tvec!(data.datum_type.fact(data.shape.clone())))
    }

    as_op!();
}
