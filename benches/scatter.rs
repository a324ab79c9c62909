//! Criterion benches of the scatter cases W1..W5 (`gather_jit_workloads::scatter_cases`), one
//! thread: per case the compile (`ScatterKernel::compile`), the kernel in place
//! (`run_bytes_in_place`: data becomes the output) and out of place (`run_bytes`: a copy of data,
//! then the updates), each also as a raw `call_in_place` / `call` without the buffer-length
//! checks (W5's target is for a raw call), and a memcpy of data's size (W1's out-of-place target
//! is 1.1x it).
//!
//! In place, every iteration scatters into the previous one's result: with a reduction the
//! values keep growing (by the updates' sum per call, far from overflow in a run).
//!
//! `cargo bench --bench scatter` runs all; `cargo bench --bench scatter -- W2/` runs one case.
//! `benches/peers/compare.py --cases scatter` puts the same cases beside numpy, ONNX Runtime,
//! OpenVINO and JAX.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use gather_jit::ScatterKernel;
use gather_jit_workloads::{ScatterWorkload, scatter_cases};

fn bench_case(c: &mut Criterion, workload: &ScatterWorkload) {
    let sig = &workload.signature;
    let inputs = workload.inputs(42);
    let (indices, updates) = (&inputs.indices, &inputs.updates);
    let kernel = ScatterKernel::compile(sig).expect("compiles");
    let mut data = inputs.data.clone();
    let mut output = vec![0u8; inputs.data.len()];

    let mut group = c.benchmark_group(workload.name);
    if inputs.data.len() > 16 << 20 {
        // W1 and W2: a copy of data takes milliseconds out of place.
        group.sample_size(10);
        group.measurement_time(Duration::from_secs(3));
    }
    group.bench_function("compile", |b| {
        b.iter(|| ScatterKernel::compile(black_box(sig)).expect("compiles"))
    });
    group.bench_function("in_place", |b| {
        b.iter(|| {
            kernel
                .run_bytes_in_place(black_box(&mut data), indices, updates)
                .expect("valid indices")
        })
    });
    group.bench_function("in_place_raw", |b| {
        b.iter(|| {
            // SAFETY: `data`, `indices` and `updates` are `inputs`' buffers, sized for the
            // signature by `ScatterWorkload::inputs`, and nothing else touches them meanwhile.
            unsafe { kernel.call_in_place(data.as_mut_ptr(), indices.as_ptr(), updates.as_ptr()) }
                .expect("valid indices")
        })
    });
    group.bench_function("out_of_place", |b| {
        b.iter(|| {
            kernel
                .run_bytes(&inputs.data, indices, updates, black_box(&mut output))
                .expect("valid indices")
        })
    });
    group.bench_function("out_of_place_raw", |b| {
        b.iter(|| {
            // SAFETY: as above; `output` has data's size and overlaps no input.
            unsafe {
                kernel.call(
                    inputs.data.as_ptr(),
                    indices.as_ptr(),
                    updates.as_ptr(),
                    output.as_mut_ptr(),
                )
            }
            .expect("valid indices")
        })
    });
    group.bench_function("memcpy", |b| {
        b.iter(|| black_box(&mut output[..]).copy_from_slice(black_box(&inputs.data)))
    });
    group.finish();
}

fn benches(c: &mut Criterion) {
    for workload in &scatter_cases() {
        bench_case(c, workload);
    }
}

criterion_group!(scatter, benches);
criterion_main!(scatter);
