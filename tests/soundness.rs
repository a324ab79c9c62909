//! Regressions of the soundness holes a hostile embedder found in the safe API: each test
//! names the hole it pins and fails (or aborts the test binary) without its fix.
//! `docs/safety.md` states the guarantees; the traits' `compile_fail` doc-tests show that a
//! type of the caller's cannot claim a dtype without `unsafe impl`.

use std::sync::Arc;
use std::sync::mpsc;

use gather_jit::interp::interpret;
use gather_jit::ir::MAX_RANK;
use gather_jit::{DType, Element, Error, IndexType, Kernel, KernelCache, Signature};
use ndarray::{Array, ShapeBuilder, array};

use crate::util::index_bytes;

/// `Kernel::run` copied a non-contiguous view with `as_standard_layout`, an infallible
/// allocation: a stride-0 broadcast standing for 2^49 bytes (beyond the 47-bit address space,
/// whatever the overcommit setting) aborted the process. Now the copy is fallible.
#[test]
fn broadcast_data_too_large_to_copy_is_an_error_not_an_abort() {
    let n = 1usize << 23;
    let sig = Signature::gather(&[n, n], &[1], 0, 0).with_dtype(DType::F64);
    let kernel = Kernel::compile(&sig).expect("2^49 bytes of data is a valid signature");
    let one = array![[1.5f64]];
    let data = one.broadcast((n, n)).expect("broadcasts");
    let err = kernel.run(data, array![0i64].view()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Allocation {
                what: "a contiguous copy of data",
                bytes,
                ..
            } if bytes == 1 << 49
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "could not allocate 562949953421312 bytes for a contiguous copy of data"
    );
}

/// The same fallible copy for indices, and views that do fit are still copied and gathered
/// right: broadcast indices, broadcast data, reversed and strided data.
#[test]
fn broadcast_reversed_and_strided_views_match_the_interpreter() {
    let table = Array::from_shape_fn((6, 5), |(r, c)| (r * 10 + c) as i32);
    let sig = Signature::gather(&[6, 5], &[4, 3], 0, 0).with_dtype(DType::I32);
    let kernel = Kernel::compile(&sig).expect("valid");
    let validated = sig.validate().expect("valid");
    let check = |data: ndarray::ArrayView2<'_, i32>, indices: ndarray::ArrayView2<'_, i64>| {
        let data_bytes: Vec<u8> = data.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let raw: Vec<i64> = indices.iter().copied().collect();
        let expected = interpret(&validated, &data_bytes, &index_bytes(IndexType::I64, &raw))
            .expect("in range");
        let actual = kernel.run(data, indices).expect("runs");
        let actual: Vec<u8> = actual.iter().flat_map(|v| v.to_ne_bytes()).collect();
        assert_eq!(actual, expected, "data {data:?}, indices {indices:?}");
    };
    let scalar = array![[-1i64]];
    let broadcast_indices = scalar.broadcast((4, 3)).expect("broadcasts");
    let indices = array![[0i64, 5, -6], [1, 2, 3], [4, -1, 0], [2, 2, 2]];
    let row = Array::from_shape_fn((1, 5), |(_, c)| c as i32 * 7);
    let mut reversed = table.clone();
    reversed.invert_axis(ndarray::Axis(0));
    let wide = Array::from_shape_fn((6, 10).f(), |(r, c)| (r * 100 + c) as i32);
    let strided = wide.slice(ndarray::s![.., ..;2]);
    for data in [
        table.view(),
        row.broadcast((6, 5)).expect("broadcasts"),
        reversed.view(),
        strided,
    ] {
        check(data, broadcast_indices);
        check(data, indices.view());
        check(data, indices.t().t());
    }
}

/// The interpreter's output was `vec![0; n]`: an output too large for memory aborted the
/// process. Now it is [`Error::Allocation`], as in `Kernel::run`.
#[test]
fn interpreter_output_too_large_to_allocate_is_an_error() {
    // 2^24 u8 indices into a [2^11, 1, 2^11] f64 table: a 2^49-byte output.
    let sig = Signature::gather(&[1 << 11, 1, 1 << 11], &[1 << 24], 1, 0)
        .with_dtype(DType::F64)
        .with_index_type(IndexType::U8);
    let validated = sig.validate().expect("valid");
    let data = vec![0u8; (1 << 22) * 8];
    let indices = vec![0u8; 1 << 24];
    let result = interpret(&validated, &data, &indices);
    assert!(
        matches!(
            result,
            Err(Error::Allocation {
                what: "the output",
                bytes,
                ..
            }) if bytes == 1 << 49
        ),
        "{result:?}"
    );
}

