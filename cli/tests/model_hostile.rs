//! `gather-jit model` on hostile input (issue 28): outputs that would overwrite an input, inputs
//! and dims too large for memory, tract's panics and loops in every phase, damaged model files,
//! outputs of types without bytes of their own, and a disk that fills. Whatever happens, the
//! command ends with status 0, 1 or 2, and on a failure with exactly one stderr line starting
//! `error:` and no output file.
//!
//! The models are written in code, with the tract integration's test encoder. Runs that may
//! allocate without bound go under an address-space limit (`ulimit -v`, as `cli.rs` does), and
//! every run has a deadline.

#![cfg(feature = "model")]

#[path = "common/files.rs"]
mod files;
#[path = "../../integrations/tract/tests/support/onnx.rs"]
mod onnx;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use files::{utf8, write};
use onnx::Dim::{Param, Value};
use tempfile::TempDir;

/// A run's status, stdout and stderr.
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Address space for one run, in KiB: the command needs about 100 MB; allocations of
/// terabytes fail at once.
const MEMORY_KIB: u64 = 1_000_000;

/// Runs the binary with `args` through `sh -c "SETUP && exec BINARY ARGS"` and a deadline of
/// `seconds`: a run that does not finish in time is killed (by its process id) and fails the
/// test.
#[track_caller]
fn run_in_shell(setup: &str, args: &[&str], seconds: u64) -> Run {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("{setup} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_gather-jit"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sh runs");
    let pid = child.id();
    let mut stdout = child.stdout.take().expect("stdout piped");
    let mut stderr = child.stderr.take().expect("stderr piped");
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let reader = std::thread::spawn(move || stderr.read_to_end(&mut err).map(|_| err));
        let _ = stdout.read_to_end(&mut out);
        let err = reader.join().ok().and_then(Result::ok).unwrap_or_default();
        let _ = send.send((child.wait(), out, err));
    });
    match receive.recv_timeout(Duration::from_secs(seconds)) {
        Ok((status, out, err)) => Run {
            status: status.expect("the child's status"),
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
        },
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("{args:?} did not finish in {seconds} s");
        }
    }
}

/// Runs `args` under the address-space limit.
#[track_caller]
fn run(args: &[&str]) -> Run {
    run_in_shell(&format!("ulimit -v {MEMORY_KIB}"), args, 60)
}

/// Expects status 2, exactly one stderr line starting `error: ` and nothing on stdout; returns
/// that line.
#[track_caller]
fn one_error_line(args: &[&str], run: &Run) -> String {
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert!(
        run.status.code() == Some(2) && lines.len() == 1 && lines[0].starts_with("error: "),
        "{args:?}: {}, stderr {:?}",
        run.status,
        run.stderr
    );
    assert!(run.stdout.is_empty(), "{args:?}: stdout {:?}", run.stdout);
    lines[0].to_string()
}

/// Expects success; returns stdout.
#[track_caller]
fn success(args: &[&str], run: &Run) -> String {
    assert!(
        run.status.success(),
        "{args:?}: {}, stderr {:?}",
        run.status,
        run.stderr
    );
    run.stdout.clone()
}

