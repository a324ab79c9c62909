//! `gather-jit run`: one op on `.npy` and `.npz` files.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use gather_jit::quant::Quantization;
use gather_jit::{Inputs, Signature, Tuning};
use serde_json::json;

use crate::buffer;
use crate::failure::{Failure, Result};
use crate::files;
use crate::npy::{self, Array, ElementType};
use crate::npz::{Archive, ArrayPath, DEFAULT_MEMBER, read_array, write_array};
use crate::op_kernel::{OpKernel, OpSignature};
use crate::opargs::{OpArgs, OpKind};
use crate::quantized::{self, Input};
use crate::scatter;
use crate::timing::{human_time, nanos};

/// Run a gather or a scatter on .npy or .npz files and write the output as .npy or .npz.
///
/// DATA, INDICES (and a scatter's UPDATES) are `.npy` files or arrays of `.npz` archives
/// (`FILE.npz:NAME`; an archive of one array needs no name). One archive alone stands for all
/// when it holds arrays named `data` and `indices` (and `updates`), as
/// `numpy.savez("in.npz", data=..., indices=...)` writes them.
///
/// Reads every element type of the IR (bool, int8..int64, uint8..uint64, float16/32/64;
/// bf16 as a 2-byte void `|V2`), little- or big-endian, C or Fortran order. The data and index
/// types come from the files (a scatter's updates have data's type). The output gets the data's
/// element type, native byte order, C order (a scatter's output has data's shape);
/// `-o OUT.npz` writes an archive of one array, `output` (or `-o OUT.npz:NAME`). On any error
/// nothing is written: the output goes to a temporary file beside OUT, renamed over OUT only
/// when complete. OUT may not be an input (also through a link).
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  gather-jit run --op gather --axis 1 data.npy indices.npy -o out.npy
  gather-jit run --op gather --axis -1 in.npz -o out.npz --json
  gather-jit run --op gather weights.npz:table ids.npy -o out.npz:rows
  gather-jit run --flavor openvino-gathernd8 --batch-dims 1 data.npy indices.npy -o out.npy --check
  gather-jit run --op gather-block-quantized --bits 4 --block-size 32 data.npy ids.npy scales.npy -o out.npy
  gather-jit run --op gather-gguf --format q4_0 table.npy ids.npy -o out.npy
  gather-jit run --op scatter-nd --reduction add data.npy indices.npy updates.npy -o out.npy
  gather-jit run --op scatter-elements --flavor openvino-scatterelementsupdate12 --axis 1 --reduction mean --use-init-val false data.npy indices.npy updates.npy -o out.npy")]
