//! [`JitGather`]: the typed op that runs a gather-jit kernel, and the mapping between tract's
//! datum types and gather-jit's.

use crate::dims::{known_dim, rule_error, tract_dims};
use crate::guard::{PROBE_FROM_BYTES, plain_bytes, probe_allocation, tensor_bytes};
use gather_jit::ir::output_shape;
use gather_jit::{DType, Flavor, IndexType, KernelCache, Op as GatherOp, OutputMemory, Signature};
use tract_onnx::tract_hir::internal::*;

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
        // Each eval's output is a new tensor.
        Ok(Signature::new(self.op, data.shape(), indices.shape())
            .with_dtype(dtype)
            .with_index_type(index_type)
            .with_output_memory(OutputMemory::Fresh))
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
    // The op reads nothing but its inputs, so tract's constant folding may run it too.
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let (data, indices) = args_2!(inputs);
        let signature = self.signature(&data, &indices)?;
        // tract's tensors can keep their bytes in a storage of their own (block-quantized
        // weights, packed matrices, device memory); the kernel reads plain host bytes, so each
        // input is brought to plain host memory here, or refused.
        let name = self.name();
        let data = plain_bytes(&data, &name, "data")?;
        let indices = plain_bytes(&indices, &name, "indices")?;
        let output = KernelCache::global().with(&signature, |kernel| {
            let shape = kernel.output_shape();
            // The validated signature bounds the output's bytes by `isize::MAX`, but not by the
            // memory there is: tract's `Blob` panics when the allocator refuses, so the exact
            // layout it will ask for is asked for here first, and a refusal becomes an error.
            // The block is freed again because a `Blob` cannot adopt one; tract allocates its
            // own just after.
            let datum = data.datum_type();
            let bytes = tensor_bytes(datum, shape)?;
            if bytes > PROBE_FROM_BYTES {
                probe_allocation(bytes, || {
                    format!("{}'s output of shape {shape:?}", self.name())
                })?;
            }
            // SAFETY: the element type is plain data (`dtype_of` accepted it), and the kernel
            // writes every byte before the tensor is returned (on an error it is dropped
            // unread).
            let mut output = unsafe { Tensor::uninitialized_dt(datum, kernel.output_shape())? };
            let mut out = output.try_as_plain_ram_mut()?;
            // SAFETY: the signature was built from these tensors' shapes and plain-data types,
            // and `plain_bytes` checked that each input's bytes are in host memory and at least
            // as many as its type and shape say, native-endian and C-contiguous (tract's plain
            // tensors always are); the output is a fresh plain allocation of the kernel's
            // output shape, so it overlaps neither input; no other thread sees it during the
            // call.
            unsafe {
                kernel.call(
                    data.as_ptr_unchecked::<u8>(),
                    indices.as_ptr_unchecked::<u8>(),
                    out.as_ptr_mut_unchecked::<u8>(),
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
        // An exotic fact (block-quantized weights, packed matrices) describes bytes that are
        // not its type and shape's, which the kernels cannot read.
        ensure!(
            inputs.iter().all(|fact| fact.is_plain()),
            "{}: takes plain tensors, not {:?} and {:?}",
            self.name(),
            inputs[0],
            inputs[1]
        );
        let shape = self.output_shape(&inputs[0].shape.to_tvec(), &inputs[1].shape.to_tvec())?;
        Ok(tvec!(inputs[0].datum_type.fact(&*shape)))
    }

    as_op!();
}

// Expected shapes written by hand from ONNX's Gather-13 and GatherND-13.
