//! ONNX Runtime's `com.microsoft.GatherBlockQuantized`: the parser, its inference rules and
//! [`GatherBlockQuantized`], the typed op that runs a gather-jit quantized kernel (or, for
//! [`crate::onnx_native`], gather-jit's interpreter: tract's own op takes only some of the
//! op's forms, the last axis quantized).
//!
//! The op reads ONNX Runtime's uint8 form: `data` uint8 with its last axis packed (two 4-bit
//! values a byte, the even one in the low nibble, or one 8-bit value), `scales` float32 or
//! float16, optional `zero_points` uint8 packed as data along their own last axis. Models whose
//! data are INT4 / UINT4 tensors, as ONNX Runtime's quantizer writes them, reach it through
//! [`crate::model_for_path`], which rewrites those tensors into this form first.

use crate::dims::{TractDim, rule_error, tract_dims};
use crate::guard::{PROBE_FROM_BYTES, plain_bytes, probe_allocation, tensor_bytes};
use crate::op::index_type_of;
use gather_jit::quant::{
    Quantization, QuantizedLayout, interpret_quantized, logical_data_shape, quantized_output_shape,
};
use gather_jit::{BlockQuantization, DType, KernelCache, QuantizedSignature};
use tract_onnx::model::ParsingContext;
use tract_onnx::pb::NodeProto;
use tract_onnx::tract_hir::internal::*;
use tract_onnx::tract_hir::ops::expandable::{Expansion, expand};

/// The domain of ONNX Runtime's contrib ops.
pub(crate) const MS_DOMAIN: &str = "com.microsoft";

/// What runs a [`GatherBlockQuantized`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuantizedEngine {
    /// A gather-jit kernel from the process-wide cache.
    Jit,
    /// gather-jit's interpreter (`gather_jit::interp::interpret_quantized`): the definition as
    /// code, one value at a time, which [`crate::onnx_native`] runs in place of tract's own
    /// (which takes only some of the op's forms).
    Interpreter,
}

/// ONNX Runtime's `GatherBlockQuantized` on its uint8 form: inputs data (`u8`, last axis
/// packed), indices (any integer type gather-jit takes), scales (`f32` or `f16`, the output's
/// type) and, when [`BlockQuantization::zero_points`] is set, zero points (`u8`, packed as data).
/// Negative indices wrap; an index outside `[-dim, dim)` is an error naming its position and
/// value (ONNX Runtime writes zeros for it instead).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GatherBlockQuantized {
    /// The node's attributes, `zero_points` telling whether the fourth input is there.
    pub quantization: BlockQuantization,
    /// What runs it.
    pub engine: QuantizedEngine,
}

/// gather-jit's float type for the scales' (and output's) datum type, if it has one.
fn scale_dtype(datum: DatumType) -> Option<DType> {
    match datum {
        DatumType::F32 => Some(DType::F32),
        DatumType::F16 => Some(DType::F16),
        _ => None,
    }
}

impl GatherBlockQuantized {
    fn inputs(&self) -> usize {
        3 + usize::from(self.quantization.zero_points)
    }

    fn quantization(&self) -> Quantization {
        Quantization::Block(self.quantization)
    }

    /// The output shape for stored data of `data` dims and indices of `indices` dims, symbolic
    /// or not: gather-jit's shape rules (stored to logical data, then Gather's composition).
    fn output_shape(&self, data: &[TDim], indices: &[TDim]) -> TractResult<TVec<TDim>> {
        let name = self.name();
        let stored = tract_dims(&name, data)?;
        let indices = tract_dims(&name, indices)?;
        let logical = logical_data_shape(self.quantization(), &stored).map_err(rule_error)?;
        let output =
            quantized_output_shape(self.quantization(), &logical, &indices).map_err(rule_error)?;
        Ok(output.into_iter().map(|TractDim(dim)| dim).collect())
    }

    /// The signature of a call on stored data of shape `data`, indices of `index_type` and
    /// shape `indices`, scales of `scales`.
    fn signature(
        &self,
        data: &[usize],
        indices: &[usize],
        index_type: DatumType,
        scales: DatumType,
    ) -> TractResult<QuantizedSignature> {
        let name = self.name();
        let index_type = index_type_of(index_type)
            .ok_or_else(|| format_err!("{name}: unsupported index type {index_type:?}"))?;
        let dtype = scale_dtype(scales).ok_or_else(|| {
            format_err!("{name}: scales must be float32 or float16, not {scales:?}")
        })?;
        let logical = logical_data_shape(self.quantization(), data)?;
        Ok(
            QuantizedSignature::block_quantized(&logical, indices, self.quantization)
                .with_dtype(dtype)
                .with_index_type(index_type),
        )
    }

