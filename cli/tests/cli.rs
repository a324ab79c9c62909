//! The `gather-jit` binary, run as a user would: every subcommand's success path and its error
//! paths (exit status 2, one line on stderr, no output file created or changed).
//!
//! `.npy` and IR fixtures are written at run time into temporary directories.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use tempfile::TempDir;

mod common;
use common::{gather_jit, npy, ok, one_error_line, usage_error};

/// The repository's `examples/seed_layers.xml`.
fn seed_layers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/seed_layers.xml")
}

fn le<T: Copy, const N: usize>(values: &[T], to_le: fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to_le(v)).collect()
}

/// Header text and data bytes of an `.npy` file.
fn read_npy(path: &Path) -> (String, Vec<u8>) {
    let file = fs::read(path).expect("output written");
    assert_eq!(&file[..8], b"\x93NUMPY\x01\x00");
    let len = u16::from_le_bytes([file[8], file[9]]) as usize;
    let header = String::from_utf8(file[10..10 + len].to_vec()).unwrap();
    (header, file[10 + len..].to_vec())
}

/// A temporary directory holding data `[[1, 2], [3, 4]]` (f32) as `data.npy`.
fn dir_with_data() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let data = npy(
        "<f4",
        false,
        &[2, 2],
        &le(&[1.0f32, 2.0, 3.0, 4.0], f32::to_le_bytes),
    );
    fs::write(dir.path().join("data.npy"), data).unwrap();
    dir
}

fn write_indices(
    dir: &TempDir,
    name: &str,
    descr: &str,
    shape: &[usize],
    values: &[i64],
) -> String {
    let path = dir.path().join(name);
    fs::write(
        &path,
        npy(descr, false, shape, &le(values, i64::to_le_bytes)),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

fn path(dir: &TempDir, name: &str) -> String {
    dir.path().join(name).to_str().unwrap().to_string()
}

/// Runs the binary with `args` under `ulimit -v kib`: a limit on the address space, so that an
/// allocation larger than it fails at once, whatever the machine's memory and overcommit mode.
#[cfg(target_os = "linux")]
fn under_memory_limit(kib: u64, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_gather-jit"))
        .args(args)
        .output()
        .expect("sh runs")
}

/// An `.npy` file at `path` whose data (`bytes` of it) reads as zeros, written sparse: a large
/// input costs neither time nor disk.
fn sparse_npy(path: &Path, descr: &str, shape: &[usize], bytes: u64) {
    fs::write(path, npy(descr, false, shape, &[])).unwrap();
    let file = fs::OpenOptions::new().append(true).open(path).unwrap();
    file.set_len(file.metadata().unwrap().len() + bytes)
        .unwrap();
}

/// The names in `dir`, sorted.
fn names(dir: &TempDir) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

// ---------------------------------------------------------------------------------------------
// demo

/// The rows of a table `demo` or `layer` printed: the lines after the header and the rule,
/// without the notes in parentheses after them (the columns left out, a sampled check).
fn table_rows(out: &str) -> Vec<&str> {
    (out.lines().skip(2))
        .filter(|l| !l.starts_with('('))
        .collect()
}

/// The demo's table fits 100 columns (issue 25: it was 161), leaving out the op, types, output
/// and indices columns, and says so.
#[test]
fn demo_prints_the_table_and_agrees_everywhere() {
    let out = ok(&["demo"]);
    let header = out.lines().next().unwrap();
    for column in ["case", "data", "compile", "jit", "interp", "GB/s", "agree"] {
        assert!(header.contains(column), "{header}");
    }
    for line in out.lines() {
        assert!(
            line.chars().count() <= 100,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    assert!(
        out.lines()
            .any(|l| l
                == "(op, indices, output, types left out to fit 100 columns: --wide shows them)"),
        "{out}"
    );
    assert!(
        out.lines().last().unwrap().starts_with("(sampled: ")
            && out.ends_with("of Gather-1 (line 78); --full-check checks all)\n"),
        "{out}"
    );
    let rows = table_rows(&out);
    assert_eq!(rows.len(), 12 + 5 + 4 + 1, "{out}");
    assert!(
        rows.iter().all(|r| r.ends_with("yes")
            || r.ends_with("yes (= spec)")
            || r.starts_with("Gather-1")),
        "{out}"
    );
    // But the Gather-1 layer's 48 million elements, which the interpreter checks at a sample.
    let gather1 = rows.iter().find(|r| r.starts_with("Gather-1")).unwrap();
    assert!(gather1.ends_with("yes (sampled)"), "{out}");
    let embedding = rows
        .iter()
        .find(|r| r.starts_with("embedding lookup"))
        .unwrap();
    assert!(embedding.contains("[30522,768]"), "{embedding}");
    assert!(out.contains("Gather-1 (line"), "{out}");
}

/// The demo needs about 0.2 GB at once (the Gather-1 layer's 194 MB output, which the
/// interpreter checks at a sample); with less, it says which buffer did not fit instead of
/// aborting.
#[cfg(target_os = "linux")]
#[test]
fn demo_under_a_memory_limit_fails_with_one_line() {
    let out = under_memory_limit(200_000, &["demo"]);
    if out.status.success() {
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert_eq!(table_rows(&stdout).len(), 12 + 5 + 4 + 1, "{stdout}");
        return;
    }
    let line = one_error_line(&["demo (ulimit -v 200000)"], out);
    assert!(line.contains("allocate"), "{line}");
}

// ---------------------------------------------------------------------------------------------
// stdout closed early (`gather-jit ... | head -1`)

/// Runs `args` with stdout a pipe whose reading end is already closed (as after `head -1`
/// exits), so that every write fails with a broken pipe; expects a quiet stop with status 0.
#[track_caller]
fn stops_quietly_on_a_closed_stdout(args: &[&str]) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_gather-jit"))
        .args(args)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    assert!(!stderr.contains("error"), "{args:?}: {stderr}");
    assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
}

#[test]
fn every_subcommand_stops_quietly_when_stdout_is_closed() {
    let signature = [
        "--op",
        "gather",
        "--data-shape",
        "4x4",
        "--indices-shape",
        "2",
    ];
    stops_quietly_on_a_closed_stdout(&[&["explain"], &signature[..]].concat());
    stops_quietly_on_a_closed_stdout(&[&["explain", "--json"], &signature[..]].concat());
    let bench = ["bench", "--time-ms", "5"];
    stops_quietly_on_a_closed_stdout(&[&bench[..], &signature[..]].concat());
    stops_quietly_on_a_closed_stdout(&[&bench[..], &signature[..], &["--json"]].concat());
    let seeds = seed_layers();
    let seeds = seeds.to_str().unwrap();
    stops_quietly_on_a_closed_stdout(&["layer", seeds, "--json"]);
    stops_quietly_on_a_closed_stdout(&["demo"]);
    // The output file is written before the line that says so.
    let dir = dir_with_data();
    let indices = write_indices(&dir, "indices.npy", "<i8", &[1], &[1]);
    let out = path(&dir, "out.npy");
    let data = path(&dir, "data.npy");
    stops_quietly_on_a_closed_stdout(&["run", "--op", "gather", &data, &indices, "-o", &out]);
    assert_eq!(
        read_npy(Path::new(&out)).1,
        le(&[3.0f32, 4.0], f32::to_le_bytes)
    );
}

// ---------------------------------------------------------------------------------------------
// run

#[test]
fn run_writes_the_gathered_npy() {
    let dir = dir_with_data();
    let indices = write_indices(&dir, "indices.npy", "<i8", &[2, 2], &[0, 0, 1, 0]);
    let out = path(&dir, "out.npy");
    let stdout = ok(&[
        "run",
        "--op",
        "gather-nd",
        &path(&dir, "data.npy"),
        &indices,
        "-o",
        &out,
        "--check",
    ]);
    assert!(stdout.contains("[2]"), "{stdout}");
    let (header, data) = read_npy(Path::new(&out));
    assert!(
        header.contains("'descr': '<f4'") && header.contains("'shape': (2,)"),
        "{header}"
    );
    assert_eq!(data, le(&[1.0f32, 3.0], f32::to_le_bytes));
    let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 3, "no temporary file is left behind");
}

#[test]
fn run_reads_big_endian_fortran_order_and_narrow_index_types() {
    let dir = tempfile::tempdir().unwrap();
    // [[1, 2, 3], [4, 5, 6]] as big-endian int16, stored column by column.
    let data = npy(
        ">i2",
        true,
        &[2, 3],
        &le(&[1i16, 4, 2, 5, 3, 6], i16::to_be_bytes),
    );
    fs::write(dir.path().join("data.npy"), data).unwrap();
    let indices = npy("|u1", false, &[2], &[2, 0]);
    fs::write(dir.path().join("indices.npy"), indices).unwrap();
    let out = path(&dir, "out.npy");
    ok(&[
        "run",
        "--op",
        "gather",
        "--axis",
        "1",
        &path(&dir, "data.npy"),
        &path(&dir, "indices.npy"),
        "-o",
        &out,
    ]);
    let (header, data) = read_npy(Path::new(&out));
    assert!(
        header.contains("'descr': '<i2'") && header.contains("'shape': (2, 2)"),
        "{header}"
    );
    assert_eq!(data, le(&[3i16, 1, 6, 4], i16::to_le_bytes));
}

#[test]
fn run_out_of_range_index_names_position_and_value_and_writes_nothing() {
    let dir = dir_with_data();
    let indices = write_indices(&dir, "indices.npy", "<i8", &[2, 2], &[0, 0, 5, 0]);
    let out = path(&dir, "out.npy");
    let data = path(&dir, "data.npy");
    let args = ["run", "--op", "gather-nd", &data, &indices, "-o", &out];
    let line = usage_error(&args);
    assert!(line.contains("index 5 at position [1, 0]"), "{line}");
    assert!(!Path::new(&out).exists(), "no output file is created");

    // An existing output is left as it was.
    fs::write(&out, b"keep me").unwrap();
    usage_error(&args);
    assert_eq!(fs::read(&out).unwrap(), b"keep me");
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        3,
        "no temporary file is left"
    );
}

#[test]
fn run_rejects_bad_flags_and_files_without_writing() {
    let dir = dir_with_data();
    let data = path(&dir, "data.npy");
    let indices = write_indices(&dir, "indices.npy", "<i8", &[2, 1], &[1, 0]);
    let out = path(&dir, "out.npy");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--op", "gather-nd", "--flavor", "pytorch"],
            "invalid value 'pytorch' for '--flavor",
        ),
        (vec!["--op", "scatter"], "invalid value 'scatter' for '--op"),
        (vec![], "--op is required with --flavor onnx"),
        (
            vec!["--op", "gather-nd", "--flavor", "openvino-gather8"],
            "does not define this operator",
        ),
        (
            vec!["--op", "gather-nd", "--axis", "1"],
            "--axis does not apply",
        ),
        (
            vec!["--op", "gather", "--axis", "2"],
            "axis 2 is out of range",
        ),
        (
            vec![
                "--op",
                "gather-elements",
                "--axis",
                "-1",
                "--batch-dims",
                "1",
            ],
            "--batch-dims does not apply",
        ),
        (
            vec!["--op", "gather", "--oob", "wrap"],
            "invalid value 'wrap' for '--oob",
        ),
    ];
    for (flags, expected) in cases {
        let mut args = vec!["run"];
        args.extend(&flags);
        args.extend([data.as_str(), indices.as_str(), "-o", out.as_str()]);
        let line = usage_error(&args);
        assert!(line.contains(expected), "{flags:?}: {line}");
        assert!(!Path::new(&out).exists(), "{flags:?}");
    }
    // Files that cannot be used.
    let missing = path(&dir, "missing.npy");
    let line = usage_error(&["run", "--op", "gather", &missing, &indices, "-o", &out]);
    assert!(
        line.contains("cannot read") && line.contains("missing.npy"),
        "{line}"
    );
    fs::write(dir.path().join("text.npy"), b"not numpy").unwrap();
    let line = usage_error(&[
        "run",
        "--op",
        "gather",
        &path(&dir, "text.npy"),
        &indices,
        "-o",
        &out,
    ]);
    assert!(line.contains("not an .npy file"), "{line}");
    let float_indices = npy("<f4", false, &[1], &le(&[0.0f32], f32::to_le_bytes));
    fs::write(dir.path().join("f.npy"), float_indices).unwrap();
    let line = usage_error(&[
        "run",
        "--op",
        "gather",
        &data,
        &path(&dir, "f.npy"),
        "-o",
        &out,
    ]);
    assert!(line.contains("indices must have an integer type"), "{line}");
    let complex = npy("<c8", false, &[1], &[0; 8]);
    fs::write(dir.path().join("c.npy"), complex).unwrap();
    let line = usage_error(&[
        "run",
        "--op",
        "gather",
        &path(&dir, "c.npy"),
        &indices,
        "-o",
        &out,
    ]);
    assert!(line.contains("'<c8' is not supported"), "{line}");
    assert!(!Path::new(&out).exists());
}