pub struct RunArgs {
    #[command(flatten)]
    op: OpArgs,
    /// The data tensor: FILE.npy or FILE.npz:NAME; or one FILE.npz holding `data` and `indices`
    /// (and `updates`, for a scatter)
    #[arg(value_name = "DATA")]
    data: PathBuf,
    /// The indices tensor (any integer type): FILE.npy or FILE.npz:NAME
    #[arg(value_name = "INDICES")]
    indices: Option<PathBuf>,
    /// A scatter's updates (data's element type); gather-block-quantized's scales (float32,
    /// float16 or bfloat16)
    #[arg(value_name = "UPDATES|SCALES")]
    third: Option<PathBuf>,
    /// gather-block-quantized: the zero points (uint8, packed as data), if any
    #[arg(value_name = "ZERO_POINTS")]
    zero_points_file: Option<PathBuf>,
    /// Where to write the output: OUT.npy, OUT.npz (array `output`) or OUT.npz:NAME
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// Also run the reference interpreter and fail (status 1) if it disagrees with the JIT
    #[arg(long)]
    check: bool,
    /// Scatters: run the kernel's in-place entry point on the data as read (the file DATA is
    /// never written; the result goes to OUT as without the flag)
    #[arg(long)]
    in_place: bool,
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
    let kind = args.op.kind();
    let quantization = if kind.as_ref().is_ok_and(|k| k.is_quantized()) {
        Some(args.op.quantization(args.zero_points_file.is_some())?)
    } else {
        None
    };
    let is_scatter = kind.as_ref().is_ok_and(|k| k.is_scatter());
    if args.in_place && !is_scatter {
        return Err(Failure::usage(
            "--in-place applies to the scatters only (a gather's output is a new tensor)",
        ));
    }
    let files = InputFiles::of(args, quantization, is_scatter)?;
    let output_path = ArrayPath::parse(&args.output);
    files::check_extension(
        &output_path.file,
        &["npy", "npz"],
        "run -o writes an .npy file or an .npz archive (OUT.npz:NAME names its array)",
    )?;
    files::refuse_json_to_stdout(&output_path.file, args.json)?;
    files::refuse_to_overwrite(&output_path.file, &files.roles())?;
    let (mut data, indices) = files.read_data_and_indices()?;
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
    let updates = read_optional(&files.updates)?;
    let read = started.elapsed();
    let sig = match (quantization, &updates) {
        (Some(quantization), _) => OpSignature::Quantized(quantized::signature_of(
            &args.op,
            quantization,
            (&data, &indices),
            scales.as_ref(),
            zero_points.as_ref(),
        )?),
        (None, Some(updates)) => {
            OpSignature::Scatter(scatter::signature_of(&args.op, &data, &indices, updates)?)
        }
        (None, None) => OpSignature::Plain(plain_signature(&args.op, &data, &indices)?),
    };
    let kernel = sig.compile(Tuning::default())?;
    let layout = kernel.layout();
    let what = format!("the output of {}", sig.op_text());
    let updates_bytes = updates.as_ref().map_or(&[][..], |u| &u.array.bytes[..]);
    // In place, the data as read is the output; the interpreter of --check needs a copy of it.
    let (output, original, op_time) = if args.in_place {
        let original = if args.check {
            let bytes = &data.array.bytes;
            let mut copy = buffer::with_capacity(bytes.len(), "a copy of the data")?;
            copy.extend_from_slice(bytes);
            Some(copy)
        } else {
            None
        };
        let mut output = std::mem::take(&mut data.array.bytes);
        let scatter_kernel = kernel
            .scatter()
            .ok_or_else(|| Failure::usage("--in-place applies to the scatters only"))?;
        let started = Instant::now();
        scatter_kernel
            .run_bytes_in_place(&mut output, &indices.array.bytes, updates_bytes)
            .map_err(|e| sig.index_failure(e))?;
        (output, original, started.elapsed())
    } else {
        let mut output = buffer::zeroed(layout.output_bytes()?, &what)?;
        let inputs = Inputs {
            data: &data.array.bytes,
            indices: &indices.array.bytes,
            scales: scales.as_ref().map_or(&[][..], |s| &s.array.bytes[..]),
            zero_points: zero_points.as_ref().map(|z| &z.array.bytes[..]),
            updates: updates_bytes,
        };
        let started = Instant::now();
        kernel
            .compiled()
            .run_inputs(inputs, &mut output, 1)
            .map_err(|e| sig.index_failure(e))?;
        (output, None, started.elapsed())
    };
    let check_time = if args.check {
        let inputs = Inputs {
            data: original.as_deref().unwrap_or(&data.array.bytes),
            indices: &indices.array.bytes,
            scales: scales.as_ref().map_or(&[][..], |s| &s.array.bytes[..]),
            zero_points: zero_points.as_ref().map(|z| &z.array.bytes[..]),
            updates: updates_bytes,
        };
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
            "check_ns": check_time.map(nanos),
            "write_ns": nanos(write),
            "total_ns": nanos(total),
        });
        // The op families' own inputs and times, beside the keys every op has.
        let named = |input: &Option<Input>| input.as_ref().map(|i| i.path.to_string());
        if quantization.is_some() {
            json["scales"] = named(&scales).into();
            json["zero_points"] = named(&zero_points).into();
        }
        if is_scatter {
            json["updates"] = named(&updates).into();
            json["flavor"] = sig.flavor().into();
            json["in_place"] = args.in_place.into();
            json["scatter_ns"] = nanos(op_time).into();
        } else {
            json["gather_ns"] = nanos(op_time).into();
        }
        outln!(out, "{json}");
        return Ok(());
    }
    // Written to standard output, the output is all it says.
    if files::is_stdout(&output_path.file) {
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
    updates: Option<ArrayPath>,
}

