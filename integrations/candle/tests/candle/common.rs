//! Random tensors in every layout, their bytes, random indices, and a naive reference of the
//! ops under candle's index rules written from their definitions.

use candle_core::{DType, Device, Tensor};
use float8::F8E4M3;
use gather_jit_workloads::XorShift;
use half::{bf16, f16};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// The data dtypes the issue asks for.
pub const DTYPES: [DType; 7] = [
    DType::U8,
    DType::U32,
    DType::I64,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
];

/// The index dtypes candle's CPU ops take.
pub const INDEX_DTYPES: [DType; 3] = [DType::U8, DType::U32, DType::I64];

/// Every dtype candle's CPU scatters take.
pub const SCATTER_DTYPES: [DType; 10] = [
    DType::U8,
    DType::U32,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
    DType::F8E4M3,
];

/// The index dtypes candle's CPU `scatter_add` and `index_add` take (its `scatter` only the
/// first three).
pub const ADD_INDEX_DTYPES: [DType; 5] =
    [DType::U8, DType::U32, DType::I64, DType::I16, DType::I32];

pub fn cpu() -> Device {
    Device::Cpu
}

/// A contiguous tensor of random bits (NaNs included) of `dtype`.
pub fn random_tensor(dtype: DType, dims: &[usize], rng: &mut XorShift) -> Tensor {
    let count: usize = dims.iter().product();
    let mut next = || rng.next_u64();
    let tensor = match dtype {
        DType::U8 => Tensor::from_vec(
            (0..count).map(|_| next() as u8).collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        DType::U32 => Tensor::from_vec(
            (0..count).map(|_| next() as u32).collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        DType::I64 => Tensor::from_vec(
            (0..count).map(|_| next() as i64).collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        DType::I16 => Tensor::from_vec(
            (0..count).map(|_| next() as i16).collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        DType::I32 => Tensor::from_vec(
            (0..count).map(|_| next() as i32).collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        DType::F8E4M3 => Tensor::from_vec(
            (0..count)
                .map(|_| F8E4M3::from_bits(next() as u8))
                .collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        DType::F16 => Tensor::from_vec(
            (0..count)
                .map(|_| f16::from_bits(next() as u16))
                .collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        DType::BF16 => Tensor::from_vec(
            (0..count)
                .map(|_| bf16::from_bits(next() as u16))
                .collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        DType::F32 => Tensor::from_vec(
            (0..count)
                .map(|_| f32::from_bits(next() as u32))
                .collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        DType::F64 => Tensor::from_vec(
            (0..count)
                .map(|_| f64::from_bits(next()))
                .collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        other => panic!("no random {other:?} tensors"),
    };
    tensor.expect("shape matches the element count")
}

/// The elements of `tensor` in row-major order, as native-endian bytes.
pub fn bytes(tensor: &Tensor) -> Vec<u8> {
    let flat = tensor.flatten_all().expect("flatten");
    match tensor.dtype() {
        DType::U8 => flat.to_vec1::<u8>().expect("u8"),
        DType::U32 => flat
            .to_vec1::<u32>()
            .expect("u32")
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect(),
        DType::I64 => flat
            .to_vec1::<i64>()
            .expect("i64")
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect(),
        DType::I16 => flat
            .to_vec1::<i16>()
            .expect("i16")
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect(),
        DType::I32 => flat
            .to_vec1::<i32>()
            .expect("i32")
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect(),
        DType::F8E4M3 => flat
            .to_vec1::<F8E4M3>()
            .expect("f8e4m3")
            .iter()
            .map(|v| v.to_bits())
            .collect(),
        DType::F16 => flat
            .to_vec1::<f16>()
            .expect("f16")
            .iter()
            .flat_map(|v| v.to_bits().to_ne_bytes())
            .collect(),
        DType::BF16 => flat
            .to_vec1::<bf16>()
            .expect("bf16")
            .iter()
            .flat_map(|v| v.to_bits().to_ne_bytes())
            .collect(),
        DType::F32 => flat
            .to_vec1::<f32>()
            .expect("f32")
            .iter()
            .flat_map(|v| v.to_bits().to_ne_bytes())
            .collect(),
        DType::F64 => flat
            .to_vec1::<f64>()
            .expect("f64")
            .iter()
            .flat_map(|v| v.to_bits().to_ne_bytes())
            .collect(),
        other => panic!("no bytes of {other:?} tensors"),
    }
}

/// The largest value of an index dtype: candle reads it as "zeros".
pub fn maximum(dtype: DType) -> i128 {
    match dtype {
        DType::U8 => u8::MAX as i128,
        DType::U32 => u32::MAX as i128,
        DType::I64 => i64::MAX as i128,
        DType::I16 => i16::MAX as i128,
        DType::I32 => i32::MAX as i128,
        other => panic!("{other:?} is not an index dtype"),
    }
}

/// An index tensor of `dtype` holding `values` (each representable in it).
pub fn index_tensor(values: &[i128], dims: &[usize], dtype: DType) -> Tensor {
    let tensor = match dtype {
        DType::U8 => Tensor::from_vec(
            values.iter().map(|&v| v as u8).collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        DType::U32 => Tensor::from_vec(
            values.iter().map(|&v| v as u32).collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        DType::I64 => Tensor::from_vec(
            values.iter().map(|&v| v as i64).collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        DType::I16 => Tensor::from_vec(
            values.iter().map(|&v| v as i16).collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        DType::I32 => Tensor::from_vec(
            values.iter().map(|&v| v as i32).collect::<Vec<_>>(),
            dims,
            &cpu(),
        ),
        other => panic!("{other:?} is not an index dtype"),
    };
    tensor.expect("shape matches the element count")
}

/// Shapes of rank 1 to `max_rank`, a dim now and then empty.
pub fn dims(max_rank: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(
        prop_oneof![1 => Just(0usize), 12 => 1usize..6],
        1..=max_rank,
    )
}

/// How bad a case's indices may be.
#[derive(Clone, Copy, Debug)]
pub enum Mix {
    /// Every index in range.
    Clean,
    /// Some out of range, negative or at the type's maximum.
    Noisy,
}

pub fn mix() -> impl Strategy<Value = Mix> {
    prop_oneof![3 => Just(Mix::Clean), 2 => Just(Mix::Noisy)]
}

/// A random index into a dim of `size` for an index of `dtype`.
pub fn random_index(size: usize, dtype: DType, mix: Mix, rng: &mut XorShift) -> i128 {
    let size = size as i128;
    let in_range = |rng: &mut XorShift| match size {
        0 => 0,
        _ => (rng.below(size as u64) as i128).min(maximum(dtype) - 1),
    };
    if let Mix::Clean = mix {
        return in_range(rng);
    }
    match rng.below(100) {
        0..88 => in_range(rng),
        88..94 => (size + rng.below(3) as i128).min(maximum(dtype)),
        94..97 => maximum(dtype),
        _ if matches!(dtype, DType::I64 | DType::I32 | DType::I16) => {
            -(rng.below(size as u64 + 2) as i128) - 1
        }
        _ => in_range(rng),
    }
}

/// How a tensor of a given logical shape is laid out in its storage.
#[derive(Clone, Copy, Debug)]
pub enum View {
    /// C-contiguous from offset 0.
    Contiguous,
    /// C-contiguous from a later offset (a narrow of dim 0).
    Offset,
    /// The last two dims transposed in storage.
    Transposed,
    /// Every other element of the last dim.
    Strided,
    /// Dim 0 broadcast from a single row (stride 0).
    Broadcast,
}

pub fn view() -> impl Strategy<Value = View> {
    prop_oneof![
        3 => Just(View::Contiguous),
        1 => Just(View::Offset),
        1 => Just(View::Transposed),
        1 => Just(View::Strided),
        1 => Just(View::Broadcast),
    ]
}

/// `tensor`'s values in the layout `view` (same logical shape and elements, but for
/// `Broadcast`, whose rows all repeat the first).
pub fn lay_out(tensor: &Tensor, view: View) -> Tensor {
    let dims = tensor.dims().to_vec();
    let rank = dims.len();
    let laid = match view {
        View::Contiguous => return tensor.clone(),
        View::Offset if rank >= 1 => {
            let pad = Tensor::zeros_like(&tensor.narrow(0, 0, dims[0].min(1)).expect("narrow"))
                .expect("zeros");
            let padded = Tensor::cat(&[&pad, &pad, tensor], 0).expect("cat");
            padded
                .narrow(0, 2 * pad.dims()[0], dims[0])
                .expect("narrow")
        }
        View::Transposed if rank >= 2 => tensor
            .transpose(rank - 2, rank - 1)
            .and_then(|t| t.contiguous())
            .and_then(|t| t.transpose(rank - 2, rank - 1))
            .expect("transpose"),
        View::Strided if rank >= 1 => {
            let doubled = Tensor::stack(&[tensor, tensor], rank).expect("stack");
            doubled
                .narrow(rank, 0, 1)
                .and_then(|t| t.squeeze(rank))
                .expect("narrow")
        }
        View::Broadcast if rank >= 1 && dims[0] > 0 => tensor
            .narrow(0, 0, 1)
            .and_then(|row| row.contiguous())
            .and_then(|row| row.broadcast_as(dims.as_slice()))
            .expect("broadcast"),
        _ => return tensor.clone(),
    };
    assert_eq!(laid.dims(), tensor.dims());
    laid
}

/// Both ran and agree bit for bit, or both failed.
pub fn same(
    native: candle_core::Result<Tensor>,
    jit: candle_core::Result<Tensor>,
) -> Result<(), TestCaseError> {
    match (native, jit) {
        (Ok(native), Ok(jit)) => {
            prop_assert_eq!(native.dims(), jit.dims());
            prop_assert_eq!(native.dtype(), jit.dtype());
            prop_assert!(
                bytes(&native) == bytes(&jit),
                "values differ:\nnative {native}\njit {jit}"
            );
            Ok(())
        }
        (Err(_), Err(_)) => Ok(()),
        (Ok(native), Err(error)) => Err(TestCaseError::fail(format!(
            "candle ran ({:?}) but the JIT failed: {error}",
            native.dims()
        ))),
        (Err(error), Ok(jit)) => Err(TestCaseError::fail(format!(
            "the JIT ran ({:?}) but candle failed: {error}",
            jit.dims()
        ))),
    }
}

/// The values of an index tensor, row-major.
pub fn index_values(indices: &Tensor) -> Vec<i128> {
    let flat = indices.flatten_all().expect("flatten");
    match indices.dtype() {
        DType::U8 => flat
            .to_vec1::<u8>()
            .expect("u8")
            .into_iter()
            .map(i128::from)
            .collect(),
        DType::U32 => flat
            .to_vec1::<u32>()
            .expect("u32")
            .into_iter()
            .map(i128::from)
            .collect(),
        DType::I64 => flat
            .to_vec1::<i64>()
            .expect("i64")
            .into_iter()
            .map(i128::from)
            .collect(),
        DType::I16 => flat
            .to_vec1::<i16>()
            .expect("i16")
            .into_iter()
            .map(i128::from)
            .collect(),
        DType::I32 => flat
            .to_vec1::<i32>()
            .expect("i32")
            .into_iter()
            .map(i128::from)
            .collect(),
        other => panic!("{other:?} is not an index dtype"),
    }
}

/// The row-major strides of `dims`.
fn strides(dims: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * dims[i + 1];
    }
    strides
}

/// Coordinates of the `flat`-th element of `dims`.
fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut position = vec![0; dims.len()];
    for (coordinate, &dim) in position.iter_mut().zip(dims).rev() {
        *coordinate = flat % dim;
        flat /= dim;
    }
    position
}

/// GatherElements along `dim` under candle's rules, element by element: the output bytes and
/// shape, or `None` for a bad index.
pub fn reference_gather(
    data: &Tensor,
    indices: &Tensor,
    dim: usize,
) -> Option<(Vec<u8>, Vec<usize>)> {
    let size = data.dtype().size_in_bytes();
    let (data_dims, ids_dims) = (data.dims(), indices.dims());
    if data_dims.len() != ids_dims.len()
        || ids_dims
            .iter()
            .zip(data_dims)
            .enumerate()
            .any(|(d, (i, s))| d != dim && i > s)
    {
        return None;
    }
    let bytes = bytes(data);
    let maximum = maximum(indices.dtype());
    let data_strides = strides(data_dims);
    let mut out = Vec::new();
    for (flat, value) in index_values(indices).into_iter().enumerate() {
        if value == maximum {
            out.extend(std::iter::repeat_n(0u8, size));
            continue;
        }
        if value < 0 || value >= data_dims[dim] as i128 {
            return None;
        }
        let mut position = unravel(flat, ids_dims);
        position[dim] = value as usize;
        let at: usize = position.iter().zip(&data_strides).map(|(p, s)| p * s).sum();
        out.extend_from_slice(&bytes[at * size..(at + 1) * size]);
    }
    Some((out, ids_dims.to_vec()))
}

/// GatherND with `batch_dims` under candle's rules (a tuple holding the type's maximum gives a
/// zero slice), slice by slice: the output bytes and shape, or `None` for a bad index or shape.
pub fn reference_gather_nd(
    data: &Tensor,
    indices: &Tensor,
    batch_dims: usize,
) -> Option<(Vec<u8>, Vec<usize>)> {
    let size = data.dtype().size_in_bytes();
    let (data_dims, ids_dims) = (data.dims(), indices.dims());
    let depth = *ids_dims.last()?;
    if ids_dims.len() < batch_dims + 1
        || data_dims.len() < batch_dims + depth
        || depth == 0
        || data_dims[..batch_dims] != ids_dims[..batch_dims]
    {
        return None;
    }
    let values = index_values(indices);
    let maximum = maximum(indices.dtype());
    // Every index not at the maximum must be in range, wherever it is.
    for (flat, &value) in values.iter().enumerate() {
        let bound = data_dims[batch_dims + flat % depth] as i128;
        if value != maximum && (value < 0 || value >= bound) {
            return None;
        }
    }
    let bytes = bytes(data);
    let data_strides = strides(data_dims);
    let slice: usize = data_dims[batch_dims + depth..].iter().product();
    let batch: usize = ids_dims[..batch_dims].iter().product();
    let tuples_per_batch: usize = ids_dims[batch_dims..ids_dims.len() - 1].iter().product();
    let batch_elements: usize = data_dims[batch_dims..].iter().product();
    let mut out = Vec::new();
    for b in 0..batch {
        for t in 0..tuples_per_batch {
            let tuple = &values[(b * tuples_per_batch + t) * depth..][..depth];
            if tuple.contains(&maximum) {
                out.extend(std::iter::repeat_n(0u8, slice * size));
                continue;
            }
            let mut at = b * batch_elements;
            for (k, &v) in tuple.iter().enumerate() {
                at += v as usize * data_strides[batch_dims + k];
            }
            out.extend_from_slice(&bytes[at * size..(at + slice) * size]);
        }
    }
    let mut shape = ids_dims[..ids_dims.len() - 1].to_vec();
    shape.extend_from_slice(&data_dims[batch_dims + depth..]);
    Some((out, shape))
}

/// The JIT's result equals the reference's, or both failed.
pub fn same_as_reference(
    reference: Option<(Vec<u8>, Vec<usize>)>,
    jit: candle_core::Result<Tensor>,
) -> Result<(), TestCaseError> {
    match (reference, jit) {
        (Some((expected, shape)), Ok(jit)) => {
            prop_assert_eq!(jit.dims(), shape.as_slice());
            prop_assert!(
                bytes(&jit) == expected,
                "values differ from the reference: {jit}"
            );
            Ok(())
        }
        (None, Err(_)) => Ok(()),
        (Some((_, shape)), Err(error)) => Err(TestCaseError::fail(format!(
            "the reference ran ({shape:?}) but the JIT failed: {error}"
        ))),
        (None, Ok(jit)) => Err(TestCaseError::fail(format!(
            "the JIT ran ({:?}) but the reference rejects the case",
            jit.dims()
        ))),
    }
}
