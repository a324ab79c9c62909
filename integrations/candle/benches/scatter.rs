//! The JIT scatters against candle's own on the cases W2..W4 (f32 data, i64 indices),
//! single-threaded, out of place and in place, and the embedding gradient W2 feeds.
//!
//! `RAYON_NUM_THREADS=1 cargo bench -p gather-jit-candle --bench scatter`, then
//! `python3 integrations/candle/benches/table.py` for the table of medians.
//!
//! - W2: `index_add` of [1024, 768] rows into a zero [30522, 768] table, Zipf ids (repeats).
//!   candle has no in-place `index_add`: the in-place row times ours only. `grad` times the
//!   backward pass of an embedding lookup of the same ids (candle_nn's vs the JIT's), upstream
//!   gradient given.
//! - W3: `scatter_add` of [64, 1024] into [64, 4096] along 1, ids with repeats.
//! - W4: `scatter` of [1024, 1024] into [1024, 1024] along 0, each column an independent
//!   permutation of the rows.

use std::hint::black_box;
use std::time::Duration;

use candle_core::{DType, Device, Module, Tensor, Var};
use criterion::{Criterion, criterion_group, criterion_main};
use gather_jit_candle::{Embedding, GatherJitExt};
use gather_jit_workloads::XorShift;

type Run = Box<dyn Fn() -> candle_core::Result<Tensor>>;
type RunInPlace = Box<dyn Fn() -> candle_core::Result<()>>;

/// One case: candle's op and ours, out of place, and in place where both have it.
struct Case {
    name: &'static str,
    native: Run,
    jit: Run,
    native_in_place: Option<RunInPlace>,
    jit_in_place: RunInPlace,
}

fn random_f32(dims: &[usize], rng: &mut XorShift) -> candle_core::Result<Tensor> {
    let count: usize = dims.iter().product();
    let values: Vec<f32> = (0..count)
        .map(|_| (rng.below(1 << 20) as f32 / (1 << 19) as f32) - 1.)
        .collect();
    Tensor::from_vec(values, dims, &Device::Cpu)
}

/// A seeded random permutation of `0..n` (Fisher-Yates).
fn permutation(n: usize, rng: &mut XorShift) -> Vec<usize> {
    let mut values: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        values.swap(i, rng.below(i as u64 + 1) as usize);
    }
    values
}

/// `count` ids below `n` drawn from a Zipf law of exponent 1.1 (a token stream's shape: a few
/// ids repeat often), the rank-to-id map shuffled so that frequent rows lie spread over the
/// table, as the workloads crate draws W2's.
fn zipf(count: usize, n: usize, rng: &mut XorShift) -> Vec<i64> {
    let id_of_rank = permutation(n, rng);
    let mut cumulative = Vec::with_capacity(n);
    let mut total = 0f64;
    for rank in 1..=n {
        total += (rank as f64).powf(-1.1);
        cumulative.push(total);
    }
    (0..count)
        .map(|_| {
            let u = (rng.next_u64() >> 11) as f64 * (total / (1u64 << 53) as f64);
            id_of_rank[cumulative.partition_point(|&c| c <= u).min(n - 1)] as i64
        })
        .collect()
}

fn w2(rng: &mut XorShift) -> candle_core::Result<Case> {
    let cpu = Device::Cpu;
    let table = Tensor::zeros((30522, 768), DType::F32, &cpu)?;
    let ids = Tensor::new(zipf(1024, 30522, rng), &cpu)?;
    let rows = random_f32(&[1024, 768], rng)?;
    let in_place = table.copy()?;
    let (t1, i1, r1) = (table.clone(), ids.clone(), rows.clone());
    let (i2, r2) = (ids.clone(), rows.clone());
    Ok(Case {
        name: "W2",
        native: Box::new(move || t1.index_add(&i1, &r1, 0)),
        jit: Box::new(move || table.jit_index_add(&ids, &rows, 0)),
        native_in_place: None,
        jit_in_place: Box::new(move || in_place.jit_index_add_set(&i2, &r2, 0)),
    })
}

fn w3(rng: &mut XorShift) -> candle_core::Result<Case> {
    let cpu = Device::Cpu;
    let data = random_f32(&[64, 4096], rng)?;
    let ids: Vec<i64> = (0..64 * 1024).map(|_| rng.below(4096) as i64).collect();
    let ids = Tensor::from_vec(ids, (64, 1024), &cpu)?;
    let updates = random_f32(&[64, 1024], rng)?;
    let (native_set, jit_set) = (data.copy()?, data.copy()?);
    let (d1, i1, u1) = (data.clone(), ids.clone(), updates.clone());
    let (i2, u2) = (ids.clone(), updates.clone());
    let (i3, u3) = (ids.clone(), updates.clone());
    Ok(Case {
        name: "W3",
        native: Box::new(move || d1.scatter_add(&i1, &u1, 1)),
        jit: Box::new(move || data.jit_scatter_add(&ids, &updates, 1)),
        native_in_place: Some(Box::new(move || native_set.scatter_add_set(&i2, &u2, 1))),
        jit_in_place: Box::new(move || jit_set.jit_scatter_add_set(&i3, &u3, 1)),
    })
}

