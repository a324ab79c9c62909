//! `gather-jit model`: an ONNX model through tract with JIT-backed gathers (the
//! `gather-jit-tract` integration), or with tract's own ops, or both compared. `inputs.rs`
//! makes its inputs (files given, random tensors for the rest) and pins the model's input facts
//! to them, `tensors.rs` reads tensor files (`.npy`, `.npz`, ONNX `.pb`) and sets of them,
//! `reference.rs` checks the outputs against reference files (`--assert-outputs`), `load.rs`
//! reads, parses and optimises the model, and `outputs.rs` writes the outputs (`-o DIR`).

mod datum;
mod inputs;
mod load;
mod outputs;
mod proto;
mod reference;
mod tensors;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use gather_jit_tract::{catch_panic, run_checked};
use serde_json::json;
use tract_onnx::prelude::*;
use tract_onnx::tract_core::plan::SimpleState;

use crate::failure::{Failure, Result};
use crate::timing::Plan;
use inputs::Inputs;
use load::{Loaded, analyse, parse};
use outputs::{output_files, output_names, write_outputs};
use reference::{References, Tolerance};

#[derive(Args, Debug)]
#[command(after_help = "Examples:
  gather-jit model model.onnx
  gather-jit model model.onnx --input ids=ids.npy --dim batch=4 -o out/
  gather-jit model model.onnx --input-shape ids=2x8 --bench
  gather-jit model model.onnx --input 'onnx::ids:0=ids.pb'
  gather-jit model model.onnx --inputs test_data_set_0 --assert-outputs test_data_set_0
  gather-jit model model.onnx --inputs in/ --assert-outputs ref.npz --atol 1e-5 --rtol 1e-4
  gather-jit model model.onnx --compare
  gather-jit model model.onnx --bench --json

Inputs given (--input, --inputs) pin the model: tract analyses it at their types and shapes,
their sizes binding the symbolic dims the model declares. Inputs not given are random, of the
declared type and of the shape --input-shape gives, else the declared one (floats in [-1, 1),
integers 0 or 1, so that they are valid indices of most axes).

Exit status: 0 success, 1 an output differs from its reference (--assert-outputs) or between
the two ways (--compare), 2 any other error.")]
pub struct ModelArgs {
    /// The ONNX model.
    file: PathBuf,
    /// An input as NAME=FILE (repeatable): FILE is .npy, FILE.npz:ARRAY, or an ONNX TensorProto
    /// (.pb). Wins over --inputs for the same input.
    #[arg(long = "input", value_name = "NAME=FILE")]
    inputs: Vec<String>,
    /// Inputs from DIR (input_N.pb matched by the name in the file or else by N, NAME.npy by
    /// name), or from an .npz archive (arrays by name).
    #[arg(long = "inputs", value_name = "DIR")]
    inputs_dir: Option<PathBuf>,
    /// A symbolic dim as NAME=N (repeatable).
    #[arg(long = "dim", value_name = "NAME=N")]
    dims: Vec<String>,
    /// The shape of a random input as NAME=SHAPE (repeatable), e.g. ids=2x8 or ids=[2,8]: its
    /// sizes bind the symbols the model declares there. Wins over --inputs for the same input.
    #[arg(
        long = "input-shape",
        value_name = "NAME=SHAPE",
        allow_hyphen_values = true
    )]
    input_shapes: Vec<String>,
    /// Write each output as OUTDIR/NAME.npy.
    #[arg(short = 'o', long = "output-dir", value_name = "OUTDIR")]
    output_dir: Option<PathBuf>,
    /// Check every output against its reference in DIR (output_N.pb, NAME.npy) or an .npz
    /// archive: exit 1 naming the first that differs.
    // The alias is tract's spelling, which users of its CLI type first.
    #[arg(
        long = "assert-outputs",
        visible_alias = "assert-output",
        value_name = "DIR"
    )]
    assert_outputs: Option<PathBuf>,
    /// Absolute tolerance of float outputs under --assert-outputs.
    #[arg(long, value_name = "ATOL", default_value_t = 1e-7, requires = "assert_outputs",
          allow_hyphen_values = true, value_parser = parse_tolerance)]
    atol: f64,
    /// Relative tolerance of float outputs under --assert-outputs: |got - ref| <= ATOL + RTOL x
    /// |ref|.
    #[arg(long, value_name = "RTOL", default_value_t = 1e-3, requires = "assert_outputs",
          allow_hyphen_values = true, value_parser = parse_tolerance)]
    rtol: f64,
    /// Run with tract's own gather ops instead of the JIT-backed ones.
    #[arg(long)]
    native: bool,
    /// Run both ways and check that every output is bit-identical.
    #[arg(long, conflicts_with = "native")]
    compare: bool,
    /// Time the whole model both ways.
    #[arg(long)]
    bench: bool,
    /// Time budget of each way's runs under --bench, and of its gather nodes' runs
    #[arg(long, value_name = "MS", default_value_t = 500, requires = "bench",
          allow_hyphen_values = true, value_parser = crate::values::parse_count)]
    time_ms: u64,
    /// Untimed runs of each way before its timed ones under --bench (after the checked run
    /// every model makes)
    #[arg(long, value_name = "N", default_value_t = 1, requires = "bench",
          allow_hyphen_values = true, value_parser = crate::values::parse_count)]
    warmup: u64,
    /// Time exactly N runs of each way (and N of its gather nodes) under --bench instead of
    /// as many as fit in --time-ms
    #[arg(long, value_name = "N", requires = "bench", allow_hyphen_values = true,
          value_parser = |text: &str| crate::values::count_between(text, 1, u64::MAX))]
    iterations: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 42, allow_hyphen_values = true,
          value_parser = crate::values::parse_count)]
    seed: u64,
}

