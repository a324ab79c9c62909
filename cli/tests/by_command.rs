//! The CLI by command, not by op family (issue 29, item 5): `run`, `explain` and `bench` take
//! every op through one path, with one JSON schema per command; every flag is honoured or
//! refused with one line; `layer --no-check`; help wrapped to the terminal.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use serde_json::Value;
use tempfile::TempDir;

mod common;
use common::{gather_jit, npy, ok, usage_error};

/// Runs `args`, expects one JSON object on stdout.
#[track_caller]
fn json(args: &[&str]) -> Value {
    let out = ok(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

fn write(dir: &TempDir, name: &str, contents: Vec<u8>) -> String {
    let path = dir.path().join(name);
    fs::write(&path, contents).unwrap();
    path.to_str().unwrap().to_string()
}

fn ids(dir: &TempDir, name: &str, values: &[i64]) -> String {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    write(dir, name, npy("<i8", false, &[values.len()], &bytes))
}

/// The data bytes of an `.npy` file.
fn npy_data(path: &str) -> Vec<u8> {
    let file = fs::read(path).expect("output written");
    let len = u16::from_le_bytes([file[8], file[9]]) as usize;
    file[10 + len..].to_vec()
}

/// Two rows of one Q8_0 block each: d = 0.5 and -2, q = j - 16 and 16 - j.
fn gguf_table(dir: &TempDir) -> String {
    let mut data = Vec::new();
    for (d, sign) in [(0x3800u16, 1i32), (0xc000, -1)] {
        data.extend_from_slice(&d.to_le_bytes());
        data.extend((0..32).map(|j| (sign * (j - 16)) as i8 as u8));
    }
    write(dir, "table.npy", npy("|u1", false, &[2, 34], &data))
}

fn f32_bytes(values: impl IntoIterator<Item = f32>) -> Vec<u8> {
    values.into_iter().flat_map(f32::to_le_bytes).collect()
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

fn keys(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("an object: {value}"))
        .keys()
        .cloned()
        .collect()
}

/// `quantized`'s keys are `plain`'s and, beside them, only some of `extra`.
#[track_caller]
fn same_schema(plain: &Value, quantized: &Value, extra: &[&str]) {
    let (plain, quantized) = (keys(plain), keys(quantized));
    let missing: Vec<&String> = plain.difference(&quantized).collect();
    assert!(
        missing.is_empty(),
        "keys missing for a quantized op: {missing:?}"
    );
    let added: Vec<&String> = quantized
        .difference(&plain)
        .filter(|k| !extra.contains(&k.as_str()))
        .collect();
    assert!(added.is_empty(), "keys only a quantized op has: {added:?}");
}

/// `run --json` has the same keys for every op (the quantized run lacked `array`, `data` and
/// `indices`), the quantized ops adding their scales and zero points.
#[test]
fn run_json_has_one_schema_for_every_op() {
    let dir = tempfile::tempdir().unwrap();
    let data = write(
        &dir,
        "data.npy",
        npy("<f4", false, &[2, 2], &f32_bytes([1.0, 2.0, 3.0, 4.0])),
    );
    let indices = ids(&dir, "ids.npy", &[1, 0]);
    let plain = json(&[
        "run",
        "--op",
        "gather",
        &data,
        &indices,
        "-o",
        &dir.path().join("plain.npy").to_string_lossy(),
        "--json",
    ]);
    let table = gguf_table(&dir);
    let gguf_out = dir.path().join("gguf.npz");
    let gguf = json(&[
        "run",
        "--op",
        "gather-gguf",
        "--format",
        "q8_0",
        &table,
        &indices,
        "-o",
        &gguf_out.to_string_lossy(),
        "--json",
        "--check",
    ]);
    same_schema(&plain, &gguf, &["scales", "zero_points"]);
    assert_eq!(gguf["data"], table.as_str(), "{gguf}");
    assert_eq!(gguf["indices"], indices.as_str(), "{gguf}");
    assert_eq!(gguf["array"], "output", "{gguf}");
    assert_eq!(gguf["shape"], serde_json::json!([2, 32]));
    assert_eq!(gguf["checked"], true);
    assert!(gguf["check_ns"].as_u64().is_some(), "{gguf}");

    // Block quantization with zero points: 1 row of 16 4-bit values, one block.
    let q = write(&dir, "q.npy", npy("|u1", false, &[1, 8], &[0x21; 8]));
    let scales = write(&dir, "s.npy", npy("<f4", false, &[1, 1], &f32_bytes([0.5])));
    let zp = write(&dir, "zp.npy", npy("|u1", false, &[1, 1], &[0x01]));
    let zero = ids(&dir, "zero.npy", &[0]);
    let block = json(&[
        "run",
        "--op",
        "gather-block-quantized",
        "--bits",
        "4",
        "--block-size",
        "16",
        &q,
        &zero,
        &scales,
        &zp,
        "-o",
        &dir.path().join("block.npy").to_string_lossy(),
        "--json",
    ]);
    same_schema(&plain, &block, &["scales", "zero_points"]);
    assert_eq!(block["scales"], scales.as_str(), "{block}");
    assert_eq!(block["zero_points"], zp.as_str(), "{block}");
    assert_eq!(block["data"], q.as_str(), "{block}");
}

/// `bench --json` has the same keys for every op (the quantized bench lacked the flavor, the
/// buffers' placement, the cache hits and the throughput).
#[test]
fn bench_json_has_one_schema_for_every_op() {
    let common = ["--indices-shape", "8", "--time-ms", "5", "--json"];
    let plain = json(
        &[
            &["bench", "--op", "gather", "--data-shape", "64x256"],
            &common[..],
        ]
        .concat(),
    );
    let gguf = json(
        &[
            &["bench", "--op", "gather-gguf", "--format", "q4_0"],
            &["--data-shape", "64x256"][..],
            &common[..],
        ]
        .concat(),
    );
    let extra = [
        "data_bytes_shape",
        "scales_shape",
        "zero_points_bytes_shape",
    ];
    same_schema(&plain, &gguf, &extra);
    let block = json(
        &[
            &["bench", "--op", "gather-block-quantized", "--bits", "4"][..],
            &[
                "--block-size",
                "32",
                "--zero-points",
                "--data-shape",
                "64x256",
            ],
            &common[..],
        ]
        .concat(),
    );
    same_schema(&plain, &block, &extra);
    assert_eq!(block["zero_points_bytes_shape"], serde_json::json!([64, 4]));
    for json in [&gguf, &block] {
        for field in ["median_ns", "memcpy_ns", "gbps", "cache_hit_ns"] {
            assert!(
                json[field].as_f64().is_some_and(|v| v > 0.0),
                "{field}: {json}"
            );
        }
        assert_eq!(json["output_shape"], serde_json::json!([8, 256]));
        assert_eq!(json["threads_used"], 1);
    }
}

/// `explain --json` too: the plain keys are all there for a quantized op.
#[test]
fn explain_json_has_one_schema_for_every_op() {
    let shapes = ["--data-shape", "64x256", "--indices-shape", "8", "--json"];
    let plain = json(&[&["explain", "--op", "gather"][..], &shapes[..]].concat());
    let gguf = json(
        &[
            &["explain", "--op", "gather-gguf", "--format", "q8_0"][..],
            &shapes[..],
        ]
        .concat(),
    );
    same_schema(
        &plain,
        &gguf,
        &[
            "data_bytes_shape",
            "scales_shape",
            "zero_points_bytes_shape",
        ],
    );
    assert!(gguf["code_bytes"].as_u64().is_some_and(|n| n > 0), "{gguf}");
}

/// Every bench flag is honoured or refused for a quantized op: `--threads` splits its indices
/// (it reported one thread whatever was asked), `--index-limit` bounds them, and the banding
/// flags of the plain gathers are refused with one line (they were ignored).
#[test]
fn bench_honours_or_refuses_every_flag_for_a_quantized_op() {
    let gguf = [
        "bench",
        "--op",
        "gather-gguf",
        "--format",
        "q4_0",
        "--data-shape",
        "64x256",
        "--indices-shape",
        "8",
        "--time-ms",
        "5",
        "--json",
    ];
    let two = json(&[&gguf[..], &["--threads", "2"]].concat());
    assert_eq!(two["threads"], 2);
    assert_eq!(two["threads_used"], 2, "{two}");
    assert_eq!(two["outer_extent"], 8, "{two}");
    for flag in [&["--no-bands"][..], &["--band-max-rows", "8"]] {
        let line = usage_error(&[&gguf[..], flag].concat());
        assert!(
            line.contains(flag[0]) && line.contains("gather-gguf"),
            "{line}"
        );
    }
    let limited = json(&[&gguf[..], &["--index-limit", "2"]].concat());
    assert_eq!(limited["index_limit"], 2);
}

/// `--flavor` is honoured by the quantized ops: under `--flavor onnx`, a negative id of
/// gather-gguf counts from the end; without it (llama.cpp's rule) it is out of range, and the
/// error says which flags allow it. A flavor that names another operator is refused.
#[test]
fn gguf_negative_ids_follow_the_flavor() {
    let dir = tempfile::tempdir().unwrap();
    let table = gguf_table(&dir);
    let indices = ids(&dir, "ids.npy", &[-1]);
    let out = dir.path().join("rows.npy").to_string_lossy().into_owned();
    let run = |flavor: &[&str]| -> Vec<String> {
        let files = [table.as_str(), &indices, "-o", &out, "--check"];
        let start = ["run", "--op", "gather-gguf", "--format", "q8_0"];
        (start.iter().chain(flavor).chain(&files))
            .map(|a| a.to_string())
            .collect()
    };
    let line = usage_error(&strs(&run(&[])));
    assert!(line.contains("index -1"), "{line}");
    assert!(
        line.contains("--negative wrap") && line.contains("--flavor onnx"),
        "{line}"
    );
    assert!(!Path::new(&out).exists());
    ok(&strs(&run(&["--flavor", "onnx"])));
    let row1: Vec<f32> = (0..32).map(|j| (16 - j) as f32 * -2.0).collect();
    assert_eq!(npy_data(&out), f32_bytes(row1));
    fs::remove_file(&out).unwrap();
    ok(&strs(&run(&["--negative", "wrap"])));
    let line = usage_error(&strs(&run(&["--flavor", "openvino-gather8"])));
    assert!(line.contains("openvino-gather8"), "{line}");
    // explain shows the rule that applies.
    let shapes = ["--data-shape", "2x32", "--indices-shape", "1", "--json"];
    let explain = |flavor: &[&str]| {
        json(
            &[
                &["explain", "--op", "gather-gguf", "--format", "q8_0"][..],
                flavor,
                &shapes,
            ]
            .concat(),
        )
    };
    assert_ne!(
        explain(&[])["policy"],
        explain(&["--flavor", "onnx"])["policy"]
    );
}

/// `--zero-points` belongs to explain and bench (run takes a ZERO_POINTS file).
#[test]
fn run_help_lists_only_the_flags_run_takes() {
    let help = ok(&["run", "--help"]);
    assert!(!help.contains("--zero-points"), "{help}");
    assert!(help.contains("ZERO_POINTS"), "{help}");
    for sub in ["explain", "bench"] {
        let help = ok(&[sub, "--help"]);
        assert!(help.contains("--zero-points"), "{sub}: {help}");
    }
    let dir = tempfile::tempdir().unwrap();
    let line = usage_error(&[
        "run",
        "--op",
        "gather-block-quantized",
        "--zero-points",
        "a.npy",
        "b.npy",
        "-o",
        &dir.path().join("o.npy").to_string_lossy(),
    ]);
    assert!(line.contains("--zero-points"), "{line}");
}

/// Help text wraps to the terminal's width (`COLUMNS` where there is no terminal); it was
/// 100 columns wide whatever the terminal.
#[test]
fn help_wraps_to_the_terminal() {
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["bench", "--help"],
        &["layer", "--help"],
    ] {
        let out = gather_jit()
            .args(args)
            .env("COLUMNS", "60")
            .output()
            .unwrap();
        assert!(out.status.success());
        let help = String::from_utf8(out.stdout).unwrap();
        // clap never wraps the usage line (a list of placeholders).
        let widest = (help.lines())
            .filter(|l| !l.starts_with("Usage:"))
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0);
        assert!(
            widest <= 60,
            "{args:?}: a line of {widest} columns:\n{help}"
        );
    }
}

