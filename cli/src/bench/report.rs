//! What `gather-jit bench` prints of what it measured: one JSON object, or lines of text.

use std::io::Write;
use std::time::Duration;

use gather_jit::Tuning;
use serde_json::json;

use super::{BenchArgs, FILL_BYTE, Measured, tuning};
use crate::failure::{Result, eprint_line};
use crate::op_kernel::{OpLayout, OpSignature};
use crate::progress;
use crate::quantized::Input;
use crate::timing::{gbps, human_time, nanos};

/// Nanoseconds as a `Duration`, for [`human_time`] and [`gbps`].
fn ns(x: f64) -> Duration {
    Duration::from_nanos(x.round() as u64)
}

/// The rates and ratios both reports give, from what was measured.
struct Rates {
    /// The kernel's bytes moved per second, in GB/s.
    jit_gbps: f64,
    /// The memcpy's bytes read and written per second, in GB/s.
    memcpy_gbps: f64,
    /// The kernel's median over the memcpy's.
    ratio: f64,
    /// The kernel's median over the fill's.
    fill_ratio: f64,
}

impl Rates {
    fn of(m: &Measured) -> Rates {
        let ratio_to = |base: f64| if base > 0.0 { m.jit.median / base } else { 0.0 };
        Rates {
            jit_gbps: gbps(m.moved, ns(m.jit.median)),
            memcpy_gbps: gbps(2 * m.output_bytes as u64, ns(m.memcpy.median)),
            ratio: ratio_to(m.memcpy.median),
            fill_ratio: ratio_to(m.fill.median),
        }
    }
}

/// Prints the bench as one JSON object (times in nanoseconds).
///
/// # Errors
/// stdout cannot be written.
pub(super) fn json(
    out: &mut dyn Write,
    args: &BenchArgs,
    sig: &OpSignature,
    layout: OpLayout<'_>,
    measured: &Measured,
    given_indices: Option<&Input>,
) -> Result<()> {
    let Measured {
        kernel,
        jit,
        memcpy,
        fill,
        ..
    } = measured;
    let (moved, output_bytes, threads_used) =
        (measured.moved, measured.output_bytes, measured.threads_used);
    let Rates {
        jit_gbps,
        memcpy_gbps,
        ratio,
        fill_ratio,
    } = Rates::of(measured);
    let mut json = json!({
        "signature": sig.to_string(),
        "op": sig.op_text(),
        "flavor": sig.flavor().or(args.op.flavor.map(|f| f.name())),
        "dtype": sig.dtype().name(),
        "index_type": sig.index_type().name(),
        "data_shape": sig.data_shape(),
        "indices_shape": sig.indices_shape(),
        "output_shape": layout.output_shape(),
        "seed": args.seed,
        "index_limit": args.index_limit,
        "huge_pages": measured.huge,
        "output_offset": args.output_offset,
        "data_offset": args.data_offset,
        "output_address_mod_64": measured.output_address_mod_64,
        "data_address_mod_64": measured.data_address_mod_64,
        "threads": args.threads,
        "threads_used": threads_used,
        "outer_extent": kernel.compiled().outer_extent(),
        "code_bytes": kernel.code_bytes(),
        "compile_ns": measured.compile,
        "first_compile_ns": nanos(measured.first_compile),
        "kernel_compile_ns": nanos(kernel.compiled().compile_time()),
        "shared_code_ns": measured.shared_code,
        "cache_hit_ns": measured.cache_hit.median,
        "cache_hit_lent_ns": measured.cache_hit_lent.median,
        "warmup": args.warmup,
        "iterations": jit.iterations,
        "samples": jit.samples,
        "calls_per_sample": jit.calls_per_sample,
        "median_ns": jit.median,
        "min_ns": jit.min,
        "max_ns": jit.max,
        "bytes_moved": moved,
        "gbps": jit_gbps,
        "memcpy_bytes": output_bytes,
        "memcpy_ns": memcpy.median,
        "memcpy_min_ns": memcpy.min,
        "memcpy_gbps": memcpy_gbps,
        "ratio_to_memcpy": ratio,
        "fill_ns": fill.median,
        "ratio_to_fill": fill_ratio,
    });
    // Apart from the object above, which is as large as `json!` expands.
    json["debug_assertions"] = cfg!(debug_assertions).into();
    json["p50_ns"] = jit.median.into();
    json["p90_ns"] = jit.p90.into();
    json["p99_ns"] = jit.p99.into();
    json["checked"] = args.check.into();
    json["indices_file"] = given_indices.map(|i| i.path.to_string()).into();
    // The scatters' own inputs and attributes, beside the keys every op has.
    if let OpSignature::Scatter(scatter) = sig {
        json["updates_shape"] = scatter.updates_shape.clone().into();
        json["reduction"] = scatter.reduction.name().into();
        json["use_init_val"] = scatter.use_init_val.into();
        json["in_place"] = args.in_place.into();
    }
    // The quantized ops' own buffers, beside the keys every op has.
    if let Some(quantized) = layout.quantized() {
        json["data_bytes_shape"] = quantized.data_bytes_shape().into();
        json["scales_shape"] = quantized.scales_shape().into();
        json["zero_points_bytes_shape"] = quantized.zero_points_bytes_shape().into();
    }
    progress::note_debug_timings();
    outln!(out, "{json}");
    Ok(())
}

