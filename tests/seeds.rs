//! Every example of the seed specs (`shared/seeds/`), checked by the interpreter.
//!
//! Expected values and shapes are typed by hand from the spec text. Integer examples use `i32`
//! data; the TensorRT examples use `f32` data and `i32` indices as the TensorRT page does.

use gather_jit::interp::interpret;
use gather_jit::{DType, Flavor, IndexType, Signature};

use crate::util::{f32_bytes, i32_bytes, index_bytes};

/// Runs `signature` (with `i32` data) through the interpreter and checks shape and values.
#[track_caller]
fn check_i32(
    signature: Signature,
    data: &[i32],
    indices: &[i64],
    expected_shape: &[usize],
    expected: &[i32],
) {
    let signature = signature.with_dtype(DType::I32);
    let validated = signature
        .validate()
        .unwrap_or_else(|e| panic!("{signature}: {e}"));
    assert_eq!(validated.output_shape(), expected_shape, "{signature}");
    let out = interpret(
        &validated,
        &i32_bytes(data),
        &index_bytes(signature.index_type, indices),
    )
    .unwrap_or_else(|e| panic!("{signature}: {e}"));
    assert_eq!(out, i32_bytes(expected), "{signature}");
}

/// Runs `signature` (with `f32` data, `i32` indices) and checks shape and values.
#[track_caller]
fn check_f32(
    signature: Signature,
    data: &[f32],
    indices: &[i64],
    expected_shape: &[usize],
    expected: &[f32],
) {
    let signature = signature
        .with_dtype(DType::F32)
        .with_index_type(IndexType::I32);
    let validated = signature
        .validate()
        .unwrap_or_else(|e| panic!("{signature}: {e}"));
    assert_eq!(validated.output_shape(), expected_shape, "{signature}");
    let out = interpret(
        &validated,
        &f32_bytes(data),
        &index_bytes(IndexType::I32, indices),
    )
    .unwrap_or_else(|e| panic!("{signature}: {e}"));
    assert_eq!(out, f32_bytes(expected), "{signature}");
}

/// Only validates: checks the inferred output shape.
#[track_caller]
fn check_shape(signature: Signature, expected_shape: &[usize]) {
    let validated = signature
        .validate()
        .unwrap_or_else(|e| panic!("{signature}: {e}"));
    assert_eq!(validated.output_shape(), expected_shape, "{signature}");
}

// ---------------------------------------------------------------------------------------------
// OpenVINO GatherND-8 (seeds 000 and 004, the same spec in English and Japanese), examples 1-7.
// Each example is checked under GatherND-8 and, as the rules coincide there, ONNX GatherND.

const ND8_FLAVORS: [Flavor; 2] = [Flavor::OpenvinoGatherNd8, Flavor::Onnx];

/// `data = [[1, 2], [3, 4]]`, shape (2, 2).
const DATA_2X2: [i32; 4] = [1, 2, 3, 4];

/// `data` of examples 5 and 6: 1..=24, shape (2, 3, 4).
const DATA_2X3X4: [i32; 24] = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, //
    13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
];

#[test]
fn gathernd8_example1_elements() {
    for flavor in ND8_FLAVORS {
        let sig = Signature::gather_nd(&[2, 2], &[2, 2], 0)
            .with_flavor(flavor)
            .with_index_type(IndexType::I32);
        check_i32(sig, &DATA_2X2, &[0, 0, 1, 0], &[2], &[1, 3]);
    }
}

#[test]
fn gathernd8_example2_slices() {
    for flavor in ND8_FLAVORS {
        let sig = Signature::gather_nd(&[2, 2], &[2, 1], 0).with_flavor(flavor);
        check_i32(sig, &DATA_2X2, &[1, 0], &[2, 2], &[3, 4, 1, 2]);
    }
}

#[test]
fn gathernd8_example3_leading_dims() {
    for flavor in ND8_FLAVORS {
        let sig = Signature::gather_nd(&[2, 2], &[2, 1, 1], 0).with_flavor(flavor);
        check_i32(sig, &DATA_2X2, &[1, 0], &[2, 1, 2], &[3, 4, 1, 2]);
    }
}

#[test]
fn gathernd8_example4_batch_dims1_elements() {
    for flavor in ND8_FLAVORS {
        let sig = Signature::gather_nd(&[2, 2], &[2, 1], 1).with_flavor(flavor);
        check_i32(sig, &DATA_2X2, &[1, 0], &[2], &[2, 3]);
    }
}

#[test]
fn gathernd8_example5_batch_dims1_slices() {
    for flavor in ND8_FLAVORS {
        let sig = Signature::gather_nd(&[2, 3, 4], &[2, 1], 1).with_flavor(flavor);
        check_i32(
            sig,
            &DATA_2X3X4,
            &[1, 0],
            &[2, 4],
            &[5, 6, 7, 8, 13, 14, 15, 16],
        );
    }
}