/// A tolerance: a finite number, 0 or more.
fn parse_tolerance(text: &str) -> std::result::Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|t| t.is_finite() && *t >= 0.0)
        .ok_or_else(|| format!("{text} is not a tolerance (a finite number, 0 or more)"))
}

/// Runs the plan, each node's outputs checked for size first (`run_checked`: tract's own ops
/// would write past an allocation whose size wrapped), turning an error or a panic of tract's
/// into a failure.
fn run_plan(plan: &Arc<TypedSimplePlan>, inputs: TVec<TValue>, how: &str) -> Result<TVec<TValue>> {
    settle(how, catch_panic(how, || Ok(run_checked(plan, inputs))))
}

/// The failure of a run `how` under [`catch_panic`]: its panic (`"{how} panicked: ..."`) or its
/// error (`"{how}: ..."`).
fn settle<T>(how: &str, run: TractResult<TractResult<T>>) -> Result<T> {
    match run {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(Failure::usage(format!("{how}: {e:#}"))),
        Err(panic) => Err(Failure::usage(format!("{panic:#}"))),
    }
}

/// Runs `run` as `timing` says: its warm-up runs, then its iterations, or else as many runs as
/// fit in its budget (at least 5, at most 10 000); returns how many runs were timed.
fn timed_runs(timing: Plan, mut run: impl FnMut() -> Result<()>) -> Result<u64> {
    for _ in 0..timing.warmup {
        run()?;
    }
    let started = Instant::now();
    let mut runs = 0;
    let more = |runs: u64| match timing.iterations {
        Some(n) => runs < n,
        None => runs < 5 || (runs < 10_000 && started.elapsed() < timing.budget),
    };
    while more(runs) {
        run()?;
        runs += 1;
    }
    Ok(runs)
}

/// The median time of one run of `plan` on `inputs`, over the runs `timing` asks for, and
/// their number.
fn time(
    plan: &Arc<TypedSimplePlan>,
    inputs: &TVec<TValue>,
    how: &str,
    timing: Plan,
) -> Result<(Duration, u64)> {
    let mut times = Vec::new();
    let runs = timed_runs(timing, || {
        // Unchecked, so as to time tract's own run: `main` ran these inputs checked first.
        let at = Instant::now();
        settle(how, catch_panic(how, || Ok(plan.run(inputs.clone()))))?;
        times.push(at.elapsed());
        Ok(())
    })?;
    // The warm-up runs come first; their times are dropped.
    let mut times = times.split_off(times.len() - runs as usize);
    times.sort();
    Ok((times[times.len() / 2], runs))
}