/// The output of a gather may be far larger than its inputs: here 2^40 bytes from 1 MiB of
/// data and 1 MiB of indices.
#[cfg(target_os = "linux")]
#[test]
fn run_output_too_large_for_memory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.npy");
    sparse_npy(&data, "<f4", &[1, 262_144], 1 << 20);
    let indices = dir.path().join("indices.npy");
    sparse_npy(&indices, "|u1", &[1 << 20], 1 << 20);
    let out = path(&dir, "out.npy");
    let args = [
        "run",
        "--op",
        "gather",
        data.to_str().unwrap(),
        indices.to_str().unwrap(),
        "-o",
        &out,
    ];
    let line = one_error_line(&args, under_memory_limit(4_000_000, &args));
    assert_eq!(
        line,
        "error: cannot allocate 1099511627776 bytes for the output of Gather(axis=0, batch_dims=0)"
    );
    assert_eq!(
        names(&dir),
        ["data.npy", "indices.npy"],
        "nothing is written"
    );
}

/// A 300 MB input is held once, not also copied: it runs in 500 MB of address space.
#[cfg(target_os = "linux")]
#[test]
fn run_holds_an_input_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.npy");
    sparse_npy(&data, "|u1", &[300_000_000], 300_000_000);
    let indices = write_indices(&dir, "indices.npy", "<i8", &[1], &[299_999_999]);
    let out = path(&dir, "out.npy");
    let args = [
        "run",
        "--op",
        "gather",
        data.to_str().unwrap(),
        &indices,
        "-o",
        &out,
    ];
    let run = under_memory_limit(500_000, &args);
    assert!(run.status.success(), "{run:?}");
    assert_eq!(read_npy(Path::new(&out)).1, [0]);
    // An input larger than the limit is an error naming it.
    let line = one_error_line(&args, under_memory_limit(200_000, &args));
    assert!(
        line.ends_with("data.npy: cannot allocate 300000000 bytes for the data"),
        "{line}"
    );
}

