//! `gather-jit bench`: per-call times of one kernel beside a memcpy of the output's size.
//! `inputs.rs` makes what the kernel is called on, `report.rs` prints what was measured.

mod inputs;
mod report;

use inputs::indices_from_file;
pub use inputs::{BenchInputs, Call};

use std::hint::black_box;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use clap::Args;
use gather_jit::{KernelCache, Tuning};

use crate::failure::{Failure, Result};
use crate::hugepages;
use crate::npz::{ArrayPath, read_array};
use crate::op_kernel::{OpKernel, OpLayout, OpSignature};
use crate::opargs::{OpArgs, SignatureArgs};
use crate::progress::Progress;
use crate::quantized::Input;
use crate::random::XorShift;
use crate::timing::{DEFAULT_WARMUP, Plan, Stats, measure, measure_each, measure_with};
use crate::values::{count_between, parse_count};

/// Time a kernel on seeded random data with random valid indices (or the indices of a file).
///
/// Reports the compile time (validation, specialisation, Cranelift), the time of a cache hit,
/// the median (p50), p90, p99, min and max time per call (percentiles of the samples), GB/s (output bytes read from data + indices read + output
/// written, per second; a scatter's count is its own, see docs/cli-scatter.md), and a memcpy
/// and a fill (with a non-zero byte) of the output's size
/// measured in the same run, with the ratios. Each sample times a batch of calls (enough for ~10 µs) and divides.
///
/// A scatter's data and updates are floats of magnitude 1 to 2 with random signs (so that
/// repeated reductions stay away from subnormal numbers), 0 or 1 for bool, random integers;
/// under TensorRT's flavor the random indices are distinct where duplicates are forbidden. In
/// place (--in-place), every call updates the same data buffer, so reductions accumulate.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  gather-jit bench --op gather --data-shape 30522x768 --indices-shape 8x128
  gather-jit bench --op gather-nd --data-shape 1000x256x10x15 --indices-shape 25x125x3 --threads 2 --json
  gather-jit bench --op gather-nd --data-shape 512x512 --indices-shape 262144x2 --index-limit 64
  gather-jit bench --op gather-block-quantized --bits 4 --block-size 32 --data-shape 32000x4096 --indices-shape 1x32
  gather-jit bench --op scatter-nd --data-shape 1x32x4096x128 --indices-shape 32x3 --dtype f16 --in-place
  gather-jit bench --op scatter-nd --reduction add --data-shape 30522x768 --indices ids.npy --in-place --json")]
