//! The scatters through the `gather-jit` binary: every vendored scatter vector
//! (`tests/conformance/scatter/`, from ONNX Runtime, ONNX, OpenVINO and the specs) run exactly as
//! issue 32 writes the command, `gather-jit run --op scatter-nd|scatter-elements|scatter-update
//! --flavor F [--axis A] [--reduction R] [--use-init-val B] DATA INDICES UPDATES -o OUT`, its
//! output compared bit for bit with the vector's; errors as one line, status 2, no output file,
//! inputs untouched; the flags' rules; `explain` and `bench` (`--json`, `--in-place`,
//! `--check`, `--indices`).

mod common;
#[path = "../../tests/vectors/mod.rs"]
#[allow(
    dead_code,
    reason = "the file walk and the quantized vectors' loaders are the root tests'"
)]
mod vectors;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use common::{gather_jit, npy, ok, one_error_line, usage_error};
use gather_jit::scatter::{
    Reduction, ScatterFlavor, ScatterOp, ScatterSignature, interpret_scatter,
};
use gather_jit::{DType, IndexType};
use serde_json::Value;
use vectors::gathers::{dtype_of, encode_data, encode_indices, shape_of, str_field, values_of};

/// The scatter vectors, sorted by path.
fn case_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).expect("the vectors' directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "json") {
                out.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance/scatter");
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.sort();
    files
}

/// numpy's `descr` of `dtype` in native byte order (bf16 as a 2-byte void, as `run` reads it).
fn descr(dtype: DType) -> String {
    let order = if cfg!(target_endian = "little") {
        '<'
    } else {
        '>'
    };
    let (kind, size) = match dtype {
        DType::Bool => return "|b1".into(),
        DType::Bf16 => return "|V2".into(),
        DType::I8 => return "|i1".into(),
        DType::U8 => return "|u1".into(),
        DType::F16 => ('f', 2),
        DType::F32 => ('f', 4),
        DType::F64 => ('f', 8),
        DType::I16 => ('i', 2),
        DType::U16 => ('u', 2),
        DType::I32 => ('i', 4),
        DType::U32 => ('u', 4),
        DType::I64 => ('i', 8),
        DType::U64 => ('u', 8),
    };
    format!("{order}{kind}{size}")
}

fn index_descr(index_type: IndexType) -> String {
    descr(DType::from_name(index_type.name()).expect("an integer type is a dtype"))
}

/// The `descr`, shape and data bytes of an `.npy` file `run` wrote.
fn read_npy(path: &Path) -> (String, Vec<usize>, Vec<u8>) {
    let file = fs::read(path).expect("output written");
    assert_eq!(&file[..8], b"\x93NUMPY\x01\x00");
    let len = u16::from_le_bytes([file[8], file[9]]) as usize;
    let header = String::from_utf8(file[10..10 + len].to_vec()).unwrap();
    let field = |key: &str| {
        let start = header.find(key).expect(key) + key.len();
        header[start..].trim_start_matches([':', ' ']).to_string()
    };
    let descr = field("'descr'");
    let descr = descr[1..].split('\'').next().unwrap().to_string();
    let shape = field("'shape'");
    let shape = shape[1..shape.find(')').unwrap()]
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().unwrap())
        .collect();
    (descr, shape, file[10 + len..].to_vec())
}

/// A vector's case: its signature (built here from the JSON, as `tests/scatter_conformance.rs`
/// does) and the command-line flags that say the same.
struct Case {
    name: String,
    json: Value,
    sig: ScatterSignature,
    flags: Vec<String>,
}

