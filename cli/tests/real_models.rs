//! `gather-jit model` on real ONNX models that publishers ship inside PyPI wheels, listed in
//! `scripts/real_models/models.json`: each model runs on its committed inputs
//! (`cli/tests/data/real_models/<model>/inputs`) and every output is compared with ONNX
//! Runtime's (`.../outputs`) within the model's tolerance, then `--compare` checks the JIT
//! gathers against tract's own ops bit for bit. A model that tract cannot read (or cannot read
//! yet without its input shapes pinned) must still fail with the error that models.json
//! records, with `--native` too, so that a change of tract's shows up here.
//!
//! The models are not in git: `python3 scripts/real_models/fetch.py --out target/real-models`
//! downloads them. Cargo runs this target only when named (`test = false` in Cargo.toml), as
//! `cargo test` needs no network:
//!
//! ```sh
//! cargo test --profile checked -p gather-jit-cli --features model --test real_models
//! ```
//!
//! `GATHER_JIT_REAL_MODELS` names the directory fetch.py fetched into (a relative path is taken
//! from the workspace root; default `target/real-models`), or is `skip`. Without the models the
//! test fails, saying how to fetch them.

#![cfg(feature = "model")]

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

/// The command that fetches the models, from the workspace root.
const FETCH: &str = "python3 scripts/real_models/fetch.py --out target/real-models";

/// A run of the command that takes longer than this (seconds) fails the test.
const DEADLINE: u64 = 300;

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ has a parent")
        .to_path_buf()
}

/// What models.json records of tract and a model.
#[derive(Debug, PartialEq)]
enum Status {
    /// Runs; its outputs match ORT's within the tolerance.
    Matches,
    /// Runs, `--compare` bit-identical, but tract's outputs are not ORT's (a tract issue).
    Differs,
    /// tract cannot read it (with its own ops either).
    CannotRead,
    /// tract cannot read it as the file declares its inputs; `--input` does not pin their
    /// shapes yet.
    AwaitingInputPinning,
}

/// One model of models.json.
struct Model {
    name: String,
    /// The file, in the cache directory.
    file: PathBuf,
    /// (input name, .npy file).
    inputs: Vec<(String, PathBuf)>,
    /// (output name, ORT's .npy file).
    outputs: Vec<(String, PathBuf)>,
    atol: f64,
    rtol: f64,
    status: Status,
    /// A part of the one error line of a model that fails.
    error: Option<String>,
    /// How many gather nodes gather-jit backs after tract's optimisation.
    jit_gather_nodes: Option<u64>,
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key]
        .as_str()
        .unwrap_or_else(|| panic!("models.json: {key} is not a string in {value}"))
}

/// The models of models.json, their files in `cache`.
fn manifest(cache: &Path) -> Vec<Model> {
    let path = root().join("scripts/real_models/models.json");
    let json: Value =
        serde_json::from_str(&fs::read_to_string(&path).expect("models.json is readable"))
            .expect("models.json is JSON");
    let data = root().join("cli/tests/data/real_models");
    let list = json["models"].as_array().expect("models.json: models");
    list.iter()
        .map(|m| {
            let name = text(m, "name").to_string();
            let wheel_path = Path::new(text(m, "path"));
            let file = cache
                .join(&name)
                .join(&text(m, "sha256")[..12])
                .join(wheel_path.file_name().expect("a file name"));
            let files = |kind: &str| -> Vec<(String, PathBuf)> {
                m[kind]
                    .as_array()
                    .expect("models.json: inputs and outputs are lists")
                    .iter()
                    .map(|e| {
                        let at = data.join(&name).join(kind).join(text(e, "file"));
                        (text(e, "name").to_string(), at)
                    })
                    .collect()
            };
            let tract = &m["tract"];
            let status = match text(tract, "status") {
                "matches" => Status::Matches,
                "differs" => Status::Differs,
                "cannot-read" => Status::CannotRead,
                "awaiting-input-pinning" => Status::AwaitingInputPinning,
                other => panic!("models.json: {name}: unknown status {other}"),
            };
            let tolerance = |key: &str| {
                m["tolerance"][key]
                    .as_f64()
                    .unwrap_or_else(|| panic!("models.json: {name}: tolerance {key}"))
            };
            Model {
                inputs: files("inputs"),
                outputs: files("outputs"),
                atol: tolerance("atol"),
                rtol: tolerance("rtol"),
                status,
                error: tract["error"].as_str().map(str::to_string),
                jit_gather_nodes: tract["jit_gather_nodes"].as_u64(),
                file,
                name,
            }
        })
        .collect()
}

