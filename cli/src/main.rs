//! `gather-jit`: try every capability of the gather-jit crate from the shell.
//!
//! Subcommands, one module each:
//! - `demo` ([`mod@demo`]): the seed examples, the OpenVINO IR layer shapes and an embedding lookup
//!   through the JIT and the interpreter, as a table.
//! - `run` ([`mod@run`]): one op on `.npy` and `.npz` files (a scatter's updates too).
//! - `explain` ([`mod@explain`]): output shape, loop plan, Cranelift IR and code size of a kernel.
//! - `bench` ([`mod@bench`]): times per call beside a memcpy of the output size, optionally JSON.
//! - `aot` ([`mod@aot`]): a kernel compiled into a relocatable object for a target triple, with
//!   a C header (`explain --target` shows such a kernel's code, through [`mod@objdump`]).
//! - `layer` ([`mod@layer`]): the gather layers of an OpenVINO IR XML file, checked and run.
//! - `model` (feature `model`): an ONNX model through tract with its gathers JIT-compiled.
//!
//! Exit status: 0 on success (or when stdout's reader goes away, as with `| head`), 2 for invalid
//! flags, files, signatures or indices and for buffers too large for memory (one line on
//! stderr, never an abort), 1 when the JIT and the interpreter disagree (a bug in the crate).
//!
//! `run`, `explain`, `bench` and `aot` take every op, plain, quantized or scatter, through one
//! path each: the one place that tells the op families apart is [`mod@op_kernel`] (and, for
//! the quantized ops' packed inputs, [`mod@quantized`]; for the scatters' updates,
//! [`mod@scatter`]).
//!
//! The CLI uses the library's public API only; `docs/cli.md` is its user guide.

/// `writeln!` to a subcommand's output that returns [`Failure::stdout`] from the function if it
/// fails, so that a closed pipe stops the command quietly.
macro_rules! outln {
    ($out:expr $(, $($arg:tt)*)?) => {
        writeln!($out $(, $($arg)*)?).map_err($crate::failure::Failure::stdout)?
    };
}

mod aot;
mod bench;
mod buffer;
mod demo;
mod explain;
mod failure;
mod files;
mod hugepages;
mod layer;
#[cfg(feature = "model")]
mod model;
mod npy;
mod npz;
mod objdump;
mod op_kernel;
mod opargs;
mod openvino;
mod progress;
mod quantized;
mod random;
mod report;
mod run;
mod scatter;
mod table;
mod timing;
mod values;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Parser, Subcommand};

use crate::failure::{Failure, eprint_line};

#[derive(Parser, Debug)]
#[command(
    name = "gather-jit",
    version,
    about = "JIT-compiled Gather, GatherElements, GatherND and their scatters (Cranelift): run, explain, benchmark, compile ahead of time",
    after_help = "Examples:
  gather-jit demo
  gather-jit run --op gather-nd data.npy indices.npy -o out.npy
  gather-jit run --op scatter-nd --reduction add data.npy indices.npy updates.npy -o out.npy
  gather-jit explain --op gather-nd --data-shape 2x2 --indices-shape 2x1
  gather-jit bench --op gather --data-shape 30522x768 --indices-shape 8x128 --json
  gather-jit aot --op gather --data-shape 30522x768 --indices-shape 8x128 --target aarch64-unknown-linux-gnu -o embed.o --header embed.h
  gather-jit layer examples/seed_layers.xml
  gather-jit model model.onnx --compare   (with the `model` feature)

Exit status: 0 success, 2 invalid input (one line on stderr), 1 JIT and interpreter disagree.",
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    Demo(demo::DemoArgs),
    Run(run::RunArgs),
    Explain(explain::ExplainArgs),
    Bench(bench::BenchArgs),
    Aot(aot::AotArgs),
    Layer(layer::LayerArgs),
    /// An ONNX model through tract, its gathers JIT-compiled (needs the `model` feature).
    #[cfg(feature = "model")]
    Model(model::ModelArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(e),
    };
    // Output goes through one locked handle with `writeln!`, whose errors the subcommands
    // return, so that a closed pipe stops the command instead of panicking in `println!`.
    let mut out = io::stdout().lock();
    let result = match cli.command {
        Command::Demo(args) => demo::main(&args, &mut out),
        Command::Run(args) => run::main(&args, &mut out),
        Command::Explain(args) => explain::main(&args, &mut out),
        Command::Bench(args) => bench::main(&args, &mut out),
        Command::Aot(args) => aot::main(&args, &mut out),
        Command::Layer(args) => layer::main(&args, &mut out),
        #[cfg(feature = "model")]
        Command::Model(args) => model::main(&args, &mut out),
    }
    .and_then(|()| out.flush().map_err(Failure::stdout));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) if failure.is_quiet() => ExitCode::SUCCESS,
        Err(failure) => {
            eprint_line(format_args!("error: {}", failure.one_line()));
            ExitCode::from(failure.code)
        }
    }
}

/// Help and version go out as clap prints them; every other parse error becomes one line on
/// stderr (clap's first paragraph, which names the flag and the allowed values) and status 2.
fn clap_exit(e: clap::Error) -> ExitCode {
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            // Nothing sensible is left to do if stdout is closed.
            let _ = e.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(Failure::USAGE)
        }
        _ => {
            let rendered = e.render().to_string();
            let first_paragraph: Vec<&str> = rendered
                .lines()
                .take_while(|line| !line.trim().is_empty())
                .map(str::trim)
                .collect();
            let message = first_paragraph.join(" ");
            let message = message.strip_prefix("error: ").unwrap_or(&message);
            eprint_line(format_args!(
                "error: {}",
                Failure::usage(message).one_line()
            ));
            ExitCode::from(Failure::USAGE)
        }
    }
}