fn case(path: &Path) -> Case {
    let (name, json) = vectors::read_case(path);
    let flavor_name = str_field(&name, &json, "flavor");
    let flavor = ScatterFlavor::from_name(flavor_name).expect("a flavor");
    let attrs = &json["attrs"];
    let axis = attrs["axis"].as_i64();
    let (op, flag) = match str_field(&name, &json, "op") {
        "ScatterND" => (ScatterOp::Nd, "scatter-nd"),
        "ScatterElements" => (
            ScatterOp::Elements {
                axis: axis.expect("axis"),
            },
            "scatter-elements",
        ),
        "ScatterUpdate" => (
            ScatterOp::Update {
                axis: axis.expect("axis"),
            },
            "scatter-update",
        ),
        other => panic!("{name}: op {other}"),
    };
    let reduction_name = str_field(&name, attrs, "reduction");
    let reduction = Reduction::from_name(reduction_name).expect("a reduction");
    let use_init_val = attrs.get("use_init_val").map(|v| v.as_bool().unwrap());
    let dtype = dtype_of(&name, &json["data"]);
    let index_type = IndexType::from_name(str_field(&name, &json["indices"], "dtype")).unwrap();
    let sig = ScatterSignature::new(
        op,
        &shape_of(&name, &json["data"]),
        &shape_of(&name, &json["indices"]),
        &shape_of(&name, &json["updates"]),
    )
    .with_flavor(flavor)
    .with_reduction(reduction)
    .with_use_init_val(use_init_val.unwrap_or(true))
    .with_dtype(dtype)
    .with_index_type(index_type);
    let mut flags: Vec<String> = vec!["--op".into(), flag.into(), "--flavor".into()];
    flags.push(flavor_name.into());
    if let Some(axis) = axis {
        flags.extend(["--axis".into(), axis.to_string()]);
    }
    if reduction != Reduction::None {
        // ONNX's own spellings (add, mul) under its flavor, OpenVINO's elsewhere.
        let spelled = match (flavor, reduction) {
            (ScatterFlavor::Onnx, Reduction::Sum) => "add",
            (ScatterFlavor::Onnx, Reduction::Prod) => "mul",
            _ => reduction.name(),
        };
        flags.extend(["--reduction".into(), spelled.into()]);
    }
    if let Some(value) = use_init_val {
        flags.extend(["--use-init-val".into(), value.to_string()]);
    }
    Case {
        name,
        json,
        sig,
        flags,
    }
}

/// The case's inputs: the vector's values, or zeros of the shapes for a validation case
/// (which has none).
fn inputs(case: &Case) -> [Vec<u8>; 3] {
    let sig = &case.sig;
    let zeros = |shape: &[usize], size: usize| vec![0u8; shape.iter().product::<usize>() * size];
    match case.json["data"].get("values") {
        Some(data) => [
            encode_data(&case.name, sig.dtype, data),
            encode_indices(&case.name, sig.index_type, &case.json["indices"]["values"]),
            encode_data(&case.name, sig.dtype, &case.json["updates"]["values"]),
        ],
        None => [
            zeros(&sig.data_shape, sig.dtype.size()),
            zeros(&sig.indices_shape, sig.index_type.size()),
            zeros(&sig.updates_shape, sig.dtype.size()),
        ],
    }
}

/// Whether `got` is the expected element: bit for bit, but an expected `"nan"` matches any NaN
/// (frameworks disagree on NaN payloads; `tests/conformance/scatter/README.md`).
fn same_element(dtype: DType, got: &[u8], want: &[u8], expected: &Value) -> bool {
    if expected.as_str() != Some("nan") {
        return got == want;
    }
    match dtype {
        DType::F16 => half::f16::from_ne_bytes([got[0], got[1]]).is_nan(),
        DType::Bf16 => half::bf16::from_ne_bytes([got[0], got[1]]).is_nan(),
        DType::F32 => f32::from_ne_bytes(got.try_into().unwrap()).is_nan(),
        DType::F64 => f64::from_ne_bytes(got.try_into().unwrap()).is_nan(),
        _ => false,
    }
}

