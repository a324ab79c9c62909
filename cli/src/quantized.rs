//! `run`, `explain` and `bench` for the quantized gathers (`--op gather-block-quantized`,
//! `--op gather-gguf`): their inputs are packed `uint8` data, scales and zero points rather
//! than one data tensor, so they take this path once the op is known.

use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use gather_jit::{
    DType, GgufFormat, IndexType, OutOfRange, Quantization, QuantizedKernel, QuantizedLayout,
    QuantizedSignature, interpret_quantized,
};
use half::{bf16, f16};
use serde_json::json;

use crate::buffer;
use crate::failure::{Failure, Result};
use crate::npy::{self, Array, ElementType};
use crate::npz::{ArrayPath, read_array, write_array};
use crate::opargs::OpArgs;
use crate::random::XorShift;
use crate::timing::{human_time, measure, nanos};

/// The logical (dequantized) data shape of stored `uint8` data of `stored` shape.
///
/// # Errors
/// GGUF rows that are not whole blocks; data of rank 0.
fn logical_shape(quantization: Quantization, stored: &[usize], data: &str) -> Result<Vec<usize>> {
    let Some((&last, _)) = stored.split_last() else {
        return Err(Failure::usage(format!(
            "{data}: quantized data must have at least one dim, not a scalar"
        )));
    };
    let mut logical = stored.to_vec();
    match quantization {
        Quantization::Block(q) => {
            let per_byte = if q.bits == 4 { 2 } else { 1 };
            logical[stored.len() - 1] = last.checked_mul(per_byte).ok_or_else(|| {
                Failure::usage(format!("{data}: a last dim of {last} bytes is too large"))
            })?;
        }
        Quantization::Gguf(format) => {
            if stored.len() != 2 || last % format.block_bytes() != 0 {
                return Err(Failure::usage(format!(
                    "{data}: GGUF data must be uint8 [rows, bytes_per_row] of whole {} blocks \
                     ({} bytes each), not {stored:?}",
                    format.name(),
                    format.block_bytes()
                )));
            }
            logical[1] = last / format.block_bytes() * GgufFormat::BLOCK_VALUES;
        }
    }
    Ok(logical)
}

/// The inputs of `run` for a quantized op.
pub struct RunFiles<'a> {
    /// DATA: packed `uint8`.
    pub data: &'a Path,
    /// INDICES.
    pub indices: Option<&'a Path>,
    /// SCALES (block quantization).
    pub scales: Option<&'a Path>,
    /// ZERO_POINTS (block quantization, optional).
    pub zero_points: Option<&'a Path>,
    /// -o OUT.
    pub output: &'a Path,
    /// --check.
    pub check: bool,
    /// --json.
    pub json: bool,
}

