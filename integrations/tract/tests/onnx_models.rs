//! Models and expected outputs written by others: the ONNX backend node tests of Gather,
//! GatherElements, GatherND, Scatter, ScatterElements and ScatterND (expected outputs from
//! onnx's numpy reference), and small BERT-, GPT-2- and recommender-style models, KV-cache
//! writes (f32 and f16), an embedding gradient (scatter-add) and scatters with the other
//! reductions, whose expected outputs are ONNX Runtime's. They live in tests/models/ and
//! `scripts/make_test_models.py` rewrites them.
//!
//! Each model runs through `gather_jit_tract::onnx()` (optimized, as a user would run it) and
//! must match: bit-identically, except the outputs a case's tolerances.txt gives a tolerance
//! (float math besides the gathers). Each model also runs through tract's own ops, whose
//! differences and panics are reported, not failed.

use std::cmp::Ordering;
use std::fs::{self, File};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use tract_onnx::prelude::*;
use tract_onnx::tract_hir::internal::{TractErrorContext, bail, ensure};

/// Every case the script writes; the test fails if one is missing or unexpected, so it cannot
/// pass by running nothing.
const CASES: [&str; 33] = [
    "bert_embeddings",
    "embedding_grad",
    "gpt2_head",
    "kv_cache_update",
    "kv_cache_update_f16",
    "recommender",
    "scatter_reductions",
    "test_gather_0",
    "test_gather_1",
    "test_gather_2d_indices",
    "test_gather_elements_0",
    "test_gather_elements_1",
    "test_gather_elements_negative_indices",
    "test_gather_negative_indices",
    "test_gathernd_example_float32",
    "test_gathernd_example_int32",
    "test_gathernd_example_int32_batch_dim1",
    "test_scatter_elements_with_axis",
    "test_scatter_elements_with_duplicate_indices",
    "test_scatter_elements_with_negative_indices",
    "test_scatter_elements_with_reduction_max",
    "test_scatter_elements_with_reduction_min",
    "test_scatter_elements_with_reduction_mul",
    "test_scatter_elements_without_axis",
    "test_scatter_with_axis",
    "test_scatter_without_axis",
    "test_scatternd",
    "test_scatternd_add",
    "test_scatternd_max",
    "test_scatternd_max_with_element_indices",
    "test_scatternd_min",
    "test_scatternd_min_with_element_indices",
    "test_scatternd_multiply",
];

/// The ONNX ops that `gather_jit_tract::onnx()` makes JIT ops.
const JIT_OP_TYPES: [&str; 6] = [
    "Gather",
    "GatherElements",
    "GatherND",
    "Scatter",
    "ScatterElements",
    "ScatterND",
];

/// How an output must match the expected one.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Tolerance {
    Exact,
    Close { rtol: f64, atol: f64 },
}

struct Case {
    name: String,
    model: PathBuf,
    inputs: Vec<Tensor>,
    expected: Vec<Tensor>,
    tolerances: Vec<Tolerance>,
    /// Gather, GatherElements, GatherND, Scatter, ScatterElements and ScatterND nodes in the
    /// ONNX graph: each must become a JIT op.
    jit_nodes: usize,
}

fn models_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/models")
}

/// `input_0.pb, input_1.pb, ...` (or `output_*`) of a test data set, in index order.
fn load_tensors(onnx: &tract_onnx::Onnx, dir: &Path, kind: &str) -> TractResult<Vec<Tensor>> {
    let mut tensors = vec![];
    loop {
        let path = dir.join(format!("{kind}_{}.pb", tensors.len()));
        if !path.exists() {
            return Ok(tensors);
        }
        let proto = tract_onnx::tensor::proto_from_reader(File::open(&path)?)?;
        tensors.push(
            tract_onnx::tensor::load_tensor(&*onnx.provider, &proto, None)
                .with_context(|| format!("loading {}", path.display()))?,
        );
    }
}