/// Runs one case through `run` with `extra` flags in a fresh directory; returns a failure
/// description, or `None` when the output (or the error) is the vector's.
fn run_case(case: &Case, extra: &[&str]) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let sig = &case.sig;
    let [data, indices, updates] = inputs(case);
    let files = [
        (
            "data.npy",
            npy(&descr(sig.dtype), false, &sig.data_shape, &data),
        ),
        (
            "indices.npy",
            npy(
                &index_descr(sig.index_type),
                false,
                &sig.indices_shape,
                &indices,
            ),
        ),
        (
            "updates.npy",
            npy(&descr(sig.dtype), false, &sig.updates_shape, &updates),
        ),
    ];
    let mut args: Vec<String> = vec!["run".into()];
    args.extend(case.flags.iter().cloned());
    args.extend(extra.iter().map(|s| s.to_string()));
    for (name, bytes) in &files {
        let path = dir.path().join(name);
        fs::write(&path, bytes).unwrap();
        args.push(path.to_str().unwrap().into());
    }
    let out_path = dir.path().join("out.npy");
    args.extend(["-o".into(), out_path.to_str().unwrap().into()]);
    let output = gather_jit().args(&args).output().unwrap();
    let name = &case.name;
    for (file, bytes) in &files {
        if fs::read(dir.path().join(file)).unwrap() != *bytes {
            return Some(format!("{name}: {file} was changed"));
        }
    }
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let Some(category) = case.json.get("expect_error").and_then(Value::as_str) else {
        if !output.status.success() {
            return Some(format!("{name}: {args:?} failed: {stderr}"));
        }
        let (out_descr, shape, bytes) = read_npy(&out_path);
        if out_descr != descr(sig.dtype) || shape != sig.data_shape {
            return Some(format!("{name}: wrote {out_descr} {shape:?}"));
        }
        let expected = &case.json["expected"];
        let want = encode_data(name, sig.dtype, &expected["values"]);
        if bytes.len() != want.len() {
            return Some(format!(
                "{name}: {} bytes, expected {}",
                bytes.len(),
                want.len()
            ));
        }
        let size = sig.dtype.size();
        let values = values_of(name, &expected["values"]);
        for (i, (got, want)) in bytes.chunks(size).zip(want.chunks(size)).enumerate() {
            if !same_element(sig.dtype, got, want, &values[i]) {
                return Some(format!(
                    "{name}: element {i} is {got:?}, expected {} ({want:?})",
                    values[i]
                ));
            }
        }
        return None;
    };
    let lines: Vec<&str> = stderr.lines().collect();
    if output.status.code() != Some(2) || lines.len() != 1 || !output.stdout.is_empty() {
        return Some(format!(
            "{name}: expected a {category:?} error as one line and status 2, got {:?}: {stderr:?}",
            output.status
        ));
    }
    if out_path.exists() || fs::read_dir(dir.path()).unwrap().count() != files.len() {
        return Some(format!("{name}: a file was written beside the inputs"));
    }
    // The library's own words: validation's error, or the interpreter's on these inputs. A
    // flavor that does not define the op is the CLI's, which names those that do.
    let expected = match sig.validate() {
        Err(_) if category == "flavor mismatch" => None,
        Err(e) => Some(e.to_string()),
        Ok(layout) => Some(
            interpret_scatter(&layout, &data, &indices, &updates)
                .expect_err("the interpreter fails too")
                .to_string(),
        ),
    };
    let line = lines[0];
    let fits = match &expected {
        Some(message) => line == format!("error: {message}"),
        None => line.contains("does not define --op") && line.contains("the flavors that do"),
    };
    (!fits).then(|| format!("{name}: {line:?}, expected {expected:?}"))
}

