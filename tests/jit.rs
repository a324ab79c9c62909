//! The JIT through its public API: conformance vectors, the safe ndarray API, raw calls split
//! into ranges, unaligned buffers, and the kernel cache under concurrency.

use std::sync::{Arc, Barrier};

use gather_jit::interp::interpret;
use gather_jit::{
    DType, Error, Flavor, IndexType, Kernel, KernelCache, Options, OutOfRange, Signature,
    jit_gather, jit_gather_elements, jit_gather_nd,
};
use ndarray::{Array, ArrayD, IxDyn, array, s};

use crate::conformance;
use crate::util::index_bytes;

#[test]
fn every_conformance_case_passes_the_jit() {
    let runner = |validated: &gather_jit::ir::Validated, data: &[u8], indices: &[u8]| {
        let kernel = Kernel::compile(validated.signature())?;
        let mut output = vec![0u8; validated.output_len() * validated.signature().dtype.size()];
        kernel.run_bytes(data, indices, &mut output)?;
        Ok(output)
    };
    let count = conformance::run_all(&runner);
    println!("conformance through the JIT: {count} cases passed");
    assert_eq!(count, conformance::case_files().len());
    assert!(count >= 15, "only {count} conformance cases found");
}

/// A one-line naive oracle for Gather axis 0 on a 2-D array.
fn take_rows(data: &ArrayD<f32>, rows: &[i64]) -> Vec<f32> {
    rows.iter()
        .flat_map(|&r| data.slice(s![r as usize, ..]).to_vec())
        .collect()
}

#[test]
fn run_accepts_non_contiguous_views() {
    let base = Array::from_shape_fn((6, 8), |(i, j)| (i * 10 + j) as f32).into_dyn();
    // Every other column, transposed: strides that are neither C nor F order over `base`.
    let strided = base.slice(s![.., ..;2]).reversed_axes();
    let view = strided.as_standard_layout().to_owned(); // the oracle's copy
    let kernel = jit_gather(&[4, 6], &[3], 0, 0, &Options::default()).expect("kernel");
    assert!(!strided.is_standard_layout());
    let indices = array![3i64, 0, -1];
    let out = kernel.run(strided, indices.view()).expect("runs");
    assert_eq!(out.shape(), &[3, 6]);
    let expected = take_rows(&view.into_dyn(), &[3, 0, 3]);
    assert_eq!(out.iter().copied().collect::<Vec<_>>(), expected);

    // Non-contiguous indices too.
    let wide = array![[1i64, 9], [2, 9], [0, 9]];
    let out = kernel
        .run(base.slice(s![1..5, 1..7]), wide.slice(s![.., 0]))
        .expect("runs");
    let contiguous = base.slice(s![1..5, 1..7]).to_owned().into_dyn();
    assert_eq!(
        out.iter().copied().collect::<Vec<_>>(),
        take_rows(&contiguous, &[1, 2, 0])
    );
}

#[test]
fn run_rejects_wrong_types_and_shapes() {
    let kernel = jit_gather_nd(&[2, 2], &[2, 1], 0, &Options::default()).expect("kernel");
    let data = array![[1.0f32, 2.0], [3.0, 4.0]];
    let data_f64 = array![[1.0f64, 2.0], [3.0, 4.0]];
    let idx = array![[1i64], [0]];
    let idx_i32 = array![[1i32], [0]];
    let err = kernel.run(data_f64.view(), idx.view()).unwrap_err();
    assert!(matches!(
        err,
        Error::DTypeMismatch {
            expected: DType::F32,
            actual: DType::F64,
            ..
        }
    ));
    let err = kernel.run(data.view(), idx_i32.view()).unwrap_err();
    assert!(matches!(err, Error::IndexTypeMismatch { .. }));
    let err = kernel.run(data.t(), array![[1i64, 0]].view()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::BufferMismatch {
                what: "indices",
                ..
            }
        ),
        "{err}"
    );
    let mut short = vec![0u8; 7];
    let err = kernel
        .run_bytes(&[0u8; 16], &[0u8; 16], &mut short)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("output: expected 16 bytes, got 7 bytes"),
        "{err}"
    );
}

#[test]
fn typed_run_covers_half_and_bool() {
    let options = Options {
        dtype: DType::F16,
        index_type: IndexType::U8,
        ..Options::default()
    };
    let kernel = jit_gather_elements(&[2, 3], &[2, 3], 1, &options).expect("kernel");
    let data = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]].mapv(half::f16::from_f32);
    let idx = array![[2u8, 1, 0], [0, 0, 2]];
    let out = kernel.run(data.view(), idx.view()).expect("runs");
    let out: Vec<f32> = out.iter().map(|v| v.to_f32()).collect();
    assert_eq!(out, vec![3.0, 2.0, 1.0, 4.0, 4.0, 6.0]);

    let options = Options {
        dtype: DType::Bool,
        ..Options::default()
    };
    let kernel = jit_gather(&[4], &[3], 0, 0, &options).expect("kernel");
    let out = kernel
        .run(
            array![true, false, false, true].view(),
            array![3i64, 1, 0].view(),
        )
        .expect("runs");
    assert_eq!(
        out.iter().copied().collect::<Vec<_>>(),
        vec![true, false, true]
    );
}

/// Splitting the outer loop into ranges gives the same bytes as one call.
#[test]
fn call_range_pieces_equal_one_call() {
    let sig =
        Signature::gather(&[6, 12, 10, 24], &[5, 4], 1, 0).with_flavor(Flavor::OpenvinoGather8);
    let validated = sig.validate().expect("valid");
    let kernel = Kernel::compile(&sig).expect("kernel");
    let data: Vec<u8> = (0..validated.data_len() * 4)
        .map(|i| (i % 251) as u8)
        .collect();
    let indices: Vec<u8> = (0..20i64)
        .flat_map(|i| ((i * 7) % 12 - 3).to_ne_bytes())
        .collect();
    let expected = interpret(&validated, &data, &indices).expect("interpreter");
    let extent = kernel.outer_extent();
    assert!(extent > 1, "the plan has a splittable outer loop");
    let mut output = vec![0u8; expected.len()];
    for start in (0..extent).step_by(2) {
        let end = (start + 2).min(extent);
        // SAFETY: buffers sized by the signature, disjoint, ranges within the outer extent.
        unsafe {
            kernel
                .call_range(
                    data.as_ptr(),
                    indices.as_ptr(),
                    output.as_mut_ptr(),
                    start..end,
                )
                .expect("in range");
        }
    }
    assert_eq!(output, expected);
    // SAFETY: the range check fails before any pointer is used.
    let err = unsafe {
        kernel.call_range(
            data.as_ptr(),
            indices.as_ptr(),
            output.as_mut_ptr(),
            0..extent + 1,
        )
    };
    assert!(matches!(
        err,
        Err(Error::BufferMismatch { what: "range", .. })
    ));
}