/// The median time of each gather node (by name) over the runs of `plan` that `timing` asks
/// for, each node timed around its own evaluation.
fn gather_node_times(
    plan: &Arc<TypedSimplePlan>,
    inputs: &TVec<TValue>,
    how: &str,
    timing: Plan,
) -> Result<BTreeMap<String, Duration>> {
    let mut times: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
    let mut warm = timing.warmup;
    timed_runs(timing, || {
        // The warm-up runs time into a map of their own, which is dropped.
        let mut warming = BTreeMap::new();
        let into = match warm {
            0 => &mut times,
            _ => {
                warm -= 1;
                &mut warming
            }
        };
        let run = catch_panic(how, || Ok(run_timing_gathers(plan, inputs.clone(), into)));
        settle(how, run).map(drop)
    })?;
    Ok(times
        .into_iter()
        .map(|(name, mut t)| {
            t.sort();
            let median = t[t.len() / 2];
            (name, median)
        })
        .collect())
}

/// One run of `plan` on `inputs`, each gather node's evaluation timed into `times`.
fn run_timing_gathers(
    plan: &Arc<TypedSimplePlan>,
    inputs: TVec<TValue>,
    times: &mut BTreeMap<String, Vec<Duration>>,
) -> TractResult<TVec<TValue>> {
    let mut state = SimpleState::new(plan)?;
    state.run_plan_with_eval(inputs, |ctx, op_state, node, input| {
        let at = Instant::now();
        let outputs = tract_onnx::tract_core::plan::eval(ctx, op_state, node, input);
        if node.op().name().contains("Gather") {
            times
                .entry(node.name.clone())
                .or_default()
                .push(at.elapsed());
        }
        outputs
    })
}

/// Whether two outputs are the same: plain numbers bit for bit (NaN payloads included), other
/// types (strings, tract's symbolic dims) and tensors whose storage is not plain by tract's
/// equality, since their bytes are pointers to heap data or not in host memory.
fn same_output(a: &Tensor, b: &Tensor) -> bool {
    if a.datum_type() != b.datum_type() || a.shape() != b.shape() {
        return false;
    }
    match (a.datum_type().is_copy(), a.as_plain_ram(), b.as_plain_ram()) {
        (true, Some(a), Some(b)) => a.as_bytes() == b.as_bytes(),
        _ => a == b,
    }
}

/// The process's panic hook, silenced while it lives: `model` turns every panic of tract's
/// into one error line (with [`catch_panic`]), and the default hook would print the panic, and
/// maybe a backtrace, before it. Set once for the whole command rather than around each call,
/// since the hook is global.
struct QuietPanics(Option<PanicHook>);

/// A panic hook, as `std::panic::take_hook` returns it.
type PanicHook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send + 'static>;

impl QuietPanics {
    fn install() -> QuietPanics {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        QuietPanics(Some(previous))
    }
}

impl Drop for QuietPanics {
    fn drop(&mut self) {
        if let Some(previous) = self.0.take() {
            std::panic::set_hook(previous);
        }
    }
}

/// Runs `gather-jit model`: loads the model, runs it (and the other way for `--compare` and
/// `--bench`), writes its outputs, and reports; every failure, a panic of tract's included, is
/// one [`Failure`].
pub fn main(args: &ModelArgs, out: &mut dyn Write) -> Result<()> {
    let _quiet = QuietPanics::install();
    // Every phase below catches tract's panics with its own name; this catches anything else,
    // so that the command's one error line is the rule whatever panics.
    catch_panic("gather-jit model", || Ok(model(args, out)))
        .unwrap_or_else(|e| Err(Failure::usage(format!("{e:#}"))))
}