pub struct BenchArgs {
    #[command(flatten)]
    op: OpArgs,
    #[command(flatten)]
    signature: SignatureArgs,
    /// Scatters: time the in-place call (data is the output: ScatterKernel::run_bytes_in_place)
    /// instead of the out-of-place one (run_bytes)
    #[arg(long)]
    in_place: bool,
    /// Exact indices from FILE.npy (or FILE.npz:NAME) instead of random ones; their shape and
    /// type are the signature's (--indices-shape and --index-type may be left out)
    #[arg(long, value_name = "FILE")]
    indices: Option<PathBuf>,
    /// Compare the first call's output with the reference interpreter's and fail (status 1) if
    /// they differ
    #[arg(long)]
    check: bool,
    /// Split each call's outermost loop into N parts (Kernel::run_bytes_parallel); the memcpy
    /// and the fill are split into as many parts, run on the same threads (a quantized op
    /// splits its indices)
    #[arg(long, default_value_t = 1, allow_hyphen_values = true,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: u32,
    /// Time budget of the kernel and of the memcpy measurement, each (and the bound of the
    /// compile and cache-hit timings)
    #[arg(long, value_name = "MS", default_value_t = 300, allow_hyphen_values = true,
          value_parser = parse_count)]
    time_ms: u64,
    /// Untimed calls of the kernel (and of the memcpy and the fill) before the timed ones,
    /// after the first call, which reports a bad index; the last sizes the samples (with 0,
    /// each sample is one call)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_WARMUP, allow_hyphen_values = true,
          value_parser = parse_count)]
    warmup: u64,
    /// Time exactly N calls of the kernel (and of the memcpy and the fill) instead of as many
    /// as fit in --time-ms
    #[arg(long, value_name = "N", allow_hyphen_values = true,
          value_parser = |text: &str| count_between(text, 1, u64::MAX))]
    iterations: Option<u64>,
    /// Seed of the random data and indices
    #[arg(long, default_value_t = 42, allow_hyphen_values = true, value_parser = parse_count)]
    seed: u64,
    /// Print one JSON object (times in nanoseconds) and nothing else on stdout
    #[arg(long)]
    json: bool,
    /// Compile without banding (Tuning::NO_BANDS), to compare a banded GatherElements with the
    /// plain loop nest; the cache hit is still timed with the default tuning
    #[arg(long, conflicts_with = "band_scratch_kib")]
    no_bands: bool,
    /// Band with this scratch budget per thread instead of the default (Tuning::band_scratch_bytes)
    #[arg(long, value_name = "KIB", allow_hyphen_values = true, value_parser = parse_count)]
    band_scratch_kib: Option<u64>,
    /// Band tables of up to this many rows instead of the default (Tuning::band_max_rows)
    #[arg(long, value_name = "ROWS", conflicts_with = "no_bands", allow_hyphen_values = true,
          value_parser = parse_count)]
    band_max_rows: Option<u64>,
    /// Draw every index below N too, so that the gather reads only a corner of data (how much
    /// of the time is cache misses on data: compare with and without)
    #[arg(long, value_name = "N", allow_hyphen_values = true,
          value_parser = |text: &str| count_between(text, 1, u64::MAX))]
    index_limit: Option<u64>,
    /// Do not advise huge pages for buffers of 4 MiB or more (by default they are, as numpy
    /// does for its arrays, so that the peers of benches/peers/compare.py and this bench
    /// read memory backed alike)
    #[arg(long)]
    no_huge_pages: bool,
    /// Start the output this many bytes past where the allocator put it, to time the kernel
    /// on buffers aligned unlike each other
    #[arg(long, value_name = "BYTES", default_value_t = 0, allow_hyphen_values = true,
          value_parser = |text: &str| count_between(text, 0, 4095))]
    output_offset: u64,
    /// Start data this many bytes past where the allocator put it (see --output-offset)
    #[arg(long, value_name = "BYTES", default_value_t = 0, allow_hyphen_values = true,
          value_parser = |text: &str| count_between(text, 0, 4095))]
    data_offset: u64,
    /// Only compile the kernel N times, fresh (Kernel::compile_tuned), and print nothing: for
    /// counting a compile's instructions under valgrind (benches/compile_instructions.sh)
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = parse_count)]
    compile_only: Option<u64>,
}

/// The byte the fill writes. Not zero: some machines write zero lines about twice as fast as
/// any other data (a fill of S4's output with zeros against this byte shows it), and a
/// gather's output is rarely all zeros.
const FILL_BYTE: u8 = 0x5a;

/// `dst` cut into `parts` chunks, each with its start in `dst`, for [`split`].
fn chunks(dst: &mut [u8], parts: u64) -> Vec<Mutex<(&mut [u8], usize)>> {
    let chunk = dst.len().div_ceil(parts.max(1) as usize).max(1);
    dst.chunks_mut(chunk)
        .enumerate()
        .map(|(i, d)| Mutex::new((d, i * chunk)))
        .collect()
}

/// `write(chunk, offset)` on every chunk, spread over the threads the kernel's parallel calls
/// use (one chunk per part, as the kernel splits its output), so the references compete on the
/// same footing and start no thread of their own.
fn split(chunks: &[Mutex<(&mut [u8], usize)>], write: impl Fn(&mut [u8], usize) + Sync) {
    gather_jit::run_parts(chunks.len(), &|part| {
        // Each part locks only its own chunk, so the lock is never contended.
        let mut chunk = chunks[part].lock().unwrap_or_else(PoisonError::into_inner);
        let (d, at) = &mut *chunk;
        write(d, *at);
    });
}

/// The tuning the flags ask for.
fn tuning(args: &BenchArgs) -> Tuning {
    if args.no_bands {
        return Tuning::NO_BANDS;
    }
    let default = Tuning::default();
    Tuning {
        band_scratch_bytes: args
            .band_scratch_kib
            .map_or(default.band_scratch_bytes, |kib| kib.saturating_mul(1024)),
        band_max_rows: args.band_max_rows.unwrap_or(default.band_max_rows),
        ..default
    }
}