/// `layer --no-check` compiles and times each layer but skips the reference interpreter, and
/// says so.
#[test]
fn layer_no_check_skips_the_interpreter_and_says_so() {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/seed_layers.xml");
    let seeds = seeds.to_str().unwrap();
    let text = ok(&["layer", seeds, "--no-check"]);
    assert!(text.contains("not checked"), "{text}");
    assert!(text.contains("--no-check"), "{text}");
    assert!(!text.contains("yes"), "{text}");
    let rows = json(&["layer", seeds, "--no-check", "--json"]);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for row in rows {
        assert_eq!(row["checked"], false, "{row}");
        assert!(
            row["agree"].is_null() && row["interp_ns"].is_null(),
            "{row}"
        );
        assert!(row["jit_ns"].as_u64().is_some_and(|ns| ns > 0), "{row}");
    }
    let checked = json(&["layer", seeds, "--json"]);
    assert_eq!(checked[0]["checked"], true);
    assert_eq!(checked[0]["agree"], true);
}

// ---------------------------------------------------------------------------------------------
// Issue 39: first use

/// The subcommands whose flags [`every_numeric_flag_takes_a_negative_number`] tries.
fn subcommands() -> Vec<&'static str> {
    let mut subs = vec!["run", "explain", "bench", "aot", "layer", "demo"];
    if cfg!(feature = "model") {
        subs.push("model");
    }
    subs
}

