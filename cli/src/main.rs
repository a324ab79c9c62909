//! `gather-jit`: try every capability of the gather-jit crate from the shell.
//!
//! Subcommands, one module each:
//! - `demo` ([`mod@demo`]): the seed examples, the OpenVINO IR layer shapes and an embedding lookup
//!   through the JIT and the interpreter, as a table.
//! - `run` ([`mod@run`]): one op on `.npy` files.
//! - `explain` ([`mod@explain`]): output shape, loop plan, Cranelift IR and code size of a kernel.
//! - `bench` ([`mod@bench`]): times per call beside a memcpy of the output size, optionally JSON.
//! - `layer` ([`mod@layer`]): the gather layers of an OpenVINO IR XML file, checked and run.
//!
//! Exit status: 0 on success, 2 for invalid flags, files, signatures or indices (one line on
//! stderr), 1 when the JIT and the interpreter disagree (a bug in the crate).
//!
//! The CLI uses the library's public API only; `docs/cli.md` is its user guide.

mod bench;
mod demo;
mod explain;
mod failure;
mod hugepages;
mod layer;
mod npy;
mod opargs;
mod random;
mod report;
mod run;

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Parser, Subcommand};

use crate::failure::Failure;

#[derive(Parser, Debug)]
#[command(
    name = "gather-jit",
    version,
    about = "JIT-compiled Gather, GatherElements and GatherND (Cranelift): run, explain, benchmark",
    after_help = "Examples:
  gather-jit demo
  gather-jit run --op gather-nd data.npy indices.npy -o out.npy
  gather-jit explain --op gather-nd --data-shape 2x2 --indices-shape 2x1
  gather-jit bench --op gather --data-shape 30522x768 --indices-shape 8x128 --json
  gather-jit layer examples/seed_layers.xml

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
    Layer(layer::LayerArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(e),
    };
    let result = match cli.command {
        Command::Demo(args) => demo::main(&args),
        Command::Run(args) => run::main(&args),
        Command::Explain(args) => explain::main(&args),
        Command::Bench(args) => bench::main(&args),
        Command::Layer(args) => layer::main(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {}", failure.one_line());
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
            eprintln!("error: {}", Failure::usage(message).one_line());
            ExitCode::from(Failure::USAGE)
        }
    }
}
