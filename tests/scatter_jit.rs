//! The compiled scatters against the interpreter: every vendored vector (out of place, in
//! place, parallel, through the cache), random problems of every flavor, reduction, dtype and
//! index type (proptest), slices long enough for the vector and `memcpy` paths, and the
//! in-place promise: a call that fails leaves data byte for byte as it was.

use gather_jit::interp::interpret_scatter;
use gather_jit::scatter::{Reduction, ScatterFlavor, ScatterOp, ScatterSignature};
use gather_jit::{DType, IndexType, KernelCache, NegativeIndices, ScatterKernel, jit_scatter};
use gather_jit_workloads::XorShift;
use ndarray::{Array, ArrayD, IxDyn, s};
use proptest::prelude::*;

use crate::scatter_conformance::{case_files, run_all};
use crate::scatter_props::{Problem, any_problem, first_bad_index};
use crate::util::{f32_bytes, index_bytes};

fn out_of_place(
    kernel: &ScatterKernel,
    data: &[u8],
    indices: &[u8],
    updates: &[u8],
    threads: usize,
) -> gather_jit::Result<Vec<u8>> {
    let mut out = vec![0xa5; data.len()];
    kernel.run_bytes_parallel(data, indices, updates, &mut out, threads)?;
    Ok(out)
}

fn in_place(
    kernel: &ScatterKernel,
    data: &[u8],
    indices: &[u8],
    updates: &[u8],
    threads: usize,
) -> gather_jit::Result<Vec<u8>> {
    let mut out = data.to_vec();
    let result = kernel.run_bytes_in_place_parallel(&mut out, indices, updates, threads);
    if result.is_err() {
        assert_eq!(out, data, "a failed in-place call changed data");
    }
    result.map(|()| out)
}

/// `bytes` with every NaN element of a float `dtype` replaced by one NaN: which NaN an
/// operation on two NaNs returns is the ISA's (and the Rust compiler's operand order) choice,
/// as `reduce.rs` says; everything else must match bit for bit.
fn canonical_nans(dtype: DType, bytes: &[u8]) -> Vec<u8> {
    let size = dtype.size();
    let is_nan = |e: &[u8]| match dtype {
        DType::F32 => f32::from_ne_bytes(e.try_into().expect("4")).is_nan(),
        DType::F64 => f64::from_ne_bytes(e.try_into().expect("8")).is_nan(),
        DType::F16 => half::f16::from_bits(u16::from_ne_bytes(e.try_into().expect("2"))).is_nan(),
        DType::Bf16 => half::bf16::from_bits(u16::from_ne_bytes(e.try_into().expect("2"))).is_nan(),
        _ => false,
    };
    bytes
        .chunks_exact(size)
        .flat_map(|e| {
            if is_nan(e) {
                vec![0xff; size]
            } else {
                e.to_vec()
            }
        })
        .collect()
}

/// The first element where `got` and `expected` differ, NaNs aside.
fn first_difference(dtype: DType, got: &[u8], expected: &[u8]) -> Option<usize> {
    let (got, expected) = (canonical_nans(dtype, got), canonical_nans(dtype, expected));
    let size = dtype.size();
    (0..got.len() / size)
        .find(|&e| got[e * size..(e + 1) * size] != expected[e * size..(e + 1) * size])
}

#[test]
fn every_scatter_vector_passes_the_jit_out_of_place() {
    let ran = run_all(&|layout, d, i, u| {
        let kernel = ScatterKernel::compile(layout.signature())?;
        out_of_place(&kernel, d, i, u, 1)
    });
    assert_eq!(ran, case_files().len());
}

#[test]
fn every_scatter_vector_passes_the_jit_in_place() {
    let ran = run_all(&|layout, d, i, u| {
        let kernel = jit_scatter(layout.signature())?;
        in_place(&kernel, d, i, u, 1)
    });
    assert_eq!(ran, case_files().len());
}

#[test]
fn every_scatter_vector_passes_the_jit_in_three_parts() {
    let cache = KernelCache::new(8);
    let ran = run_all(&|layout, d, i, u| {
        let kernel = cache.get_scatter(layout.signature())?;
        out_of_place(&kernel, d, i, u, 3)?;
        in_place(&kernel, d, i, u, 3)
    });
    assert_eq!(ran, case_files().len());
}