fn w4(rng: &mut XorShift) -> candle_core::Result<Case> {
    let cpu = Device::Cpu;
    let n = 1024;
    let data = random_f32(&[n, n], rng)?;
    // Every column an independent permutation of the rows: no element written twice, the
    // writes of one row of updates spread over the rows.
    let mut ids = vec![0i64; n * n];
    for col in 0..n {
        for (row, id) in permutation(n, rng).into_iter().enumerate() {
            ids[row * n + col] = id as i64;
        }
    }
    let ids = Tensor::from_vec(ids, (n, n), &cpu)?;
    let updates = random_f32(&[n, n], rng)?;
    let (native_set, jit_set) = (data.copy()?, data.copy()?);
    let (d1, i1, u1) = (data.clone(), ids.clone(), updates.clone());
    let (i2, u2) = (ids.clone(), updates.clone());
    let (i3, u3) = (ids.clone(), updates.clone());
    Ok(Case {
        name: "W4",
        native: Box::new(move || d1.scatter(&i1, &u1, 0)),
        jit: Box::new(move || data.jit_scatter(&ids, &updates, 0)),
        native_in_place: Some(Box::new(move || native_set.scatter_set(&i2, &u2, 0))),
        jit_in_place: Box::new(move || jit_set.jit_scatter_set(&i3, &u3, 0)),
    })
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.flatten_all()
        .and_then(|t| t.to_vec1::<f32>())
        .expect("f32")
        .into_iter()
        .map(f32::to_bits)
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut rng = XorShift::new(7);
    for case in [w2(&mut rng), w3(&mut rng), w4(&mut rng)] {
        let case = case.expect("the case builds");
        // The two must agree before either is timed.
        let native = (case.native)().expect("candle runs");
        let jit = (case.jit)().expect("the JIT runs");
        assert!(
            bits(&native) == bits(&jit),
            "{}: the results differ",
            case.name
        );

        let mut group = c.benchmark_group(format!("candle-scatter-{}", case.name));
        group.bench_function("candle", |b| {
            b.iter(|| black_box((case.native)().expect("candle")))
        });
        group.bench_function("jit", |b| b.iter(|| black_box((case.jit)().expect("jit"))));
        if let Some(native) = &case.native_in_place {
            group.bench_function("candle-in-place", |b| b.iter(|| native().expect("candle")));
        }
        group.bench_function("jit-in-place", |b| {
            b.iter(|| (case.jit_in_place)().expect("jit"))
        });
        group.finish();
    }
}

/// W2 as a gradient: the backward pass of `sum(lookup(table, ids) * upstream)` for a table
/// variable, candle_nn's `Embedding` against the JIT's (the other ops of the graph are the
/// same on both sides).
fn gradient(c: &mut Criterion) {
    let mut rng = XorShift::new(7);
    let cpu = Device::Cpu;
    let table =
        Var::from_tensor(&random_f32(&[30522, 768], &mut rng).expect("table")).expect("variable");
    let ids = Tensor::new(zipf(1024, 30522, &mut rng), &cpu).expect("ids");
    let upstream = random_f32(&[1024, 768], &mut rng).expect("upstream");
    let native = candle_nn::Embedding::new(table.as_tensor().clone(), 768);
    let jit = Embedding::new(table.as_tensor().clone(), 768);
    let loss = |lookup: &dyn Module| {
        lookup
            .forward(&ids)
            .and_then(|rows| rows.mul(&upstream))
            .and_then(|rows| rows.sum_all())
            .expect("loss")
    };
    let (native_loss, jit_loss) = (loss(&native), loss(&jit));
    let grad = |loss: &Tensor| {
        loss.backward()
            .expect("backward")
            .get(table.as_tensor())
            .cloned()
            .expect("the table's gradient")
    };
    assert!(bits(&grad(&native_loss)) == bits(&grad(&jit_loss)));
    let mut group = c.benchmark_group("candle-scatter-W2-grad");
    group.bench_function("candle", |b| b.iter(|| black_box(grad(&native_loss))));
    group.bench_function("jit", |b| b.iter(|| black_box(grad(&jit_loss))));
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20);
    targets = bench, gradient
}
criterion_main!(benches);