/// The names in `dir`, sorted (none if it does not exist).
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = match fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| {
                e.expect("an entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

/// `cli/tests/data/NAME`, made by `make_tiny_model.py` there.
fn test_data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// `Gather(x, [0])` on axis 0 of an f32 input `x` of `dims`: a model whose one input is random
/// when not given.
fn gather_first_row(dims: &[onnx::Dim]) -> Vec<u8> {
    onnx::model(
        13,
        &[onnx::node("Gather", &["x", "k"], &["y"], &[("axis", 0)])],
        &[onnx::i64_initializer("k", &[1], &[0])],
        &[onnx::value("x", onnx::elem::FLOAT, dims)],
        &[onnx::untyped("y")],
    )
}

/// Issue 28, item 4: an output named like an input file in `-o DIR` replaced that input (exit
/// 0). The same path, a hard link to an input, and the model file itself are refused before
/// the model runs, and every file stays as it was.
#[test]
fn model_refuses_to_write_an_output_over_a_file_it_reads() {
    let dir = TempDir::new().expect("temp dir");
    let ids = fs::read(test_data("tiny_ids.npy")).expect("tiny_ids.npy");
    let model = fs::read(test_data("tiny.onnx")).expect("tiny.onnx");
    let last = format!("last={}", utf8(&test_data("tiny_last_positive.npy")));
    // The tiny model's output is `picked`, so `-o od` writes od/picked.npy.
    let same = dir.path().join("same");
    fs::create_dir(&same).expect("dir");
    let input = write(&same, "picked.npy", &ids);
    let linked = dir.path().join("linked");
    fs::create_dir(&linked).expect("dir");
    let original = write(dir.path(), "ids.npy", &ids);
    fs::hard_link(&original, linked.join("picked.npy")).expect("a hard link");
    let model_dir = dir.path().join("model");
    fs::create_dir(&model_dir).expect("dir");
    let model_as_output = write(&model_dir, "picked.npy", &model);
    let tiny = test_data("tiny.onnx");
    let cases: [(&Path, &Path, &Path, &str); 3] = [
        (&tiny, &input, &same, "ids input"),
        (&tiny, &original, &linked, "ids input"),
        (
            &model_as_output,
            &test_data("tiny_ids.npy"),
            &model_dir,
            "model input",
        ),
    ];
    for (model_path, ids_path, out_dir, role) in cases {
        let ids_arg = format!("ids={}", utf8(ids_path));
        let args = [
            "model",
            utf8(model_path),
            "--input",
            &ids_arg,
            "--input",
            &last,
            "-o",
            utf8(out_dir),
        ];
        let line = one_error_line(&args, &run(&args));
        assert!(
            line.contains("is the same file as the") && line.contains(role),
            "{line}"
        );
        assert_eq!(names(out_dir), ["picked.npy"], "{args:?}");
    }
    assert_eq!(fs::read(&input).expect("input"), ids);
    assert_eq!(fs::read(&original).expect("input"), ids);
    assert_eq!(fs::read(&model_as_output).expect("model"), model);
}

/// Issue 28, item 5a: an input declared `[2^20, 2^20]` f32 and not given was allocated
/// infallibly as random values (4 TiB), and the process aborted (status 134).
#[test]
fn model_random_input_too_large_for_memory_is_an_error() {
    let dir = TempDir::new().expect("temp dir");
    let model = write(
        dir.path(),
        "m.onnx",
        &gather_first_row(&[Value(1 << 20), Value(1 << 20)]),
    );
    let args = ["model", utf8(&model)];
    let line = one_error_line(&args, &run(&args));
    assert!(
        line.contains("input x") && line.contains(&format!("{} bytes", 4u64 << 40)),
        "{line}"
    );
}

/// Issue 28, item 5b: `--dim N=-1` ended in "capacity overflow" (status 101); a dim whose
/// square overflows, and one whose tensor does not fit in memory, are errors too.
#[test]
fn model_dims_that_are_negative_overflow_or_do_not_fit_are_errors() {
    let dir = TempDir::new().expect("temp dir");
    let model = write(
        dir.path(),
        "m.onnx",
        &gather_first_row(&[Param("N"), Param("N")]),
    );
    let cases = [
        ("N=-1", "is not a dim".to_string()),
        ("N=-9223372036854775808", "is not a dim".to_string()),
        ("N=4294967296", "more bytes than fit in memory".to_string()),
        (
            "N=1048576",
            format!("could not allocate {} bytes", 4u64 << 40),
        ),
    ];
    for (dim, expected) in cases {
        let args = ["model", utf8(&model), "--dim", dim];
        let line = one_error_line(&args, &run(&args));
        assert!(line.contains(&expected), "{dim}: {line}");
    }
    let args = ["model", utf8(&model), "--dim", "N=3"];
    let out = success(&args, &run(&args));
    assert!(out.contains("output y: F32 [1, 3]"), "{out}");
}

/// `GatherND(data, [[-1]])` on constant data `[[0, 1, 2], [3, 4, 5]]`: tract folds it while
/// optimising, with its own op under `--native`, `--compare` and `--bench`.
fn folded_gather_nd() -> Vec<u8> {
    onnx::model(
        13,
        &[onnx::node("GatherND", &["data", "indices"], &["y"], &[])],
        &[
            onnx::f32_initializer("data", &[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
            onnx::i64_initializer("indices", &[1, 1], &[-1]),
        ],
        &[],
        &[onnx::untyped("y")],
    )
}

/// Issue 28, item 5c: tract's own GatherND panics on the negative index inside
/// `into_optimized`, which printed a backtrace and exited 101. The JIT's folding takes row
/// -1 as row 1; every mode that loads tract's own ops is one error line.
#[test]
fn model_folded_gather_nd_with_a_negative_index_is_one_error_line_in_every_mode() {
    let dir = TempDir::new().expect("temp dir");
    let model = write(dir.path(), "m.onnx", &folded_gather_nd());
    let out_dir = dir.path().join("out");
    let args = ["model", utf8(&model), "-o", utf8(&out_dir)];
    success(&args, &run(&args));
    let written = fs::read(out_dir.join("y.npy")).expect("y.npy");
    let values: Vec<f32> = written[written.len() - 12..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    assert_eq!(values, [3.0, 4.0, 5.0]);
    for flag in ["--native", "--compare", "--bench"] {
        let args = ["model", utf8(&model), flag];
        let line = one_error_line(&args, &run(&args));
        assert!(line.contains("panicked"), "{flag}: {line}");
    }
}

/// A GatherND whose index depth exceeds the indices' rank: the model is valid (`data[1, 0]`),
/// and `--native` and `--compare` (tract's GatherND behind the integration's checked rules)
/// load and run it.
#[test]
fn model_native_gather_nd_deeper_than_its_indices_rank_runs() {
    let dir = TempDir::new().expect("temp dir");
    let bytes = onnx::model(
        13,
        &[onnx::node("GatherND", &["data", "indices"], &["y"], &[])],
        &[onnx::i64_initializer("indices", &[2], &[1, 0])],
        &[onnx::value(
            "data",
            onnx::elem::FLOAT,
            &[Value(2), Value(2)],
        )],
        &[onnx::untyped("y")],
    );
    let model = write(dir.path(), "m.onnx", &bytes);
    for flag in ["--native", "--compare"] {
        let args = ["model", utf8(&model), flag];
        let out = success(&args, &run(&args));
        assert!(out.contains("output y: F32 []"), "{flag}: {out}");
    }
}

/// Issue 28, item 6: `--compare` compared the bytes of String and TDim outputs, which are
/// pointers to their heap data, and reported differences that do not exist (status 1).
#[test]
fn model_compare_finds_equal_string_and_tdim_outputs_equal() {
    let dir = TempDir::new().expect("temp dir");
    let strings = onnx::model(
        13,
        &[onnx::node("Identity", &["s"], &["y"], &[])],
        &[onnx::string_initializer("s", &[2], &["ab", "cd"])],
        &[],
        &[onnx::untyped("y")],
    );
    // tract's Shape of an input with a symbolic dim is a tensor of TDims.
    let shape = onnx::model(
        13,
        &[onnx::node("Shape", &["x"], &["y"], &[])],
        &[],
        &[onnx::value("x", onnx::elem::FLOAT, &[Param("N"), Value(3)])],
        &[onnx::untyped("y")],
    );
    // `--dim` only where the model has the symbol (naming one it lacks is an error).
    let cases = [
        ("strings", strings, "String", &[][..]),
        ("shape", shape, "TDim", &["--dim", "N=2"][..]),
    ];
    for (name, bytes, datum, dims) in cases {
        let model = write(dir.path(), &format!("{name}.onnx"), &bytes);
        let mut args = vec!["model", utf8(&model), "--compare"];
        args.extend_from_slice(dims);
        let out = success(&args, &run(&args));
        assert!(out.contains(&format!("output y: {datum} [2]")), "{out}");
    }
}

/// tract's TopK takes its output's shape from `k` unchecked, and tract sizes tensors with
/// wrapping arithmetic: `k = 2^62 + 5` on 3 rows allocated 60 bytes and wrote 3,600, which
/// corrupted the heap (status 134 or 139; one of the bit flips of gpt2_head's `k`). `k` beyond
/// its axis is one error line, in every mode.
#[test]
fn model_top_k_beyond_its_axis_is_an_error_not_a_heap_overflow() {
    let dir = TempDir::new().expect("temp dir");
    let bytes = onnx::model(
        13,
        &[onnx::node(
            "TopK",
            &["x", "k"],
            &["values", "indices"],
            &[("axis", 1)],
        )],
        &[onnx::i64_initializer("k", &[1], &[(1 << 62) + 5])],
        &[onnx::value("x", onnx::elem::FLOAT, &[Value(3), Value(300)])],
        &[onnx::untyped("values"), onnx::untyped("indices")],
    );
    let model = write(dir.path(), "m.onnx", &bytes);
    for flag in ["--json", "--native", "--compare", "--bench"] {
        let args = ["model", utf8(&model), flag];
        let line = one_error_line(&args, &run(&args));
        let expected = format!(
            "TopK's k {} is out of range for axis 1 of length 300",
            (1u64 << 62) + 5
        );
        assert!(line.contains(&expected), "{flag}: {line}");
    }
}

/// A `.npy` file (version 1.0) of one int64 scalar.
fn npy_i64_scalar(value: i64) -> Vec<u8> {
    let mut header = "{'descr': '<i8', 'fortran_order': False, 'shape': (), }".to_string();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut file = b"\x93NUMPY\x01\x00".to_vec();
    file.extend_from_slice(&(header.len() as u16).to_le_bytes());
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(&value.to_le_bytes());
    file
}

/// tract's Range sizes its output with wrapping arithmetic: `Range(0, 2^62, 1)` of int64 is
/// 2^65 bytes, which wrap to an empty allocation, and only a bounds check then stopped it (a
/// panic, "index out of bounds: the len is 0"). Each node's outputs are checked for size
/// before it runs, so the one error line says why.
#[test]
fn model_range_too_long_for_memory_is_an_error_not_a_wild_write() {
    let dir = TempDir::new().expect("temp dir");
    let bytes = onnx::range_of_inputs();
    let model = write(dir.path(), "m.onnx", &bytes);
    let inputs: Vec<String> = [("start", 0), ("limit", 1 << 62), ("delta", 1)]
        .into_iter()
        .map(|(name, value)| {
            let path = write(dir.path(), &format!("{name}.npy"), &npy_i64_scalar(value));
            format!("{name}={}", utf8(&path))
        })
        .collect();
    for flag in ["--json", "--native"] {
        let mut args = vec!["model", utf8(&model), flag];
        for input in &inputs {
            args.extend(["--input", input.as_str()]);
        }
        let line = one_error_line(&args, &run(&args));
        assert!(line.contains("does not fit in memory"), "{flag}: {line}");
    }
}

/// Two outputs: `word` (`[2, 4]` f32, 32 bytes of data) first, then `big` (`[2, 262144]` f32, 2
/// MiB), both gathers of random tables by the ids `[0, 1]`.
fn word_and_big() -> Vec<u8> {
    onnx::model(
        13,
        &[
            onnx::node("Gather", &["table", "ids"], &["word"], &[("axis", 0)]),
            onnx::node("Gather", &["big_table", "ids"], &["big"], &[("axis", 0)]),
        ],
        &[onnx::i64_initializer("ids", &[2], &[0, 1])],
        &[
            onnx::value("table", onnx::elem::FLOAT, &[Value(4), Value(4)]),
            onnx::value("big_table", onnx::elem::FLOAT, &[Value(2), Value(262_144)]),
        ],
        &[onnx::untyped("word"), onnx::untyped("big")],
    )
}

/// Issue 28, item 8: `-o DIR` on a disk that fills left the first output (`word.npy`) behind.
/// The disk is a file-size limit (`ulimit -f 64`, 32 or 64 KiB by the shell's block size,
/// SIGXFSZ ignored so that the write fails with EFBIG instead of killing the process): `big`
/// cannot be written, so neither is `word`, in a directory that existed and in one the command
/// makes.
#[test]
fn model_writes_no_output_unless_every_output_fits() {
    let dir = TempDir::new().expect("temp dir");
    let model = write(dir.path(), "m.onnx", &word_and_big());
    let existing = dir.path().join("existing");
    fs::create_dir(&existing).expect("dir");
    let made = dir.path().join("made");
    for out_dir in [&existing, &made] {
        let args = ["model", utf8(&model), "-o", utf8(out_dir)];
        let run = run_in_shell("trap '' XFSZ && ulimit -f 64", &args, 60);
        assert_eq!(names(out_dir), Vec::<String>::new(), "{:?}", run.stderr);
        let line = one_error_line(&args, &run);
        assert!(line.contains("big.npy: File too large"), "{line}");
    }
    assert!(!made.exists());
    let args = ["model", utf8(&model), "-o", utf8(&made)];
    success(&args, &run(&args));
    assert_eq!(names(&made), ["big.npy", "word.npy"]);
}

/// Bits flipped per model by the bit-flip test.
const FLIPS_PER_MODEL: usize = 150;

/// A small deterministic generator of bit positions (xorshift64).
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Issue 28, item 5d: single flipped bits in the committed models made tract's parser panic
/// (status 101). For each model, 150 bits (in the small node-test models, anywhere; in the
/// three larger models, in their first and last kilobyte, where the graph's structure is
/// rather than the weights) are flipped one at a time, from a fixed seed, and the model runs
/// with `--compare` (both loads, both runs) and `-o`: status 0, 1 or 2, and on a failure one
/// error line and no output written. Under the address-space limit and a deadline each.
#[test]
fn model_on_single_bit_flips_of_every_committed_model_fails_cleanly() {
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../integrations/tract/tests/models");
    let dir = TempDir::new().expect("temp dir");
    let flipped = dir.path().join("flipped.onnx");
    let out_dir = dir.path().join("out");
    let mut entries: Vec<PathBuf> = fs::read_dir(&models)
        .expect("the models directory")
        .map(|e| e.expect("an entry").path().join("model.onnx"))
        .collect();
    entries.sort();
    assert!(entries.len() >= 13, "only {} models", entries.len());
    let (mut runs, mut failures) = (0, 0);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for model in &entries {
        let bytes = fs::read(model).expect("a model");
        let region = |at: u64| -> usize {
            let len = bytes.len() as u64;
            if len <= 2048 {
                return (at % len) as usize;
            }
            // The first or the last kilobyte.
            let offset = at % 2048;
            (if offset < 1024 {
                offset
            } else {
                len - 2048 + offset
            }) as usize
        };
        for _ in 0..FLIPS_PER_MODEL {
            let at = next(&mut state);
            let byte = region(at >> 3);
            let mut damaged = bytes.clone();
            damaged[byte] ^= 1 << (at & 7);
            fs::write(&flipped, &damaged).expect("written");
            let _ = fs::remove_dir_all(&out_dir);
            let args = ["model", utf8(&flipped), "--compare", "-o", utf8(&out_dir)];
            let result = run_in_shell(&format!("ulimit -v {MEMORY_KIB}"), &args, 60);
            let what = format!(
                "{} with bit {} of byte {byte} flipped",
                model.display(),
                at & 7
            );
            match result.status.code() {
                Some(0) => {}
                Some(1 | 2) => {
                    let lines: Vec<&str> = result.stderr.lines().collect();
                    assert!(
                        lines.len() == 1 && lines[0].starts_with("error: "),
                        "{what}: {:?}",
                        result.stderr
                    );
                    assert_eq!(names(&out_dir), Vec::<String>::new(), "{what}");
                    failures += 1;
                }
                _ => panic!("{what}: {}, stderr {:?}", result.status, result.stderr),
            }
            runs += 1;
        }
    }
    println!("{runs} runs with a flipped bit: {failures} failed cleanly, the rest ran");
    // The sample must reach the parser's and the loaders' error paths, not only flip bits
    // that change nothing.
    assert!(failures >= runs / 10, "{failures} failures in {runs} runs");
}

/// ONNX output names that are not file names everywhere (`/x/y:0`, `onnx::Shape_4`, a Windows
/// device name, two that differ only in case) become safe, distinct files, and the report
/// (text and `--json`) says which output went to which file.
#[test]
fn model_output_names_become_safe_distinct_files() {
    let dir = TempDir::new().expect("temp dir");
    let names = ["/x/y:0", "onnx::Shape_4", "A", "a", "CON", "..."];
    // One constant each: outputs that share an outlet would share tract's label too.
    let constants: Vec<String> = (0..names.len()).map(|i| format!("c{i}")).collect();
    let nodes: Vec<Vec<u8>> = (names.iter().zip(&constants))
        .map(|(name, c)| onnx::node("Identity", &[c], &[name], &[]))
        .collect();
    let initializers: Vec<Vec<u8>> = (constants.iter().enumerate())
        .map(|(i, c)| onnx::f32_initializer(c, &[2], &[i as f32, -2.0]))
        .collect();
    let outputs: Vec<Vec<u8>> = names.iter().map(|name| onnx::untyped(name)).collect();
    let bytes = onnx::model(13, &nodes, &initializers, &[], &outputs);
    let model = write(dir.path(), "names.onnx", &bytes);
    let out_dir = dir.path().join("out");
    let expected = [
        "_x_y_0.npy",
        "onnx__Shape_4.npy",
        "A.npy",
        "a_2.npy",
        "_CON.npy",
        "output.npy",
    ];
    let args = ["model", utf8(&model), "-o", utf8(&out_dir), "--json"];
    let report: serde_json::Value =
        serde_json::from_str(&success(&args, &run(&args))).expect("one JSON object");
    let reported = report["outputs"].as_array().expect("outputs");
    assert_eq!(reported.len(), names.len());
    for (name, file) in names.iter().zip(expected) {
        let output = (reported.iter())
            .find(|o| o["name"] == *name)
            .unwrap_or_else(|| panic!("{name} in {reported:?}"));
        let path = out_dir.join(file);
        assert_eq!(output["file"], path.display().to_string(), "{name}");
        assert!(path.is_file(), "{name}: {} written", path.display());
    }
    let mut written: Vec<String> = fs::read_dir(&out_dir)
        .expect("out dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    let mut want: Vec<String> = expected.iter().map(|f| f.to_string()).collect();
    want.sort();
    assert_eq!(written, want, "exactly one file per output");
}
