//! `gather-jit run`: one op on `.npy` and `.npz` files.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use gather_jit::quant::Quantization;
use gather_jit::{Inputs, Signature, Tuning};
use serde_json::json;

use crate::buffer;
use crate::failure::{Failure, Result};
use crate::npy::{self, Array, ElementType};
use crate::npz::{Archive, ArrayPath, DEFAULT_MEMBER, read_array, write_array};
use crate::op_kernel::{OpKernel, OpSignature};
use crate::opargs::{OpArgs, OpKind};
use crate::quantized::{self, Input};
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
    let started = Instant::now();
    let quantization = if args.op.kind().is_ok_and(OpKind::is_quantized) {
        Some(args.op.quantization(args.zero_points_file.is_some())?)
    } else {
        None
    };
    let files = InputFiles::of(args, quantization)?;
    let output_path = ArrayPath::parse(&args.output);
    refuse_to_overwrite(&output_path.file, &files.roles())?;
    let (data, indices) = files.read_data_and_indices()?;
    let read_optional = |path: &Option<ArrayPath>| -> Result<Option<Input>> {
        let Some(path) = path else { return Ok(None) };
        let array = read_array(path)?;
        Ok(Some(Input {
            path: path.clone(),
            array,
        }))
    };
    let scales = read_optional(&files.scales)?;
    let zero_points = read_optional(&files.zero_points)?;
    let read = started.elapsed();
    let sig = match quantization {
        Some(quantization) => OpSignature::Quantized(quantized::signature_of(
            &args.op,
            quantization,
            (&data, &indices),
            scales.as_ref(),
            zero_points.as_ref(),
        )?),
        None => OpSignature::Plain(plain_signature(&args.op, &data, &indices)?),
    };
    let kernel = sig.compile(Tuning::default())?;
    let layout = kernel.layout();
    let what = format!("the output of {}", sig.op_text());
    let mut output = buffer::zeroed(layout.output_bytes()?, &what)?;
    let inputs = Inputs {
        data: &data.array.bytes,
        indices: &indices.array.bytes,
        scales: scales.as_ref().map_or(&[][..], |s| &s.array.bytes[..]),
        zero_points: zero_points.as_ref().map(|z| &z.array.bytes[..]),
        updates: &[],
    };
    let gathered = Instant::now();
    kernel
        .compiled()
        .run_inputs(inputs, &mut output, 1)
        .map_err(|e| sig.index_failure(e))?;
    let gather = gathered.elapsed();
    let check_time = if args.check {
        let checked = Instant::now();
        check(&kernel, &sig, &inputs, &output)?;
        Some(checked.elapsed())
    } else {
        None
    };
    let dtype = layout.dtype();
    let header = npy::header(ElementType::of(dtype), layout.output_shape());
    let writing = Instant::now();
    write_array(&output_path, &header, &output)?;
    let write = writing.elapsed();
    let total = started.elapsed();
    if args.json {
        let mut json = json!({
            "wrote": output_path.file.display().to_string(),
            "array": output_path
                .is_npz()
                .then(|| output_path.member.as_deref().unwrap_or(DEFAULT_MEMBER)),
            "dtype": dtype.name(),
            "shape": layout.output_shape(),
            "bytes": output.len(),
            "op": sig.op_text(),
            "signature": sig.to_string(),
            "data": data.path.to_string(),
            "indices": indices.path.to_string(),
            "checked": args.check,
            "read_ns": nanos(read),
            "compile_ns": nanos(kernel.compiled().compile_time()),
            "gather_ns": nanos(gather),
            "check_ns": check_time.map(nanos),
            "write_ns": nanos(write),
            "total_ns": nanos(total),
        });
        // The quantized ops' own inputs, beside the keys every op has.
        if quantization.is_some() {
            let named = |input: &Option<Input>| input.as_ref().map(|i| i.path.to_string());
            json["scales"] = named(&scales).into();
            json["zero_points"] = named(&zero_points).into();
        }
        outln!(out, "{json}");
        return Ok(());
    }
    outln!(
        out,
        "wrote {output_path}: {} {:?} ({}) in {}",
        dtype,
        layout.output_shape(),
        sig.op_text(),
        human_time(total)
    );
    Ok(())
}

