//! Every bad input has a typed error whose message names the offending value; and the index
//! policies (`Zero`, `Clamp`, `Wrap`) do what they say.

use gather_jit::interp::interpret;
use gather_jit::ir::OpName;
use gather_jit::{
    DType, Error, Flavor, IndexPolicy, IndexType, NegativeIndices, OutOfRange, Signature,
};

use crate::util::{i32_bytes, i32_values, index_bytes};

/// The validation error of `signature` (which must not validate).
#[track_caller]
fn invalid(signature: Signature) -> Error {
    match signature.validate() {
        Ok(v) => panic!(
            "{signature} validated (output shape {:?}) but must not",
            v.output_shape()
        ),
        Err(e) => e,
    }
}

/// Asserts that `error`'s message contains every one of `parts`.
#[track_caller]
fn assert_names(error: &Error, parts: &[&str]) {
    let message = error.to_string();
    for part in parts {
        assert!(
            message.contains(part),
            "message {message:?} does not name {part:?}"
        );
    }
}

/// Runs `signature` with `i32` data through the interpreter.
#[track_caller]
fn run(signature: Signature, data: &[i32], indices: &[i64]) -> gather_jit::Result<Vec<i32>> {
    let signature = signature.with_dtype(DType::I32);
    let validated = signature
        .validate()
        .unwrap_or_else(|e| panic!("{signature}: {e}"));
    let out = interpret(
        &validated,
        &i32_bytes(data),
        &index_bytes(signature.index_type, indices),
    )?;
    Ok(i32_values(&out))
}

/// The run-time error of `signature` on these inputs (which must fail).
#[track_caller]
fn run_err(signature: Signature, data: &[i32], indices: &[i64]) -> Error {
    match run(signature, data, indices) {
        Ok(out) => panic!("expected an error, got {out:?}"),
        Err(e) => e,
    }
}

// ---------------------------------------------------------------------------------------------
// Validation.

#[test]
fn flavor_that_does_not_define_the_op() {
    let cases = [
        (
            Signature::gather_nd(&[2, 2], &[2, 1], 0).with_flavor(Flavor::OpenvinoGather8),
            OpName::GatherNd,
            Flavor::OpenvinoGather8,
        ),
        (
            Signature::gather(&[2, 2], &[2], 0, 0).with_flavor(Flavor::OpenvinoGatherNd5),
            OpName::Gather,
            Flavor::OpenvinoGatherNd5,
        ),
        (
            Signature::gather_elements(&[2, 2], &[2, 2], 0).with_flavor(Flavor::OpenvinoGather1),
            OpName::GatherElements,
            Flavor::OpenvinoGather1,
        ),
        (
            Signature::gather(&[2, 2], &[2], 0, 0).with_flavor(Flavor::OpenvinoGatherElements6),
            OpName::Gather,
            Flavor::OpenvinoGatherElements6,
        ),
    ];
    for (sig, op_name, flavor) in cases {
        let e = invalid(sig);
        assert!(
            matches!(e, Error::FlavorMismatch { op, flavor: f , .. } if op == op_name && f == flavor),
            "{e:?}"
        );
        assert_names(&e, &[&op_name.to_string(), flavor.name()]);
        assert_eq!(e.category(), "flavor mismatch");
    }
}

#[test]
fn batch_dims_on_a_gather_flavor_without_them() {
    for flavor in [Flavor::Onnx, Flavor::OpenvinoGather1] {
        for batch_dims in [1, -1] {
            let e = invalid(Signature::gather(&[2, 3], &[2, 2], 1, batch_dims).with_flavor(flavor));
            assert!(
                matches!(e, Error::UnsupportedAttribute { attribute: "batch_dims", value, .. } if value == batch_dims),
                "{e:?}"
            );
            assert_names(&e, &[&format!("batch_dims={batch_dims}"), flavor.name()]);
        }
    }
    let e = invalid(Signature::gather(&[2, 3, 4], &[2, 2], 2, 2).with_flavor(Flavor::TensorRt));
    assert!(
        matches!(
            e,
            Error::UnsupportedAttribute {
                attribute: "num_elementwise_dims",
                value: 2,
                ..
            }
        ),
        "{e:?}"
    );
    assert_names(&e, &["num_elementwise_dims=2", "tensorrt"]);
}