fn model(args: &ModelArgs, out: &mut dyn Write) -> Result<()> {
    let (first, second_how, how) = match args.native {
        true => ("tract's own ops", "gather-jit", true),
        false => ("gather-jit", "tract's own ops", false),
    };
    let parsed = parse(&args.file, how)?;
    let given = catch_panic("reading the inputs", || Ok(Inputs::new(args, &parsed)))
        .map_err(|e| Failure::usage(format!("{e:#}")))??;
    // Parses, pins (if `pinned`) and analyses the model one way.
    let load = |parsed: Option<InferenceModel>, native: bool, pinned: bool| -> Result<Loaded> {
        let mut model = match parsed {
            Some(model) => model,
            None => parse(&args.file, native)?,
        };
        if pinned {
            given.pin(&mut model)?;
        }
        analyse(&args.file, model, native)
    };
    // tract's analysis can fail at concrete shapes where it succeeds with symbols (facts
    // inside subgraphs keep their symbols, and some ops' rules fail on the sizes): the model
    // is then analysed as it declares its inputs, and the report says why.
    let (loaded, pin_error) = match load(Some(parsed), how, true) {
        Ok(loaded) => (loaded, None),
        Err(pinned) if given.pins() => match load(None, how, false) {
            Ok(loaded) => (loaded, Some(pinned.one_line())),
            Err(_) => return Err(pinned),
        },
        Err(e) => return Err(e),
    };
    let other = match args.compare || args.bench {
        true => Some(load(None, !how, pin_error.is_none())?),
        false => None,
    };
    let model = loaded.plan.model();
    let outlets = model.output_outlets().map_err(Failure::usage)?;
    let names = output_names(outlets, |o| model.outlet_label(o).map(str::to_string));
    let references = match &args.assert_outputs {
        Some(dir) => Some(References::read(dir, &names, given.names())?),
        None => None,
    };
    let files = match &args.output_dir {
        Some(dir) => {
            let mut reads: Vec<(String, &Path)> = vec![("model input".into(), &args.file)];
            reads.extend(given.files());
            reads.extend(references.iter().flat_map(References::files));
            let reads: Vec<(&str, &Path)> = (reads.iter())
                .map(|(role, path)| (role.as_str(), *path))
                .collect();
            Some((dir, output_files(dir, &names, model, &reads)?))
        }
        None => None,
    };
    let given_pins = given.pins();
    let (inputs, inputs_report) = catch_panic("preparing the inputs", || {
        Ok(given.tensors(model, args.seed))
    })
    .map_err(|e| Failure::usage(format!("{e:#}")))??;
    let outputs = run_plan(&loaded.plan, inputs.clone(), first)?;
    // Where `-o` writes output `i` (None without it).
    let output_file = |i: usize| {
        files
            .as_ref()
            .and_then(|(_, files)| files.get(i))
            .map(|(path, _)| path.display().to_string())
    };
    let mut report = json!({
        "model": args.file.display().to_string(),
        "gathers": loaded.gathers.iter().map(|(name, op, facts)| json!({"node": name, "op": op, "inputs": facts})).collect::<Vec<_>>(),
        "scatters": loaded.scatters.iter().map(|(name, op, facts)| json!({"node": name, "op": op, "inputs": facts})).collect::<Vec<_>>(),
        "inputs": inputs_report,
        "pinned": given_pins && pin_error.is_none(),
        "pin_error": pin_error,
        "outputs": names.iter().zip(&outputs).enumerate().map(|(i, (name, o))| json!({"name": name, "shape": o.shape(), "type": format!("{:?}", o.datum_type()), "file": output_file(i)})).collect::<Vec<_>>(),
    });
    // The other way runs checked once whether compared or timed: the timed runs are not.
    let second = match &other {
        Some(other) => Some(run_plan(&other.plan, inputs.clone(), second_how)?),
        None => None,
    };
    if let (true, Some(native)) = (args.compare, &second) {
        for ((name, jit), native) in names.iter().zip(&outputs).zip(native) {
            if !same_output(jit, native) {
                return Err(Failure::disagreement(format!(
                    "output {name} differs between gather-jit and tract's own ops"
                )));
            }
        }
        report["compare"] = json!("bit-identical");
    }
    if let (true, Some(other)) = (args.bench, &other) {
        let timing = Plan {
            warmup: args.warmup,
            iterations: args.iterations,
            budget: Duration::from_millis(args.time_ms),
        };
        let mine = time(&loaded.plan, &inputs, first, timing)?;
        let theirs = time(&other.plan, &inputs, second_how, timing)?;
        let ((jit, jit_runs), (native, native_runs)) = if args.native {
            (theirs, mine)
        } else {
            (mine, theirs)
        };
        let mine_nodes = gather_node_times(&loaded.plan, &inputs, first, timing)?;
        let theirs_nodes = gather_node_times(&other.plan, &inputs, second_how, timing)?;
        let (jit_nodes, native_nodes) = if args.native {
            (theirs_nodes, mine_nodes)
        } else {
            (mine_nodes, theirs_nodes)
        };
        let mut names: Vec<&String> = jit_nodes.keys().chain(native_nodes.keys()).collect();
        names.sort();
        names.dedup();
        let nodes: Vec<_> = names
            .into_iter()
            .map(|name| {
                let ns = |t: Option<&Duration>| t.map(|t| t.as_nanos() as u64);
                json!({
                    "node": name,
                    "gather_jit_ns": ns(jit_nodes.get(name)),
                    "tract_native_ns": ns(native_nodes.get(name)),
                })
            })
            .collect();
        report["bench"] = json!({
            "gather_jit_ns": jit.as_nanos() as u64,
            "tract_native_ns": native.as_nanos() as u64,
            "ratio": jit.as_secs_f64() / native.as_secs_f64(),
            "warmup": args.warmup,
            "gather_jit_iterations": jit_runs,
            "tract_native_iterations": native_runs,
            "gather_nodes": nodes,
        });
    }
    // A difference from the references fails the command (status 1) after the report: the
    // outputs are complete, so they are written and listed, to be looked at.
    let mut asserted = None;
    if let Some(references) = &references {
        let tolerance = Tolerance {
            atol: args.atol,
            rtol: args.rtol,
        };
        let (result, line, failure) = references.check(&names, &outputs, tolerance);
        report["assert_outputs"] = result;
        asserted = Some((line, failure));
    }
    let (assert_line, failure) = asserted.unzip();
    let failure = failure.flatten();
    if let Some((dir, files)) = &files {
        write_outputs(dir, files, &outputs)?;
    }
    if args.json {
        outln!(out, "{report}");
        return failure.map_or(Ok(()), Err);
    }
    outln!(
        out,
        "model: {} (gathers and scatters by {first})",
        args.file.display()
    );
    for (name, op, facts) in loaded.gathers.iter().chain(&loaded.scatters) {
        outln!(out, "  {name}: {op} on {}", facts.join(", "));
    }
    let reported_inputs = report["inputs"].as_array().map_or(&[][..], Vec::as_slice);
    for (input, tensor) in reported_inputs.iter().zip(&inputs) {
        let from = match input["file"].as_str() {
            Some(file) => format!("<- {file}"),
            None => "(random)".to_string(),
        };
        outln!(
            out,
            "input {}: {:?} {:?} {from}",
            input["name"].as_str().unwrap_or("?"),
            tensor.datum_type(),
            tensor.shape()
        );
    }
    if let Some(error) = &pin_error {
        outln!(
            out,
            "inputs not pinned: tract cannot analyse the model at their shapes ({error}); it was analysed with the dims it declares"
        );
    }
    for (i, (name, output)) in names.iter().zip(&outputs).enumerate() {
        let file = output_file(i).map_or(String::new(), |file| format!(" -> {file}"));
        outln!(
            out,
            "output {name}: {:?} {:?}{file}",
            output.datum_type(),
            output.shape()
        );
    }
    if args.compare {
        outln!(
            out,
            "compare: every output bit-identical with tract's own ops"
        );
    }
    if let (Some(line), None) = (&assert_line, &failure) {
        outln!(out, "{line}");
    }
    if let Some(bench) = report.get("bench") {
        outln!(
            out,
            "bench: gather-jit {} ns, tract's own ops {} ns per run (ratio {:.3}; median of {} and {} runs after {} warm-up)",
            bench["gather_jit_ns"],
            bench["tract_native_ns"],
            bench["ratio"].as_f64().unwrap_or(f64::NAN),
            bench["gather_jit_iterations"],
            bench["tract_native_iterations"],
            bench["warmup"]
        );
        let nodes = bench["gather_nodes"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        for node in nodes {
            let time = |key: &str| {
                node[key]
                    .as_u64()
                    .map_or("-".to_string(), |ns| format!("{ns} ns"))
            };
            outln!(
                out,
                "  {}: gather-jit {}, tract's own {} (median per run)",
                node["node"].as_str().unwrap_or("?"),
                time("gather_jit_ns"),
                time("tract_native_ns")
            );
        }
    }
    failure.map_or(Ok(()), Err)
}