/// The JIT's result (or error) for `p` under `call`, against the interpreter's.
fn check_problem(p: &Problem, threads: usize) -> Result<(), TestCaseError> {
    let layout = p.signature.validate().expect("a valid signature");
    let kernel = ScatterKernel::compile(&p.signature).expect("compiles");
    let indices = p.indices_bytes();
    let expected = interpret_scatter(&layout, &p.data, &indices, &p.updates);
    let got = out_of_place(&kernel, &p.data, &indices, &p.updates, threads);
    let got_in_place = in_place(&kernel, &p.data, &indices, &p.updates, threads);
    match (&expected, first_bad_index(p)) {
        (Err(_), _) | (_, None) => {}
        (Ok(_), Some(n)) => panic!("index {n} is bad, but the interpreter accepted it"),
    }
    let dtype = p.signature.dtype;
    let text = |r: &gather_jit::Result<Vec<u8>>| match r {
        Ok(bytes) => format!("{:?}", canonical_nans(dtype, bytes)),
        Err(e) => e.to_string(),
    };
    prop_assert_eq!(text(&got), text(&expected), "out of place: {}", p.signature);
    prop_assert_eq!(
        text(&got_in_place),
        text(&expected),
        "in place: {}",
        p.signature
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Every flavor, reduction, dtype and index type, random bytes (NaNs, infinities,
    /// subnormals) and indices partly out of range: the interpreter's bytes or error.
    #[test]
    fn the_jit_matches_the_interpreter(p in any_problem()) {
        check_problem(&p, 1)?;
    }

    /// Split across parts, the result is the sequential one, duplicates and all.
    #[test]
    fn a_parallel_call_matches_the_interpreter(p in any_problem(), threads in 2usize..5) {
        check_problem(&p, threads)?;
    }
}

/// Every dtype and reduction of ScatterND-15 and ScatterElementsUpdate-12 on slices long
/// enough for 16-byte lanes with a tail, and for `memcpy` (reduction none, over 512 bytes),
/// with duplicate indices.
#[test]
fn long_slices_and_duplicates_match_the_interpreter() {
    let mut rng = XorShift::new(32);
    let mut checked = 0;
    for dtype in DType::ALL {
        for (flavor, data, indices, updates, op) in [
            (
                ScatterFlavor::OpenvinoScatterNdUpdate15,
                vec![6, 137],
                vec![9, 1],
                vec![9, 137],
                ScatterOp::Nd,
            ),
            (
                ScatterFlavor::Onnx,
                vec![3, 4, 161],
                vec![7, 2],
                vec![7, 161],
                ScatterOp::Nd,
            ),
            (
                ScatterFlavor::OpenvinoScatterElementsUpdate12,
                vec![5, 33],
                vec![5, 40],
                vec![5, 40],
                ScatterOp::Elements { axis: 1 },
            ),
            (
                ScatterFlavor::OpenvinoScatterUpdate3,
                vec![2, 5, 70],
                vec![3],
                vec![2, 3, 70],
                ScatterOp::Update { axis: 1 },
            ),
        ] {
            for &reduction in flavor.reductions() {
                if !reduction.defined_on(dtype) {
                    continue;
                }
                for init in [true, false] {
                    if !init && !flavor.has_use_init_val() {
                        continue;
                    }
                    let sig = ScatterSignature::new(op, &data, &indices, &updates)
                        .with_flavor(flavor)
                        .with_reduction(reduction)
                        .with_use_init_val(init)
                        .with_dtype(dtype)
                        .with_index_type(IndexType::I32);
                    let layout = sig.validate().expect("valid");
                    let mut bytes = |len: usize| {
                        let mut b = vec![0u8; len * dtype.size()];
                        rng.fill(&mut b);
                        b
                    };
                    let d = bytes(layout.data_len());
                    let u = bytes(layout.updates_len());
                    let dims: Vec<i64> = match op {
                        ScatterOp::Nd => data[..indices[indices.len() - 1]]
                            .iter()
                            .map(|&d| d as i64)
                            .collect(),
                        ScatterOp::Elements { axis } | ScatterOp::Update { axis } => {
                            vec![data[axis as usize] as i64]
                        }
                    };
                    let wraps = sig.negative == NegativeIndices::Wrap;
                    // Few distinct values, so most indices repeat; some negative.
                    let ids: Vec<i64> = (0..layout.indices_len())
                        .map(|n| {
                            let dim = dims[n % dims.len()];
                            let v = rng.below(dim.min(3) as u64) as i64;
                            if wraps && rng.below(4) == 0 {
                                v - dim
                            } else {
                                v
                            }
                        })
                        .collect();
                    let i = index_bytes(IndexType::I32, &ids);
                    let kernel = ScatterKernel::compile(&sig).expect("compiles");
                    let expected = interpret_scatter(&layout, &d, &i, &u).expect("runs");
                    for threads in [1, 2] {
                        let got = out_of_place(&kernel, &d, &i, &u, threads).expect("runs");
                        if let Some(at) = first_difference(dtype, &got, &expected) {
                            panic!("{sig}, {threads} thread(s): element {at} differs");
                        }
                        let got = in_place(&kernel, &d, &i, &u, threads).expect("runs");
                        if let Some(at) = first_difference(dtype, &got, &expected) {
                            panic!("{sig} in place: element {at} differs");
                        }
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 150, "only {checked} signatures checked");
}

/// The promise: an in-place scatter whose indices are bad somewhere writes nothing,
/// however late the bad index comes and whatever the reduction.
#[test]
fn an_in_place_call_with_a_bad_index_leaves_data_byte_identical() {
    for reduction in [Reduction::None, Reduction::Sum, Reduction::Mean] {
        let sig = ScatterSignature::scatter_nd(&[64, 16], &[100, 1], &[100, 16])
            .with_flavor(ScatterFlavor::OpenvinoScatterNdUpdate15)
            .with_reduction(if reduction == Reduction::Mean {
                Reduction::Sum
            } else {
                reduction
            });
        let kernel = ScatterKernel::compile(&sig).expect("compiles");
        let data: Vec<f32> = (0..64 * 16).map(|v| v as f32).collect();
        let mut bytes = f32_bytes(&data);
        let before = bytes.clone();
        let mut ids: Vec<i64> = (0..100).map(|n| n % 64).collect();
        ids[99] = 64; // the last index is one past the end
        let error = kernel
            .run_bytes_in_place(
                &mut bytes,
                &index_bytes(IndexType::I64, &ids),
                &f32_bytes(&[7.0; 1600]),
            )
            .expect_err("index 64 is out of range");
        assert_eq!(
            error.to_string(),
            "ScatterND: index 64 at position [99, 0] of indices is out of range for data dim 0 of size 64"
        );
        assert!(bytes == before, "data changed");
        for threads in [2, 4] {
            let error = kernel.run_bytes_in_place_parallel(
                &mut bytes,
                &index_bytes(IndexType::I64, &ids),
                &f32_bytes(&[7.0; 1600]),
                threads,
            );
            assert!(error.is_err());
            assert!(bytes == before, "data changed ({threads} threads)");
        }
    }
    // A duplicate under TensorRT's flavor is found before anything is written too.
    let sig = ScatterSignature::scatter_nd(&[4, 2], &[3, 1], &[3, 2])
        .with_flavor(ScatterFlavor::TensorRt);
    let kernel = ScatterKernel::compile(&sig).expect("compiles");
    let mut data = f32_bytes(&[1.0; 8]);
    let before = data.clone();
    let error = kernel
        .run_bytes_in_place(
            &mut data,
            &index_bytes(IndexType::I64, &[0, 3, 0]),
            &f32_bytes(&[2.0; 6]),
        )
        .expect_err("a duplicate");
    assert!(
        error.to_string().contains("positions [0] and [2]"),
        "{error}"
    );
    assert!(data == before);
}

/// `run` and `run_in_place` on strided views: the interpreter's result on contiguous copies,
/// and the view's own elements changed in place, no others.
#[test]
fn ndarray_views_of_any_layout() {
    let sig = ScatterSignature::scatter_elements(&[3, 4], &[3, 2], &[3, 2], 1)
        .with_reduction(Reduction::Sum);
    let kernel = jit_scatter(&sig).expect("compiles");
    let base = Array::from_shape_fn((6, 4), |(r, c)| (r * 4 + c) as f32);
    let data = base.slice(s![..;2, ..]); // every other row: strided
    let indices = ndarray::array![[3i64, 3], [0, -1], [1, 2]];
    let updates_base = Array::from_shape_fn((2, 3), |(r, c)| (10 * r + c) as f32);
    let updates = updates_base.t(); // transposed: not C order
    let got = kernel.run(data, indices.view(), updates).expect("runs");
    let layout = sig.validate().expect("valid");
    let flat = |v: Vec<f32>| f32_bytes(&v);
    let expected = interpret_scatter(
        &layout,
        &flat(data.iter().copied().collect()),
        &index_bytes(IndexType::I64, &[3, 3, 0, -1, 1, 2]),
        &flat(updates.iter().copied().collect()),
    )
    .expect("runs");
    assert_eq!(flat(got.iter().copied().collect()), expected);

    let mut target = base.clone();
    kernel
        .run_in_place(target.slice_mut(s![..;2, ..]), indices.view(), updates)
        .expect("runs");
    let expected_elements = crate::util::f32_values(&expected);
    for ((r, c), &v) in target.indexed_iter() {
        let want = if r % 2 == 0 {
            expected_elements[r / 2 * 4 + c]
        } else {
            base[[r, c]]
        };
        assert_eq!(v.to_bits(), want.to_bits(), "element [{r}, {c}]");
    }
    // The wrong element type is an error, not a reinterpretation.
    let wrong: ArrayD<f64> = ArrayD::zeros(IxDyn(&[3, 4]));
    let error = kernel
        .run(
            wrong.view(),
            indices.view(),
            ndarray::Array2::<f64>::zeros((3, 2)).view(),
        )
        .expect_err("f64 is not f32");
    assert_eq!(error.category(), "type mismatch");
}

#[test]
fn the_cache_compiles_a_scatter_once() {
    let cache = KernelCache::new(4);
    let sig = ScatterSignature::scatter_nd(&[5, 3], &[2, 1], &[2, 3]);
    let a = cache.get_scatter(&sig).expect("compiles");
    let b = cache.get_scatter(&sig).expect("cached");
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.hits, stats.compilations), (1, 1, 1));
    let other = cache
        .with_scatter(&sig.clone().with_reduction(Reduction::Sum), |k| {
            k.signature().reduction
        })
        .expect("compiles");
    assert_eq!(other, Reduction::Sum);
    assert_eq!(cache.stats().entries, 2);
}

/// The branch-free scan of pass 1 (two vectors of i64 or i32 indices a trip, the rest one at a
/// time) at its bounds, for every index type: each edge value (in range or just out, and for
/// unsigned types the values that are negative as signed ones) at every position of 1 to 19
/// indices, wrapping or not. The interpreter decides the result or the error, and the call
/// with every other index 0 must agree with it bit for bit.
#[test]
fn the_index_scan_finds_every_edge_at_every_position() {
    let dim: i128 = 5;
    let mut checked = 0;
    for index_type in IndexType::ALL {
        let (min, max) = match index_type {
            IndexType::I8 => (i128::from(i8::MIN), i128::from(i8::MAX)),
            IndexType::U8 => (0, i128::from(u8::MAX)),
            IndexType::I16 => (i128::from(i16::MIN), i128::from(i16::MAX)),
            IndexType::U16 => (0, i128::from(u16::MAX)),
            IndexType::I32 => (i128::from(i32::MIN), i128::from(i32::MAX)),
            IndexType::U32 => (0, i128::from(u32::MAX)),
            IndexType::I64 => (i128::from(i64::MIN), i128::from(i64::MAX)),
            IndexType::U64 => (0, i128::from(u64::MAX)),
        };
        let edges: Vec<i128> = [
            -dim - 1,
            -dim,
            -1,
            dim - 1,
            dim,
            1 << 31,
            (1 << 32) - 1,
            1 << 63,
            min,
            max,
        ]
        .into_iter()
        .filter(|v| (min..=max).contains(v))
        .collect();
        for negative in [NegativeIndices::Wrap, NegativeIndices::Invalid] {
            for len in [1usize, 4, 7, 8, 9, 16, 19] {
                let signature = ScatterSignature::scatter_elements(&[5], &[len], &[len], 0)
                    .with_index_type(index_type)
                    .with_negative(negative)
                    .with_reduction(Reduction::Sum);
                let kernel = ScatterKernel::compile(&signature).expect("compiles");
                let layout = signature.validate().expect("valid");
                let data = f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0]);
                let updates = f32_bytes(&(0..len).map(|n| 10.0 * n as f32).collect::<Vec<_>>());
                for &edge in &edges {
                    for at in 0..len {
                        let mut indices = Vec::new();
                        for n in 0..len {
                            let value = if n == at { edge } else { 0 };
                            assert!(index_type.try_encode(value, &mut indices));
                        }
                        let expected = interpret_scatter(&layout, &data, &indices, &updates)
                            .map_err(|e| e.to_string());
                        let mut output = vec![0u8; data.len()];
                        let got = kernel
                            .run_bytes(&data, &indices, &updates, &mut output)
                            .map(|()| output)
                            .map_err(|e| e.to_string());
                        assert_eq!(got, expected, "{signature}: {edge} at {at} of {len}");
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 1000, "{checked}");
}