/// The long flags of `sub` that take a value, as its help lists them (`--axis <AXIS>`).
fn value_flags(sub: &str) -> Vec<String> {
    let out = gather_jit()
        .args([sub, "--help"])
        .env("COLUMNS", "1000")
        .output()
        .unwrap();
    assert!(out.status.success(), "{sub} --help: {out:?}");
    let help = String::from_utf8(out.stdout).unwrap();
    let mut flags = BTreeSet::new();
    for line in help.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.windows(2) {
            let flag = pair[0].trim_end_matches(',');
            if flag.starts_with("--") && pair[1].starts_with('<') {
                flags.insert(flag.to_string());
            }
        }
    }
    flags.into_iter().collect()
}

/// The flags that take a number, and what each says of `-1`: `None` if -1 is a value it
/// accepts (an axis counts from the end), else its own rule. A flag that takes a number must
/// be listed here, and any other flag in [`NOT_NUMERIC`], so that a new flag is classified.
const NUMERIC: &[(&str, Option<&str>)] = &[
    ("--axis", None),
    ("--batch-dims", None),
    ("--gather-axis", None),
    ("--quantize-axis", None),
    ("--bits", Some("-1 is not in 0..=255")),
    ("--block-size", Some("expected a whole number from 0 to")),
    ("--seed", Some("expected a whole number from 0 to")),
    ("--threads", Some("-1 is not in 1..=1024")),
    ("--time-ms", Some("expected a whole number from 0 to")),
    (
        "--band-scratch-kib",
        Some("expected a whole number from 0 to"),
    ),
    ("--band-max-rows", Some("expected a whole number from 0 to")),
    ("--index-limit", Some("expected a whole number from 1 to")),
    (
        "--output-offset",
        Some("expected a whole number from 0 to 4095"),
    ),
    (
        "--data-offset",
        Some("expected a whole number from 0 to 4095"),
    ),
    ("--compile-only", Some("expected a whole number from 0 to")),
    ("--warmup", Some("expected a whole number from 0 to")),
    ("--iterations", Some("expected a whole number from 1 to")),
    (
        "--atol",
        Some("-1 is not a tolerance (a finite number, 0 or more)"),
    ),
    (
        "--rtol",
        Some("-1 is not a tolerance (a finite number, 0 or more)"),
    ),
];