/// Runs every case with `extra` flags; returns the (flavor, op, reduction) combinations whose
/// output was checked.
fn run_every_case(extra: &[&str]) -> BTreeSet<(String, String, String)> {
    let files = case_files();
    assert!(files.len() >= 500, "{} vectors", files.len());
    let mut failures = Vec::new();
    let mut covered = BTreeSet::new();
    for path in &files {
        let case = case(path);
        match run_case(&case, extra) {
            Some(failure) => failures.push(failure),
            None if case.json.get("expect_error").is_none() => {
                covered.insert((
                    case.sig.flavor.name().to_string(),
                    case.sig.op.name().to_string(),
                    case.sig.reduction.name().to_string(),
                ));
            }
            None => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed with {extra:?}:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
    covered
}

/// Every flavor, op and reduction of the issue's table.
fn every_combination() -> BTreeSet<(String, String, String)> {
    let mut all = BTreeSet::new();
    for flavor in ScatterFlavor::ALL {
        for op in [
            ScatterOp::Nd,
            ScatterOp::Elements { axis: 0 },
            ScatterOp::Update { axis: 0 },
        ] {
            if !flavor.supports(op.name()) {
                continue;
            }
            for reduction in flavor.reductions() {
                all.insert((
                    flavor.name().to_string(),
                    op.name().to_string(),
                    reduction.name().to_string(),
                ));
            }
        }
    }
    all
}

#[test]
fn every_vector_through_run_as_the_issue_writes_it() {
    let covered = run_every_case(&[]);
    let missing: Vec<_> = every_combination().difference(&covered).cloned().collect();
    assert!(missing.is_empty(), "no vector checked {missing:?}");
}

#[test]
fn every_vector_in_place_and_checked() {
    let covered = run_every_case(&["--in-place", "--check"]);
    assert_eq!(covered, every_combination());
}

/// `words` split at spaces, then `rest`: a command line whose fixed part reads as one string.
fn cmd<'a>(words: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    words
        .split_whitespace()
        .chain(rest.iter().copied())
        .collect()
}

fn f32s(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A directory with a ScatterND case: data `[4, 2]` f32 zeros, indices `[n, 1]` i64, updates
/// `[n, 2]` counting from 1.
fn nd_case(indices: &[i64]) -> (tempfile::TempDir, [String; 3]) {
    let dir = tempfile::tempdir().unwrap();
    let i64s: Vec<u8> = indices.iter().flat_map(|x| x.to_le_bytes()).collect();
    let n = indices.len();
    let counting: Vec<f32> = (1..=2 * n).map(|i| i as f32).collect();
    let files = [
        ("data.npy", npy("<f4", false, &[4, 2], &f32s(&[0.0; 8]))),
        ("indices.npy", npy("<i8", false, &[n, 1], &i64s)),
        ("updates.npy", npy("<f4", false, &[n, 2], &f32s(&counting))),
    ];
    let paths = files.map(|(name, bytes)| {
        let path = dir.path().join(name);
        fs::write(&path, bytes).unwrap();
        path.to_str().unwrap().to_string()
    });
    (dir, paths)
}

fn path_in(dir: &tempfile::TempDir, name: &str) -> String {
    dir.path().join(name).to_str().unwrap().to_string()
}

#[test]
fn a_bad_index_is_one_line_naming_it_and_no_file() {
    let (dir, [data, indices, updates]) = nd_case(&[1, 7]);
    let out = path_in(&dir, "out.npy");
    for extra in ["", "--in-place", "--check --json"] {
        let fixed = format!("run --op scatter-nd --reduction add {extra}");
        let line = usage_error(&cmd(&fixed, &[&data, &indices, &updates, "-o", &out]));
        assert_eq!(
            line,
            "error: ScatterND: index 7 at position [1, 0] of indices is out of range for data \
             dim 0 of size 4"
        );
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 3, "{extra}");
    }
    // Negative indices count from the end under onnx, and are errors with --negative invalid.
    let (dir, [data, indices, updates]) = nd_case(&[-1, 0]);
    let out = path_in(&dir, "out.npy");
    let files = [&data[..], &indices, &updates, "-o", &out];
    ok(&cmd("run --op scatter-nd", &files));
    let (_, _, bytes) = read_npy(Path::new(&out));
    assert_eq!(bytes, f32s(&[3.0, 4.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0]));
    let line = usage_error(&cmd("run --op scatter-nd --negative invalid", &files));
    assert!(line.contains("index -1 at position [0, 0]"), "{line}");
}

#[test]
fn tensorrt_duplicates_are_one_line_naming_both() {
    let (dir, [data, indices, updates]) = nd_case(&[2, 2]);
    let out = path_in(&dir, "out.npy");
    let files = [&data[..], &indices, &updates, "-o", &out];
    let line = usage_error(&cmd("run --op scatter-nd --flavor tensorrt", &files));
    assert_eq!(
        line,
        "error: ScatterND: indices at positions [0] and [1] both write data at [2] (flavor \
         tensorrt forbids duplicate indices)"
    );
    assert!(!Path::new(&out).exists());
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_kept() {
    let (dir, [data, indices, updates]) = nd_case(&[1, 3]);
    for (target, role) in [
        (&data, "data"),
        (&indices, "indices"),
        (&updates, "updates"),
    ] {
        let before = fs::read(target).unwrap();
        for fixed in ["run --op scatter-nd", "run --op scatter-nd --in-place"] {
            let line = usage_error(&cmd(fixed, &[&data, &indices, &updates, "-o", target]));
            let expected = format!("is the same file as the {role} input");
            assert!(line.contains(&expected), "{line}");
            assert_eq!(fs::read(target).unwrap(), before, "{role}: {fixed}");
        }
    }
    // Through a link too.
    #[cfg(unix)]
    {
        let link = path_in(&dir, "link.npy");
        std::os::unix::fs::symlink(&updates, &link).unwrap();
        let files = [&data[..], &indices, &updates, "-o", &link];
        let line = usage_error(&cmd("run --op scatter-nd", &files));
        assert!(line.contains("same file as the updates input"), "{line}");
    }
}

#[test]
fn run_json_names_the_scatter_and_its_updates() {
    let (dir, [data, indices, updates]) = nd_case(&[1, 3]);
    let out = path_in(&dir, "out.npy");
    let files = [&data[..], &indices, &updates, "-o", &out];
    let text = ok(&cmd(
        "run --op scatter-nd --reduction mul --check --json",
        &files,
    ));
    let json: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["op"], "ScatterND");
    assert_eq!(json["flavor"], "onnx");
    assert_eq!(json["updates"], updates.as_str());
    assert_eq!(json["in_place"], false);
    assert_eq!(json["checked"], true);
    assert_eq!(json["shape"], serde_json::json!([4, 2]));
    assert!(
        json["scatter_ns"].is_u64() && json.get("gather_ns").is_none(),
        "{json}"
    );
    assert!(
        json["signature"]
            .as_str()
            .unwrap()
            .contains("reduction=prod")
    );
    // Products with zeros stay zeros.
    let (_, _, bytes) = read_npy(Path::new(&out));
    assert_eq!(bytes, vec![0u8; 32]);
}

#[test]
fn one_archive_holds_data_indices_and_updates() {
    let dir = tempfile::tempdir().unwrap();
    let archive = path_in(&dir, "in.npz");
    let mut zip = zip::ZipWriter::new(fs::File::create(&archive).unwrap());
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let i32s: Vec<u8> = [2i32, 2].iter().flat_map(|x| x.to_le_bytes()).collect();
    for (name, bytes) in [
        ("data.npy", npy("<f4", false, &[3], &f32s(&[1.0, 2.0, 3.0]))),
        ("indices.npy", npy("<i4", false, &[2], &i32s)),
        ("updates.npy", npy("<f4", false, &[2], &f32s(&[10.0, 20.0]))),
    ] {
        zip.start_file(name, options).unwrap();
        std::io::Write::write_all(&mut zip, &bytes).unwrap();
    }
    zip.finish().unwrap();
    let out = path_in(&dir, "out.npy");
    ok(&cmd(
        "run --op scatter-elements --reduction add",
        &[&archive, "-o", &out],
    ));
    let (_, _, bytes) = read_npy(Path::new(&out));
    assert_eq!(bytes, f32s(&[1.0, 2.0, 33.0]));
    // One array of it is not enough.
    let member = format!("{archive}:data");
    let line = usage_error(&cmd("run --op scatter-elements", &[&member, "-o", &out]));
    assert!(line.contains("data, indices and updates"), "{line}");
}

#[test]
fn flags_that_do_not_fit_the_op_are_refused() {
    let (dir, [data, indices, updates]) = nd_case(&[1, 3]);
    let out = path_in(&dir, "out.npy");
    let files = [&data[..], &indices, &updates, "-o", &out];
    let cases = [
        (
            "--op scatter-nd --axis 0",
            "--axis does not apply to --op scatter-nd",
        ),
        (
            "--op scatter-nd --batch-dims 1",
            "--batch-dims does not apply",
        ),
        ("--op scatter-nd --oob clamp", "--oob does not apply"),
        ("--op scatter-nd --bits 4", "--bits does not apply"),
        (
            "--op scatter-nd --reduction mean",
            "ScatterND: flavor onnx does not define reduction mean on f32 (it has none, add, \
             mul, max, min)",
        ),
        (
            "--op scatter-nd --use-init-val false",
            "does not support use_init_val=false",
        ),
        (
            "--op scatter-nd --flavor openvino-gather8",
            "--flavor openvino-gather8 is a gather flavor; --op scatter-nd takes onnx, \
             openvino-scatterndupdate3, openvino-scatterndupdate15, tensorrt",
        ),
        (
            "--op scatter-update --flavor onnx",
            "--flavor onnx does not define --op scatter-update (ScatterUpdate); the flavors \
             that do: openvino-scatterupdate3",
        ),
        (
            "--flavor onnx",
            "--op is required with --flavor onnx (gather, gather-elements, gather-nd, \
             scatter-nd or scatter-elements)",
        ),
        ("--op gather", "SCALES and ZERO_POINTS are inputs of"),
        (
            "--op scatter-nd --reduction avg",
            "invalid value 'avg' for '--reduction",
        ),
        (
            "--op scatter-nd --use-init-val no",
            "invalid value 'no' for '--use-init-val",
        ),
    ];
    for (flags, expected) in cases {
        let line = usage_error(&cmd(&format!("run {flags}"), &files));
        assert!(line.contains(expected), "{flags}: {line}");
        assert!(!Path::new(&out).exists());
    }
    // The gathers refuse the scatters' flags.
    let two = [&data[..], &indices, "-o", &out];
    let line = usage_error(&cmd("run --op gather --reduction add", &two));
    assert!(
        line.contains("--reduction does not apply to --op gather"),
        "{line}"
    );
    let line = usage_error(&cmd("run --op gather --in-place", &two));
    assert!(
        line.contains("--in-place applies to the scatters only"),
        "{line}"
    );
    let line = usage_error(&cmd(
        "explain --op gather --data-shape 4x2 --indices-shape 2 --updates-shape 2x2",
        &[],
    ));
    assert!(
        line.contains("--updates-shape does not apply to --op gather"),
        "{line}"
    );
    // Missing or mistyped inputs.
    let line = usage_error(&cmd("run --op scatter-nd", &two));
    assert!(
        line.contains("UPDATES is required with --op scatter-nd"),
        "{line}"
    );
    let wrong = [&data[..], &indices, &indices, "-o", &out];
    let line = usage_error(&cmd("run --op scatter-nd", &wrong));
    assert!(
        line.contains("updates must have data's element type f32, found i64"),
        "{line}"
    );
    let wrong = [&data[..], &data, &updates, "-o", &out];
    let line = usage_error(&cmd("run --op scatter-nd", &wrong));
    assert!(line.contains("indices must have an integer type"), "{line}");
}

#[test]
fn scatter_update_takes_its_one_flavor_by_default() {
    // data [2, 3], axis 1, indices [2, 0]: updates [2, 2] write columns 2 and 0.
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: Vec<u8>| {
        let path = path_in(&dir, name);
        fs::write(&path, bytes).unwrap();
        path
    };
    let i64s: Vec<u8> = [2i64, 0].iter().flat_map(|x| x.to_le_bytes()).collect();
    let data = write("data.npy", npy("<f4", false, &[2, 3], &f32s(&[0.0; 6])));
    let indices = write("indices.npy", npy("<i8", false, &[2], &i64s));
    let updates = f32s(&[1.0, 2.0, 3.0, 4.0]);
    let updates = write("updates.npy", npy("<f4", false, &[2, 2], &updates));
    let out = path_in(&dir, "out.npy");
    let files = [&data[..], &indices, &updates, "-o", &out];
    let text = ok(&cmd("run --op scatter-update --axis 1 --json", &files));
    let json: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["flavor"], "openvino-scatterupdate3");
    let want = f32s(&[2.0, 0.0, 1.0, 4.0, 0.0, 3.0]);
    assert_eq!(read_npy(Path::new(&out)).2, want);
    // The flavor alone names the op.
    fs::remove_file(&out).unwrap();
    ok(&cmd(
        "run --flavor openvino-scatterupdate3 --axis 1",
        &files,
    ));
    assert_eq!(read_npy(Path::new(&out)).2, want);
}

