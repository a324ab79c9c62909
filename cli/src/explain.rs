//! `gather-jit explain`: what one signature compiles to.

use std::io::Write;

use clap::Args;
use gather_jit::specialize::Plan;
use gather_jit::{Flavor, Tuning};
use serde_json::{Value, json};

use crate::failure::Result;
use crate::opargs::{OpArgs, SignatureArgs};
use crate::timing::{human_time, nanos};

/// Print a kernel's inferred output shape, loop plan, Cranelift IR and machine code.
///
/// The plan is the loop nest after specialisation: every extent and byte stride a constant,
/// extent-1 loops dropped and contiguous loops merged. The Cranelift IR is the function before
/// Cranelift's optimisations. The machine code is disassembled (AT&T syntax, offsets from the
/// entry point) on x86-64 hosts; elsewhere only its size is printed.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  gather-jit explain --op gather-nd --data-shape 2x3x4 --indices-shape 2x1 --dtype f32 --index-type i64
  gather-jit explain --flavor openvino-gather1 --axis 1 --data-shape 6x12x10x24 --indices-shape 15x4x20x28 --json
  gather-jit explain --op gather-gguf --format q4_0 --data-shape 32000x4096 --indices-shape 8")]
pub struct ExplainArgs {
    #[command(flatten)]
    op: OpArgs,
    #[command(flatten)]
    signature: SignatureArgs,
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
    let kernel = sig.compile(Tuning::default())?;
    let layout = kernel.layout();
    let clif = kernel.compiled().clif()?;
    if args.json {
        let mut json = json!({
            "signature": sig.to_string(),
            "op": sig.op_text(),
            "flavor": sig.flavor().or(args.op.flavor).map(Flavor::name),
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