/// tolerances.txt: `<output> exact` or `<output> <rtol> <atol>` per line; outputs not listed
/// are exact.
fn load_tolerances(dir: &Path, outputs: usize) -> TractResult<Vec<Tolerance>> {
    let mut tolerances = vec![Tolerance::Exact; outputs];
    let path = dir.join("tolerances.txt");
    if !path.exists() {
        return Ok(tolerances);
    }
    for line in fs::read_to_string(&path)?.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let output: usize = words[0].parse()?;
        ensure!(output < outputs, "{}: no output {output}", path.display());
        tolerances[output] = match words[1..] {
            ["exact"] => Tolerance::Exact,
            [rtol, atol] => Tolerance::Close {
                rtol: rtol.parse()?,
                atol: atol.parse()?,
            },
            _ => bail!("{}: bad line {line:?}", path.display()),
        };
    }
    Ok(tolerances)
}

fn load_case(onnx: &tract_onnx::Onnx, dir: &Path) -> TractResult<Case> {
    let model = dir.join("model.onnx");
    let data = dir.join("test_data_set_0");
    let inputs = load_tensors(onnx, &data, "input")?;
    let expected = load_tensors(onnx, &data, "output")?;
    ensure!(
        !inputs.is_empty() && !expected.is_empty(),
        "{}: no inputs or outputs",
        data.display()
    );
    let tolerances = load_tolerances(dir, expected.len())?;
    let proto = onnx.proto_model_for_path(&model)?;
    let jit_nodes = proto
        .graph
        .iter()
        .flat_map(|g| &g.node)
        .filter(|n| JIT_OP_TYPES.contains(&n.op_type.as_str()))
        .count();
    Ok(Case {
        name: dir.file_name().unwrap().to_string_lossy().into_owned(),
        model,
        inputs,
        expected,
        tolerances,
        jit_nodes,
    })
}

/// Loads, optimizes and runs `case` with `onnx`; also returns the names of the optimized
/// model's ops whose names start with "Jit".
fn run(onnx: &tract_onnx::Onnx, case: &Case) -> TractResult<(Vec<Tensor>, Vec<String>)> {
    let model = onnx.model_for_path(&case.model)?.into_optimized()?;
    let jit_ops = model
        .nodes()
        .iter()
        .map(|n| n.op().name().into_owned())
        .filter(|name| name.starts_with("Jit"))
        .collect();
    let plan = model.into_runnable()?;
    let inputs = case
        .inputs
        .iter()
        .cloned()
        .map(|t| t.into_tvalue())
        .collect();
    let outputs = plan.run(inputs)?;
    Ok((
        outputs.into_iter().map(|t| t.into_tensor()).collect(),
        jit_ops,
    ))
}

/// The largest absolute difference when `got` matches `expected` as `tolerance` asks (0 when
/// exact), else why not.
fn compare(got: &Tensor, expected: &Tensor, tolerance: Tolerance) -> Result<f64, String> {
    if got.datum_type() != expected.datum_type() || got.shape() != expected.shape() {
        return Err(format!(
            "got {:?} {:?}, expected {:?} {:?}",
            got.datum_type(),
            got.shape(),
            expected.datum_type(),
            expected.shape()
        ));
    }
    match tolerance {
        Tolerance::Exact => {
            // Bytes, not `==`, so that -0.0 against 0.0 or NaN payloads count as differences.
            let same = if got.datum_type() == DatumType::String {
                got == expected
            } else {
                got.as_bytes() == expected.as_bytes()
            };
            if same {
                Ok(0.0)
            } else {
                Err(format!(
                    "not bit-identical: got {got:?}, expected {expected:?}"
                ))
            }
        }
        Tolerance::Close { rtol, atol } => {
            let got = got.cast_to::<f64>().map_err(|e| e.to_string())?;
            let expected = expected.cast_to::<f64>().map_err(|e| e.to_string())?;
            let got = got.try_as_plain_ram().map_err(|e| e.to_string())?;
            let expected = expected.try_as_plain_ram().map_err(|e| e.to_string())?;
            let got = got.as_slice::<f64>().map_err(|e| e.to_string())?;
            let expected = expected.as_slice::<f64>().map_err(|e| e.to_string())?;
            // A NaN on either side compares as `None`, so it fails too.
            let bad = got.iter().zip(expected).position(|(g, e)| {
                matches!(
                    (g - e).abs().partial_cmp(&(atol + rtol * e.abs())),
                    Some(Ordering::Greater) | None
                )
            });
            if let Some(i) = bad {
                Err(format!(
                    "element {i} is {}, expected {} (rtol {rtol}, atol {atol})",
                    got[i], expected[i]
                ))
            } else {
                Ok(got
                    .iter()
                    .zip(expected)
                    .map(|(g, e)| (g - e).abs())
                    .fold(0.0, f64::max))
            }
        }
    }
}

