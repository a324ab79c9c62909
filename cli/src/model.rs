//! `gather-jit model`: an ONNX model through tract with JIT-backed gathers (the
//! `gather-jit-tract` integration), or with tract's own ops, or both compared.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use gather_jit_tract::{JitGather, datum_of, dtype_of};
use serde_json::json;
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::internal::DimLike;

use crate::failure::{Failure, Result};
use crate::npy::{self, ElementType};
use crate::npz;
use crate::random::XorShift;

#[derive(Args, Debug)]
#[command(after_help = "Examples:
  gather-jit model model.onnx
  gather-jit model model.onnx --input ids=ids.npy --dim batch=4 -o out/
  gather-jit model model.onnx --compare
  gather-jit model model.onnx --bench --json

Inputs not given with --input are random, of the declared shape and type (floats in [-1, 1),
integers 0 or 1, so that they are valid indices of most axes).")]
pub struct ModelArgs {
    /// The ONNX model.
    file: PathBuf,
    /// An input as NAME=FILE.npy (repeatable).
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    inputs: Vec<String>,
    /// A symbolic dim as NAME=N (repeatable), for random inputs.
    #[arg(long = "dim", value_name = "NAME=N")]
    dims: Vec<String>,
    /// Write each output as OUTDIR/NAME.npy.
    #[arg(short = 'o', long = "output-dir", value_name = "OUTDIR")]
    output_dir: Option<PathBuf>,
    /// Run with tract's own gather ops instead of the JIT-backed ones.
    #[arg(long)]
    native: bool,
    /// Run both ways and check that every output is bit-identical.
    #[arg(long, conflicts_with = "native")]
    compare: bool,
    /// Time the whole model both ways.
    #[arg(long)]
    bench: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 42, allow_hyphen_values = true,
          value_parser = crate::opargs::parse_count)]
    seed: u64,
}

/// A model ready to run, and the facts of its inputs and outputs.
struct Loaded {
    plan: TypedSimplePlan<TypedModel>,
    gathers: Vec<(String, String, Vec<String>)>,
}

/// Loads `path` with JIT-backed gathers or tract's own, optimised.
fn load(path: &Path, native: bool) -> Result<Loaded> {
    let framework = match native {
        true => tract_onnx::onnx(),
        false => gather_jit_tract::onnx(),
    };
    let cannot = |e: TractError| {
        Failure::usage(format!(
            "{}: tract cannot read this model: {e:#}",
            path.display()
        ))
    };
    let model = framework
        .model_for_path(path)
        .map_err(cannot)?
        .into_optimized()
        .map_err(cannot)?;
    let gathers = model
        .nodes()
        .iter()
        .filter(|node| node.op().name().contains("Gather"))
        .map(|node| {
            let facts = node
                .inputs
                .iter()
                .map(|&outlet| {
                    model.outlet_fact(outlet).map_or_else(
                        |e| format!("? ({e})"),
                        |fact| format!("{:?} {:?}", fact.datum_type, fact.shape),
                    )
                })
                .collect();
            let op = match node.op_as::<JitGather>() {
                Some(jit) => format!("{} (gather-jit: {})", node.op().name(), jit.op),
                None => format!("{} (tract)", node.op().name()),
            };
            (node.name.clone(), op, facts)
        })
        .collect();
    let plan = model.into_runnable().map_err(cannot)?;
    Ok(Loaded { plan, gathers })
}

/// `NAME=VALUE` split at its first `=`.
fn pair<'a>(text: &'a str, flag: &str) -> Result<(&'a str, &'a str)> {
    text.split_once('=')
        .filter(|(name, _)| !name.is_empty())
        .ok_or_else(|| Failure::usage(format!("--{flag} {text}: expected NAME=VALUE")))
}

/// The model's inputs: the files given, random tensors for the rest.
fn inputs(args: &ModelArgs, model: &TypedModel) -> Result<TVec<TValue>> {
    let mut given: Vec<(&str, &str)> = Vec::new();
    for text in &args.inputs {
        given.push(pair(text, "input")?);
    }
    let mut symbols = SymbolValues::default();
    for text in &args.dims {
        let (name, value) = pair(text, "dim")?;
        let value: i64 = value
            .parse()
            .map_err(|_| Failure::usage(format!("--dim {text}: {value} is not a number")))?;
        symbols.set(&model.symbols.sym(name), value);
    }
    let names: Vec<String> = (model.input_outlets().map_err(Failure::usage)?.iter())
        .map(|outlet| model.node(outlet.node).name.clone())
        .collect();
    if let Some((name, _)) = given
        .iter()
        .find(|(name, _)| !names.iter().any(|n| n == name))
    {
        return Err(Failure::usage(format!(
            "--input {name}: the model has no input {name} (its inputs: {})",
            names.join(", ")
        )));
    }
    let mut tensors = TVec::new();
    for (i, name) in names.iter().enumerate() {
        let fact = model.input_fact(i).map_err(Failure::usage)?;
        let tensor = match given.iter().find(|(n, _)| n == name) {
            Some((_, file)) => read_input(name, Path::new(file), fact)?,
            None => random_input(name, fact, &symbols, args.seed.wrapping_add(i as u64))?,
        };
        tensors.push(tensor.into_tvalue());
    }
    Ok(tensors)
}