/// Prints the bench as lines of text, and a note on stderr when the op split into fewer parts
/// than `--threads` asked for.
///
/// # Errors
/// stdout cannot be written.
pub(super) fn text(
    out: &mut dyn Write,
    args: &BenchArgs,
    sig: &OpSignature,
    layout: OpLayout<'_>,
    measured: &Measured,
    given_indices: Option<&Input>,
) -> Result<()> {
    let Measured {
        kernel,
        jit,
        memcpy,
        fill,
        ..
    } = measured;
    let (moved, output_bytes, threads_used) =
        (measured.moved, measured.output_bytes, measured.threads_used);
    let Rates {
        jit_gbps,
        memcpy_gbps,
        ratio,
        fill_ratio,
    } = Rates::of(measured);
    outln!(out, "signature     {sig}");
    outln!(out, "output shape  {:?}", layout.output_shape());
    if matches!(sig, OpSignature::Scatter(_)) {
        let entry = if args.in_place {
            "in place (data is the output; every call updates the same data)"
        } else {
            "out of place (output = data with the updates)"
        };
        outln!(out, "call          {entry}");
    }
    if let Some(input) = given_indices {
        outln!(out, "indices       from {}", input.path);
    }
    if args.check {
        outln!(
            out,
            "check         the first call agrees with the interpreter"
        );
    }
    if let Some(limit) = args.index_limit {
        outln!(out, "indices       all below {limit} (a corner of data)");
    }
    let shared = match measured.shared_code {
        Some(median) => human_time(ns(median)),
        None if tuning(args) != Tuning::default() => "n/a (tuned)".to_string(),
        None => "n/a (no code sharing for this op)".to_string(),
    };
    outln!(
        out,
        "compile       {} median, first {}, on shared code {shared} (cache hit {}, lent {})",
        human_time(ns(measured.compile)),
        human_time(measured.first_compile),
        human_time(ns(measured.cache_hit.median)),
        human_time(ns(measured.cache_hit_lent.median))
    );
    outln!(
        out,
        "per call      median {}, p90 {}, p99 {}, min {}, max {} ({} calls in {} samples after {} warm-up, {} thread{})",
        human_time(ns(jit.median)),
        human_time(ns(jit.p90)),
        human_time(ns(jit.p99)),
        human_time(ns(jit.min)),
        human_time(ns(jit.max)),
        jit.iterations,
        jit.samples,
        args.warmup,
        threads_used,
        if threads_used == 1 { "" } else { "s" }
    );
    outln!(
        out,
        "throughput    {jit_gbps:.2} GB/s ({moved} bytes moved per call)"
    );
    outln!(
        out,
        "memcpy        median {} for {output_bytes} bytes ({memcpy_gbps:.2} GB/s)",
        human_time(ns(memcpy.median))
    );
    outln!(out, "jit / memcpy  {ratio:.2}");
    outln!(
        out,
        "fill          median {} (output-sized, byte {FILL_BYTE:#x}); jit / fill {fill_ratio:.2}",
        human_time(ns(fill.median))
    );
    progress::note_debug_timings();
    if threads_used < u64::from(args.threads) {
        eprint_line(format_args!(
            "note: the {} splits into at most {threads_used} part(s) (the outermost loop \
             has {} iteration(s)), so {threads_used} thread(s) were used",
            if matches!(sig, OpSignature::Scatter(_)) {
                "scatter"
            } else {
                "gather"
            },
            kernel.compiled().outer_extent(),
        ));
    }
    Ok(())
}
