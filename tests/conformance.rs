//! Runs every conformance vector in `tests/conformance/**.json` (format: its `README.md`).
//!
//! [`run_all`] is reusable: it takes the function under test (the interpreter here, the JIT
//! elsewhere), so every path is held to the same vectors. A case checks the output bytes
//! exactly and the output shape, or the error category of an `expect_error` case, or only the
//! inferred shape (or error) of a shape-only case.

use std::io::Write as _;
use std::path::Path;

use gather_jit::ir::Validated;
use serde_json::Value;

pub use crate::vectors::gathers::case_files;
use crate::vectors::gathers::{dtype_of, encode_data, encode_indices, shape_of, signature_of};

/// The function under test: validated signature, data bytes, indices bytes -> output bytes.
pub type Runner<'a> = &'a dyn Fn(&Validated, &[u8], &[u8]) -> gather_jit::Result<Vec<u8>>;

/// Runs every conformance case through `runner`; returns the number of cases run.
///
/// # Panics
/// On the first case whose output, shape or error category differs, naming the case.
pub fn run_all(runner: Runner<'_>) -> usize {
    let files = case_files();
    for path in &files {
        run_file(path, runner);
    }
    files.len()
}

/// Runs one case file through `runner`.
///
/// # Panics
/// If the file is malformed or the case fails, with the case name in the message.
pub fn run_file(path: &Path, runner: Runner<'_>) {
    let (name, case) = crate::vectors::read_case(path);
    run_case(&name, &case, runner);
}

fn run_case(name: &str, case: &Value, runner: Runner<'_>) {
    let signature = signature_of(name, case);
    let expect_error = case.get("expect_error").map(|e| {
        e.as_str()
            .unwrap_or_else(|| panic!("{name}: expect_error must be a string"))
    });
    let validated = match (signature.validate(), expect_error) {
        (Ok(v), _) => v,
        (Err(e), Some(category)) => {
            assert_eq!(
                e.category(),
                category,
                "{name}: wrong error category (error: {e})"
            );
            return;
        }
        (Err(e), None) => panic!("{name}: validation failed: {e}"),
    };

    let data = &case["data"];
    let indices = &case["indices"];
    let has_values = data.get("values").is_some() && indices.get("values").is_some();
    if !has_values {
        // Shape-only case: the validated shape, or the error, is all there is to check.
        match expect_error {
            Some(category) => panic!(
                "{name}: expected a {category:?} error, but {signature} validated with output shape {:?}",
                validated.output_shape()
            ),
            None => {
                let expected = shape_of(name, &case["expected"]);
                assert_eq!(
                    validated.output_shape(),
                    &expected[..],
                    "{name}: inferred output shape"
                );
            }
        }
        return;
    }

    let data_bytes = encode_data(name, signature.dtype, &data["values"]);
    let indices_bytes = encode_indices(name, signature.index_type, &indices["values"]);
    let result = runner(&validated, &data_bytes, &indices_bytes);
    match (result, expect_error) {
        (Err(e), Some(category)) => {
            assert_eq!(
                e.category(),
                category,
                "{name}: wrong error category (error: {e})"
            );
        }
        (Ok(out), Some(category)) => {
            panic!(
                "{name}: expected a {category:?} error, got {} output bytes",
                out.len()
            )
        }
        (Err(e), None) => panic!("{name}: unexpected error: {e}"),
        (Ok(out), None) => {
            let expected = &case["expected"];
            let expected_dtype = dtype_of(name, expected);
            assert_eq!(
                expected_dtype, signature.dtype,
                "{name}: expected dtype differs from data's"
            );
            let expected_shape = shape_of(name, expected);
            assert_eq!(
                validated.output_shape(),
                &expected_shape[..],
                "{name}: output shape"
            );
            let expected_bytes = encode_data(name, expected_dtype, &expected["values"]);
            assert_eq!(
                expected_bytes.len(),
                expected_shape.iter().product::<usize>() * expected_dtype.size(),
                "{name}: the file's expected values do not fill its expected shape"
            );
            assert!(
                out == expected_bytes,
                "{name}: output bytes differ\n  got      {out:?}\n  expected {expected_bytes:?}"
            );
        }
    }
}

#[test]
fn every_conformance_case_passes_the_interpreter() {
    let files = case_files();
    assert!(
        files.len() >= 15,
        "expected at least 15 conformance files, found {}",
        files.len()
    );
    let ran = run_all(&gather_jit::interp::interpret);
    assert_eq!(ran, files.len(), "every conformance file must run");
    // Written to stderr directly so that the count shows even though the harness captures
    // `println!`/`eprintln!` of passing tests.
    let _ = writeln!(std::io::stderr(), "conformance: {ran} cases passed");
}

/// The runner really compares: a runner that flips one output byte must be caught.
#[test]
#[should_panic(expected = "output bytes differ")]
fn run_all_catches_a_wrong_byte() {
    run_all(&|v, d, i| {
        let mut out = gather_jit::interp::interpret(v, d, i)?;
        if let Some(b) = out.first_mut() {
            *b ^= 1;
        }
        Ok(out)
    });
}

// The harness's other paths, on inline cases (the shipped files are all value cases).