#[test]
fn gathernd8_example6_batch_dims2() {
    for flavor in ND8_FLAVORS {
        let sig = Signature::gather_nd(&[2, 3, 4], &[2, 3, 1, 1], 2).with_flavor(flavor);
        check_i32(
            sig,
            &DATA_2X3X4,
            &[1, 0, 2, 0, 2, 2],
            &[2, 3, 1],
            &[2, 5, 11, 13, 19, 23],
        );
    }
}

#[test]
fn gathernd8_example7_batch_dims3() {
    let data = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];
    for flavor in ND8_FLAVORS {
        let sig = Signature::gather_nd(&[1, 2, 2, 4], &[1, 2, 2, 1], 3).with_flavor(flavor);
        check_i32(sig, &data, &[1, 0, 3, 2], &[1, 2, 2], &[2, 5, 12, 15]);
    }
}

/// Examples 6 and 7 under GatherND-5, whose output flattens the batch dims into one:
/// `[prod(indices.shape[:b])] + indices.shape[b:-1] + data.shape[b + depth:]`. Same values.
#[test]
fn gathernd5_flattens_the_batch_dims_of_examples_6_and_7() {
    let sig =
        Signature::gather_nd(&[2, 3, 4], &[2, 3, 1, 1], 2).with_flavor(Flavor::OpenvinoGatherNd5);
    check_i32(
        sig,
        &DATA_2X3X4,
        &[1, 0, 2, 0, 2, 2],
        &[6, 1],
        &[2, 5, 11, 13, 19, 23],
    );
    let data = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];
    let sig = Signature::gather_nd(&[1, 2, 2, 4], &[1, 2, 2, 1], 3)
        .with_flavor(Flavor::OpenvinoGatherNd5);
    check_i32(sig, &data, &[1, 0, 3, 2], &[4], &[2, 5, 12, 15]);
}

// The three OpenVINO IR `<layer>` examples of GatherND-8: output shapes.

#[test]
fn gathernd8_ir_layer_batch_dims0_shape() {
    let sig = Signature::gather_nd(&[1000, 256, 10, 15], &[25, 125, 3], 0)
        .with_flavor(Flavor::OpenvinoGatherNd8);
    check_shape(sig, &[25, 125, 15]);
}

#[test]
fn gathernd8_ir_layer_batch_dims2_shape() {
    let sig = Signature::gather_nd(&[30, 2, 100, 35], &[30, 2, 3, 1], 2)
        .with_flavor(Flavor::OpenvinoGatherNd8);
    check_shape(sig, &[30, 2, 3, 35]);
}

#[test]
fn gathernd8_ir_layer_batch_dims3_shape() {
    let sig = Signature::gather_nd(&[1, 64, 64, 320], &[1, 64, 64, 1, 1], 3)
        .with_flavor(Flavor::OpenvinoGatherNd8);
    check_shape(sig, &[1, 64, 64, 1]);
}

/// The batch_dims 3 layer is small enough to run: its output length must match the shape.
#[test]
fn gathernd8_ir_layer_batch_dims3_runs() {
    let sig = Signature::gather_nd(&[1, 64, 64, 320], &[1, 64, 64, 1, 1], 3)
        .with_flavor(Flavor::OpenvinoGatherNd8)
        .with_dtype(DType::U8)
        .with_index_type(IndexType::I32);
    let validated = sig.validate().unwrap();
    let data = vec![7u8; 64 * 64 * 320];
    let indices = index_bytes(IndexType::I32, &[319; 64 * 64]);
    let out = interpret(&validated, &data, &indices).unwrap();
    assert_eq!(out, vec![7u8; 64 * 64]);
}

// ---------------------------------------------------------------------------------------------
// modeci_mdf.functions.onnx.gathernd (seed 001): ONNX GatherND examples 1-5.

/// `data = [[0, 1], [2, 3]]`, shape (2, 2).
const MDF_2X2: [i32; 4] = [0, 1, 2, 3];
/// `data = [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]`, shape (2, 2, 2).
const MDF_2X2X2: [i32; 8] = [0, 1, 2, 3, 4, 5, 6, 7];

#[test]
fn mdf_example1() {
    let sig = Signature::gather_nd(&[2, 2], &[2, 2], 0);
    check_i32(sig, &MDF_2X2, &[0, 0, 1, 1], &[2], &[0, 3]);
}

#[test]
fn mdf_example2() {
    let sig = Signature::gather_nd(&[2, 2], &[2, 1], 0);
    check_i32(sig, &MDF_2X2, &[1, 0], &[2, 2], &[2, 3, 0, 1]);
}

#[test]
fn mdf_example3() {
    let sig = Signature::gather_nd(&[2, 2, 2], &[2, 2], 0);
    check_i32(sig, &MDF_2X2X2, &[0, 1, 1, 0], &[2, 2], &[2, 3, 4, 5]);
}