/// `-o` naming an input, by the same path or another, through a symlink or a hard link, is
/// refused before anything is read or written.
#[test]
fn run_refuses_to_overwrite_an_input() {
    let dir = dir_with_data();
    let data = path(&dir, "data.npy");
    let indices = write_indices(&dir, "indices.npy", "<i8", &[1], &[1]);
    let original = fs::read(&data).unwrap();
    let dotted = dir.path().join(".").join("data.npy");
    let mut outputs = vec![
        (data.clone(), "data"),
        (dotted.to_str().unwrap().to_string(), "data"),
        (indices.clone(), "indices"),
    ];
    let hard = path(&dir, "hard.npy");
    fs::hard_link(&data, &hard).unwrap();
    outputs.push((hard, "data"));
    #[cfg(unix)]
    {
        let symlink = path(&dir, "symlink.npy");
        std::os::unix::fs::symlink(&data, &symlink).unwrap();
        outputs.push((symlink, "data"));
    }
    let before = names(&dir);
    for (out, role) in &outputs {
        let args = ["run", "--op", "gather", &data, &indices, "-o", out];
        let line = usage_error(&args);
        assert!(
            line.contains(&format!("is the same file as the {role} input")),
            "{out}: {line}"
        );
        assert_eq!(
            fs::read(&data).unwrap(),
            original,
            "{out}: data is unchanged"
        );
        assert_eq!(names(&dir), before, "{out}: no file is added or replaced");
    }
    #[cfg(unix)]
    assert!(
        fs::symlink_metadata(dir.path().join("symlink.npy"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn run_policy_flags_change_the_result() {
    let dir = dir_with_data();
    let indices = write_indices(&dir, "indices.npy", "<i8", &[2], &[-1, 7]);
    let out = path(&dir, "out.npy");
    let data = path(&dir, "data.npy");
    // ONNX: -1 wraps, 7 is an error; with --oob clamp, 7 reads row 1; with zero it is zeros.
    let line = usage_error(&["run", "--op", "gather", &data, &indices, "-o", &out]);
    assert!(line.contains("index 7 at position [1]"), "{line}");
    ok(&[
        "run", "--op", "gather", "--oob", "clamp", &data, &indices, "-o", &out, "--check",
    ]);
    assert_eq!(
        read_npy(Path::new(&out)).1,
        le(&[3.0f32, 4.0, 3.0, 4.0], f32::to_le_bytes)
    );
    ok(&[
        "run",
        "--op",
        "gather",
        "--oob",
        "zero",
        "--negative",
        "invalid",
        &data,
        &indices,
        "-o",
        &out,
    ]);
    assert_eq!(read_npy(Path::new(&out)).1, vec![0u8; 16]);
}

// ---------------------------------------------------------------------------------------------
// explain

#[test]
fn explain_prints_shape_plan_and_clif() {
    let out = ok(&[
        "explain",
        "--op",
        "gather-nd",
        "--data-shape",
        "2x3x4",
        "--indices-shape",
        "2x1",
        "--dtype",
        "f32",
        "--index-type",
        "i64",
    ]);
    assert!(out.contains("output shape:  [2, 3, 4]"), "{out}");
    assert!(out.contains("plan: 2 lookup(s)"), "{out}");
    assert!(out.contains("copy 48 bytes"), "{out}");
    assert!(out.contains("function ") && out.contains("block0"), "{out}");
    assert!(out.contains("machine code:"), "{out}");
    if cfg!(target_arch = "x86_64") {
        // The disassembly ends the output; the function returns somewhere in it.
        let listing = out
            .split("machine code (x86-64, AT&T syntax):")
            .nth(1)
            .expect("a disassembly");
        assert!(
            listing.lines().any(|l| l.trim_end().ends_with("ret")),
            "{listing}"
        );
        assert!(
            listing.trim_start().starts_with("0:  push %rbp"),
            "{listing}"
        );
    }
}

#[test]
fn explain_json_has_the_output_shape() {
    let out = ok(&[
        "explain",
        "--flavor",
        "openvino-gather1",
        "--axis",
        "1",
        "--data-shape",
        "6x12x10x24",
        "--indices-shape",
        "15x4x20x28",
        "--json",
    ]);
    let json: Value = serde_json::from_str(&out).expect("one JSON object");
    assert_eq!(
        json["output_shape"],
        serde_json::json!([6, 15, 4, 20, 28, 10, 24])
    );
    assert_eq!(json["flavor"], "openvino-gather1");
    assert!(json["code_bytes"].as_u64().unwrap() > 0);
    assert!(json["clif"].as_str().unwrap().contains("function"));
    assert_eq!(json["plan"]["loops"].as_array().unwrap().len(), 2);
    if cfg!(target_arch = "x86_64") {
        let lines = json["disassembly"].as_array().expect("disassembly lines");
        assert!(lines.iter().any(|l| l.as_str().unwrap().ends_with("ret")));
    } else {
        assert!(json["disassembly"].is_null());
    }
    // Scalar indices and an empty dim are valid shapes too.
    let out = ok(&[
        "explain",
        "--op",
        "gather",
        "--data-shape",
        "0x3",
        "--indices-shape",
        "scalar",
        "--axis",
        "1",
        "--json",
    ]);
    let json: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["output_shape"], serde_json::json!([0]));
}

#[test]
fn explain_rejects_bad_shapes_and_invalid_signatures() {
    for bad in ["2xx3", "2x3,4", "[2,3", "x", "-1", "two"] {
        let line = usage_error(&[
            "explain",
            "--op",
            "gather",
            "--data-shape",
            bad,
            "--indices-shape",
            "1",
        ]);
        assert!(
            line.contains("--data-shape")
                && line.contains("expected a shape such as 2x3x4, 2,3,4 or [2,3,4]"),
            "{line}"
        );
    }
    let line = usage_error(&[
        "explain",
        "--op",
        "gather-nd",
        "--batch-dims",
        "1",
        "--data-shape",
        "2x3",
        "--indices-shape",
        "3x1",
        "--json",
    ]);
    assert!(line.contains("batch dims mismatch"), "{line}");
    let line = usage_error(&[
        "explain",
        "--op",
        "gather",
        "--data-shape",
        "2",
        "--indices-shape",
        "1",
        "--dtype",
        "f8",
    ]);
    assert!(line.contains("invalid value 'f8' for '--dtype"), "{line}");
    assert!(line.contains("float32") && line.contains("bf16"), "{line}");
    let line = usage_error(&["explain", "--op", "gather", "--data-shape", "2"]);
    assert!(line.contains("--indices-shape"), "{line}");
}

// ---------------------------------------------------------------------------------------------
// bench

#[test]
fn bench_json_reports_times_in_nanoseconds() {
    let out = ok(&[
        "bench",
        "--op",
        "gather",
        "--data-shape",
        "1000x64",
        "--indices-shape",
        "4x32",
        "--time-ms",
        "20",
        "--json",
        "--threads",
        "2",
    ]);
    let json: Value = serde_json::from_str(&out).expect("exactly one JSON object on stdout");
    for field in [
        "compile_ns",
        "cache_hit_ns",
        "cache_hit_lent_ns",
        "median_ns",
        "p50_ns",
        "p90_ns",
        "p99_ns",
        "min_ns",
        "max_ns",
        "gbps",
        "memcpy_ns",
        "ratio_to_memcpy",
    ] {
        assert!(
            json[field].as_f64().is_some_and(|v| v > 0.0),
            "{field}: {json}"
        );
    }
    assert_eq!(json["threads"], 2);
    assert_eq!(json["threads_used"], 2);
    // The binary is built in the test's own profile, so their debug assertions agree.
    assert_eq!(json["debug_assertions"], cfg!(debug_assertions));
    let ordered = ["min_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns"].map(|f| json[f].as_f64());
    assert!(ordered.is_sorted(), "{ordered:?}");
    assert_eq!(json["p50_ns"], json["median_ns"]);
    assert_eq!(json["output_shape"], serde_json::json!([4, 32, 64]));
    assert_eq!(json["memcpy_bytes"], 4 * 32 * 64 * 4);
}

/// Offset buffers run (rows of 3 KiB: the copy helper's path) where the flags put them (the
/// allocator's blocks are 16-byte aligned, so the offsets show mod 16); offsets of a page or
/// more are refused.
#[test]
fn bench_takes_offset_buffers() {
    let args = |output: &'static str, data: &'static str| {
        [
            "bench",
            "--op",
            "gather",
            "--data-shape",
            "100x768",
            "--indices-shape",
            "8",
            "--time-ms",
            "5",
            "--json",
            "--output-offset",
            output,
            "--data-offset",
            data,
        ]
    };
    let json: Value = serde_json::from_str(&ok(&args("21", "3"))).expect("one JSON object");
    assert_eq!(
        (&json["output_offset"], &json["data_offset"]),
        (&21.into(), &3.into())
    );
    let mod_16 = |field: &str| json[field].as_u64().map(|at| at % 16);
    assert_eq!(mod_16("output_address_mod_64"), Some(5), "{json}");
    assert_eq!(mod_16("data_address_mod_64"), Some(3), "{json}");
    assert!(
        json["median_ns"].as_f64().is_some_and(|v| v > 0.0),
        "{json}"
    );
    for (output, data, flag) in [
        ("4096", "0", "--output-offset"),
        ("0", "4096", "--data-offset"),
    ] {
        let refused = usage_error(&args(output, data));
        assert!(refused.contains(flag), "{refused}");
    }
}

#[test]
fn bench_text_and_errors() {
    let out = ok(&[
        "bench",
        "--flavor",
        "openvino-gathernd8",
        "--batch-dims",
        "1",
        "--data-shape",
        "8x100x16",
        "--indices-shape",
        "8x20x1",
        "--dtype",
        "u8",
        "--index-type",
        "i32",
        "--time-ms",
        "10",
    ]);
    assert!(
        out.contains("per call") && out.contains("jit / memcpy"),
        "{out}"
    );
    let per_call = out.lines().find(|l| l.starts_with("per call")).unwrap();
    for part in ["median ", ", p90 ", ", p99 ", ", min ", ", max "] {
        assert!(per_call.contains(part), "{per_call}");
    }
    let tiny = [
        "bench",
        "--op",
        "gather",
        "--data-shape",
        "4",
        "--indices-shape",
        "2",
    ];
    // Both take 1 or more.
    for flag in ["--threads", "--index-limit"] {
        let line = usage_error(&[&tiny[..], &[flag, "0"]].concat());
        assert!(line.contains(flag), "{line}");
    }
    let line = usage_error(&[
        "bench",
        "--op",
        "gather",
        "--data-shape",
        "0x4",
        "--indices-shape",
        "2",
    ]);
    assert!(line.contains("cannot make valid indices"), "{line}");
}

/// 3.2 GB of output (BERT-base's table and 2^20 token ids) in 2 GB of address space.
#[cfg(target_os = "linux")]
#[test]
fn bench_buffers_too_large_for_memory_are_an_error() {
    let args = [
        "bench",
        "--op",
        "gather",
        "--data-shape",
        "30522x768",
        "--indices-shape",
        "1024x1024",
    ];
    let line = one_error_line(&args, under_memory_limit(2_000_000, &args));
    assert_eq!(
        line,
        "error: cannot allocate 3221225472 bytes for the output"
    );
}

/// 1024 parts would need 2 GB of stacks as 1024 threads; the references run on the kernel's
/// pool instead, so the bench runs in 400 MB (a thread that failed to start could abort).
#[cfg(target_os = "linux")]
#[test]
fn bench_with_more_parts_than_memory_for_threads_runs() {
    let args = [
        "bench",
        "--op",
        "gather",
        "--data-shape",
        "1024x1024",
        "--indices-shape",
        "1024",
        "--threads",
        "1024",
        "--time-ms",
        "5",
        "--json",
    ];
    let out = under_memory_limit(400_000, &args);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("bench --json");
    assert_eq!(report["threads_used"], 1024, "{report}");
    assert!(
        report["memcpy_ns"].as_f64().is_some_and(|ns| ns > 0.0),
        "{report}"
    );
}

#[test]
fn bench_compile_only_compiles_and_prints_nothing() {
    let args = ["bench", "--op", "gather", "--data-shape", "16x16"];
    let out = ok(&[&args[..], &["--indices-shape", "4", "--compile-only", "3"]].concat());
    assert_eq!(out, "");
    // A signature that does not compile is still an error.
    let compile_only = ["--indices-shape", "4", "--axis", "2", "--compile-only", "3"];
    let line = usage_error(&[&args[..], &compile_only[..]].concat());
    assert!(line.contains("axis"), "{line}");
}

#[test]
fn bench_index_limit_is_reported() {
    let args = [
        "bench",
        "--op",
        "gather-nd",
        "--data-shape",
        "64x64",
        "--indices-shape",
        "100x2",
        "--time-ms",
        "10",
    ];
    let limited = ok(&[&args[..], &["--index-limit", "8"]].concat());
    assert!(limited.contains("all below 8"), "{limited}");
    let json = ok(&[&args[..], &["--index-limit", "8", "--json"]].concat());
    let json: Value = serde_json::from_str(&json).expect("one JSON object");
    assert_eq!(json["index_limit"], 8);
    let json = ok(&[&args[..], &["--json"]].concat());
    let json: Value = serde_json::from_str(&json).expect("one JSON object");
    assert!(json["index_limit"].is_null(), "{json}");
}

// ---------------------------------------------------------------------------------------------
// layer

#[test]
fn layer_runs_the_four_seed_layers_as_they_are() {
    let out = gather_jit()
        .arg("layer")
        .arg(seed_layers())
        .arg("--wide")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let rows = table_rows(&stdout);
    assert_eq!(rows.len(), 4, "{stdout}");
    assert!(rows[..3].iter().all(|r| r.ends_with("yes")), "{stdout}");
    assert!(rows[3].ends_with("yes (sampled)"), "{stdout}");
    assert_eq!(
        rows.iter().filter(|r| r.starts_with("GatherND-8")).count(),
        3
    );
    assert!(rows[3].starts_with("Gather-1") && rows[3].contains("[6,15,4,20,28,10,24]"));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("ignored '...'"), "{stderr}");
}

/// A whole model: Parameter x2, Const axis (value in model.bin), Gather-8, GatherElements-6.
fn model_xml(gather_out: &str) -> String {
    format!(
        r#"<?xml version="1.0"?>
<net name="m" version="11">
  <layers>
    <layer id="0" name="data" type="Parameter" version="opset1">
      <data shape="4,5" element_type="f16"/>
      <output><port id="0" precision="FP16"><dim>4</dim><dim>5</dim></port></output>
    </layer>
    <layer id="1" name="ids" type="Parameter" version="opset1">
      <output><port id="0" precision="I32"><dim>3</dim></port></output>
    </layer>
    <layer id="2" name="axis" type="Const" version="opset1">
      <data element_type="i64" shape="" offset="8" size="8"/>
      <output><port id="0" precision="I64"/></output>
    </layer>
    <layer id="3" name="gather" type="Gather" version="opset8">
      <data batch_dims="0"/>
      <input>
        <port id="0" precision="FP16"><dim>4</dim><dim>5</dim></port>
        <port id="1" precision="I32"><dim>3</dim></port>
        <port id="2" precision="I64"/>
      </input>
      <output><port id="3" precision="FP16">{gather_out}</port></output>
    </layer>
    <layer id="4" name="elements" type="GatherElements" version="opset6">
      <data axis="0"/>
      <input>
        <port id="0"><dim>4</dim><dim>5</dim></port>
        <port id="1" precision="I64"><dim>2</dim><dim>5</dim></port>
      </input>
      <output><port id="2"><dim>2</dim><dim>5</dim></port></output>
    </layer>
  </layers>
  <edges>
    <edge from-layer="0" from-port="0" to-layer="3" to-port="0"/>
    <edge from-layer="1" from-port="0" to-layer="3" to-port="1"/>
    <edge from-layer="2" from-port="0" to-layer="3" to-port="2"/>
  </edges>
</net>
"#
    )
}

#[test]
fn layer_reads_a_whole_model_with_the_axis_from_the_bin_file() {
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("model.xml");
    fs::write(&xml, model_xml("<dim>4</dim><dim>3</dim>")).unwrap();
    let mut bin = vec![0xAA; 8];
    bin.extend_from_slice(&1i64.to_le_bytes());
    fs::write(dir.path().join("model.bin"), bin).unwrap();
    let out = ok(&["layer", xml.to_str().unwrap(), "--json"]);
    let rows: Value = serde_json::from_str(&out).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["case"], "Gather-8 'gather'");
    assert_eq!(rows[0]["op"], "Gather(axis=1, batch_dims=0)");
    assert_eq!(rows[0]["types"], "f16/i32");
    assert_eq!(rows[0]["output_shape"], serde_json::json!([4, 3]));
    assert_eq!(rows[1]["case"], "GatherElements-6 'elements'");
    assert!(rows.iter().all(|r| r["agree"] == true));

    // Without the .bin file the axis is unknown: say so, or take --axis.
    fs::remove_file(dir.path().join("model.bin")).unwrap();
    let line = usage_error(&["layer", xml.to_str().unwrap()]);
    assert!(line.contains(".bin") && line.contains("--axis"), "{line}");
    ok(&["layer", xml.to_str().unwrap(), "--axis", "1"]);
}

/// Only the axis constant's 8 bytes are read from the weights, so a 4 GiB `.bin` is no
/// obstacle in 1 GB of address space; an offset past its end (or past 2^64) is an error.
#[test]
fn layer_reads_only_the_axis_constant_from_the_bin_file() {
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("model.xml");
    let xml = xml.to_str().unwrap();
    let bin = dir.path().join("model.bin");
    let mut weights = vec![0xAA; 8];
    weights.extend_from_slice(&1i64.to_le_bytes());
    fs::write(&bin, weights).unwrap();
    let offsets = [
        ("16", "16"),
        ("18446744073709551615", "18446744073709551615"),
    ];
    for (offset, shown) in offsets {
        let text = model_xml("<dim>4</dim><dim>3</dim>")
            .replace("offset=\"8\"", &format!("offset=\"{offset}\""));
        fs::write(xml, text).unwrap();
        let line = usage_error(&["layer", xml]);
        assert!(
            line.contains(&format!(
                "the .bin file is too short for the axis Const (layer 2) at offset {shown}"
            )),
            "{line}"
        );
    }
    #[cfg(target_os = "linux")]
    {
        fs::write(xml, model_xml("<dim>4</dim><dim>3</dim>")).unwrap();
        fs::OpenOptions::new()
            .append(true)
            .open(&bin)
            .unwrap()
            .set_len(4 << 30)
            .unwrap();
        let out = under_memory_limit(1_000_000, &["layer", xml, "--json"]);
        assert!(out.status.success(), "{out:?}");
        let rows: Value = serde_json::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
        assert_eq!(rows[0]["op"], "Gather(axis=1, batch_dims=0)");
    }
}

#[test]
fn layer_reports_a_declared_output_that_differs() {
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("model.xml");
    fs::write(&xml, model_xml("<dim>4</dim><dim>4</dim>")).unwrap();
    let line = usage_error(&["layer", xml.to_str().unwrap(), "--axis", "1"]);
    assert!(
        line.contains("declares output dims [4,4]") && line.contains("gives [4,3]"),
        "{line}"
    );
}

#[test]
fn layer_rejects_unusable_files() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let no_axis = write(
        "a.xml",
        r#"<layer id="7" type="Gather" version="opset8"><input>
             <port id="0"><dim>3</dim></port><port id="1"><dim>2</dim></port><port id="2"/>
           </input></layer>"#,
    );
    let line = usage_error(&["layer", &no_axis]);
    assert!(line.contains("line 1") && line.contains("--axis"), "{line}");
    let relu = write("b.xml", r#"<layer id="1" type="Relu" version="opset1"/>"#);
    assert!(usage_error(&["layer", &relu]).contains("no Gather, GatherND or GatherElements layer"));
    let broken = write("c.xml", "<layer id=\"1\" type=\"GatherND\"><input></layer>");
    assert!(usage_error(&["layer", &broken]).contains("not well-formed XML"));
    let dynamic = write(
        "d.xml",
        r#"<layer id="1" type="GatherND" version="opset8"><input>
             <port id="0"><dim>-1</dim></port><port id="1"><dim>2</dim><dim>1</dim></port>
           </input></layer>"#,
    );
    assert!(usage_error(&["layer", &dynamic]).contains("only static"));
    let missing = dir.path().join("nope.xml");
    assert!(usage_error(&["layer", missing.to_str().unwrap()]).contains("cannot read"));
}

// ---------------------------------------------------------------------------------------------
// help

#[test]
fn every_subcommand_has_help_with_an_example() {
    for sub in ["demo", "run", "explain", "bench", "layer", "aot"] {
        let out = ok(&[sub, "--help"]);
        assert!(out.contains("Example"), "{sub}: {out}");
    }
    let out = ok(&["--help"]);
    for sub in ["demo", "run", "explain", "bench", "layer", "aot"] {
        assert!(out.contains(sub), "{out}");
    }
    let out = gather_jit().output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "no subcommand: help and status 2"
    );
}

