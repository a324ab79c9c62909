//! `gather-jit model` on the committed scatter models (integrations/tract/tests/models/, written
//! by `integrations/tract/scripts/make_test_models.py` with ONNX Runtime's outputs): the
//! KV-cache write (ScatterND, f32 and f16) and the embedding gradient (scatter-add) run with JIT
//! scatter nodes and write ONNX Runtime's outputs bit for bit; `--compare` finds tract's own
//! scatters bit-identical on them, `--native` runs those; a position out of the cache is one
//! error line and no file.

#![cfg(feature = "model")]

mod common;
#[path = "../../integrations/tract/tests/support/npy.rs"]
mod npy;

use std::fs::File;
use std::path::{Path, PathBuf};

use common::{ok, usage_error};
use serde_json::Value;
use tempfile::TempDir;
use tract_onnx::prelude::*;

fn case(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../integrations/tract/tests/models")
        .join(name)
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `output_{i}.pb` of the case's test data set: ONNX Runtime's output.
fn expected(name: &str, i: usize) -> Tensor {
    let file = case(name).join(format!("test_data_set_0/output_{i}.pb"));
    let proto = tract_onnx::tensor::proto_from_reader(File::open(&file).expect("open"))
        .expect("a TensorProto");
    let onnx = tract_onnx::onnx();
    tract_onnx::tensor::load_tensor(&*onnx.provider, &proto, None).expect("a tensor")
}

/// Runs `model` on the case's inputs with `extra` flags, writing to a temporary directory;
/// returns the JSON report and the directory.
fn run(name: &str, extra: &[&str]) -> (Value, TempDir) {
    let dir = case(name);
    let out = TempDir::new().expect("temp dir");
    let (model, inputs) = (dir.join("model.onnx"), dir.join("test_data_set_0"));
    let mut args = vec![
        "model",
        path(&model),
        "--inputs",
        path(&inputs),
        "-o",
        path(out.path()),
        "--json",
    ];
    args.extend(extra);
    let json = ok(&args);
    (serde_json::from_str(&json).expect("json"), out)
}

/// Each named output, written by the run, is ONNX Runtime's bit for bit.
fn assert_outputs(name: &str, out: &Path, outputs: &[&str]) {
    for (i, output) in outputs.iter().enumerate() {
        let got = npy::read(&out.join(format!("{output}.npy")));
        let want = expected(name, i);
        assert_eq!(got.datum_type(), want.datum_type(), "{name} {output}");
        assert_eq!(got.shape(), want.shape(), "{name} {output}");
        assert_eq!(got.as_bytes(), want.as_bytes(), "{name} {output}");
    }
}

#[test]
fn model_writes_onnx_runtimes_kv_cache_update() {
    for name in ["kv_cache_update", "kv_cache_update_f16"] {
        let (report, out) = run(name, &[]);
        let scatters = report["scatters"].as_array().expect("scatters");
        assert_eq!(scatters.len(), 2, "{name}: {report}");
        for scatter in scatters {
            let op = scatter["op"].as_str().expect("op");
            assert_eq!(
                op, "JitScatterND (gather-jit: ScatterND reduction=none)",
                "{name}"
            );
        }
        assert_outputs(name, out.path(), &["present_key", "present_value"]);
    }
}

#[test]
fn model_writes_onnx_runtimes_embedding_gradient() {
    let name = "embedding_grad";
    let (report, out) = run(name, &[]);
    let ops: Vec<&str> = (report["scatters"].as_array().expect("scatters").iter())
        .map(|s| s["op"].as_str().expect("op"))
        .collect();
    assert_eq!(
        ops,
        [
            "JitScatterND (gather-jit: ScatterND reduction=sum)",
            "JitScatterElements (gather-jit: ScatterElements(axis=1) reduction=sum)"
        ]
    );
    assert_outputs(name, out.path(), &["table_grad", "segment_sum"]);
}

/// tract's own ScatterND and ScatterElements agree bit for bit on the models whose indices
/// are not negative (tract's reductions fold in index order too), and `--native` runs them.
#[test]
fn compare_and_native_run_tracts_own_scatters() {
    for name in ["kv_cache_update", "embedding_grad"] {
        let (report, out) = run(name, &["--compare"]);
        assert_eq!(report["compare"], "bit-identical", "{name}");
        drop(out);
        let (report, out) = run(name, &["--native"]);
        for scatter in report["scatters"].as_array().expect("scatters") {
            let op = scatter["op"].as_str().expect("op");
            assert!(op.ends_with("(tract)"), "{name}: {op}");
        }
        let outputs: &[&str] = match name {
            "embedding_grad" => &["table_grad", "segment_sum"],
            _ => &["present_key", "present_value"],
        };
        assert_outputs(name, out.path(), outputs);
    }
}

/// The f16 cache is written at position -1, which ONNX (and ONNX Runtime, and the JIT op)
/// count from the end; tract's own ScatterND refuses it, so `--compare` is one error line.
#[test]
fn compare_reports_tracts_scatter_nd_refusing_a_negative_index() {
    let dir = case("kv_cache_update_f16");
    let line = usage_error(&[
        "model",
        path(&dir.join("model.onnx")),
        "--inputs",
        path(&dir.join("test_data_set_0")),
        "--compare",
    ]);
    assert!(
        line.starts_with("error: tract's own ops: ") && line.contains("index -1 out of bounds"),
        "{line}"
    );
}

/// The text report lists the scatter nodes with their inputs' facts.
#[test]
fn the_text_report_lists_the_scatters() {
    let dir = case("kv_cache_update");
    let text = ok(&[
        "model",
        path(&dir.join("model.onnx")),
        "--inputs",
        path(&dir.join("test_data_set_0")),
    ]);
    assert!(
        text.contains("(gathers and scatters by gather-jit)"),
        "{text}"
    );
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("JitScatterND (gather-jit: ScatterND reduction=none) on F32 2,4,16,8, I64 2,4,1,3, F32 2,4,1,8"))
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
}

/// A position past the cache: one error line naming the index's position and value, and no
/// output file.
#[test]
fn a_position_out_of_the_cache_is_one_error_line() {
    let dir = case("kv_cache_update");
    let tmp = TempDir::new().expect("temp dir");
    let positions = tmp.path().join("position.npy");
    let bytes: Vec<u8> = [16i64, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&positions, common::npy("<i8", false, &[2], &bytes)).expect("write");
    let out = tmp.path().join("out");
    let input = format!("position={}", path(&positions));
    let line = usage_error(&[
        "model",
        path(&dir.join("model.onnx")),
        "--inputs",
        path(&dir.join("test_data_set_0")),
        "--input",
        &input,
        "-o",
        path(&out),
    ]);
    assert!(line.contains("index 16 at position [0, 0, 0, 2]"), "{line}");
    assert!(!out.exists());
}