/// The generated code assumes no alignment: every buffer starts at an odd address here.
#[test]
fn unaligned_buffers_work() {
    for (sig, dtype) in [
        (Signature::gather_nd(&[10, 7, 3], &[4, 2], 0), DType::F64),
        (
            Signature::gather_elements(&[9, 33], &[9, 33], 1),
            DType::I32,
        ),
        (Signature::gather(&[300, 40], &[5], 0, 0), DType::U16),
    ] {
        let sig = sig.with_dtype(dtype).with_index_type(IndexType::I32);
        let validated = sig.validate().expect("valid");
        let kernel = Kernel::compile(&sig).expect("kernel");
        let data_len = validated.data_len() * dtype.size();
        let mut data = vec![0u8; data_len + 1];
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i * 13 % 256) as u8;
        }
        let mut indices = vec![0u8; validated.indices_len() * 4 + 1];
        for k in 0..validated.indices_len() {
            indices[1 + 4 * k..5 + 4 * k].copy_from_slice(&((k % 3) as i32).to_ne_bytes());
        }
        let mut output = vec![0u8; validated.output_len() * dtype.size() + 1];
        kernel
            .run_bytes(&data[1..], &indices[1..], &mut output[1..])
            .expect("runs");
        let expected = interpret(&validated, &data[1..], &indices[1..]).expect("interpreter");
        assert_eq!(&output[1..], &expected[..], "{sig}");
    }
}

/// Slices too large to inline go through the kernels' own copy helper (128-byte chunks, the
/// last one overlapping, the next slice prefetched as it goes): row lengths around the chunk
/// size, data and output out of step by every small offset, exactly the output written.
#[test]
fn large_slices_copy_exactly_at_any_alignment() {
    for row_bytes in [516usize, 1000, 3072, 4100] {
        let rows = 7;
        let sig = Signature::gather(&[rows, row_bytes], &[9], 0, 0).with_dtype(DType::U8);
        let validated = sig.validate().expect("valid");
        let kernel = Kernel::compile(&sig).expect("kernel");
        let data: Vec<u8> = (0..rows * row_bytes + 64)
            .map(|i| (i % 239) as u8)
            .collect();
        let picked: Vec<i64> = vec![3, 0, 6, 6, -1, 2, 5, 1, 4];
        let idx = index_bytes(IndexType::I64, &picked);
        for (data_at, output_at) in [(0, 0), (16, 0), (0, 16), (1, 3), (48, 7)] {
            let data = &data[data_at..data_at + rows * row_bytes];
            let expected = interpret(&validated, data, &idx).expect("interpreter");
            let mut buffer = vec![0xEEu8; output_at + expected.len() + 200];
            let output = &mut buffer[output_at..output_at + expected.len()];
            kernel.run_bytes(data, &idx, output).expect("runs");
            let case = format!("{row_bytes}-byte rows, data +{data_at}, output +{output_at}");
            assert!(
                buffer[output_at..output_at + expected.len()] == expected[..],
                "{case}"
            );
            assert!(
                buffer[..output_at].iter().all(|&b| b == 0xEE),
                "before: {case}"
            );
            let after = &buffer[output_at + expected.len()..];
            assert!(after.iter().all(|&b| b == 0xEE), "after: {case}");
        }
    }
}

#[test]
fn index_error_names_position_and_value_and_stops() {
    let sig = Signature::gather_nd(&[3, 4], &[3, 2], 0);
    let kernel = Kernel::compile(&sig).expect("kernel");
    let data = vec![0x11u8; 48];
    let idx = index_bytes(IndexType::I64, &[0, 1, 2, 3, 1, -5]);
    let mut output = vec![0u8; 12];
    let err = kernel.run_bytes(&data, &idx, &mut output).unwrap_err();
    assert!(
        matches!(
            &err,
            Error::IndexOutOfRange {
                op: gather_jit::ir::OpName::GatherNd,
                position,
                value: -5,
                data_dim: 1,
                dim_size: 4,
                ..
            } if position == &[2, 1]
        ),
        "{err:?}"
    );
    // Slices before the bad tuple were written; the bad tuple's slice was not.
    assert_eq!(&output[..8], &[0x11; 8]);
    assert_eq!(&output[8..], &[0; 4]);
}

#[test]
fn cache_compiles_each_signature_once_across_threads() {
    let cache = Arc::new(KernelCache::new(64));
    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let cache = Arc::clone(&cache);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                for round in 0..20 {
                    let rows = 2 + (round + t) % 4;
                    let sig = Signature::gather(&[rows, 3], &[2], 0, 0);
                    let kernel = cache.get(&sig).expect("kernel");
                    let data: Vec<f32> = (0..rows * 3).map(|v| v as f32).collect();
                    let data = Array::from_shape_vec(IxDyn(&[rows, 3]), data).expect("shape");
                    let out = kernel
                        .run(data.view(), array![1i64, 0].view())
                        .expect("runs");
                    assert_eq!(
                        out.iter().copied().collect::<Vec<_>>(),
                        vec![3., 4., 5., 0., 1., 2.]
                    );
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread");
    }
    let stats = cache.stats();
    assert_eq!(stats.compilations, 4, "{stats:?}");
    assert_eq!(stats.misses, 4, "{stats:?}");
    assert_eq!(stats.hits, 8 * 20 - 4, "{stats:?}");
}

