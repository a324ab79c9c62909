//! `gather-jit run`: one op on `.npy` and `.npz` files.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use gather_jit::interp::interpret;
use gather_jit::{Kernel, Validated};
use serde_json::json;

use crate::buffer;
use crate::failure::{Failure, Result};
use crate::npy::{self, Array, ElementType};
use crate::npz::{Archive, ArrayPath, DEFAULT_MEMBER, read_array, write_array};
use crate::opargs::{OpArgs, OpKind};
use crate::quantized;
use crate::timing::{human_time, nanos};

/// Run a gather on .npy or .npz files and write the output as .npy or .npz.
///
/// DATA and INDICES are `.npy` files or arrays of `.npz` archives (`FILE.npz:NAME`; an archive
/// of one array needs no name). One archive alone stands for both when it holds arrays named
/// `data` and `indices`, as `numpy.savez("in.npz", data=..., indices=...)` writes them.
///
/// Reads every element type of the IR (bool, int8..int64, uint8..uint64, float16/32/64;
/// bf16 as a 2-byte void `|V2`), little- or big-endian, C or Fortran order. The data and index
/// types come from the files. The output gets the data's element type, native byte order, C
/// order; `-o OUT.npz` writes an archive of one array, `output` (or `-o OUT.npz:NAME`). On any
/// error nothing is written: the output goes to a temporary file beside OUT, renamed over OUT
/// only when complete. OUT may not be an input (also through a link).
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  gather-jit run --op gather --axis 1 data.npy indices.npy -o out.npy
  gather-jit run --op gather --axis -1 in.npz -o out.npz --json
  gather-jit run --op gather weights.npz:table ids.npy -o out.npz:rows
  gather-jit run --flavor openvino-gathernd8 --batch-dims 1 data.npy indices.npy -o out.npy --check
  gather-jit run --op gather-block-quantized --bits 4 --block-size 32 data.npy ids.npy scales.npy -o out.npy
  gather-jit run --op gather-gguf --format q4_0 table.npy ids.npy -o out.npy")]
pub struct RunArgs {
    #[command(flatten)]
    op: OpArgs,
    /// The data tensor: FILE.npy or FILE.npz:NAME; or one FILE.npz holding `data` and `indices`
    #[arg(value_name = "DATA")]
    data: PathBuf,
    /// The indices tensor (any integer type): FILE.npy or FILE.npz:NAME
    #[arg(value_name = "INDICES")]
    indices: Option<PathBuf>,
    /// gather-block-quantized: the scales (float32, float16 or bfloat16)
    #[arg(value_name = "SCALES")]
    scales: Option<PathBuf>,
    /// gather-block-quantized: the zero points (uint8, packed as data), if any
    #[arg(value_name = "ZERO_POINTS")]
    zero_points_file: Option<PathBuf>,
    /// Where to write the output: OUT.npy, OUT.npz (array `output`) or OUT.npz:NAME
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// Also run the reference interpreter and fail (status 1) if it disagrees with the JIT
    #[arg(long)]
    check: bool,
    /// Print what was written and how long each stage took as one JSON object (times in
    /// nanoseconds)
    #[arg(long)]
    json: bool,
}

