//! The `model` fuzz target's kept corpus (`fuzz/corpus/model`) and its findings, replayed
//! through the same oracle as the fuzz target (`fuzz/src/model.rs`, included here): ONNX models
//! (bytes, or structured cases that build one) through `gather_jit_tract::onnx()` as
//! `gather-jit model` runs them (parse, `into_optimized`, `into_runnable`, run on inputs made
//! from the declared facts), then through tract's own ops, outputs compared bit for bit. A
//! panic with gather-jit or gather-jit-tract on the stack, or a difference, fails; tract's own
//! panics and any error are outcomes, counted.

#[path = "../../../fuzz/src/model.rs"]
#[allow(
    dead_code,
    reason = "the replay uses `check`; the decoder's helpers serve the seed generator too"
)]
mod model;

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use model::{Outcome, Phase, Way};

/// Every input of `fuzz/corpus/model` passes the oracle; prints what the corpus reaches and
/// checks that it still reaches the main kinds of outcome.
#[test]
fn fuzz_model_corpus_replays() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/model");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("the corpus directory")
        .map(|entry| entry.expect("entry").path())
        .collect();
    paths.sort();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut failed = vec![];
    // FUZZ_MODEL_VERBOSE=1 prints each input's outcome.
    let verbose = std::env::var_os("FUZZ_MODEL_VERBOSE").is_some();
    for path in &paths {
        let bytes = std::fs::read(path).expect("corpus file");
        let mode = match bytes.first() {
            Some(&b) if b >= model::STRUCTURED => "structured",
            _ => "onnx",
        };
        match catch_unwind(AssertUnwindSafe(|| model::check(&bytes))) {
            Ok(outcome) => {
                if verbose {
                    println!("{}: {outcome:?}", path.display());
                }
                *outcomes.entry(format!("{mode} {outcome:?}")).or_default() += 1;
            }
            Err(_) => failed.push(path.display().to_string()),
        }
    }
    println!("{} inputs:", paths.len());
    for (outcome, n) in &outcomes {
        println!("  {n:5}  {outcome}");
    }
    assert!(failed.is_empty(), "inputs that failed: {failed:#?}");
    let count = |f: &dyn Fn(&str) -> bool| {
        outcomes
            .iter()
            .filter(|(k, _)| f(k))
            .map(|(_, n)| n)
            .sum::<usize>()
    };
    assert!(paths.len() >= 50, "the corpus has {} inputs", paths.len());
    for mode in ["structured", "onnx"] {
        assert!(
            count(&|k| k == format!("{mode} {:?}", Outcome::Identical)) >= 10,
            "{mode}: too few models ran both ways"
        );
        for phase in [Phase::Parse, Phase::Analyse, Phase::Run] {
            assert!(
                count(&|k| k == format!("{mode} {:?}", Outcome::Rejected(Way::Jit, phase))) > 0,
                "{mode}: no model rejected at {phase:?}"
            );
        }
    }
    assert!(count(&|k| k.contains("TractPanicked")) > 0);
    assert!(count(&|k| k.contains("Skipped")) > 0);
}

/// The seeds written by `fuzz/examples/model_seeds.rs` as they decode: each must pass, and the
/// ordinary ones run both ways.
#[test]
fn fuzz_model_structured_seeds() {
    let seeds: [(&[u8], Outcome); 3] = [
        (
            &[0x81, 0, 0, 0, 1, 2, 3, 3, 0, 1, 1, 0, 1, 0, 2, 7, 1, 0],
            Outcome::Identical,
        ),
        (
            &[
                0x82, 0, 0, 1, 1, 2, 2, 4, 0, 144, 144, 1, 0, 0, 3, 0, 0, 2, 0, 1, 0, 1, 3, 1, 0,
                2, 0, 0, 0, 1, 7, 0, 5,
            ],
            Outcome::Identical,
        ),
        (
            &[
                0x80, 0, 3, 0, 1, 1, 1, 0, 0, 1, 2, 16, 1, 0, 1, 0, 0, 0, 1, 0, 0, 7, 1, 3,
            ],
            Outcome::Identical,
        ),
    ];
    for (bytes, expected) in seeds {
        assert_eq!(model::check(bytes), expected, "{bytes:?}");
    }
}

/// GatherND with rank-0 indices (f32 data `[2, 2]`, i64 indices `[]`, both graph inputs):
/// `gather_nd_rules` computed `indices_rank - 1` on rank 0 (a panic with overflow checks, an
/// endless loop without; fixed in 38d4103). It must be an error.
#[test]
fn fuzz_model_gathernd_rank0_indices() {
    let outcome = model::check(&[0x80, 0, 0, 0, 1, 1, 1, 0, 1, 0, 0, 5, 7, 0, 0]);
    assert!(
        matches!(outcome, Outcome::Rejected(Way::Jit, _)),
        "{outcome:?}"
    );
}

