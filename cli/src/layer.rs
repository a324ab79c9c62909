//! `gather-jit layer`: the Gather, GatherND and GatherElements layers of an OpenVINO IR file
//! (read by [`crate::openvino`]), checked against their declared outputs and run.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use gather_jit::{DType, IndexType};

use crate::failure::{Failure, Result, eprint_line};
use crate::files::{self, Cap};
use crate::openvino::{Defaults, bin_path, parse};
use crate::progress::Progress;
use crate::random::XorShift;
use crate::report::{self, Check};
use crate::table::{self, TableArgs};
use crate::values::{parse_count, parse_dtype, parse_index_type, parse_integer};

/// Check and run the gather layers of an OpenVINO IR XML file.
///
/// Finds every Gather, GatherND and GatherElements layer (a whole model, or bare `<layer>`
/// elements as in the OpenVINO op specs), checks that the output dims the file declares equal
/// the inferred ones (a mismatch exits with status 2), then compiles and runs each layer on
/// seeded random data with random valid indices through the JIT and the interpreter and prints
/// the same table as `demo`. The interpreter computes an output of more than 2^20 elements
/// only at both ends and at a sample seeded by --seed (--full-check: all of it).
#[derive(Args, Debug)]
#[command(
    after_help = "Gather's axis (input port 2) comes from a `<data axis>` attribute, a comment
`<!-- axis = N -->` at the port, the Const layer feeding it (value read from FILE.bin), or
else --axis.

Examples:
  gather-jit layer examples/seed_layers.xml
  gather-jit layer examples/seed_layers.xml --full-check   (the interpreter on every element: seconds)
  gather-jit layer model.xml --axis 0 --json
  gather-jit layer big_model.xml --no-check"
)]
pub struct LayerArgs {
    /// The IR file (`model.xml`, or a file of bare `<layer>` elements)
    pub file: PathBuf,
    /// Axis of Gather layers whose axis the file does not give
    #[arg(long, allow_hyphen_values = true, value_parser = parse_integer)]
    pub axis: Option<i64>,
    /// Element type of data for ports without a `precision`
    #[arg(long, default_value = "f32", value_parser = parse_dtype, allow_hyphen_values = true)]
    pub dtype: DType,
    /// Index type for ports without a `precision`
    #[arg(long, default_value = "i64", value_parser = parse_index_type, allow_hyphen_values = true)]
    pub index_type: IndexType,
    /// Seed of the random data and indices
    #[arg(long, default_value_t = 42, allow_hyphen_values = true, value_parser = parse_count)]
    pub seed: u64,
    /// Do not run the reference interpreter: only compile, run and time the JIT; the report
    /// says the check was skipped
    #[arg(long)]
    pub no_check: bool,
    /// Run the reference interpreter on every output element, however large the output (by
    /// default one of more than 2^20 elements is checked at both ends and at a sample seeded by
    /// --seed: the interpreter is naive and takes seconds on such an output)
    #[arg(long, conflicts_with = "no_check")]
    pub full_check: bool,
    #[command(flatten)]
    pub table: TableArgs,
}

/// Runs `gather-jit layer`.
///
/// # Errors
/// An unreadable or invalid file, no gather layer, an invalid layer or a declared output that
/// differs, buffers too large for memory (status 2); a disagreement (status 1).
pub fn main(args: &LayerArgs, out: &mut dyn Write) -> Result<()> {
    if args
        .file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
    {
        return Err(Failure::usage(format!(
            "{} is an ONNX model, not OpenVINO IR: use `gather-jit model {}` (built with the \
             `model` feature)",
            args.file.display(),
            args.file.display()
        )));
    }
    let text = String::from_utf8(files::read_whole(&args.file, Cap::IR_XML)?).map_err(|_| {
        Failure::usage(format!(
            "cannot read {}: it is not UTF-8 text",
            args.file.display()
        ))
    })?;
    let bin = bin_path(&args.file);
    let defaults = Defaults {
        axis: args.axis,
        dtype: args.dtype,
        index_type: args.index_type,
    };
    let parsed =
        parse(&text, Some(&bin), Some(defaults)).map_err(|e| e.context(args.file.display()))?;
    for note in &parsed.notes {
        eprint_line(format_args!("note: {note}"));
    }
    if parsed.layers.is_empty() {
        return Err(Failure::usage(format!(
            "{}: no Gather, GatherND or GatherElements layer found",
            args.file.display()
        )));
    }
    let problems: Vec<Failure> = parsed
        .layers
        .iter()
        .filter_map(|l| l.check().err())
        .collect();
    if let Some((last, rest)) = problems.split_last() {
        for problem in rest {
            eprint_line(format_args!("error: {}", problem.one_line()));
        }
        return Err(Failure::usage(last.one_line()));
    }
    let check = match (args.no_check, args.full_check) {
        (true, _) => Check::Skip,
        (false, true) => Check::Interpreter,
        (false, false) => Check::Sampled { seed: args.seed },
    };
    let mut rng = XorShift::new(args.seed);
    let progress = Progress::new("layer", parsed.layers.len() as u64);
    let rows = parsed
        .layers
        .iter()
        .map(|layer| {
            progress.start(format!("{}: random inputs", layer.label));
            report::run_case_with(&layer.random_case(&mut rng)?, check, &progress)
        })
        .collect::<Result<Vec<_>>>()?;
    drop(progress);
    table::finish(out, &rows, &args.table)
}
