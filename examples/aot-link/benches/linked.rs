//! The linked object's kernels beside the JIT's, one thread, on the same buffers: the object's
//! entry point called raw (`object`) and through `Linked::run` (`object-run`, which checks the
//! buffers' lengths), then `Kernel::call` of the JIT's kernel for the signature's default plan
//! (`jit`) and for the object's plan (`jit-object-plan`: `OutputMemory::Fresh` and
//! `Tuning::NO_BANDS`, since an object's plans never stream nor band).
//!
//! ```text
//! cargo bench -p gather-jit-aot-link --bench linked
//! GATHER_JIT_AOT_HOST_CPU=1 cargo bench -p gather-jit-aot-link --bench linked
//! ```
//!
//! The second links an object for this machine's CPU features, as the JIT compiles for.

use criterion::{Criterion, criterion_group, criterion_main};
use gather_jit::{Kernel, OutputMemory, Tuning};
use gather_jit_aot_link::{CPU, KERNELS, signature};
use gather_jit_workloads::random_inputs;

fn linked_vs_jit(c: &mut Criterion) {
    eprintln!("object: {CPU} CPU features");
    for (case, symbol) in [("S9", "s9_tiny"), ("S5", "s5_embedding")] {
        let kernel = KERNELS.iter().find(|k| k.symbol == symbol).expect("linked");
        let sig = signature(symbol).expect("known");
        let validated = sig.validate().expect("valid");
        let (data, indices) = random_inputs(&validated, 1);
        let mut output = vec![0u8; kernel.output_bytes];
        let default = Kernel::compile(&sig).expect("compiles");
        let fresh = sig.clone().with_output_memory(OutputMemory::Fresh);
        let same_plan = Kernel::compile_tuned(&fresh, Tuning::NO_BANDS).expect("compiles");
        let mut group = c.benchmark_group(case);
        group.bench_function("object", |b| {
            b.iter(|| {
                let mut bad_position = 0;
                // SAFETY: `random_inputs` made the buffers of the signature's sizes, which
                // are the kernel's, and `output` is of its output size; nothing else touches
                // them meanwhile.
                let status = unsafe {
                    (kernel.entry)(
                        data.as_ptr(),
                        indices.as_ptr(),
                        output.as_mut_ptr(),
                        &mut bad_position,
                    )
                };
                assert_eq!(status, 0);
            });
        });
        group.bench_function("object-run", |b| {
            b.iter(|| kernel.run(&data, &indices, &mut output).expect("valid"));
        });
        for (name, jit) in [("jit", &default), ("jit-object-plan", &same_plan)] {
            group.bench_function(name, |b| {
                b.iter(|| {
                    // SAFETY: `random_inputs` made the buffers of the signature's sizes, and
                    // `output` is of the kernel's; nothing else touches them meanwhile.
                    unsafe { jit.call(data.as_ptr(), indices.as_ptr(), output.as_mut_ptr()) }
                        .expect("valid");
                });
            });
        }
        group.finish();
    }
}

criterion_group!(benches, linked_vs_jit);
criterion_main!(benches);