    /// Checks the datum types and the shapes of scales and zero points against `layout`, which
    /// was made from data's and the indices' shapes: then every buffer holds exactly the bytes
    /// the layout gives it.
    fn check_inputs(
        &self,
        layout: &QuantizedLayout,
        data: DatumType,
        scales: (DatumType, &[usize]),
        zero_points: Option<(DatumType, &[usize])>,
    ) -> TractResult<()> {
        let name = self.name();
        ensure!(
            data == DatumType::U8,
            "{name}: data must be uint8 (ONNX Runtime's packed form), not {data:?}"
        );
        ensure!(
            scales.1 == layout.scales_shape(),
            "{name}: scales have shape {:?}, the data {:?} with {} need {:?}",
            scales.1,
            layout.data_bytes_shape(),
            layout.signature(),
            layout.scales_shape()
        );
        if let (Some((datum, shape)), Some(expected)) =
            (zero_points, layout.zero_points_bytes_shape())
        {
            ensure!(
                datum == DatumType::U8,
                "{name}: zero points must be uint8, not {datum:?}"
            );
            ensure!(
                shape == expected,
                "{name}: zero points have shape {shape:?}, the scales {:?} need {expected:?} \
                 (packed as data along their last axis)",
                layout.scales_shape()
            );
        }
        Ok(())
    }

    fn arity(&self, got: usize) -> TractResult<()> {
        ensure!(
            got == self.inputs(),
            "{}: {got} inputs, expected {} (data, indices, scales{})",
            self.name(),
            self.inputs(),
            if self.quantization.zero_points {
                ", zero_points"
            } else {
                ""
            }
        );
        Ok(())
    }
}

impl Op for GatherBlockQuantized {
    fn name(&self) -> StaticName {
        match self.engine {
            QuantizedEngine::Jit => "JitGatherBlockQuantized".into(),
            QuantizedEngine::Interpreter => "InterpretedGatherBlockQuantized".into(),
        }
    }

    fn info(&self) -> TractResult<Vec<String>> {
        let q = self.quantization;
        Ok(vec![format!(
            "gather_axis={}, quantize_axis={}, block_size={}, bits={}{}",
            q.gather_axis,
            q.quantize_axis,
            q.block_size,
            q.bits,
            if q.zero_points { ", zero_points" } else { "" }
        )])
    }

    op_as_typed_op!();
}

