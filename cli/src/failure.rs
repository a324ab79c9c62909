//! [`Failure`]: why a subcommand stopped, as one line and an exit status.

use std::fmt;
use std::io::{self, Write};
use std::path::Path;

/// A message for stderr and the process exit status.
#[derive(Debug)]
pub struct Failure {
    /// [`Failure::USAGE`] or [`Failure::DISAGREEMENT`].
    pub code: u8,
    message: String,
}

impl Failure {
    /// Invalid flags, files, signatures or indices: the user can fix it.
    pub const USAGE: u8 = 2;
    /// The JIT and the interpreter disagree, or code generation failed: a bug in the crate.
    pub const DISAGREEMENT: u8 = 1;
    /// Not a failure: stdout's reader has gone (`| head`), so the command stops, silently.
    const QUIET: u8 = 0;

    /// A problem with what the user gave (exit status 2).
    pub fn usage(message: impl fmt::Display) -> Failure {
        Failure {
            code: Failure::USAGE,
            message: message.to_string(),
        }
    }

    /// A wrong result (exit status 1).
    pub fn disagreement(message: impl fmt::Display) -> Failure {
        Failure {
            code: Failure::DISAGREEMENT,
            message: message.to_string(),
        }
    }

    /// An I/O error on `path`, e.g. `cannot read x.npy: No such file or directory`.
    pub fn io(action: &str, path: &Path, error: std::io::Error) -> Failure {
        Failure::usage(format!("cannot {action} {}: {error}", path.display()))
    }

    /// A buffer of `bytes` bytes, whose size the user's shapes or files set, could not be
    /// allocated (exit status 2).
    pub fn allocation(bytes: usize, what: impl fmt::Display) -> Failure {
        Failure::usage(format!("cannot allocate {bytes} bytes for {what}"))
    }

    /// Writing to stdout failed: a quiet stop if its reader has gone (`gather-jit ... | head`),
    /// else an error (status 2).
    pub fn stdout(error: io::Error) -> Failure {
        if error.kind() == io::ErrorKind::BrokenPipe {
            Failure {
                code: Failure::QUIET,
                message: String::new(),
            }
        } else {
            Failure::usage(format!("cannot write to stdout: {error}"))
        }
    }

    /// Whether this is the quiet stop of [`Failure::stdout`], which prints nothing.
    pub fn is_quiet(&self) -> bool {
        self.code == Failure::QUIET
    }

    /// Prefixes the message with where it happened (`data.npy: ...`).
    pub fn context(mut self, context: impl fmt::Display) -> Failure {
        self.message = format!("{context}: {}", self.message);
        self
    }

    /// The message on one line (newlines and runs of spaces folded).
    pub fn one_line(&self) -> String {
        self.message
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl From<gather_jit::Error> for Failure {
    fn from(e: gather_jit::Error) -> Failure {
        match e.category() {
            "codegen" => Failure::disagreement(e),
            _ => Failure::usage(e),
        }
    }
}

/// Writes one line to stderr; a closed stderr is no reason to panic, and there is nowhere left
/// to report it.
pub fn eprint_line(line: impl fmt::Display) {
    let _ = writeln!(io::stderr(), "{line}");
}

/// `Result` with a [`Failure`].
pub type Result<T, E = Failure> = std::result::Result<T, E>;