/// Runs `gather-jit run`.
///
/// # Errors
/// Unreadable or unsupported files, an output that is an input, an invalid signature, a
/// rejected index (its position and value), an output too large for memory, a failed write
/// (status 2); a disagreement under `--check` (status 1).
pub fn main(args: &RunArgs, out: &mut dyn Write) -> Result<()> {
    if args.op.kind().is_ok_and(OpKind::is_quantized) {
        let files = quantized::RunFiles {
            data: &args.data,
            indices: args.indices.as_deref(),
            scales: args.scales.as_deref(),
            zero_points: args.zero_points_file.as_deref(),
            output: &args.output,
            check: args.check,
            json: args.json,
        };
        return quantized::run(&args.op, &files, out);
    }
    if args.scales.is_some() || args.zero_points_file.is_some() {
        return Err(Failure::usage(
            "SCALES and ZERO_POINTS are inputs of --op gather-block-quantized only",
        ));
    }
    let started = Instant::now();
    let (data_path, indices_path) = inputs(args)?;
    let output_path = ArrayPath::parse(&args.output);
    refuse_to_overwrite(
        &output_path.file,
        &[
            ("data", data_path.file.as_path()),
            ("indices", indices_path.file.as_path()),
        ],
    )?;
    let named_in_one_archive = match (&data_path.member, &indices_path.member) {
        (Some(data), Some(indices)) if data_path.file == indices_path.file => Some((data, indices)),
        _ => None,
    };
    let (data, indices) = if let Some((data_name, indices_name)) = named_in_one_archive {
        // One archive holds both: its directory is read once.
        let mut archive = Archive::open(&data_path.file)?;
        (archive.read(data_name)?, archive.read(indices_name)?)
    } else {
        (read_array(&data_path)?, read_array(&indices_path)?)
    };
    let read = started.elapsed();
    let dtype = data.element.dtype().ok_or_else(|| {
        Failure::usage(format!(
            "{data_path}: not an element type gather-jit supports"
        ))
    })?;
    let index_type = indices.element.index_type().ok_or_else(|| {
        Failure::usage(format!(
            "{indices_path}: indices must have an integer type, found {}",
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
    let gathered = Instant::now();
    kernel.run_bytes(&data.bytes, &indices.bytes, &mut output)?;
    let gather = gathered.elapsed();
    let check_time = if args.check {
        let checked = Instant::now();
        check(validated, &data, &indices, &output)?;
        Some(checked.elapsed())
    } else {
        None
    };
    let header = npy::header(ElementType::of(dtype), validated.output_shape());
    let writing = Instant::now();
    write_array(&output_path, &header, &output)?;
    let write = writing.elapsed();
    let total = started.elapsed();
    if args.json {
        let json = json!({
            "wrote": output_path.file.display().to_string(),
            "array": output_path
                .is_npz()
                .then(|| output_path.member.as_deref().unwrap_or(DEFAULT_MEMBER)),
            "dtype": dtype.name(),
            "shape": validated.output_shape(),
            "bytes": output.len(),
            "op": sig.op.to_string(),
            "signature": sig.to_string(),
            "data": data_path.to_string(),
            "indices": indices_path.to_string(),
            "checked": args.check,
            "read_ns": nanos(read),
            "compile_ns": nanos(kernel.compile_time()),
            "gather_ns": nanos(gather),
            "check_ns": check_time.map(nanos),
            "write_ns": nanos(write),
            "total_ns": nanos(total),
        });
        outln!(out, "{json}");
        return Ok(());
    }
    outln!(
        out,
        "wrote {output_path}: {} {:?} ({}) in {}",
        dtype,
        validated.output_shape(),
        sig.op,
        human_time(total)
    );
    Ok(())
}

/// The data and the indices the positional arguments name: two arrays, or one archive of
/// `data` and `indices`.
fn inputs(args: &RunArgs) -> Result<(ArrayPath, ArrayPath)> {
    let data = ArrayPath::parse(&args.data);
    if let Some(indices) = &args.indices {
        return Ok((data, ArrayPath::parse(indices)));
    }
    if !data.is_npz() || data.member.is_some() {
        return Err(Failure::usage(format!(
            "no indices: give DATA and INDICES (FILE.npy or FILE.npz:NAME each), or one .npz \
             archive holding arrays named data and indices, not {data}"
        )));
    }
    let archive = Archive::open(&data.file)?;
    let missing: Vec<&str> = ["data", "indices"]
        .into_iter()
        .filter(|name| !archive.has(name))
        .collect();
    if !missing.is_empty() {
        return Err(Failure::usage(format!(
            "{data} alone must hold arrays named data and indices; it has no {} (it has: {}); \
             or give INDICES as well",
            missing.join(" or "),
            archive.names().join(", ")
        )));
    }
    let named = |name: &str| ArrayPath {
        file: data.file.clone(),
        member: Some(name.to_string()),
    };
    Ok((named("data"), named("indices")))
}

/// Fails if `output` is the same file as one of `inputs` (the same path, or the same file
/// through a symlink or a hard link): the rename over it would replace an input.
pub(crate) fn refuse_to_overwrite(output: &Path, inputs: &[(&str, &Path)]) -> Result<()> {
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