/// The signature of a plain gather on these arrays: the data's element type, the indices'
/// integer type.
fn plain_signature(op: &OpArgs, data: &Input, indices: &Input) -> Result<Signature> {
    let dtype = data.array.element.dtype().ok_or_else(|| {
        Failure::usage(format!(
            "{}: not an element type gather-jit supports",
            data.path
        ))
    })?;
    let index_type = indices.array.element.index_type().ok_or_else(|| {
        Failure::usage(format!(
            "{}: indices must have an integer type, found {}",
            indices.path,
            dtype_name(&indices.array)
        ))
    })?;
    op.signature(&data.array.shape, &indices.array.shape, dtype, index_type)
}

/// The arrays the positional arguments name.
struct InputFiles {
    data: ArrayPath,
    indices: ArrayPath,
    scales: Option<ArrayPath>,
    zero_points: Option<ArrayPath>,
}

impl InputFiles {
    /// The inputs of `args` for the op: SCALES (and optionally ZERO_POINTS) with
    /// gather-block-quantized only.
    fn of(args: &RunArgs, quantization: Option<Quantization>) -> Result<InputFiles> {
        let extra = |path: &Option<PathBuf>| path.as_deref().map(ArrayPath::parse);
        match quantization {
            None if args.scales.is_some() || args.zero_points_file.is_some() => {
                return Err(Failure::usage(
                    "SCALES and ZERO_POINTS are inputs of --op gather-block-quantized only",
                ));
            }
            Some(Quantization::Gguf(_)) if args.scales.is_some() => {
                return Err(Failure::usage(
                    "--op gather-gguf takes DATA and INDICES only (its scales are in the blocks)",
                ));
            }
            Some(Quantization::Block(_)) if args.scales.is_none() => {
                return Err(Failure::usage(
                    "SCALES is required with --op gather-block-quantized",
                ));
            }
            _ => {}
        }
        let (data, indices) = inputs(args)?;
        Ok(InputFiles {
            data,
            indices,
            scales: extra(&args.scales),
            zero_points: extra(&args.zero_points_file),
        })
    }

    /// Each input file with its role, for [`refuse_to_overwrite`].
    fn roles(&self) -> Vec<(&'static str, &Path)> {
        let mut roles = vec![
            ("data", self.data.file.as_path()),
            ("indices", self.indices.file.as_path()),
        ];
        if let Some(scales) = &self.scales {
            roles.push(("scales", scales.file.as_path()));
        }
        if let Some(zero_points) = &self.zero_points {
            roles.push(("zero points", zero_points.file.as_path()));
        }
        roles
    }

    /// Reads data and indices (an archive that holds both: its directory once).
    fn read_data_and_indices(&self) -> Result<(Input, Input)> {
        let (data_path, indices_path) = (&self.data, &self.indices);
        let named_in_one_archive = match (&data_path.member, &indices_path.member) {
            (Some(data), Some(indices)) if data_path.file == indices_path.file => {
                Some((data, indices))
            }
            _ => None,
        };
        let (data, indices) = if let Some((data_name, indices_name)) = named_in_one_archive {
            let mut archive = Archive::open(&data_path.file)?;
            (archive.read(data_name)?, archive.read(indices_name)?)
        } else {
            (read_array(data_path)?, read_array(indices_path)?)
        };
        let input = |path: &ArrayPath, array| Input {
            path: path.clone(),
            array,
        };
        Ok((input(data_path, data), input(indices_path, indices)))
    }
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
pub(crate) fn same_file(a: &Path, b: &Path) -> bool {
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
fn check(kernel: &OpKernel, sig: &OpSignature, inputs: &Inputs, output: &[u8]) -> Result<()> {
    let expected = kernel.interpret(inputs).map_err(|e| sig.index_failure(e))?;
    if expected != output {
        let at = crate::report::first_difference(&expected, output) / sig.dtype().size();
        return Err(Failure::disagreement(format!(
            "JIT and interpreter differ at output element {at} ({sig})"
        )));
    }
    Ok(())
}