/// The flags whose value is a name, a shape, a type or a file.
const NOT_NUMERIC: &[&str] = &[
    "--op",
    "--flavor",
    "--negative",
    "--oob",
    "--format",
    "--reduction",
    "--use-init-val",
    "--data-shape",
    "--indices-shape",
    "--updates-shape",
    "--dtype",
    "--index-type",
    "--indices",
    "--target",
    "--symbol",
    "--output",
    "--header",
    "--input",
    "--inputs",
    "--dim",
    "--input-shape",
    "--output-dir",
    "--assert-outputs",
];

/// Every flag that takes a number takes `-1` as its value, as `--axis -1` always did, and then
/// accepts it or refuses it with its own rule in one line; `--atol -1` was clap's
/// `unexpected argument '-1' found`, and `--output-offset -1` Rust's `invalid digit found in
/// string`.
#[test]
fn every_numeric_flag_takes_a_negative_number() {
    // Nothing is written: every command below stops before its output (if any) is made.
    let dir = tempfile::tempdir().unwrap();
    let mut tried = 0;
    for sub in subcommands() {
        for flag in value_flags(sub) {
            let numeric = NUMERIC.iter().find(|(f, _)| *f == flag);
            assert!(
                numeric.is_some() || NOT_NUMERIC.contains(&flag.as_str()),
                "{sub} {flag}: list it in NUMERIC (with its rule for -1) or NOT_NUMERIC"
            );
            let Some((_, rule)) = numeric else { continue };
            let args = [sub, flag.as_str(), "-1"];
            let out = gather_jit()
                .args(args)
                .current_dir(dir.path())
                .output()
                .unwrap();
            let line = common::one_error_line(&args, out);
            assert!(!line.contains("unexpected argument"), "{args:?}: {line}");
            match rule {
                Some(rule) => assert!(
                    line.starts_with(&format!("error: invalid value '-1' for '{flag} <"))
                        && line.contains(rule),
                    "{args:?}: {line}"
                ),
                // Taken as the value: what stops the command is what is still missing.
                None => assert!(
                    line.contains("required arguments were not provided"),
                    "{args:?}: {line}"
                ),
            }
            tried += 1;
        }
    }
    assert!(tried >= 30, "only {tried} numeric flags found");
}