/// A band of 64 MiB (a 4096-row table banded with a 64 MiB scratch budget) where the address
/// space has room for the 384 MiB of buffers and about 38 MB of the program, but not for the
/// band too: the kernel's per-thread scratch cannot grow, which is an error, not an abort
/// inside the call. The margins are tens of megabytes either way, so that the size of the
/// program (debug or optimised build) does not decide which allocation fails. (Not with the
/// `model` feature: tract's code takes a margin of its own.)
#[cfg(all(target_os = "linux", not(feature = "model")))]
#[test]
fn a_band_scratch_that_cannot_grow_is_an_error() {
    let args = [
        "bench",
        "--op",
        "gather-elements",
        "--data-shape",
        "4096x8192",
        "--indices-shape",
        "2048x8192",
        "--index-type",
        "i32",
        "--time-ms",
        "5",
        "--band-scratch-kib",
        "65536",
        "--no-huge-pages",
    ];
    let line = one_error_line(&args, under_memory_limit(432_000, &args));
    assert_eq!(
        line,
        "error: could not allocate 67108864 bytes for a band's scratch buffer"
    );
}

/// `cli/tests/data/`, made by `make_tiny_model.py` there.
fn test_data(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    path.to_str().expect("utf-8 path").to_string()
}

/// `layer` given an ONNX file says to use `model`.
#[test]
fn layer_points_an_onnx_file_to_model() {
    let line = usage_error(&["layer", &test_data("tiny.onnx")]);
    assert!(line.contains("gather-jit model"), "{line}");
}

/// The tiny model through tract with JIT gathers: the token Gather and the GatherND of one
/// position per sequence, with negative indices counted from the end as ONNX says. The
/// expected rows are read off the 10x4 table `0..40`: ids [1, 2, -1] and [0, 5, 9] pick rows
/// 1, 2, 9 and 0, 5, 9; positions -1 and 1 then pick rows 9 and 5.
#[cfg(feature = "model")]
#[test]
fn model_runs_an_onnx_model_with_jit_gathers_and_writes_its_outputs() {
    let dir = TempDir::new().expect("temp dir");
    let out_dir = dir.path().join("out");
    let (ids, last) = (
        format!("ids={}", test_data("tiny_ids.npy")),
        format!("last={}", test_data("tiny_last.npy")),
    );
    let out_arg = out_dir.to_str().expect("utf-8").to_string();
    let text = ok(&[
        "model",
        &test_data("tiny.onnx"),
        "--input",
        &ids,
        "--input",
        &last,
        "-o",
        &out_arg,
    ]);
    assert!(text.contains("JitGatherND (gather-jit"), "{text}");
    let file = std::fs::read(out_dir.join("picked.npy")).expect("picked.npy written");
    let values: Vec<f32> = file[file.len() - 32..]
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes(c.try_into().expect("4 bytes")))
        .collect();
    assert_eq!(values, [36.0, 37.0, 38.0, 39.0, 20.0, 21.0, 22.0, 23.0]);
}