#[test]
fn rank_too_small() {
    let e = invalid(Signature::gather(&[], &[1], 0, 0));
    assert!(
        matches!(
            e,
            Error::RankTooSmall {
                op: OpName::Gather,
                input: "data",
                rank: 0,
                min: 1,
                ..
            }
        ),
        "{e:?}"
    );
    assert_names(&e, &["data", "rank 0", "at least 1"]);

    let e = invalid(Signature::gather_elements(&[], &[], 0));
    assert!(
        matches!(
            e,
            Error::RankTooSmall {
                op: OpName::GatherElements,
                input: "data",
                rank: 0,
                ..
            }
        ),
        "{e:?}"
    );

    let e = invalid(Signature::gather_nd(&[], &[1], 0));
    assert!(
        matches!(
            e,
            Error::RankTooSmall {
                op: OpName::GatherNd,
                input: "data",
                rank: 0,
                ..
            }
        ),
        "{e:?}"
    );

    let e = invalid(Signature::gather_nd(&[3], &[], 0).with_flavor(Flavor::OpenvinoGatherNd8));
    assert!(
        matches!(
            e,
            Error::RankTooSmall {
                op: OpName::GatherNd,
                input: "indices",
                rank: 0,
                ..
            }
        ),
        "{e:?}"
    );
    assert_names(&e, &["GatherND", "indices", "rank 0"]);
}

#[test]
fn gather_axis_out_of_range() {
    for axis in [2, -3, 100, i64::MIN] {
        let e = invalid(Signature::gather(&[2, 3], &[1], axis, 0));
        assert!(
            matches!(e, Error::AxisOutOfRange { op: OpName::Gather, axis: a, rank: 2 , .. } if a == axis),
            "{e:?}"
        );
        assert_names(&e, &[&format!("axis {axis}"), "rank 2"]);
        assert_eq!(e.category(), "axis out of range");
    }
    // The extremes that are allowed: -rank and rank - 1.
    for axis in [-2, 1] {
        Signature::gather(&[2, 3], &[1], axis, 0)
            .validate()
            .unwrap();
    }
}

#[test]
fn gather_elements_axis_out_of_range() {
    for axis in [2, -3] {
        let e = invalid(Signature::gather_elements(&[2, 3], &[2, 3], axis));
        assert!(
            matches!(e, Error::AxisOutOfRange { op: OpName::GatherElements, axis: a, rank: 2 , .. } if a == axis),
            "{e:?}"
        );
        assert_names(&e, &["GatherElements", &format!("axis {axis}")]);
    }
}

