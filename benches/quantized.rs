//! Quantized gathers on an LLM token-embedding table `[32000, 4096]` (issue cases Q1-Q3, and
//! Q1 and Q3-q8_0 with `f16` scales and output, which round every value to `f16` one at a
//! time): each kernel beside a copy and a fill of its output, and the compile time; outputs of at
//! least `PARALLEL_MIN_BYTES` also split across two threads, beside a fill split the same way
//! on the same worker pool.
//!
//! `cargo bench --bench quantized` (one case: `cargo bench --bench quantized -- Q1/`).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use gather_jit::{BlockQuantization, DType, GgufFormat, QuantizedKernel, QuantizedSignature};
use gather_jit_workloads::XorShift;

const ROWS: usize = 32000;
const ROW_LEN: usize = 4096;

/// Deterministic bytes, so runs compare.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut bytes = vec![0; len];
    XorShift::new(seed).fill(&mut bytes);
    bytes
}

fn indices(count: usize) -> Vec<u8> {
    let picks = noise(count * 4, 9);
    picks
        .chunks(4)
        .flat_map(|c| {
            (i64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])) % ROWS as i64).to_ne_bytes()
        })
        .collect()
}

/// Times `kernel` on its random inputs, then a copy and a fill of its output's size.
fn case(c: &mut Criterion, name: &str, signature: &QuantizedSignature) {
    let kernel = QuantizedKernel::compile(signature).expect("compiles");
    let layout = kernel.layout();
    let data = noise(layout.data_bytes_shape().iter().product(), 1);
    let scales: Vec<u8> = (0..layout.scales_shape().iter().product::<usize>()
        * usize::from(!layout.scales_shape().is_empty()))
        .flat_map(|i| {
            let scale = 0.01f32 * (i % 97) as f32;
            match signature.dtype {
                DType::F16 => half::f16::from_f32(scale).to_ne_bytes().to_vec(),
                _ => scale.to_ne_bytes().to_vec(),
            }
        })
        .collect();
    let count: usize = signature.indices_shape.iter().product();
    let indices = indices(count);
    let output_bytes = kernel.output_shape().iter().product::<usize>() * signature.dtype.size();
    let mut output = vec![0u8; output_bytes];
    let source = noise(output_bytes, 3);
    let mut group = c.benchmark_group(name);
    group.bench_function("jit", |b| {
        b.iter(|| {
            kernel
                .run_bytes(&data, &indices, &scales, None, black_box(&mut output))
                .expect("runs")
        })
    });
    if output_bytes as u64 >= gather_jit::PARALLEL_MIN_BYTES {
        group.bench_function("jit_2_threads", |b| {
            b.iter(|| {
                kernel
                    .run_bytes_parallel(&data, &indices, &scales, None, black_box(&mut output), 2)
                    .expect("runs")
            })
        });
        group.bench_function("fill_2_threads", |b| {
            b.iter(|| {
                let (first, second) = black_box(&mut output).split_at_mut(output_bytes / 2);
                let halves = [first.as_mut_ptr() as usize, second.as_mut_ptr() as usize];
                let lens = [first.len(), second.len()];
                gather_jit::run_parts(2, &|part| {
                    // SAFETY: the two halves are disjoint parts of `output`, borrowed mutably
                    // for the duration of `run_parts`, which returns when both are done.
                    let half = unsafe {
                        std::slice::from_raw_parts_mut(halves[part] as *mut u8, lens[part])
                    };
                    half.fill(0x5a);
                })
            })
        });
    }
    group.bench_function("memcpy", |b| {
        b.iter(|| black_box(&mut output).copy_from_slice(&source))
    });
    group.bench_function("fill", |b| b.iter(|| black_box(&mut output).fill(0x5a)));
    group.bench_function("compile", |b| {
        b.iter(|| QuantizedKernel::compile(black_box(signature)).expect("compiles"))
    });
    group.finish();
}

fn benches(c: &mut Criterion) {
    let q4 = BlockQuantization {
        gather_axis: 0,
        quantize_axis: 1,
        block_size: 32,
        bits: 4,
        zero_points: false,
    };
    let block = |count| QuantizedSignature::block_quantized(&[ROWS, ROW_LEN], &[1, count], q4);
    case(c, "Q1", &block(32));
    case(c, "Q2", &block(2048));
    case(c, "decode-step", &block(1));
    for format in [GgufFormat::Q4_0, GgufFormat::Q8_0] {
        let sig = QuantizedSignature::gguf(format, ROWS, ROW_LEN, &[1, 32]);
        case(c, &format!("Q3-{}", format.name()), &sig);
    }
    case(c, "Q1-f16", &block(32).with_dtype(DType::F16));
    let sig = QuantizedSignature::gguf(GgufFormat::Q8_0, ROWS, ROW_LEN, &[1, 32]);
    case(c, "Q3-q8_0-f16", &sig.with_dtype(DType::F16));
}

criterion_group! {
    name = quantized;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(2));
    targets = benches
}
criterion_main!(quantized);
