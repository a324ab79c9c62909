//! `gather-jit explain`: what one signature compiles to.

use std::io::Write;
use std::time::Instant;

use clap::Args;
use gather_jit::Tuning;
use gather_jit::specialize::Plan;
use serde_json::{Value, json};

use crate::aot;
use crate::bench::{BenchInputs, Call};
use crate::buffer;
use crate::failure::{Failure, Result};
use crate::objdump::{self, Disassembly};
use crate::op_kernel::{OpKernel, OpSignature};
use crate::opargs::{OpArgs, SignatureArgs};
use crate::random::XorShift;
use crate::timing::{human_time, nanos};

/// The seed of `--check`'s random inputs (`bench`'s default seed).
const CHECK_SEED: u64 = 42;

/// Print a kernel's inferred output shape, loop plan, Cranelift IR and machine code.
///
/// The plan is the loop nest after specialisation: every extent and byte stride a constant,
/// extent-1 loops dropped and contiguous loops merged. The Cranelift IR is the function before
/// Cranelift's optimisations. The machine code is disassembled (AT&T syntax, offsets from the
/// entry point) on x86-64 hosts; elsewhere only its size is printed.
///
/// With --target, the kernel is compiled for that target as `gather-jit aot` compiles it, and
/// its machine code is disassembled by the target's objdump (binutils' for its architecture,
/// or llvm-objdump) if one is on PATH.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  gather-jit explain --op gather-nd --data-shape 2x3x4 --indices-shape 2x1 --dtype f32 --index-type i64
  gather-jit explain --op gather --data-shape 1000x64 --indices-shape 16 --target aarch64-unknown-linux-gnu
  gather-jit explain --flavor openvino-gather1 --axis 1 --data-shape 6x12x10x24 --indices-shape 15x4x20x28 --json
  gather-jit explain --op gather-gguf --format q4_0 --data-shape 32000x4096 --indices-shape 8
  gather-jit explain --op scatter-nd --reduction add --data-shape 30522x768 --indices-shape 1024x1 --check
  gather-jit explain --op scatter-elements --flavor openvino-scatterelementsupdate12 --axis 1 --reduction mean --data-shape 64x4096 --indices-shape 64x1024 --json")]
pub struct ExplainArgs {
    #[command(flatten)]
    op: OpArgs,
    #[command(flatten)]
    signature: SignatureArgs,
    /// Scatters: the in-place call (data is the output), for --check and the bytes a call
    /// moves
    #[arg(long)]
    in_place: bool,
    /// Also run the kernel once on seeded random inputs (valid indices) and compare its
    /// output with the reference interpreter's; fail (status 1) if they differ
    #[arg(long)]
    check: bool,
    /// Show the kernel of an object for this target triple (as `gather-jit aot --target`
    /// takes it, or `host`) and its machine code, disassembled by the target's objdump
    #[arg(long, value_name = "TRIPLE", allow_hyphen_values = true)]
    target: Option<String>,
    /// Print one JSON object instead of text
    #[arg(long)]
    json: bool,
}

/// Runs `gather-jit explain`.
///
/// # Errors
/// An invalid signature (status 2).
pub fn main(args: &ExplainArgs, out: &mut dyn Write) -> Result<()> {
    let sig = args.signature.signature(&args.op)?;
    if args.in_place && !matches!(sig, OpSignature::Scatter(_)) {
        return Err(Failure::usage(
            "--in-place applies to the scatters only (a gather's output is a new tensor)",
        ));
    }
    if let Some(triple) = &args.target {
        if args.check {
            return Err(Failure::usage(
                "--check runs the host's kernel; an object's (--target) is not run",
            ));
        }
        return for_target(args, &sig, triple, out);
    }
    let kernel = sig.compile(Tuning::default())?;
    if args.check {
        check_once(&kernel, &sig, args.in_place)?;
    }
    let clif = kernel.compiled().clif()?;
    if args.json {
        let json = host_json(args, &sig, &kernel, &clif)?;
        outln!(out, "{json}");
        return Ok(());
    }
    // The library's explanation is its header lines, a blank line and the loops; the compile
    // time and the code size join the header.
    let explained = kernel.compiled().explain();
    let (header, loops) = explained
        .split_once("\n\n")
        .unwrap_or((explained.as_str(), ""));
    outln!(out, "{header}");
    outln!(
        out,
        "compile time:  {}",
        human_time(kernel.compiled().compile_time())
    );
    outln!(out, "machine code:  {} bytes", kernel.code_bytes());
    if matches!(sig, OpSignature::Scatter(_)) {
        let entry = if args.in_place {
            "in place (data is the output)"
        } else {
            "out of place (output = data with the updates)"
        };
        outln!(out, "call:          {entry}");
        outln!(
            out,
            "bytes moved:   {} per call",
            kernel.bytes_moved(args.in_place)
        );
    }
    if args.check {
        outln!(
            out,
            "check:         agrees with the interpreter on random inputs (seed {CHECK_SEED})"
        );
    }
    if !loops.is_empty() {
        outln!(out);
        outln!(out, "{}", loops.strip_suffix('\n').unwrap_or(loops));
    }
    outln!(out);
    outln!(out, "Cranelift IR (before optimisation):");
    outln!(out, "{}", clif.strip_suffix('\n').unwrap_or(&clif));
    if let Some(lines) = disassemble(kernel.compiled().machine_code()) {
        outln!(out);
        outln!(out, "machine code (x86-64, AT&T syntax):");
        for line in lines {
            outln!(out, "{line}");
        }
    }
    Ok(())
}