#[test]
fn explain_json_of_a_scatter() {
    let text = ok(&cmd(
        "explain --op scatter-elements --flavor openvino-scatterelementsupdate12 --axis 1 \
         --reduction mean --use-init-val false --data-shape 4x64 --indices-shape 4x16 \
         --in-place --check --json",
        &[],
    ));
    let json: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["op"], "ScatterElements(axis=1)");
    assert_eq!(json["flavor"], "openvino-scatterelementsupdate12");
    assert_eq!(json["reduction"], "mean");
    assert_eq!(json["use_init_val"], false);
    assert_eq!(json["in_place"], true);
    assert_eq!(json["checked"], true);
    // The rule's updates shape: the indices'.
    assert_eq!(json["updates_shape"], serde_json::json!([4, 16]));
    assert_eq!(json["output_shape"], serde_json::json!([4, 64]));
    assert_eq!(json["output_bytes"], 4 * 64 * 4);
    // In place under a reduction: indices and updates read, and the elements they land on
    // read and written.
    assert_eq!(json["bytes_moved"], 4 * 16 * 8 + 3 * 4 * 16 * 4);
    assert!(json["code_bytes"].as_u64().unwrap() > 0);
    assert!(json["clif"].as_str().unwrap().contains("function"));
    assert!(
        json["explain"]
            .as_str()
            .unwrap()
            .contains("ScatterElements")
    );
    // Text; an updates shape given, to the rule or against it.
    let nd = "explain --op scatter-nd --data-shape 8x4 --indices-shape 3x1";
    let text = ok(&cmd(nd, &["--updates-shape", "3x4", "--check"]));
    assert!(text.contains("call:          out of place"), "{text}");
    assert!(
        text.contains("check:         agrees with the interpreter"),
        "{text}"
    );
    let line = usage_error(&cmd(nd, &["--updates-shape", "3x5"]));
    assert_eq!(
        line,
        "error: ScatterND: updates have shape [3, 5] but must have shape [3, 4] \
         (indices.shape[:-1] + data.shape[k:] with k = indices.shape[-1])"
    );
    let line = usage_error(&cmd(nd, &["--target", "host"]));
    assert!(line.contains("objects hold gathers only"), "{line}");
}