/// `gather-jit run` for a quantized op.
///
/// # Errors
/// Unreadable files, data that is not `uint8`, scales or zero points of the wrong shape or
/// type, an invalid quantization, a bad index (its position and value), a failed write.
pub fn run<'a>(op: &OpArgs, files: &RunFiles<'a>, out: &mut dyn Write) -> Result<()> {
    let started = Instant::now();
    let quantization = op.quantization(files.zero_points.is_some())?;
    let flag = op.kind().map_or("?", |k| k.flag());
    let need = |path: Option<&'a Path>, what: &str| -> Result<&'a Path> {
        path.ok_or_else(|| Failure::usage(format!("{what} is required with --op {flag}")))
    };
    let data_path = ArrayPath::parse(files.data);
    let indices_path = ArrayPath::parse(need(files.indices, "INDICES")?);
    let scales_path = match quantization {
        Quantization::Block(_) => Some(ArrayPath::parse(need(files.scales, "SCALES")?)),
        Quantization::Gguf(_) => {
            if files.scales.is_some() {
                return Err(Failure::usage(
                    "--op gather-gguf takes DATA and INDICES only (its scales are in the blocks)",
                ));
            }
            None
        }
    };
    let zp_path = files.zero_points.map(ArrayPath::parse);
    let output_path = ArrayPath::parse(files.output);
    let mut inputs = vec![("data", data_path.file.as_path())];
    inputs.push(("indices", indices_path.file.as_path()));
    if let Some(s) = &scales_path {
        inputs.push(("scales", s.file.as_path()));
    }
    if let Some(z) = &zp_path {
        inputs.push(("zero points", z.file.as_path()));
    }
    crate::run::refuse_to_overwrite(&output_path.file, &inputs)?;

    let data = read_array(&data_path)?;
    require_u8(&data, &data_path)?;
    let indices = read_array(&indices_path)?;
    let index_type = indices.element.index_type().ok_or_else(|| {
        Failure::usage(format!("{indices_path}: indices must have an integer type"))
    })?;
    let scales = scales_path.as_ref().map(read_array).transpose()?;
    let dtype = match &scales {
        Some(scales) => match scales.element.dtype() {
            Some(d @ (DType::F32 | DType::F16 | DType::Bf16)) => d,
            _ => {
                return Err(Failure::usage(format!(
                    "{}: scales must be float32, float16 or bfloat16",
                    scales_path
                        .as_ref()
                        .map_or(String::new(), ToString::to_string)
                )));
            }
        },
        None => DType::F32,
    };
    let zero_points = zp_path.as_ref().map(read_array).transpose()?;
    if let (Some(zp), Some(path)) = (&zero_points, &zp_path) {
        require_u8(zp, path)?;
    }
    let read = started.elapsed();
    let logical = logical_shape(quantization, &data.shape, &data_path.to_string())?;
    let sig = op.quantized_signature(quantization, &logical, &indices.shape, dtype, index_type);
    let layout = sig.validate()?;
    if let (Some(scales), Some(path)) = (&scales, &scales_path) {
        check_shape(path, &scales.shape, layout.scales_shape(), "scales")?;
    }
    if let (Some(zp), Some(path), Some(shape)) =
        (&zero_points, &zp_path, layout.zero_points_bytes_shape())
    {
        check_shape(path, &zp.shape, shape, "zero points")?;
    }
    let kernel = QuantizedKernel::compile(&sig)?;
    let what = format!("the output of {}", sig.op_name());
    let mut output = buffer::zeroed(layout.output_bytes(), &what)?;
    let scale_bytes = scales.as_ref().map_or(&[][..], |s| &s.bytes[..]);
    let zp_bytes = zero_points.as_ref().map(|z| &z.bytes[..]);
    let gathered = Instant::now();
    kernel.run_bytes(
        &data.bytes,
        &indices.bytes,
        scale_bytes,
        zp_bytes,
        &mut output,
    )?;
    let gather = gathered.elapsed();
    let check_time = if files.check {
        let checked = Instant::now();
        let expected =
            interpret_quantized(&layout, &data.bytes, &indices.bytes, scale_bytes, zp_bytes)?;
        if expected != output {
            let at = crate::report::first_difference(&expected, &output) / dtype.size();
            return Err(Failure::disagreement(format!(
                "JIT and interpreter differ at output element {at} ({sig})"
            )));
        }
        Some(checked.elapsed())
    } else {
        None
    };
    let header = npy::header(ElementType::of(dtype), layout.output_shape());
    let writing = Instant::now();
    write_array(&output_path, &header, &output)?;
    let write = writing.elapsed();
    let total = started.elapsed();
    if files.json {
        let json = json!({
            "wrote": output_path.file.display().to_string(),
            "dtype": dtype.name(),
            "shape": layout.output_shape(),
            "bytes": output.len(),
            "op": sig.op_name().to_string(),
            "signature": sig.to_string(),
            "checked": files.check,
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
        layout.output_shape(),
        sig.op_name(),
        human_time(total)
    );
    Ok(())
}

fn require_u8(array: &Array, path: &ArrayPath) -> Result<()> {
    if array.element.dtype() == Some(DType::U8) {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "{path}: quantized data and zero points must be uint8 (packed), not {}",
        array
            .element
            .dtype()
            .map_or("an unsupported type", DType::name)
    )))
}

fn check_shape(path: &ArrayPath, actual: &[usize], expected: &[usize], what: &str) -> Result<()> {
    if actual == expected {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "{path}: {what} of shape {actual:?} do not fit the data: expected {expected:?}"
    )))
}

/// The random inputs of a quantized signature: packed data (GGUF blocks with finite `f16`
/// scales), finite scales, zero points, valid indices.
struct Inputs {
    data: Vec<u8>,
    indices: Vec<u8>,
    scales: Vec<u8>,
    zero_points: Option<Vec<u8>>,
}

