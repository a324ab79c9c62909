//! `gather-jit demo`: the seed examples, the seed IR layers and an embedding lookup.

use std::io::Write;

use clap::Args;
use gather_jit::{DType, Flavor, IndexType, Signature};

use crate::failure::Result;
use crate::openvino;
use crate::progress::Progress;
use crate::random::XorShift;
use crate::report::{self, Case, Check};
use crate::table::{self, TableArgs};
use crate::values::parse_count;

/// The four `<layer>` examples of the seed specs (GatherND-8 x3, Gather-1), verbatim.
const SEED_LAYERS: &str = include_str!("../../examples/seed_layers.xml");

/// Run the seed examples, the OpenVINO IR layer shapes and a BERT-size embedding lookup
/// through the JIT and the interpreter, and print a table.
///
/// Spec examples run on the values the specs print and are checked against the printed output
/// too; the layers and the embedding run on seeded random data with random valid indices. The
/// interpreter computes an output of more than 2^20 elements (the Gather-1 layer's) only at
/// both ends and at a sample seeded by --seed (--full-check: all of it).
#[derive(Args, Debug)]
#[command(after_help = "Example:
  gather-jit demo
  gather-jit demo --wide
  gather-jit demo --seed 7 --json
  gather-jit demo --full-check")]
pub struct DemoArgs {
    /// Seed of the random data and indices
    #[arg(long, default_value_t = 42, allow_hyphen_values = true, value_parser = parse_count)]
    pub seed: u64,
    /// Run the reference interpreter on every output element, however large the output (by
    /// default one of more than 2^20 elements is checked at both ends and at a sample seeded by
    /// --seed: the interpreter is naive and takes seconds on such an output)
    #[arg(long)]
    pub full_check: bool,
    #[command(flatten)]
    pub table: TableArgs,
}

/// Runs the demo.
///
/// # Errors
/// Status 1 if the JIT and the interpreter (or the spec) disagree anywhere; status 2 if a
/// case's buffers do not fit in memory.
pub fn main(args: &DemoArgs, out: &mut dyn Write) -> Result<()> {
    let mut rng = XorShift::new(args.seed);
    let examples = spec_examples();
    let layers = openvino::parse(SEED_LAYERS, None, None)?.layers;
    let progress = Progress::new("demo", (examples.len() + layers.len() + 1) as u64);
    let check = match args.full_check {
        true => Check::Interpreter,
        false => Check::Sampled { seed: args.seed },
    };
    let mut rows = Vec::new();
    for case in examples {
        rows.push(report::run_case_with(&case, Check::Interpreter, &progress)?);
    }
    // Each random case is made, run and dropped in turn, so that only one case's buffers
    // (at most the Gather-1 layer's output, and with --full-check the interpreter's copy of it)
    // are alive at a time.
    for spec in layers {
        progress.start(format!("{}: random inputs", spec.label));
        rows.push(report::run_case_with(
            &spec.random_case(&mut rng)?,
            check,
            &progress,
        )?);
    }
    progress.start("embedding lookup: random inputs");
    rows.push(report::run_case_with(
        &embedding_lookup(&mut rng)?,
        check,
        &progress,
    )?);
    drop(progress);
    table::finish(out, &rows, &args.table)
}

/// ONNX Gather of token ids into a [30522, 768] f32 table (BERT-base's vocabulary).
fn embedding_lookup(rng: &mut XorShift) -> Result<Case> {
    let signature = Signature::gather(&[30522, 768], &[8, 128], 0, 0);
    Case::random("embedding lookup".to_string(), signature, rng)
}

