//! [`Target`]: a triple and CPU features as Cranelift's ISA, refused where Cranelift or
//! `cranelift-object` cannot write what it needs.

use std::str::FromStr;

use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::Configurable;

use crate::codegen::driver;
use crate::error::{Error, Result};

/// A machine to compile for: an architecture, operating system and object format (a target
/// triple), with the CPU features the code may use.
pub struct Target {
    pub(super) isa: OwnedTargetIsa,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("triple", &self.triple())
            .finish()
    }
}

impl Target {
    /// `triple` (e.g. `x86_64-unknown-linux-gnu`, `aarch64-unknown-linux-gnu`,
    /// `aarch64-apple-darwin`, `riscv64gc-unknown-linux-gnu`) with its baseline CPU features,
    /// so that the code runs on every CPU of that architecture.
    ///
    /// # Errors
    /// [`Error::UnsupportedTarget`] if the triple does not parse, or Cranelift has no backend
    /// for its architecture, or `cranelift-object` no writer for its object format.
    pub fn from_triple(triple: &str) -> Result<Target> {
        Target::with_features(triple, &[])
    }

    /// `triple` with the CPU features named (Cranelift's setting names for the architecture,
    /// e.g. `has_avx2` for x86-64, `has_v` and `has_zvl128b` for riscv64's vector extension)
    /// enabled beyond its baseline: the code then runs only on CPUs that have them.
    ///
    /// # Errors
    /// As [`Target::from_triple`], and [`Error::UnsupportedTarget`] naming a feature the
    /// architecture does not have.
    pub fn with_features(triple: &str, features: &[&str]) -> Result<Target> {
        let unsupported = |reason: String| Error::UnsupportedTarget {
            triple: triple.to_string(),
            reason,
        };
        let parsed = target_lexicon::Triple::from_str(triple)
            .map_err(|e| unsupported(format!("not a target triple ({e})")))?;
        if parsed.architecture == target_lexicon::Architecture::Unknown {
            return Err(unsupported("no architecture".into()));
        }
        if !matches!(
            parsed.binary_format,
            target_lexicon::BinaryFormat::Elf
                | target_lexicon::BinaryFormat::Macho
                | target_lexicon::BinaryFormat::Coff
        ) {
            return Err(unsupported(format!(
                "no object writer for the {} format",
                parsed.binary_format
            )));
        }
        // Cranelift's backends and `cranelift-object` panic (or fail the verifier) on the
        // combinations left out: 32-bit pointers, big-endian aarch64, aarch64's GOT
        // relocations in COFF, s390x outside ELF.
        if parsed.pointer_width() != Ok(target_lexicon::PointerWidth::U64) {
            return Err(unsupported(
                "only targets with 64-bit pointers are supported".into(),
            ));
        }
        use target_lexicon::{Aarch64Architecture, Architecture, BinaryFormat};
        let format = parsed.binary_format;
        let supported = match parsed.architecture {
            Architecture::X86_64 => true,
            Architecture::Aarch64(Aarch64Architecture::Aarch64) => format != BinaryFormat::Coff,
            Architecture::Aarch64(_) => false,
            Architecture::S390x | Architecture::Riscv64(_) => format == BinaryFormat::Elf,
            _ => true,
        };
        if !supported {
            return Err(unsupported(format!(
                "no support for {} objects in the {format} format",
                parsed.architecture
            )));
        }
        let mut builder = cranelift_codegen::isa::lookup(parsed)
            .map_err(|e| unsupported(format!("no code generator ({e})")))?;
        for feature in features {
            builder
                .enable(feature)
                .map_err(|e| unsupported(format!("CPU feature {feature}: {e}")))?;
        }
        let flags = driver::flags(true).map_err(unsupported)?;
        let isa = builder
            .finish(flags)
            .map_err(|e| unsupported(format!("building the code generator: {e}")))?;
        Ok(Target { isa })
    }

    /// This machine: its triple and every CPU feature it has (the JIT's code generator), for
    /// objects that only this kind of machine runs.
    ///
    /// # Errors
    /// [`Error::UnsupportedTarget`] if Cranelift does not support the host.
    pub fn host() -> Result<Target> {
        let unsupported = |reason: String| Error::UnsupportedTarget {
            triple: target_lexicon::HOST.to_string(),
            reason,
        };
        let builder = cranelift_native::builder().map_err(|e| unsupported(e.to_string()))?;
        let flags = driver::flags(true).map_err(unsupported)?;
        let isa = builder
            .finish(flags)
            .map_err(|e| unsupported(format!("building the code generator: {e}")))?;
        Ok(Target { isa })
    }

    /// The target triple.
    pub fn triple(&self) -> String {
        self.isa.triple().to_string()
    }
}