#[test]
fn cache_evicts_least_recently_used_and_held_kernels_stay_valid() {
    let cache = KernelCache::new(2);
    let sig = |n: usize| Signature::gather(&[n, 2], &[1], 0, 0);
    let first = cache.get(&sig(2)).expect("kernel");
    cache.get(&sig(3)).expect("kernel");
    cache.get(&sig(2)).expect("hit refreshes 2");
    cache.get(&sig(4)).expect("kernel evicts 3");
    let stats = cache.stats();
    assert_eq!((stats.entries, stats.evictions), (2, 1));
    cache.get(&sig(2)).expect("still cached");
    assert_eq!(cache.stats().compilations, 3);
    cache.get(&sig(3)).expect("recompiled");
    assert_eq!(cache.stats().compilations, 4);
    cache.clear();
    // `first` was evicted from the cache but is still callable.
    let out = first
        .run(
            array![[1.0f32, 2.0], [3.0, 4.0]].view(),
            array![1i64].view(),
        )
        .expect("runs");
    assert_eq!(out.iter().copied().collect::<Vec<_>>(), vec![3.0, 4.0]);
}

/// Hits are answered from a per-thread view of the cache: it must not keep evicted or cleared
/// kernels alive (every thread's view lets go at the eviction, idle or not), and hits through
/// it still refresh the LRU order and are counted.
#[test]
fn cache_thread_views_release_evicted_kernels_and_count_hits() {
    let cache = Arc::new(KernelCache::new(2));
    let sig = |n: usize| Signature::gather(&[n, 2], &[1], 0, 0);
    let held = cache.get(&sig(2)).expect("kernel");
    for _ in 0..5 {
        cache.get(&sig(2)).expect("hit");
    }
    assert_eq!(cache.stats().hits, 5);
    // The map and this thread's view hold it besides `held`.
    assert_eq!(Arc::strong_count(&held), 3);
    cache.clear();
    assert_eq!(
        Arc::strong_count(&held),
        1,
        "clear releases this thread's view"
    );

    // Another thread's view: released at the eviction, while that thread waits.
    let held = cache.get(&sig(2)).expect("kernel");
    let (ask, asked) = std::sync::mpsc::channel::<usize>();
    let (answer, answered) = std::sync::mpsc::channel::<()>();
    let worker = {
        let cache = Arc::clone(&cache);
        std::thread::spawn(move || {
            for n in asked {
                cache.get(&sig(n)).expect("kernel");
                answer.send(()).expect("main waits");
            }
        })
    };
    let request = |n: usize| {
        ask.send(n).expect("worker runs");
        answered.recv().expect("worker answers");
    };
    request(2);
    assert_eq!(Arc::strong_count(&held), 4, "map, two views, `held`");
    // 3 and 4 evict 2 (its last use, the worker's request, is older than 3's miss).
    cache.get(&sig(3)).expect("kernel");
    cache.get(&sig(4)).expect("kernel");
    assert_eq!(cache.stats().evictions, 1);
    assert_eq!(
        Arc::strong_count(&held),
        1,
        "both views (the waiting worker's too) went at the eviction"
    );
    // Without the generation check the worker's view would answer with the evicted kernel.
    let misses = cache.stats().misses;
    request(2);
    assert_eq!(Arc::strong_count(&held), 1, "the worker got a new kernel");
    assert_eq!(cache.stats().misses, misses + 1, "2 was built afresh");
    drop(ask);
    worker.join().expect("worker");

    // A hit through the view refreshes the LRU order: 3 and 4 miss (4 later), then 3 hits
    // through this thread's view, so 5 evicts 4.
    cache.clear();
    cache.get(&sig(3)).expect("kernel");
    cache.get(&sig(4)).expect("kernel");
    cache.get(&sig(3)).expect("hit through the view");
    let compiled = cache.stats().compilations;
    cache.get(&sig(5)).expect("kernel");
    cache.get(&sig(3)).expect("still cached");
    assert_eq!(
        cache.stats().compilations,
        compiled + 1,
        "3 was not evicted"
    );
    cache.get(&sig(4)).expect("recompiled");
    assert_eq!(cache.stats().compilations, compiled + 2, "4 was evicted");
}

/// A thread's view of a dropped cache keeps no kernel alive, whether or not the thread uses
/// another cache afterwards (see also `soundness::a_dropped_cache_*`).
#[test]
fn dropped_caches_leave_no_kernels_behind_in_thread_views() {
    let first = KernelCache::new(4);
    let sig = Signature::gather(&[3, 2], &[1], 0, 0);
    let held = first.get(&sig).expect("kernel");
    assert_eq!(Arc::strong_count(&held), 3, "held, in the map, in the view");
    drop(first);
    assert_eq!(
        Arc::strong_count(&held),
        1,
        "this thread's view of the dropped cache was emptied"
    );
    let second = KernelCache::new(4);
    second.get(&sig).expect("kernel");
    assert_eq!(Arc::strong_count(&held), 1, "a new cache compiles its own");
}