/// The keys `bench --json` has for every op.
const BENCH_KEYS: [&str; 12] = [
    "median_ns",
    "p90_ns",
    "min_ns",
    "memcpy_ns",
    "memcpy_bytes",
    "fill_ns",
    "compile_ns",
    "first_compile_ns",
    "kernel_compile_ns",
    "cache_hit_ns",
    "code_bytes",
    "gbps",
];

#[test]
fn bench_json_in_place_checked_and_with_given_indices() {
    let text = ok(&cmd(
        "bench --op scatter-nd --reduction add --data-shape 64x32 --indices-shape 40x1 \
         --dtype bf16 --index-type i32 --in-place --check --time-ms 5 --json",
        &[],
    ));
    let json: Value = serde_json::from_str(&text).unwrap();
    for key in BENCH_KEYS {
        assert!(json[key].is_number(), "{key}: {json}");
    }
    assert_eq!(json["in_place"], true);
    assert_eq!(json["checked"], true);
    assert_eq!(json["reduction"], "sum");
    assert_eq!(json["dtype"], "bf16");
    assert_eq!(json["index_type"], "i32");
    assert_eq!(json["updates_shape"], serde_json::json!([40, 32]));
    assert_eq!(json["memcpy_bytes"], 64 * 32 * 2);
    assert_eq!(json["indices_file"], Value::Null);

    // Exact indices from a file: its shape and type are the signature's.
    let dir = tempfile::tempdir().unwrap();
    let ids = path_in(&dir, "ids.npy");
    let values: Vec<u8> = [3u16, 3, 0, 9]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    fs::write(&ids, npy("<u2", false, &[4, 1], &values)).unwrap();
    let bench = "bench --op scatter-nd --time-ms 5 --indices";
    let text = ok(&cmd(
        bench,
        &[&ids, "--data-shape", "10x8", "--check", "--json"],
    ));
    let json: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["indices_shape"], serde_json::json!([4, 1]));
    assert_eq!(json["index_type"], "u16");
    assert_eq!(json["indices_file"], ids.as_str());
    assert_eq!(json["in_place"], false);
    let line = usage_error(&cmd(
        bench,
        &[&ids, "--data-shape", "10x8", "--indices-shape", "4"],
    ));
    assert!(
        line.contains("shape [4, 1] differs from --indices-shape [4]"),
        "{line}"
    );
    let line = usage_error(&cmd(
        bench,
        &[&ids, "--data-shape", "10x8", "--index-type", "i64"],
    ));
    assert!(
        line.contains("index type u16 differs from --index-type i64"),
        "{line}"
    );
    // A bad index in the file is the kernel's error, as `run` words it.
    let line = usage_error(&cmd(bench, &[&ids, "--data-shape", "9x8"]));
    assert!(line.contains("index 9 at position [3, 0]"), "{line}");
    // Without --indices, --indices-shape is required.
    let line = usage_error(&cmd("bench --op scatter-nd --data-shape 10x8", &[]));
    assert!(line.contains("--indices-shape is required"), "{line}");
}

