//! Runs every scatter vector in `tests/conformance/scatter/**.json` (format: its `README.md`,
//! written by `scripts/scatter_vectors/make.py`) through the interpreter, out of place and in
//! place, bit for bit; and checks that a failing in-place call leaves its data untouched.
//!
//! [`run_all`] takes the function under test, so that a compiled scatter can be held to the
//! same vectors.

use std::io::Write as _;
use std::path::PathBuf;

use gather_jit::interp::{interpret_scatter, interpret_scatter_in_place};
use gather_jit::scatter::{Reduction, ScatterFlavor, ScatterLayout, ScatterOp, ScatterSignature};
use gather_jit::{DType, IndexType};
use serde_json::Value;

use crate::vectors::gathers::{
    dtype_of, encode_data as encode, encode_indices, shape_of, str_field, values_of,
};

/// The function under test: layout, data, indices, updates -> output bytes.
pub type Runner<'a> =
    &'a dyn Fn(&ScatterLayout, &[u8], &[u8], &[u8]) -> gather_jit::Result<Vec<u8>>;

/// Every `*.json` file under `tests/conformance/scatter/`, sorted by path.
pub fn case_files() -> Vec<PathBuf> {
    crate::vectors::json_files("scatter", &[])
}

/// Runs every scatter case through `runner`; returns the number of cases run.
///
/// # Panics
/// On the first case whose output or error category differs, naming the case.
pub fn run_all(runner: Runner<'_>) -> usize {
    let files = case_files();
    for path in &files {
        let (name, case) = crate::vectors::read_case(path);
        run_case(&name, &case, runner);
    }
    files.len()
}

fn run_case(name: &str, case: &Value, runner: Runner<'_>) {
    let signature = signature_of(name, case);
    let expect_error = case.get("expect_error").map(|e| {
        e.as_str()
            .unwrap_or_else(|| panic!("{name}: expect_error must be a string"))
    });
    let layout = match (signature.validate(), expect_error) {
        (Ok(layout), _) => layout,
        (Err(e), Some(category)) => {
            assert_eq!(e.category(), category, "{name}: wrong error category ({e})");
            return;
        }
        (Err(e), None) => panic!("{name}: validation failed: {e}"),
    };
    let has_values = ["data", "indices", "updates"]
        .iter()
        .all(|t| case[t].get("values").is_some());
    assert!(
        has_values,
        "{name}: {signature} validated, but the case has no values to run"
    );
    let data = encode(name, signature.dtype, &case["data"]["values"]);
    let indices = encode_indices(name, signature.index_type, &case["indices"]["values"]);
    let updates = encode(name, signature.dtype, &case["updates"]["values"]);
    match (runner(&layout, &data, &indices, &updates), expect_error) {
        (Err(e), Some(category)) => {
            assert_eq!(e.category(), category, "{name}: wrong error category ({e})")
        }
        (Ok(out), Some(category)) => panic!(
            "{name}: expected a {category:?} error, got {} output bytes",
            out.len()
        ),
        (Err(e), None) => panic!("{name}: unexpected error: {e}"),
        (Ok(out), None) => {
            let expected = &case["expected"];
            assert_eq!(
                dtype_of(name, expected),
                signature.dtype,
                "{name}: expected dtype differs from data's"
            );
            assert_eq!(
                shape_of(name, expected),
                signature.data_shape,
                "{name}: the expected shape is not data's"
            );
            compare(name, signature.dtype, &out, &expected["values"]);
        }
    }
}

/// The output equals the expected values bit for bit, but that an expected `"nan"` matches any
/// NaN of the type (frameworks disagree on NaN payloads).
fn compare(name: &str, dtype: DType, out: &[u8], expected: &Value) {
    let want = encode(name, dtype, expected);
    assert_eq!(out.len(), want.len(), "{name}: output length");
    let size = dtype.size();
    let is_nan = |bytes: &[u8]| match dtype {
        DType::F16 => half::f16::from_ne_bytes([bytes[0], bytes[1]]).is_nan(),
        DType::Bf16 => half::bf16::from_ne_bytes([bytes[0], bytes[1]]).is_nan(),
        DType::F32 => f32::from_ne_bytes(bytes.try_into().expect("4 bytes")).is_nan(),
        DType::F64 => f64::from_ne_bytes(bytes.try_into().expect("8 bytes")).is_nan(),
        _ => false,
    };
    let expected = values_of(name, expected);
    for (i, (got, want)) in out.chunks(size).zip(want.chunks(size)).enumerate() {
        let nan_wanted = expected[i].as_str() == Some("nan");
        let same = if nan_wanted { is_nan(got) } else { got == want };
        assert!(
            same,
            "{name}: output bytes differ at element {i}: got {got:?}, expected {} ({want:?})\n  got      {out:?}\n  expected {:?}",
            expected[i],
            encode(name, dtype, &Value::Array(expected.to_vec()))
        );
    }
}

