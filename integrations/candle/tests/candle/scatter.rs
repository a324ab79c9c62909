//! The scatters (`scatter`, `scatter_add`, `index_add` and their in-place forms) against
//! candle's own on random shapes, dtypes, indices (repeats, candle's maximum, bad ones) and
//! layouts, and hand-written edges: error messages, data left unchanged by a failed in-place
//! call, ids candle would skip where they are in range, other index rules.

use candle_core::{DType, Tensor};
use gather_jit::{IndexPolicy, NegativeIndices, OutOfRange};
use gather_jit_candle::{GatherJitExt, IndexRules, JitScatter};
use gather_jit_workloads::XorShift;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::common::*;

fn dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(SCATTER_DTYPES.to_vec())
}

/// Values to add: random bits for floats (NaNs and infinities included), small integers
/// (candle's own sum panics on overflow where overflow checks are on).
fn addends(dtype: DType, dims: &[usize], rng: &mut XorShift) -> Tensor {
    if dtype.is_float() {
        return random_tensor(dtype, dims, rng);
    }
    let count: usize = dims.iter().product();
    let values: Vec<i64> = (0..count).map(|_| rng.below(8) as i64).collect();
    Tensor::from_vec(values, dims, &cpu())
        .and_then(|t| t.to_dtype(dtype))
        .expect("small integers")
}

/// Indices of `dims` into data dim `dim` of size `size`, as `random_index` makes them.
fn indices(size: usize, dims: &[usize], dtype: DType, mix: Mix, rng: &mut XorShift) -> Tensor {
    let count: usize = dims.iter().product();
    let values: Vec<i128> = (0..count)
        .map(|_| random_index(size, dtype, mix, rng))
        .collect();
    index_tensor(&values, dims, dtype)
}

/// Both ran and agree bit for bit but for NaN payloads, or both failed. The payload of a sum
/// of two NaNs is the compiler's choice (Rust leaves it unspecified; an `addss` returns its
/// first operand's, and either compiler may commute the operands), so two NaNs agree.
fn same_sums(
    native: candle_core::Result<Tensor>,
    jit: candle_core::Result<Tensor>,
) -> Result<(), TestCaseError> {
    match (native, jit) {
        (Ok(native), Ok(jit)) => {
            prop_assert_eq!(native.dims(), jit.dims());
            prop_assert!(
                sums_match(&native, &jit),
                "values differ:\nnative {native}\njit {jit}"
            );
            Ok(())
        }
        (native, jit) => same(native, jit),
    }
}

/// Equal bits, or (floats) both NaN.
fn sums_match(native: &Tensor, jit: &Tensor) -> bool {
    // Exact for every float dtype, NaN stays NaN; f8e4m3 sums run candle's own loop.
    let wide = |t: &Tensor| -> Option<Vec<f64>> {
        let flat = t.flatten_all().expect("flatten");
        Some(match t.dtype() {
            DType::F16 => flat
                .to_vec1::<half::f16>()
                .ok()?
                .iter()
                .map(|v| v.to_f64())
                .collect(),
            DType::BF16 => flat
                .to_vec1::<half::bf16>()
                .ok()?
                .iter()
                .map(|v| v.to_f64())
                .collect(),
            DType::F32 => flat
                .to_vec1::<f32>()
                .ok()?
                .iter()
                .map(|&v| f64::from(v))
                .collect(),
            DType::F64 => flat.to_vec1::<f64>().ok()?,
            _ => return None,
        })
    };
    match (wide(native), wide(jit)) {
        (Some(native), Some(jit)) => {
            native.len() == jit.len()
                && native
                    .iter()
                    .zip(&jit)
                    .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()))
        }
        _ => bytes(native) == bytes(jit),
    }
}

/// The in-place call agrees with candle's as `same_sums` (`sums`) or `same` compare them; where
/// both fail, data is unchanged byte for byte (candle's may have applied the updates before the
/// bad index).
fn same_in_place(
    sums: bool,
    before: &[u8],
    native: candle_core::Result<Tensor>,
    ours: (candle_core::Result<()>, &Tensor),
) -> Result<(), TestCaseError> {
    let (result, data) = ours;
    if let (Err(_), Err(_)) = (&native, &result) {
        prop_assert!(bytes(data) == before, "a failed call wrote data");
        return Ok(());
    }
    let jit = result.map(|()| data.clone());
    if sums {
        same_sums(native, jit)
    } else {
        same(native, jit)
    }
}