#[test]
fn with_lends_the_cached_kernel_without_cloning_it() {
    let cache = KernelCache::new(4);
    let sig = Signature::gather(&[3, 2], &[2], 0, 0);
    let data = array![[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]].into_dyn();
    let rows = array![2i64, 0].into_dyn();
    let gathered = |kernel: &Kernel| {
        let out: ArrayD<f32> = kernel.run(data.view(), rows.view()).expect("runs");
        out.iter().copied().collect::<Vec<f32>>()
    };
    // First use compiles.
    let first = cache.with(&sig, |kernel| {
        assert_eq!(kernel.signature(), &sig);
        gathered(kernel)
    });
    assert_eq!(first.expect("compiles"), take_rows(&data, &[2, 0]));
    assert_eq!((cache.stats().misses, cache.stats().compilations), (1, 1));

    // Hits lend the very kernel `get` returns, without a reference of their own.
    let held = cache.get(&sig).expect("kernel");
    let count = Arc::strong_count(&held);
    for _ in 0..3 {
        let lent = cache.with(&sig, |kernel| {
            (std::ptr::eq(kernel, &*held), Arc::strong_count(&held))
        });
        assert_eq!(lent.expect("hit"), (true, count));
    }
    assert_eq!(cache.stats().hits, 4);
    assert_eq!(cache.stats().compilations, 1);

    // The cache still answers from inside the closure (by its locked path).
    let other = Signature::gather(&[4, 2], &[1], 0, 0);
    let nested = cache.with(&sig, |_| {
        let inner = cache.with(&other, |kernel| kernel.signature().clone());
        let again = cache.get(&sig).map(|kernel| Arc::ptr_eq(&kernel, &held));
        (inner.expect("compiles"), again.expect("hit"))
    });
    assert_eq!(nested.expect("hit"), (other.clone(), true));

    // After a clear the old kernel is not lent again.
    cache.clear();
    let fresh = cache.with(&sig, |kernel| std::ptr::eq(kernel, &*held));
    assert!(!fresh.expect("compiles"), "the cleared kernel was lent");

    // Errors: the closure is not called.
    let invalid = Signature::gather(&[3, 2], &[2], 5, 0);
    let mut called = false;
    assert!(matches!(
        cache.with(&invalid, |_| called = true),
        Err(Error::AxisOutOfRange { axis: 5, .. })
    ));
    assert!(!called);
}

/// Requests that alternate between signatures differing in one field each get their own
/// kernel from the thread's view (which answers a repeat of its latest signature by one
/// comparison) and are counted as hits.
#[test]
fn alternating_signatures_each_get_their_own_kernel_from_the_view() {
    let cache = KernelCache::new(9);
    let base = Signature::gather(&[5, 3], &[2], 0, 0);
    let signatures = [
        base.clone(),
        Signature::gather(&[5, 4], &[2], 0, 0),
        Signature::gather(&[5, 3], &[3], 0, 0),
        Signature {
            dtype: DType::I32,
            ..base.clone()
        },
        Signature {
            index_type: IndexType::I32,
            ..base.clone()
        },
        Signature::gather(&[5, 3], &[2], 1, 0),
        Signature {
            policy: gather_jit::IndexPolicy {
                out_of_range: OutOfRange::Zero,
                ..base.policy
            },
            ..base.clone()
        },
        Signature {
            flavor: Flavor::OpenvinoGather8,
            ..base.clone()
        },
        base.clone()
            .with_output_memory(gather_jit::OutputMemory::Fresh),
    ];
    let compiled: Vec<Arc<Kernel>> = (signatures.iter())
        .map(|sig| cache.get(sig).expect("compiles"))
        .collect();
    // Repeats, switches, and runs of each signature after another.
    let requests = [
        0, 0, 1, 0, 2, 2, 3, 4, 5, 0, 5, 5, 1, 6, 6, 7, 7, 0, 7, 8, 0, 8,
    ];
    for &i in &requests {
        // The very kernel compiled for it (not one that `Signature::eq` calls the same).
        let kernel = cache.get(&signatures[i]).expect("hit");
        assert!(Arc::ptr_eq(&kernel, &compiled[i]), "request for {i}");
        let lent = cache.with(&signatures[i], |kernel| std::ptr::eq(kernel, &*compiled[i]));
        assert!(lent.expect("hit"), "lent for {i}");
    }
    let stats = cache.stats();
    assert_eq!(
        (stats.hits, stats.misses),
        (2 * requests.len() as u64, signatures.len() as u64)
    );
}

/// `with` lends from this thread's view only while nothing has left the cache since: a kernel
/// evicted by another thread is never lent, and the view holding it goes at this request.
#[test]
fn with_never_lends_a_kernel_evicted_by_another_thread() {
    let cache = KernelCache::new(1);
    let sig = |n: usize| Signature::gather(&[n, 2], &[1], 0, 0);
    let held = cache.get(&sig(2)).expect("kernel");
    let lent = cache.with(&sig(2), |kernel| std::ptr::eq(kernel, &*held));
    assert!(lent.expect("hit"), "lent from this thread's view");
    std::thread::scope(|s| {
        s.spawn(|| cache.get(&sig(3)).expect("kernel evicts 2"));
    });
    assert_eq!(cache.stats().evictions, 1);
    assert_eq!(
        Arc::strong_count(&held),
        1,
        "this thread's view went at the other thread's eviction"
    );
    let lent = cache.with(&sig(2), |kernel| std::ptr::eq(kernel, &*held));
    assert!(!lent.expect("compiles"), "the evicted kernel was lent");
    assert_eq!(Arc::strong_count(&held), 1, "`held` alone");
    // Built again on the machine code that `held` keeps alive.
    let stats = cache.stats();
    assert_eq!(
        (stats.misses, stats.compilations, stats.shared_code),
        (3, 2, 1)
    );
}

/// A panic in `with`'s closure leaves the thread's view usable: later hits are still lent from
/// it (no `Arc` clone) and counted.
#[test]
fn with_survives_a_panicking_closure() {
    let cache = KernelCache::new(4);
    let sig = Signature::gather(&[3, 2], &[2], 0, 0);
    let held = cache.get(&sig).expect("kernel");
    let count = Arc::strong_count(&held);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cache.with(&sig, |_| panic!("a panicking closure"))
    }));
    assert!(caught.is_err());
    let lent = cache.with(&sig, |kernel| {
        (std::ptr::eq(kernel, &*held), Arc::strong_count(&held))
    });
    assert_eq!(
        lent.expect("hit"),
        (true, count),
        "lent from the view again"
    );
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses, stats.compilations), (2, 1, 1));
}

#[test]
fn invalid_signatures_do_not_enter_the_cache() {
    let cache = KernelCache::new(8);
    let err = cache
        .get(&Signature::gather_nd(&[2, 2], &[2, 3], 0))
        .unwrap_err();
    assert!(matches!(
        err,
        Error::IndexDepthOutOfRange {
            depth: 3,
            max: 2,
            ..
        }
    ));
    assert_eq!(cache.stats().entries, 0);
}

