//! Embedding models whose only quantized op is ONNX Runtime's `com.microsoft.GatherBlockQuantized`,
//! three of them quantized by ONNX Runtime's own quantizer (INT4 / UINT4 tables), two in the op's
//! uint8 form, with ONNX Runtime's outputs (tests/data/gather_block_quantized/, written by
//! `scripts/quantized_model/make.py`).
//!
//! Each runs through `gather_jit_tract::model_for_path(&onnx(), ..)`, optimised, and must give
//! ONNX Runtime's `embeddings` (the op's own output) bit for bit, and `hidden` and `pooled`
//! (LayerNormalization, MatMul, Add, ReduceMean of tract's, summed in another order than ONNX
//! Runtime's) within [`RTOL`] and [`ATOL`].

#[path = "support/npy.rs"]
mod npy;

use std::path::{Path, PathBuf};

use gather_jit_tract::{catch_panic, model_for_path, onnx, onnx_native};
use tract_onnx::prelude::*;

/// Every case the script writes: the test fails if one is missing or unexpected.
const CASES: [&str; 5] = [
    "int4_symmetric",
    "uint4_quantize_axis_0",
    "uint4_zero_points",
    "uint8_bits4",
    "uint8_bits8_zero_points",
];

/// The model's outputs, in order.
const OUTPUTS: [&str; 3] = ["embeddings", "hidden", "pooled"];

/// Bounds for the float math after the gather: its values are of order 1, and tract's and ONNX
/// Runtime's sums over 96 values round differently by a few ULP (a few 1e-7); any real error
/// (a wrong row, scale or zero point) moves values by far more than 1e-5.
const RTOL: f64 = 1e-5;
const ATOL: f64 = 1e-5;

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gather_block_quantized")
}

fn cases() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .expect("the cases directory")
        .map(|e| e.expect("an entry").path())
        .collect();
    dirs.sort();
    let names: Vec<String> = dirs
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, CASES);
    dirs
}

/// The optimised, runnable model of `dir` with `framework`, and the names of its ops.
fn load(framework: &tract_onnx::Onnx, dir: &Path) -> (Arc<TypedSimplePlan>, Vec<String>) {
    let model = model_for_path(framework, dir.join("model.onnx"))
        .and_then(|m| m.into_optimized())
        .unwrap_or_else(|e| panic!("{}: {e:#}", dir.display()));
    let ops = model
        .nodes()
        .iter()
        .map(|n| n.op().name().into_owned())
        .collect();
    (model.into_runnable().expect("runnable"), ops)
}

fn run(plan: &Arc<TypedSimplePlan>, ids: Tensor) -> TractResult<Vec<Tensor>> {
    Ok(plan
        .run(tvec!(ids.into_tvalue()))?
        .into_iter()
        .map(|t| t.into_tensor())
        .collect())
}

/// The largest absolute difference of `got` from `expected` within the bounds, or why not.
fn close(got: &Tensor, expected: &Tensor) -> Result<f32, String> {
    if got.datum_type() != expected.datum_type() || got.shape() != expected.shape() {
        return Err(format!("got {got:?}, expected {expected:?}"));
    }
    let (got, expected) = (
        got.try_as_plain_ram().map_err(|e| e.to_string())?,
        expected.try_as_plain_ram().map_err(|e| e.to_string())?,
    );
    let (g, e) = (
        got.as_slice::<f32>().unwrap(),
        expected.as_slice::<f32>().unwrap(),
    );
    let mut worst = 0f32;
    for (i, (&g, &e)) in g.iter().zip(e).enumerate() {
        let diff = (g - e).abs();
        // A NaN compares as `None`, so it fails the test.
        let bound = ATOL + RTOL * f64::from(e.abs());
        if !matches!(
            f64::from(diff).partial_cmp(&bound),
            Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
        ) {
            return Err(format!("element {i} is {g}, expected {e}"));
        }
        worst = worst.max(diff);
    }
    Ok(worst)
}

#[test]
fn quantized_models_give_onnx_runtimes_outputs() {
    for dir in cases() {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let (plan, ops) = load(&onnx(), &dir);
        // The quantized gather runs as the JIT op: neither folded nor left to anything else.
        let gbq: Vec<&String> = ops.iter().filter(|op| op.contains("Gather")).collect();
        assert_eq!(gbq, ["JitGatherBlockQuantized"], "{name}: {ops:?}");
        let ids = npy::read(&dir.join("input_ids.npy"));
        let outputs = run(&plan, ids).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        assert_eq!(outputs.len(), OUTPUTS.len(), "{name}");
        let mut report = vec![];
        for (output, got) in OUTPUTS.iter().zip(&outputs) {
            let expected = npy::read(&dir.join("expected").join(format!("{output}.npy")));
            if *output == "embeddings" {
                assert_eq!(got.shape(), expected.shape(), "{name}");
                assert!(
                    got.as_bytes() == expected.as_bytes(),
                    "{name}: embeddings are not ONNX Runtime's bit for bit: {got:?} vs {expected:?}"
                );
                report.push("embeddings bit-identical".to_string());
            } else {
                let worst =
                    close(got, &expected).unwrap_or_else(|e| panic!("{name} {output}: {e}"));
                report.push(format!("{output} max |diff| {worst:e}"));
            }
        }
        println!("{name}: {}", report.join(", "));
    }
}