fn i32_bytes(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

/// One spec example: `i32` data with `i64` indices, or (TensorRT) `f32` data with `i32` indices.
fn example(label: &str, signature: Signature, data: &[i32], indices: &[i64], out: &[i32]) -> Case {
    let signature = signature.with_dtype(DType::I32);
    Case {
        label: label.to_string(),
        data: i32_bytes(data),
        indices: indices.iter().flat_map(|i| i.to_ne_bytes()).collect(),
        expected: Some(i32_bytes(out)),
        signature,
    }
}

fn trt_example(label: &str, signature: Signature, indices: &[i32], out: &[f32]) -> Case {
    const DATA: [f32; 10] = [-3.0, -2.0, -1.0, 10.0, -25.0, 0.0, 1.0, 2.0, -2.0, -1.0];
    Case {
        label: label.to_string(),
        signature: signature
            .with_flavor(Flavor::TensorRt)
            .with_index_type(IndexType::I32),
        data: f32_bytes(&DATA),
        indices: i32_bytes(indices),
        expected: Some(f32_bytes(out)),
    }
}

/// The examples of the seed specs with the values they print: OpenVINO GatherND-8 1-7,
/// ONNX GatherND 1-5 (modeci_mdf's page) and TensorRT IGatherLayer's five.
fn spec_examples() -> Vec<Case> {
    let nd8 = |data: &[usize], indices: &[usize], b: i64| {
        Signature::gather_nd(data, indices, b).with_flavor(Flavor::OpenvinoGatherNd8)
    };
    let onnx = Signature::gather_nd;
    let d2x2 = [1, 2, 3, 4];
    let d2x3x4: Vec<i32> = (1..=24).collect();
    let d1x2x2x4: Vec<i32> = (1..=16).collect();
    let m2x2 = [0, 1, 2, 3];
    let m2x2x2 = [0, 1, 2, 3, 4, 5, 6, 7];
    vec![
        example(
            "GatherND-8 ex1",
            nd8(&[2, 2], &[2, 2], 0),
            &d2x2,
            &[0, 0, 1, 0],
            &[1, 3],
        ),
        example(
            "GatherND-8 ex2",
            nd8(&[2, 2], &[2, 1], 0),
            &d2x2,
            &[1, 0],
            &[3, 4, 1, 2],
        ),
        example(
            "GatherND-8 ex3",
            nd8(&[2, 2], &[2, 1, 1], 0),
            &d2x2,
            &[1, 0],
            &[3, 4, 1, 2],
        ),
        example(
            "GatherND-8 ex4",
            nd8(&[2, 2], &[2, 1], 1),
            &d2x2,
            &[1, 0],
            &[2, 3],
        ),
        example(
            "GatherND-8 ex5",
            nd8(&[2, 3, 4], &[2, 1], 1),
            &d2x3x4,
            &[1, 0],
            &[5, 6, 7, 8, 13, 14, 15, 16],
        ),
        example(
            "GatherND-8 ex6",
            nd8(&[2, 3, 4], &[2, 3, 1, 1], 2),
            &d2x3x4,
            &[1, 0, 2, 0, 2, 2],
            &[2, 5, 11, 13, 19, 23],
        ),
        example(
            "GatherND-8 ex7",
            nd8(&[1, 2, 2, 4], &[1, 2, 2, 1], 3),
            &d1x2x2x4,
            &[1, 0, 3, 2],
            &[2, 5, 12, 15],
        ),
        example(
            "ONNX GatherND ex1",
            onnx(&[2, 2], &[2, 2], 0),
            &m2x2,
            &[0, 0, 1, 1],
            &[0, 3],
        ),
        example(
            "ONNX GatherND ex2",
            onnx(&[2, 2], &[2, 1], 0),
            &m2x2,
            &[1, 0],
            &[2, 3, 0, 1],
        ),
        example(
            "ONNX GatherND ex3",
            onnx(&[2, 2, 2], &[2, 2], 0),
            &m2x2x2,
            &[0, 1, 1, 0],
            &[2, 3, 4, 5],
        ),
        example(
            "ONNX GatherND ex4",
            onnx(&[2, 2, 2], &[2, 1, 2], 0),
            &m2x2x2,
            &[0, 1, 1, 0],
            &[2, 3, 4, 5],
        ),
        example(
            "ONNX GatherND ex5",
            onnx(&[2, 2, 2], &[2, 1], 1),
            &m2x2x2,
            &[1, 0],
            &[2, 3, 4, 5],
        ),
        trt_example(
            "TensorRT DEFAULT",
            Signature::gather(&[2, 1, 5], &[1, 3], 2, 0),
            &[2, 1, 1],
            &[-1.0, -2.0, -2.0, 2.0, 1.0, 1.0],
        ),
        trt_example(
            "TensorRT DEFAULT 2D",
            Signature::gather(&[2, 1, 5], &[2, 2], 2, 0),
            &[2, 1, 3, 3],
            &[-1.0, -2.0, 10.0, 10.0, 2.0, 1.0, -2.0, -2.0],
        ),
        trt_example(
            "TensorRT ELEMENT axis 2",
            Signature::gather_elements(&[2, 1, 5], &[2, 1, 5], 2),
            &[0, 1, 2, 3, 4, 4, 2, 3, 3, 1],
            &[-3.0, -2.0, -1.0, 10.0, -25.0, -1.0, 2.0, -2.0, -2.0, 1.0],
        ),
        trt_example(
            "TensorRT ELEMENT axis 0",
            Signature::gather_elements(&[2, 1, 5], &[2, 1, 5], 0),
            &[0, 1, 1, 0, 0, 1, 1, 0, 0, 1],
            &[-3.0, 1.0, 2.0, 10.0, -25.0, 0.0, 1.0, -1.0, 10.0, -1.0],
        ),
        // The page prints [[-1.0, 1.0]]; GatherND's shape rule gives [2] (see tests/seeds.rs).
        trt_example(
            "TensorRT ND",
            Signature::gather_nd(&[2, 1, 5], &[2, 3], 0),
            &[0, 0, 2, 1, 0, 1],
            &[-1.0, 1.0],
        ),
    ]
}