#[test]
fn out_of_range_policies_through_the_public_api() {
    let data = array![[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]];
    let idx = array![2i64, 3, -1, -4];
    let zero = Options {
        policy: Some(gather_jit::IndexPolicy {
            negative: gather_jit::NegativeIndices::Wrap,
            out_of_range: OutOfRange::Zero,
        }),
        ..Options::default()
    };
    let out = jit_gather(&[3, 2], &[4], 0, 0, &zero)
        .expect("kernel")
        .run(data.view(), idx.view())
        .expect("runs");
    assert_eq!(
        out.iter().copied().collect::<Vec<_>>(),
        vec![5.0, 6.0, 0.0, 0.0, 5.0, 6.0, 0.0, 0.0]
    );
    let clamp = Options {
        policy: Some(gather_jit::IndexPolicy {
            negative: gather_jit::NegativeIndices::Invalid,
            out_of_range: OutOfRange::Clamp,
        }),
        ..Options::default()
    };
    let out = jit_gather(&[3, 2], &[4], 0, 0, &clamp)
        .expect("kernel")
        .run(data.view(), idx.view())
        .expect("runs");
    assert_eq!(
        out.iter().copied().collect::<Vec<_>>(),
        vec![5.0, 6.0, 5.0, 6.0, 1.0, 2.0, 1.0, 2.0]
    );
}

/// Indices into dims of one power-of-two size share one check on the fast path (their bitwise
/// or against the size), across a whole vector of packed elements or a whole unrolled trip: a
/// tuple with either index negative, at the size or far beyond it must still reach the policy,
/// in every lookup of a trip, for every index type.
#[test]
fn shared_power_of_two_checks_send_every_bad_tuple_to_the_policy() {
    let good = [(1, 2), (7, 7), (0, 0), (3, 5)];
    let bad = [
        (8, 1),
        (1, 8),
        (-1, 3),
        (2, -8),
        (9, 9),
        (1 << 40, 0),
        (-8, -1),
        (0, 15),
    ];
    // Elements (packed 4 to a vector, 8 per trip) and 64-byte slices (4 per trip).
    for (data_shape, trip) in [(vec![8, 8], 8), (vec![8, 8, 16], 4)] {
        let slice: usize = data_shape[2..].iter().product();
        let data: Vec<u8> = (0..64 * slice * 4).map(|i| (i * 13 % 251) as u8).collect();
        for index_type in IndexType::ALL {
            for (j, &(row, col)) in bad.iter().enumerate() {
                let lane = j % trip;
                let fits = |v: i64| index_type.try_encode(v.into(), &mut Vec::new());
                if !fits(row) || !fits(col) {
                    continue;
                }
                // Two trips; the bad tuple in lookup `lane` of the second.
                let mut tuples: Vec<i64> = (0..2 * trip)
                    .flat_map(|k| {
                        let (r, c) = good[k % good.len()];
                        [r, c]
                    })
                    .collect();
                tuples[2 * (trip + lane)] = row;
                tuples[2 * (trip + lane) + 1] = col;
                let indices = index_bytes(index_type, &tuples);
                for out_of_range in [OutOfRange::Error, OutOfRange::Zero, OutOfRange::Clamp] {
                    let signature = Signature::gather_nd(&data_shape, &[2 * trip, 2], 0)
                        .with_index_type(index_type)
                        .with_out_of_range(out_of_range);
                    let kernel = Kernel::compile(&signature).expect("compiles");
                    let lookup = format!("tuple ({row}, {col}) in lookup {lane}");
                    assert_matches_interpreter(&kernel, &data, &indices, &lookup);
                }
            }
        }
    }
}

/// Slices of every copy tier (scalar, unrolled vectors, memcpy) and zero-fill tier.
#[test]
fn every_copy_tier_matches_the_interpreter() {
    for inner in [1usize, 3, 4, 5, 8, 15, 16, 17, 64, 100, 128, 129, 200, 1000] {
        for oob in [OutOfRange::Error, OutOfRange::Zero] {
            let sig = Signature::gather(&[5, inner], &[7], 0, 0)
                .with_dtype(DType::U8)
                .with_out_of_range(oob);
            let validated = sig.validate().expect("valid");
            let data: Vec<u8> = (0..5 * inner).map(|i| (i * 7 % 253) as u8 + 1).collect();
            let raw: [i64; 7] = if oob == OutOfRange::Zero {
                [4, 0, 9, -1, 2, -6, 3]
            } else {
                [4, 0, 1, -1, 2, -5, 3]
            };
            let idx = index_bytes(IndexType::I64, &raw);
            let expected = interpret(&validated, &data, &idx).expect("interpreter");
            let mut out = vec![0xEEu8; expected.len()];
            Kernel::compile(&sig)
                .expect("kernel")
                .run_bytes(&data, &idx, &mut out)
                .expect("runs");
            assert_eq!(out, expected, "inner {inner}, {oob:?}");
        }
    }
}

/// The machine code can be read back (for disassembly) while the kernel lives.
#[test]
fn machine_code_is_the_whole_function() {
    let kernel = Kernel::compile(&Signature::gather(&[16, 16], &[4], 0, 0)).expect("kernel");
    let code = kernel.machine_code();
    assert_eq!(code.len(), kernel.code_bytes());
    if cfg!(target_arch = "x86_64") {
        assert_eq!(
            code[0], 0x55,
            "Cranelift's x86-64 prologue starts with push %rbp"
        );
        assert!(code.contains(&0xC3), "a ret somewhere");
    }
}