/// `onnx_native()` runs the op with gather-jit's interpreter (tract's own op takes only some of
/// the op's forms, see above): every
/// output is bit-identical with the JIT-backed model's (the rest of the graph is the same).
#[test]
fn the_interpreter_of_onnx_native_agrees_with_the_jit_bit_for_bit() {
    for dir in cases() {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let (jit, _) = load(&onnx(), &dir);
        let (native, ops) = load(&onnx_native(), &dir);
        assert!(
            ops.iter().any(|op| op == "InterpretedGatherBlockQuantized"),
            "{name}: {ops:?}"
        );
        let ids = npy::read(&dir.join("input_ids.npy"));
        let a = run(&jit, ids.clone()).expect("jit");
        let b = run(&native, ids).expect("interpreter");
        for ((a, b), output) in a.iter().zip(&b).zip(OUTPUTS) {
            assert!(
                a.as_bytes() == b.as_bytes(),
                "{name} {output}: {a:?} vs {b:?}"
            );
        }
    }
}

/// The symbolic `batch` and `seq` dims stay symbolic: other shapes run too, and their
/// embeddings are the matching rows of the expected ones.
#[test]
fn other_sequence_lengths_run_with_the_same_model() {
    for dir in cases() {
        let (plan, _) = load(&onnx(), &dir);
        let ids = npy::read(&dir.join("input_ids.npy"));
        let expected = npy::read(&dir.join("expected/embeddings.npy"));
        let hidden = expected.shape()[2];
        // Row 1 alone, its first 4 ids.
        let ids = ids.slice(0, 1, 2).unwrap().slice(1, 0, 4).unwrap();
        let want = expected.slice(0, 1, 2).unwrap().slice(1, 0, 4).unwrap();
        let got = run(&plan, ids).expect("runs");
        assert_eq!(got[0].shape(), [1, 4, hidden]);
        assert!(got[0].as_bytes() == want.as_bytes(), "{}", dir.display());
    }
}

/// An id outside `[-vocab, vocab)` is an error naming its position and value (ONNX Runtime
/// writes zeros for it), with either engine; the process does not panic.
#[test]
fn ids_out_of_range_are_errors_naming_them() {
    let dir = cases_dir().join("uint4_zero_points");
    for framework in [onnx(), onnx_native()] {
        let (plan, _) = load(&framework, &dir);
        for (bad, position) in [(100i64, "[0, 2]"), (-101, "[0, 2]"), (i64::MIN, "[0, 2]")] {
            let ids = tensor2(&[[0i64, 5, bad], [1, 2, 3]]);
            let e = catch_panic("run", || run(&plan, ids)).expect_err("an error");
            let e = format!("{e:#}");
            assert!(
                e.contains(&format!("index {bad} at position {position}"))
                    && e.contains("out of range for data dim 0 of size 100"),
                "{e}"
            );
        }
    }
}

/// tract's own reader cannot read the INT4 / UINT4 tables (it errs on the data types its
/// protobuf enum lacks). Through the loader, tract's own framework reads them with its own
/// GatherBlockQuantized: ONNX Runtime's embeddings bit for bit on the INT4 case, and an error
/// for a table quantized along axis 0, which tract's op does not take.
#[test]
fn tracts_own_framework_on_the_quantized_models() {
    let dir = cases_dir().join("int4_symmetric");
    let model = dir.join("model.onnx");
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let plain = catch_panic("parse", || tract_onnx::onnx().model_for_path(&model));
    std::panic::set_hook(hook);
    match plain {
        Ok(_) => panic!("tract read INT4 tensors"),
        Err(e) => println!("tract's own reader: {e:#}"),
    }
    let (plan, ops) = load(&tract_onnx::onnx(), &dir);
    assert!(!ops.iter().any(|op| op.contains("Jit")), "{ops:?}");
    let got = run(&plan, npy::read(&dir.join("input_ids.npy"))).expect("runs");
    let expected = npy::read(&dir.join("expected/embeddings.npy"));
    assert_eq!(got[0].shape(), expected.shape());
    assert!(
        got[0].as_bytes() == expected.as_bytes(),
        "{:?} vs {expected:?}",
        got[0]
    );
    let axis_0 = cases_dir().join("uint4_quantize_axis_0/model.onnx");
    let e = model_for_path(&tract_onnx::onnx(), axis_0)
        .and_then(|m| m.into_typed())
        .expect_err("tract's op quantizes the last axis only");
    let e = format!("{e:#}");
    assert!(e.contains("GatherBlockQuantized"), "{e}");
}

/// The uint8-form models hold no 4-bit tensor: `onnx()`'s own `model_for_path` reads them, and
/// gives the same outputs as the loader.
#[test]
fn uint8_form_models_load_with_the_frameworks_own_reader() {
    for name in ["uint8_bits4", "uint8_bits8_zero_points"] {
        let dir = cases_dir().join(name);
        let plan = onnx()
            .model_for_path(dir.join("model.onnx"))
            .and_then(|m| m.into_optimized())
            .and_then(|m| m.into_runnable())
            .expect("loads");
        let ids = npy::read(&dir.join("input_ids.npy"));
        let got = run(&plan, ids).expect("runs");
        let want = npy::read(&dir.join("expected/embeddings.npy"));
        assert!(got[0].as_bytes() == want.as_bytes(), "{name}");
    }
}