/// `explain --target`: the kernel of an object for `triple` (the plan it was built from, the
/// JIT's Cranelift IR for that plan, its machine code) as `gather-jit aot` would write it.
fn for_target(
    args: &ExplainArgs,
    sig: &OpSignature,
    triple: &str,
    out: &mut dyn Write,
) -> Result<()> {
    // The JIT's kernel of the object's tuning: its explanation and Cranelift IR, and the
    // signature's validation, whose errors are the host's.
    let kernel = sig.compile(sig.object_tuning())?;
    let target = aot::target(triple)?;
    let symbol = aot::default_symbol(args.op.kind()?);
    let started = Instant::now();
    let (object, object_kernel) = aot::object(&target, sig, &symbol)?;
    let compile_time = started.elapsed();
    let plan = object_kernel.plan().cloned();
    let clif = object_kernel.clif().to_string();
    let disassembly = objdump::disassemble(&object, &symbol)?;
    // The header lines of the JIT's explanation, with the object's loops.
    let explained = kernel.compiled().explain();
    let (header, _) = explained
        .split_once("\n\n")
        .unwrap_or((explained.as_str(), ""));
    let loops = (object_kernel.explain().split_once("\n\n"))
        .map_or("", |(_, loops)| loops)
        .trim_end_matches('\n');
    let code_bytes = object_kernel.machine_code().len();
    if args.json {
        let mut json = host_json(args, sig, &kernel, &clif)?;
        json["target"] = object.triple().into();
        json["symbol"] = symbol.into();
        json["explain"] = format!("{header}\n\n{loops}\n").into();
        json["plan"] = plan.as_ref().map(plan_json).into();
        json["code_bytes"] = code_bytes.into();
        json["compile_ns"] = nanos(compile_time).into();
        let (tool, lines) = match disassembly {
            Disassembly::Listing { tool, lines } => (Some(tool), Some(lines)),
            Disassembly::NotFound { .. } => (None, None),
        };
        json["disassembler"] = tool.into();
        json["disassembly"] = lines.into();
        outln!(out, "{json}");
        return Ok(());
    }
    outln!(out, "{header}");
    outln!(out, "target:        {}", object.triple());
    outln!(
        out,
        "compile time:  {} (the object)",
        human_time(compile_time)
    );
    outln!(out, "machine code:  {code_bytes} bytes");
    if !loops.is_empty() {
        outln!(out);
        outln!(out, "{loops}");
    }
    outln!(out);
    outln!(out, "Cranelift IR (before optimisation):");
    outln!(out, "{}", clif.strip_suffix('\n').unwrap_or(&clif));
    outln!(out);
    match disassembly {
        Disassembly::Listing { tool, lines } => {
            outln!(out, "machine code ({}, {tool}):", object.triple());
            for line in lines {
                outln!(out, "{line}");
            }
        }
        Disassembly::NotFound { tried } => {
            outln!(
                out,
                "machine code: no disassembler for {} was found on PATH (tried {})",
                object.triple(),
                tried.join(", ")
            );
        }
    }
    Ok(())
}

/// `--check`: one call of `kernel` on seeded random inputs, compared with the interpreter.
///
/// # Errors
/// No valid index can be drawn; buffers too large for memory; a disagreement (status 1).
fn check_once(kernel: &OpKernel, sig: &OpSignature, in_place: bool) -> Result<()> {
    let layout = kernel.layout();
    let mut rng = XorShift::new(CHECK_SEED);
    let mut inputs = BenchInputs::new(layout, &mut rng, false, 0, u64::MAX, None)?;
    let output_len = if in_place { 0 } else { layout.output_bytes()? };
    let mut output = buffer::zeroed(output_len, "the output")?;
    let call = Call {
        kernel,
        sig,
        threads: 1,
        in_place,
    };
    call.first(&mut inputs, &mut output, true)
}