/// Every output of `outputs` against the case's expected ones: the largest absolute
/// difference of each, or the mismatches.
fn compare_all(case: &Case, outputs: &[Tensor]) -> Result<Vec<f64>, Vec<String>> {
    if outputs.len() != case.expected.len() {
        return Err(vec![format!(
            "{} outputs, expected {}",
            outputs.len(),
            case.expected.len()
        )]);
    }
    let mut diffs = vec![];
    let mut problems = vec![];
    for (i, ((got, expected), &tol)) in outputs
        .iter()
        .zip(&case.expected)
        .zip(&case.tolerances)
        .enumerate()
    {
        match compare(got, expected, tol) {
            Ok(diff) => diffs.push(diff),
            Err(e) => problems.push(format!("output {i}: {e}")),
        }
    }
    if problems.is_empty() {
        Ok(diffs)
    } else {
        Err(problems)
    }
}

#[test]
fn onnx_models_match_their_expected_outputs() {
    let jit = gather_jit_tract::onnx();
    let native = tract_onnx::onnx();
    let mut dirs: Vec<PathBuf> = fs::read_dir(models_dir())
        .expect("tests/models")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let names: Vec<String> = dirs
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, CASES, "the cases under tests/models");

    let mut failures = vec![];
    let mut run_count = 0;
    for dir in &dirs {
        let case = load_case(&jit, dir).unwrap_or_else(|e| panic!("{}: {e:?}", dir.display()));
        match run(&jit, &case) {
            Ok((outputs, jit_ops)) => {
                run_count += 1;
                let mut problems = compare_all(&case, &outputs).err().unwrap_or_default();
                // Every gather and scatter here reads a model input, so none may be folded or
                // left to tract's own ops.
                if jit_ops.len() != case.jit_nodes {
                    problems.push(format!(
                        "{} gathers and scatters in the ONNX graph but JIT ops {jit_ops:?} after \
                         optimization",
                        case.jit_nodes
                    ));
                }
                if problems.is_empty() {
                    println!(
                        "{}: ok, {}; {jit_ops:?}",
                        case.name,
                        describe(&case, &outputs)
                    );
                } else {
                    failures.push(format!("{}: {}", case.name, problems.join("; ")));
                }
            }
            Err(e) => failures.push(format!("{}: {e:?}", case.name)),
        }

        // tract's own ops, for the record only; their panic message is reported below rather
        // than printed with a backtrace by the default hook.
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let native_run = catch_unwind(AssertUnwindSafe(|| run(&native, &case)));
        std::panic::set_hook(hook);
        match native_run {
            Ok(Ok((outputs, _))) => match compare_all(&case, &outputs) {
                Ok(_) => println!(
                    "{}: tract's own ops agree, {}",
                    case.name,
                    describe(&case, &outputs)
                ),
                Err(problems) => println!(
                    "{}: tract's own ops DIFFER: {}",
                    case.name,
                    problems.join("; ")
                ),
            },
            Ok(Err(e)) => println!("{}: tract's own ops FAIL: {e:#}", case.name),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                println!("{}: tract's own ops PANIC: {message}", case.name);
            }
        }
    }
    assert!(failures.is_empty(), "failures:\n{}", failures.join("\n"));
    assert_eq!(run_count, CASES.len(), "cases run");
}

/// How each output matched, for outputs that passed: "bit-identical" or the largest absolute
/// difference within the tolerance.
fn describe(case: &Case, outputs: &[Tensor]) -> String {
    let diffs = compare_all(case, outputs).unwrap_or_default();
    let parts: Vec<String> = diffs
        .iter()
        .zip(&case.tolerances)
        .enumerate()
        .map(|(i, (&diff, tol))| match tol {
            Tolerance::Close { rtol, atol } if diff > 0.0 => {
                format!("output {i} max |diff| {diff:e} (rtol {rtol}, atol {atol})")
            }
            _ if outputs[i].as_bytes() == case.expected[i].as_bytes() => {
                format!("output {i} bit-identical")
            }
            _ => format!("output {i} equal within tolerance"),
        })
        .collect();
    parts.join(", ")
}