#[test]
fn gather_nd_batch_dims_out_of_range() {
    // batch_dims must be in [0, min(data.rank, indices.rank)).
    for flavor in [
        Flavor::Onnx,
        Flavor::OpenvinoGatherNd5,
        Flavor::OpenvinoGatherNd8,
    ] {
        for batch_dims in [2, -1] {
            let e = invalid(Signature::gather_nd(&[2, 3], &[2, 1], batch_dims).with_flavor(flavor));
            assert!(
                matches!(e, Error::BatchDimsOutOfRange { op: OpName::GatherNd, batch_dims: b, min: 0, max: 1 , .. } if b == batch_dims),
                "{e:?}"
            );
            assert_names(&e, &[&format!("batch_dims {batch_dims}")]);
        }
    }
    // Bounded by the smaller rank, here the indices'.
    let e = invalid(Signature::gather_nd(&[2, 3, 4], &[2], 1));
    assert!(
        matches!(
            e,
            Error::BatchDimsOutOfRange {
                batch_dims: 1,
                max: 0,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn gather_batch_dims_out_of_range() {
    // Gather-7/8: batch_dims in [-indices.rank, indices.rank].
    for flavor in [Flavor::OpenvinoGather7, Flavor::OpenvinoGather8] {
        for batch_dims in [3, -3] {
            let e =
                invalid(Signature::gather(&[2, 3, 4], &[2, 3], 2, batch_dims).with_flavor(flavor));
            assert!(
                matches!(e, Error::BatchDimsOutOfRange { op: OpName::Gather, batch_dims: b, min: -2, max: 2 , .. } if b == batch_dims),
                "{e:?}"
            );
            assert_names(&e, &[&format!("batch_dims {batch_dims}")]);
        }
    }
    // TensorRT: num_elementwise_dims 1 needs indices of rank >= 1.
    let e = invalid(Signature::gather(&[2, 3], &[], 1, 1).with_flavor(Flavor::TensorRt));
    assert!(
        matches!(e, Error::BatchDimsOutOfRange { batch_dims: 1, .. }),
        "{e:?}"
    );
}

#[test]
fn gather_negative_batch_dims_count_from_the_indices_rank() {
    for flavor in [Flavor::OpenvinoGather7, Flavor::OpenvinoGather8] {
        // indices rank 2: -1 means 1, -2 means 0.
        let v = Signature::gather(&[2, 3, 4], &[2, 5], 2, -1)
            .with_flavor(flavor)
            .validate()
            .unwrap();
        assert_eq!(v.output_shape(), &[2, 3, 5]);
        let v = Signature::gather(&[2, 3, 4], &[2, 5], 2, -2)
            .with_flavor(flavor)
            .validate()
            .unwrap();
        assert_eq!(v.output_shape(), &[2, 3, 2, 5]);
    }
}

#[test]
fn gather_batch_dims_greater_than_axis() {
    let e =
        invalid(Signature::gather(&[2, 3, 4], &[2, 3], 0, 1).with_flavor(Flavor::OpenvinoGather8));
    assert!(
        matches!(
            e,
            Error::BatchDimsExceedAxis {
                op: OpName::Gather,
                batch_dims: 1,
                axis: 0,
                ..
            }
        ),
        "{e:?}"
    );
    assert_names(&e, &["batch_dims 1", "axis 0"]);
    assert_eq!(e.category(), "batch dims out of range");
    // Compared after normalising both: batch_dims -1 (of indices rank 3) is 2, axis -2 is 1.
    let e = invalid(
        Signature::gather(&[2, 3, 4], &[2, 3, 1], -2, -1).with_flavor(Flavor::OpenvinoGather7),
    );
    assert!(
        matches!(
            e,
            Error::BatchDimsExceedAxis {
                batch_dims: 2,
                axis: 1,
                ..
            }
        ),
        "{e:?}"
    );
    assert_names(&e, &["batch_dims 2", "axis 1"]);
}

#[test]
fn batch_dims_mismatch() {
    let e = invalid(Signature::gather_nd(&[2, 3], &[3, 1], 1));
    assert!(
        matches!(
            e,
            Error::BatchDimMismatch {
                op: OpName::GatherNd,
                dim: 0,
                data: 2,
                indices: 3,
                ..
            }
        ),
        "{e:?}"
    );
    assert_names(&e, &["dim 0", "data has 2", "indices have 3"]);
    assert_eq!(e.category(), "batch dims mismatch");

    let e =
        invalid(Signature::gather(&[2, 3, 4], &[2, 4], 2, 2).with_flavor(Flavor::OpenvinoGather8));
    assert!(
        matches!(
            e,
            Error::BatchDimMismatch {
                op: OpName::Gather,
                dim: 1,
                data: 3,
                indices: 4,
                ..
            }
        ),
        "{e:?}"
    );
    assert_names(&e, &["dim 1", "data has 3", "indices have 4"]);
}

#[test]
fn gather_nd_indices_last_dim_zero_or_too_large() {
    let e = invalid(Signature::gather_nd(&[2, 3], &[4, 0], 0));
    assert!(
        matches!(
            e,
            Error::IndexDepthOutOfRange {
                op: OpName::GatherNd,
                depth: 0,
                max: 2,
                ..
            }
        ),
        "{e:?}"
    );
    assert_names(&e, &["last dim 0", "1..=2"]);

    // indices.shape[-1] <= data.rank - batch_dims: with batch_dims 1 and rank 3, 3 is too many.
    let e = invalid(Signature::gather_nd(&[2, 3, 4], &[2, 3], 1));
    assert!(
        matches!(
            e,
            Error::IndexDepthOutOfRange {
                depth: 3,
                max: 2,
                ..
            }
        ),
        "{e:?}"
    );
    assert_names(&e, &["last dim 3", "1..=2"]);
    assert_eq!(e.category(), "indices last dim too large");
    // ... and 2 is fine.
    let v = Signature::gather_nd(&[2, 3, 4], &[2, 2], 1)
        .validate()
        .unwrap();
    assert_eq!(v.output_shape(), &[2]);
}

#[test]
fn gather_elements_rank_mismatch() {
    let e = invalid(Signature::gather_elements(&[2, 3], &[2, 3, 1], 0));
    assert!(
        matches!(
            e,
            Error::RankMismatch {
                op: OpName::GatherElements,
                data_rank: 2,
                indices_rank: 3,
                ..
            }
        ),
        "{e:?}"
    );
    assert_names(&e, &["rank 2", "rank 3"]);
}

#[test]
fn gather_elements_dim_mismatch_onnx_allows_smaller() {
    // ONNX: indices.shape[i] <= data.shape[i] for i != axis.
    let e = invalid(Signature::gather_elements(&[3, 3], &[2, 4], 0));
    assert!(
        matches!(
            e,
            Error::DimMismatch {
                op: OpName::GatherElements,
                dim: 1,
                data: 3,
                indices: 4,
                ..
            }
        ),
        "{e:?}"
    );
    assert_names(&e, &["dim 1", "is 4", "data's is 3"]);
    let v = Signature::gather_elements(&[3, 3], &[2, 2], 0)
        .validate()
        .unwrap();
    assert_eq!(v.output_shape(), &[2, 2]);
    // The axis dim itself is free.
    let v = Signature::gather_elements(&[3, 3], &[5, 3], 0)
        .validate()
        .unwrap();
    assert_eq!(v.output_shape(), &[5, 3]);
}

#[test]
fn gather_elements_dim_mismatch_openvino_requires_equal() {
    let sig = |i: &[usize]| {
        Signature::gather_elements(&[3, 3], i, 0).with_flavor(Flavor::OpenvinoGatherElements6)
    };
    let e = invalid(sig(&[2, 2]));
    assert!(
        matches!(e, Error::DimMismatch { dim: 1, data: 3, indices: 2, rule, .. } if rule.contains("equal")),
        "{e:?}"
    );
    assert_names(&e, &["dim 1", "is 2", "data's is 3", "equal"]);
    assert_eq!(sig(&[5, 3]).validate().unwrap().output_shape(), &[5, 3]);
}

#[test]
fn element_count_overflow() {
    let e = invalid(Signature::gather(&[usize::MAX, 2], &[1], 0, 0));
    assert!(
        matches!(e, Error::SizeOverflow { what: "data", ref shape , .. } if shape == &[usize::MAX, 2]),
        "{e:?}"
    );
    assert_names(&e, &["data", &format!("[{}, 2]", usize::MAX)]);
    assert_eq!(e.category(), "size overflow");
}

/// A shape with a zero dim has no elements, but strides computed from it still overflow.
#[test]
fn element_count_overflow_with_a_zero_dim() {
    let e = invalid(Signature::gather(&[usize::MAX, 2, 0], &[1], 2, 0));
    assert!(
        matches!(e, Error::SizeOverflow { what: "data", ref shape , .. } if shape == &[usize::MAX, 2, 0]),
        "{e:?}"
    );
    assert_names(&e, &[&format!("[{}, 2, 0]", usize::MAX)]);
    // Wherever the zero dim is: the stride of the first dim here is 0 * usize::MAX * 2 bytes
    // only if the zero is counted, which it must not be.
    for shape in [[0, usize::MAX, 2], [2, 0, usize::MAX]] {
        let e = invalid(Signature::gather(&shape, &[1], 0, 0).with_dtype(DType::U8));
        assert!(
            matches!(e, Error::SizeOverflow { what: "data", shape: ref s , .. } if s == &shape),
            "{e:?}"
        );
    }
}

#[test]
fn byte_size_overflow() {
    // The element count fits, the byte count (4 bytes each) does not fit in isize.
    let elements = isize::MAX as usize / 4 + 1;
    let e = invalid(Signature::gather(&[elements], &[1], 0, 0).with_dtype(DType::F32));
    assert!(
        matches!(e, Error::SizeOverflow { what: "data", .. }),
        "{e:?}"
    );
    assert_names(&e, &[&elements.to_string()]);
    // Fine as single bytes.
    Signature::gather(&[elements], &[1], 0, 0)
        .with_dtype(DType::U8)
        .validate()
        .unwrap();

    // Indices are checked with their own element size.
    let e = invalid(
        Signature::gather(&[4], &[elements], 0, 0)
            .with_index_type(IndexType::I32)
            .with_dtype(DType::U8),
    );
    assert!(
        matches!(
            e,
            Error::SizeOverflow {
                what: "indices",
                ..
            }
        ),
        "{e:?}"
    );
    assert_names(&e, &["indices"]);
}

#[test]
fn output_size_overflow() {
    // data 2^43 bytes and indices 2^41 bytes fit; the output, 2^61 f32 = 2^63 bytes, does not.
    let sig = Signature::gather(&[1 << 21, 1 << 20], &[1 << 21, 1 << 20], 0, 0)
        .with_dtype(DType::F32)
        .with_index_type(IndexType::U8);
    let e = invalid(sig);
    assert!(
        matches!(e, Error::SizeOverflow { what: "output", ref shape , .. } if shape == &[1 << 21, 1 << 20, 1 << 20]),
        "{e:?}"
    );
    assert_names(&e, &["output", "[2097152, 1048576, 1048576]"]);
}

// ---------------------------------------------------------------------------------------------
// Bad indices at run time.

#[test]
fn out_of_range_index_reports_position_and_value() {
    let e = run_err(
        Signature::gather(&[3], &[3], 0, 0),
        &[10, 20, 30],
        &[0, 3, 5],
    );
    assert!(
        matches!(e, Error::IndexOutOfRange { op: OpName::Gather, ref position, value: 3, data_dim: 0, dim_size: 3 , .. } if position == &[1]),
        "{e:?}"
    );
    assert_names(&e, &["index 3", "position [1]", "size 3"]);
    assert_eq!(e.category(), "index out of bounds");
}

#[test]
fn first_bad_index_in_row_major_order_is_reported() {
    // indices [[0, 9], [8, 0]]: 9 at [0, 1] comes before 8 at [1, 0].
    let e = run_err(
        Signature::gather(&[2, 3], &[2, 2], 1, 0),
        &[1, 2, 3, 4, 5, 6],
        &[0, 9, 8, 0],
    );
    assert!(
        matches!(e, Error::IndexOutOfRange { ref position, value: 9, data_dim: 1, dim_size: 3, .. } if position == &[0, 1]),
        "{e:?}"
    );
    assert_names(&e, &["index 9", "position [0, 1]"]);

    // GatherND: each tuple component is checked against its own dim.
    let e = run_err(
        Signature::gather_nd(&[2, 3], &[2, 2], 0),
        &[1, 2, 3, 4, 5, 6],
        &[1, 2, 1, 3],
    );
    assert!(
        matches!(e, Error::IndexOutOfRange { op: OpName::GatherNd, ref position, value: 3, data_dim: 1, dim_size: 3 , .. } if position == &[1, 1]),
        "{e:?}"
    );
    assert_names(&e, &["index 3", "position [1, 1]", "dim 1"]);
}

#[test]
fn negative_index_under_invalid() {
    // TensorRT: indices must be in [0, dim).
    let e = run_err(
        Signature::gather(&[3], &[2], 0, 0).with_flavor(Flavor::TensorRt),
        &[10, 20, 30],
        &[1, -1],
    );
    assert!(
        matches!(e, Error::IndexOutOfRange { ref position, value: -1, .. } if position == &[1]),
        "{e:?}"
    );
    assert_names(&e, &["index -1", "position [1]"]);

    // An explicit override on an ONNX GatherElements.
    let e = run_err(
        Signature::gather_elements(&[3], &[1], 0).with_negative(NegativeIndices::Invalid),
        &[10, 20, 30],
        &[-3],
    );
    assert!(
        matches!(e, Error::IndexOutOfRange { value: -3, .. }),
        "{e:?}"
    );
    assert_names(&e, &["index -3"]);
}

#[test]
fn negative_index_below_minus_dim_under_wrap() {
    let e = run_err(Signature::gather(&[3], &[1], 0, 0), &[10, 20, 30], &[-4]);
    assert!(
        matches!(
            e,
            Error::IndexOutOfRange {
                value: -4,
                dim_size: 3,
                ..
            }
        ),
        "{e:?}"
    );
    assert_names(&e, &["index -4"]);
    // -3 is the last one that wraps.
    assert_eq!(
        run(Signature::gather(&[3], &[1], 0, 0), &[10, 20, 30], &[-3]).unwrap(),
        [10]
    );
}

/// A u64 index above i64::MAX must not be read as negative (and wrapped).
#[test]
fn u64_index_above_i64_max() {
    let sig = Signature::gather(&[3], &[1], 0, 0)
        .with_dtype(DType::I32)
        .with_index_type(IndexType::U64);
    let v = sig.validate().unwrap();
    for raw in [u64::MAX, 1 << 63, (1 << 63) + 2] {
        let e = interpret(&v, &i32_bytes(&[10, 20, 30]), &raw.to_ne_bytes()).unwrap_err();
        assert!(
            matches!(e, Error::IndexOutOfRange { value, .. } if value == i128::from(raw)),
            "{e:?}"
        );
        assert_names(&e, &[&format!("index {raw}")]);
    }
    // Under Gather-8 (wrap negatives, zero out of range) it is zeros, not a wrapped read.
    let v = sig.with_flavor(Flavor::OpenvinoGather8).validate().unwrap();
    let out = interpret(
        &v,
        &i32_bytes(&[10, 20, 30]),
        &((1u64 << 63) + 2).to_ne_bytes(),
    )
    .unwrap();
    assert_eq!(i32_values(&out), [0]);
}

/// ONNX Runtime once let index 0 through on a zero-length dimension.
#[test]
fn index_into_a_zero_length_dim() {
    let e = run_err(Signature::gather(&[2, 0], &[1], 1, 0), &[], &[0]);
    assert!(
        matches!(e, Error::IndexOutOfRange { ref position, value: 0, data_dim: 1, dim_size: 0, .. } if position == &[0]),
        "{e:?}"
    );
    assert_names(&e, &["index 0", "size 0"]);

    let e = run_err(Signature::gather_nd(&[2, 0], &[1, 2], 0), &[], &[1, 0]);
    assert!(
        matches!(e, Error::IndexOutOfRange { ref position, value: 0, data_dim: 1, dim_size: 0, .. } if position == &[0, 1]),
        "{e:?}"
    );

    let e = run_err(
        Signature::gather_elements(&[0, 3], &[1, 3], 0),
        &[],
        &[0, 0, 0],
    );
    assert!(
        matches!(e, Error::IndexOutOfRange { ref position, value: 0, data_dim: 0, dim_size: 0, .. } if position == &[0, 0]),
        "{e:?}"
    );

    // Clamp has nothing to clamp to: still an error.
    let e = run_err(
        Signature::gather(&[0], &[1], 0, 0).with_out_of_range(OutOfRange::Clamp),
        &[],
        &[0],
    );
    assert!(
        matches!(e, Error::IndexOutOfRange { dim_size: 0, .. }),
        "{e:?}"
    );

    // Zero fills the slice.
    let out = run(
        Signature::gather(&[2, 0], &[1], 1, 0).with_out_of_range(OutOfRange::Zero),
        &[],
        &[0],
    )
    .unwrap();
    assert_eq!(out, [0, 0]);
}

/// Indices are checked even when the output is empty (here data [3, 0] gives output [1, 0]).
#[test]
fn bad_index_reported_even_if_the_output_is_empty() {
    let sig = Signature::gather(&[3, 0], &[1], 0, 0);
    assert_eq!(sig.validate().unwrap().output_shape(), &[1, 0]);
    let e = run_err(sig, &[], &[7]);
    assert!(
        matches!(
            e,
            Error::IndexOutOfRange {
                value: 7,
                dim_size: 3,
                ..
            }
        ),
        "{e:?}"
    );
    // ... and a good index gives the empty output.
    assert_eq!(
        run(Signature::gather(&[3, 0], &[1], 0, 0), &[], &[2]).unwrap(),
        Vec::<i32>::new()
    );
}

#[test]
fn buffer_length_mismatch() {
    let v = Signature::gather(&[3], &[2], 0, 0)
        .with_dtype(DType::I32)
        .with_index_type(IndexType::I64)
        .validate()
        .unwrap();
    let indices = index_bytes(IndexType::I64, &[0, 1]);
    let e = interpret(&v, &i32_bytes(&[1, 2]), &indices).unwrap_err();
    assert!(
        matches!(e, Error::BufferMismatch { what: "data", .. }),
        "{e:?}"
    );
    assert_names(&e, &["data", "12 bytes", "8 bytes"]);
    assert_eq!(e.category(), "buffer mismatch");

    let e = interpret(&v, &i32_bytes(&[1, 2, 3]), &indices[..12]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::BufferMismatch {
                what: "indices",
                ..
            }
        ),
        "{e:?}"
    );
    assert_names(&e, &["indices", "16 bytes", "12 bytes"]);
}

// ---------------------------------------------------------------------------------------------
// Index policies.

/// `data = [[1, 2], [3, 4]]`.
const D2X2: [i32; 4] = [1, 2, 3, 4];

#[test]
fn zero_policy_zero_fills_the_slice() {
    // Gather: index 5 and -3 (below -2) give zero rows; -1 wraps to row 1.
    let expected = [3, 4, 0, 0, 3, 4, 0, 0];
    let onnx_zero = Signature::gather(&[2, 2], &[4], 0, 0).with_out_of_range(OutOfRange::Zero);
    assert_eq!(run(onnx_zero, &D2X2, &[1, 5, -1, -3]).unwrap(), expected);
    // Gather-8 does this by default, as does the shared kernel of Gather-1 and Gather-7.
    for flavor in [
        Flavor::OpenvinoGather1,
        Flavor::OpenvinoGather7,
        Flavor::OpenvinoGather8,
    ] {
        let sig = Signature::gather(&[2, 2], &[4], 0, 0).with_flavor(flavor);
        assert_eq!(
            run(sig, &D2X2, &[1, 5, -1, -3]).unwrap(),
            expected,
            "{flavor}"
        );
    }

    // GatherND: one bad component zeroes the whole tuple's slice.
    let sig = Signature::gather_nd(&[2, 2], &[3, 2], 0).with_out_of_range(OutOfRange::Zero);
    assert_eq!(run(sig, &D2X2, &[1, 1, 0, 7, 1, 0]).unwrap(), [4, 0, 3]);
    let sig = Signature::gather_nd(&[2, 2], &[2, 1], 0).with_out_of_range(OutOfRange::Zero);
    assert_eq!(run(sig, &D2X2, &[2, 0]).unwrap(), [0, 0, 1, 2]);

    // GatherElements: that element only.
    let sig = Signature::gather_elements(&[2, 2], &[2, 2], 1).with_out_of_range(OutOfRange::Zero);
    assert_eq!(run(sig, &D2X2, &[1, 2, -1, -3]).unwrap(), [2, 0, 4, 0]);
}

#[test]
fn clamp_policy_clamps() {
    let data = [10, 20, 30];
    let wrap_clamp = Signature::gather(&[3], &[5], 0, 0).with_out_of_range(OutOfRange::Clamp);
    // 5 -> 2; -1 wraps to 2; -7 wraps to -4, clamps to 0; 1 stays; 3 -> 2.
    assert_eq!(
        run(wrap_clamp, &data, &[5, -1, -7, 1, 3]).unwrap(),
        [30, 30, 10, 20, 30]
    );
    let invalid_clamp = Signature::gather(&[3], &[3], 0, 0).with_policy(IndexPolicy {
        negative: NegativeIndices::Invalid,
        out_of_range: OutOfRange::Clamp,
    });
    // With negatives invalid, -1 clamps to 0 instead of wrapping.
    assert_eq!(
        run(invalid_clamp, &data, &[-1, 9, 2]).unwrap(),
        [10, 30, 30]
    );

    // GatherND clamps each component by its own dim: data [2, 3], tuple (5, -9) -> (1, 0).
    let sig = Signature::gather_nd(&[2, 3], &[1, 2], 0).with_policy(IndexPolicy {
        negative: NegativeIndices::Invalid,
        out_of_range: OutOfRange::Clamp,
    });
    assert_eq!(run(sig, &[1, 2, 3, 4, 5, 6], &[5, -9]).unwrap(), [4]);
}

/// Negative indices wrap by the size of the dimension they index.
#[test]
fn wrap_uses_the_indexed_dim() {
    // data [[1, 2, 3], [4, 5, 6]]: dim 0 has 2, dim 1 has 3.
    let data = [1, 2, 3, 4, 5, 6];

    // GatherND batch_dims 1: the index addresses data.shape[1 + 0] = 3, not data.shape[0] = 2.
    // -1 -> 2 in batch 0 (3); -3 -> 0 in batch 1 (4). By dim 0, -3 would be out of range.
    for flavor in [
        Flavor::Onnx,
        Flavor::OpenvinoGatherNd5,
        Flavor::OpenvinoGatherNd8,
    ] {
        let sig = Signature::gather_nd(&[2, 3], &[2, 1], 1).with_flavor(flavor);
        assert_eq!(run(sig, &data, &[-1, -3]).unwrap(), [3, 4], "{flavor}");
    }
    // GatherND depth 2: (-1, -3) -> (1, 0) = 4; (-2, -1) -> (0, 2) = 3.
    let sig = Signature::gather_nd(&[2, 3], &[2, 2], 0);
    assert_eq!(run(sig, &data, &[-1, -3, -2, -1]).unwrap(), [4, 3]);

    // Gather axis 1 wraps by 3.
    let sig = Signature::gather(&[2, 3], &[1], 1, 0);
    assert_eq!(run(sig, &data, &[-3]).unwrap(), [1, 4]);
    // Gather-8 with batch_dims 1 along axis 1.
    let sig = Signature::gather(&[2, 3], &[2, 1], 1, 1).with_flavor(Flavor::OpenvinoGather8);
    assert_eq!(run(sig, &data, &[-1, -3]).unwrap(), [3, 4]);

    // GatherElements along axis 1 wraps by 3, along axis 0 by 2.
    let sig = Signature::gather_elements(&[2, 3], &[2, 1], 1);
    assert_eq!(run(sig, &data, &[-1, -3]).unwrap(), [3, 4]);
    let sig = Signature::gather_elements(&[2, 3], &[1, 3], 0);
    assert_eq!(run(sig, &data, &[-1, -2, -1]).unwrap(), [4, 2, 6]);
}

/// Each flavor's default policy, as its reference implementation behaves (docs/semantics.md).
#[test]
fn default_policies_follow_the_references() {
    use NegativeIndices::{Invalid, Wrap};
    use OutOfRange::{Error as Fail, Zero};
    let expected = [
        (Flavor::Onnx, Wrap, Fail),
        (Flavor::OpenvinoGather1, Wrap, Zero),
        (Flavor::OpenvinoGather7, Wrap, Zero),
        (Flavor::OpenvinoGather8, Wrap, Zero),
        (Flavor::OpenvinoGatherNd5, Wrap, Fail),
        (Flavor::OpenvinoGatherNd8, Wrap, Fail),
        (Flavor::OpenvinoGatherElements6, Invalid, Fail),
        (Flavor::TensorRt, Invalid, Fail),
    ];
    for (flavor, negative, out_of_range) in expected {
        assert_eq!(
            flavor.default_policy(),
            IndexPolicy {
                negative,
                out_of_range
            },
            "{flavor}"
        );
    }
}

/// GatherElements-6: the spec allows `[0, s-1]` and OpenVINO's reference kernel throws on a
/// negative index (its CPU plugin would wrap it).
#[test]
fn gather_elements6_rejects_negative_indices() {
    let sig = Signature::gather_elements(&[2, 3], &[1, 3], 0)
        .with_flavor(Flavor::OpenvinoGatherElements6);
    let e = run_err(sig, &[1, 2, 3, 4, 5, 6], &[1, -1, 0]);
    assert!(
        matches!(e, Error::IndexOutOfRange { ref position, value: -1, data_dim: 0, dim_size: 2, .. } if position == &[0, 1]),
        "{e:?}"
    );
    assert_names(&e, &["index -1", "position [0, 1]"]);
}

/// The example messages of docs/semantics.md, verbatim: if a message changes, so must the doc.
#[test]
fn documented_messages() {
    let cases: [(Error, &str); 11] = [
        (
            invalid(Signature::gather_nd(&[2, 2], &[2, 1], 0).with_flavor(Flavor::OpenvinoGather8)),
            "GatherND: flavor openvino-gather8 does not define this operator",
        ),
        (
            invalid(Signature::gather(&[2, 3], &[2], 1, 1)),
            "Gather: flavor onnx does not support batch_dims=1 (only 0)",
        ),
        (
            invalid(Signature::gather(&[], &[1], 0, 0)),
            "Gather: data has rank 0, but at least 1 is required",
        ),
        (
            invalid(Signature::gather(&[2, 3], &[1], 2, 0)),
            "Gather: axis 2 is out of range for data of rank 2 (allowed -2..=1)",
        ),
        (
            invalid(
                Signature::gather(&[2, 3, 4], &[2, 3], 0, 1).with_flavor(Flavor::OpenvinoGather8),
            ),
            "Gather: batch_dims 1 must not exceed axis 0",
        ),
        (
            invalid(Signature::gather_nd(&[2, 3], &[3, 1], 1)),
            "GatherND: batch dims mismatch at dim 0: data has 2, indices have 3 (data [2, 3], indices [3, 1])",
        ),
        (
            invalid(Signature::gather_nd(&[2, 3, 4], &[2, 3], 1)),
            "GatherND: indices last dim 3 must be in 1..=2 (data rank minus batch_dims)",
        ),
        (
            invalid(Signature::gather_elements(&[2, 3], &[2, 3, 1], 0)),
            "GatherElements: data has rank 2 but indices have rank 3; they must be equal",
        ),
        (
            invalid(Signature::gather_elements(&[3, 3], &[2, 4], 0)),
            "GatherElements: indices dim 1 is 4 but data's is 3; it must be at most data's",
        ),
        (
            invalid(Signature::gather(&[usize::MAX, 2, 0], &[1], 2, 0)),
            "data of shape [18446744073709551615, 2, 0] has more elements or bytes than fit in memory",
        ),
        (
            run_err(Signature::gather(&[3], &[2], 0, 0), &[1, 2, 3], &[0, 3]),
            "Gather: index 3 at position [1] of indices is out of range for data dim 0 of size 3",
        ),
    ];
    for (error, message) in cases {
        assert_eq!(error.to_string(), message);
    }
}

/// `fn main() -> Result<(), Error>` prints an error's `Debug`: it reads as its message.
#[test]
fn debug_reads_as_the_message() {
    let error = Signature::gather(&[2, 3], &[4], 5, 0)
        .validate()
        .expect_err("axis 5 of rank 2");
    assert_eq!(format!("{error:?}"), error.to_string());
    assert!(format!("{error:?}").starts_with("Gather: "), "{error:?}");
}
