//! The JIT-backed op against tract's own op inside tract, on the S1-S9 shapes, single thread:
//! `jit` and `native` evaluate the op on the same tensors (output allocated by the op and
//! dropped before the next call, as a model's plan frees a tensor after its last use, so the
//! allocator hands the same memory back), `kernel` is the gather-jit kernel's own call into a
//! buffer allocated once, so `jit - kernel` is what the integration costs per call.
//!
//! `cargo bench -p gather-jit-tract --bench ops`; one case: `-- S5/`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use gather_jit::{Kernel, Op as GatherOp};
use gather_jit_tract::JitGather;
use gather_jit_workloads::{performance_cases, random_inputs};
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::internal::{EvalContext, EvalOp};
use tract_onnx::tract_hir::tract_core::ops::array as native;

fn benches(c: &mut Criterion) {
    for case in performance_cases() {
        let sig = &case.signature;
        let validated = sig.validate().expect("the cases are valid");
        // tract's ops take ONNX rules only: its GatherND has no OpenVINO flavor, so the cases
        // run under ONNX rules (the same output for valid indices).
        let op = match validated.op() {
            gather_jit::ir::ResolvedOp::Gather {
                axis,
                batch_dims: 0,
            } => GatherOp::Gather {
                axis: axis as i64,
                batch_dims: 0,
            },
            gather_jit::ir::ResolvedOp::GatherElements { axis } => {
                GatherOp::GatherElements { axis: axis as i64 }
            }
            gather_jit::ir::ResolvedOp::GatherNd { batch_dims, .. } => GatherOp::GatherNd {
                batch_dims: batch_dims as i64,
            },
            // Gather with batch dims: not an ONNX Gather.
            _ => continue,
        };
        let (data, indices) = random_inputs(&validated, 42);
        // SAFETY: f32 data and i64 indices (the cases' types), native-endian bytes.
        let data = unsafe { Tensor::from_raw_dt(f32::datum_type(), &sig.data_shape, &data) }
            .expect("tensor");
        // SAFETY: as above.
        let indices =
            unsafe { Tensor::from_raw_dt(i64::datum_type(), &sig.indices_shape, &indices) }
                .expect("tensor");
        // Shared values: cloning them costs a reference count, as in a running model (a deep
        // copy here would also free the copy inside the timed call).
        let (data_value, indices_value) =
            (data.clone().into_tvalue(), indices.clone().into_tvalue());
        let inputs = || tvec!(data_value.clone(), indices_value.clone());
        let jit = JitGather { op };
        let native: Box<dyn EvalOp> = match op {
            GatherOp::Gather { axis, .. } => Box::new(native::Gather::new(axis as usize)),
            GatherOp::GatherElements { axis } => Box::new(native::GatherElements {
                axis: axis as usize,
            }),
            GatherOp::GatherNd { batch_dims } => {
                Box::new(native::GatherNd::new(batch_dims as usize))
            }
        };
        // Both agree before either is timed.
        // No plan around them, as tract's constant folding runs ops.
        let ctx = EvalContext::out_of_plan();
        let (a, b) = (
            jit.eval(&ctx, inputs()).expect("jit"),
            native.eval(&ctx, inputs()).expect("native"),
        );
        assert_eq!(a[0].as_bytes(), b[0].as_bytes(), "{}", case.name);

        let mut group = c.benchmark_group(case.name);
        if validated.output_len() > 4 << 20 {
            group.sample_size(10);
        }
        let kernel = Kernel::compile(&gather_jit::Signature::new(
            op,
            &sig.data_shape,
            &sig.indices_shape,
        ))
        .expect("compiles");
        let mut output = vec![0u8; validated.output_len() * 4];
        let (data_bytes, index_bytes) = (data.as_bytes(), indices.as_bytes());
        group.bench_function("kernel", |b| {
            b.iter(|| {
                kernel
                    .run_bytes(data_bytes, index_bytes, &mut output)
                    .expect("runs")
            })
        });
        group.bench_function("jit", |b| b.iter(|| black_box(jit.eval(&ctx, inputs()))));
        group.bench_function("native", |b| {
            b.iter(|| black_box(native.eval(&ctx, inputs())))
        });
        group.finish();
    }
}

criterion_group!(ops, benches);
criterion_main!(ops);
