//! The JIT ops against candle's own on the performance cases S1..S9 (f32 data, i64 indices),
//! single-threaded, plus the kernel's own `call` on preallocated buffers: the op's time minus
//! the kernel's is what the integration costs per call (signature, cache, tensors, output).
//!
//! `RAYON_NUM_THREADS=1 cargo bench -p gather-jit-candle`, then
//! `python3 integrations/candle/benches/table.py` for the table of medians.
//!
//! candle has no GatherND: S1, S2 and S8 compare against what a candle user writes instead
//! (each tuple folded into a row number with `broadcast_mul` and `sum`, then `index_select`),
//! S3 against `Tensor::gather` on the squeezed indices.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use candle_core::{D, DType, Device, Module, Tensor};
use criterion::{Criterion, criterion_group, criterion_main};
use gather_jit::{Flavor, Kernel, Op, Signature};
use gather_jit_candle::{Embedding, GatherJitExt, IndexRules};
use gather_jit_workloads::{Workload, performance_cases, random_inputs};

type Run = Box<dyn Fn() -> candle_core::Result<Tensor>>;

/// One case: candle's way, the JIT op, and the kernel that op runs.
struct Case {
    name: &'static str,
    native: Run,
    jit: Run,
    kernel: Arc<Kernel>,
    data: Vec<u8>,
    indices: Vec<u8>,
}

/// GatherND as candle ops: the row number of each tuple in data seen as `[rows, rest..]`
/// (with each batch's offset), then `index_select` and a reshape.
fn gather_nd_via_candle(
    data: &Tensor,
    ids: &Tensor,
    batch_dims: usize,
) -> candle_core::Result<Run> {
    let data_dims = data.dims().to_vec();
    let ids_dims = ids.dims().to_vec();
    let depth = ids_dims[ids_dims.len() - 1];
    let inner = &data_dims[batch_dims..batch_dims + depth];
    let strides: Vec<i64> = (0..depth)
        .map(|k| inner[k + 1..].iter().product::<usize>() as i64)
        .collect();
    let strides = Tensor::new(strides, &Device::Cpu)?;
    let per_batch = inner.iter().product::<usize>();
    let batches: usize = ids_dims[..batch_dims].iter().product();
    let mut offset_dims = ids_dims[..batch_dims].to_vec();
    offset_dims.extend(std::iter::repeat_n(1, ids_dims.len() - 1 - batch_dims));
    let offsets: Vec<i64> = (0..batches).map(|b| (b * per_batch) as i64).collect();
    let offsets = Tensor::from_vec(offsets, offset_dims, &Device::Cpu)?;
    let rest = data_dims[batch_dims + depth..].to_vec();
    let mut rows_shape = vec![batches * per_batch];
    rows_shape.extend_from_slice(&rest);
    let mut out_shape = ids_dims[..ids_dims.len() - 1].to_vec();
    out_shape.extend_from_slice(&rest);
    let rows = data.reshape(rows_shape)?;
    let ids = ids.clone();
    Ok(Box::new(move || {
        let mut linear = ids.broadcast_mul(&strides)?.sum(D::Minus1)?;
        if batch_dims > 0 {
            linear = linear.broadcast_add(&offsets)?;
        }
        rows.index_select(&linear.flatten_all()?, 0)?
            .reshape(out_shape.as_slice())
    }))
}

