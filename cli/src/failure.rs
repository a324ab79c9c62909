//! [`Failure`]: why a subcommand stopped, as one line and an exit status.

use std::fmt;
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

/// `Result` with a [`Failure`].
pub type Result<T, E = Failure> = std::result::Result<T, E>;