#[test]
fn bench_draws_distinct_indices_where_tensorrt_forbids_duplicates() {
    for (op, indices) in [("scatter-nd", "50x2"), ("scatter-elements", "8x40")] {
        let bench = format!("bench --op {op} --flavor tensorrt --data-shape 10x40");
        let flags = [
            "--indices-shape",
            indices,
            "--check",
            "--time-ms",
            "5",
            "--json",
        ];
        let json: Value = serde_json::from_str(&ok(&cmd(&bench, &flags))).unwrap();
        assert_eq!(json["flavor"], "tensorrt", "{op}");
    }
    let line = usage_error(&cmd(
        "bench --op scatter-nd --flavor tensorrt --data-shape 3x4 --indices-shape 4x1",
        &[],
    ));
    assert!(
        line.contains("cannot make 4 distinct indices among 3 places"),
        "{line}"
    );
}

#[test]
fn bench_text_and_what_a_scatter_refuses() {
    let text = ok(&cmd(
        "bench --op scatter-update --axis 1 --data-shape 4x100x8 --indices-shape 5 --time-ms 5",
        &[],
    ));
    assert!(text.contains("call          out of place"), "{text}");
    assert!(text.contains("jit / memcpy"), "{text}");
    let nd = "--op scatter-nd --data-shape 4x2 --indices-shape 2x1";
    let line = usage_error(&cmd(&format!("bench {nd} --no-bands"), &[]));
    assert!(
        line.contains("--no-bands tunes the banding of the plain gathers"),
        "{line}"
    );
    let object = std::env::temp_dir().join("gather-jit-scatter-test-never-written.o");
    let aot = format!("aot {nd} --target host -o");
    let out = gather_jit()
        .args(cmd(&aot, &[object.to_str().unwrap()]))
        .output()
        .unwrap();
    let line = one_error_line(&["aot"], out);
    assert!(line.contains("objects hold gathers only"), "{line}");
    assert!(!object.exists());
}