/// Slices copied by `memcpy` prefetch the next lookup's slice: the next tuple is read ahead,
/// clamped, and at a range's end replaced by the current one. Bad, negative and extreme
/// indices, and every split of the loop into two ranges, must still give the interpreter's
/// bytes.
#[test]
fn prefetching_copies_match_the_interpreter_at_every_split() {
    let rows = 4usize;
    let sig = Signature::gather(&[rows, 150], &[9], 0, 0).with_out_of_range(OutOfRange::Zero);
    let validated = sig.validate().expect("valid");
    let kernel = Kernel::compile(&sig).expect("kernel");
    let data: Vec<u8> = (0..validated.data_len() * 4)
        .map(|i| (i % 249) as u8 + 1)
        .collect();
    let raw = [3i64, -1, i64::MAX, 0, -4, 7, i64::MIN, 2, -5];
    let indices = index_bytes(IndexType::I64, &raw);
    let expected = interpret(&validated, &data, &indices).expect("interpreter");
    let extent = kernel.outer_extent();
    assert_eq!(extent, 9, "{}", kernel.plan());
    for split in 0..=extent {
        let mut output = vec![0xEEu8; expected.len()];
        for range in [0..split, split..extent] {
            // SAFETY: buffers sized by the signature, disjoint, ranges within the outer extent.
            unsafe {
                kernel
                    .call_range(data.as_ptr(), indices.as_ptr(), output.as_mut_ptr(), range)
                    .expect("Zero policy never rejects");
            }
        }
        assert_eq!(output, expected, "split at {split}");
    }
}

/// Outputs larger than the cache are written with streaming stores; the bytes must not change,
/// whatever the destination's alignment.
#[test]
fn streaming_copies_match_plain_row_copies() {
    let (rows, row_len, picks) = (5usize, 1000usize, 8400usize); // 8400 * 4000 B = 33.6 MB
    let sig = Signature::gather(&[rows, row_len], &[picks], 0, 0);
    let kernel = Kernel::compile(&sig).expect("kernel");
    assert!(kernel.plan().lookup.streaming, "{}", kernel.plan());
    let data: Vec<u8> = (0..rows * row_len * 4).map(|i| (i % 241) as u8).collect();
    let picked: Vec<i64> = (0..picks as i64)
        .map(|i| (i * 3 + i / 7) % rows as i64)
        .collect();
    let idx = index_bytes(IndexType::I64, &picked);
    let row_bytes = row_len * 4;
    let mut buffer = vec![0u8; picks * row_bytes + 1];
    for misalign in [0usize, 1] {
        let output = &mut buffer[misalign..misalign + picks * row_bytes];
        kernel.run_bytes(&data, &idx, output).expect("runs");
        for (k, &row) in picked.iter().enumerate() {
            let row = row as usize;
            assert!(
                output[k * row_bytes..(k + 1) * row_bytes]
                    == data[row * row_bytes..(row + 1) * row_bytes],
                "row {k} (misalign {misalign})"
            );
        }
    }
}

/// Streamed slices of an unrolled trip: 512-byte rows, two lookups per trip, each lookup's
/// row at its own displacement from the trip's data pointer, handed to the streaming copy as
/// a pointer (32 MiB of output: streamed on any host).
#[test]
fn streamed_slices_of_an_unrolled_trip_come_from_their_own_rows() {
    let (batches, rows, row_len) = (65_536usize, 2usize, 128usize);
    let sig = Signature::gather_nd(&[batches, rows, row_len], &[batches, 1], 1);
    let kernel = Kernel::compile(&sig).expect("kernel");
    assert!(kernel.plan().lookup.streaming, "{}", kernel.plan());
    let row_bytes = row_len * 4;
    let data: Vec<u8> = (0..batches * rows * row_bytes)
        .map(|i| (i % 251) as u8)
        .collect();
    let picked: Vec<i64> = (0..batches as i64).map(|b| (b * 7 + b / 3) % 2).collect();
    let idx = index_bytes(IndexType::I64, &picked);
    let mut output = vec![0u8; batches * row_bytes];
    kernel.run_bytes(&data, &idx, &mut output).expect("runs");
    for (b, &row) in picked.iter().enumerate() {
        let from = (b * rows + row as usize) * row_bytes;
        assert!(
            output[b * row_bytes..(b + 1) * row_bytes] == data[from..from + row_bytes],
            "batch {b}"
        );
    }
}

/// `Signature`'s hand-written `PartialEq` and `Hash` (cheaper for cache hits than derived):
/// a difference in any one field, or a dim moved from one shape to the other, makes a
/// different key; equal signatures hash alike.
#[test]
fn signatures_differing_in_any_field_are_different_cache_keys() {
    use std::collections::HashSet;
    use std::hash::BuildHasher;
    let base = Signature::gather(&[4, 3], &[2], 0, 0);
    let variants = [
        base.clone(),
        Signature::gather(&[4, 3], &[2], 1, 0),
        Signature::gather(&[4, 3], &[2], 0, -1),
        Signature::gather_elements(&[4, 3], &[2], 0),
        Signature::gather_nd(&[4, 3], &[2], 0),
        base.clone().with_flavor(Flavor::OpenvinoGather8),
        base.clone().with_out_of_range(OutOfRange::Zero),
        base.clone().with_dtype(DType::F64),
        base.clone().with_index_type(IndexType::I32),
        Signature::gather(&[4, 4], &[2], 0, 0),
        Signature::gather(&[4, 3, 1], &[2], 0, 0),
        Signature::gather(&[4], &[3, 2], 0, 0),
        Signature::gather(&[4, 3, 2], &[], 0, 0),
    ];
    for (i, a) in variants.iter().enumerate() {
        for (j, b) in variants.iter().enumerate() {
            assert_eq!(a == b, i == j, "{a} vs {b}");
        }
    }
    let state = std::hash::RandomState::new();
    assert_eq!(state.hash_one(&base), state.hash_one(base.clone()));
    let hashes: HashSet<u64> = variants.iter().map(|s| state.hash_one(s)).collect();
    assert_eq!(hashes.len(), variants.len(), "no collisions among these");

    // The hash folds a signature into one word first: a dim that varies (a dynamic batch or
    // sequence length), in any position, or two dims trading places, must not collide there.
    let rank4 = |dims: [usize; 4]| Signature::gather(&dims, &[7, 5], 1, 0);
    for position in 0..4 {
        let hashes: HashSet<u64> = (0..4096)
            .map(|n| {
                let mut dims = [6, 12, 10, 24];
                dims[position] = n;
                state.hash_one(rank4(dims))
            })
            .collect();
        assert_eq!(hashes.len(), 4096, "dim {position} varying");
    }
    let swapped = [
        [6, 12, 10, 24],
        [12, 6, 10, 24],
        [6, 12, 24, 10],
        [24, 12, 10, 6],
    ];
    let hashes: HashSet<u64> = swapped.map(|dims| state.hash_one(rank4(dims))).into();
    assert_eq!(hashes.len(), swapped.len(), "dims trading places");
}