/// A finished run: exit code, stdout, stderr.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `gather-jit model FILE --input NAME=FILE.npy ... ARGS` with a deadline.
fn run(model: &Model, args: &[&str]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gather-jit"));
    command.arg("model").arg(&model.file);
    for (name, file) in &model.inputs {
        let mut spec = std::ffi::OsString::from(format!("{name}="));
        spec.push(file);
        command.arg("--input").arg(spec);
    }
    let mut child = command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let pid = child.id();
    let mut stdout = child.stdout.take().expect("stdout piped");
    let mut stderr = child.stderr.take().expect("stderr piped");
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let reader = std::thread::spawn(move || {
            let mut err = Vec::new();
            let _ = stderr.read_to_end(&mut err);
            err
        });
        let mut out = Vec::new();
        let _ = stdout.read_to_end(&mut out);
        let err = reader.join().unwrap_or_default();
        let _ = send.send((child.wait(), out, err));
    });
    match receive.recv_timeout(Duration::from_secs(DEADLINE)) {
        Ok((status, out, err)) => Run {
            code: status.expect("the child's status").code(),
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
        },
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("{}: {args:?} did not finish in {DEADLINE} s", model.name);
        }
    }
}

/// An `.npy` file: its dtype (`descr`), shape and data bytes.
struct Npy {
    descr: String,
    shape: Vec<usize>,
    data: Vec<u8>,
}

/// Reads a version 1 `.npy` file in C order, as numpy and the command write them.
fn read_npy(path: &Path) -> Result<Npy, String> {
    let file = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let bad = || format!("{}: not a version 1 .npy file in C order", path.display());
    if file.len() < 10 || &file[..8] != b"\x93NUMPY\x01\x00" {
        return Err(bad());
    }
    let len = usize::from(u16::from_le_bytes([file[8], file[9]]));
    let header = file
        .get(10..10 + len)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(bad)?;
    let after = |key: &str| header.split(key).nth(1).ok_or_else(bad);
    if !after("'fortran_order':")?.trim_start().starts_with("False") {
        return Err(bad());
    }
    let descr = after("'descr':")?.split('\'').nth(1).ok_or_else(bad)?;
    let dims = after("'shape':")?
        .split(['(', ')'])
        .nth(1)
        .ok_or_else(bad)?;
    let shape = dims
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().map_err(|_| bad()))
        .collect::<Result<Vec<usize>, String>>()?;
    Ok(Npy {
        descr: descr.to_string(),
        shape,
        data: file[10 + len..].to_vec(),
    })
}

/// How far `got` is from ORT's `want`: `Ok(worst)` within the tolerance, where `worst` is the
/// largest |got - want| / (atol + rtol |want|) (0 for types compared exactly), or what differs.
fn compare(got: &Npy, want: &Npy, atol: f64, rtol: f64) -> Result<f64, String> {
    if got.descr != want.descr || got.shape != want.shape {
        return Err(format!(
            "{} {:?} where ORT gives {} {:?}",
            got.descr, got.shape, want.descr, want.shape
        ));
    }
    let floats = |npy: &Npy| -> Option<Vec<f64>> {
        match npy.descr.as_str() {
            "<f4" => Some(
                npy.data
                    .chunks_exact(4)
                    .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                    .collect(),
            ),
            "<f8" => Some(
                npy.data
                    .chunks_exact(8)
                    .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
                    .collect(),
            ),
            _ => None,
        }
    };
    let (Some(got_values), Some(want_values)) = (floats(got), floats(want)) else {
        return match got.data == want.data {
            true => Ok(0.0),
            false => Err(format!("{} values differ from ORT's", got.descr)),
        };
    };
    let mut worst = 0.0f64;
    let mut outside = 0;
    let mut first = None;
    for (i, (&g, &w)) in got_values.iter().zip(&want_values).enumerate() {
        let ratio = (g - w).abs() / (atol + rtol * w.abs());
        // NaN where ORT has NaN is a match; any other NaN is not.
        let ratio = match (g.is_nan(), w.is_nan()) {
            (true, true) => 0.0,
            (false, false) => ratio,
            _ => f64::INFINITY,
        };
        if ratio.is_nan() || ratio > 1.0 {
            outside += 1;
            first.get_or_insert((i, g, w));
        }
        worst = worst.max(ratio);
    }
    match first {
        None => Ok(worst),
        Some((i, g, w)) => Err(format!(
            "{outside} of {} values outside atol {atol:e} + rtol {rtol:e} (the first at flat \
             index {i}: {g:e} where ORT gives {w:e})",
            want_values.len()
        )),
    }
}

