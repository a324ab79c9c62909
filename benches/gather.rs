//! Criterion benches: every performance case (S1..S9) and the model shapes, each timed as a
//! cold compile, a cache hit, a warm JIT call (one thread and two; for a banded GatherElements
//! also without bands), the interpreter, a memcpy of the output's size and a fill of the
//! output (for slice copies also with streaming stores, and for row gathers one `memcpy` per
//! row as numpy does), with `Throughput::Bytes` of the output; then the copy tiers, large rows
//! into an output out of step with data, and all those signatures compiled into a new cache
//! one by one or with `get_all`; and the slowest compiles the rank limit allows
//! (`compile/deepest`).
//!
//! `cargo bench --bench gather` runs all; `cargo bench --bench gather -- S5/` runs one case.
//! The interpreter is timed only where one call takes well under a second (it is the oracle,
//! not a contender); the CLI's `bench` mode prints the ratios from one run.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gather_jit::interp::interpret;
use gather_jit::ir::MAX_RANK;
use gather_jit::{DType, IndexType, Kernel, KernelCache, Signature, Tuning};
use gather_jit_workloads::{Workload, model_cases, performance_cases, random_inputs};

/// Interpreter runs are skipped above this many output elements (S4 has 48M: minutes).
const INTERPRETER_LIMIT: usize = 4_000_000;

/// The byte the fills write. Not zero: this machine writes zero lines about twice as fast as
/// other bytes.
const FILL_BYTE: u8 = 0x5a;

fn bench_workload(c: &mut Criterion, workload: &Workload) {
    let sig = &workload.signature;
    let validated = sig.validate().expect("benchmark signatures are valid");
    let (data, indices) = random_inputs(&validated, 42);
    let output_bytes = validated.output_len() * sig.dtype.size();
    let mut output = vec![0u8; output_bytes];
    let cache = KernelCache::new(16);
    let kernel = cache.get(sig).expect("compiles");

    let mut group = c.benchmark_group(workload.name);
    group.throughput(Throughput::Bytes(output_bytes as u64));
    if output_bytes > 16 << 20 {
        group.sample_size(10);
        group.measurement_time(Duration::from_secs(3));
    }
    group.bench_function("compile", |b| {
        b.iter(|| Kernel::compile(black_box(sig)).expect("compiles"))
    });
    let code_holder = Kernel::compile_shared(sig).expect("compiles");
    group.bench_function("shared_code", |b| {
        b.iter(|| Kernel::compile_shared(black_box(sig)).expect("compiles"))
    });
    drop(code_holder);
    group.bench_function("cache_hit", |b| {
        b.iter(|| cache.get(black_box(sig)).expect("cached"))
    });
    group.bench_function("cache_hit_lent", |b| {
        b.iter(|| {
            cache
                .with(black_box(sig), |kernel| black_box(kernel).code_bytes())
                .expect("cached")
        })
    });
    group.bench_function("jit", |b| {
        b.iter(|| {
            // SAFETY: buffers sized for the signature by `random_inputs` and `output_bytes`.
            unsafe { kernel.call(data.as_ptr(), indices.as_ptr(), output.as_mut_ptr()) }
                .expect("valid indices")
        })
    });
    if kernel.plan().band.is_some() {
        // The same gather without banding (S7): what the bands gain.
        let plain = Kernel::compile_tuned(sig, Tuning::NO_BANDS).expect("compiles");
        group.bench_function("jit_no_bands", |b| {
            b.iter(|| {
                // SAFETY: as above.
                unsafe { plain.call(data.as_ptr(), indices.as_ptr(), output.as_mut_ptr()) }
                    .expect("valid indices")
            })
        });
    }
    group.bench_function("jit_2_threads", |b| {
        b.iter(|| {
            // SAFETY: as above; `output` is not touched elsewhere during the call.
            unsafe { kernel.call_parallel(data.as_ptr(), indices.as_ptr(), output.as_mut_ptr(), 2) }
                .expect("valid indices")
        })
    });
    if validated.output_len() <= INTERPRETER_LIMIT {
        group.bench_function("interpreter", |b| {
            b.iter(|| interpret(black_box(&validated), &data, &indices).expect("valid"))
        });
    }
    let source = vec![1u8; output_bytes];
    group.bench_function("memcpy", |b| {
        b.iter(|| output.copy_from_slice(black_box(&source)))
    });
    group.bench_function("fill", |b| {
        b.iter(|| black_box(&mut output[..]).fill(FILL_BYTE))
    });
    let slice_bytes = kernel.plan().lookup.slice_bytes as usize;
    let rows_gather = gather_jit::Op::Gather {
        axis: 0,
        batch_dims: 0,
    };
    if sig.op == rows_gather && sig.index_type == IndexType::I64 && slice_bytes > 512 {
        // What numpy's `take` and a generic runtime do for a row gather (S5, the GPT-2
        // embedding): one `memcpy` per row, in index order (`random_inputs` draws indices from
        // `0..rows`, native-endian).
        group.bench_function("row_memcpy", |b| {
            b.iter(|| {
                let rows = indices
                    .chunks_exact(8)
                    .zip(output.chunks_exact_mut(slice_bytes));
                for (index, row) in rows {
                    let index = i64::from_ne_bytes(index.try_into().expect("8 bytes"));
                    let at = index as usize * slice_bytes;
                    row.copy_from_slice(&data[at..at + slice_bytes]);
                }
            })
        });
    }
    if slice_bytes > 512 {
        // The slice copies (S4, S5, the GPT-2 embedding; S4 and S5 have a target of 1.1x the
        // fill): a fill with streaming stores, which skip reading the lines they write but
        // then go all the way to memory.
        group.bench_function("fill_streaming", |b| {
            b.iter(|| fill_streaming(black_box(&mut output[..]), FILL_BYTE))
        });
    }
    group.finish();
}