/// ScatterElements (`scatter`, no reduction) element by element from its definition, with
/// candle's rules: bytes of the output, or `None` for a bad index.
fn reference_scatter(
    data: &Tensor,
    ids: &Tensor,
    source: &Tensor,
    dim: usize,
) -> Option<(Vec<u8>, Vec<usize>)> {
    let size = data.dtype().size_in_bytes();
    let (data_dims, ids_dims) = (data.dims(), ids.dims());
    let mut out = bytes(data);
    let source = bytes(source);
    let maximum = maximum(ids.dtype());
    for (flat, value) in index_values(ids).into_iter().enumerate() {
        if value == maximum {
            continue;
        }
        if value < 0 || value >= data_dims[dim] as i128 {
            return None;
        }
        // Coordinates of `flat` in the ids, `dim` replaced by the index.
        let mut rest = flat;
        let mut position = vec![0; ids_dims.len()];
        for (p, &d) in position.iter_mut().zip(ids_dims).rev() {
            *p = rest % d;
            rest /= d;
        }
        position[dim] = value as usize;
        let at = position
            .iter()
            .zip(data_dims)
            .fold(0, |at, (&p, &d)| at * d + p);
        out[at * size..(at + 1) * size].copy_from_slice(&source[flat * size..(flat + 1) * size]);
    }
    Some((out, data_dims.to_vec()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `scatter_add` as `Tensor::scatter_add` (ids and source contiguous, as candle's CPU op
    /// requires), every dtype, repeated indices folding in candle's order.
    #[test]
    fn scatter_add_matches_candle(
        data_dims in dims(4),
        dim_seed in any::<usize>(),
        along in 0usize..7,
        dtype in dtype(),
        index_dtype in prop::sample::select(ADD_INDEX_DTYPES.to_vec()),
        mix in mix(),
        data_view in view(),
        ids_view in view(),
        source_view in view(),
        seed in any::<u64>(),
    ) {
        let mut rng = XorShift::new(seed);
        let dim = dim_seed % data_dims.len();
        let data = lay_out(&addends(dtype, &data_dims, &mut rng), data_view);
        let mut source_dims = data_dims.clone();
        source_dims[dim] = along;
        let source = lay_out(&addends(dtype, &source_dims, &mut rng), source_view);
        let ids = indices(data_dims[dim], &source_dims, index_dtype, mix, &mut rng);
        let ids = lay_out(&ids, ids_view);
        let native = data.scatter_add(&ids.contiguous()?, &source.contiguous()?, dim);
        same_sums(native, data.jit_scatter_add(&ids, &source, dim))?;
    }

    /// `scatter` as `Tensor::scatter`: of repeated indices the last write wins.
    #[test]
    fn scatter_matches_candle(
        data_dims in dims(4),
        dim_seed in any::<usize>(),
        along in 0usize..7,
        dtype in dtype(),
        index_dtype in prop::sample::select(INDEX_DTYPES.to_vec()),
        mix in mix(),
        data_view in view(),
        ids_view in view(),
        seed in any::<u64>(),
    ) {
        let mut rng = XorShift::new(seed);
        let dim = dim_seed % data_dims.len();
        let data = lay_out(&random_tensor(dtype, &data_dims, &mut rng), data_view);
        let mut source_dims = data_dims.clone();
        source_dims[dim] = along;
        let source = random_tensor(dtype, &source_dims, &mut rng);
        let ids = indices(data_dims[dim], &source_dims, index_dtype, mix, &mut rng);
        let ids = lay_out(&ids, ids_view);
        let native = data.scatter(&ids.contiguous()?, &source, dim);
        same(native, data.jit_scatter(&ids, &source, dim))?;
    }

    /// `index_add` as `Tensor::index_add`, every dtype and id type, any dim: with dims before
    /// `dim` both the block-by-block and the broadcast mappings run.
    #[test]
    fn index_add_matches_candle(
        data_dims in dims(4),
        dim_seed in any::<usize>(),
        count in prop_oneof![1 => Just(0usize), 8 => 1usize..9],
        dtype in dtype(),
        index_dtype in prop::sample::select(ADD_INDEX_DTYPES.to_vec()),
        mix in mix(),
        data_view in view(),
        source_view in view(),
        seed in any::<u64>(),
    ) {
        let mut rng = XorShift::new(seed);
        let dim = dim_seed % data_dims.len();
        let data = lay_out(&addends(dtype, &data_dims, &mut rng), data_view);
        let mut source_dims = data_dims.clone();
        source_dims[dim] = count;
        let source = lay_out(&addends(dtype, &source_dims, &mut rng), source_view);
        let ids = indices(data_dims[dim], &[count], index_dtype, mix, &mut rng);
        let native = data.index_add(&ids, &source.contiguous()?, dim);
        same_sums(native, data.jit_index_add(&ids, &source, dim))?;
    }

    /// The in-place forms: as candle's `scatter_set`, `scatter_add_set`, and as candle's
    /// `index_add` for `index_add_set` (candle has none); a failed call writes nothing.
    #[test]
    fn in_place_matches_candle(
        data_dims in dims(3),
        dim_seed in any::<usize>(),
        along in 0usize..6,
        which in 0usize..3,
        dtype in dtype(),
        index_dtype in prop::sample::select(INDEX_DTYPES.to_vec()),
        mix in mix(),
        seed in any::<u64>(),
    ) {
        let mut rng = XorShift::new(seed);
        let dim = dim_seed % data_dims.len();
        let data = addends(dtype, &data_dims, &mut rng);
        let before = bytes(&data);
        let mut source_dims = data_dims.clone();
        source_dims[dim] = along;
        let source = addends(dtype, &source_dims, &mut rng);
        let ids_dims = if which == 2 { vec![along] } else { source_dims.clone() };
        let ids = indices(data_dims[dim], &ids_dims, index_dtype, mix, &mut rng);
        let ours = data.copy()?;
        let (native, result) = match which {
            0 => {
                let native = data.copy()?;
                let native = native.scatter_set(&ids, &source, dim).map(|()| native);
                (native, ours.jit_scatter_set(&ids, &source, dim))
            }
            1 => {
                let native = data.copy()?;
                let native = native.scatter_add_set(&ids, &source, dim).map(|()| native);
                (native, ours.jit_scatter_add_set(&ids, &source, dim))
            }
            _ => (data.index_add(&ids, &source, dim), ours.jit_index_add_set(&ids, &source, dim)),
        };
        same_in_place(which > 0, &before, native, (result, &ours))?;
    }

    /// `scatter` with indices smaller than data in other dims too (ONNX's rule, which candle's
    /// own rejects): against the definition.
    #[test]
    fn scatter_smaller_indices_match_reference(
        data_dims in dims(4),
        shrink in prop::collection::vec(0usize..3, 4),
        dim_seed in any::<usize>(),
        dtype in dtype(),
        index_dtype in prop::sample::select(INDEX_DTYPES.to_vec()),
        mix in mix(),
        seed in any::<u64>(),
    ) {
        let mut rng = XorShift::new(seed);
        let dim = dim_seed % data_dims.len();
        let data = random_tensor(dtype, &data_dims, &mut rng);
        let ids_dims: Vec<usize> =
            data_dims.iter().zip(&shrink).map(|(&d, &s)| d.saturating_sub(s)).collect();
        let source = random_tensor(dtype, &ids_dims, &mut rng);
        let ids = indices(data_dims[dim], &ids_dims, index_dtype, mix, &mut rng);
        same_as_reference(
            reference_scatter(&data, &ids, &source, dim),
            data.jit_scatter(&ids, &source, dim),
        )?;
    }

    /// ONNX rules: a negative id counts from the end, as candle's op on the wrapped ids.
    #[test]
    fn onnx_rules_wrap_negative_ids(
        data_dims in dims(3),
        dim_seed in any::<usize>(),
        count in 0usize..8,
        add in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut rng = XorShift::new(seed);
        let dim = dim_seed % data_dims.len();
        let size = data_dims[dim] as i128;
        let data = random_tensor(DType::F32, &data_dims, &mut rng);
        let mut source_dims = data_dims.clone();
        source_dims[dim] = count;
        let source = random_tensor(DType::F32, &source_dims, &mut rng);
        // From -size - 1 (bad) to size (bad).
        let ids_dims = if add { vec![count] } else { source_dims.clone() };
        let total: usize = ids_dims.iter().product();
        let values: Vec<i128> =
            (0..total).map(|_| rng.below(2 * size as u64 + 2) as i128 - size - 1).collect();
        let wrapped: Vec<i128> = values.iter().map(|&v| if v < 0 { v + size } else { v }).collect();
        let bad = wrapped.iter().any(|&v| v < 0 || v >= size);
        let wrapped = index_tensor(&wrapped, &ids_dims, DType::I64);
        let ids = index_tensor(&values, &ids_dims, DType::I64);
        let (native, op) = if add {
            (data.index_add(&wrapped, &source, dim), JitScatter::index_add(dim))
        } else {
            (data.scatter_add(&wrapped, &source, dim), JitScatter::scatter_add(dim))
        };
        let native = if bad { Err(candle_core::Error::Msg("out of range".into())) } else { native };
        same_sums(native, op.with_rules(IndexRules::Onnx).apply(&data, &ids, &source))?;
    }

    /// Policies that drop or clamp out-of-range ids: as candle's op on the ids so resolved
    /// (a dropped id's slice added to nothing).
    #[test]
    fn policies_drop_or_clamp_ids(
        data_dims in dims(3),
        dim_seed in any::<usize>(),
        count in 0usize..8,
        clamp in any::<bool>(),
        elements in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut rng = XorShift::new(seed);
        let dim = dim_seed % data_dims.len();
        let size = data_dims[dim];
        let data = random_tensor(DType::F32, &data_dims, &mut rng);
        let mut source_dims = data_dims.clone();
        source_dims[dim] = count;
        let source = random_tensor(DType::F32, &source_dims, &mut rng);
        let ids_dims = if elements { source_dims.clone() } else { vec![count] };
        let total: usize = ids_dims.iter().product();
        let values: Vec<i128> = (0..total).map(|_| rng.below(size as u64 + 3) as i128).collect();
        let policy = IndexPolicy {
            negative: NegativeIndices::Invalid,
            out_of_range: if clamp { OutOfRange::Clamp } else { OutOfRange::Zero },
        };
        // Resolved: clamped, or u32's maximum (which candle skips).
        let resolved: Vec<i128> = values
            .iter()
            .map(|&v| match (v < size as i128, clamp) {
                (true, _) => v,
                (false, true) if size > 0 => size as i128 - 1,
                _ => u32::MAX as i128,
            })
            .collect();
        let resolved = index_tensor(&resolved, &ids_dims, DType::U32);
        let ids = index_tensor(&values, &ids_dims, DType::I64);
        let (native, op) = if elements {
            (data.scatter_add(&resolved, &source, dim), JitScatter::scatter_add(dim))
        } else {
            (data.index_add(&resolved, &source, dim), JitScatter::index_add(dim))
        };
        // Clamping into an empty dim is an error.
        let native = if clamp && size == 0 && total > 0 {
            Err(candle_core::Error::Msg("nothing to clamp to".into()))
        } else {
            native
        };
        same_sums(native, op.with_rules(IndexRules::Policy(policy)).apply(&data, &ids, &source))?;
    }
}

fn f32_tensor(values: &[f32], dims: &[usize]) -> Tensor {
    Tensor::from_slice(values, dims, &cpu()).expect("f32 tensor")
}

#[test]
fn a_bad_index_is_an_error_with_its_position_and_value() {
    let data = f32_tensor(&[0.; 6], &[2, 3]);
    let source = f32_tensor(&[1., 2., 3., 4.], &[2, 2]);
    let ids = Tensor::new(&[[0u32, 2], [3, 1]], &cpu()).expect("ids");
    let error = data
        .jit_scatter_add(&ids, &source, 1)
        .expect_err("3 is out of range");
    let message = error.to_string();
    assert!(
        message.contains("index 3 at position [1, 0]") && message.contains("size 3"),
        "{message}"
    );
    assert!(data.scatter_add(&ids, &source, 1).is_err(), "candle too");

    let ids = Tensor::new(&[1i64, -1], &cpu()).expect("ids");
    let rows = f32_tensor(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
    let error = data.jit_index_add(&ids, &rows, 0).expect_err("negative");
    assert!(
        error.to_string().contains("index -1 at position [1]"),
        "{error}"
    );
    assert!(data.index_add(&ids, &rows, 0).is_err(), "candle too");
}

#[test]
fn a_failed_in_place_call_leaves_data_unchanged() {
    // The bad id comes after good ones: candle's own loop has added those before it fails.
    let data = f32_tensor(&[1., 2., 3., 4., 5., 6.], &[3, 2]);
    let ids = Tensor::new(&[[0u32, 1], [2, 0], [5, 1]], &cpu()).expect("ids");
    let source = f32_tensor(&[10., 20., 30., 40., 50., 60.], &[3, 2]);
    let ours = data.copy().expect("copy");
    ours.jit_scatter_add_set(&ids, &source, 0)
        .expect_err("5 is out of range");
    assert_eq!(bytes(&ours), bytes(&data));
    let theirs = data.copy().expect("copy");
    theirs
        .scatter_add_set(&ids, &source, 0)
        .expect_err("candle too");
    assert_ne!(
        bytes(&theirs),
        bytes(&data),
        "candle's own wrote before the bad index (if this changes, the doc's claim goes)"
    );
    let ids = Tensor::new(&[1u32, 7, 0], &cpu()).expect("ids");
    ours.jit_index_add_set(&ids, &source, 0)
        .expect_err("7 is out of range");
    ours.jit_scatter_set(
        &Tensor::new(&[[0u32, 9]], &cpu()).expect("ids"),
        &source.narrow(0, 0, 1).expect("row"),
        0,
    )
    .expect_err("9 is out of range");
    assert_eq!(bytes(&ours), bytes(&data));
}

#[test]
fn an_id_at_the_type_maximum_is_skipped_even_where_it_is_in_range() {
    // u8 ids into 300 rows: 255 is a row, but candle skips it.
    let data = Tensor::zeros((300, 2), DType::F32, &cpu()).expect("zeros");
    let ids = Tensor::new(&[255u8, 3, 255, 254], &cpu()).expect("ids");
    let rows = f32_tensor(&[1., 2., 3., 4., 5., 6., 7., 8.], &[4, 2]);
    let ours = data.jit_index_add(&ids, &rows, 0).expect("index_add");
    assert_eq!(
        bytes(&ours),
        bytes(&data.index_add(&ids, &rows, 0).expect("candle"))
    );
    let total = ours
        .sum_all()
        .and_then(|t| t.to_scalar::<f32>())
        .expect("sum");
    assert_eq!(total, 3. + 4. + 7. + 8.);

    let ids = Tensor::new(&[[255u8, 1], [255, 0], [2, 255], [1, 1]], &cpu()).expect("ids");
    for add in [false, true] {
        let (ours, theirs) = if add {
            (
                data.jit_scatter_add(&ids, &rows, 0),
                data.scatter_add(&ids, &rows, 0),
            )
        } else {
            (
                data.jit_scatter(&ids, &rows, 0),
                data.scatter(&ids, &rows, 0),
            )
        };
        assert_eq!(
            bytes(&ours.expect("jit")),
            bytes(&theirs.expect("candle")),
            "add {add}"
        );
    }
}

#[test]
fn integer_sums_wrap() {
    let data = Tensor::new(&[200u8, 7], &cpu()).expect("data");
    let ids = Tensor::new(&[0u32, 0], &cpu()).expect("ids");
    let source = Tensor::new(&[100u8, 1], &cpu()).expect("source");
    let sum = data.jit_scatter_add(&ids, &source, 0).expect("sum");
    assert_eq!(sum.to_vec1::<u8>().expect("u8"), [45, 7]);
}

#[test]
fn shapes_and_dtypes_candle_rejects_are_errors() {
    let data = f32_tensor(&[0.; 6], &[2, 3]);
    let ids = Tensor::new(&[[0u32, 1]], &cpu()).expect("ids");
    let source = f32_tensor(&[1., 2., 3.], &[1, 3]);
    assert!(
        data.jit_scatter(&ids, &source, 1).is_err(),
        "ids and source differ"
    );
    let f64_source = Tensor::new(&[[1f64, 2.]], &cpu()).expect("f64");
    assert!(
        data.jit_scatter_add(&ids, &f64_source, 1).is_err(),
        "dtypes differ"
    );
    let ids = Tensor::new(&[[0u32]], &cpu()).expect("ids");
    assert!(data.jit_index_add(&ids, &source, 0).is_err(), "ids not 1-D");
    let ids = Tensor::new(&[0u32], &cpu()).expect("ids");
    let wide = f32_tensor(&[1., 2., 3., 4.], &[1, 4]);
    assert!(
        data.jit_index_add(&ids, &wide, 0).is_err(),
        "source wider than data"
    );
    let floats = f32_tensor(&[0.], &[1]);
    assert!(
        data.jit_index_add(&floats, &source, 0).is_err(),
        "float ids"
    );
    let strided = data.t().expect("transpose");
    assert!(
        strided
            .jit_index_add_set(&ids, &f32_tensor(&[1., 2.], &[1, 2]), 0)
            .is_err(),
        "in place needs contiguous data"
    );
}

#[test]
fn scatter_add_sums_repeats_in_index_order() {
    // 1e8 + 1 - 1e8 is 0 in f32 in this order, 1 in another.
    let data = f32_tensor(&[0.], &[1]);
    let ids = Tensor::new(&[0u32, 0, 0], &cpu()).expect("ids");
    let source = f32_tensor(&[1e8, 1., -1e8], &[3]);
    let sum = data.jit_scatter_add(&ids, &source, 0).expect("sum");
    assert_eq!(sum.to_vec1::<f32>().expect("f32"), [0.]);
    assert_eq!(
        bytes(&sum),
        bytes(&data.scatter_add(&ids, &source, 0).expect("candle"))
    );
}

#[test]
fn large_outputs_copy_all_of_data_but_its_zero_pages() {
    // 8.6 MB of f32 (past the sparse copy's 8 MiB), mostly zeros: a few values here and there,
    // -0.0 among them (its bits are not zero), so that some 4 KiB runs are copied and the
    // others left to the zeroed output.
    let (rows, width) = (4200, 512);
    let mut values = vec![0f32; rows * width];
    let mut rng = XorShift::new(9);
    for _ in 0..40 {
        let at = rng.below(values.len() as u64) as usize;
        values[at] = if rng.below(4) == 0 {
            -0.0
        } else {
            rng.below(100) as f32 - 50.
        };
    }
    let data = Tensor::from_vec(values, (rows, width), &cpu()).expect("data");
    let ids: Vec<u32> = (0..64).map(|_| rng.below(rows as u64) as u32).collect();
    let ids = Tensor::new(ids, &cpu()).expect("ids");
    let source = random_tensor(DType::F32, &[64, width], &mut rng);
    let ours = data.jit_index_add(&ids, &source, 0).expect("index_add");
    assert!(sums_match(
        &data.index_add(&ids, &source, 0).expect("candle"),
        &ours
    ));
    let elements: Vec<u32> = (0..64 * width)
        .map(|_| rng.below(rows as u64) as u32)
        .collect();
    let elements = Tensor::from_vec(elements, (64, width), &cpu()).expect("ids");
    let ours = data.jit_scatter(&elements, &source, 0).expect("scatter");
    assert_eq!(
        bytes(&data.scatter(&elements, &source, 0).expect("candle")),
        bytes(&ours)
    );
    // Nothing scattered: data itself, -0.0 included.
    let none = Tensor::new(&[u32::MAX], &cpu()).expect("ids");
    let ours = data
        .jit_index_add(&none, &source.narrow(0, 0, 1).expect("row"), 0)
        .expect("index_add");
    assert_eq!(bytes(&ours), bytes(&data));
}
