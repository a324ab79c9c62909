//! `gather-jit run`: one op on `.npy` files.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use gather_jit::interp::interpret;
use gather_jit::{Kernel, Validated};

use crate::failure::{Failure, Result};
use crate::npy::{self, Array, ElementType};
use crate::opargs::OpArgs;

/// Run a gather on .npy files and write the output as .npy.
///
/// Reads every element type of the IR (bool, int8..int64, uint8..uint64, float16/32/64;
/// bf16 as a 2-byte void `|V2`), little- or big-endian, C or Fortran order. The data and index
/// types come from the files. The output gets the data's element type, native byte order, C
/// order. On any error nothing is written: the output goes to a temporary file beside OUT,
/// renamed over OUT only when complete.
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
/// Unreadable or unsupported files, an invalid signature, a rejected index (its position and
/// value), a failed write (status 2); a disagreement under `--check` (status 1).
pub fn main(args: &RunArgs) -> Result<()> {
    let data = read(&args.data)?;
    let indices = read(&args.indices)?;
    let dtype = data
        .element
        .dtype()
        .expect("the reader accepts only IR element types");
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
    let mut output = vec![0u8; validated.output_len() * dtype.size()];
    kernel.run_bytes(&data.bytes, &indices.bytes, &mut output)?;
    if args.check {
        check(validated, &data, &indices, &output)?;
    }
    let file = npy::serialize(ElementType::of(dtype), validated.output_shape(), &output);
    write_atomically(&args.output, &file)?;
    println!(
        "wrote {}: {} {:?} ({})",
        args.output.display(),
        dtype,
        validated.output_shape(),
        sig.op
    );
    Ok(())
}

fn dtype_name(array: &Array) -> &'static str {
    array.element.dtype().map_or("?", |d| d.name())
}

fn read(path: &Path) -> Result<Array> {
    let bytes = std::fs::read(path).map_err(|e| Failure::io("read", path, e))?;
    npy::parse(&bytes).map_err(|e| Failure::usage(format!("{}: {e}", path.display())))
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

/// Writes `bytes` to a temporary file in `path`'s directory and renames it to `path`, so that
/// `path` is either untouched or complete.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
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
    file.write_all(bytes)
        .and_then(|()| file.as_file().sync_all())
        .map_err(|e| Failure::io("write", file.path(), e))?;
    file.persist(path)
        .map_err(|e| Failure::io("write", path, e.error))?;
    Ok(())
}