/// `--native` runs tract's own GatherND, which panics on the negative position: one error
/// line, no crash; `--compare` on positive positions finds both ways bit-identical.
#[cfg(feature = "model")]
#[test]
fn model_native_panics_are_errors_and_compare_agrees_on_valid_inputs() {
    let model = test_data("tiny.onnx");
    let ids = format!("ids={}", test_data("tiny_ids.npy"));
    let last = format!("last={}", test_data("tiny_last.npy"));
    let line = usage_error(&[
        "model", &model, "--input", &ids, "--input", &last, "--native",
    ]);
    assert!(line.contains("tract's own ops panicked"), "{line}");
    let positive = format!("last={}", test_data("tiny_last_positive.npy"));
    let json = ok(&[
        "model",
        &model,
        "--input",
        &ids,
        "--input",
        &positive,
        "--compare",
        "--json",
    ]);
    let report: Value = serde_json::from_str(&json).expect("json");
    assert_eq!(report["compare"], "bit-identical", "{json}");
}

/// Bad input: a model tract cannot read, an input the model lacks, a wrong shape, a file
/// that is not .npy, a symbolic dim neither a file nor --dim sets: one error line each and no
/// output written.
#[cfg(feature = "model")]
#[test]
fn model_input_errors_are_one_line_and_write_nothing() {
    let dir = TempDir::new().expect("temp dir");
    let out_dir = dir.path().join("out");
    let out_arg = out_dir.to_str().expect("utf-8").to_string();
    let model = test_data("tiny.onnx");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![test_data("tiny_ids.npy")],
            "tract cannot read this model",
        ),
        (
            vec![
                model.clone(),
                "--input".into(),
                format!("idz={}", test_data("tiny_ids.npy")),
            ],
            "has no input idz",
        ),
        (
            vec![
                model.clone(),
                "--input".into(),
                format!("ids={}", test_data("tiny_last.npy")),
                "--dim".into(),
                "batch=2".into(),
            ],
            "is i64 [2, 1], the model declares i64 [batch, 3]",
        ),
        (
            vec![
                model.clone(),
                "--input".into(),
                format!("ids={}", test_data("tiny.onnx")),
                "--dim".into(),
                "batch=2".into(),
            ],
            "not an .npy file",
        ),
        (
            vec![model.clone()],
            "dim batch is symbolic: give --dim batch=N",
        ),
        (
            vec![model.clone(), "--dim".into(), "bacth=2".into()],
            "the model has no symbolic dim bacth (its symbols: batch)",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["model".to_string()];
        all.extend(args);
        all.extend(["-o".to_string(), out_arg.clone()]);
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let line = usage_error(&all);
        assert!(line.contains(expected), "{all:?}: {line}");
        assert!(!out_dir.exists(), "{all:?} wrote {}", out_dir.display());
    }
}

/// Every model the tract integration is tested with (the ONNX node tests of the gathers and
/// scatters and the multi-op models) runs through `gather-jit model` on random inputs, its
/// gathers and scatters by the JIT, and writes one .npy per output.
#[cfg(feature = "model")]
#[test]
fn model_runs_every_committed_onnx_model() {
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../integrations/tract/tests/models");
    let mut ran = 0;
    for entry in std::fs::read_dir(&models).expect("the models directory") {
        let dir = entry.expect("an entry").path();
        let model = dir.join("model.onnx");
        let out = TempDir::new().expect("temp dir");
        let json = ok(&[
            "model",
            model.to_str().expect("utf-8"),
            "--json",
            "-o",
            out.path().to_str().expect("utf-8"),
        ]);
        let report: Value = serde_json::from_str(&json).expect("json");
        let gathers = report["gathers"].as_array().expect("gathers");
        let scatters = report["scatters"].as_array().expect("scatters");
        assert!(
            (gathers.iter().chain(scatters))
                .any(|g| g["op"].as_str().is_some_and(|op| op.contains("gather-jit"))),
            "{}: no JIT gather or scatter in {json}",
            dir.display()
        );
        let outputs = report["outputs"].as_array().expect("outputs").len();
        let written = std::fs::read_dir(out.path()).expect("output dir").count();
        assert_eq!(written, outputs, "{}", dir.display());
        ran += 1;
    }
    assert!(ran >= 33, "only {ran} models under {}", models.display());
}

// ---------------------------------------------------------------------------------------------
// the README's two commands (issue 25, item 1)

/// The README's quick start builds once: its `cargo run` and `cargo test` name one profile,
/// which Cargo.toml defines with debug assertions on (the tests rely on them for Cranelift's
/// verifier), and CI runs that very test command.
#[test]
fn the_readme_commands_share_one_profile_that_keeps_debug_assertions() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let read = |name: &str| fs::read_to_string(root.join(name)).expect("a repository file");
    let readme = read("README.md");
    let commands: Vec<&str> = readme
        .lines()
        .skip_while(|l| *l != "```sh")
        .skip(1)
        .take_while(|l| *l != "```")
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .collect();
    assert_eq!(commands.len(), 2, "{commands:?}");
    let profile = |command: &str| {
        let words: Vec<&str> = command.split_whitespace().collect();
        let at = words.iter().position(|w| *w == "--profile");
        at.and_then(|at| words.get(at + 1)).map(|p| p.to_string())
    };
    assert!(commands[0].starts_with("cargo run "), "{commands:?}");
    assert!(commands[1].starts_with("cargo test "), "{commands:?}");
    let name = profile(commands[0]).expect("the run command names a profile");
    assert_eq!(profile(commands[1]).as_deref(), Some(name.as_str()));

    let manifest = read("Cargo.toml");
    let section: Vec<&str> = manifest
        .lines()
        .skip_while(|l| *l != format!("[profile.{name}]"))
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .map(str::trim)
        .collect();
    for setting in [
        "inherits = \"release\"",
        "debug-assertions = true",
        "overflow-checks = true",
    ] {
        assert!(section.contains(&setting), "[profile.{name}]: {section:?}");
    }
    let ci = read(".ci/run");
    assert!(
        ci.lines().any(|l| l.trim() == commands[1]),
        ".ci/run does not run `{}`",
        commands[1]
    );
}

// ---------------------------------------------------------------------------------------------
// progress (issue 25, item 2)

/// `bench` draws progress on stderr when it is a terminal (here script(1)'s pseudo-terminal,
/// with stdout sent to a file so that the terminal carries stderr alone) and nothing when it
/// is a pipe; the results go to stdout either way.
#[cfg(target_os = "linux")]
#[test]
fn progress_shows_on_a_terminal_and_nothing_on_a_pipe() {
    let args = [
        "bench",
        "--op",
        "gather",
        "--data-shape",
        "256x64",
        "--indices-shape",
        "32",
        "--time-ms",
        "30",
    ];
    let piped = gather_jit().args(args).output().expect("the binary runs");
    assert!(piped.status.success(), "{piped:?}");
    assert!(piped.stderr.is_empty(), "{piped:?}");
    assert!(String::from_utf8_lossy(&piped.stdout).contains("per call"));

    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("stdout.txt");
    let command = format!(
        "exec '{}' {} > '{}'",
        env!("CARGO_BIN_EXE_gather-jit"),
        args.join(" "),
        results.display()
    );
    let terminal = Command::new("script")
        .args(["--quiet", "--return", "--command", &command, "/dev/null"])
        .env("TERM", "xterm")
        .stdin(Stdio::null())
        .output()
        .expect("script(1) of util-linux runs");
    assert!(terminal.status.success(), "{terminal:?}");
    let screen = String::from_utf8_lossy(&terminal.stdout);
    assert!(
        screen.contains("bench [") && screen.contains("/6"),
        "no progress on the terminal: {screen:?}"
    );
    assert!(!screen.contains("per call"), "{screen:?}");
    assert_eq!(
        screen.contains("note: this build has debug assertions on"),
        cfg!(debug_assertions),
        "{screen:?}"
    );
    let results = fs::read_to_string(results).unwrap();
    assert!(results.contains("per call"), "{results}");
}

// ---------------------------------------------------------------------------------------------
// readable output (issue 25, item 3)

/// A layer file whose long names make the table wider than 100 columns: by default columns are
/// left out (and named) until it fits, `--wide` prints them all.
#[test]
fn layer_table_fits_100_columns_and_wide_shows_every_column() {
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("long.xml");
    let name = "encoder.layer.11.attention.self.relative_position_gather";
    fs::write(
        &xml,
        format!(
            r#"<layer id="1" name="{name}" type="GatherND" version="opset8">
  <data batch_dims="1"/>
  <input>
    <port id="0"><dim>4</dim><dim>100</dim><dim>10</dim><dim>12</dim></port>
    <port id="1"><dim>4</dim><dim>20</dim><dim>1</dim></port>
  </input>
  <output><port id="2"><dim>4</dim><dim>20</dim><dim>10</dim><dim>12</dim></port></output>
</layer>"#
        ),
    )
    .unwrap();
    let xml = xml.to_str().unwrap();
    let narrow = ok(&["layer", xml]);
    for line in narrow.lines() {
        assert!(line.chars().count() <= 100, "{line}");
    }
    assert!(narrow.contains("left out to fit 100 columns"), "{narrow}");
    assert!(!narrow.lines().next().unwrap().contains(" op "), "{narrow}");
    let wide = ok(&["layer", xml, "--wide"]);
    let header: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "case", "op", "data", "indices", "output", "types", "compile", "jit", "interp", "GB/s",
            "agree"
        ]
    );
    assert!(
        wide.lines()
            .nth(2)
            .unwrap()
            .starts_with(&format!("GatherND-8 '{name}'"))
    );
    assert!(!wide.contains("left out"), "{wide}");
    assert!(wide.lines().any(|l| l.chars().count() > 100), "{wide}");
}