/// Gather along axis 1 of u8 data `[2^40, 0]` (empty) with i64 indices `[17]`: a valid
/// signature whose output (`2^40 * 17` bytes) cannot be allocated. `JitGather::eval` must
/// return an error, not panic in tract's `Tensor::uninitialized_dt` (fixed in 38d4103).
#[test]
fn fuzz_model_gather_unallocatable_output() {
    let outcome = model::check(&[0x81, 0, 6, 0, 1, 226, 8, 4, 0, 13, 5, 7, 0, 0]);
    assert_eq!(outcome, Outcome::Rejected(Way::Jit, Phase::Run));
}

/// The oracle's judgement of whose a panic is (each kind once misjudged ours): tract's own ops
/// panicking, reached through the integration's delegations (see `DELEGATIONS` in
/// `fuzz/src/model.rs`), are tract's.
#[test]
fn fuzz_model_tract_panics_are_tracts() {
    let cases: [(&str, &[u8], Outcome); 3] = [
        (
            // GatherElements of f32 data `[3, 1]` on axis -1 with bool indices `[1, 1]` (not an
            // index type of gather-jit's, so the expansion's `wire` delegates to tract's op):
            // the random index 1 is out of range for the axis of 1, and tract's op indexes out
            // of bounds during the run (`run_checked`'s closure evaluates it).
            "delegated op at run",
            &[130, 0, 0, 11, 1, 7, 0, 2, 0, 0, 0, 5],
            Outcome::TractPanicked(Way::Jit, Phase::Run),
        ),
        (
            // The shape of data gathered with the constant out-of-range index 2: tract's own
            // Gather (TDim data, delegated by `wire`) panics while folding it.
            "delegated op folded at analysis",
            &[130, 0, 0, 0, 3, 7, 1, 2, 0, 0, 0, 5],
            Outcome::TractPanicked(Way::Jit, Phase::Analyse),
        ),
        (
            // GatherND with a constant negative index: tract's own GatherND (behind
            // `onnx_native()`'s rules, wired by its `wire`) panics while folding it.
            "tract's GatherND on a negative index",
            &[
                242, 0, 0, 0, 0, 53, 0, 0, 0, 0, 0, 0, 43, 0, 255, 255, 255, 31, 34, 24, 7, 115, 35,
            ],
            Outcome::TractPanicked(Way::Native, Phase::Analyse),
        ),
    ];
    for (what, bytes, expected) in cases {
        assert_eq!(model::check(bytes), expected, "{what}");
    }
}

/// GatherElements whose axis is below `-rank` (first runs' inputs that made tract's own ops
/// panic): strings of rank 1 on axis -2, f16 data of rank 7 on axis -8, f32 data of rank 1 on
/// axis -2 beside a gather of its shape. ONNX allows `-r..=r-1`; the JIT way made such an axis
/// non-negative by adding the rank once and gathered along another axis (the second input
/// loaded with gather-jit and was refused by tract's own GatherElements). It must be an error
/// at analysis.
#[test]
fn fuzz_model_gather_elements_axis_below_minus_rank() {
    let inputs: [&[u8]; 3] = [
        &[130, 0, 15, 0, 0, 0, 0, 0, 7, 4, 5],
        &[130, 0, 4, 0, 94, 0, 205],
        &[130, 0, 0, 0, 3, 7, 0, 2, 0, 0, 0, 5],
    ];
    for bytes in inputs {
        assert_eq!(
            model::check(bytes),
            Outcome::Rejected(Way::Jit, Phase::Analyse),
            "{bytes:?}"
        );
    }
}

/// An input declared `[0, 2^62, 2^62]`-like (empty, but its strides overflow): tract's tensors
/// panic on it in builds with overflow checks, so the oracle does not make it.
#[test]
fn fuzz_model_input_strides_overflow_is_skipped() {
    let bytes = [
        153, 153, 153, 153, 153, 195, 45, 0, 103, 102, 220, 102, 102, 102, 102, 153, 64, 1, 48,
        172, 23, 0, 0, 0, 248, 0, 0, 195, 45, 255, 255, 255, 5, 0, 153, 153, 35, 153, 153, 153, 23,
        159, 255,
    ];
    assert_eq!(
        model::check(&bytes),
        Outcome::Skipped("input dims overflow")
    );
}