/// The signature a case describes; the negative-index rule is the flavor's.
fn signature_of(name: &str, case: &Value) -> ScatterSignature {
    let flavor_name = str_field(name, case, "flavor");
    let flavor = ScatterFlavor::from_name(flavor_name)
        .unwrap_or_else(|| panic!("{name}: unknown flavor {flavor_name:?}"));
    let attrs = &case["attrs"];
    let axis = || {
        attrs["axis"]
            .as_i64()
            .unwrap_or_else(|| panic!("{name}: missing integer attribute axis"))
    };
    let op = match str_field(name, case, "op") {
        "ScatterND" => ScatterOp::Nd,
        "ScatterElements" => ScatterOp::Elements { axis: axis() },
        "ScatterUpdate" => ScatterOp::Update { axis: axis() },
        other => panic!("{name}: unknown op {other:?}"),
    };
    let reduction_name = str_field(name, attrs, "reduction");
    let reduction = Reduction::from_name(reduction_name)
        .unwrap_or_else(|| panic!("{name}: unknown reduction {reduction_name:?}"));
    let use_init_val = match attrs.get("use_init_val") {
        None => true,
        Some(v) => v
            .as_bool()
            .unwrap_or_else(|| panic!("{name}: use_init_val is not a bool")),
    };
    let index_type_name = str_field(name, &case["indices"], "dtype");
    let index_type = IndexType::from_name(index_type_name)
        .unwrap_or_else(|| panic!("{name}: unsupported index type {index_type_name:?}"));
    let updates_dtype = dtype_of(name, &case["updates"]);
    let dtype = dtype_of(name, &case["data"]);
    assert_eq!(
        updates_dtype, dtype,
        "{name}: updates and data types differ"
    );
    ScatterSignature::new(
        op,
        &shape_of(name, &case["data"]),
        &shape_of(name, &case["indices"]),
        &shape_of(name, &case["updates"]),
    )
    .with_flavor(flavor)
    .with_reduction(reduction)
    .with_use_init_val(use_init_val)
    .with_dtype(dtype)
    .with_index_type(index_type)
}

/// The in-place interpreter as a runner: a copy of data is scattered into; when the call
/// fails, that copy must still be data, byte for byte.
fn in_place(
    layout: &ScatterLayout,
    data: &[u8],
    indices: &[u8],
    updates: &[u8],
) -> gather_jit::Result<Vec<u8>> {
    let mut buffer = data.to_vec();
    match interpret_scatter_in_place(layout, &mut buffer, indices, updates) {
        Ok(()) => Ok(buffer),
        Err(e) => {
            assert!(
                buffer == data,
                "a failed in-place scatter ({e}) changed its data"
            );
            Err(e)
        }
    }
}

#[test]
fn every_scatter_vector_passes_the_interpreter_out_of_place() {
    let files = case_files();
    assert!(
        files.len() >= 500,
        "expected at least 500 scatter vectors, found {}",
        files.len()
    );
    let ran = run_all(&interpret_scatter);
    assert_eq!(ran, files.len());
    let _ = writeln!(std::io::stderr(), "scatter conformance: {ran} cases passed");
}

#[test]
fn every_scatter_vector_passes_the_interpreter_in_place() {
    assert_eq!(run_all(&in_place), case_files().len());
}

/// The runner really compares: one flipped output byte must be caught.
#[test]
#[should_panic(expected = "output bytes differ")]
fn run_all_catches_a_wrong_byte() {
    run_all(&|layout, d, i, u| {
        let mut out = interpret_scatter(layout, d, i, u)?;
        if let Some(b) = out.last_mut() {
            *b ^= 1;
        }
        Ok(out)
    });
}

fn inline(case: Value) {
    let name = case["name"].as_str().unwrap_or("inline").to_string();
    run_case(&name, &case, &interpret_scatter);
}

#[test]
fn an_expected_nan_matches_any_nan_but_nothing_else() {
    // max under ONNX keeps the update when unordered: NaN lands in element 1.
    let case = |expected: Value| {
        serde_json::json!({
            "suite": "inline", "name": "nan", "op": "ScatterND", "flavor": "onnx",
            "attrs": {"reduction": "max"},
            "data": {"dtype": "float32", "shape": [2], "values": [1.0, 1.0]},
            "indices": {"dtype": "int64", "shape": [1, 1], "values": [1]},
            "updates": {"dtype": "float32", "shape": [1], "values": ["nan"]},
            "expected": {"dtype": "float32", "shape": [2], "values": expected}
        })
    };
    inline(case(serde_json::json!([1.0, "nan"])));
    let wrong = std::panic::catch_unwind(|| inline(case(serde_json::json!([1.0, 1.0]))));
    assert!(wrong.is_err(), "a NaN output passed for an expected 1.0");
    let wrong = std::panic::catch_unwind(|| inline(case(serde_json::json!(["nan", "nan"]))));
    assert!(wrong.is_err(), "1.0 passed for an expected NaN");
}

#[test]
#[should_panic(expected = "wrong error category")]
fn the_harness_rejects_a_wrong_error_category() {
    inline(serde_json::json!({
        "suite": "inline", "name": "oob", "op": "ScatterND", "flavor": "onnx",
        "attrs": {"reduction": "none"},
        "data": {"dtype": "int32", "shape": [3], "values": [1, 2, 3]},
        "indices": {"dtype": "int64", "shape": [1, 1], "values": [3]},
        "updates": {"dtype": "int32", "shape": [1], "values": [9]},
        "expect_error": "duplicate index"
    }));
}

#[test]
#[should_panic(expected = "is not an exact f16 value")]
fn the_harness_rejects_an_inexact_half_value() {
    inline(serde_json::json!({
        "suite": "inline", "name": "f16", "op": "ScatterND", "flavor": "onnx",
        "attrs": {"reduction": "none"},
        "data": {"dtype": "float16", "shape": [1], "values": [0.1]},
        "indices": {"dtype": "int64", "shape": [1, 1], "values": [0]},
        "updates": {"dtype": "float16", "shape": [1], "values": [0.5]},
        "expected": {"dtype": "float16", "shape": [1], "values": [0.5]}
    }));
}
