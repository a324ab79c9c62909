//! Random shapes, dtypes, attributes, indices and layouts through candle's own op (or the
//! naive reference where candle has none) and the JIT op: the same bits, or both fail.

use candle_core::{DType, Module, Tensor};
use gather_jit_candle::{GatherJitExt, IndexRules, JitGather};
use gather_jit_workloads::XorShift;
use proptest::prelude::*;

use crate::common::*;

fn dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(DTYPES.to_vec())
}

fn index_dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(INDEX_DTYPES.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    /// `index_select` as `Tensor::index_select` (on a contiguous copy of the data, which
    /// candle's CPU op requires).
    #[test]
    fn index_select_matches_candle(
        data_dims in dims(4),
        dim_seed in any::<usize>(),
        count in prop_oneof![1 => Just(0usize), 8 => 1usize..8],
        dtype in dtype(),
        index_dtype in index_dtype(),
        mix in mix(),
        data_view in view(),
        ids_view in view(),
        seed in any::<u64>(),
    ) {
        let mut rng = XorShift::new(seed);
        let dim = dim_seed % data_dims.len();
        let data = random_tensor(dtype, &data_dims, &mut rng);
        let values: Vec<i128> =
            (0..count).map(|_| random_index(data_dims[dim], index_dtype, mix, &mut rng)).collect();
        let ids = index_tensor(&values, &[count], index_dtype);
        let (data, ids) = (lay_out(&data, data_view), lay_out(&ids, ids_view));
        // candle's CPU op needs contiguous data (a broadcast view also changes the values).
        let native = data.contiguous()?.index_select(&ids, dim);
        same(native, data.jit_index_select(&ids, dim))?;
    }

    /// `take` (any rank of ids) as candle's flatten, `index_select` and reshape.
    #[test]
    fn take_matches_candle(
        data_dims in dims(3),
        ids_dims in prop::collection::vec(0usize..4, 0..=3),
        dim_seed in any::<usize>(),
        dtype in dtype(),
        index_dtype in index_dtype(),
        mix in mix(),
        seed in any::<u64>(),
    ) {
        let mut rng = XorShift::new(seed);
        let dim = dim_seed % data_dims.len();
        let data = random_tensor(dtype, &data_dims, &mut rng);
        let count: usize = ids_dims.iter().product();
        let values: Vec<i128> =
            (0..count).map(|_| random_index(data_dims[dim], index_dtype, mix, &mut rng)).collect();
        let ids = index_tensor(&values, &ids_dims, index_dtype);
        let mut shape = data_dims[..dim].to_vec();
        shape.extend_from_slice(&ids_dims);
        shape.extend_from_slice(&data_dims[dim + 1..]);
        let native = ids
            .flatten_all()
            .and_then(|flat| data.index_select(&flat, dim))
            .and_then(|rows| rows.reshape(shape));
        same(native, data.jit_take(&ids, dim))?;
    }

    /// `gather` as `Tensor::gather`, indices of data's shape but along `dim` (where candle's
    /// CPU op is right), both operands in any layout.
    #[test]
    fn gather_matches_candle(
        data_dims in dims(4),
        dim_seed in any::<usize>(),
        along in 0usize..6,
        dtype in dtype(),
        index_dtype in index_dtype(),
        mix in mix(),
        data_view in view(),
        ids_view in view(),
        seed in any::<u64>(),
    ) {
        let mut rng = XorShift::new(seed);
        let dim = dim_seed % data_dims.len();
        let data = lay_out(&random_tensor(dtype, &data_dims, &mut rng), data_view);
        let mut ids_dims = data_dims.clone();
        ids_dims[dim] = along;
        let count: usize = ids_dims.iter().product();
        let values: Vec<i128> =
            (0..count).map(|_| random_index(data_dims[dim], index_dtype, mix, &mut rng)).collect();
        let ids = lay_out(&index_tensor(&values, &ids_dims, index_dtype), ids_view);
        let native = data.contiguous()?.gather(&ids.contiguous()?, dim);
        same(native, data.jit_gather(&ids, dim))?;
    }

    /// `gather` with indices smaller than data in other dims too: against the reference
    /// (candle's CPU op reads the wrong elements for most such shapes).
    #[test]
    fn gather_smaller_indices_match_reference(
        data_dims in dims(4),
        shrink in prop::collection::vec(0usize..3, 4),
        dim_seed in any::<usize>(),
        dtype in dtype(),
        index_dtype in index_dtype(),
        mix in mix(),
        data_view in view(),
        seed in any::<u64>(),
    ) {
        let mut rng = XorShift::new(seed);
        let dim = dim_seed % data_dims.len();
        let data = lay_out(&random_tensor(dtype, &data_dims, &mut rng), data_view);
        let ids_dims: Vec<usize> =
            data_dims.iter().zip(&shrink).map(|(&d, &s)| d.saturating_sub(s)).collect();
        let count: usize = ids_dims.iter().product();
        let values: Vec<i128> =
            (0..count).map(|_| random_index(data_dims[dim], index_dtype, mix, &mut rng)).collect();
        let ids = index_tensor(&values, &ids_dims, index_dtype);
        same_as_reference(reference_gather(&data, &ids, dim), data.jit_gather(&ids, dim))?;
    }

    /// `gather_nd` against the naive reference, any batch dims and tuple depth.
    #[test]
    fn gather_nd_matches_reference(
        data_dims in dims(4),
        batch_seed in any::<usize>(),
        depth_seed in any::<usize>(),
        middle in prop::collection::vec(0usize..4, 0..=2),
        dtype in dtype(),
        index_dtype in index_dtype(),
        mix in mix(),
        data_view in view(),
        ids_view in view(),
        seed in any::<u64>(),
    ) {
        let mut rng = XorShift::new(seed);
        let rank = data_dims.len();
        let batch_dims = batch_seed % rank;
        let depth = 1 + depth_seed % (rank - batch_dims);
        let data = lay_out(&random_tensor(dtype, &data_dims, &mut rng), data_view);
        let mut ids_dims = data_dims[..batch_dims].to_vec();
        ids_dims.extend_from_slice(&middle);
        ids_dims.push(depth);
        let count: usize = ids_dims.iter().product();
        let values: Vec<i128> = (0..count)
            .map(|flat| random_index(data_dims[batch_dims + flat % depth], index_dtype, mix, &mut rng))
            .collect();
        let ids = lay_out(&index_tensor(&values, &ids_dims, index_dtype), ids_view);
        same_as_reference(
            reference_gather_nd(&data, &ids, batch_dims),
            data.jit_gather_nd(&ids, batch_dims),
        )?;
    }

    /// `gather_nd` without batch dims as candle ops: each tuple folded into a row number of
    /// data seen as `[rows, rest]`, then `index_select`.
    #[test]
    fn gather_nd_matches_candle_ops(
        data_dims in dims(4),
        depth_seed in any::<usize>(),
        tuples in 0usize..6,
        dtype in dtype(),
        seed in any::<u64>(),
    ) {
        let mut rng = XorShift::new(seed);
        let depth = 1 + depth_seed % data_dims.len();
        let data = random_tensor(dtype, &data_dims, &mut rng);
        let values: Vec<i128> = (0..tuples * depth)
            .map(|flat| random_index(data_dims[flat % depth], DType::I64, Mix::Clean, &mut rng))
            .collect();
        let ids = index_tensor(&values, &[tuples, depth], DType::I64);
        // Row number of a tuple: its coordinates in the first `depth` dims, row-major.
        let rows: usize = data_dims[..depth].iter().product();
        let rest = &data_dims[depth..];
        let numbers: Vec<i128> = values
            .chunks(depth)
            .map(|tuple| tuple.iter().zip(&data_dims).fold(0, |n, (&v, &d)| n * d as i128 + v))
            .collect();
        let numbers = index_tensor(&numbers, &[tuples], DType::I64);
        let mut flat_shape = vec![rows];
        flat_shape.extend_from_slice(rest);
        let mut shape = vec![tuples];
        shape.extend_from_slice(rest);
        let native = data
            .reshape(flat_shape)
            .and_then(|flat| flat.index_select(&numbers, 0))
            .and_then(|picked| picked.reshape(shape));
        same(native, data.jit_gather_nd(&ids, 0))?;
    }

    /// ONNX rules: a negative index counts from the end, as candle's op on the wrapped index.
    #[test]
    fn onnx_rules_wrap_negative_indices(
        data_dims in dims(3),
        dim_seed in any::<usize>(),
        count in 0usize..8,
        dtype in dtype(),
        seed in any::<u64>(),
    ) {
        let mut rng = XorShift::new(seed);
        let dim = dim_seed % data_dims.len();
        let size = data_dims[dim] as i128;
        let data = random_tensor(dtype, &data_dims, &mut rng);
        // From -size - 1 (bad) to size (bad).
        let values: Vec<i128> =
            (0..count).map(|_| rng.below(2 * size as u64 + 2) as i128 - size - 1).collect();
        let wrapped: Vec<i128> = values.iter().map(|&v| if v < 0 { v + size } else { v }).collect();
        let native = index_tensor(&wrapped, &[count], DType::I64);
        // ONNX: anything outside -size..size is an error, even where no id is read.
        let native = match wrapped.iter().any(|&v| v < 0 || v >= size) {
            true => Err(candle_core::Error::Msg("out of range".into())),
            false => data.index_select(&native, dim),
        };
        let ids = index_tensor(&values, &[count], DType::I64);
        let jit = JitGather::index_select(dim).with_rules(IndexRules::Onnx).apply(&data, &ids);
        same(native, jit)?;
    }

    /// `Embedding` as `candle_nn::Embedding`, ids of any rank and layout.
    #[test]
    fn embedding_matches_candle_nn(
        vocabulary in 0usize..40,
        hidden in 1usize..10,
        ids_dims in prop::collection::vec(0usize..5, 0..=3),
        dtype in dtype(),
        index_dtype in index_dtype(),
        mix in mix(),
        table_view in view(),
        ids_view in view(),
        seed in any::<u64>(),
    ) {
        let mut rng = XorShift::new(seed);
        let table = lay_out(&random_tensor(dtype, &[vocabulary, hidden], &mut rng), table_view);
        let count: usize = ids_dims.iter().product();
        let values: Vec<i128> =
            (0..count).map(|_| random_index(vocabulary, index_dtype, mix, &mut rng)).collect();
        let ids = lay_out(&index_tensor(&values, &ids_dims, index_dtype), ids_view);
        let native = candle_nn::Embedding::new(table.contiguous()?, hidden).forward(&ids);
        let jit = gather_jit_candle::Embedding::new(table, hidden).forward(&ids);
        same(native, jit)?;
    }
}

/// The strategies reach every layout of the data on real shapes (a guard against a `lay_out`
/// that silently returns its input).
#[test]
fn layouts_are_what_they_say() {
    let mut rng = XorShift::new(1);
    let tensor = random_tensor(DType::F32, &[3, 4], &mut rng);
    let contiguous = |view| lay_out(&tensor, view).is_contiguous();
    assert!(contiguous(View::Contiguous) && contiguous(View::Offset));
    assert!(!contiguous(View::Transposed) && !contiguous(View::Strided));
    assert!(!contiguous(View::Broadcast));
    for view in [View::Offset, View::Transposed, View::Strided] {
        assert_eq!(bytes(&lay_out(&tensor, view)), bytes(&tensor), "{view:?}");
    }
    let offset = lay_out(&tensor, View::Offset);
    assert!(offset.layout().start_offset() > 0);
    let _: Tensor = offset;
}