/// Reads input `name` from a `.npy` file and checks it against the declared fact.
fn read_input(name: &str, path: &Path, fact: &TypedFact) -> Result<Tensor> {
    let array = npz::read_array(&npz::ArrayPath::parse(path))?;
    let datum =
        array.element.dtype().and_then(datum_of).ok_or_else(|| {
            Failure::usage(format!("{}: unsupported element type", path.display()))
        })?;
    if datum != fact.datum_type {
        return Err(Failure::usage(format!(
            "input {name}: {} holds {datum:?}, the model takes {:?}",
            path.display(),
            fact.datum_type
        )));
    }
    let fits = array.shape.len() == fact.rank()
        && (fact.shape.iter().zip(&array.shape))
            .all(|(dim, &n)| dim.to_usize().map_or(true, |d| d == n));
    if !fits {
        return Err(Failure::usage(format!(
            "input {name}: {} has shape {:?}, the model takes {:?}",
            path.display(),
            array.shape,
            fact.shape
        )));
    }
    // SAFETY: `datum` is a plain-data type and `bytes` holds the shape's elements of it,
    // native-endian (as `npy::parse` returns them).
    unsafe { Tensor::from_raw_dt(datum, &array.shape, &array.bytes) }.map_err(Failure::usage)
}

/// A random tensor of the declared shape (symbols resolved from `--dim`) and type.
fn random_input(name: &str, fact: &TypedFact, symbols: &SymbolValues, seed: u64) -> Result<Tensor> {
    let mut shape = Vec::new();
    for dim in fact.shape.iter() {
        let dim = dim.eval(symbols).to_usize().map_err(|_| {
            Failure::usage(format!(
                "input {name}: dim {dim} is symbolic: give --dim {dim}=N or --input {name}=FILE.npy"
            ))
        })?;
        shape.push(dim);
    }
    let len: usize = shape.iter().product();
    let mut rng = XorShift::new(seed);
    let dt = fact.datum_type;
    let tensor = if dt.is_float() {
        let values: Vec<f32> = (0..len)
            .map(|_| rng.below(2000) as f32 / 1000.0 - 1.0)
            .collect();
        Tensor::from_shape(&shape, &values).and_then(|t| t.cast_to_dt(dt).map(|t| t.into_owned()))
    } else if dt.is_integer() || dt == DatumType::Bool {
        let values: Vec<i64> = (0..len).map(|_| rng.below(2) as i64).collect();
        let values: Vec<i64> = match dt {
            DatumType::Bool => values.iter().map(|v| v & 1).collect(),
            _ => values,
        };
        Tensor::from_shape(&shape, &values).and_then(|t| t.cast_to_dt(dt).map(|t| t.into_owned()))
    } else {
        return Err(Failure::usage(format!(
            "input {name}: cannot make random {dt:?} values: give --input {name}=FILE.npy"
        )));
    };
    tensor.map_err(Failure::usage)
}

/// Runs the plan, turning an error or a panic of tract's into a failure.
fn run_plan(
    plan: &TypedSimplePlan<TypedModel>,
    inputs: TVec<TValue>,
    how: &str,
) -> Result<TVec<TValue>> {
    // A panic becomes the one error line: the default hook would print it (and a backtrace)
    // first.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| plan.run(inputs)));
    std::panic::set_hook(hook);
    match run {
        Ok(Ok(outputs)) => Ok(outputs),
        Ok(Err(e)) => Err(Failure::usage(format!("{how}: {e:#}"))),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a panic");
            Err(Failure::usage(format!("{how} panicked: {message}")))
        }
    }
}

/// Median seconds of one run of `plan` on `inputs`, over about half a second.
fn time(plan: &TypedSimplePlan<TypedModel>, inputs: &TVec<TValue>, how: &str) -> Result<Duration> {
    let mut times = Vec::new();
    let started = Instant::now();
    while times.len() < 5
        || (started.elapsed() < Duration::from_millis(500) && times.len() < 10_000)
    {
        let at = Instant::now();
        run_plan(plan, inputs.clone(), how)?;
        times.push(at.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

/// The median time of each gather node (by name) over runs of `plan`, each node timed around
/// its own evaluation, for as many runs as fit in half a second (at least 5).
fn gather_node_times(
    plan: &TypedSimplePlan<TypedModel>,
    inputs: &TVec<TValue>,
    how: &str,
) -> Result<BTreeMap<String, Duration>> {
    let mut times: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
    let started = Instant::now();
    let mut runs = 0;
    while runs < 5 || (started.elapsed() < Duration::from_millis(500) && runs < 10_000) {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut state = SimpleState::new(plan)?;
            state.run_plan_with_eval(inputs.clone(), |session, op_state, node, input| {
                let at = Instant::now();
                let outputs = tract_onnx::tract_core::plan::eval(session, op_state, node, input);
                if node.op().name().contains("Gather") {
                    times
                        .entry(node.name.clone())
                        .or_default()
                        .push(at.elapsed());
                }
                outputs
            })
        }));
        std::panic::set_hook(hook);
        match run {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(Failure::usage(format!("{how}: {e:#}"))),
            Err(_) => return Err(Failure::usage(format!("{how} panicked"))),
        }
        runs += 1;
    }
    Ok(times
        .into_iter()
        .map(|(name, mut t)| {
            t.sort();
            let median = t[t.len() / 2];
            (name, median)
        })
        .collect())
}