#[test]
fn mdf_example4() {
    let sig = Signature::gather_nd(&[2, 2, 2], &[2, 1, 2], 0);
    check_i32(sig, &MDF_2X2X2, &[0, 1, 1, 0], &[2, 1, 2], &[2, 3, 4, 5]);
}

#[test]
fn mdf_example5_batch_dims1() {
    let sig = Signature::gather_nd(&[2, 2, 2], &[2, 1], 1);
    check_i32(sig, &MDF_2X2X2, &[1, 0], &[2, 2], &[2, 3, 4, 5]);
}

/// MDF's point 5: indices in `[-s, s-1]` are allowed; example 1 with the negative forms.
#[test]
fn mdf_example1_with_negative_indices() {
    let sig = Signature::gather_nd(&[2, 2], &[2, 2], 0);
    check_i32(sig, &MDF_2X2, &[-2, -2, -1, -1], &[2], &[0, 3]);
}

// ---------------------------------------------------------------------------------------------
// TensorRT IGatherLayer documentation (seed 002): data (2, 1, 5) f32, i32 indices.

/// `[[[-3, -2, -1, 10, -25]], [[0, 1, 2, -2, -1]]]`, shape (2, 1, 5).
const TRT_DATA: [f32; 10] = [-3.0, -2.0, -1.0, 10.0, -25.0, 0.0, 1.0, 2.0, -2.0, -1.0];

fn trt(sig: Signature) -> Signature {
    sig.with_flavor(Flavor::TensorRt)
}

#[test]
fn tensorrt_gather() {
    // The indices input is declared (1, 3); the page feeds it np.array([2, 1, 1]).
    let sig = trt(Signature::gather(&[2, 1, 5], &[1, 3], 2, 0));
    check_f32(
        sig,
        &TRT_DATA,
        &[2, 1, 1],
        &[2, 1, 1, 3],
        &[-1.0, -2.0, -2.0, 2.0, 1.0, 1.0],
    );
}

#[test]
fn tensorrt_gather_2d_indices() {
    let sig = trt(Signature::gather(&[2, 1, 5], &[2, 2], 2, 0));
    check_f32(
        sig,
        &TRT_DATA,
        &[2, 1, 3, 3],
        &[2, 1, 2, 2],
        &[-1.0, -2.0, 10.0, 10.0, 2.0, 1.0, -2.0, -2.0],
    );
}

#[test]
fn tensorrt_gather_elements_axis2() {
    let sig = trt(Signature::gather_elements(&[2, 1, 5], &[2, 1, 5], 2));
    check_f32(
        sig,
        &TRT_DATA,
        &[0, 1, 2, 3, 4, 4, 2, 3, 3, 1],
        &[2, 1, 5],
        &[-3.0, -2.0, -1.0, 10.0, -25.0, -1.0, 2.0, -2.0, -2.0, 1.0],
    );
}

#[test]
fn tensorrt_gather_elements_axis0() {
    let sig = trt(Signature::gather_elements(&[2, 1, 5], &[2, 1, 5], 0));
    check_f32(
        sig,
        &TRT_DATA,
        &[0, 1, 1, 0, 0, 1, 1, 0, 0, 1],
        &[2, 1, 5],
        &[-3.0, 1.0, 2.0, 10.0, -25.0, 0.0, 1.0, -1.0, 10.0, -1.0],
    );
}

/// The page prints the expected output as `[[-1.0, 1.0]]`, shape (1, 2), but GatherND's shape
/// rule (and TensorRT's own output-rank formula) gives rank 1: `indices.shape[:-1] = (2,)`.
/// numpy's comparison broadcasts the extra bracket away; the values are the point.
#[test]
fn tensorrt_gather_nd() {
    let sig = trt(Signature::gather_nd(&[2, 1, 5], &[2, 3], 0));
    check_f32(sig, &TRT_DATA, &[0, 0, 2, 1, 0, 1], &[2], &[-1.0, 1.0]);
}

// ---------------------------------------------------------------------------------------------
// OpenVINO Gather-1 (seed 003): the IR `<layer>` example, axis 1.

#[test]
fn gather1_ir_layer_shape() {
    for axis in [1, -3] {
        let sig = Signature::gather(&[6, 12, 10, 24], &[15, 4, 20, 28], axis, 0)
            .with_flavor(Flavor::OpenvinoGather1);
        check_shape(sig, &[6, 15, 4, 20, 28, 10, 24]);
    }
}

/// Gather-1's formula `output[p_0.., i..j, ...] = input1[p_0.., input2[i..j], ...]` on a small
/// case: data (2, 3), indices (2,) = [2, 0], axis 1.
#[test]
fn gather1_formula_small() {
    let sig = Signature::gather(&[2, 3], &[2], 1, 0).with_flavor(Flavor::OpenvinoGather1);
    check_i32(sig, &[1, 2, 3, 4, 5, 6], &[2, 0], &[2, 2], &[3, 1, 6, 4]);
}