/// `bench --iterations N` times exactly N calls whatever `--time-ms` says, after `--warmup`
/// untimed ones, and the report counts them; without it the count is what fit in the budget.
#[test]
fn bench_times_a_fixed_number_of_iterations_after_the_warmup() {
    let bench = [
        "bench",
        "--op",
        "gather",
        "--data-shape",
        "4x4",
        "--indices-shape",
        "2",
        "--time-ms",
        "0",
        "--json",
    ];
    // With no warm-up call to size them, each sample is one call; with --time-ms 0 alone
    // there would be 5.
    let report = json(&[&bench[..], &["--iterations", "7", "--warmup", "0"]].concat());
    assert_eq!(
        (
            &report["iterations"],
            &report["samples"],
            &report["calls_per_sample"],
            &report["warmup"]
        ),
        (&7.into(), &7.into(), &1.into(), &0.into()),
        "{report}"
    );
    // A call of a few nanoseconds is timed in batches, at least 5 of them.
    let report = json(&[&bench[..], &["--iterations", "40"]].concat());
    assert_eq!(report["iterations"], 40, "{report}");
    assert_eq!(report["warmup"], 2, "{report}");
    let samples = report["samples"].as_u64().unwrap();
    assert!((5..=40).contains(&samples), "{report}");
    // On the budget, the iterations are the samples' calls.
    let report = json(&bench);
    assert_eq!(
        report["iterations"].as_u64(),
        Some(report["samples"].as_u64().unwrap() * report["calls_per_sample"].as_u64().unwrap()),
        "{report}"
    );
    let text = ok(&[&bench[..9], &["--iterations", "3", "--warmup", "0"]].concat());
    assert!(
        text.contains("(3 calls in 3 samples after 0 warm-up, 1 thread)"),
        "{text}"
    );
    let line = usage_error(&[&bench[..], &["--iterations", "0"]].concat());
    assert!(
        line.contains("invalid value '0' for '--iterations <N>': expected a whole number from 1"),
        "{line}"
    );
}