fn random_inputs(layout: &QuantizedLayout, seed: u64) -> Result<Inputs> {
    let sig = layout.signature();
    let mut rng = XorShift::new(seed);
    let mut data = buffer::zeroed(layout.data_bytes(), "the data")?;
    rng.fill(&mut data);
    if let Quantization::Gguf(format) = sig.quantization {
        for block in data.chunks_mut(format.block_bytes()) {
            let d = f16::from_f32(f32::from(block[0]) / 4096.0);
            block[..2].copy_from_slice(&d.to_le_bytes());
        }
    }
    let mut scales = buffer::zeroed(layout.scales_bytes(), "the scales")?;
    let size = sig.dtype.size();
    for scale in scales.chunks_mut(size) {
        let value = (rng.next_u64() % 1000) as f32 / 8192.0;
        match sig.dtype {
            DType::F16 => scale.copy_from_slice(&f16::from_f32(value).to_ne_bytes()),
            DType::Bf16 => scale.copy_from_slice(&bf16::from_f32(value).to_ne_bytes()),
            _ => scale.copy_from_slice(&value.to_ne_bytes()),
        }
    }
    // Given whenever the signature has zero points, even as an empty buffer.
    let zero_points = if layout.zero_points_bytes_shape().is_some() {
        let mut zp = buffer::zeroed(layout.zero_points_bytes(), "the zero points")?;
        rng.fill(&mut zp);
        Some(zp)
    } else {
        None
    };
    // Below the gathered dim and within the index type (a dim of 200 and `int8` indices
    // draw from 0..128).
    let dim = sig.data_shape[layout.gather_axis()] as u64;
    let count: usize = sig.indices_shape.iter().product();
    if dim == 0 && count > 0 && sig.policy.out_of_range != OutOfRange::Zero {
        return Err(Failure::usage(format!(
            "cannot make valid indices: data dim {} of shape {:?} is empty",
            layout.gather_axis(),
            sig.data_shape
        )));
    }
    let bound = dim.min(sig.index_type.max_value().saturating_add(1));
    let mut indices = Vec::new();
    indices
        .try_reserve_exact(layout.indices_bytes())
        .map_err(|_| Failure::allocation(layout.indices_bytes(), "the indices"))?;
    for _ in 0..count {
        let value = if bound == 0 { 0 } else { rng.below(bound) };
        let fits = sig.index_type.try_encode(value.into(), &mut indices);
        debug_assert!(fits, "below the index type's maximum");
    }
    Ok(Inputs {
        data,
        indices,
        scales,
        zero_points,
    })
}

/// The signature `explain` and `bench` describe: `--data-shape` is the logical shape.
fn signature(
    op: &OpArgs,
    data_shape: &[usize],
    indices_shape: &[usize],
    dtype: DType,
    index_type: IndexType,
) -> Result<QuantizedSignature> {
    let quantization = op.quantization(op.zero_points)?;
    Ok(op.quantized_signature(quantization, data_shape, indices_shape, dtype, index_type))
}

/// `gather-jit explain` for a quantized op: the signature, every buffer's shape, the code.
///
/// # Errors
/// An invalid signature.
pub fn explain(
    op: &OpArgs,
    shapes: (&[usize], &[usize]),
    types: (DType, IndexType),
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let sig = signature(op, shapes.0, shapes.1, types.0, types.1)?;
    let kernel = QuantizedKernel::compile(&sig)?;
    let layout = kernel.layout();
    if json {
        let json = json!({
            "signature": sig.to_string(),
            "op": sig.op_name().to_string(),
            "data_shape": sig.data_shape,
            "data_bytes_shape": layout.data_bytes_shape(),
            "scales_shape": layout.scales_shape(),
            "zero_points_bytes_shape": layout.zero_points_bytes_shape(),
            "indices_shape": sig.indices_shape,
            "output_shape": layout.output_shape(),
            "output_bytes": layout.output_bytes(),
            "code_bytes": kernel.code_bytes(),
            "compile_ns": nanos(kernel.compile_time()),
        });
        outln!(out, "{json}");
        return Ok(());
    }
    outln!(out, "signature     {sig}");
    outln!(
        out,
        "data          uint8 {:?} (logical {:?})",
        layout.data_bytes_shape(),
        sig.data_shape
    );
    if !layout.scales_shape().is_empty() {
        outln!(
            out,
            "scales        {} {:?}",
            sig.dtype,
            layout.scales_shape()
        );
    }
    if let Some(zp) = layout.zero_points_bytes_shape() {
        outln!(out, "zero points   uint8 {zp:?}");
    }
    outln!(
        out,
        "indices       {} {:?}",
        sig.index_type,
        sig.indices_shape
    );
    outln!(
        out,
        "output        {} {:?} ({} bytes)",
        sig.dtype,
        layout.output_shape(),
        layout.output_bytes()
    );
    outln!(
        out,
        "code          {} bytes, compiled in {}",
        kernel.code_bytes(),
        human_time(kernel.compile_time())
    );
    Ok(())
}