impl EvalOp for GatherBlockQuantized {
    // The op reads nothing but its inputs, so tract's constant folding may run it too.
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        self.arity(inputs.len())?;
        // The kernels and the interpreter read plain host bytes (see `plain_bytes`).
        let name = self.name();
        let data = plain_bytes(&inputs[0], &name, "data")?;
        let indices = plain_bytes(&inputs[1], &name, "indices")?;
        let scales = plain_bytes(&inputs[2], &name, "scales")?;
        let zero_points = (inputs.get(3))
            .map(|zp| plain_bytes(zp, &name, "zero points"))
            .transpose()?;
        let zero_points = zero_points.as_ref();
        let signature = self.signature(
            data.shape(),
            indices.shape(),
            indices.datum_type(),
            scales.datum_type(),
        )?;
        let dt = scales.datum_type();
        let zp_facts = zero_points.map(|zp| (zp.datum_type(), zp.shape()));
        let output = match self.engine {
            QuantizedEngine::Jit => {
                KernelCache::global().with_quantized(&signature, |kernel| {
                    let layout = kernel.layout();
                    self.check_inputs(layout, data.datum_type(), (dt, scales.shape()), zp_facts)?;
                    let shape = kernel.output_shape();
                    allocate_check(dt, shape, &self.name())?;
                    // SAFETY: the output type is f32 or f16 (`scale_dtype` accepted it), plain
                    // data, and the kernel writes every byte before the tensor is returned (on an
                    // error it is dropped unread).
                    let mut output = unsafe { Tensor::uninitialized_dt(dt, shape)? };
                    let mut out = output.try_as_plain_ram_mut()?;
                    let zp = zero_points.map_or(std::ptr::null(), |zp| {
                        // SAFETY: `check_inputs` found the zero points `u8`.
                        unsafe { zp.as_ptr_unchecked::<u8>() }
                    });
                    // SAFETY: the kernel's layout was made from data's and the indices' shapes and
                    // types, and `check_inputs` checked data `u8` and the scales' and zero points'
                    // shapes against it (the scales' type is the signature's), and `plain_bytes`
                    // that each input's bytes are in host memory and at least as many as its type
                    // and shape say, so each holds the bytes the kernel reads, native-endian and
                    // C-contiguous (tract's plain tensors always are); a null `zp` is never read, since the signature then has
                    // no zero points. The output is a fresh allocation of the kernel's output
                    // shape, so it overlaps no input, and no other thread sees it during the call.
                    unsafe {
                        kernel.call_parallel(
                            data.as_ptr_unchecked::<u8>(),
                            indices.as_ptr_unchecked::<u8>(),
                            scales.as_ptr_unchecked::<u8>(),
                            zp,
                            out.as_ptr_mut_unchecked::<u8>(),
                            0,
                        )?
                    };
                    TractResult::Ok(output)
                })??
            }
            QuantizedEngine::Interpreter => {
                let layout = signature.validate()?;
                self.check_inputs(&layout, data.datum_type(), (dt, scales.shape()), zp_facts)?;
                let bytes = interpret_quantized(
                    &layout,
                    data.as_bytes(),
                    indices.as_bytes(),
                    scales.as_bytes(),
                    zero_points.map(|zp| zp.as_bytes()),
                )?;
                allocate_check(dt, layout.output_shape(), &self.name())?;
                // SAFETY: `bytes` are the interpreter's output for this layout: one f32 or
                // f16 (the scales' type, `dt`) per element of the output shape.
                unsafe { Tensor::from_raw_dt(dt, layout.output_shape(), &bytes)? }
            }
        };
        Ok(tvec!(output.into_tvalue()))
    }
}

/// Probes the allocation of an output of `dt` and `shape` (see `JitGather`'s eval): tract's
/// `Blob` panics when the allocator refuses.
fn allocate_check(dt: DatumType, shape: &[usize], name: &str) -> TractResult<()> {
    let bytes = tensor_bytes(dt, shape)?;
    if bytes > PROBE_FROM_BYTES {
        probe_allocation(bytes, || format!("{name}'s output of shape {shape:?}"))?;
    }
    Ok(())
}

impl TypedOp for GatherBlockQuantized {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        self.arity(inputs.len())?;
        // An exotic fact describes bytes that are not its type and shape's (see `JitGather`).
        ensure!(
            inputs.iter().all(|fact| fact.is_plain()),
            "{}: takes plain tensors",
            self.name()
        );
        let data = inputs[0].shape.to_tvec();
        let indices = inputs[1].shape.to_tvec();
        let shape = self.output_shape(&data, &indices)?;
        let (Some(data), Some(indices)) =
            (inputs[0].shape.as_concrete(), inputs[1].shape.as_concrete())
        else {
            // Symbolic dims: the rest is checked when the model runs.
            return Ok(tvec!(inputs[2].datum_type.fact(&*shape)));
        };
        let layout = self
            .signature(data, indices, inputs[1].datum_type, inputs[2].datum_type)?
            .validate()?;
        if let Some(scales) = inputs[2].shape.as_concrete() {
            let zero_points = inputs
                .get(3)
                .and_then(|zp| Some((zp.datum_type, zp.shape.as_concrete()?)));
            self.check_inputs(
                &layout,
                inputs[0].datum_type,
                (inputs[2].datum_type, scales),
                zero_points,
            )?;
        }
        Ok(tvec!(inputs[2].datum_type.fact(&*shape)))
    }

    as_op!();
}

