//! `gather-jit model`'s inputs and reference outputs: `--input NAME=FILE` (`.npy`, `.npz`,
//! ONNX `TensorProto` `.pb`) pins the model's input facts before tract analyses it, `--inputs`
//! reads a directory (an ONNX test data set, or `NAME.npy` files) or an `.npz` archive,
//! `--assert-outputs` checks every output against references within a tolerance.
//!
//! The models and the `.pb` files are written in code with the tract integration's protobuf
//! encoder; every expected value is worked out by hand in the comments.

#![cfg(feature = "model")]

#[path = "../../integrations/tract/tests/support/onnx.rs"]
mod onnx;

mod common;
#[path = "common/files.rs"]
mod files;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::{gather_jit, npy, ok, usage_error};
use files::{utf8, write};
use onnx::Dim::{Param, Value};
use onnx::elem;
use serde_json::Value as Json;
use tempfile::TempDir;

fn f32_le(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn i64_le(values: &[i64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// An f32 `.npy` file.
fn npy_f32(shape: &[usize], values: &[f32]) -> Vec<u8> {
    npy("<f4", false, shape, &f32_le(values))
}

/// An int64 `.npy` file.
fn npy_i64(shape: &[usize], values: &[i64]) -> Vec<u8> {
    npy("<i8", false, shape, &i64_le(values))
}

/// The f32 values of an `.npy` file the CLI wrote.
fn read_f32(path: &Path) -> Vec<f32> {
    let file = fs::read(path).expect("an output file");
    let len = u16::from_le_bytes([file[8], file[9]]) as usize;
    file[10 + len..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

/// Runs `args`; returns the whole output.
fn run(args: &[&str]) -> Output {
    gather_jit().args(args).output().expect("the binary runs")
}

/// `y = Gather(Concat(a, b, axis 0), ids, axis 0)` with `a: f32 [N, K]`, `b: f32 [M, L]`,
/// `ids: i64 [J]`. tract can analyse it only when K and L are one size: with the symbols as
/// declared it cannot unify them, at the shapes of the files it can.
fn concat_gather() -> Vec<u8> {
    onnx::model(
        13,
        &[
            onnx::node("Concat", &["a", "b"], &["ab"], &[("axis", 0)]),
            onnx::node("Gather", &["ab", "ids"], &["y"], &[("axis", 0)]),
        ],
        &[],
        &[
            onnx::value("a", elem::FLOAT, &[Param("N"), Param("K")]),
            onnx::value("b", elem::FLOAT, &[Param("M"), Param("L")]),
            onnx::value("ids", elem::INT64, &[Param("J")]),
        ],
        &[onnx::untyped("y")],
    )
}

/// `a = [[1, 2, 3], [4, 5, 6]]`, `b = [[7, 8, 9]]`, `ids = [2, 0]`: rows 2 and 0 of
/// `[[1, 2, 3], [4, 5, 6], [7, 8, 9]]`.
const A: [f32; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
const B: [f32; 3] = [7.0, 8.0, 9.0];
const IDS: [i64; 2] = [2, 0];
const Y: [f32; 6] = [7.0, 8.0, 9.0, 1.0, 2.0, 3.0];

/// The concat model and `.npy` files of its inputs in a fresh directory.
struct Concat {
    dir: TempDir,
    model: PathBuf,
    a: PathBuf,
    b: PathBuf,
    ids: PathBuf,
}

fn concat() -> Concat {
    let dir = TempDir::new().expect("temp dir");
    let model = write(dir.path(), "concat.onnx", &concat_gather());
    let a = write(dir.path(), "a.npy", &npy_f32(&[2, 3], &A));
    let b = write(dir.path(), "b.npy", &npy_f32(&[1, 3], &B));
    let ids = write(dir.path(), "ids.npy", &npy_i64(&[2], &IDS));
    Concat {
        dir,
        model,
        a,
        b,
        ids,
    }
}

fn input(name: &str, path: &Path) -> String {
    format!("{name}={}", utf8(path))
}

/// Runs `args` (after `model`), expects one error line, status 2, and nothing written to
/// `out`; returns the line.
#[track_caller]
fn refused(args: &[&str], out: &Path) -> String {
    let mut all = vec!["model"];
    all.extend_from_slice(args);
    all.extend(["-o", utf8(out)]);
    let line = usage_error(&all);
    assert!(!out.exists(), "{all:?} wrote {}", out.display());
    line
}

/// Issue item "inputs pin the model": tract cannot unify the concat's K and L while they
/// are symbols ("tract cannot load this model" before the inputs pinned it); with the files'
/// shapes set before analysis, the model loads and gives the rows by hand, both ways.
#[test]
fn model_input_files_pin_dims_tract_cannot_unify_as_symbols() {
    let c = concat();
    let out = c.dir.path().join("out");
    let (a, b, ids) = (input("a", &c.a), input("b", &c.b), input("ids", &c.ids));
    let args = [
        "model",
        utf8(&c.model),
        "--input",
        &a,
        "--input",
        &b,
        "--input",
        &ids,
        "--compare",
        "-o",
        utf8(&out),
    ];
    let text = ok(&args);
    assert!(text.contains("output y: F32 [2, 3]"), "{text}");
    assert!(
        text.contains(&format!("input a: F32 [2, 3] <- {}", utf8(&c.a))),
        "{text}"
    );
    assert_eq!(read_f32(&out.join("y.npy")), Y);
    // --dim pins random inputs the same way.
    let json = ok(&[
        "model",
        utf8(&c.model),
        "--dim",
        "N=2",
        "--dim",
        "K=3",
        "--dim",
        "M=1",
        "--dim",
        "L=3",
        "--dim",
        "J=4",
        "--json",
    ]);
    let report: Json = serde_json::from_str(&json).expect("json");
    assert_eq!(report["outputs"][0]["shape"], serde_json::json!([4, 3]));
    assert_eq!(report["inputs"][2]["file"], Json::Null);
    // With no input and no --dim, the symbols are left: one line naming one.
    let line = refused(&[utf8(&c.model)], &out.join("none"));
    assert!(
        line.contains("input a: dim N is symbolic: give --dim N=N"),
        "{line}"
    );
}

/// A file binds the symbols of its declaration, so that random inputs sharing them get its
/// sizes: in the tiny model `ids: [batch, 3]` of a [2, 3] file makes `last: [batch, 1]`
/// [2, 1] (before: "dim batch is symbolic").
#[test]
fn model_file_sizes_bind_the_symbols_of_random_inputs() {
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tiny.onnx");
    let ids = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tiny_ids.npy");
    let text = ok(&["model", utf8(&tiny), "--input", &input("ids", &ids)]);
    assert!(text.contains("input last: I64 [2, 1] (random)"), "{text}");
    assert!(text.contains("output picked: F32 [2, 4]"), "{text}");
}

/// A file whose type, rank or fixed dim differs from the declaration: one line naming both.
#[test]
fn model_input_mismatches_name_the_file_and_the_declaration() {
    let dir = TempDir::new().expect("temp dir");
    let out = dir.path().join("out");
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tiny.onnx");
    let i32_ids = write(dir.path(), "i32.npy", &npy("<i4", false, &[2, 3], &[0; 24]));
    let flat = write(dir.path(), "flat.npy", &npy_i64(&[6], &[0; 6]));
    let wide = write(dir.path(), "wide.npy", &npy_i64(&[2, 4], &[0; 8]));
    for (file, form) in [
        (&i32_ids, "i32 [2, 3]"),
        (&flat, "i64 [6]"),
        (&wide, "i64 [2, 4]"),
    ] {
        let line = refused(&[utf8(&tiny), "--input", &input("ids", file)], &out);
        assert_eq!(
            line,
            format!(
                "error: input 'ids': file {} is {form}, the model declares i64 [batch, 3]",
                utf8(file)
            )
        );
    }
}

/// One symbol bound to two sizes: by two files, by a file and `--dim`, by two dims of one
/// file. The line names both bindings.
#[test]
fn model_symbol_bound_to_two_sizes_is_one_error_naming_both() {
    let dir = TempDir::new().expect("temp dir");
    let out = dir.path().join("out");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let tiny = data.join("tiny.onnx");
    let ids = input("ids", &data.join("tiny_ids.npy"));
    let last3 = write(dir.path(), "last3.npy", &npy_i64(&[3, 1], &[0, 0, 0]));
    let ids_file = utf8(&data.join("tiny_ids.npy")).to_string();
    let line = refused(
        &[
            utf8(&tiny),
            "--input",
            &ids,
            "--input",
            &input("last", &last3),
        ],
        &out,
    );
    assert_eq!(
        line,
        format!(
            "error: symbol batch: input 'ids' ({ids_file}, dim 0) makes it 2, input 'last' ({}, dim 0) makes it 3",
            utf8(&last3)
        )
    );
    let line = refused(&[utf8(&tiny), "--dim", "batch=4", "--input", &ids], &out);
    assert_eq!(
        line,
        format!(
            "error: symbol batch: --dim batch=4 makes it 4, input 'ids' ({ids_file}, dim 0) makes it 2"
        )
    );
    // x: [N, N] given a [2, 3] file.
    let square = onnx::model(
        13,
        &[onnx::node("Identity", &["x"], &["y"], &[])],
        &[],
        &[onnx::value("x", elem::FLOAT, &[Param("N"), Param("N")])],
        &[onnx::untyped("y")],
    );
    let model = write(dir.path(), "square.onnx", &square);
    let x = write(dir.path(), "x.npy", &npy_f32(&[2, 3], &[0.0; 6]));
    let line = refused(&[utf8(&model), "--input", &input("x", &x)], &out);
    let x = utf8(&x);
    assert_eq!(
        line,
        format!(
            "error: symbol N: input 'x' ({x}, dim 0) makes it 2, input 'x' ({x}, dim 1) makes it 3"
        )
    );
}

/// ONNX `TensorProto` files as inputs: raw data (as `numpy_helper.from_array` writes it) and
/// the typed fields `float_data` and `int64_data` (as `make_tensor` does).
#[test]
fn model_reads_tensor_proto_inputs() {
    let c = concat();
    let d = c.dir.path();
    let a = write(
        d,
        "a.pb",
        &onnx::initializer("a", elem::FLOAT, &[2, 3], &f32_le(&A)),
    );
    let b = write(d, "b.pb", &onnx::float_data_tensor("", &[1, 3], &B));
    let ids = write(d, "ids.PB", &onnx::int64_data_tensor("ids", &[2], &IDS));
    let out = d.join("out");
    ok(&[
        "model",
        utf8(&c.model),
        "--input",
        &input("a", &a),
        "--input",
        &input("b", &b),
        "--input",
        &input("ids", &ids),
        "-o",
        utf8(&out),
    ]);
    assert_eq!(read_f32(&out.join("y.npy")), Y);
}

/// A `.pb` that is no tensor ONNX can hold, each one error line: not protobuf, truncated,
/// raw data of the wrong length, a negative dim, an unsupported type, external data, a
/// count of typed values that does not fit the shape; and a bool `.npy` byte that is not 0 or
/// 1 (before: made into a `bool` tensor as it was, which is undefined behaviour).
#[test]
fn model_bad_tensor_files_are_one_error_line() {
    let c = concat();
    let d = c.dir.path();
    let out = d.join("out");
    let good = onnx::initializer("a", elem::FLOAT, &[2, 3], &f32_le(&A));
    let mut external = good.clone();
    // data_location (field 14) = EXTERNAL.
    external.extend_from_slice(&[14 << 3, 1]);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "text.pb",
            b"\xff\xff\xff".to_vec(),
            "not an ONNX TensorProto",
        ),
        (
            "cut.pb",
            good[..good.len() - 3].to_vec(),
            "not an ONNX TensorProto",
        ),
        (
            "short.pb",
            onnx::initializer("a", elem::FLOAT, &[2, 3], &f32_le(&A[..5])),
            "raw_data holds 20 bytes, shape [2, 3] of f32 needs 24",
        ),
        (
            "negative.pb",
            onnx::initializer("a", elem::FLOAT, &[-2, 3], &f32_le(&A)),
            "dim -2 is negative",
        ),
        (
            "bf16.pb",
            onnx::initializer("a", 16, &[2, 3], &[0; 12]),
            "data type 16 (BFLOAT16) is not supported",
        ),
        (
            "external.pb",
            external,
            "data in an external file is not supported",
        ),
        (
            "few.pb",
            onnx::float_data_tensor("a", &[2, 3], &A[..4]),
            "float_data holds 4 values, shape [2, 3] has 6 elements",
        ),
        (
            "huge.pb",
            onnx::float_data_tensor("a", &[1 << 40, 1 << 40], &[]),
            "more bytes than fit in memory",
        ),
    ];
    for (name, bytes, expected) in cases {
        let file = write(d, name, &bytes);
        let line = refused(&[utf8(&c.model), "--input", &input("a", &file)], &out);
        assert!(
            line.starts_with(&format!("error: {}", utf8(&file))) && line.contains(expected),
            "{name}: {line}"
        );
    }
    let bools = onnx::model(
        13,
        &[onnx::node("Not", &["p"], &["q"], &[])],
        &[],
        &[onnx::value("p", elem::BOOL, &[Value(3)])],
        &[onnx::untyped("q")],
    );
    let model = write(d, "not.onnx", &bools);
    let two = write(d, "two.npy", &npy("|b1", false, &[3], &[1, 2, 0]));
    let line = refused(&[utf8(&model), "--input", &input("p", &two)], &out);
    assert!(line.contains("bool element 1 is 2, not 0 or 1"), "{line}");
    let fine = write(d, "fine.npy", &npy("|b1", false, &[3], &[1, 0, 0]));
    let text = ok(&["model", utf8(&model), "--input", &input("p", &fine)]);
    assert!(text.contains("output q: Bool [3]"), "{text}");
}

/// An ONNX test data set directory: `input_0.pb` without a name is input 0 (`a`), `input_1.pb`
/// named `ids` is `ids` whatever its number, `b.npy` is `b`; `output_0.pb` is skipped by
/// `--inputs` and is the reference of `--assert-outputs`.
fn test_data_set(c: &Concat) -> PathBuf {
    let set = c.dir.path().join("test_data_set_0");
    fs::create_dir(&set).expect("dir");
    write(
        &set,
        "input_0.pb",
        &onnx::initializer("", elem::FLOAT, &[2, 3], &f32_le(&A)),
    );
    write(
        &set,
        "input_1.pb",
        &onnx::int64_data_tensor("ids", &[2], &IDS),
    );
    write(&set, "b.npy", &npy_f32(&[1, 3], &B));
    write(
        &set,
        "output_0.pb",
        &onnx::initializer("y", elem::FLOAT, &[2, 3], &f32_le(&Y)),
    );
    set
}

/// `--inputs` and `--assert-outputs` on one ONNX test data set: the inputs matched by name
/// and order, the output checked, exit 0 and the line that says so (text and `--json`).
#[test]
fn model_runs_an_onnx_test_data_set_and_asserts_its_outputs() {
    let c = concat();
    let set = test_data_set(&c);
    let args = [
        "model",
        utf8(&c.model),
        "--inputs",
        utf8(&set),
        "--assert-outputs",
        utf8(&set),
    ];
    let text = ok(&args);
    assert!(
        text.contains(&format!(
            "input ids: I64 [2] <- {}",
            utf8(&set.join("input_1.pb"))
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "assert-outputs: all 1 outputs match {} (floats within atol 0.0000001 + rtol 0.001",
            utf8(&set)
        )),
        "{text}"
    );
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let report: Json = serde_json::from_str(&ok(&json_args)).expect("json");
    let asserted = &report["assert_outputs"];
    assert_eq!(asserted["match"], true, "{report}");
    assert_eq!(asserted["outputs"][0]["result"], "match");
    assert_eq!(asserted["atol"], 1e-7);
    assert_eq!(asserted["rtol"], 1e-3);
    // One directory of NAME.npy files for inputs and outputs: each flag skips the other's.
    let both = reference_dir(
        c.dir.path(),
        "both",
        &[
            ("a.npy", npy_f32(&[2, 3], &A)),
            ("b.npy", npy_f32(&[1, 3], &B)),
            ("ids.npy", npy_i64(&[2], &IDS)),
            ("y.npy", npy_f32(&[2, 3], &Y)),
        ],
    );
    let text = ok(&[
        "model",
        utf8(&c.model),
        "--inputs",
        utf8(&both),
        "--assert-outputs",
        utf8(&both),
    ]);
    assert!(
        text.contains("assert-outputs: all 1 outputs match"),
        "{text}"
    );
    // An .npz archive of inputs by name does the same.
    let npz = c.dir.path().join("inputs.npz");
    let zip = npz_of(&[
        ("a", npy_f32(&[2, 3], &A)),
        ("b", npy_f32(&[1, 3], &B)),
        ("ids", npy_i64(&[2], &IDS)),
    ]);
    fs::write(&npz, zip).expect("written");
    ok(&[
        "model",
        utf8(&c.model),
        "--inputs",
        utf8(&npz),
        "--assert-outputs",
        utf8(&set),
    ]);
}

/// A stored `.npz` archive of `members` (name, `.npy` bytes), as `numpy.savez` writes.
fn npz_of(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, bytes) in members {
        zip.start_file(format!("{name}.npy"), options)
            .expect("member");
        zip.write_all(bytes).expect("written");
    }
    zip.finish().expect("archive").into_inner()
}

/// `--input` wins over `--inputs` for the same input.
#[test]
fn model_input_wins_over_the_inputs_directory() {
    let c = concat();
    let set = test_data_set(&c);
    let other = write(c.dir.path(), "ids2.npy", &npy_i64(&[1], &[1]));
    let out = c.dir.path().join("out");
    let text = ok(&[
        "model",
        utf8(&c.model),
        "--inputs",
        utf8(&set),
        "--input",
        &input("ids", &other),
        "-o",
        utf8(&out),
    ]);
    assert!(
        text.contains(&format!("input ids: I64 [1] <- {}", utf8(&other))),
        "{text}"
    );
    // Row 1 of the concat: [4, 5, 6].
    assert_eq!(read_f32(&out.join("y.npy")), [4.0, 5.0, 6.0]);
}

/// `--inputs` errors: a stray file, a tensor named after no input, an input number past the
/// last, two files for one input, a path that is neither a directory nor an .npz archive; and
/// files that are missing, for `--input` and `--assert-outputs` too.
#[test]
fn model_inputs_directory_errors_are_one_line() {
    let c = concat();
    let out = c.dir.path().join("out");
    let cases: [(&str, &[u8], &str); 4] = [
        (
            "notes.txt",
            b"hello",
            "notes.txt is not a file it reads (input_N.pb or NAME.npy",
        ),
        (
            "input_2.pb",
            &onnx::initializer("c", elem::FLOAT, &[1], &f32_le(&[0.0])),
            "its tensor is named 'c', which is no input of the model (its inputs: a, b, ids)",
        ),
        (
            "input_3.pb",
            &onnx::initializer("", elem::FLOAT, &[1], &f32_le(&[0.0])),
            "the model has 3 inputs, no input 3 (numbered from 0)",
        ),
        (
            "a.npy",
            &npy_f32(&[2, 3], &A),
            "input 'a' is given twice: by",
        ),
    ];
    for (i, (name, bytes, expected)) in cases.into_iter().enumerate() {
        let set = c.dir.path().join(format!("set{i}"));
        fs::create_dir(&set).expect("dir");
        write(
            &set,
            "input_0.pb",
            &onnx::initializer("", elem::FLOAT, &[2, 3], &f32_le(&A)),
        );
        write(&set, name, bytes);
        let line = refused(&[utf8(&c.model), "--inputs", utf8(&set)], &out);
        assert!(line.contains(expected), "{name}: {line}");
    }
    let line = refused(&[utf8(&c.model), "--inputs", utf8(&c.a)], &out);
    assert!(
        line.contains("not a directory or an .npz archive"),
        "{line}"
    );
    let missing = c.dir.path().join("missing");
    let line = refused(&[utf8(&c.model), "--inputs", utf8(&missing)], &out);
    assert!(
        line.contains("not a directory or an .npz archive"),
        "{line}"
    );
    let line = refused(&[utf8(&c.model), "--input", &input("a", &missing)], &out);
    assert!(
        line.contains(&format!("cannot read {}", utf8(&missing))),
        "{line}"
    );
    let missing_pb = c.dir.path().join("missing.pb");
    let line = refused(&[utf8(&c.model), "--input", &input("a", &missing_pb)], &out);
    assert!(
        line.contains(&format!("cannot read {}", utf8(&missing_pb))),
        "{line}"
    );
    let given = [input("a", &c.a), input("b", &c.b), input("ids", &c.ids)];
    let mut args = vec![utf8(&c.model), "--assert-outputs", utf8(&missing)];
    for g in &given {
        args.extend(["--input", g.as_str()]);
    }
    let line = refused(&args, &out);
    assert!(
        line.contains("--assert-outputs") && line.contains("missing"),
        "{line}"
    );
}

/// `y` of the concat model, reference files of it in a fresh directory of `dir`.
fn reference_dir(dir: &Path, name: &str, files: &[(&str, Vec<u8>)]) -> PathBuf {
    let set = dir.join(name);
    fs::create_dir(&set).expect("dir");
    for (file, bytes) in files {
        write(&set, file, bytes);
    }
    set
}

/// `--assert-outputs` failures exit with status 1 and one line naming the output, the element,
/// both values and the tolerance; the report is printed and `-o` writes the outputs all the
/// same. A shape or type that differs fails too. The default tolerance passes a float off by
/// 1e-4 relatively, `--rtol 0` does not.
#[test]
fn model_assert_outputs_failures_name_the_output_element_and_tolerance() {
    let c = concat();
    let inputs = [
        "--input".to_string(),
        input("a", &c.a),
        "--input".to_string(),
        input("b", &c.b),
        "--input".to_string(),
        input("ids", &c.ids),
    ];
    let mut off = Y;
    off[3] = 1.5;
    let mut close = Y;
    close[5] = 3.0003;
    let cases = [
        (
            "off",
            npy_f32(&[2, 3], &off),
            "output 'y' differs from REF at [1, 0]: 1.0, the reference 1.5 (tolerance 0.0000001 + 0.001 x |reference|); 1 of 6 elements differ",
        ),
        (
            "shape",
            npy_f32(&[3, 2], &Y),
            "output 'y' is f32 [2, 3], the reference REF is f32 [3, 2]",
        ),
        (
            "type",
            npy(
                "<f8",
                false,
                &[2, 3],
                &Y.iter()
                    .flat_map(|v| f64::from(*v).to_le_bytes())
                    .collect::<Vec<u8>>(),
            ),
            "output 'y' is f32 [2, 3], the reference REF is f64 [2, 3]",
        ),
    ];
    for (name, bytes, expected) in cases {
        let set = reference_dir(c.dir.path(), name, &[("y.npy", bytes)]);
        let out = c.dir.path().join(format!("out-{name}"));
        let mut args = vec!["model", utf8(&c.model)];
        args.extend(inputs.iter().map(String::as_str));
        args.extend(["--assert-outputs", utf8(&set), "-o", utf8(&out)]);
        let result = run(&args);
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert_eq!(result.status.code(), Some(1), "{name}: {stderr}");
        let expected = expected.replace("REF", utf8(&set.join("y.npy")));
        assert_eq!(stderr, format!("error: {expected}\n"), "{name}");
        let stdout = String::from_utf8_lossy(&result.stdout);
        assert!(
            stdout.contains("output y: F32 [2, 3] -> "),
            "{name}: {stdout}"
        );
        assert!(!stdout.contains("assert-outputs:"), "{name}: {stdout}");
        assert_eq!(read_f32(&out.join("y.npy")), Y, "{name}");
        // --json reports it too, with the same status.
        args.push("--json");
        let result = run(&args);
        assert_eq!(result.status.code(), Some(1), "{name}");
        let report: Json = serde_json::from_slice(&result.stdout).expect("json");
        assert_eq!(report["assert_outputs"]["match"], false);
        assert_eq!(report["assert_outputs"]["outputs"][0]["result"], "differs");
        assert_eq!(report["assert_outputs"]["outputs"][0]["message"], expected);
    }
    let set = reference_dir(
        c.dir.path(),
        "close",
        &[("y.npy", npy_f32(&[2, 3], &close))],
    );
    let mut args = vec!["model", utf8(&c.model)];
    args.extend(inputs.iter().map(String::as_str));
    args.extend(["--assert-outputs", utf8(&set)]);
    ok(&args);
    args.extend(["--rtol", "0", "--atol", "1e-5"]);
    let result = run(&args);
    assert_eq!(result.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(
        stderr
            .contains("at [1, 2]: 3.0, the reference 3.0003 (tolerance 0.00001 + 0 x |reference|)"),
        "{stderr}"
    );
}

/// Two outputs, `y` and `z` (`Identity` of `x` and of a constant): a reference for `y` alone
/// checks `y` and lists `z` as not checked (exit 0); a set with a reference for no output, or
/// one for an output the model lacks, is an error (status 2), and so is `-o` into the
/// reference directory, which would replace a reference.
#[test]
fn model_assert_outputs_lists_outputs_without_a_reference() {
    let dir = TempDir::new().expect("temp dir");
    let d = dir.path();
    let two = onnx::model(
        13,
        &[
            onnx::node("Identity", &["x"], &["y"], &[]),
            onnx::node("Identity", &["c"], &["z"], &[]),
        ],
        &[onnx::f32_initializer("c", &[1], &[5.0])],
        &[onnx::value("x", elem::FLOAT, &[Value(2)])],
        &[onnx::untyped("y"), onnx::untyped("z")],
    );
    let model = write(d, "two.onnx", &two);
    let x = input("x", &write(d, "x.npy", &npy_f32(&[2], &[1.0, -1.0])));
    let set = reference_dir(d, "ref", &[("y.npy", npy_f32(&[2], &[1.0, -1.0]))]);
    let text = ok(&[
        "model",
        utf8(&model),
        "--input",
        &x,
        "--assert-outputs",
        utf8(&set),
    ]);
    assert!(
        text.contains(&format!(
            "assert-outputs: 1 of 2 outputs match {}; not checked (no reference): z",
            utf8(&set)
        )),
        "{text}"
    );
    let out = d.join("out");
    let empty = reference_dir(d, "empty", &[]);
    let line = refused(
        &[
            utf8(&model),
            "--input",
            &x,
            "--assert-outputs",
            utf8(&empty),
        ],
        &out,
    );
    assert!(
        line.contains("no reference for any output (its outputs: y, z)"),
        "{line}"
    );
    let stray = reference_dir(d, "stray", &[("w.npy", npy_f32(&[2], &[0.0, 0.0]))]);
    let line = refused(
        &[
            utf8(&model),
            "--input",
            &x,
            "--assert-outputs",
            utf8(&stray),
        ],
        &out,
    );
    assert!(
        line.contains("the model has no output 'w' (its outputs: y, z)"),
        "{line}"
    );
    let args = [
        "model",
        utf8(&model),
        "--input",
        &x,
        "--assert-outputs",
        utf8(&set),
        "-o",
        utf8(&set),
    ];
    let line = usage_error(&args);
    assert!(
        line.contains("is the same file as the reference input"),
        "{line}"
    );
    assert_eq!(
        fs::read(set.join("y.npy")).expect("kept"),
        npy_f32(&[2], &[1.0, -1.0])
    );
    let line = usage_error(&["model", utf8(&model), "--input", &x, "--atol", "1"]);
    assert!(line.contains("--assert-outputs"), "{line}");
}

/// Input and output names that are no file names (`onnx::in:0`, `a/b`, `x=y`): `--input`
/// splits NAME=FILE where NAME is an input of the model, so names and paths may hold `=`; a
/// directory of `NAME.npy` files names them as `-o` writes them; `-o` then
/// `--assert-outputs` on what it wrote passes.
#[test]
fn model_names_with_colons_slashes_and_equals() {
    let dir = TempDir::new().expect("temp dir");
    let d = dir.path();
    let names = ["onnx::in:0", "a/b", "x=y"];
    let outputs = ["onnx::Shape_4", "out/0", "o=1"];
    let nodes: Vec<Vec<u8>> = (names.iter().zip(outputs))
        .map(|(i, o)| onnx::node("Identity", &[i], &[o], &[]))
        .collect();
    let values: Vec<Vec<u8>> = (names.iter())
        .map(|n| onnx::value(n, elem::FLOAT, &[Value(1)]))
        .collect();
    let untyped: Vec<Vec<u8>> = outputs.iter().map(|o| onnx::untyped(o)).collect();
    let model = write(
        d,
        "names.onnx",
        &onnx::model(13, &nodes, &[], &values, &untyped),
    );
    let eq_dir = d.join("k=v");
    fs::create_dir(&eq_dir).expect("dir");
    let files: Vec<PathBuf> = (0..3)
        .map(|i| write(&eq_dir, &format!("f{i}.npy"), &npy_f32(&[1], &[i as f32])))
        .collect();
    let given: Vec<String> = (names.iter().zip(&files))
        .map(|(n, f)| input(n, f))
        .collect();
    let out = d.join("out");
    let mut args = vec!["model", utf8(&model), "-o", utf8(&out)];
    for g in &given {
        args.extend(["--input", g.as_str()]);
    }
    let text = ok(&args);
    assert!(
        text.contains(&format!("input x=y: F32 [1] <- {}", utf8(&files[2]))),
        "{text}"
    );
    assert_eq!(read_f32(&out.join("onnx__Shape_4.npy")), [0.0]);
    assert_eq!(read_f32(&out.join("out_0.npy")), [1.0]);
    assert_eq!(read_f32(&out.join("o_1.npy")), [2.0]);
    // The outputs written are the references of the next run, matched by file name.
    let text = ok(&[&args[..2], &args[4..], &["--assert-outputs", utf8(&out)]].concat());
    assert!(
        text.contains("assert-outputs: all 3 outputs match"),
        "{text}"
    );
    // A directory of the inputs under their -o file names.
    let set = reference_dir(
        d,
        "inputs",
        &[
            ("onnx__in_0.npy", npy_f32(&[1], &[7.0])),
            ("a_b.npy", npy_f32(&[1], &[8.0])),
            ("x_y.npy", npy_f32(&[1], &[9.0])),
        ],
    );
    let out2 = d.join("out2");
    ok(&[
        "model",
        utf8(&model),
        "--inputs",
        utf8(&set),
        "-o",
        utf8(&out2),
    ]);
    assert_eq!(read_f32(&out2.join("o_1.npy")), [9.0]);
    let line = usage_error(&["model", utf8(&model), "--input", "nope=x.npy"]);
    assert!(
        line.contains("the model has no input nope (its inputs: onnx::in:0, a/b, x=y)"),
        "{line}"
    );
}

/// Every committed ONNX test case (the integration's node tests and multi-op models, their
/// `test_data_set_0` written by onnx and onnxruntime) runs from its data set's inputs and
/// matches its reference outputs under the default tolerance: every input read from a file,
/// every output checked.
#[test]
fn model_runs_every_committed_test_data_set_and_matches_its_outputs() {
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../integrations/tract/tests/models");
    let mut ran = 0;
    for entry in fs::read_dir(&models).expect("the models directory") {
        let dir = entry.expect("an entry").path();
        let set = dir.join("test_data_set_0");
        let json = ok(&[
            "model",
            utf8(&dir.join("model.onnx")),
            "--inputs",
            utf8(&set),
            "--assert-outputs",
            utf8(&set),
            "--json",
        ]);
        let report: Json = serde_json::from_str(&json).expect("json");
        for input in report["inputs"].as_array().expect("inputs") {
            assert!(input["file"].is_string(), "{}: {input}", dir.display());
        }
        let asserted = &report["assert_outputs"];
        assert_eq!(asserted["match"], true, "{}: {asserted}", dir.display());
        let outputs = asserted["outputs"].as_array().expect("outputs");
        assert_eq!(
            outputs.len(),
            report["outputs"].as_array().expect("outputs").len()
        );
        for output in outputs {
            assert_eq!(output["result"], "match", "{}: {output}", dir.display());
        }
        ran += 1;
    }
    assert!(ran >= 13, "only {ran} models under {}", models.display());
}

/// A symbol the files bind takes its size in the facts the model declares beyond its inputs
/// too: `y = Identity(Relu(x))` with `x` and the inner value `h` declared `[N]` (ONNX's
/// `value_info`), pinned at `x: [3]`, analyses pinned. Without the substitution tract cannot
/// unify `h`'s `N` with the 3 that `x` now has, and the model loads only with its symbolic
/// dims, which the report says (`pinned: false`, `pin_error`, an `inputs not pinned` line).
#[test]
fn model_declared_inner_symbols_take_the_inputs_sizes() {
    let dir = TempDir::new().expect("temp dir");
    let bytes = onnx::model_with_value_info(
        13,
        &[
            onnx::node("Relu", &["x"], &["h"], &[]),
            onnx::node("Identity", &["h"], &["y"], &[]),
        ],
        &[],
        &[onnx::value("x", elem::FLOAT, &[Param("N")])],
        &[onnx::untyped("y")],
        &[onnx::value("h", elem::FLOAT, &[Param("N")])],
    );
    let model = write(dir.path(), "relu.onnx", &bytes);
    let x = write(dir.path(), "x.npy", &npy_f32(&[3], &[1.0, -2.0, 3.0]));
    let out = dir.path().join("out");
    let args = [
        "model",
        utf8(&model),
        "--input",
        &input("x", &x),
        "-o",
        utf8(&out),
    ];
    let json = ok(&[&args[..], &["--json"]].concat());
    let report: Json = serde_json::from_str(&json).expect("json");
    assert_eq!(report["pinned"], true, "{report}");
    assert_eq!(report["pin_error"], Json::Null, "{report}");
    assert_eq!(read_f32(&out.join("y.npy")), [1.0, 0.0, 3.0]);
    let text = ok(&args);
    assert!(!text.contains("inputs not pinned"), "{text}");
}

/// Issue 39: `--input-shape NAME=SHAPE` (as tract's `-i`, trtexec's `--shapes` and
/// benchmark_app's `-shape`) makes a random input of that shape, whose sizes bind the model's
/// symbols as a file's do and pin the model: the concat's K and L unify at 3, and in the tiny
/// model `ids: [batch, 3]` of shape 3x3 makes `last: [batch, 1]` [3, 1].
#[test]
fn model_input_shape_makes_a_random_input_of_that_shape() {
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tiny.onnx");
    let text = ok(&["model", utf8(&tiny), "--input-shape", "ids=3x3"]);
    assert!(text.contains("input ids: I64 [3, 3] (random)"), "{text}");
    assert!(text.contains("input last: I64 [3, 1] (random)"), "{text}");
    assert!(text.contains("output picked: F32 [3, 4]"), "{text}");
    let c = concat();
    let json = ok(&[
        "model",
        utf8(&c.model),
        "--input-shape",
        "a=2x3",
        "--input-shape",
        "b=[1,3]",
        "--input-shape",
        "ids=(4,)",
        "--compare",
        "--json",
    ]);
    let report: Json = serde_json::from_str(&json).expect("json");
    assert_eq!(report["pinned"], true, "{json}");
    assert_eq!(report["outputs"][0]["shape"], serde_json::json!([4, 3]));
    for (input, shape) in
        report["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .zip([[2, 3].as_slice(), &[1, 3], &[4]])
    {
        assert_eq!(input["shape"], serde_json::json!(shape), "{json}");
        assert_eq!(input["file"], Json::Null, "{json}");
    }
    // The flag wins over a file of --inputs for the same input, as --input does.
    let dir = c.dir.path().join("set");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("ids.npy"), npy_i64(&[2], &IDS)).unwrap();
    let text = ok(&[
        "model",
        utf8(&tiny),
        "--inputs",
        utf8(&dir),
        "--input-shape",
        "ids=1x3",
    ]);
    assert!(text.contains("input ids: I64 [1, 3] (random)"), "{text}");
}

/// Every mistake in `--input-shape` is one line naming the flag: an input the model lacks, a
/// malformed shape, a rank or fixed dim the declaration contradicts, a symbol bound to two
/// sizes, the input given twice or given a file too.
#[test]
fn model_input_shape_errors_are_one_line() {
    let dir = TempDir::new().expect("temp dir");
    let out = dir.path().join("out");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let tiny = utf8(&data.join("tiny.onnx")).to_string();
    let ids_file = input("ids", &data.join("tiny_ids.npy"));
    let shapes = "expected a shape such as 2x3x4, 2,3,4 or [2,3,4] (0 is an empty dim; scalar \
                  or [] is rank 0)";
    let declared = "which the model declares i64 [batch, 3]";
    for (args, expected) in [
        (
            &["--input-shape", "foo=2x3"][..],
            "error: --input-shape foo=2x3: the model has no input foo (its inputs: ids, last)"
                .to_string(),
        ),
        (
            &["--input-shape", "ids"],
            "error: --input-shape ids: expected NAME=SHAPE".into(),
        ),
        (
            &["--input-shape", "ids=2xx3"],
            format!("error: --input-shape ids=2xx3: {shapes}"),
        ),
        (
            &["--input-shape", "ids=-1"],
            format!("error: --input-shape ids=-1: {shapes}"),
        ),
        (
            &["--input-shape", "ids=6"],
            format!("error: --input-shape ids=6: a shape [6] does not fit input 'ids', {declared}"),
        ),
        (
            &["--input-shape", "ids=2x4"],
            format!(
                "error: --input-shape ids=2x4: a shape [2, 4] does not fit input 'ids', {declared}"
            ),
        ),
        (
            &["--input-shape", "ids=2x3", "--input-shape", "last=4x1"],
            "error: symbol batch: --input-shape ids=2x3 (dim 0) makes it 2, --input-shape \
             last=4x1 (dim 0) makes it 4"
                .into(),
        ),
        (
            &["--dim", "batch=3", "--input-shape", "ids=2x3"],
            "error: symbol batch: --dim batch=3 makes it 3, --input-shape ids=2x3 (dim 0) makes \
             it 2"
                .into(),
        ),
        (
            &["--input-shape", "ids=2x3", "--input-shape", "ids=1x3"],
            "error: --input-shape ids: given twice".into(),
        ),
        (
            &["--input", &ids_file, "--input-shape", "ids=2x3"],
            "error: --input-shape ids=2x3: input ids is given a file too (--input ids=...); \
             give one or the other"
                .into(),
        ),
    ] {
        let line = refused(&[&[tiny.as_str()], args].concat(), &out);
        assert_eq!(line, expected, "{args:?}");
    }
    // A shape too large for memory is refused before anything is made.
    let line = refused(&[&tiny, "--input-shape", "ids=1000000000000x3"], &out);
    assert!(line.starts_with("error: input ids: "), "{line}");
}

/// Issue 39: `--assert-output`, as tract spells it, is `--assert-outputs`: it checks the
/// outputs (exit 1 on a difference), and `--atol` and `--rtol` take it as theirs.
#[test]
fn model_assert_output_is_tracts_spelling_of_assert_outputs() {
    let c = concat();
    let set = test_data_set(&c);
    let text = ok(&[
        "model",
        utf8(&c.model),
        "--inputs",
        utf8(&set),
        "--assert-output",
        utf8(&set),
        "--atol",
        "0",
    ]);
    assert!(
        text.contains("assert-outputs: all 1 outputs match"),
        "{text}"
    );
    let mut wrong = Y;
    wrong[5] = 4.0;
    let refs = reference_dir(
        c.dir.path(),
        "wrong",
        &[("y.npy", npy_f32(&[2, 3], &wrong))],
    );
    let out = run(&[
        "model",
        utf8(&c.model),
        "--inputs",
        utf8(&set),
        "--assert-output",
        utf8(&refs),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let help = ok(&["model", "--help"]);
    assert!(help.contains("assert-output"), "{help}");
}
