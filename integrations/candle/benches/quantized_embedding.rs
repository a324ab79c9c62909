//! `QuantizedEmbedding::forward` against candle's two ways to embed from a quantized table,
//! on a [32000, 4096] `Q4_0` and `Q8_0` table (a 7B model's token embedding), ids [1, 32] (a
//! prompt) and [1, 1] (a decode step), single-threaded:
//! - `dequantized`: the whole table dequantized once at load (`QTensor::dequantize`, timed
//!   apart as `load/dequantize-table`; 4 bytes a value), then `candle_nn::Embedding::forward`;
//! - `qtensor`: `QTensor::embedding`, which dequantizes only the gathered rows at each call.
//!
//! `kernel` is the kernel alone on preallocated buffers; `load/compile-*` is the first call's cost for a new power of two of ids (the kernel's
//! compilation); `QuantizedEmbedding::new` itself only checks the table.
//!
//! `RAYON_NUM_THREADS=1 cargo bench -p gather-jit-candle --bench quantized_embedding`, then
//! `python3 integrations/candle/benches/table.py` for the table of medians.

use std::borrow::Cow;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use candle_core::quantized::{GgmlDType, QStorage, QTensor};
use candle_core::{DType, Device, Module, Tensor};
use criterion::{Criterion, criterion_group, criterion_main};
use gather_jit::DType::F32;
use gather_jit::IndexType::U32;
use gather_jit::{
    GgufFormat, QuantizedKernel, QuantizedOptions, QuantizedSignature, jit_gather_gguf,
};
use gather_jit_candle::QuantizedEmbedding;
use gather_jit_workloads::XorShift;

const VOCABULARY: usize = 32000;
const HIDDEN: usize = 4096;

/// A table of random blocks: scales between 2^-10 and 2^-4 (as trained embeddings have),
/// quants of any bits.
fn table(format: GgufFormat, rng: &mut XorShift) -> Vec<u8> {
    let block = format.block_bytes();
    let mut bytes = vec![0u8; VOCABULARY * HIDDEN / 32 * block];
    rng.fill(&mut bytes);
    for chunk in bytes.chunks_exact_mut(block) {
        let exponent = rng.below(7) as i32 - 10;
        let d = half::f16::from_f32(2f32.powi(exponent) * (1.0 + rng.below(1024) as f32 / 1024.0));
        chunk[..2].copy_from_slice(&d.to_le_bytes());
    }
    bytes
}

fn bits(tensor: &Tensor) -> Vec<u32> {
    tensor
        .flatten_all()
        .and_then(|t| t.to_vec1::<f32>())
        .expect("f32")
        .into_iter()
        .map(f32::to_bits)
        .collect()
}

fn bench(c: &mut Criterion) {
    let cpu = Device::Cpu;
    let mut rng = XorShift::new(24);
    for (dtype, format) in [
        (GgmlDType::Q4_0, GgufFormat::Q4_0),
        (GgmlDType::Q8_0, GgufFormat::Q8_0),
    ] {
        let bytes = table(format, &mut rng);
        let storage =
            QStorage::from_data(Cow::Borrowed(&bytes), &cpu, dtype).expect("candle's storage");
        drop(bytes);
        let qtensor = Arc::new(QTensor::new(storage, (VOCABULARY, HIDDEN)).expect("qtensor"));
        let ours = QuantizedEmbedding::from_arc(Arc::clone(&qtensor)).expect("embedding");
        let dequantized = qtensor.dequantize(&cpu).expect("the whole table in f32");
        let theirs = candle_nn::Embedding::new(dequantized, HIDDEN);
        let name = format.name();

        for dims in [[1usize, 32], [1, 1]] {
            let count = dims[0] * dims[1];
            let ids: Vec<u32> = (0..count)
                .map(|_| rng.below(VOCABULARY as u64) as u32)
                .collect();
            let ids = Tensor::from_vec(ids, &dims, &cpu).expect("ids");
            // The three agree bit for bit before any is timed.
            let rows = bits(&ours.forward(&ids).expect("jit"));
            assert!(rows == bits(&theirs.forward(&ids).expect("dequantized")));
            assert!(rows == bits(&qtensor.embedding(&ids).expect("qtensor")));

            let mut group =
                c.benchmark_group(format!("candle-quantized-{name}-{}x{}", dims[0], dims[1]));
            group.bench_function("jit", |b| {
                b.iter(|| black_box(ours.forward(&ids).expect("jit")))
            });
            group.bench_function("qtensor", |b| {
                b.iter(|| black_box(qtensor.embedding(&ids).expect("qtensor")))
            });
            group.bench_function("dequantized", |b| {
                b.iter(|| black_box(theirs.forward(&ids).expect("dequantized")))
            });
            // The kernel alone, on preallocated buffers: `jit` minus this is the integration's
            // cost per call (candle's custom op, the ids' bytes, the output's allocation).
            let kernel = jit_gather_gguf(
                format,
                VOCABULARY,
                HIDDEN,
                &[count],
                &QuantizedOptions {
                    dtype: F32,
                    index_type: U32,
                    policy: None,
                },
            )
            .expect("the kernel");
            let table = qtensor.data().expect("the blocks");
            let id_bytes: Vec<u8> = ids
                .flatten_all()
                .and_then(|t| t.to_vec1::<u32>())
                .expect("u32")
                .iter()
                .flat_map(|id| id.to_ne_bytes())
                .collect();
            let mut output = vec![0u8; count * HIDDEN * 4];
            group.bench_function("kernel", |b| {
                b.iter(|| {
                    kernel
                        .run_bytes(&table, &id_bytes, &[], None, black_box(&mut output))
                        .expect("runs")
                })
            });
            group.finish();
        }

        let mut group = c.benchmark_group(format!("candle-quantized-{name}-load"));
        group
            .sample_size(10)
            .measurement_time(Duration::from_secs(8));
        group.bench_function("dequantize-table", |b| {
            b.iter(|| black_box(qtensor.dequantize(&cpu).expect("dequantize")))
        });
        for count in [32, 1] {
            let signature =
                QuantizedSignature::gguf(format, VOCABULARY, HIDDEN, &[count]).with_index_type(U32);
            group.bench_function(format!("compile-{count}"), |b| {
                b.iter(|| black_box(QuantizedKernel::compile(&signature).expect("compiles")))
            });
        }
        group.finish();
        // What each way keeps in memory besides the quantized table.
        let f32_bytes = VOCABULARY * HIDDEN * DType::F32.size_in_bytes();
        println!(
            "{name}: quantized table {} bytes, dequantized table {f32_bytes} bytes",
            ours.storage_size_in_bytes()
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = bench
}
criterion_main!(benches);
