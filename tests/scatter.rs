//! The scatters' validation errors, run-time errors and the arithmetic the vectors do not pin,
//! each with the expected value typed from the spec text or measured from the framework named
//! beside it; and the rule that a failing in-place call leaves its data untouched.

use gather_jit::interp::{interpret_scatter, interpret_scatter_in_place};
use gather_jit::ir::OpName;
use gather_jit::scatter::{Reduction, ScatterFlavor, ScatterLayout, ScatterSignature};
use gather_jit::{DType, Error, IndexType, NegativeIndices};

use crate::util::{f32_bytes, i32_bytes, i32_values, index_bytes};

fn f32_values(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

fn run(layout: &ScatterLayout, data: &[u8], indices: &[i64], updates: &[u8]) -> Vec<u8> {
    let indices = index_bytes(layout.signature().index_type, indices);
    interpret_scatter(layout, data, &indices, updates)
        .unwrap_or_else(|e| panic!("{}: {e}", layout.signature()))
}

fn run_err(layout: &ScatterLayout, data: &[u8], indices: &[i64], updates: &[u8]) -> Error {
    let indices = index_bytes(layout.signature().index_type, indices);
    interpret_scatter(layout, data, &indices, updates).expect_err("the call must fail")
}

// ---------------------------------------------------------------------------------------------
// Validation.

#[test]
fn validation_errors_name_the_rule_and_the_values() {
    use ScatterFlavor::*;
    let cases: Vec<(ScatterSignature, &str, &str)> = vec![
        (
            ScatterSignature::scatter_update(&[4, 3], &[2], &[2, 3], 0).with_flavor(Onnx),
            "flavor mismatch",
            "ScatterUpdate: flavor onnx does not define this operator",
        ),
        (
            ScatterSignature::scatter_nd(&[4, 3], &[2, 1], &[2, 3]).with_reduction(Reduction::Sub),
            "unsupported reduction",
            "ScatterND: flavor onnx does not define reduction sub on f32 (it has none, add, mul, max, min)",
        ),
        (
            ScatterSignature::scatter_elements(&[4, 3], &[2, 3], &[2, 3], 0)
                .with_flavor(OpenvinoScatterElementsUpdate12)
                .with_reduction(Reduction::Mean)
                .with_dtype(DType::Bool),
            "unsupported reduction",
            "ScatterElements: flavor openvino-scatterelementsupdate12 does not define reduction mean on bool (mean is not defined on bool)",
        ),
        (
            ScatterSignature::scatter_nd(&[4, 3], &[2, 1], &[2, 3])
                .with_flavor(OpenvinoScatterNdUpdate15)
                .with_reduction(Reduction::Sum)
                .with_use_init_val(false),
            "unsupported attribute",
            "ScatterND: flavor openvino-scatterndupdate15 does not support use_init_val=false (only ScatterElementsUpdate-12 has it)",
        ),
        (
            ScatterSignature::scatter_nd(&[4, 3], &[2, 1], &[2, 2]),
            "updates shape mismatch",
            "ScatterND: updates have shape [2, 2] but must have shape [2, 3] (indices.shape[:-1] + data.shape[k:] with k = indices.shape[-1])",
        ),
        (
            ScatterSignature::scatter_nd(&[4, 3], &[2, 3], &[2]),
            "indices last dim too large",
            "ScatterND: indices last dim 3 must be in 1..=2 (data rank minus batch_dims)",
        ),
        (
            ScatterSignature::scatter_nd(&[4, 3], &[2, 0], &[2, 4, 3]),
            "indices last dim too large",
            "ScatterND: indices last dim 0 must be in 1..=2 (data rank minus batch_dims)",
        ),
        (
            ScatterSignature::scatter_nd(&[4, 3], &[], &[4, 3]),
            "rank too small",
            "ScatterND: indices has rank 0, but at least 1 is required",
        ),
        (
            ScatterSignature::scatter_elements(&[], &[], &[], 0),
            "rank too small",
            "ScatterElements: data has rank 0, but at least 1 is required",
        ),
        (
            ScatterSignature::scatter_elements(&[4, 3], &[2, 3], &[2, 3], -3),
            "axis out of range",
            "ScatterElements: axis -3 is out of range for data of rank 2 (allowed -2..=1)",
        ),
        (
            ScatterSignature::scatter_elements(&[4, 3], &[2], &[2], 0),
            "rank mismatch",
            "ScatterElements: data has rank 2 but indices have rank 1; they must be equal",
        ),
        (
            ScatterSignature::scatter_elements(&[4, 3], &[5, 4], &[5, 4], 0),
            "shape mismatch",
            "ScatterElements: indices dim 1 is 4 but data's is 3; it must be at most data's",
        ),
        (
            ScatterSignature::scatter_elements(&[4, 3], &[5, 3], &[5, 2], 0),
            "updates shape mismatch",
            "ScatterElements: updates have shape [5, 2] but must have shape [5, 3] (indices.shape)",
        ),
        (
            ScatterSignature::scatter_update(&[4, 3], &[2, 2], &[4, 2, 3], 1),
            "updates shape mismatch",
            "ScatterUpdate: updates have shape [4, 2, 3] but must have shape [4, 2, 2] (data.shape[:axis] + indices.shape + data.shape[axis+1:])",
        ),
        (
            ScatterSignature::scatter_nd(&[usize::MAX, 2], &[1, 1], &[1, 2]),
            "size overflow",
            "data of shape [18446744073709551615, 2] has more elements or bytes than fit in memory",
        ),
        (
            ScatterSignature::scatter_nd(&[4], &[1, 1], &[usize::MAX / 2, 0, 3]),
            "size overflow",
            "updates of shape [9223372036854775807, 0, 3] has more elements or bytes than fit in memory",
        ),
        (
            ScatterSignature::scatter_nd(&[4], &[1, 1], &[1; 65]),
            "rank too large",
            "ScatterND: updates has rank 65, but at most 64 is supported",
        ),
    ];
    for (signature, category, message) in cases {
        let err = signature
            .validate()
            .expect_err(&format!("{signature} must not validate"));
        assert_eq!(err.category(), category, "{signature}");
        assert_eq!(err.to_string(), message, "{signature}");
    }
}

#[test]
fn every_flavor_defines_its_ops_and_reductions_only() {
    use Reduction::*;
    use ScatterFlavor::*;
    // The table, typed: flavor, ops, reductions.
    let table: [(ScatterFlavor, &[OpName], &[Reduction]); 7] = [
        (
            Onnx,
            &[OpName::ScatterNd, OpName::ScatterElements],
            &[None, Sum, Prod, Max, Min],
        ),
        (OpenvinoScatterNdUpdate3, &[OpName::ScatterNd], &[None]),
        (
            OpenvinoScatterNdUpdate15,
            &[OpName::ScatterNd],
            &[None, Sum, Sub, Prod, Min, Max],
        ),
        (
            OpenvinoScatterElementsUpdate3,
            &[OpName::ScatterElements],
            &[None],
        ),
        (
            OpenvinoScatterElementsUpdate12,
            &[OpName::ScatterElements],
            &[None, Sum, Prod, Min, Max, Mean],
        ),
        (OpenvinoScatterUpdate3, &[OpName::ScatterUpdate], &[None]),
        (
            TensorRt,
            &[OpName::ScatterNd, OpName::ScatterElements],
            &[None],
        ),
    ];
    for (flavor, ops, reductions) in table {
        assert_eq!(ScatterFlavor::from_name(flavor.name()), Some(flavor));
        for op in [
            OpName::ScatterNd,
            OpName::ScatterElements,
            OpName::ScatterUpdate,
        ] {
            let signature = match op {
                OpName::ScatterNd => ScatterSignature::scatter_nd(&[4, 3], &[2, 1], &[2, 3]),
                OpName::ScatterElements => {
                    ScatterSignature::scatter_elements(&[4, 3], &[2, 3], &[2, 3], 0)
                }
                _ => ScatterSignature::scatter_update(&[4, 3], &[2], &[2, 3], 0),
            }
            .with_flavor(flavor);
            for reduction in Reduction::ALL {
                let result = signature.clone().with_reduction(reduction).validate();
                let defined = ops.contains(&op) && reductions.contains(&reduction);
                assert_eq!(
                    result.is_ok(),
                    defined,
                    "{flavor} {op} {reduction}: {result:?}"
                );
            }
        }
    }
    assert_eq!(Reduction::from_name("add"), Some(Sum));
    assert_eq!(Reduction::from_name("mul"), Some(Prod));
}

#[test]
fn openvino_scatter_nd_takes_one_element_for_a_scalar_update() {
    // ScatterNDUpdate-3/15: "If expected updates rank is 0D it can be a tensor with single
    // element." ONNX has no such rule.
    let sig = |flavor| ScatterSignature::scatter_nd(&[2, 2], &[2], &[1]).with_flavor(flavor);
    for flavor in [
        ScatterFlavor::OpenvinoScatterNdUpdate3,
        ScatterFlavor::OpenvinoScatterNdUpdate15,
    ] {
        let layout = sig(flavor).validate().expect("a one-element update");
        let out = run(&layout, &f32_bytes(&[1.0; 4]), &[1, -2], &f32_bytes(&[7.0]));
        assert_eq!(f32_values(&out), [1.0, 1.0, 7.0, 1.0]);
    }
    let err = sig(ScatterFlavor::Onnx)
        .validate()
        .expect_err("onnx: exact shape");
    assert_eq!(err.category(), "updates shape mismatch");
}

// ---------------------------------------------------------------------------------------------
// Run-time errors.

#[test]
fn a_bad_index_names_its_position_value_and_dimension() {
    // ScatterND: component 1 of tuple 2 indexes data dim 1 (size 3).
    let layout = ScatterSignature::scatter_nd(&[4, 3, 2], &[3, 2], &[3, 2])
        .validate()
        .expect("valid");
    let err = run_err(
        &layout,
        &f32_bytes(&[0.0; 24]),
        &[0, 0, 3, -3, 1, 3],
        &f32_bytes(&[0.0; 6]),
    );
    assert_eq!(
        err.to_string(),
        "ScatterND: index 3 at position [2, 1] of indices is out of range for data dim 1 of size 3"
    );
    // Wrapping uses the dimension the component indexes: -4 is fine for dim 0 (size 4) and
    // wraps to 0; -4 for dim 1 (size 3) is out of range.
    let err = run_err(
        &layout,
        &f32_bytes(&[0.0; 24]),
        &[-4, 0, 0, -4, 0, 0],
        &f32_bytes(&[0.0; 6]),
    );
    assert!(
        matches!(&err, Error::IndexOutOfRange { position, value: -4, data_dim: 1, dim_size: 3, .. } if position == &[1, 1]),
        "{err}"
    );
    // ScatterElements: the first bad index in row-major order is reported.
    let layout = ScatterSignature::scatter_elements(&[2, 3], &[2, 3], &[2, 3], 1)
        .validate()
        .expect("valid");
    let err = run_err(
        &layout,
        &f32_bytes(&[0.0; 6]),
        &[0, 1, 2, -4, 3, 0],
        &f32_bytes(&[0.0; 6]),
    );
    assert_eq!(
        err.to_string(),
        "ScatterElements: index -4 at position [1, 0] of indices is out of range for data dim 1 of size 3"
    );
}

#[test]
fn negative_indices_are_errors_under_scatter_update_and_tensorrt() {
    let layout = ScatterSignature::scatter_update(&[4, 3], &[2], &[2, 3], 0)
        .validate()
        .expect("valid");
    let err = run_err(
        &layout,
        &f32_bytes(&[0.0; 12]),
        &[0, -1],
        &f32_bytes(&[0.0; 6]),
    );
    assert_eq!(
        err.to_string(),
        "ScatterUpdate: index -1 at position [1] of indices is out of range for data dim 0 of size 4"
    );
    let layout = ScatterSignature::scatter_elements(&[4], &[1], &[1], 0)
        .with_flavor(ScatterFlavor::TensorRt)
        .validate()
        .expect("valid");
    let err = run_err(&layout, &f32_bytes(&[0.0; 4]), &[-1], &f32_bytes(&[0.0]));
    assert_eq!(err.category(), "index out of bounds");
    // ... and wrap where the flavor says so, unless overridden.
    let wrapping = ScatterSignature::scatter_elements(&[4], &[1], &[1], 0)
        .with_flavor(ScatterFlavor::OpenvinoScatterElementsUpdate3)
        .validate()
        .expect("valid");
    let out = run(&wrapping, &f32_bytes(&[0.0; 4]), &[-1], &f32_bytes(&[5.0]));
    assert_eq!(f32_values(&out), [0.0, 0.0, 0.0, 5.0]);
    let strict = ScatterSignature::scatter_elements(&[4], &[1], &[1], 0)
        .with_negative(NegativeIndices::Invalid)
        .validate()
        .expect("valid");
    let err = run_err(&strict, &f32_bytes(&[0.0; 4]), &[-1], &f32_bytes(&[5.0]));
    assert_eq!(err.category(), "index out of bounds");
}

#[test]
fn a_huge_unsigned_index_is_out_of_range_not_negative() {
    let layout = ScatterSignature::scatter_elements(&[4], &[1], &[1], 0)
        .with_index_type(IndexType::U64)
        .validate()
        .expect("valid");
    let mut indices = Vec::new();
    assert!(IndexType::U64.try_encode(u64::MAX.into(), &mut indices));
    let err = interpret_scatter(&layout, &f32_bytes(&[0.0; 4]), &indices, &f32_bytes(&[1.0]))
        .expect_err("2^64 - 1 is out of range");
    assert!(
        matches!(err, Error::IndexOutOfRange { value, .. } if value == i128::from(u64::MAX)),
        "{err}"
    );
}

#[test]
fn tensorrt_duplicates_are_errors_naming_both_positions() {
    let nd = ScatterSignature::scatter_nd(&[4, 2, 3], &[2, 2, 2], &[2, 2, 3])
        .with_flavor(ScatterFlavor::TensorRt)
        .validate()
        .expect("valid");
    let err = run_err(
        &nd,
        &f32_bytes(&[0.0; 24]),
        &[0, 1, 3, 0, 2, 1, 3, 0],
        &f32_bytes(&[0.0; 12]),
    );
    assert_eq!(
        err.to_string(),
        "ScatterND: indices at positions [0, 1] and [1, 1] both write data at [3, 0] (flavor tensorrt forbids duplicate indices)"
    );
    let elements = ScatterSignature::scatter_elements(&[3, 2], &[3, 2], &[3, 2], 0)
        .with_flavor(ScatterFlavor::TensorRt)
        .validate()
        .expect("valid");
    // Column 1 takes rows 2, 0, 2: positions [0, 1] and [2, 1] both write data [2, 1]. The
    // same index in another column is another element.
    let err = run_err(
        &elements,
        &f32_bytes(&[0.0; 6]),
        &[0, 2, 1, 0, 2, 2],
        &f32_bytes(&[0.0; 6]),
    );
    assert_eq!(
        err.to_string(),
        "ScatterElements: indices at positions [0, 1] and [2, 1] both write data at [2, 1] (flavor tensorrt forbids duplicate indices)"
    );
    // Under ONNX the same indices apply in order: the last update of data[2, 1] wins.
    let onnx = ScatterSignature::scatter_elements(&[3, 2], &[3, 2], &[3, 2], 0)
        .validate()
        .expect("valid");
    let out = run(
        &onnx,
        &f32_bytes(&[0.0; 6]),
        &[0, 2, 1, 0, 2, 2],
        &f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    );
    assert_eq!(f32_values(&out), [1.0, 4.0, 3.0, 0.0, 5.0, 6.0]);
}

#[test]
fn buffer_lengths_are_checked_first() {
    let layout = ScatterSignature::scatter_nd(&[4], &[1, 1], &[1])
        .validate()
        .expect("valid");
    let err = interpret_scatter(&layout, &[0; 16], &[0; 8], &[0; 3]).expect_err("short updates");
    assert_eq!(err.to_string(), "updates: expected 4 bytes, got 3 bytes");
}

/// A failing call writes nothing: data is byte-identical after an in-place call that fails on
/// the last index, on a duplicate, or on a buffer length, whatever the reduction (with
/// `use_init_val = false`, which would write neutral values first).
#[test]
fn a_failed_in_place_call_leaves_data_untouched() {
    let data: Vec<u8> = (0..48u8).collect(); // 12 f32 of arbitrary bits
    let updates = f32_bytes(&[1.5; 9]);
    let cases: Vec<(ScatterSignature, Vec<i64>, usize)> = vec![
        // ScatterElements-12 mean without init values: three good indices, then a bad one.
        (
            ScatterSignature::scatter_elements(&[4, 3], &[3, 3], &[3, 3], 0)
                .with_flavor(ScatterFlavor::OpenvinoScatterElementsUpdate12)
                .with_reduction(Reduction::Mean)
                .with_use_init_val(false),
            vec![0, 1, 2, 3, 0, 1, 2, 3, 4],
            updates.len(),
        ),
        // ScatterND-15 sum: the bad component is the very last index.
        (
            ScatterSignature::scatter_nd(&[4, 3], &[3, 1], &[3, 3])
                .with_flavor(ScatterFlavor::OpenvinoScatterNdUpdate15)
                .with_reduction(Reduction::Sum),
            vec![0, 1, -5],
            updates.len(),
        ),
        // TensorRT: a duplicate after two good tuples.
        (
            ScatterSignature::scatter_nd(&[4, 3], &[3, 1], &[3, 3])
                .with_flavor(ScatterFlavor::TensorRt),
            vec![0, 1, 0],
            updates.len(),
        ),
        // Updates one byte short.
        (
            ScatterSignature::scatter_nd(&[4, 3], &[3, 1], &[3, 3]),
            vec![0, 1, 2],
            updates.len() - 1,
        ),
    ];
    for (signature, indices, updates_len) in cases {
        let layout = signature.validate().expect("valid");
        let indices = index_bytes(IndexType::I64, &indices);
        let mut buffer = data.clone();
        let result =
            interpret_scatter_in_place(&layout, &mut buffer, &indices, &updates[..updates_len]);
        assert!(result.is_err(), "{signature} must fail");
        assert_eq!(buffer, data, "{signature}: data changed by a failed call");
    }
}

// ---------------------------------------------------------------------------------------------
// Arithmetic.

#[test]
fn duplicates_apply_in_index_order() {
    // none: the last update wins; sub folds in order: 10 - 1 - 2 - 3.
    let layout = ScatterSignature::scatter_nd(&[3], &[4, 1], &[4])
        .with_dtype(DType::I32)
        .validate()
        .expect("valid");
    let out = run(
        &layout,
        &i32_bytes(&[10, 20, 30]),
        &[1, -2, 2, 1],
        &i32_bytes(&[1, 2, 3, 4]),
    );
    assert_eq!(i32_values(&out), [10, 4, 3]);
    let sub = ScatterSignature::scatter_nd(&[3], &[3, 1], &[3])
        .with_flavor(ScatterFlavor::OpenvinoScatterNdUpdate15)
        .with_reduction(Reduction::Sub)
        .with_dtype(DType::I32)
        .validate()
        .expect("valid");
    let out = run(
        &sub,
        &i32_bytes(&[10, 20, 30]),
        &[0, 0, -3],
        &i32_bytes(&[1, 2, 3]),
    );
    assert_eq!(i32_values(&out), [4, 20, 30]);
}

#[test]
fn integer_arithmetic_wraps_and_the_mean_rounds_down() {
    let seu12 = |reduction, dtype, shape: &[usize]| {
        ScatterSignature::scatter_elements(&[2], shape, shape, 0)
            .with_flavor(ScatterFlavor::OpenvinoScatterElementsUpdate12)
            .with_reduction(reduction)
            .with_dtype(dtype)
            .validate()
            .expect("valid")
    };
    // i8: 100 + 100 + 100 wraps to 44, and 44 / 3 rounds down to 14 (OpenVINO 2026.4's CPU
    // plugin and reference give 14).
    let out = run(
        &seu12(Reduction::Mean, DType::I8, &[2]),
        &[100, 0],
        &[0, 0],
        &[100, 100],
    );
    assert_eq!(out, [14, 0]);
    // (0 - 3 - 4) / 3 = -2.33 rounds down to -3 ("rounded down (towards negative infinity)").
    let out = run(
        &seu12(Reduction::Mean, DType::I32, &[2]),
        &i32_bytes(&[0, 5]),
        &[0, 0],
        &i32_bytes(&[-3, -4]),
    );
    assert_eq!(i32_values(&out), [-3, 5]);
    // u8 product wraps: 16 * 16 = 256 = 0.
    let out = run(
        &seu12(Reduction::Prod, DType::U8, &[1]),
        &[16, 3],
        &[0],
        &[16],
    );
    assert_eq!(out, [0, 3]);
}

#[test]
fn use_init_val_false_starts_from_the_neutral_value() {
    let sig = |reduction| {
        ScatterSignature::scatter_elements(&[3], &[2], &[2], 0)
            .with_flavor(ScatterFlavor::OpenvinoScatterElementsUpdate12)
            .with_reduction(reduction)
            .with_use_init_val(false)
            .validate()
            .expect("valid")
    };
    let data = f32_bytes(&[5.0, 6.0, 7.0]);
    // max of two -inf updates: the neutral value -f32::MAX stays (the spec's lowest(), as
    // OpenVINO's CPU plugin returns); element 2 is not touched.
    let out = run(
        &sig(Reduction::Max),
        &data,
        &[0, 0],
        &f32_bytes(&[f32::NEG_INFINITY; 2]),
    );
    assert_eq!(f32_values(&out), [-f32::MAX, 6.0, 7.0]);
    // Example 2 of the ScatterElementsUpdate-12 spec, shortened: sum without data.
    let out = run(
        &sig(Reduction::Sum),
        &data,
        &[1, 1],
        &f32_bytes(&[10.0, 20.0]),
    );
    assert_eq!(f32_values(&out), [5.0, 30.0, 7.0]);
    // mean without data divides by the number of updates only: (10 + 20) / 2.
    let out = run(
        &sig(Reduction::Mean),
        &data,
        &[1, 1],
        &f32_bytes(&[10.0, 20.0]),
    );
    assert_eq!(f32_values(&out), [5.0, 15.0, 7.0]);
    // ... and with data by one more: (6 + 10 + 20) / 3.
    let with_data = ScatterSignature::scatter_elements(&[3], &[2], &[2], 0)
        .with_flavor(ScatterFlavor::OpenvinoScatterElementsUpdate12)
        .with_reduction(Reduction::Mean)
        .validate()
        .expect("valid");
    let out = run(&with_data, &data, &[1, 1], &f32_bytes(&[10.0, 20.0]));
    assert_eq!(f32_values(&out), [5.0, 12.0, 7.0]);
}

#[test]
fn bf16_rounds_as_the_flavor_s_framework_does() {
    // 1.0 + 0.005859375 is 0x3f80c000 in f32: IEEE rounding gives bf16 1.0078125 (0x3f81),
    // OpenVINO's ov::bfloat16 gives 1.0 (0x3f80), as its CPU plugin computes.
    let sum = |flavor| {
        ScatterSignature::scatter_nd(&[1], &[1, 1], &[1])
            .with_flavor(flavor)
            .with_reduction(Reduction::Sum)
            .with_dtype(DType::Bf16)
            .validate()
            .expect("valid")
    };
    let one = 0x3f80u16.to_ne_bytes();
    let small = half::bf16::from_f32(0.005859375).to_ne_bytes();
    let out = run(&sum(ScatterFlavor::Onnx), &one, &[0], &small);
    assert_eq!(u16::from_ne_bytes([out[0], out[1]]), 0x3f81);
    let out = run(
        &sum(ScatterFlavor::OpenvinoScatterNdUpdate15),
        &one,
        &[0],
        &small,
    );
    assert_eq!(u16::from_ne_bytes([out[0], out[1]]), 0x3f80);
}

#[test]
fn ties_in_min_and_max_follow_the_flavor() {
    // current -0.0, update +0.0: ONNX Runtime keeps the update, ScatterNDUpdate-15's
    // std::max keeps the current element.
    let max = |flavor| {
        ScatterSignature::scatter_nd(&[1], &[1, 1], &[1])
            .with_flavor(flavor)
            .with_reduction(Reduction::Max)
            .validate()
            .expect("valid")
    };
    let out = run(
        &max(ScatterFlavor::Onnx),
        &f32_bytes(&[-0.0]),
        &[0],
        &f32_bytes(&[0.0]),
    );
    assert!(f32_values(&out)[0].is_sign_positive());
    let out = run(
        &max(ScatterFlavor::OpenvinoScatterNdUpdate15),
        &f32_bytes(&[-0.0]),
        &[0],
        &f32_bytes(&[0.0]),
    );
    assert!(f32_values(&out)[0].is_sign_negative());
}

#[test]
fn bool_reductions_are_logical_and_write_zero_or_one() {
    let sig = |reduction| {
        ScatterSignature::scatter_nd(&[4], &[4, 1], &[4])
            .with_flavor(ScatterFlavor::OpenvinoScatterNdUpdate15)
            .with_reduction(reduction)
            .with_dtype(DType::Bool)
            .validate()
            .expect("valid")
    };
    let data = [0, 0, 1, 7]; // 7 is true
    let updates = [0, 1, 1, 1];
    let indices = [0, 1, 2, 3];
    assert_eq!(
        run(&sig(Reduction::Sum), &data, &indices, &updates),
        [0, 1, 1, 1]
    );
    assert_eq!(
        run(&sig(Reduction::Sub), &data, &indices, &updates),
        [0, 1, 0, 0]
    );
    assert_eq!(
        run(&sig(Reduction::Prod), &data, &indices, &updates),
        [0, 0, 1, 1]
    );
    assert_eq!(
        run(&sig(Reduction::Min), &data, &indices, &updates),
        [0, 0, 1, 1]
    );
    assert_eq!(
        run(&sig(Reduction::Max), &data, &indices, &updates),
        [0, 1, 1, 1]
    );
    // none copies the byte as it is.
    assert_eq!(
        run(&sig(Reduction::None), &data, &[3, 2, 1, 0], &[9, 8, 0, 1]),
        [1, 0, 8, 9]
    );
}

#[test]
fn scatter_update_writes_whole_slices_along_the_axis() {
    // data [2, 3, 2], axis 1, indices [[2], [0]] (shape [2, 1]): updates [2, 2, 1, 2].
    let layout = ScatterSignature::scatter_update(&[2, 3, 2], &[2, 1], &[2, 2, 1, 2], 1)
        .with_dtype(DType::I32)
        .validate()
        .expect("valid");
    let out = run(
        &layout,
        &i32_bytes(&[0; 12]),
        &[2, 0],
        &i32_bytes(&[1, 2, 3, 4, 5, 6, 7, 8]),
    );
    // data[a, indices[i, 0], b] = updates[a, i, 0, b]
    assert_eq!(i32_values(&out), [3, 4, 0, 0, 1, 2, 7, 8, 0, 0, 5, 6]);
}

#[test]
fn empty_updates_change_nothing_but_indices_are_still_checked() {
    // data [3, 0]: every ScatterND slice is empty, yet index 5 is out of range.
    let layout = ScatterSignature::scatter_nd(&[3, 0], &[2, 1], &[2, 0])
        .validate()
        .expect("valid");
    let out = interpret_scatter(&layout, &[], &index_bytes(IndexType::I64, &[2, -1]), &[])
        .expect("empty slices");
    assert!(out.is_empty());
    let err = interpret_scatter(&layout, &[], &index_bytes(IndexType::I64, &[2, 5]), &[])
        .expect_err("index 5 of 3");
    assert_eq!(err.category(), "index out of bounds");
}

#[test]
fn a_signature_displays_everything_that_decides_it() {
    let sig = ScatterSignature::scatter_elements(&[4, 3], &[2, 3], &[2, 3], -1)
        .with_flavor(ScatterFlavor::OpenvinoScatterElementsUpdate12)
        .with_reduction(Reduction::Mean)
        .with_use_init_val(false)
        .with_dtype(DType::F16)
        .with_index_type(IndexType::I32);
    assert_eq!(
        sig.to_string(),
        "ScatterElements(axis=-1) [openvino-scatterelementsupdate12] reduction=mean use_init_val=false data [4, 3]:f16 indices [2, 3]:i32 updates [2, 3] (negative=wrap)"
    );
}