/// The hash the cache's map really uses (Fx over the folded signature) tells apart signatures
/// that differ only in the indices' dims, or by dims moving within or between the two shapes,
/// and spreads a dynamic batch x sequence grid over a table's buckets like a random hash.
#[test]
fn signature_hashes_separate_indices_dims_permutations_and_dynamic_grids() {
    use std::collections::HashSet;
    use std::hash::BuildHasher;
    let state = rustc_hash::FxBuildHasher;
    let split = |dims: [usize; 6]| Signature::gather(&dims[..4], &dims[4..], 1, 0);

    // Every ordering of six distinct dims over data (rank 4) and indices (rank 2).
    let dims = [6, 12, 10, 24, 7, 5];
    let mut orders = Vec::new();
    for code in 0..6usize.pow(6) {
        let picks: [usize; 6] = std::array::from_fn(|i| code / 6usize.pow(i as u32) % 6);
        if (0..6).all(|i| !picks[..i].contains(&picks[i])) {
            orders.push(picks.map(|p| dims[p]));
        }
    }
    assert_eq!(orders.len(), 720);
    let hashes: HashSet<u64> = orders.iter().map(|&d| state.hash_one(split(d))).collect();
    assert_eq!(hashes.len(), orders.len(), "dims trading places");

    // One indices dim varying.
    for position in 4..6 {
        let hashes: HashSet<u64> = (0..4096)
            .map(|n| {
                let mut varied = dims;
                varied[position] = n;
                state.hash_one(split(varied))
            })
            .collect();
        assert_eq!(hashes.len(), 4096, "indices dim {} varying", position - 4);
    }

    // An embedding lookup with dynamic batch and sequence: no two collide, and the low bits
    // (hashbrown's bucket index) fill a 2^16-bucket table as a random hash would (25,787
    // buckets expected for 32,768 keys; a hash with constant low bits fills one).
    let grid: Vec<u64> = (1..=64)
        .flat_map(|batch| (1..=512).map(move |seq| (batch, seq)))
        .map(|(batch, seq)| state.hash_one(Signature::gather(&[32000, 768], &[batch, seq], 0, 0)))
        .collect();
    assert_eq!(grid.iter().collect::<HashSet<_>>().len(), grid.len());
    let buckets: HashSet<u64> = grid.iter().map(|h| h & 0xffff).collect();
    assert!(buckets.len() > 24_000, "{} buckets used", buckets.len());
}

/// Runs `kernel` on `data` and `indices` and checks it against the interpreter, errors
/// included; `what` goes into the failure message.
fn assert_matches_interpreter(kernel: &Kernel, data: &[u8], indices: &[u8], what: &str) {
    let validated = kernel.validated();
    let expected = interpret(validated, data, indices);
    let mut output = vec![0xA5u8; validated.output_len() * validated.signature().dtype.size()];
    let actual = kernel
        .run_bytes(data, indices, &mut output)
        .map(|()| output);
    assert_eq!(actual, expected, "{}: {what}", kernel.signature());
}

/// An embedding lookup whose batch and sequence length change from call to call: one cache
/// compiles a kernel per lookup count below 8 (the longest unrolled trip, which the code caps
/// at the count), and every longer lookup runs on one machine code, bad indices included.
#[test]
fn a_cache_shares_code_across_a_dynamic_batch_and_sequence() {
    let cache = KernelCache::new(256);
    let table: Vec<f32> = (0..50 * 6).map(|i| i as f32).collect();
    let table = crate::util::f32_bytes(&table);
    let mut long = Vec::new();
    let shapes = [
        (1, 1),
        (1, 3),
        (2, 3),
        (3, 3),
        (1, 9),
        (4, 4),
        (8, 16),
        (5, 31),
        (2, 100),
    ];
    for (batch, seq) in shapes {
        let sig = Signature::gather(&[50, 6], &[batch, seq], 0, 0);
        let kernel = cache.get(&sig).expect("kernel");
        // Negative indices wrap; the last one of each lookup is out of range in the second run.
        let mut rows: Vec<i64> = (0..batch * seq)
            .map(|k| (k * 37 % 100) as i64 - 50)
            .collect();
        assert_matches_interpreter(
            &kernel,
            &table,
            &index_bytes(IndexType::I64, &rows),
            "valid",
        );
        *rows.last_mut().expect("not empty") = 50;
        let last_bad = index_bytes(IndexType::I64, &rows);
        assert_matches_interpreter(&kernel, &table, &last_bad, "the last index out of range");
        if batch * seq >= 8 {
            long.push(kernel);
        }
    }
    let code = |kernel: &Kernel| kernel.machine_code().as_ptr();
    assert!(long.iter().all(|k| code(k) == code(&long[0])), "one code");
    assert!(!long[0].reuses_code() && long[1..].iter().all(|k| k.reuses_code()));
    let stats = cache.stats();
    assert_eq!(stats.misses, shapes.len() as u64);
    assert_eq!(stats.shared_code, long.len() as u64 - 1, "{stats:?}");
    assert_eq!(stats.compilations + stats.shared_code, stats.misses);

    // Another table size is another bounds check: new code.
    let other = cache
        .get(&Signature::gather(&[51, 6], &[8, 16], 0, 0))
        .expect("kernel");
    assert!(!other.reuses_code());
    assert_ne!(code(&other), code(&long[0]));
}