fn case(workload: &Workload) -> candle_core::Result<Case> {
    let validated = workload
        .signature
        .validate()
        .map_err(candle_core::Error::wrap)?;
    let signature = validated.signature();
    let (data_bytes, ids_bytes) = random_inputs(&validated, 7);
    let cpu = Device::Cpu;
    let data = Tensor::from_raw_buffer(&data_bytes, DType::F32, &signature.data_shape, &cpu)?;
    let ids = Tensor::from_raw_buffer(&ids_bytes, DType::I64, &signature.indices_shape, &cpu)?;
    let (d, i) = (data.clone(), ids.clone());
    let (native, jit): (Run, Run) = match (workload.name, signature.op) {
        ("S3", Op::GatherNd { batch_dims }) => {
            let squeezed = ids.squeeze(D::Minus1)?;
            let dim = batch_dims as usize;
            let (d2, s2) = (d.clone(), squeezed);
            (
                Box::new(move || d2.gather(&s2, dim)),
                Box::new(move || d.jit_gather_nd(&i, dim)),
            )
        }
        (_, Op::GatherNd { batch_dims }) => {
            let batch_dims = batch_dims as usize;
            (
                gather_nd_via_candle(&data, &ids, batch_dims)?,
                Box::new(move || d.jit_gather_nd(&i, batch_dims)),
            )
        }
        ("S5", Op::Gather { .. }) => {
            let hidden = signature.data_shape[1];
            let theirs = candle_nn::Embedding::new(data.clone(), hidden);
            let ours = Embedding::new(data.clone(), hidden);
            let (i2, i3) = (ids.clone(), ids.clone());
            (
                Box::new(move || theirs.forward(&i2)),
                Box::new(move || ours.forward(&i3)),
            )
        }
        (_, Op::Gather { axis, .. }) if signature.indices_shape.len() == 1 => {
            let axis = axis as usize;
            let (d2, i2) = (d.clone(), i.clone());
            (
                Box::new(move || d2.index_select(&i2, axis)),
                Box::new(move || d.jit_index_select(&i, axis)),
            )
        }
        (_, Op::Gather { axis, .. }) => {
            let axis = axis as usize;
            let out_shape = validated.output_shape().to_vec();
            let (d2, i2) = (d.clone(), i.clone());
            (
                Box::new(move || {
                    d2.index_select(&i2.flatten_all()?, axis)?
                        .reshape(out_shape.as_slice())
                }),
                Box::new(move || d.jit_take(&i, axis)),
            )
        }
        (_, Op::GatherElements { axis }) => {
            let axis = axis as usize;
            let (d2, i2) = (d.clone(), i.clone());
            (
                Box::new(move || d2.gather(&i2, axis)),
                Box::new(move || d.jit_gather(&i, axis)),
            )
        }
    };
    // The signature the op compiles: ONNX's op under candle's index rules.
    let ours = Signature::clone(signature)
        .with_flavor(Flavor::Onnx)
        .with_policy(IndexRules::Candle.policy());
    let kernel = gather_jit::jit(&ours).map_err(candle_core::Error::wrap)?;
    Ok(Case {
        name: workload.name,
        native,
        jit,
        kernel,
        data: data_bytes,
        indices: ids_bytes,
    })
}

fn bench(c: &mut Criterion) {
    for workload in performance_cases() {
        let case = case(&workload).expect("the case builds");
        // The two must agree before either is timed.
        let native = (case.native)().expect("candle runs");
        let jit = (case.jit)().expect("the JIT runs");
        assert_eq!(native.dims(), jit.dims(), "{}", case.name);
        let bits = |t: &Tensor| {
            t.flatten_all()
                .and_then(|t| t.to_vec1::<f32>())
                .expect("f32")
                .into_iter()
                .map(f32::to_bits)
                .collect::<Vec<_>>()
        };
        assert!(
            bits(&native) == bits(&jit),
            "{}: the results differ",
            case.name
        );

        let mut group = c.benchmark_group(format!("candle-{}", case.name));
        group.bench_function("candle", |b| {
            b.iter(|| black_box((case.native)().expect("candle")))
        });
        group.bench_function("jit", |b| b.iter(|| black_box((case.jit)().expect("jit"))));
        let mut output = vec![0u8; case.kernel.validated().output_len() * 4];
        group.bench_function("kernel", |b| {
            b.iter(|| {
                // SAFETY: the buffers hold the signature's bytes (random_inputs made them for
                // it, the output is sized from it), and the output overlaps neither input.
                unsafe {
                    case.kernel.call(
                        case.data.as_ptr(),
                        case.indices.as_ptr(),
                        output.as_mut_ptr(),
                    )
                }
                .expect("valid indices")
            })
        });
        group.finish();
    }
}

/// A custom op that only allocates S9's output: the floor of candle's custom-op path (storage
/// locks, the output's `Vec` and `Shape`, the new tensor) that the JIT op's overhead includes.
struct Plumbing;

impl candle_core::CustomOp2 for Plumbing {
    fn name(&self) -> &'static str {
        "plumbing"
    }

    fn cpu_fwd(
        &self,
        _: &candle_core::CpuStorage,
        _: &candle_core::Layout,
        _: &candle_core::CpuStorage,
        _: &candle_core::Layout,
    ) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
        Ok((
            candle_core::CpuStorage::F32(vec![0f32; 64]),
            candle_core::Shape::from(&[4usize, 16][..]),
        ))
    }
}

fn plumbing(c: &mut Criterion) {
    let data = Tensor::zeros((16, 16), DType::F32, &Device::Cpu).expect("data");
    let ids = Tensor::zeros(4, DType::I64, &Device::Cpu).expect("ids");
    c.bench_function("candle-plumbing", |b| {
        b.iter(|| black_box(data.apply_op2_no_bwd(&ids, &Plumbing).expect("runs")))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = bench, plumbing
}
criterion_main!(benches);