/// `model --bench --iterations N` runs each way N times (and N times for its gather nodes),
/// after `--warmup` untimed runs; the flags need `--bench`.
#[cfg(feature = "model")]
#[test]
fn model_bench_times_a_fixed_number_of_runs() {
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tiny.onnx");
    let tiny = tiny.to_str().unwrap();
    let args = [
        "model",
        tiny,
        "--dim",
        "batch=2",
        "--bench",
        "--time-ms",
        "0",
    ];
    let report = json(&[&args[..], &["--iterations", "3", "--warmup", "0", "--json"]].concat());
    let bench = &report["bench"];
    assert_eq!(
        (
            &bench["gather_jit_iterations"],
            &bench["tract_native_iterations"],
            &bench["warmup"]
        ),
        (&3.into(), &3.into(), &0.into()),
        "{report}"
    );
    // On a budget of 0 ms, the 5 runs that are the least.
    let report = json(&[&args[..], &["--json"]].concat());
    assert_eq!(report["bench"]["gather_jit_iterations"], 5, "{report}");
    assert_eq!(report["bench"]["warmup"], 1, "{report}");
    let text = ok(&[&args[..], &["--iterations", "4"]].concat());
    assert!(
        text.contains("median of 4 and 4 runs after 1 warm-up"),
        "{text}"
    );
    for flag in ["--iterations", "--warmup", "--time-ms"] {
        let line = usage_error(&["model", tiny, flag, "3"]);
        assert!(line.contains("--bench"), "{flag}: {line}");
    }
}

/// The example of `layer`'s help kept the interpreter busy for seconds on the Gather-1 layer's
/// 48 million elements: an output of more than 2^20 elements is now checked at both ends and at
/// a sample seeded by `--seed`, and says so; `--full-check` checks every element, as before.
#[test]
fn layer_checks_a_large_output_at_a_seeded_sample() {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/seed_layers.xml");
    let seeds = seeds.to_str().unwrap();
    let elements = |row: &Value| -> u64 {
        let shape = row["output_shape"].as_array().unwrap();
        shape.iter().map(|d| d.as_u64().unwrap()).product()
    };
    let rows = json(&["layer", seeds, "--json"]);
    let rows = rows.as_array().unwrap();
    for row in &rows[..3] {
        assert_eq!(row["sampled"], false, "{row}");
        assert_eq!(row["checked_elements"], elements(row), "{row}");
    }
    let gather1 = &rows[3];
    assert_eq!(elements(gather1), 48_384_000, "{gather1}");
    assert_eq!(
        (&gather1["sampled"], &gather1["agree"]),
        (&true.into(), &true.into())
    );
    let checked = gather1["checked_elements"].as_u64().unwrap();
    assert!((1 << 18..1 << 20).contains(&checked), "{gather1}");
    // Another seed, another sample (and other inputs).
    let other = json(&["layer", seeds, "--json", "--seed", "7"]);
    assert_ne!(other[3]["checked_elements"], checked, "{other}");

    let text = ok(&["layer", seeds]);
    assert!(
        text.contains(&format!(
            "(sampled: {checked} of 48384000 elements of Gather-1 (line 78); --full-check checks all)"
        )),
        "{text}"
    );
    let full = json(&["layer", seeds, "--json", "--full-check"]);
    assert_eq!(full[3]["sampled"], false, "{full}");
    assert_eq!(full[3]["checked_elements"], 48_384_000, "{full}");
    assert_eq!(full[3]["agree"], true, "{full}");
    let line = usage_error(&["layer", seeds, "--full-check", "--no-check"]);
    assert!(line.contains("--no-check"), "{line}");
}