/// `run --json` says what it wrote (file, type, shape, op) and how long each stage took.
#[test]
fn run_json_says_what_it_wrote_and_how_long_it_took() {
    let dir = dir_with_data();
    let indices = write_indices(&dir, "indices.npy", "<i8", &[3], &[1, 0, 1]);
    let out = path(&dir, "out.npy");
    let json = ok(&[
        "run",
        "--op",
        "gather",
        &path(&dir, "data.npy"),
        &indices,
        "-o",
        &out,
        "--check",
        "--json",
    ]);
    let report: Value = serde_json::from_str(&json).expect("one JSON object");
    assert_eq!(report["wrote"], out.as_str());
    assert!(report["array"].is_null(), "{report}");
    assert_eq!(report["dtype"], "f32");
    assert_eq!(report["shape"], serde_json::json!([3, 2]));
    assert_eq!(report["bytes"], 24);
    assert_eq!(report["op"], "Gather(axis=0, batch_dims=0)");
    assert_eq!(report["checked"], true);
    for stage in ["read_ns", "compile_ns", "gather_ns", "check_ns", "write_ns"] {
        let ns = report[stage].as_u64().unwrap_or(0);
        assert!(
            ns > 0 && ns <= report["total_ns"].as_u64().unwrap(),
            "{stage}: {report}"
        );
    }
    assert_eq!(
        read_npy(Path::new(&out)).1,
        le(&[3.0f32, 4.0, 1.0, 2.0, 3.0, 4.0], f32::to_le_bytes)
    );
}

// ---------------------------------------------------------------------------------------------
// familiar spellings (issue 25, item 4)

/// The output shape and types `explain --json` reports for `args`.
fn explained(args: &[&str]) -> (Value, Value, Value) {
    let json: Value =
        serde_json::from_str(&ok(&[&["explain", "--json"], args].concat())).expect("JSON");
    (
        json["output_shape"].clone(),
        json["dtype"].clone(),
        json["index_type"].clone(),
    )
}

/// numpy's and ONNX's shapes (`2,3,4`, `[2, 3, 4]`, `(3,)`), numpy's, ONNX's and OpenVINO's type
/// names, and negative numbers after any numeric flag; errors name the accepted forms.
#[test]
fn numpy_onnx_and_openvino_spellings_are_accepted() {
    let ours = explained(&[
        "--op",
        "gather",
        "--axis",
        "-1",
        "--data-shape",
        "2x3x4",
        "--indices-shape",
        "3",
        "--dtype",
        "bf16",
        "--index-type",
        "i32",
    ]);
    assert_eq!(
        ours,
        (serde_json::json!([2, 3, 3]), "bf16".into(), "i32".into())
    );
    for (data, indices, dtype, index_type) in [
        ("2,3,4", "3", "bfloat16", "int32"),
        ("[2,3,4]", "(3,)", "BFLOAT16", "INT32"),
        ("[2, 3, 4]", "[3]", "BF16", "I32"),
    ] {
        let theirs = explained(&[
            "--op",
            "gather",
            "--axis=-1",
            "--data-shape",
            data,
            "--indices-shape",
            indices,
            "--dtype",
            dtype,
            "--index-type",
            index_type,
        ]);
        assert_eq!(theirs, ours, "{data} {indices} {dtype} {index_type}");
    }
    for (dtype, name) in [
        ("float32", "f32"),
        ("float16", "f16"),
        ("int64", "i64"),
        ("bool_", "bool"),
        ("FP32", "f32"),
        ("double", "f64"),
    ] {
        let (_, got, _) = explained(&[
            "--op",
            "gather",
            "--data-shape",
            "4",
            "--indices-shape",
            "[]",
            "--dtype",
            dtype,
        ]);
        assert_eq!(got, name, "{dtype}");
    }

    // Negative or malformed numbers are the flag's value, reported as such.
    let signature = [
        "--op",
        "gather",
        "--data-shape",
        "2x3",
        "--indices-shape",
        "1",
    ];
    for (flag, expected) in [
        (
            &["--axis=-1x"][..],
            "invalid value '-1x' for '--axis <AXIS>': expected an integer",
        ),
        (
            &["--axis", "-1x"],
            "invalid value '-1x' for '--axis <AXIS>': expected an integer",
        ),
        (
            &["--batch-dims", "-"],
            "invalid value '-' for '--batch-dims <BATCH_DIMS>'",
        ),
    ] {
        let line = usage_error(&[&["explain"], &signature[..], flag].concat());
        assert!(line.contains(expected), "{flag:?}: {line}");
    }
    let line = usage_error(&["demo", "--seed", "-1"]);
    assert!(
        line.contains("invalid value '-1' for '--seed <SEED>': expected a whole number"),
        "{line}"
    );
    let line = usage_error(&[&["bench"], &signature[..], &["--threads", "-2"]].concat());
    assert!(line.contains("invalid value '-2' for '--threads"), "{line}");
    let line = usage_error(&[&["explain"], &signature[..], &["--dtype", "float"]].concat());
    assert!(line.contains("f32 (float32) or f64 (float64)"), "{line}");
    let line = usage_error(&[&["explain"], &signature[..], &["--index-type", "float32"]].concat());
    assert!(
        line.contains("expected an integer index type: i8 u8"),
        "{line}"
    );
}

// ---------------------------------------------------------------------------------------------
// .npz (issue 25, item 5)

/// `cli/tests/data/NAME` copied into `dir` (tests never write beside the fixtures).
fn copy_fixture(dir: &TempDir, name: &str) -> String {
    let to = path(dir, name);
    fs::copy(test_data(name), &to).expect("fixture copied");
    to
}

/// The header text and data bytes of array `name` in the `.npz` archive at `path`, read with
/// the zip crate (not the CLI's reader).
fn read_npz_member(path: &str, name: &str) -> (String, Vec<u8>) {
    let mut archive =
        zip::ZipArchive::new(fs::File::open(path).expect("archive written")).expect("a zip");
    let mut member = archive.by_name(&format!("{name}.npy")).expect("the member");
    assert_eq!(member.compression(), zip::CompressionMethod::Stored);
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut member, &mut bytes).unwrap();
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = String::from_utf8(bytes[10..10 + len].to_vec()).unwrap();
    (header, bytes[10 + len..].to_vec())
}

/// Archives numpy wrote (`cli/tests/data/make_npz.py`): one holding `data` and `indices`
/// (savez), arrays of a compressed one by name (savez_compressed, Fortran order), `.npz`
/// outputs that numpy's layout reads; and the errors, each naming the archive's arrays.
#[test]
fn run_reads_and_writes_npz_archives() {
    let dir = tempfile::tempdir().unwrap();
    let pair = copy_fixture(&dir, "pair.npz");
    let compressed = copy_fixture(&dir, "pair_compressed.npz");

    // One archive with `data` ([[1, 2], [3, 4]], big-endian f32) and `indices` ([1, 0, 1]).
    let out = path(&dir, "out.npz");
    let stdout = ok(&["run", "--op", "gather", &pair, "-o", &out, "--check"]);
    assert!(
        stdout.starts_with(&format!("wrote {out}: f32 [3, 2]")),
        "{stdout}"
    );
    let (header, data) = read_npz_member(&out, "output");
    assert!(
        header.contains("'descr': '<f4'") && header.contains("'shape': (3, 2)"),
        "{header}"
    );
    assert_eq!(
        data,
        le(&[3.0f32, 4.0, 1.0, 2.0, 3.0, 4.0], f32::to_le_bytes)
    );

    // Arrays by name, deflated; table [[0, 1, 2], [3, 4, 5]] (i16, Fortran order), ids [2, -1].
    let named = path(&dir, "named.npz");
    let json = ok(&[
        "run",
        "--op",
        "gather",
        "--axis",
        "-1",
        &format!("{compressed}:table"),
        &format!("{compressed}:ids"),
        "-o",
        &format!("{named}:rows"),
        "--json",
    ]);
    let report: Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(
        (&report["wrote"], &report["array"]),
        (&named.as_str().into(), &"rows".into())
    );
    let (header, data) = read_npz_member(&named, "rows");
    assert!(header.contains("'descr': '<i2'"), "{header}");
    assert_eq!(data, le(&[2i16, 2, 5, 5], i16::to_le_bytes));
    // Both arrays named, from one archive.
    let both = path(&dir, "both.npy");
    let (data, indices) = (format!("{pair}:data"), format!("{pair}:indices"));
    ok(&["run", "--op", "gather", &data, &indices, "-o", &both]);
    assert_eq!(
        read_npy(Path::new(&both)).1,
        le(&[3.0f32, 4.0, 1.0, 2.0, 3.0, 4.0], f32::to_le_bytes)
    );
    // The same into .npy, the ids from an .npy file.
    let ids = write_indices(&dir, "ids.npy", "<i8", &[1], &[0]);
    let npy_out = path(&dir, "rows.npy");
    ok(&[
        "run",
        "--op",
        "gather",
        &format!("{compressed}:table"),
        &ids,
        "-o",
        &npy_out,
    ]);
    assert_eq!(
        read_npy(Path::new(&npy_out)).1,
        le(&[0i16, 1, 2], i16::to_le_bytes)
    );

    let before = names(&dir);
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec![compressed.clone()],
            format!(
                "{compressed} alone must hold arrays named data and indices; it has no data or indices (it has: table, ids, extra)"
            ),
        ),
        (
            vec![compressed.clone(), ids.clone()],
            format!(
                "{compressed} holds 3 arrays (table, ids, extra): name one as {compressed}:NAME"
            ),
        ),
        (
            vec![format!("{pair}:nope"), ids.clone()],
            format!("{pair} has no array 'nope' (it has: data, indices)"),
        ),
        (
            vec![ids.clone()],
            "no indices: give DATA and INDICES".to_string(),
        ),
        (
            vec![pair.clone(), "-o".into(), pair.clone()],
            "is the same file as the data input".to_string(),
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["run".to_string(), "--op".into(), "gather".into()];
        all.extend(args);
        if !all.contains(&"-o".to_string()) {
            all.extend(["-o".to_string(), path(&dir, "never.npz")]);
        }
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let line = usage_error(&all);
        assert!(line.contains(&expected), "{all:?}: {line}");
        assert_eq!(names(&dir), before, "{all:?} wrote something");
    }
    assert_eq!(
        fs::read(&pair).unwrap(),
        fs::read(test_data("pair.npz")).unwrap()
    );
    let not_zip = path(&dir, "text.npz");
    fs::write(&not_zip, "not a zip").unwrap();
    let line = usage_error(&[
        "run",
        "--op",
        "gather",
        &not_zip,
        "-o",
        &path(&dir, "x.npy"),
    ]);
    assert!(line.contains("not an .npz archive"), "{line}");
}