/// Refuses the flags an op cannot honour: the banding of the plain gathers with a quantized
/// op or a scatter, `--in-place` with a gather.
fn refuse_unfit_flags(args: &BenchArgs, sig: &OpSignature) -> Result<()> {
    let is_scatter = matches!(sig, OpSignature::Scatter(_));
    if args.in_place && !is_scatter {
        return Err(Failure::usage(
            "--in-place applies to the scatters only (a gather's output is a new tensor)",
        ));
    }
    if !matches!(sig, OpSignature::Quantized(_)) && !is_scatter {
        return Ok(());
    }
    let op = format!("--op {}", args.op.kind()?.flag());
    let tuned = [
        ("--no-bands", args.no_bands),
        ("--band-scratch-kib", args.band_scratch_kib.is_some()),
        ("--band-max-rows", args.band_max_rows.is_some()),
    ];
    if let Some((flag, _)) = tuned.into_iter().find(|&(_, given)| given) {
        return Err(Failure::usage(format!(
            "{flag} tunes the banding of the plain gathers; {op} has none"
        )));
    }
    Ok(())
}

/// Runs `gather-jit bench`.
///
/// # Errors
/// An invalid signature, a flag the op cannot honour, no valid index, buffers too large for
/// memory, a thread that cannot be started (status 2).
pub fn main(args: &BenchArgs, out: &mut dyn Write) -> Result<()> {
    let given_indices = match &args.indices {
        Some(path) => {
            let path = ArrayPath::parse(path);
            let array = read_array(&path)?;
            Some(Input { path, array })
        }
        None => None,
    };
    let sig = match &given_indices {
        Some(input) => {
            let (shape, index_type) = indices_from_file(
                input,
                args.signature.indices_shape.as_ref().map(|s| &s.0[..]),
                args.signature.index_type,
            )?;
            args.signature
                .signature_with_indices(&args.op, &shape, index_type)?
        }
        None => args.signature.signature(&args.op)?,
    };
    refuse_unfit_flags(args, &sig)?;
    let validation = sig.validate()?;
    let layout = validation.layout();
    let tuning = tuning(args);
    if let Some(compiles) = args.compile_only {
        for _ in 0..compiles {
            black_box(sig.compile(tuning)?);
        }
        return Ok(());
    }
    let given = given_indices.as_ref();
    let measured = measure_all(args, &sig, layout, tuning, given)?;
    match args.json {
        true => report::json(out, args, &sig, layout, &measured, given),
        false => report::text(out, args, &sig, layout, &measured, given),
    }
}