/// The names of the model's outputs, for the files they are written to.
fn output_names(model: &TypedModel) -> Result<Vec<String>> {
    let outlets = model.output_outlets().map_err(Failure::usage)?;
    Ok(outlets
        .iter()
        .enumerate()
        .map(|(i, outlet)| {
            model
                .outlet_label(*outlet)
                .map_or_else(|| format!("output_{i}"), str::to_string)
        })
        .collect())
}

/// Writes each output as `dir/NAME.npy`; nothing is written unless every output can be.
fn write_outputs(dir: &Path, names: &[String], outputs: &TVec<TValue>) -> Result<()> {
    let mut files = Vec::new();
    for (name, output) in names.iter().zip(outputs) {
        if name.contains(['/', '\\']) || name.starts_with('.') {
            return Err(Failure::usage(format!(
                "output {name}: not a usable file name"
            )));
        }
        let dtype = dtype_of(output.datum_type()).ok_or_else(|| {
            Failure::usage(format!(
                "output {name}: {:?} has no .npy form",
                output.datum_type()
            ))
        })?;
        files.push((
            dir.join(format!("{name}.npy")),
            npy::header(ElementType::of(dtype), output.shape()),
            output,
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| Failure::io("create", dir, e))?;
    for (path, header, output) in files {
        npz::write_atomically(&path, |file| {
            file.write_all(&header)?;
            file.write_all(output.as_bytes())
        })?;
    }
    Ok(())
}

pub fn main(args: &ModelArgs, out: &mut dyn Write) -> Result<()> {
    let (first, how) = match args.native {
        true => ("tract's own ops", true),
        false => ("gather-jit", false),
    };
    let loaded = load(&args.file, how)?;
    let model = loaded.plan.model();
    let inputs = inputs(args, model)?;
    let names = output_names(model)?;
    let outputs = run_plan(&loaded.plan, inputs.clone(), first)?;
    let mut report = json!({
        "model": args.file.display().to_string(),
        "gathers": loaded.gathers.iter().map(|(name, op, facts)| json!({"node": name, "op": op, "inputs": facts})).collect::<Vec<_>>(),
        "outputs": names.iter().zip(&outputs).map(|(name, o)| json!({"name": name, "shape": o.shape(), "type": format!("{:?}", o.datum_type())})).collect::<Vec<_>>(),
    });
    let other = match args.compare || args.bench {
        true => Some(load(&args.file, !how)?),
        false => None,
    };
    if args.compare {
        let other = other.as_ref().expect("loaded for --compare");
        let native = run_plan(&other.plan, inputs.clone(), "tract's own ops")?;
        for ((name, jit), native) in names.iter().zip(&outputs).zip(&native) {
            let same = jit.datum_type() == native.datum_type()
                && jit.shape() == native.shape()
                && jit.as_bytes() == native.as_bytes();
            if !same {
                return Err(Failure::disagreement(format!(
                    "output {name} differs between gather-jit and tract's own ops"
                )));
            }
        }
        report["compare"] = json!("bit-identical");
    }
    if args.bench {
        let other = other.as_ref().expect("loaded for --bench");
        let mine = time(&loaded.plan, &inputs, first)?;
        let theirs = time(&other.plan, &inputs, "the other run")?;
        let (jit, native) = if args.native {
            (theirs, mine)
        } else {
            (mine, theirs)
        };
        let mine_nodes = gather_node_times(&loaded.plan, &inputs, first)?;
        let theirs_nodes = gather_node_times(&other.plan, &inputs, "the other run")?;
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
            "gather_nodes": nodes,
        });
    }
    if let Some(dir) = &args.output_dir {
        write_outputs(dir, &names, &outputs)?;
    }
    if args.json {
        outln!(out, "{report}");
        return Ok(());
    }
    outln!(out, "model: {} (gathers by {first})", args.file.display());
    for (name, op, facts) in &loaded.gathers {
        outln!(out, "  {name}: {op} on {}", facts.join(", "));
    }
    for (name, output) in names.iter().zip(&outputs) {
        outln!(
            out,
            "output {name}: {:?} {:?}",
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
    if let Some(bench) = report.get("bench") {
        outln!(
            out,
            "bench: gather-jit {} ns, tract's own ops {} ns per run (ratio {:.3})",
            bench["gather_jit_ns"],
            bench["tract_native_ns"],
            bench["ratio"].as_f64().unwrap_or(f64::NAN)
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
    Ok(())
}