// ---------------------------------------------------------------------------------------------
// internal names (issue 25, item 6)

/// A malformed XML file is reported by the file's name and a position in it, never by the
/// element the CLI wraps the text in, with columns on line 1 counted from the file's own start.
#[test]
fn layer_xml_errors_name_the_file_and_position_only() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "<layer id=\"1\" type=\"GatherND\">\n  <input>\n  </input>\n",
            "not well-formed XML at the end of the file (line 4, column 1): <layer> is not closed before the end of the file",
        ),
        (
            "<layer id=\"1\" id=\"2\" type=\"GatherND\"/>",
            "not well-formed XML at line 1, column 15: attribute 'id' is already defined",
        ),
        (
            "<layer id=\"1\" type=\"Relu\"/>\n</layer>\n",
            "not well-formed XML at line 2, column 1: </layer> closes no open element",
        ),
        (
            "<layer id=\"1\" type=\"GatherND\"><input></layer>",
            "not well-formed XML at line 1, column 38: expected 'input' tag, not 'layer'",
        ),
    ];
    for (i, (text, expected)) in cases.into_iter().enumerate() {
        let file = dir.path().join(format!("bad{i}.xml"));
        fs::write(&file, text).unwrap();
        let file = file.to_str().unwrap();
        let line = usage_error(&["layer", file]);
        assert_eq!(line, format!("error: {file}: {expected}"), "{text:?}");
        assert!(!line.contains("gather-jit-file"), "{line}");
    }
}

/// A 4-bit table of 3 rows of 32 values in blocks of 16: value (r, c) = (q - zp) * scale with
/// q = (r + c) % 16, scale (r, b) = 0.5 * (r + 1) + b, zero point (r, b) = 8 - b (two blocks a
/// row, packed in one byte). Returns the directory and the expected value of (r, c).
fn quantized_table() -> (TempDir, impl Fn(usize, usize) -> f32) {
    let dir = tempfile::tempdir().unwrap();
    let q = |r: usize, c: usize| ((r + c) % 16) as u8;
    let mut data = Vec::new();
    for r in 0..3 {
        for byte in 0..16 {
            data.push(q(r, 2 * byte) | (q(r, 2 * byte + 1) << 4));
        }
    }
    fs::write(
        dir.path().join("data.npy"),
        npy("|u1", false, &[3, 16], &data),
    )
    .unwrap();
    let scale = |r: usize, b: usize| 0.5 * (r as f32 + 1.0) + b as f32;
    let scales: Vec<f32> = (0..3).flat_map(|r| [scale(r, 0), scale(r, 1)]).collect();
    fs::write(
        dir.path().join("scales.npy"),
        npy("<f4", false, &[3, 2], &le(&scales, f32::to_le_bytes)),
    )
    .unwrap();
    // Block 0's zero point in the low nibble (8), block 1's in the high one (7).
    fs::write(
        dir.path().join("zp.npy"),
        npy("|u1", false, &[3, 1], &[0x78; 3]),
    )
    .unwrap();
    let expected = move |r: usize, c: usize| {
        let b = c / 16;
        (f32::from(q(r, c)) - (8 - b) as f32) * scale(r, b)
    };
    (dir, expected)
}

#[test]
fn run_gather_block_quantized_dequantizes_the_rows() {
    let (dir, expected) = quantized_table();
    let indices = write_indices(&dir, "ids.npy", "<i8", &[2], &[2, -3]);
    let args = [
        "run",
        "--op",
        "gather-block-quantized",
        "--bits",
        "4",
        "--block-size",
        "16",
        &path(&dir, "data.npy"),
        &indices,
        &path(&dir, "scales.npy"),
        &path(&dir, "zp.npy"),
        "-o",
        &path(&dir, "out.npy"),
        "--check",
    ];
    let out = ok(&args);
    assert!(out.starts_with("wrote "), "{out}");
    let (header, bytes) = read_npy(&dir.path().join("out.npy"));
    assert!(
        header.contains("'<f4'") && header.contains("(2, 32)"),
        "{header}"
    );
    let want: Vec<f32> = [2, 0]
        .iter()
        .flat_map(|&r| (0..32).map(move |c| (r, c)))
        .map(|(r, c)| expected(r, c))
        .collect();
    assert_eq!(bytes, le(&want, f32::to_le_bytes));

    // Without the zero points: 8 for every block.
    let args = [
        "run",
        "--op",
        "gather-block-quantized",
        "--bits",
        "4",
        "--block-size",
        "16",
        &path(&dir, "data.npy"),
        &indices,
        &path(&dir, "scales.npy"),
        "-o",
        &path(&dir, "plain.npy"),
        "--json",
    ];
    let json: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
    assert_eq!(json["shape"], serde_json::json!([2, 32]));
    let (_, bytes) = read_npy(&dir.path().join("plain.npy"));
    let first = f32::from_le_bytes(bytes[..4].try_into().unwrap());
    assert_eq!(
        first,
        (2.0 - 8.0) * 1.5,
        "row 2, column 0: q 2, zero point 8, scale 1.5"
    );
}

#[test]
fn run_gather_gguf_reads_q8_0_blocks() {
    let dir = tempfile::tempdir().unwrap();
    // Two rows of one Q8_0 block: d = 0.5 and -2 (f16, little-endian), q = j - 16 and 16 - j.
    let mut data = Vec::new();
    for (d, sign) in [(0x3800u16, 1i32), (0xc000, -1)] {
        data.extend_from_slice(&d.to_le_bytes());
        data.extend((0..32).map(|j| (sign * (j - 16)) as i8 as u8));
    }
    fs::write(
        dir.path().join("table.npy"),
        npy("|u1", false, &[2, 34], &data),
    )
    .unwrap();
    let indices = write_indices(&dir, "ids.npy", "<i8", &[1, 2], &[1, 0]);
    let args = [
        "run",
        "--op",
        "gather-gguf",
        "--format",
        "q8_0",
        &path(&dir, "table.npy"),
        &indices,
        "-o",
        &path(&dir, "rows.npy"),
        "--check",
    ];
    ok(&args);
    let (header, bytes) = read_npy(&dir.path().join("rows.npy"));
    assert!(header.contains("(1, 2, 32)"), "{header}");
    let row1: Vec<f32> = (0..32).map(|j| (16 - j) as f32 * -2.0).collect();
    let row0: Vec<f32> = (0..32).map(|j| (j - 16) as f32 * 0.5).collect();
    assert_eq!(bytes, le(&[row1, row0].concat(), f32::to_le_bytes));
}

