//! `gather-jit run`: one op on `.npy` files.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use gather_jit::interp::interpret;
use gather_jit::{Kernel, Validated};

use crate::buffer;
use crate::failure::{Failure, Result};
use crate::npy::{self, Array, ElementType};
use crate::opargs::OpArgs;

/// Run a gather on .npy files and write the output as .npy.
///
/// Reads every element type of the IR (bool, int8..int64, uint8..uint64, float16/32/64;
/// bf16 as a 2-byte void `|V2`), little- or big-endian, C or Fortran order. The data and index
/// types come from the files. The output gets the data's element type, native byte order, C
/// order. On any error nothing is written: the output goes to a temporary file beside OUT,
/// renamed over OUT only when complete. OUT may not be an input (also through a link).
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  gather-jit run --op gather --axis 1 data.npy indices.npy -o out.npy
  gather-jit run --flavor openvino-gathernd8 --batch-dims 1 data.npy indices.npy -o out.npy --check")]
pub struct RunArgs {
    #[command(flatten)]
    op: OpArgs,
    /// The data tensor (.npy)
    data: PathBuf,
    /// The indices tensor (.npy, any integer type)
    indices: PathBuf,
    /// Where to write the output (.npy)
    #[arg(short, long, value_name = "OUT.npy")]
    output: PathBuf,
    /// Also run the reference interpreter and fail (status 1) if it disagrees with the JIT
    #[arg(long)]
    check: bool,
}

/// Runs `gather-jit run`.
///
/// # Errors
/// Unreadable or unsupported files, an output that is an input, an invalid signature, a
/// rejected index (its position and value), an output too large for memory, a failed write
/// (status 2); a disagreement under `--check` (status 1).
pub fn main(args: &RunArgs, out: &mut dyn Write) -> Result<()> {
    refuse_to_overwrite(
        &args.output,
        &[("data", &args.data), ("indices", &args.indices)],
    )?;
    let data = read(&args.data)?;
    let indices = read(&args.indices)?;
    let dtype = data.element.dtype().ok_or_else(|| {
        Failure::usage(format!(
            "{}: not an element type gather-jit supports",
            args.data.display()
        ))
    })?;
    let index_type = indices.element.index_type().ok_or_else(|| {
        Failure::usage(format!(
            "{}: indices must have an integer type, found {}",
            args.indices.display(),
            dtype_name(&indices)
        ))
    })?;
    let sig = args
        .op
        .signature(&data.shape, &indices.shape, dtype, index_type)?;
    let kernel = Kernel::compile(&sig)?;
    let validated = kernel.validated();
    let what = format!("the output of {}", sig.op);
    let len = buffer::byte_len(validated.output_len(), dtype.size(), &what)?;
    let mut output = buffer::zeroed(len, &what)?;
    kernel.run_bytes(&data.bytes, &indices.bytes, &mut output)?;
    if args.check {
        check(validated, &data, &indices, &output)?;
    }
    let header = npy::header(ElementType::of(dtype), validated.output_shape());
    write_atomically(&args.output, &[&header, &output])?;
    writeln!(
        out,
        "wrote {}: {} {:?} ({})",
        args.output.display(),
        dtype,
        validated.output_shape(),
        sig.op
    )
    .map_err(Failure::stdout)
}

/// Fails if `output` is the same file as one of `inputs` (the same path, or the same file
/// through a symlink or a hard link): the rename over it would replace an input.
fn refuse_to_overwrite(output: &Path, inputs: &[(&str, &Path)]) -> Result<()> {
    for &(role, input) in inputs {
        if same_file(output, input) {
            return Err(Failure::usage(format!(
                "the output {} is the same file as the {role} input {}: inputs are never overwritten, write the output elsewhere",
                output.display(),
                input.display()
            )));
        }
    }
    Ok(())
}

/// Whether `a` and `b` name one existing file (after following symlinks).
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(a), Ok(b)) = (fs::metadata(a), fs::metadata(b)) {
            return (a.dev(), a.ino()) == (b.dev(), b.ino());
        }
    }
    // A path that does not exist (yet) fails to resolve: it is not a file that was read.
    matches!((fs::canonicalize(a), fs::canonicalize(b)), (Ok(a), Ok(b)) if a == b)
}

fn dtype_name(array: &Array) -> &'static str {
    array.element.dtype().map_or("?", |d| d.name())
}

fn read(path: &Path) -> Result<Array> {
    let bytes = buffer::read_file(path)?;
    npy::parse(bytes).map_err(|e| Failure::usage(format!("{}: {e}", path.display())))
}

/// Runs the interpreter on the same inputs and compares.
fn check(validated: &Validated, data: &Array, indices: &Array, output: &[u8]) -> Result<()> {
    let expected = interpret(validated, &data.bytes, &indices.bytes)?;
    if expected != output {
        let size = validated.signature().dtype.size();
        let at = crate::report::first_difference(&expected, output) / size;
        return Err(Failure::disagreement(format!(
            "JIT and interpreter differ at output element {at} ({})",
            validated.signature()
        )));
    }
    Ok(())
}

/// Writes `parts` one after another to a temporary file in `path`'s directory and renames it to
/// `path`, so that `path` is either untouched or complete.
pub(crate) fn write_atomically(path: &Path, parts: &[&[u8]]) -> Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".gather-jit-").suffix(".npy.tmp");
    // A temporary file is private (0600); the output is an ordinary file.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644));
    let mut file = builder
        .tempfile_in(dir)
        .map_err(|e| Failure::io("create a temporary file in", dir, e))?;
    parts
        .iter()
        .try_for_each(|part| file.write_all(part))
        .and_then(|()| file.as_file().sync_all())
        .map_err(|e| Failure::io("write", file.path(), e))?;
    file.persist(path)
        .map_err(|e| Failure::io("write", path, e.error))?;
    Ok(())
}