/// The attributes of a `GatherBlockQuantized` node, with ONNX Runtime's defaults (gather axis
/// 0, quantize axis 1, block size 128, 4 bits) and its limits (`bits` 4 or 8 here: ONNX
/// Runtime also reads 2-bit uint8 data, which gather-jit does not; `block_size` a power of two
/// of at least 16); an error names the node.
pub(crate) fn block_quantization(node: &NodeProto) -> TractResult<BlockQuantization> {
    let what = || format!("GatherBlockQuantized node {:?}", node.name);
    ensure!(
        node.domain == MS_DOMAIN,
        "{}: GatherBlockQuantized is a {MS_DOMAIN} op, this node's domain is {:?}",
        what(),
        node.domain
    );
    let gather_axis = node.get_attr_opt("gather_axis")?.unwrap_or(0i64);
    let quantize_axis = node.get_attr_opt("quantize_axis")?.unwrap_or(1i64);
    let block_size = node.get_attr_opt("block_size")?.unwrap_or(128i64);
    let bits = node.get_attr_opt("bits")?.unwrap_or(4i64);
    let bits = match bits {
        4 => 4,
        8 => 8,
        other => bail!(
            "{}: bits={other} is not supported (gather-jit reads 4- and 8-bit values)",
            what()
        ),
    };
    let block_size = usize::try_from(block_size)
        .ok()
        .filter(|b| *b >= 16 && b.is_power_of_two())
        .ok_or_else(|| {
            format_err!(
                "{}: block_size={block_size} must be a power of two of at least 16",
                what()
            )
        })?;
    let zero_points = node.input.get(3).is_some_and(|name| !name.is_empty());
    ensure!(
        (3..=4).contains(&node.input.len()) && node.input[..3].iter().all(|i| !i.is_empty()),
        "{}: inputs {:?}, expected data, indices, scales and optionally zero_points",
        what(),
        node.input
    );
    Ok(BlockQuantization {
        gather_axis,
        quantize_axis,
        block_size,
        bits,
        zero_points,
    })
}

/// The parser of [`crate::register`]: a [`GatherBlockQuantized`] run by a JIT kernel.
pub(crate) fn gather_block_quantized(
    _ctx: &ParsingContext,
    node: &NodeProto,
) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let op = GatherBlockQuantized {
        quantization: block_quantization(node)?,
        engine: QuantizedEngine::Jit,
    };
    Ok((expand(GatherBlockQuantizedExpansion(op)), vec![]))
}

/// The parser of [`crate::register_native`]: a [`GatherBlockQuantized`] run by gather-jit's
/// interpreter.
pub(crate) fn interpreted_gather_block_quantized(
    _ctx: &ParsingContext,
    node: &NodeProto,
) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let op = GatherBlockQuantized {
        quantization: block_quantization(node)?,
        engine: QuantizedEngine::Interpreter,
    };
    Ok((expand(GatherBlockQuantizedExpansion(op)), vec![]))
}

/// The inference-time op: types and shapes by gather-jit's rules, then the typed op.
#[derive(Debug, Clone, Hash)]
pub(crate) struct GatherBlockQuantizedExpansion(GatherBlockQuantized);

impl Expansion for GatherBlockQuantizedExpansion {
    fn name(&self) -> StaticName {
        self.0.name()
    }

    fn rules<'r, 'p: 'r, 's: 'r>(
        &'s self,
        s: &mut Solver<'r>,
        inputs: &'p [TensorProxy],
        outputs: &'p [TensorProxy],
    ) -> InferenceResult {
        check_input_arity(inputs, self.0.inputs())?;
        check_output_arity(outputs, 1)?;
        s.equals(&inputs[0].datum_type, DatumType::U8)?;
        if self.0.quantization.zero_points {
            s.equals(&inputs[3].datum_type, DatumType::U8)?;
        }
        s.equals(&outputs[0].datum_type, &inputs[2].datum_type)?;
        s.equals(&inputs[2].rank, &inputs[0].rank)?;
        s.equals(
            inputs[0].rank.bex() - 1 + inputs[1].rank.bex(),
            outputs[0].rank.bex(),
        )?;
        s.given_2(
            &inputs[0].shape,
            &inputs[1].shape,
            move |s, data, indices| {
                let shape = self.0.output_shape(&data, &indices)?;
                s.equals(&outputs[0].shape, shape)
            },
        )
    }

    fn wire(
        &self,
        prefix: &str,
        model: &mut TypedModel,
        inputs: &[OutletId],
    ) -> TractResult<TVec<OutletId>> {
        self.0.arity(inputs.len())?;
        let scales = model.outlet_fact(inputs[2])?.datum_type;
        ensure!(
            scale_dtype(scales).is_some(),
            "{}: scales must be float32 or float16, not {scales:?}",
            self.name()
        );
        let indices = model.outlet_fact(inputs[1])?.datum_type;
        ensure!(
            index_type_of(indices).is_some(),
            "{}: indices must be integers, not {indices:?}",
            self.name()
        );
        model.wire_node(prefix, self.0.clone(), inputs)
    }
}