impl InputFiles {
    /// The inputs of `args` for the op: SCALES (and optionally ZERO_POINTS) with
    /// gather-block-quantized only, UPDATES with the scatters only.
    fn of(
        args: &RunArgs,
        quantization: Option<Quantization>,
        is_scatter: bool,
    ) -> Result<InputFiles> {
        let extra = |path: &Option<PathBuf>| path.as_deref().map(ArrayPath::parse);
        if is_scatter {
            let scatter_op = args.op.kind().map_or("", OpKind::flag);
            if args.zero_points_file.is_some() {
                return Err(Failure::usage(format!(
                    "--op {scatter_op} takes DATA, INDICES and UPDATES only"
                )));
            }
            let (data, indices, updates) = match (&args.indices, &args.third) {
                (Some(indices), Some(updates)) => (
                    ArrayPath::parse(&args.data),
                    ArrayPath::parse(indices),
                    ArrayPath::parse(updates),
                ),
                (Some(_), None) => {
                    return Err(Failure::usage(format!(
                        "UPDATES is required with --op {scatter_op}: give DATA INDICES UPDATES \
                         (FILE.npy or FILE.npz:NAME each), or one .npz archive holding arrays \
                         named data, indices and updates"
                    )));
                }
                _ => {
                    let [data, indices, updates] =
                        one_archive(args, ["data", "indices", "updates"])?;
                    (data, indices, updates)
                }
            };
            return Ok(InputFiles {
                data,
                indices,
                scales: None,
                zero_points: None,
                updates: Some(updates),
            });
        }
        match quantization {
            None if args.third.is_some() || args.zero_points_file.is_some() => {
                // Without an op, that is what to report (it may be a scatter's UPDATES).
                args.op.kind()?;
                return Err(Failure::usage(
                    "SCALES and ZERO_POINTS are inputs of --op gather-block-quantized only \
                     (UPDATES of the scatters)",
                ));
            }
            Some(Quantization::Gguf(_)) if args.third.is_some() => {
                return Err(Failure::usage(
                    "--op gather-gguf takes DATA and INDICES only (its scales are in the blocks)",
                ));
            }
            Some(Quantization::Block(_)) if args.third.is_none() => {
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
            scales: extra(&args.third),
            zero_points: extra(&args.zero_points_file),
            updates: None,
        })
    }

    /// Each input file with its role, for [`files::refuse_to_overwrite`].
    fn roles(&self) -> Vec<(&'static str, &Path)> {
        let mut roles = vec![
            ("data input", self.data.file.as_path()),
            ("indices input", self.indices.file.as_path()),
        ];
        if let Some(scales) = &self.scales {
            roles.push(("scales input", scales.file.as_path()));
        }
        if let Some(zero_points) = &self.zero_points {
            roles.push(("zero points input", zero_points.file.as_path()));
        }
        if let Some(updates) = &self.updates {
            roles.push(("updates input", updates.file.as_path()));
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
    let [data, indices] = one_archive(args, ["data", "indices"])?;
    Ok((data, indices))
}

/// `names` as a list in words: `a and b`, `a, b and c`.
fn listed(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// The arrays `names` of the one archive DATA names, each checked to be there.
fn one_archive<const N: usize>(args: &RunArgs, names: [&str; N]) -> Result<[ArrayPath; N]> {
    let data = ArrayPath::parse(&args.data);
    let upper: Vec<String> = names.iter().map(|name| name.to_uppercase()).collect();
    let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
    if !data.is_npz() || data.member.is_some() {
        return Err(Failure::usage(format!(
            "no indices: give {} (FILE.npy or FILE.npz:NAME each), or one .npz archive \
             holding arrays named {}, not {data}",
            listed(&upper),
            listed(&names)
        )));
    }
    let archive = Archive::open(&data.file)?;
    let missing: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| !archive.has(name))
        .collect();
    if !missing.is_empty() {
        return Err(Failure::usage(format!(
            "{data} alone must hold arrays named {}; it has no {} (it has: {}); or give {} as \
             well",
            listed(&names),
            missing.join(" or "),
            archive.names().join(", "),
            listed(&upper[1..])
        )));
    }
    Ok(names.map(|name| ArrayPath {
        file: data.file.clone(),
        member: Some(name.to_string()),
    }))
}

fn dtype_name(array: &Array) -> &'static str {
    array.element.dtype().map_or("?", |d| d.name())
}

/// Runs the interpreter on the same inputs and compares.
///
/// # Errors
/// The interpreter's error; a disagreement (status 1).
pub(crate) fn check(
    kernel: &OpKernel,
    sig: &OpSignature,
    inputs: &Inputs,
    output: &[u8],
) -> Result<()> {
    let expected = kernel.interpret(inputs).map_err(|e| sig.index_failure(e))?;
    if expected != output {
        let at = crate::report::first_difference(&expected, output) / sig.dtype().size();
        return Err(Failure::disagreement(format!(
            "JIT and interpreter differ at output element {at} ({sig})"
        )));
    }
    Ok(())
}