/// Runs a model that tract reads: its outputs against ORT's, then `--compare`. Returns the
/// line to print.
fn check_runs(model: &Model) -> Result<String, String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().to_str().expect("a UTF-8 temporary path");
    let run = run(model, &["-o", out, "--json"]);
    if run.code != Some(0) {
        return Err(format!("exit {:?}: {}", run.code, run.stderr.trim()));
    }
    let json: Value = serde_json::from_str(&run.stdout).map_err(|e| format!("--json: {e}"))?;
    let jit = json["gathers"]
        .as_array()
        .map(|g| {
            g.iter()
                .filter(|n| {
                    n["op"]
                        .as_str()
                        .is_some_and(|op| op.contains("gather-jit:"))
                })
                .count()
        })
        .unwrap_or(0);
    if let Some(recorded) = model.jit_gather_nodes
        && recorded != jit as u64
    {
        return Err(format!(
            "{jit} gather nodes backed by gather-jit, models.json records {recorded}"
        ));
    }
    let mut mismatches = Vec::new();
    let mut worst = 0.0f64;
    for (name, want) in &model.outputs {
        let file = json["outputs"]
            .as_array()
            .and_then(|outs| outs.iter().find(|o| o["name"] == name.as_str()))
            .and_then(|o| o["file"].as_str())
            .ok_or_else(|| format!("no output {name} in --json"))?;
        match compare(
            &read_npy(Path::new(file))?,
            &read_npy(want)?,
            model.atol,
            model.rtol,
        ) {
            Ok(w) => worst = worst.max(w),
            Err(e) => mismatches.push(format!("output {name}: {e}")),
        }
    }
    match (&model.status, mismatches.is_empty()) {
        (Status::Matches, false) => return Err(mismatches.join("; ")),
        (Status::Differs, true) => {
            return Err(
                "now matches ORT within its tolerance: set its status to \"matches\"".into(),
            );
        }
        _ => {}
    }
    let compare = run_compare(model)?;
    Ok(match model.status {
        Status::Differs => format!(
            "runs, differs from ORT as recorded ({}); {compare}; gather-jit nodes: {jit}",
            mismatches.join("; ")
        ),
        _ => format!(
            "matches ORT (largest difference {:.1}% of the tolerance); {compare}; \
             gather-jit nodes: {jit}",
            worst * 100.0
        ),
    })
}

/// `--compare`: JIT gathers against tract's own ops, bit for bit.
fn run_compare(model: &Model) -> Result<String, String> {
    let run = run(model, &["--compare", "--json"]);
    let json: Option<Value> = serde_json::from_str(&run.stdout).ok();
    match (run.code, json.as_ref().map(|j| &j["compare"])) {
        (Some(0), Some(Value::String(s))) if s == "bit-identical" => {
            Ok("--compare bit-identical".into())
        }
        (code, _) => Err(format!(
            "--compare: exit {code:?}: {}{}",
            run.stdout.trim(),
            run.stderr.trim()
        )),
    }
}

/// A model tract does not read: the recorded error, with gather-jit's ops and tract's own.
fn check_fails(model: &Model) -> Result<String, String> {
    let expected = model
        .error
        .as_deref()
        .ok_or("models.json records no error for it")?;
    for (how, args) in [("gather-jit", &[][..]), ("--native", &["--native"][..])] {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let out = dir.path().to_str().expect("a UTF-8 temporary path");
        let args: Vec<&str> = args.iter().copied().chain(["-o", out]).collect();
        let run = run(model, &args);
        let lines: Vec<&str> = run.stderr.lines().collect();
        if run.code == Some(0) {
            return Err(format!(
                "now runs ({how}): compare its outputs and record its status as \"matches\" \
                 or \"differs\""
            ));
        }
        if run.code != Some(2) || lines.len() != 1 || !lines[0].contains(expected) {
            return Err(format!(
                "{how}: exit {:?} with {:?}, models.json records an error containing {expected:?}",
                run.code,
                run.stderr.trim()
            ));
        }
        let written = fs::read_dir(dir.path()).map(Iterator::count).unwrap_or(0);
        if written != 0 {
            return Err(format!("{how}: a failed run left {written} files"));
        }
    }
    Ok(match model.status {
        Status::AwaitingInputPinning => {
            "tract cannot read it without its input shapes pinned, as recorded (--native too)"
        }
        _ => "tract cannot read it, as recorded (--native too)",
    }
    .into())
}

/// Writes to the test's stderr past libtest's capture, so that CI's log shows every model.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[test]
fn real_models_as_recorded() {
    let cache = match std::env::var_os("GATHER_JIT_REAL_MODELS") {
        Some(dir) if dir == "skip" => {
            say("real models: skipped (GATHER_JIT_REAL_MODELS=skip)");
            return;
        }
        Some(dir) => root().join(dir),
        None => root().join("target/real-models"),
    };
    let models = manifest(&cache);
    let missing: Vec<String> = models
        .iter()
        .filter(|m| !m.file.is_file())
        .map(|m| m.name.clone())
        .collect();
    assert!(
        missing.is_empty(),
        "{} of the {} real models are not in {} ({}): fetch them from the repository root with \
         `{FETCH}`, then set GATHER_JIT_REAL_MODELS to that directory if it is not \
         target/real-models (or to `skip`)",
        missing.len(),
        models.len(),
        cache.display(),
        missing.join(", ")
    );
    let mut failures = Vec::new();
    for model in &models {
        let result = match model.status {
            Status::Matches | Status::Differs => check_runs(model),
            Status::CannotRead | Status::AwaitingInputPinning => check_fails(model),
        };
        match result {
            Ok(line) => say(&format!("{}: {line}", model.name)),
            Err(e) => {
                say(&format!("{}: NOT AS RECORDED: {e}", model.name));
                failures.push(format!("{}: {e}", model.name));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of the {} real models are not as scripts/real_models/models.json records:\n{}",
        failures.len(),
        models.len(),
        failures.join("\n")
    );
}