/// An `unsafe impl Element` that breaks its size promise is caught by `Kernel::run` (which
/// checks sizes anyway) instead of reading past the buffers.
#[test]
fn an_element_impl_of_the_wrong_size_is_refused() {
    #[derive(Clone, Copy, Debug, Default)]
    struct Tiny(#[expect(dead_code, reason = "only its size matters")] u8);
    // SAFETY: deliberately broken (1 byte claiming 8): the test shows `run` refuses it.
    unsafe impl Element for Tiny {
        const DTYPE: DType = DType::F64;
    }
    let sig = Signature::gather(&[4], &[2], 0, 0).with_dtype(DType::F64);
    let kernel = Kernel::compile(&sig).expect("valid");
    let data = Array::from_elem(4, Tiny::default());
    let err = kernel.run(data.view(), array![0i64, 3].view()).unwrap_err();
    assert_eq!(err.category(), "buffer mismatch", "{err}");
}

/// A thread's view of a cache held an `Arc` of every kernel it was given until that thread
/// made a request to another new cache, so dropping the cache kept them all (and their
/// machine code). Now dropping a cache empties every thread's view of it, on this thread and
/// on threads that are alive but idle.
#[test]
fn a_dropped_cache_releases_the_kernels_of_every_thread_view() {
    let probe_sig = Signature::gather(&[7, 3], &[2], 0, 0);
    let others: Vec<Signature> = (1..=20)
        .map(|rows| Signature::gather(&[rows, 5], &[3], 0, 0))
        .collect();
    let cache = Arc::new(KernelCache::new(64));
    let probe = cache.get(&probe_sig).expect("compiles");
    for sig in &others {
        cache.with(sig, |_| ()).expect("compiles");
    }
    // Another thread takes the probe (and the others) into its view and then idles, without
    // a request to any cache, until the test has looked.
    let (taken_tx, taken_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let idle = std::thread::spawn({
        let cache = Arc::clone(&cache);
        let (probe_sig, others) = (probe_sig.clone(), others.clone());
        move || {
            let weak = Arc::downgrade(&cache.get(&probe_sig).expect("cached"));
            for sig in &others {
                cache.with(sig, |_| ()).expect("cached");
            }
            drop(cache);
            taken_tx.send(weak).expect("test waits");
            done_rx.recv().expect("test says when");
        }
    });
    let others_weak = taken_rx.recv().expect("thread sends");
    // Held by: `probe`, the map, this thread's view and the other thread's view.
    assert_eq!(Arc::strong_count(&probe), 4);
    let cache = Arc::into_inner(cache).expect("the thread dropped its handle");
    drop(cache);
    assert_eq!(
        Arc::strong_count(&probe),
        1,
        "only the caller's handle is left"
    );
    drop(probe);
    assert!(others_weak.upgrade().is_none(), "the kernel is freed");
    done_tx.send(()).expect("thread waits");
    idle.join().expect("thread ends");
}

/// After many compiles, dropping the cache frees the kernels this thread's view held (the
/// issue's 4,000-compile case, in small: every kernel is freed, not only the probe).
#[test]
fn a_dropped_cache_frees_every_kernel_it_compiled() {
    let cache = KernelCache::new(1024);
    let weak: Vec<_> = (1..=200)
        .map(|rows| {
            let sig = Signature::gather(&[rows, 3], &[rows], 0, 0);
            Arc::downgrade(&cache.get(&sig).expect("compiles"))
        })
        .collect();
    assert!(weak.iter().all(|w| w.upgrade().is_some()), "all cached");
    drop(cache);
    let alive = weak.iter().filter(|w| w.upgrade().is_some()).count();
    assert_eq!(alive, 0, "kernels kept alive after the cache was dropped");
}

/// Compile time grew super-linearly with GatherND's index depth (depth 5,000 took 20 s, with
/// other threads waiting on the cache for it). Ranks are now limited to [`MAX_RANK`], and
/// the deepest valid tuples compile (and run right); `cargo bench --bench gather --
/// compile/deepest` times them.
#[test]
fn ranks_above_the_limit_are_validation_errors() {
    let deep = |depth: usize| Signature::gather_nd(&vec![1; depth], &[2, depth], 0);
    let e = deep(MAX_RANK + 1).validate().unwrap_err();
    assert!(
        matches!(
            e,
            Error::RankTooLarge {
                op: gather_jit::ir::OpName::GatherNd,
                input: "data",
                rank: 65,
                max: 64,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "GatherND: data has rank 65, but at most 64 is supported"
    );
    let e = Kernel::compile(&Signature::gather(&[2], &[1; 65], 0, 0)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::RankTooLarge {
                input: "indices",
                rank: 65,
                ..
            }
        ),
        "{e:?}"
    );
    // Gather's output has data's rank - 1 + the indices' rank: each input at the limit
    // gives an output over it.
    let e = Kernel::compile(&Signature::gather(&[1; 64], &[1; 2], 0, 0)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::RankTooLarge {
                input: "output",
                rank: 65,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.category(), "rank too large");
}

/// The deepest tuples the limit allows compile and agree with the interpreter, including a
/// rejected coordinate in the last position of the last tuple.
#[test]
fn the_deepest_index_tuples_compile_and_run() {
    for batch_dims in [0, 1] {
        let data_shape = vec![1; MAX_RANK];
        let depth = MAX_RANK - batch_dims;
        let mut indices_shape = vec![1; batch_dims];
        indices_shape.extend([3, depth]);
        let sig = Signature::gather_nd(&data_shape, &indices_shape, batch_dims as i64)
            .with_dtype(DType::U8);
        let kernel = Kernel::compile(&sig).unwrap_or_else(|e| panic!("{sig}: {e}"));
        let validated = kernel.validated().clone();
        let count = validated.indices_len();
        let mut raw: Vec<i64> = (0..count as i64).map(|i| -(i % 2)).collect();
        for bad in [None, Some(count - 1)] {
            if let Some(at) = bad {
                raw[at] = 5;
            }
            let indices = index_bytes(IndexType::I64, &raw);
            let expected = interpret(&validated, &[42], &indices);
            let mut output = vec![0u8; validated.output_len()];
            let actual = kernel
                .run_bytes(&[42], &indices, &mut output)
                .map(|()| output);
            assert_eq!(actual, expected, "{sig}, bad index {bad:?}");
        }
    }
    // Depth 62 over dims of 2 (2^62 bytes of data, too many to run): no dim merges away, so
    // every coordinate is a check in the code.
    let sig = Signature::gather_nd(&[2; MAX_RANK - 2], &[3, MAX_RANK - 2], 0).with_dtype(DType::U8);
    let kernel = Kernel::compile(&sig).expect("compiles");
    assert_eq!(kernel.plan().lookup.coordinates.len(), MAX_RANK - 2);
}

/// A banded plan's scratch buffer (per thread, grown infallibly mid-call) was bounded only by
/// the `Tuning`: `bands_always(u64::MAX)` on a 256 MiB table planned a 128 MiB band. Bands
/// are now at most `MAX_BAND_BYTES` whatever the tuning.
#[test]
fn bands_stay_within_their_scratch_limit_whatever_the_tuning() {
    use gather_jit::Tuning;
    use gather_jit::specialize::MAX_BAND_BYTES;
    let n = 1 << 14;
    let sig = Signature::gather_elements(&[n, n], &[n, n], 0).with_dtype(DType::U8);
    let kernel = Kernel::compile_tuned(&sig, Tuning::bands_always(u64::MAX)).expect("compiles");
    let band = kernel
        .plan()
        .band
        .expect("a square table of 16K rows is banded");
    assert!(
        band.rows * band.row_bytes <= MAX_BAND_BYTES,
        "{band:?}: {} bytes",
        band.rows * band.row_bytes
    );
}