#[test]
fn quantized_errors_are_one_line_and_write_nothing() {
    let (dir, _) = quantized_table();
    let indices = write_indices(&dir, "ids.npy", "<i8", &[1], &[3]);
    let data = path(&dir, "data.npy");
    let scales = path(&dir, "scales.npy");
    let out = path(&dir, "out.npy");
    let run = |extra: &[&str], files: &[&str]| {
        let mut args = vec!["run", "--op", "gather-block-quantized"];
        args.extend_from_slice(extra);
        args.extend_from_slice(files);
        args.extend_from_slice(&["-o", &out]);
        usage_error(&args)
    };
    let good = ["--bits", "4", "--block-size", "16"];
    assert_eq!(
        run(&good, &[&data, &indices, &scales]),
        "error: GatherBlockQuantized: index 3 at position [0] of indices is out of range for data dim 0 of size 3"
    );
    let ok_indices = write_indices(&dir, "ok.npy", "<i8", &[1], &[1]);
    assert_eq!(
        run(
            &["--bits", "4", "--block-size", "24"],
            &[&data, &ok_indices, &scales]
        ),
        "error: GatherBlockQuantized: block_size must be a power of two of at least 16, not 24"
    );
    assert_eq!(
        run(
            &["--bits", "4", "--block-size", "32"],
            &[&data, &ok_indices, &scales]
        ),
        format!("error: {scales}: scales of shape [3, 2] do not fit the data: expected [3, 1]")
    );
    assert_eq!(
        run(
            &["--bits", "3", "--block-size", "16"],
            &[&data, &ok_indices, &scales]
        ),
        "error: GatherBlockQuantized: bits must be 4 or 8, not 3"
    );
    assert_eq!(
        run(&good, &[&data, &ok_indices]),
        "error: SCALES is required with --op gather-block-quantized"
    );
    assert_eq!(
        run(&["--block-size", "16"], &[&data, &ok_indices, &scales]),
        "error: --bits is required with --op gather-block-quantized (4 or 8)"
    );
    assert!(
        run(
            &["--bits", "4", "--block-size", "16", "--axis", "1"],
            &[&data, &ok_indices, &scales]
        )
        .contains("--axis does not apply to --op gather-block-quantized")
    );
    // A truncated GGUF row: 33 bytes is not whole 34-byte Q8_0 blocks.
    fs::write(
        dir.path().join("short.npy"),
        npy("|u1", false, &[2, 33], &[0; 66]),
    )
    .unwrap();
    let short = path(&dir, "short.npy");
    let line = usage_error(&[
        "run",
        "--op",
        "gather-gguf",
        "--format",
        "q8_0",
        &short,
        &ok_indices,
        "-o",
        &out,
    ]);
    assert!(line.contains("whole q8_0 blocks (34 bytes each)"), "{line}");
    let line = usage_error(&[
        "run",
        "--op",
        "gather-gguf",
        "--format",
        "q5_1",
        &short,
        &ok_indices,
        "-o",
        &out,
    ]);
    assert!(line.contains("q4_0 or q8_0"), "{line}");
    // Scales given to an op without them.
    let line = usage_error(&[
        "run",
        "--op",
        "gather",
        &data,
        &ok_indices,
        &scales,
        "-o",
        &out,
    ]);
    assert!(line.contains("gather-block-quantized only"), "{line}");
    assert!(!dir.path().join("out.npy").exists());
}

#[test]
fn explain_and_bench_take_the_quantized_ops() {
    let q1 = [
        "--op",
        "gather-block-quantized",
        "--bits",
        "4",
        "--block-size",
        "32",
        "--data-shape",
        "64x4096",
        "--indices-shape",
        "1x4",
    ];
    let text = ok(&[&["explain"], &q1[..]].concat());
    // The library's explanation (QuantizedKernel::explain), then the code, as for every op.
    assert!(text.contains("data:          [64, 2048] bytes"), "{text}");
    assert!(text.contains("scales:        [64, 128]"), "{text}");
    assert!(text.contains("machine code:  "), "{text}");
    assert!(
        text.contains("Cranelift IR (before optimisation):"),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(
            &[&["explain"], &q1[..], &["--json", "--zero-points"]].concat()
        ))
        .unwrap();
    assert_eq!(json["zero_points_bytes_shape"], serde_json::json!([64, 64]));
    assert_eq!(json["output_shape"], serde_json::json!([1, 4, 4096]));
    let bench: serde_json::Value =
        serde_json::from_str(&ok(
            &[&["bench"], &q1[..], &["--json", "--time-ms", "5"]].concat()
        ))
        .unwrap();
    assert_eq!(bench["output_shape"], serde_json::json!([1, 4, 4096]));
    assert!(
        bench["median_ns"].as_f64().is_some_and(|ns| ns > 0.0),
        "{bench}"
    );
    assert!(
        bench["memcpy_ns"].as_f64().is_some_and(|ns| ns > 0.0),
        "{bench}"
    );
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
    ];
    let text = ok(&gguf);
    assert!(text.contains("jit / memcpy"), "{text}");
    let line = usage_error(&[
        "bench",
        "--op",
        "gather-gguf",
        "--format",
        "q4_0",
        "--data-shape",
        "64x100",
        "--indices-shape",
        "8",
    ]);
    assert_eq!(
        line,
        "error: GatherGGUF: a row of 100 values is not a whole number of 32-value q4_0 blocks"
    );
}

/// `--bench` times the whole model and each gather node, both ways, by node name.
#[cfg(feature = "model")]
#[test]
fn model_bench_times_each_gather_node_both_ways() {
    let model = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../integrations/tract/tests/models/bert_embeddings/model.onnx");
    let json = ok(&["model", model.to_str().expect("utf-8"), "--bench", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&json).expect("one JSON object");
    let nodes = report["bench"]["gather_nodes"]
        .as_array()
        .expect("gather_nodes");
    let mut names: Vec<&str> = nodes
        .iter()
        .map(|n| n["node"].as_str().expect("name"))
        .collect();
    names.sort();
    // The three embedding tables of the BERT-style model (word, position, token type).
    assert_eq!(names, ["pos", "tt", "word"], "{json}");
    for node in nodes {
        for way in ["gather_jit_ns", "tract_native_ns"] {
            assert!(node[way].as_u64().is_some_and(|ns| ns > 0), "{way}: {json}");
        }
    }
    assert!(
        report["bench"]["ratio"].as_f64().is_some_and(|r| r > 0.0),
        "{json}"
    );
}

// ---------------------------------------------------------------------------------------------
// issue 28: hostile input on the quantized ops and the .npz writer

/// Data `[1, 2^60, 0]` (no bytes), a scalar index, scales `[1, 2^56, 0]`: the output
/// `[2^60, 0]` is empty and is written at once (the kernel used to loop over the 2^60 dim).
#[cfg(target_os = "linux")]
#[test]
fn run_quantized_on_an_empty_output_returns_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let big = 1usize << 60;
    fs::write(
        dir.path().join("q.npy"),
        npy("|u1", false, &[1, big, 0], &[]),
    )
    .unwrap();
    fs::write(
        dir.path().join("i.npy"),
        npy("<i8", false, &[], &0i64.to_le_bytes()),
    )
    .unwrap();
    fs::write(
        dir.path().join("s.npy"),
        npy("<f4", false, &[1, big >> 4, 0], &[]),
    )
    .unwrap();
    let (q, i, s, out) = (
        path(&dir, "q.npy"),
        path(&dir, "i.npy"),
        path(&dir, "s.npy"),
        path(&dir, "out.npy"),
    );
    let args = [
        "timeout",
        "20",
        "sh",
        "-c",
        "ulimit -v 2000000 && exec \"$0\" \"$@\"",
        env!("CARGO_BIN_EXE_gather-jit"),
        "run",
        "--op",
        "gather-block-quantized",
        "--bits",
        "8",
        "--block-size",
        "16",
        "--check",
        &q,
        &i,
        &s,
        "-o",
        &out,
    ];
    let started = std::time::Instant::now();
    let result = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("runs");
    assert!(result.status.success(), "{result:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let (header, data) = read_npy(Path::new(&out));
    assert!(header.contains(&format!("'shape': ({big}, 0)")), "{header}");
    assert!(data.is_empty());
}

/// `run -o X.npz` on a disk that fills (here a file-size limit): one `error:` line (zip's own
/// complaint from its writer's drop used to come first), exit 2, no file left behind.
#[cfg(target_os = "linux")]
#[test]
fn run_npz_on_a_full_disk_is_one_error_line_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("d.npy"),
        npy("<f4", false, &[256, 64], &vec![0u8; 256 * 64 * 4]),
    )
    .unwrap();
    let values: Vec<i64> = (0..100).collect();
    let indices = write_indices(&dir, "i.npy", "<i8", &[100], &values);
    for out in ["out.npz", "out.npy", "named.npz:y"] {
        let target = path(&dir, out);
        let args = [
            "run",
            "--op",
            "gather",
            &path(&dir, "d.npy"),
            &indices,
            "-o",
            &target,
        ];
        // 2 GB of address space and 8 KiB of file size: the 25 KiB output cannot be written.
        // XFSZ ignored, so that the write fails with EFBIG instead of killing the process.
        let result = Command::new("sh")
            .arg("-c")
            .arg("trap '' XFSZ; ulimit -v 2000000 && ulimit -f 8 && exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_gather-jit"))
            .args(args)
            .output()
            .expect("sh runs");
        let line = one_error_line(&args, result);
        assert!(line.contains("File too large"), "{line}");
        assert_eq!(names(&dir), ["d.npy", "i.npy"], "{out}");
    }
}

/// `bench` draws random indices the index type can hold: `int8` indices into 200 rows
/// (which used to include -91) and into an empty table's zero points.
#[cfg(target_os = "linux")]
#[test]
fn bench_quantized_inputs_fit_their_types_and_empty_tables() {
    let gguf = [
        "bench",
        "--op",
        "gather-gguf",
        "--format",
        "q8_0",
        "--data-shape",
        "200x32",
        "--indices-shape",
        "64",
        "--index-type",
        "int8",
        "--time-ms",
        "5",
        "--json",
    ];
    let block = [
        "bench",
        "--op",
        "gather-block-quantized",
        "--bits",
        "4",
        "--block-size",
        "16",
        "--zero-points",
        "--data-shape",
        "0x32",
        "--gather-axis",
        "1",
        "--indices-shape",
        "3",
        "--time-ms",
        "5",
        "--json",
    ];
    for args in [&gguf[..], &block[..]] {
        let out = under_memory_limit(2_000_000, args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert!(json["median_ns"].as_f64().is_some(), "{json}");
    }
    // Along the empty dim no index is valid: said as for the other gathers.
    let along_empty: Vec<&str> = block
        .iter()
        .map(|&a| if a == "1" { "0" } else { a })
        .collect();
    let line = one_error_line(&along_empty, under_memory_limit(2_000_000, &along_empty));
    assert!(
        line.contains("cannot make valid indices: data dim 0"),
        "{line}"
    );
}
