//! Findings of the scatter part of the differential fuzz target (`fuzz/src/scatter.rs`), each
//! minimised into a named test; the fuzz inputs themselves replay in `fuzz_replay`.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use gather_jit::ScatterKernel;
use gather_jit::interp::interpret_scatter;
use gather_jit::scatter::ScatterSignature;

/// How long a call with nothing to write may take before the test calls it stuck: far more
/// than the microseconds it needs, far less than the loops it must not walk (`2^59`
/// iterations).
const STUCK: Duration = Duration::from_secs(60);

/// Runs `signature` out of place and in place on empty buffers (every tensor but indices has
/// a zero dim) on another thread; fails if that does not finish within [`STUCK`], or
/// disagrees with the interpreter.
#[track_caller]
fn empty_scatter_returns(signature: ScatterSignature, indices: Vec<u8>) {
    let layout = signature
        .validate()
        .expect("valid: zero dims make huge ones fit");
    assert_eq!((layout.data_len(), layout.updates_len()), (0, 0));
    let expected = interpret_scatter(&layout, &[], &indices, &[]);
    let kernel = ScatterKernel::compile(&signature).expect("compiles");
    let (done, finished) = mpsc::channel();
    let worker = indices.clone();
    thread::spawn(move || {
        let out_of_place = kernel.run_bytes(&[], &worker, &[], &mut []);
        let in_place = kernel.run_bytes_in_place(&mut [], &worker, &[]);
        let parallel = kernel.run_bytes_parallel(&[], &worker, &[], &mut [], 3);
        // The receiver is gone only if the test already failed.
        let _ = done.send([out_of_place, in_place, parallel]);
    });
    let results = finished.recv_timeout(STUCK).unwrap_or_else(|_| {
        panic!(
            "{signature}: a scatter with no updates did not return within {STUCK:?}: its \
             kernel walks loops that write nothing"
        )
    });
    for result in results {
        assert_eq!(result, expected.clone().map(|_| ()), "{signature}");
    }
}

/// Fuzz seed `scatter-hostile-elements-empty-huge` (there `2^32`, seconds per call):
/// ScatterElements along axis 1 of f32 data `[2^59, 0]` with indices (and updates)
/// `[2^59, 0]`. Valid, no element anywhere, and the kernel's write pass looped `2^59` times
/// over the first dim of indices, whose inner loop over the empty second dim does nothing:
/// the call never returned.
#[test]
fn scatter_elements_with_an_empty_inner_dim_does_not_walk_the_outer_ones() {
    let sig = ScatterSignature::scatter_elements(&[1 << 59, 0], &[1 << 59, 0], &[1 << 59, 0], 1);
    empty_scatter_returns(sig, Vec::new());
}

/// Fuzz seed `scatter-hostile-update-empty-huge` (there `2^32`): ScatterUpdate along axis 1
/// of f32 data `[2^59, 3, 0]` with indices `[2]`, updates `[2^59, 2, 0]`. Valid and empty but
/// for the two (good) indices; the write pass walked the `2^59` positions before the axis,
/// two empty slices each.
#[test]
fn scatter_update_with_empty_slices_does_not_walk_the_outer_positions() {
    let sig = ScatterSignature::scatter_update(&[1 << 59, 3, 0], &[2], &[1 << 59, 2, 0], 1);
    let indices = [1i64, 2].iter().flat_map(|i| i.to_ne_bytes()).collect();
    empty_scatter_returns(sig, indices);
}

/// The same shapes with a bad index: the check pass still runs (and names it) when there is
/// nothing to write.
#[test]
fn scatter_with_nothing_to_write_still_checks_its_indices() {
    let sig = ScatterSignature::scatter_update(&[1 << 59, 3, 0], &[2], &[1 << 59, 2, 0], 1);
    let indices: Vec<u8> = [1i64, 3].iter().flat_map(|i| i.to_ne_bytes()).collect();
    let layout = sig.validate().expect("valid");
    let expected = interpret_scatter(&layout, &[], &indices, &[]);
    assert!(
        expected
            .as_ref()
            .is_err_and(|e| e.to_string().contains("index 3")),
        "{expected:?}"
    );
    empty_scatter_returns(sig, indices);
}
