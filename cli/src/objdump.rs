//! The machine code of an object for another target, as `explain --target` prints it:
//! disassembled by the objdump for that target's architecture, where one is on `PATH`.

use std::io::Write;
use std::process::Command;

use gather_jit::aot::Object;

use crate::failure::{Failure, Result};

/// What the disassemblers made of an object.
pub enum Disassembly {
    /// The kernel's functions, as `tool` printed them.
    Listing {
        /// The command that disassembled them, with its flags.
        tool: String,
        /// Its lines for the kernel's functions only, a blank line between functions.
        lines: Vec<String>,
    },
    /// No disassembler for the target was found (none of `tried` ran and read the object).
    NotFound {
        /// The commands tried, in order.
        tried: Vec<String>,
    },
}

/// The flags every objdump (GNU's and LLVM's) takes: disassemble, with relocations (the calls
/// of `memcpy` and `memset`) shown where they apply.
const FLAGS: [&str; 2] = ["-d", "-r"];

/// Disassembles `object`, keeping the functions of the kernel exported as `symbol`.
///
/// # Errors
/// The object cannot be written to a temporary file.
pub fn disassemble(object: &Object, symbol: &str) -> Result<Disassembly> {
    let mut file = tempfile::Builder::new()
        .prefix("gather-jit-")
        .suffix(".o")
        .tempfile()
        .map_err(|e| Failure::io("create a temporary file in", &std::env::temp_dir(), e))?;
    let written = file.write_all(object.bytes()).and_then(|()| file.flush());
    written.map_err(|e| Failure::io("write", file.path(), e))?;
    let tried = candidates(object.triple());
    for tool in &tried {
        // A tool that is missing, fails, or reads the object without finding the kernel (an
        // objdump of another architecture or object format) leaves it to the next one.
        let Ok(output) = Command::new(tool).args(FLAGS).arg(file.path()).output() else {
            continue;
        };
        if !output.status.success() {
            continue;
        }
        let lines = kernel_functions(&String::from_utf8_lossy(&output.stdout), symbol);
        if !lines.is_empty() {
            return Ok(Disassembly::Listing {
                tool: format!("{tool} {}", FLAGS.join(" ")),
                lines,
            });
        }
    }
    Ok(Disassembly::NotFound { tried })
}

/// The disassemblers that may read an object for `triple`, best first: binutils' objdump for
/// its architecture (`aarch64-linux-gnu-objdump`), the plain `objdump` when the architecture is
/// this machine's, and `llvm-objdump`, which reads every architecture and object format.
fn candidates(triple: &str) -> Vec<String> {
    let arch = triple.split('-').next().unwrap_or_default();
    // Binutils name architectures as Debian's cross packages do.
    let binutils = match arch {
        "arm64" => "aarch64",
        riscv if riscv.starts_with("riscv64") => "riscv64",
        other => other,
    };
    let mut tools = vec![format!("{binutils}-linux-gnu-objdump")];
    if binutils == std::env::consts::ARCH {
        tools.push("objdump".to_string());
    }
    tools.push("llvm-objdump".to_string());
    tools
}

/// The lines of `listing` (objdump's output) for the functions of the kernel exported as
/// `symbol`: the entry point and the object's own functions behind it (`SYMBOL__gather_jit_*`),
/// under Mach-O's leading `_` too.
fn kernel_functions(listing: &str, symbol: &str) -> Vec<String> {
    let inner = format!("{symbol}__gather_jit_");
    let ours = |name: &str| {
        [Some(name), name.strip_prefix('_')]
            .into_iter()
            .flatten()
            .any(|name| name == symbol || name.starts_with(&inner))
    };
    let mut lines = Vec::new();
    let mut keep = false;
    for line in listing.lines() {
        if let Some(name) = function_name(line) {
            keep = ours(name);
            if keep && !lines.is_empty() {
                lines.push(String::new());
            }
        } else if line.starts_with("Disassembly of section") {
            keep = false;
        }
        if keep && !line.trim().is_empty() {
            lines.push(line.trim_end().to_string());
        }
    }
    lines
}

/// The function a line such as `0000000000000040 <gather_jit_gather>:` starts.
fn function_name(line: &str) -> Option<&str> {
    let (address, rest) = line.split_once(' ')?;
    if address.is_empty() || !address.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    rest.strip_prefix('<')?.strip_suffix(">:")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_kernels_functions_are_kept() {
        let listing = "\nk.o:     file format elf64-littleaarch64\n\n\
            Disassembly of section .text:\n\n\
            0000000000000000 <k__gather_jit_kernel>:\n   0:\td503201f \tnop\n\n\
            0000000000000010 <other>:\n  10:\td65f03c0 \tret\n\n\
            0000000000000020 <k>:\n  20:\td65f03c0 \tret\n";
        assert_eq!(
            kernel_functions(listing, "k"),
            [
                "0000000000000000 <k__gather_jit_kernel>:",
                "   0:\td503201f \tnop",
                "",
                "0000000000000020 <k>:",
                "  20:\td65f03c0 \tret",
            ]
        );
        // Mach-O's symbols have a leading `_`; a symbol that only starts like ours is not.
        let macho = "0000000000000000 <_k>:\n   0:\tret\n0000000000000004 <_kk>:\n   4:\tret\n";
        assert_eq!(
            kernel_functions(macho, "k"),
            ["0000000000000000 <_k>:", "   0:\tret"]
        );
    }

    #[test]
    fn each_architecture_tries_its_binutils_then_llvm() {
        assert_eq!(
            candidates("riscv64gc-unknown-linux-gnu")[0],
            "riscv64-linux-gnu-objdump"
        );
        assert_eq!(
            candidates("aarch64-apple-darwin")[0],
            "aarch64-linux-gnu-objdump"
        );
        assert_eq!(
            candidates("x86_64-pc-windows-msvc")
                .last()
                .map(String::as_str),
            Some("llvm-objdump")
        );
    }
}