/// Writes `byte` over `output` with non-temporal stores (SSE2 on x86-64; a plain fill
/// elsewhere).
fn fill_streaming(output: &mut [u8], byte: u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_set1_epi8, _mm_sfence, _mm_stream_si128};
        // SAFETY: every bit pattern is a valid `__m128i`, and the aligned middle part holds
        // only whole vectors of `output`.
        let (head, body, tail) = unsafe { output.align_to_mut::<__m128i>() };
        head.fill(byte);
        tail.fill(byte);
        // SAFETY: SSE2 is part of x86-64.
        let vector = unsafe { _mm_set1_epi8(byte as i8) };
        for lane in body {
            // SAFETY: `lane` is a 16-byte aligned, writable part of `output`; SSE2 is part of
            // x86-64.
            unsafe { _mm_stream_si128(lane, vector) };
        }
        // SAFETY: SSE is part of x86-64. Orders the streaming stores before whatever follows,
        // as a kernel's own are.
        unsafe { _mm_sfence() };
    }
    #[cfg(not(target_arch = "x86_64"))]
    output.fill(byte);
}

/// A Gather of `picks` random rows of a `rows`-row f32 table, per row size in `row_bytes`,
/// timed in group `name`; with `out_of_step`, the output starts that many bytes (mod 64) past
/// data.
fn bench_row_copies(
    c: &mut Criterion,
    name: &str,
    (rows, picks): (usize, usize),
    row_bytes: &[usize],
    out_of_step: Option<usize>,
) {
    let mut group = c.benchmark_group(name);
    for &row_bytes in row_bytes {
        let sig = gather_jit::Signature::gather(&[rows, row_bytes / 4], &[picks], 0, 0);
        let validated = sig.validate().expect("valid");
        let (data, indices) = random_inputs(&validated, 7);
        let output_bytes = validated.output_len() * 4;
        let mut buffer = vec![0u8; output_bytes + 64];
        let start = out_of_step.map_or(0, |bytes| {
            (data.as_ptr() as usize + bytes).wrapping_sub(buffer.as_ptr() as usize) % 64
        });
        let output = &mut buffer[start..start + output_bytes];
        let kernel = Kernel::compile(&sig).expect("compiles");
        group.throughput(Throughput::Bytes(output_bytes as u64));
        group.bench_with_input(
            BenchmarkId::from_parameter(row_bytes),
            &row_bytes,
            |b, _| {
                b.iter(|| {
                    // SAFETY: buffers sized for the signature.
                    unsafe { kernel.call(data.as_ptr(), indices.as_ptr(), output.as_mut_ptr()) }
                        .expect("valid indices")
                })
            },
        );
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    for workload in performance_cases().iter().chain(&model_cases()) {
        bench_workload(c, workload);
    }
    // Where the copy tiers switch: one Gather row copy per size.
    bench_row_copies(
        c,
        "copy_tier",
        (4096, 1024),
        &[64, 256, 512, 1024, 4096],
        None,
    );
    // Large rows with the output 16 bytes (mod 64) out of step with data, where glibc's
    // `memcpy` (`rep movsb`) took 3.5-11x as long as in step (docs/performance.md). Its time
    // also depends on where the allocator puts the buffers: 3 KiB rows took 92-98 µs in some
    // processes and 22-32 µs in others, with the own copy loop and with `memcpy` alike.
    bench_row_copies(c, "copy_out_of_step", (2048, 256), &[3072, 16384], Some(16));

    // A model's gather kernels compiled when it loads: the cases and the model shapes into a
    // new cache, one `get` after another, or all at once with `get_all` (on the pool).
    let signatures: Vec<_> = (performance_cases().into_iter().chain(model_cases()))
        .map(|workload| workload.signature)
        .collect();
    let mut group = c.benchmark_group("compile_model");
    group.bench_function("get_each", |b| {
        b.iter(|| {
            let cache = KernelCache::new(64);
            for signature in &signatures {
                black_box(cache.get(signature).expect("compiles"));
            }
        })
    });
    group.bench_function("get_all", |b| {
        b.iter(|| black_box(KernelCache::new(64).get_all(&signatures)))
    });
    group.finish();

    // The slowest compiles the rank limit (`MAX_RANK`) allows: GatherND tuples of the greatest
    // depth, where every coordinate is a check in the code (dims of 2, which never merge),
    // and the deepest loop nests (Gather with inputs whose ranks reach the output's limit).
    let deepest = [
        (
            "gather_nd_depth_62",
            Signature::gather_nd(&[2; MAX_RANK - 2], &[3, MAX_RANK - 2], 0).with_dtype(DType::U8),
        ),
        (
            "gather_nd_depth_64",
            Signature::gather_nd(&[1; MAX_RANK], &[3, MAX_RANK], 0).with_dtype(DType::U8),
        ),
        (
            "gather_nd_batch_31_depth_31",
            Signature::gather_nd(&[2; 62], &[[2; 31].as_slice(), &[1, 31]].concat(), 31)
                .with_dtype(DType::U8),
        ),
        (
            "gather_rank_61_output",
            Signature::gather(&[2; 31], &[2; 31], 15, 0).with_dtype(DType::U8),
        ),
    ];
    let mut group = c.benchmark_group("compile/deepest");
    for (name, signature) in &deepest {
        group.bench_function(*name, |b| {
            b.iter(|| Kernel::compile(black_box(signature)).expect("compiles"))
        });
    }
    group.finish();
}

criterion_group!(gather, benches);
criterion_main!(gather);
