//! `gather-jit bench`: per-call times of one kernel beside a memcpy of the output's size.

use std::hint::black_box;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use clap::Args;
use gather_jit::{Inputs, KernelCache, Tuning};
use serde_json::json;

use crate::failure::{Failure, Result, eprint_line};
use crate::hugepages;
use crate::npz::{ArrayPath, read_array};
use crate::op_kernel::{OpKernel, OpLayout, OpSignature};
use crate::opargs::{OpArgs, SignatureArgs};
use crate::progress::{self, Progress};
use crate::quantized::{self, Input};
use crate::random::{self, XorShift};
use crate::scatter;
use crate::timing::{
    DEFAULT_WARMUP, Plan, gbps, human_time, measure, measure_each, measure_with, nanos,
};
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
    let progress = Progress::new("bench", 6);
    // Every buffer is made before anything is timed, so that one too large for memory fails
    // at once.
    progress.start("random data and indices, and the memcpy's buffers");
    let mut rng = XorShift::new(args.seed);
    let huge = !args.no_huge_pages;
    let limit = args.index_limit.unwrap_or(u64::MAX);
    let given = given_indices.as_ref().map(|i| &i.array.bytes[..]);
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
        sig: &sig,
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

    let moved = kernel.bytes_moved(args.in_place);
    let ns = |x: f64| Duration::from_nanos(x.round() as u64);
    let jit_gbps = gbps(moved, ns(jit.median));
    let memcpy_gbps = gbps(2 * output_bytes as u64, ns(memcpy.median));
    let ratio_to = |base: f64| if base > 0.0 { jit.median / base } else { 0.0 };
    let ratio = ratio_to(memcpy.median);
    let fill_ratio = ratio_to(fill.median);
    if args.json {
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
            "huge_pages": huge,
            "output_offset": args.output_offset,
            "data_offset": args.data_offset,
            "output_address_mod_64": output.as_ptr() as usize % 64,
            "data_address_mod_64": inputs.data().as_ptr() as usize % 64,
            "threads": args.threads,
            "threads_used": threads_used,
            "outer_extent": kernel.compiled().outer_extent(),
            "code_bytes": kernel.code_bytes(),
            "compile_ns": compile,
            "first_compile_ns": nanos(first_compile),
            "kernel_compile_ns": nanos(kernel.compiled().compile_time()),
            "shared_code_ns": shared_code,
            "cache_hit_ns": cache_hit.median,
            "cache_hit_lent_ns": cache_hit_lent.median,
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
        json["indices_file"] = given_indices.as_ref().map(|i| i.path.to_string()).into();
        // The scatters' own inputs and attributes, beside the keys every op has.
        if let OpSignature::Scatter(scatter) = &sig {
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
        return Ok(());
    }
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
    if let Some(input) = &given_indices {
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
    let shared = match shared_code {
        Some(median) => human_time(ns(median)),
        None if tuning != Tuning::default() => "n/a (tuned)".to_string(),
        None => "n/a (no code sharing for this op)".to_string(),
    };
    outln!(
        out,
        "compile       {} median, first {}, on shared code {shared} (cache hit {}, lent {})",
        human_time(ns(compile)),
        human_time(first_compile),
        human_time(ns(cache_hit.median)),
        human_time(ns(cache_hit_lent.median))
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
    if threads_used < threads {
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

/// The inputs of a bench (or of `explain --check`): seeded random data, valid indices (or a
/// file's), and the quantized ops' scales and zero points or the scatters' updates, drawn in
/// that order.
pub struct BenchInputs {
    /// Data, starting `data_offset` bytes in.
    data_buffer: Vec<u8>,
    data_offset: usize,
    indices: Vec<u8>,
    scales: Vec<u8>,
    zero_points: Option<Vec<u8>>,
    updates: Vec<u8>,
}

impl BenchInputs {
    /// Every buffer of `layout`'s op, drawn from `rng` (indices below `limit`, or `given`),
    /// advised huge pages if `huge`.
    ///
    /// # Errors
    /// No valid index can be drawn; a buffer too large for memory.
    pub fn new(
        layout: OpLayout,
        rng: &mut XorShift,
        huge: bool,
        data_offset: usize,
        limit: u64,
        given: Option<&[u8]>,
    ) -> Result<BenchInputs> {
        let data_bytes = layout.data_bytes()?;
        let mut data_buffer =
            hugepages::zeroed(data_offset.saturating_add(data_bytes), huge, "the data")?;
        let data = &mut data_buffer[data_offset..];
        match layout.scatter() {
            Some(scatter_layout) => {
                scatter::fill_values(scatter_layout.signature().dtype, data, rng);
            }
            None => rng.fill(data),
        }
        if let Some(quantized) = layout.quantized() {
            quantized::finite_block_scales(quantized, data);
        }
        let indices_bytes = layout.indices_bytes()?;
        let mut indices = hugepages::with_capacity(indices_bytes, huge, "the indices")?;
        match given {
            Some(given) => indices.extend_from_slice(given),
            None => random::push_valid_op_indices(layout, rng, limit, &mut indices)?,
        }
        let (scales, zero_points) = match layout.quantized() {
            Some(quantized) => quantized::random_scales(quantized, rng)?,
            None => (Vec::new(), None),
        };
        let updates = match layout.scatter() {
            Some(scatter_layout) => {
                let sig = scatter_layout.signature();
                let len = crate::buffer::byte_len(
                    scatter_layout.updates_len(),
                    sig.dtype.size(),
                    "the updates",
                )?;
                let mut updates = hugepages::zeroed(len, huge, "the updates")?;
                scatter::fill_values(sig.dtype, &mut updates, rng);
                updates
            }
            None => Vec::new(),
        };
        Ok(BenchInputs {
            data_buffer,
            data_offset,
            indices,
            scales,
            zero_points,
            updates,
        })
    }

    /// Data.
    pub fn data(&self) -> &[u8] {
        &self.data_buffer[self.data_offset..]
    }

    /// The buffers as a call takes them.
    pub fn inputs(&self) -> Inputs<'_> {
        Inputs {
            data: self.data(),
            indices: &self.indices,
            scales: &self.scales,
            zero_points: self.zero_points.as_deref(),
            updates: &self.updates,
        }
    }
}

/// One kernel's call as the bench times it: out of place into an output, or (a scatter) in
/// place on the inputs' data.
pub struct Call<'a> {
    /// The kernel.
    pub kernel: &'a OpKernel,
    /// Its signature (for the wording of index errors).
    pub sig: &'a OpSignature,
    /// Parts of each call (0: the kernel chooses).
    pub threads: usize,
    /// A scatter's in-place call.
    pub in_place: bool,
}

impl Call<'_> {
    /// One call, its errors as the user reads them; with `check`, its output (in place: the
    /// data it updated) compared with the interpreter's on the same inputs.
    ///
    /// # Errors
    /// A rejected index; no memory for `check`'s copy of data; a disagreement (status 1).
    pub fn first(&self, inputs: &mut BenchInputs, output: &mut [u8], check: bool) -> Result<()> {
        if !check {
            return self
                .again(inputs, output)
                .map_err(|e| self.sig.index_failure(e));
        }
        if !self.in_place {
            self.again(inputs, output)
                .map_err(|e| self.sig.index_failure(e))?;
            return crate::run::check(self.kernel, self.sig, &inputs.inputs(), output);
        }
        let data = inputs.data();
        let mut original = crate::buffer::with_capacity(data.len(), "a copy of the data")?;
        original.extend_from_slice(data);
        self.again(inputs, output)
            .map_err(|e| self.sig.index_failure(e))?;
        let updated = inputs.data();
        let before = Inputs {
            data: &original,
            ..inputs.inputs()
        };
        crate::run::check(self.kernel, self.sig, &before, updated)
    }

    /// One call.
    ///
    /// # Errors
    /// The library's.
    pub fn again(
        &self,
        inputs: &mut BenchInputs,
        output: &mut [u8],
    ) -> Result<(), gather_jit::Error> {
        match (self.in_place, self.kernel.scatter()) {
            (true, Some(kernel)) => {
                let data = &mut inputs.data_buffer[inputs.data_offset..];
                kernel.run_bytes_in_place_parallel(
                    data,
                    &inputs.indices,
                    &inputs.updates,
                    self.threads,
                )
            }
            _ => self
                .kernel
                .compiled()
                .run_inputs(inputs.inputs(), output, self.threads),
        }
    }
}

/// The index type and shape of exact indices read from a file (`bench --indices`), checked
/// against the flags where given.
///
/// # Errors
/// Indices that are not integers; a shape or type that differs from the flag's.
fn indices_from_file(
    input: &Input,
    shape_flag: Option<&[usize]>,
    type_flag: Option<gather_jit::IndexType>,
) -> Result<(Vec<usize>, gather_jit::IndexType)> {
    let array = &input.array;
    let index_type = array.element.index_type().ok_or_else(|| {
        Failure::usage(format!(
            "{}: indices must have an integer type, found {}",
            input.path,
            array.element.dtype().map_or("?", gather_jit::DType::name)
        ))
    })?;
    if let Some(flag) = shape_flag.filter(|&flag| flag != array.shape.as_slice()) {
        return Err(Failure::usage(format!(
            "{}: shape {:?} differs from --indices-shape {flag:?} (leave the flag out to take \
             the file's)",
            input.path, array.shape
        )));
    }
    if let Some(flag) = type_flag.filter(|&flag| flag != index_type) {
        return Err(Failure::usage(format!(
            "{}: index type {index_type} differs from --index-type {flag} (leave the flag out \
             to take the file's)",
            input.path
        )));
    }
    Ok((array.shape.clone(), index_type))
}