/// The JSON object of the host's `explain --json`.
fn host_json(
    args: &ExplainArgs,
    sig: &OpSignature,
    kernel: &OpKernel,
    clif: &str,
) -> Result<Value> {
    let layout = kernel.layout();
    let mut json = json!({
            "signature": sig.to_string(),
            "op": sig.op_text(),
            "flavor": sig.flavor().or(args.op.flavor.map(|f| f.name())),
            "policy": sig.policy().to_string(),
            "dtype": sig.dtype().name(),
            "index_type": sig.index_type().name(),
            "data_shape": sig.data_shape(),
            "indices_shape": sig.indices_shape(),
            "output_shape": layout.output_shape(),
            "output_bytes": layout.output_bytes()?,
            "explain": kernel.compiled().explain(),
            "resolved_op": kernel.resolved_op(),
            "plan": kernel.plan().map(plan_json),
            "outer_extent": kernel.compiled().outer_extent(),
            "clif": clif,
            "code_bytes": kernel.code_bytes(),
            "compile_ns": nanos(kernel.compiled().compile_time()),
            "disassembly": disassemble(kernel.compiled().machine_code()),
    });
    if let Some(quantized) = layout.quantized() {
        json["data_bytes_shape"] = quantized.data_bytes_shape().into();
        json["scales_shape"] = quantized.scales_shape().into();
        json["zero_points_bytes_shape"] = quantized.zero_points_bytes_shape().into();
    }
    json["checked"] = args.check.into();
    if let OpSignature::Scatter(scatter) = sig {
        json["updates_shape"] = scatter.updates_shape.clone().into();
        json["reduction"] = scatter.reduction.name().into();
        json["use_init_val"] = scatter.use_init_val.into();
        json["in_place"] = args.in_place.into();
        json["bytes_moved"] = kernel.bytes_moved(args.in_place).into();
        json["parallel_parts"] = kernel
            .scatter()
            .map(|k| k.parallel_parts(0, args.in_place))
            .into();
    }
    Ok(json)
}

/// The loop plan as JSON: its text, loops, index coordinates, band and buffer sizes.
fn plan_json(plan: &Plan) -> Value {
    let loops: Vec<_> = plan
        .loops
        .iter()
        .map(|l| {
            json!({
                "extent": l.extent,
                "data_stride": l.data_stride,
                "indices_stride": l.indices_stride,
                "output_stride": l.output_stride,
            })
        })
        .collect();
    let coordinates: Vec<_> = plan
        .lookup
        .coordinates
        .iter()
        .map(|c| {
            json!({
                "index_offset": c.index_offset,
                "dim_size": c.dim_size,
                "data_stride": c.data_stride,
            })
        })
        .collect();
    json!({
        "text": plan.to_string(),
        "loops": loops,
        "coordinates": coordinates,
        "slice_bytes": plan.lookup.slice_bytes,
        "band": plan.band.map(|band| json!({
            "rows": band.rows,
            "row_stride": band.row_stride,
            "row_bytes": band.row_bytes,
        })),
        "lookups": plan.lookups(),
        "data_bytes": plan.data_bytes,
        "indices_bytes": plan.indices_bytes,
        "output_bytes": plan.output_bytes,
    })
}

/// One line per instruction, `offset: instruction`; `None` where there is no disassembler.
#[cfg(target_arch = "x86_64")]
fn disassemble(code: &[u8]) -> Option<Vec<String>> {
    use iced_x86::{Decoder, DecoderOptions, Formatter, GasFormatter};
    let mut decoder = Decoder::with_ip(64, code, 0, DecoderOptions::NONE);
    let mut formatter = GasFormatter::new();
    formatter.options_mut().set_branch_leading_zeros(false);
    formatter.options_mut().set_uppercase_hex(false);
    let mut text = String::new();
    let lines = decoder
        .iter()
        .map(|instruction| {
            text.clear();
            formatter.format(&instruction, &mut text);
            format!("{:5x}:  {text}", instruction.ip())
        })
        .collect();
    Some(lines)
}

#[cfg(not(target_arch = "x86_64"))]
fn disassemble(_code: &[u8]) -> Option<Vec<String>> {
    None
}
