//! `gather-jit aot`: one kernel compiled ahead of time into a relocatable object for a target
//! triple, with a C header; and the target, symbol and object that `explain --target` shares.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use gather_jit::aot::{AotKernel, Object, ObjectBuilder, Target};
use serde_json::json;

use crate::failure::{Failure, Result};
use crate::files::{self, same_file};
use crate::op_kernel::OpSignature;
use crate::opargs::{OpArgs, OpKind, SignatureArgs};

/// Compile a kernel into a relocatable object for a target triple, with a C header.
///
/// The object exports one C function, `int32_t SYMBOL(const void *data, const void *indices,
/// void *output, uint64_t *bad_position)` (the quantized ops take `scales` and `zero_points`
/// after `indices`), on C-contiguous native-endian buffers of the signature's shapes; it
/// returns 0, or 1 after storing the position of a rejected index to `*bad_position`. The
/// header declares it and `#define`s each buffer's size in bytes. Link the object into a C,
/// C++ or Rust program for that target; it needs nothing but `memcpy`, `memmove` and `memset`.
///
/// On any error nothing is written: the object and the header go to temporary files beside
/// them, renamed into place only when both are complete.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  gather-jit aot --op gather --data-shape 30522x768 --indices-shape 8x128 --target aarch64-unknown-linux-gnu -o embed.o --header embed.h
  gather-jit aot --op gather-nd --data-shape 2x3x4 --indices-shape 2x1 --target host --symbol lookup -o lookup.o
  gather-jit aot --op gather-gguf --format q8_0 --data-shape 32000x4096 --indices-shape 8 --target aarch64-apple-darwin -o rows.o --json")]
pub struct AotArgs {
    #[command(flatten)]
    op: OpArgs,
    #[command(flatten)]
    signature: SignatureArgs,
    /// The machine to compile for: a target triple such as x86_64-unknown-linux-gnu,
    /// aarch64-unknown-linux-gnu, aarch64-apple-darwin, x86_64-pc-windows-msvc or
    /// riscv64gc-unknown-linux-gnu (baseline CPU features), or `host`: this machine with
    /// every CPU feature it has
    #[arg(long, value_name = "TRIPLE", allow_hyphen_values = true)]
    target: String,
    /// The C symbol of the entry point [default: gather_jit_ and the op, e.g. gather_jit_gather_nd]
    #[arg(long, value_name = "NAME", allow_hyphen_values = true)]
    symbol: Option<String>,
    /// Where to write the object
    #[arg(short, long, value_name = "FILE.o", allow_hyphen_values = true)]
    output: PathBuf,
    /// Also write a C header declaring the entry point and its buffers' sizes (include guard
    /// from the file name: kernels.h guards with KERNELS_H)
    #[arg(long, value_name = "FILE.h", allow_hyphen_values = true)]
    header: Option<PathBuf>,
    /// Print one JSON object (what was written) instead of text
    #[arg(long)]
    json: bool,
}

