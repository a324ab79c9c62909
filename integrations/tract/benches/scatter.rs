//! The JIT scatter op against tract's own ScatterNd and ScatterElements inside tract, on the
//! scatter cases W1..W5 (`gather_jit_workloads::scatter_cases`, i64 indices), single thread:
//!
//! - `jit_in_place` and `native_in_place`: the op evaluated on data it is handed (the only
//!   reference, as a model's plan hands a value to its last reader), each call's output fed
//!   back as the next call's data: both ops then write into that tensor (tract's own take it
//!   by `into_tensor`, which moves a tensor nobody else holds). With a reduction the values
//!   keep growing by the updates' sums, far from overflow in a run.
//! - `jit_out_of_place` and `native_out_of_place`: data shared with the caller (a constant, a
//!   value other nodes still read): the JIT op writes a fresh output in one pass, tract's
//!   clones data and scatters into the clone; the output is dropped before the next call.
//! - `kernel_in_place`: the gather-jit kernel's own `run_bytes_in_place` on a buffer, so that
//!   `jit_in_place - kernel_in_place` is what the integration costs per call.
//!
//! `cargo bench -p gather-jit-tract --bench scatter`; one case: `-- W2/`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use gather_jit::ScatterKernel;
use gather_jit::scatter::{Reduction, ScatterOp};
use gather_jit_tract::{JitScatter, datum_of};
use gather_jit_workloads::{ScatterWorkload, scatter_cases};
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::internal::{EvalContext, EvalOp};
use tract_onnx::tract_hir::tract_core::ops::array::{
    ScatterElements as NativeScatterElements, ScatterNd as NativeScatterNd, ScatterReduction,
};

/// tract's reduction for gather-jit's (the ONNX ones).
fn tract_reduction(reduction: Reduction) -> ScatterReduction {
    match reduction {
        Reduction::None => ScatterReduction::None,
        Reduction::Sum => ScatterReduction::Add,
        Reduction::Prod => ScatterReduction::Mul,
        Reduction::Min => ScatterReduction::Min,
        Reduction::Max => ScatterReduction::Max,
        other => panic!("{other} is not an ONNX reduction"),
    }
}

/// The op's output for data handed over (`data` moved in), with the same indices and updates.
fn eval(op: &dyn EvalOp, data: TValue, indices: &TValue, updates: &TValue) -> TValue {
    let ctx = EvalContext::out_of_plan();
    let mut outputs = op
        .eval(&ctx, tvec!(data, indices.clone(), updates.clone()))
        .expect("valid indices");
    outputs.remove(0)
}

fn bench_case(c: &mut Criterion, workload: &ScatterWorkload) {
    let sig = &workload.signature;
    let inputs = workload.inputs(42);
    let datum = datum_of(sig.dtype).expect("a tract type");
    let tensor = |shape: &[usize], dt: DatumType, bytes: &[u8]| {
        // SAFETY: plain-data types (the cases' f32 / f16 elements and i64 indices), and the
        // workload sized each buffer for its shape.
        unsafe { Tensor::from_raw_dt(dt, shape, bytes) }.expect("tensor")
    };
    let data = tensor(&sig.data_shape, datum, &inputs.data);
    let indices = tensor(&sig.indices_shape, DatumType::I64, &inputs.indices).into_tvalue();
    let updates = tensor(&sig.updates_shape, datum, &inputs.updates).into_tvalue();
    let jit = JitScatter {
        op: sig.op,
        reduction: sig.reduction,
    };
    let reduction = tract_reduction(sig.reduction);
    let native: Box<dyn EvalOp> = match sig.op {
        ScatterOp::Nd => Box::new(NativeScatterNd::new(reduction)),
        ScatterOp::Elements { axis } => Box::new(NativeScatterElements {
            axis: usize::try_from(axis).expect("a non-negative axis"),
            reduction,
        }),
        ScatterOp::Update { .. } => panic!("not an ONNX op"),
    };
    // Both agree before either is timed.
    let shared = data.clone().into_tvalue();
    let (a, b) = (
        eval(&jit, shared.clone(), &indices, &updates),
        eval(&*native, shared.clone(), &indices, &updates),
    );
    assert_eq!(a.as_bytes(), b.as_bytes(), "{}", workload.name);
    assert_eq!(shared.as_bytes(), data.as_bytes(), "shared data untouched");
    drop((a, b));

    let mut group = c.benchmark_group(workload.name);
    if inputs.data.len() > 16 << 20 {
        // W1 and W2: out of place, a copy of data takes milliseconds.
        group.sample_size(10);
        group.measurement_time(Duration::from_secs(3));
    }
    let kernel = ScatterKernel::compile(sig).expect("compiles");
    let mut buffer = inputs.data.clone();
    group.bench_function("kernel_in_place", |b| {
        b.iter(|| {
            kernel
                .run_bytes_in_place(black_box(&mut buffer), &inputs.indices, &inputs.updates)
                .expect("valid indices")
        })
    });
    drop(buffer);
    for (name, op) in [("jit", &jit as &dyn EvalOp), ("native", &*native)] {
        let mut slot = Some(data.clone().into_tvalue());
        group.bench_function(format!("{name}_in_place"), |b| {
            b.iter(|| {
                let data = slot.take().expect("the previous output");
                slot = Some(eval(op, data, &indices, &updates));
            })
        });
        drop(slot);
        group.bench_function(format!("{name}_out_of_place"), |b| {
            b.iter(|| black_box(eval(op, shared.clone(), &indices, &updates)))
        });
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    for workload in &scatter_cases() {
        bench_case(c, workload);
    }
}

criterion_group!(scatter, benches);
criterion_main!(scatter);