/// What `bench` measures for a quantized op.
pub struct BenchSettings {
    /// Time budget of each measurement.
    pub budget: Duration,
    /// Seed of the random inputs.
    pub seed: u64,
    /// One JSON object.
    pub json: bool,
}

/// `gather-jit bench` for a quantized op: the kernel beside a memcpy and a fill of its
/// output, and the compile.
///
/// # Errors
/// An invalid signature; buffers too large for memory.
pub fn bench(
    op: &OpArgs,
    shapes: (&[usize], &[usize]),
    types: (DType, IndexType),
    settings: &BenchSettings,
    out: &mut dyn Write,
) -> Result<()> {
    let sig = signature(op, shapes.0, shapes.1, types.0, types.1)?;
    let layout = sig.validate()?;
    let inputs = random_inputs(&layout, settings.seed)?;
    let output_bytes = layout.output_bytes();
    let mut output = buffer::zeroed(output_bytes, "the output")?;
    let mut source = buffer::zeroed(output_bytes, "the memcpy's source")?;
    XorShift::new(settings.seed ^ 1).fill(&mut source);
    let mut copy = buffer::zeroed(output_bytes, "the memcpy's destination")?;
    let started = Instant::now();
    let kernel = QuantizedKernel::compile(&sig)?;
    let first_compile = started.elapsed();
    let compile = measure(settings.budget.min(Duration::from_millis(200)), || {
        black_box(QuantizedKernel::compile(black_box(&sig)).is_ok());
    });
    let run = |output: &mut [u8]| {
        kernel.run_bytes(
            &inputs.data,
            &inputs.indices,
            &inputs.scales,
            inputs.zero_points.as_deref(),
            output,
        )
    };
    run(&mut output)?;
    let jit = measure(settings.budget, || {
        // The first call succeeded on these buffers, so every later one does too.
        let _ = run(black_box(&mut output));
    });
    let memcpy = measure(settings.budget, || {
        black_box(&mut copy).copy_from_slice(&source);
    });
    let fill = measure(settings.budget, || black_box(&mut copy).fill(0x5a));
    let ratio_to = |base: f64| if base > 0.0 { jit.median / base } else { 0.0 };
    let ns = |x: f64| Duration::from_nanos(x.round() as u64);
    if settings.json {
        let json = json!({
            "signature": sig.to_string(),
            "op": sig.op_name().to_string(),
            "dtype": sig.dtype.name(),
            "index_type": sig.index_type.name(),
            "data_shape": sig.data_shape,
            "data_bytes_shape": layout.data_bytes_shape(),
            "indices_shape": sig.indices_shape,
            "output_shape": layout.output_shape(),
            "seed": settings.seed,
            "threads": 1,
            "threads_used": 1,
            "code_bytes": kernel.code_bytes(),
            "compile_ns": compile.median,
            "first_compile_ns": nanos(first_compile),
            "samples": jit.samples,
            "calls_per_sample": jit.calls_per_sample,
            "median_ns": jit.median,
            "p50_ns": jit.median,
            "p90_ns": jit.p90,
            "p99_ns": jit.p99,
            "min_ns": jit.min,
            "max_ns": jit.max,
            "memcpy_bytes": output_bytes,
            "memcpy_ns": memcpy.median,
            "ratio_to_memcpy": ratio_to(memcpy.median),
            "fill_ns": fill.median,
            "ratio_to_fill": ratio_to(fill.median),
            "debug_assertions": cfg!(debug_assertions),
        });
        outln!(out, "{json}");
        return Ok(());
    }
    outln!(out, "signature     {sig}");
    outln!(out, "output shape  {:?}", layout.output_shape());
    outln!(
        out,
        "compile       {} median, first {}",
        human_time(ns(compile.median)),
        human_time(first_compile)
    );
    outln!(
        out,
        "per call      median {}, p90 {}, p99 {}, min {}, max {} ({} samples x {} calls)",
        human_time(ns(jit.median)),
        human_time(ns(jit.p90)),
        human_time(ns(jit.p99)),
        human_time(ns(jit.min)),
        human_time(ns(jit.max)),
        jit.samples,
        jit.calls_per_sample
    );
    outln!(
        out,
        "memcpy        median {} for {output_bytes} bytes; jit / memcpy {:.2}",
        human_time(ns(memcpy.median)),
        ratio_to(memcpy.median)
    );
    outln!(
        out,
        "fill          median {}; jit / fill {:.2}",
        human_time(ns(fill.median)),
        ratio_to(fill.median)
    );
    Ok(())
}