/// Runs `gather-jit aot`.
///
/// # Errors
/// An invalid signature, target, symbol or output path; a kernel the target cannot take; a
/// file that cannot be written (status 2).
pub fn main(args: &AotArgs, out: &mut dyn Write) -> Result<()> {
    let sig = args.signature.signature(&args.op)?;
    // First, so that an invalid signature is reported as `run` and `explain` report it.
    sig.validate()?;
    let target = target(&args.target)?;
    let symbol = match &args.symbol {
        Some(symbol) => symbol.clone(),
        None => default_symbol(args.op.kind()?),
    };
    check_destinations(&args.output, args.header.as_deref())?;
    let destinations = std::iter::once(args.output.as_path()).chain(args.header.as_deref());
    for path in destinations.clone() {
        files::refuse_json_to_stdout(path, args.json)?;
    }
    let (object, kernel) = object(&target, &sig, &symbol)?;
    let header = args
        .header
        .as_deref()
        .map(|path| (path, header_guard(path)))
        .map(|(path, guard)| (path, object.header(&guard), guard));
    let object_bytes = [object.bytes()];
    let header_bytes = header
        .as_ref()
        .map(|(path, text, _)| (*path, [text.as_bytes()]));
    let mut outputs: Vec<(&Path, &[&[u8]])> = vec![(args.output.as_path(), &object_bytes)];
    if let Some((path, bytes)) = &header_bytes {
        outputs.push((path, bytes));
    }
    files::write_together(&outputs)?;

    let buffers: Vec<String> = (kernel.buffers().iter())
        .map(|b| format!("{} {} bytes", b.name, b.bytes))
        .collect();
    if args.json {
        let buffers: Vec<_> = (kernel.buffers().iter())
            .map(|b| json!({"name": b.name, "bytes": b.bytes}))
            .collect();
        let json = json!({
            "target": object.triple(),
            "symbol": kernel.symbol(),
            "signature": kernel.description(),
            "object": args.output.display().to_string(),
            "object_bytes": object.bytes().len(),
            "header": header.as_ref().map(|(path, ..)| path.display().to_string()),
            "header_bytes": header.as_ref().map(|(_, text, _)| text.len()),
            "header_guard": header.as_ref().map(|(.., guard)| guard),
            "buffers": buffers,
            "code_bytes": kernel.machine_code().len(),
        });
        outln!(out, "{json}");
        return Ok(());
    }
    // Written to standard output, the object (or the header) is all it says.
    if destinations.into_iter().any(files::is_stdout) {
        return Ok(());
    }
    outln!(
        out,
        "wrote {}: {} object, {} bytes",
        args.output.display(),
        object.triple(),
        object.bytes().len()
    );
    if let Some((path, text, guard)) = &header {
        outln!(
            out,
            "wrote {}: C header, {} bytes, guard {guard}",
            path.display(),
            text.len()
        );
    }
    outln!(out, "{}: {}", kernel.symbol(), kernel.description());
    outln!(out, "  buffers: {}", buffers.join(", "));
    outln!(out, "  machine code: {} bytes", kernel.machine_code().len());
    Ok(())
}

/// The target `--target` names: a triple, or `host`.
///
/// # Errors
/// A triple the library cannot compile for.
pub fn target(spec: &str) -> Result<Target> {
    Ok(match spec {
        "host" => Target::host()?,
        triple => Target::from_triple(triple)?,
    })
}

/// The entry point's symbol when `--symbol` is not given: `gather_jit_` and the op, as `--op`
/// spells it with `_` for `-` (`gather_jit_gather_nd`).
pub fn default_symbol(kind: OpKind) -> String {
    format!("gather_jit_{}", kind.flag().replace('-', "_"))
}

/// An object for `target` that exports the kernel of `sig` as `symbol`, and that kernel.
///
/// # Errors
/// An invalid signature or symbol; a kernel the target cannot take.
pub fn object(target: &Target, sig: &OpSignature, symbol: &str) -> Result<(Object, AotKernel)> {
    let mut builder = ObjectBuilder::new(target)?;
    let kernel = sig.add_to(&mut builder, symbol)?.clone();
    Ok((builder.finish()?, kernel))
}

/// Refuses destinations that cannot both be written: an empty path, a directory, or the
/// object and the header in one file (by path, or through a symlink or a hard link).
fn check_destinations(object: &Path, header: Option<&Path>) -> Result<()> {
    for (flag, path) in std::iter::once(("-o", object)).chain(header.map(|h| ("--header", h))) {
        if path.as_os_str().is_empty() {
            return Err(Failure::usage(format!("{flag}: the path is empty")));
        }
        if path.is_dir() {
            return Err(Failure::usage(format!(
                "{flag} {}: is a directory, not a file",
                path.display()
            )));
        }
    }
    if let Some(header) = header
        && (same_file(object, header)
            || matches!((resolved(object), resolved(header)), (Some(o), Some(h)) if o == h))
    {
        return Err(Failure::usage(format!(
            "the header {} and the object {} are one file: give --header another path",
            header.display(),
            object.display()
        )));
    }
    files::check_extension(object, &["o", "obj"], "aot -o writes an object file")?;
    if let Some(header) = header {
        files::check_extension(header, &["h", "hpp"], "aot --header writes a C header")?;
    }
    Ok(())
}

/// `path` with its directory resolved (symlinks followed where it exists), for telling
/// whether two paths of files not yet written name the same one.
fn resolved(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let dir = fs::canonicalize(dir)
        .or_else(|_| std::path::absolute(dir))
        .ok()?;
    Some(dir.join(name))
}

/// The include guard of a header written to `path`: its file name in capitals with `_` for
/// every character that is not a letter or digit (`kernels.h` -> `KERNELS_H`), after
/// `GATHER_JIT_` where it would not start with a letter.
fn header_guard(path: &Path) -> String {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let guard: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if guard.starts_with(|c: char| c.is_ascii_alphabetic()) {
        guard
    } else {
        format!("GATHER_JIT_{guard}")
    }
}