fn run_inline(case: Value) {
    let name = case["name"].as_str().unwrap_or("inline").to_string();
    run_case(&name, &case, &gather_jit::interp::interpret);
}

#[test]
fn harness_checks_an_expected_run_time_error() {
    run_inline(serde_json::json!({
        "suite": "inline", "name": "oob", "op": "Gather", "flavor": "onnx",
        "attrs": {"axis": 0, "batch_dims": 0},
        "data": {"dtype": "int32", "shape": [3], "values": [1, 2, 3]},
        "indices": {"dtype": "int64", "shape": [1], "values": [3]},
        "expect_error": "index out of bounds"
    }));
}

#[test]
#[should_panic(expected = "wrong error category")]
fn harness_rejects_a_wrong_error_category() {
    run_inline(serde_json::json!({
        "suite": "inline", "name": "oob", "op": "Gather", "flavor": "onnx",
        "attrs": {"axis": 0, "batch_dims": 0},
        "data": {"dtype": "int32", "shape": [3], "values": [1, 2, 3]},
        "indices": {"dtype": "int64", "shape": [1], "values": [3]},
        "expect_error": "axis out of range"
    }));
}

#[test]
fn harness_checks_a_shape_only_case_and_a_validation_error() {
    run_inline(serde_json::json!({
        "suite": "inline", "name": "shape", "op": "GatherND", "flavor": "openvino-gathernd5",
        "attrs": {"batch_dims": 2},
        "data": {"dtype": "float16", "shape": [30, 2, 100, 35]},
        "indices": {"dtype": "uint8", "shape": [30, 2, 3, 1]},
        "expected": {"dtype": "float16", "shape": [60, 3, 35]}
    }));
    run_inline(serde_json::json!({
        "suite": "inline", "name": "mismatch", "op": "GatherND", "flavor": "onnx",
        "attrs": {"batch_dims": 1},
        "data": {"dtype": "bool", "shape": [2, 3]},
        "indices": {"dtype": "int32", "shape": [3, 1]},
        "expect_error": "batch dims mismatch"
    }));
}

#[test]
#[should_panic(expected = "inferred output shape")]
fn harness_rejects_a_wrong_shape() {
    run_inline(serde_json::json!({
        "suite": "inline", "name": "shape", "op": "GatherND", "flavor": "openvino-gathernd8",
        "attrs": {"batch_dims": 2},
        "data": {"dtype": "float32", "shape": [30, 2, 100, 35]},
        "indices": {"dtype": "int64", "shape": [30, 2, 3, 1]},
        "expected": {"dtype": "float32", "shape": [60, 3, 35]}
    }));
}

#[test]
fn harness_encodes_half_bool_and_wide_integers() {
    // float16 and bfloat16 values exact in their type; bool; u64 above i64::MAX.
    run_inline(serde_json::json!({
        "suite": "inline", "name": "f16", "op": "GatherElements", "flavor": "onnx",
        "attrs": {"axis": 0},
        "data": {"dtype": "float16", "shape": [3], "values": [0.5, -1.25, 65504.0]},
        "indices": {"dtype": "int8", "shape": [2], "values": [-1, 0]},
        "expected": {"dtype": "float16", "shape": [2], "values": [65504.0, 0.5]}
    }));
    run_inline(serde_json::json!({
        "suite": "inline", "name": "bf16", "op": "Gather", "flavor": "openvino-gather8",
        "attrs": {"axis": 0, "batch_dims": 0},
        "data": {"dtype": "bfloat16", "shape": [2], "values": [-1.901475900342344e30, -0.0078125]},
        "indices": {"dtype": "uint16", "shape": [3], "values": [1, 7, 0]},
        "expected": {"dtype": "bfloat16", "shape": [3], "values": [-0.0078125, 0.0, -1.901475900342344e30]}
    }));
    run_inline(serde_json::json!({
        "suite": "inline", "name": "bool", "op": "Gather", "flavor": "onnx",
        "attrs": {"axis": 0, "batch_dims": 0},
        "data": {"dtype": "bool", "shape": [2], "values": [true, false]},
        "indices": {"dtype": "uint64", "shape": [2], "values": [1, 0]},
        "expected": {"dtype": "bool", "shape": [2], "values": [false, true]}
    }));
    run_inline(serde_json::json!({
        "suite": "inline", "name": "u64", "op": "Gather", "flavor": "onnx",
        "attrs": {"axis": 0, "batch_dims": 0},
        "data": {"dtype": "uint64", "shape": [2], "values": [18446744073709551615u64, 1]},
        "indices": {"dtype": "uint64", "shape": [1], "values": [18446744073709551615u64]},
        "expect_error": "index out of bounds"
    }));
}

#[test]
#[should_panic(expected = "is not an exact f16 value")]
fn harness_rejects_an_inexact_half_value() {
    run_inline(serde_json::json!({
        "suite": "inline", "name": "f16", "op": "GatherElements", "flavor": "onnx",
        "attrs": {"axis": 0},
        "data": {"dtype": "float16", "shape": [1], "values": [0.1]},
        "indices": {"dtype": "int8", "shape": [1], "values": [0]},
        "expected": {"dtype": "float16", "shape": [1], "values": [0.1]}
    }));
}