/// Every time a bench takes: compiles, cache hits, the kernel, and the memcpy and the fill of
/// the output's size, each on buffers made before anything is timed.
fn measure_all(
    args: &BenchArgs,
    sig: &OpSignature,
    layout: OpLayout<'_>,
    tuning: Tuning,
    given_indices: Option<&Input>,
) -> Result<Measured> {
    let progress = Progress::new("bench", 6);
    // Every buffer is made before anything is timed, so that one too large for memory fails
    // at once.
    progress.start("random data and indices, and the memcpy's buffers");
    let mut rng = XorShift::new(args.seed);
    let huge = !args.no_huge_pages;
    let limit = args.index_limit.unwrap_or(u64::MAX);
    let given = given_indices.map(|i| &i.array.bytes[..]);
    let mut inputs = BenchInputs::new(
        layout,
        &mut rng,
        huge,
        args.data_offset as usize,
        limit,
        given,
    )?;
    let output_bytes = layout.output_bytes()?;
    let output_offset = args.output_offset as usize;
    // In place, data is the output: no buffer of its own.
    let output_len = if args.in_place { 0 } else { output_bytes };
    let mut output_buffer =
        hugepages::zeroed(output_offset.saturating_add(output_len), huge, "the output")?;
    let mut source = hugepages::zeroed(output_bytes, huge, "the memcpy's source")?;
    rng.fill(&mut source);
    let mut copy = hugepages::zeroed(output_bytes, huge, "the memcpy's destination")?;
    let budget = Duration::from_millis(args.time_ms);
    progress.done();

    progress.start("compiling");
    let cache = KernelCache::new(16);
    let started = Instant::now();
    let kernel = if tuning != Tuning::default() {
        sig.compile(tuning)?
    } else {
        sig.cached(&cache)?
    };
    let first_compile = started.elapsed();
    // A cold cache in a warm process: fresh compiles of the same signature (the first one
    // above also paid for building the ISA and Cranelift's per-thread state).
    let compile = measure_each(budget.min(Duration::from_millis(200)), 51, || {
        black_box(sig.compile(black_box(tuning)).is_ok());
    });
    // A new shape of a known op (another batch or sequence length): what a cache miss
    // costs when a live kernel's code fits, here the signature's own code. (Sharing uses the
    // default tuning only, and the plain gathers only.)
    let shared_code = match sig.compile_shared().filter(|_| tuning == Tuning::default()) {
        Some(code_holder) => {
            let code_holder = code_holder?;
            let median = measure_each(budget.min(Duration::from_millis(50)), 51, || {
                black_box(sig.compile_shared().is_some_and(|k| k.is_ok()));
            });
            drop(code_holder);
            Some(median)
        }
        None => None,
    };
    progress.done();
    progress.start("cache hits");
    let cache_hit = measure(budget.min(Duration::from_millis(50)), || {
        black_box(sig.cached(black_box(&cache)).is_ok());
    });
    let cache_hit_lent = measure(budget.min(Duration::from_millis(50)), || {
        black_box(sig.lent_code_bytes(black_box(&cache)).is_ok());
    });

    let threads = u64::from(args.threads);
    let threads_used = match kernel.scatter() {
        Some(k) => k.parallel_parts(threads as usize, args.in_place),
        None => kernel.compiled().parallel_parts(threads as usize),
    } as u64;
    let output = &mut output_buffer[output_offset..];
    progress.done();
    progress.start("the kernel");
    let call = Call {
        kernel: &kernel,
        sig,
        threads: threads as usize,
        in_place: args.in_place,
    };
    call.first(&mut inputs, output, args.check)?;
    // The kernel, the memcpy and the fill are measured alike: --warmup, then --iterations
    // calls or --time-ms.
    let plan = Plan {
        warmup: args.warmup,
        iterations: args.iterations,
        budget,
    };
    let jit = measure_with(plan, || {
        // The first call succeeded on these buffers, so every later one does too.
        let _ = call.again(&mut inputs, black_box(&mut *output));
    });
    progress.done();
    progress.start("memcpy of the output's size");
    let copy_chunks = chunks(&mut copy, threads_used);
    let memcpy = measure_with(plan, || {
        split(black_box(&copy_chunks), |d, at| {
            d.copy_from_slice(&source[at..at + d.len()]);
        });
    });
    progress.done();
    progress.start("fill of the output's size");
    let fill = measure_with(plan, || {
        split(black_box(&copy_chunks), |d, _| d.fill(FILL_BYTE));
    });
    drop(copy_chunks);
    drop(progress);

    Ok(Measured {
        moved: kernel.bytes_moved(args.in_place),
        output_address_mod_64: output.as_ptr() as usize % 64,
        data_address_mod_64: inputs.data().as_ptr() as usize % 64,
        kernel,
        huge,
        output_bytes,
        first_compile,
        compile,
        shared_code,
        cache_hit,
        cache_hit_lent,
        threads_used,
        jit,
        memcpy,
        fill,
    })
}

/// What [`measure_all`] measured, for the report.
struct Measured {
    kernel: OpKernel,
    /// Whether buffers of 4 MiB or more were advised to use huge pages.
    huge: bool,
    output_bytes: usize,
    /// Bytes a call reads and writes.
    moved: u64,
    output_address_mod_64: usize,
    data_address_mod_64: usize,
    first_compile: Duration,
    /// Median nanoseconds of a fresh compile.
    compile: f64,
    /// Median nanoseconds of a compile on a live kernel's code, where the op shares code.
    shared_code: Option<f64>,
    cache_hit: Stats,
    cache_hit_lent: Stats,
    threads_used: u64,
    jit: Stats,
    memcpy: Stats,
    fill: Stats,
}