/// `Kernel::compile_shared` reuses the code of a kernel it made while that kernel lives;
/// `Kernel::compile` never reuses. (Its share is process-wide, so only what other tests cannot
/// change is asserted here; `codegen`'s unit tests check a private share exactly.)
#[test]
fn compile_shared_reuses_held_code_and_compile_never_does() {
    let sig = |n: usize| Signature::gather_elements(&[n, 37], &[n, 29], 1);
    let first = Kernel::compile_shared(&sig(40)).expect("kernel");
    let second = Kernel::compile_shared(&sig(41)).expect("kernel");
    assert!(second.reuses_code());
    assert_eq!(
        first.machine_code().as_ptr(),
        second.machine_code().as_ptr()
    );
    let data: Vec<f32> = (0..41 * 37).map(|i| i as f32).collect();
    let indices: Vec<i64> = (0..41 * 29).map(|k| (k * 13 % 74) as i64 - 37).collect();
    assert_matches_interpreter(
        &second,
        &crate::util::f32_bytes(&data),
        &index_bytes(IndexType::I64, &indices),
        "on shared code",
    );
    drop(first);
    let third = Kernel::compile_shared(&sig(42)).expect("kernel");
    assert!(third.reuses_code(), "`second` still holds the code");

    let fresh = [Kernel::compile(&sig(40)), Kernel::compile(&sig(40))].map(|k| k.expect("kernel"));
    assert!(fresh.iter().all(|k| !k.reuses_code()));
    assert_ne!(
        fresh[0].machine_code().as_ptr(),
        fresh[1].machine_code().as_ptr()
    );
    assert_ne!(
        fresh[0].machine_code().as_ptr(),
        third.machine_code().as_ptr()
    );
}

/// Eight threads ask one cache at once for batches of one op: every kernel is right, and
/// every miss either compiled or reused code.
#[test]
fn threads_asking_for_many_batches_at_once_share_code_correctly() {
    let cache = KernelCache::new(64);
    let barrier = Barrier::new(8);
    let table: Vec<f32> = (0..20 * 33).map(|i| i as f32 * 0.5).collect();
    let table = crate::util::f32_bytes(&table);
    std::thread::scope(|s| {
        for thread in 0..8usize {
            let (cache, barrier, table) = (&cache, &barrier, &table);
            s.spawn(move || {
                barrier.wait();
                for batch in 2..10 {
                    let batch = batch + thread % 3;
                    let sig = Signature::gather_elements(&[batch, 20, 33], &[batch, 7, 33], 1);
                    let kernel = cache.get(&sig).expect("kernel");
                    let data: Vec<u8> = table
                        .iter()
                        .copied()
                        .cycle()
                        .take(batch * 20 * 33 * 4)
                        .collect();
                    let indices: Vec<i64> = (0..batch * 7 * 33)
                        .map(|k| (k * 7 % 45) as i64 - 22)
                        .collect();
                    assert_matches_interpreter(
                        &kernel,
                        &data,
                        &index_bytes(IndexType::I64, &indices),
                        &format!("thread {thread}"),
                    );
                }
            });
        }
    });
    let stats = cache.stats();
    assert_eq!(
        stats.compilations + stats.shared_code,
        stats.misses,
        "{stats:?}"
    );
    assert_eq!(stats.misses, 10, "batches 2..=11");
    assert!(stats.shared_code >= 1, "{stats:?}");
}

/// `get_all` answers each signature as `get` would, in order, compiling each distinct valid
/// one once, and the kernels it compiled on the pool's workers run correctly here.
#[test]
fn get_all_compiles_each_distinct_signature_once_and_answers_in_order() {
    let cache = KernelCache::new(64);
    let element = |rows: usize| Signature::gather_elements(&[rows, 64], &[rows, 64], 0);
    let signatures = vec![
        element(3),
        Signature::gather(&[40, 16], &[5], 0, 0),
        element(3),
        // Invalid: axis 2 of a rank-2 table.
        Signature::gather(&[40, 16], &[5], 2, 0),
        Signature::gather_nd(&[8, 8, 4], &[6, 2], 0),
        element(5),
    ];
    let kernels = cache.get_all(&signatures);
    assert_eq!(kernels.len(), signatures.len());
    for (signature, kernel) in signatures.iter().zip(&kernels) {
        match (kernel, signature.validate()) {
            (Ok(kernel), Ok(_)) => {
                assert_eq!(kernel.signature(), signature);
                let again = cache.get(signature).expect("cached");
                assert!(Arc::ptr_eq(kernel, &again), "{signature:?}");
            }
            (Err(error), Err(expected)) => assert_eq!(error, &expected),
            (kernel, validated) => panic!("{signature:?}: {kernel:?} against {validated:?}"),
        }
    }
    assert!(Arc::ptr_eq(
        kernels[0].as_ref().expect("valid"),
        kernels[2].as_ref().expect("valid")
    ));
    let stats = cache.stats();
    // Four distinct valid signatures, each compiled (or built on shared code) once.
    assert_eq!(stats.misses, 4, "{stats:?}");
    assert_eq!(stats.compilations + stats.shared_code, 4, "{stats:?}");

    let rows: Vec<i64> = (0..6 * 2).map(|k| (k * 5 % 8) as i64).collect();
    let table: Vec<f32> = (0..8 * 8 * 4).map(|i| i as f32).collect();
    assert_matches_interpreter(
        kernels[4].as_ref().expect("valid"),
        &crate::util::f32_bytes(&table),
        &index_bytes(IndexType::I64, &rows),
        "a kernel from get_all",
    );
    assert!(cache.get_all(&[]).is_empty());
}

/// Kernels `get_all` compiled on the worker threads are not kept alive by those threads: once
/// the cache is cleared and the caller has moved on, nothing holds them.
#[test]
fn get_all_leaves_no_kernel_alive_on_the_workers() {
    let cache = KernelCache::new(64);
    let signatures: Vec<Signature> = (2..10)
        .map(|rows| Signature::gather(&[rows * 7, 16], &[rows], 0, 0))
        .collect();
    let held: Vec<std::sync::Weak<Kernel>> = cache
        .get_all(&signatures)
        .iter()
        .map(|kernel| Arc::downgrade(kernel.as_ref().expect("valid")))
        .collect();
    cache.clear();
    // The caller's own view is dropped at its next request.
    cache
        .get(&Signature::gather(&[3, 3], &[1], 0, 0))
        .expect("valid");
    let alive = held
        .iter()
        .filter(|kernel| kernel.upgrade().is_some())
        .count();
    assert_eq!(alive, 0, "kernels still held after clear");
}
