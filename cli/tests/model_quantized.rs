//! `gather-jit model` on the embedding models whose only quantized op is ONNX Runtime's
//! `com.microsoft.GatherBlockQuantized` (integrations/tract/tests/data/gather_block_quantized/,
//! written by `scripts/quantized_model/make.py` with ONNX Runtime's outputs): `--input` and
//! `-o` give ONNX Runtime's outputs, `--compare` finds the JIT kernel and gather-jit's
//! interpreter (what `--native` runs, tract having no such op) bit-identical, and a bad id is
//! one error line.

#![cfg(feature = "model")]

mod common;
#[path = "../../integrations/tract/tests/support/npy.rs"]
mod npy;

use std::path::{Path, PathBuf};

use common::{ok, usage_error};
use serde_json::Value;
use tempfile::TempDir;

/// The cases of the script, each quantized differently (see its docs).
const CASES: [&str; 5] = [
    "int4_symmetric",
    "uint4_quantize_axis_0",
    "uint4_zero_points",
    "uint8_bits4",
    "uint8_bits8_zero_points",
];

/// As the tract integration's test of these models: LayerNormalization, MatMul and ReduceMean
/// sum in another order than ONNX Runtime's (a few 1e-7 apart on values of order 1).
const TOLERANCE: f32 = 1e-5;

fn case(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../integrations/tract/tests/data/gather_block_quantized")
        .join(name)
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn model_writes_onnx_runtimes_outputs_for_quantized_embeddings() {
    for name in CASES {
        let dir = case(name);
        let out = TempDir::new().expect("temp dir");
        let input = format!("input_ids={}", path(&dir.join("input_ids.npy")));
        let json = ok(&[
            "model",
            path(&dir.join("model.onnx")),
            "--input",
            &input,
            "-o",
            path(out.path()),
            "--json",
        ]);
        let report: Value = serde_json::from_str(&json).expect("json");
        let gathers = report["gathers"].as_array().expect("gathers");
        assert_eq!(gathers.len(), 1, "{name}: {json}");
        let op = gathers[0]["op"].as_str().expect("op");
        assert!(
            op.starts_with("JitGatherBlockQuantized (gather-jit kernel: gather_axis=0"),
            "{name}: {op}"
        );
        for output in ["embeddings", "hidden", "pooled"] {
            let got = npy::read(&out.path().join(format!("{output}.npy")));
            let want = npy::read(&dir.join("expected").join(format!("{output}.npy")));
            assert_eq!(got.shape(), want.shape(), "{name} {output}");
            let (got, want) = (
                got.try_as_plain_ram().expect("plain"),
                want.try_as_plain_ram().expect("plain"),
            );
            let (g, w) = (
                got.as_slice::<f32>().expect("f32"),
                want.as_slice::<f32>().expect("f32"),
            );
            if output == "embeddings" {
                // The quantized gather itself: ONNX Runtime's values bit for bit.
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(g), bits(w), "{name}: embeddings");
            } else {
                for (i, (g, w)) in g.iter().zip(w).enumerate() {
                    assert!(
                        (g - w).abs() <= TOLERANCE * (1.0 + w.abs()),
                        "{name} {output}[{i}]: {g} vs ONNX Runtime's {w}"
                    );
                }
            }
        }
    }
}

#[test]
fn model_compare_runs_the_kernel_against_gather_jits_interpreter() {
    for name in ["int4_symmetric", "uint8_bits8_zero_points"] {
        let dir = case(name);
        let model = dir.join("model.onnx");
        let input = format!("input_ids={}", path(&dir.join("input_ids.npy")));
        let json = ok(&[
            "model",
            path(&model),
            "--input",
            &input,
            "--compare",
            "--json",
        ]);
        let report: Value = serde_json::from_str(&json).expect("json");
        assert_eq!(report["compare"], "bit-identical", "{name}: {json}");
        let text = ok(&["model", path(&model), "--input", &input, "--native"]);
        assert!(
            text.contains("InterpretedGatherBlockQuantized (gather-jit interpreter: "),
            "{name}: {text}"
        );
    }
}

#[test]
fn model_quantized_ids_out_of_range_are_one_error_line_and_write_nothing() {
    let dir = TempDir::new().expect("temp dir");
    let ids = dir.path().join("ids.npy");
    let values: Vec<u8> = [0i64, 100].iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&ids, common::npy("<i8", false, &[1, 2], &values)).expect("write");
    let out = dir.path().join("out");
    let model = case("uint4_zero_points").join("model.onnx");
    for mode in [None, Some("--native"), Some("--compare")] {
        let input = format!("input_ids={}", path(&ids));
        let mut args = vec!["model", path(&model), "--input", &input, "-o", path(&out)];
        args.extend(mode);
        let line = usage_error(&args);
        assert!(
            line.contains(
                "index 100 at position [0, 1] of indices is out of range for data dim 0 of size 100"
            ),
            "{mode:?}: {line}"
        );
        assert!(!out.exists(), "{mode:?} wrote outputs");
    }
}
