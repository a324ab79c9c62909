//! The fuzz corpus and every fuzz finding, replayed through the same differential check as
//! the fuzz target (`fuzz/src/lib.rs`, included here; see `docs/safety.md`).

#[path = "../fuzz/src/lib.rs"]
#[allow(
    dead_code,
    reason = "the fuzz target uses parts of the case module the tests do not"
)]
#[allow(
    unexpected_cfgs,
    reason = "`cfg(fuzzing)` (set by cargo-fuzz) gates the guard-page check, whose libc \
              dependency the tests do not have"
)]
pub(crate) mod case;

use std::collections::BTreeMap;
use std::path::Path;

use gather_jit::interp::interpret;

/// Every input kept in `fuzz/corpus/differential` passes the differential check; prints what
/// the corpus exercises and checks that it still reaches every kind of case.
#[test]
fn fuzz_corpus_replays() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/differential");
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("the corpus directory") {
        let path = entry.expect("entry").path();
        let bytes = std::fs::read(&path).expect("corpus file");
        let case = case::decode(&bytes);
        let result = std::panic::catch_unwind(|| case.check());
        assert!(result.is_ok(), "corpus input {} fails", path.display());
        let sig = &case.signature;
        let kind = match sig.validate() {
            Err(e) => format!("invalid: {}", e.category()),
            Ok(v) if !case::runnable(&v) => "valid, compiled only (large)".to_string(),
            Ok(v) => match interpret(&v, &case.data, &case.indices) {
                Ok(_) => format!("ran: {} {:?}", sig.op.name(), sig.policy.out_of_range),
                Err(e) => format!("ran: {} {}", sig.op.name(), e.category()),
            },
        };
        *kinds.entry(kind).or_default() += 1;
        // Which banded nests the check's second, banded kernel met (`Case::banded_tuning`).
        if let Ok(v) = sig.validate()
            && case::runnable(&v)
        {
            let plan =
                gather_jit::specialize::Plan::with_tuning(&v, case.banded_tuning()).expect("plans");
            if plan.band.is_some() {
                let kind = format!("ran banded: {} loops", plan.loops.len());
                *kinds.entry(kind).or_default() += 1;
            }
        }
    }
    println!("{kinds:#?}");
    for kind in [
        "ran: Gather Error",
        "ran: Gather Zero",
        "ran: Gather Clamp",
        "ran: GatherElements Error",
        "ran: GatherND Zero",
        "ran: GatherND index out of bounds",
        "invalid: size overflow",
        "invalid: rank too small",
        "ran banded: 3 loops",
        "ran banded: 4 loops",
    ] {
        assert!(
            kinds.contains_key(kind),
            "the corpus has no case of {kind:?}: {kinds:#?}"
        );
    }
}

/// A fuzz input (raw mode) that names the signature of the huge-stride bug of
/// `hostile::huge_stride_in_a_short_unrolled_loop_compiles` (fixed in c221007): Gather axis 1
/// on u8 data `[2, 2^62 - 1]` (valid: `isize::MAX - 1` bytes) with indices `[1]`. The fuzz
/// runs did not reach it by themselves; it is kept as a regression input.
const HUGE_STRIDE_INPUT: [u8; 12] = [
    0x81, // raw mode, Gather
    0x00, // the first flavor that defines Gather: onnx
    0x00, // the flavor's policy
    0x05, // u8 data
    0x06, // i64 indices
    0x02, 0x04, 0xFF, // data rank 2: [2, 2^62 - 1]
    0x01, 0x01, // indices rank 1: [1]
    0x01, 0x00, // axis 1, batch_dims 0
];

#[test]
fn fuzz_decoder_reaches_the_huge_stride_signature() {
    let case = case::decode(&HUGE_STRIDE_INPUT);
    let expected = gather_jit::Signature::gather(&[2, (1 << 62) - 1], &[1], 1, 0)
        .with_dtype(gather_jit::DType::U8);
    assert_eq!(case.signature, expected);
    assert!(case.data.is_empty(), "too large to run: compiled only");
}

#[test]
fn fuzz_huge_stride_input_passes() {
    case::check(&HUGE_STRIDE_INPUT);
}

/// Fuzz finding (run 4, a 495-second "slow unit"; fixed in 4a1169d): Gather-1 along axis 4
/// (written -2) of bf16 data `[130, 130, 130, 130, 130, 0]` with u64 indices `[6, 7, 8]` under
/// Wrap/Zero. The output `[130, 130, 130, 130, 6, 7, 8, 0]` is empty, but the plan walked the
/// data dims before the axis times the indices, `130^4 * 336 = 9.6e10` lookups that copy 0
/// bytes each: minutes per call for no output. (The plan skipped the walk when a dim *before*
/// the axis was 0; a 0 after the axis only made the slice empty.) Now: at most one lookup per
/// index (none under `Zero`).
const EMPTY_SLICE_WALK_INPUT: [u8; 30] = [
    0x21, 0xdd, 0x79, 0x28, 0x9f, 0xb9, 0xff, 0xff, 0xff, 0xff, 0xff, 0x40, 0x40, 0x2d, 0xff, 0xc9,
    0x9a, 0x3b, 0x04, 0x2b, 0x5b, 0x02, 0x05, 0x21, 0x2b, 0x26, 0xe6, 0xf8, 0x7e, 0x63,
];

#[test]
fn fuzz_decoder_reaches_the_empty_slice_walk_signature() {
    let case = case::decode(&EMPTY_SLICE_WALK_INPUT);
    let expected = gather_jit::Signature::gather(&[130, 130, 130, 130, 130, 0], &[6, 7, 8], -2, 0)
        .with_flavor(gather_jit::Flavor::OpenvinoGather1)
        .with_negative(gather_jit::NegativeIndices::Wrap)
        .with_out_of_range(gather_jit::OutOfRange::Zero)
        .with_dtype(gather_jit::DType::Bf16)
        .with_index_type(gather_jit::IndexType::U64);
    assert_eq!(case.signature, expected);
}

/// The plan of a Gather with an empty slice does no more lookups than there are indices, under
/// every policy (fast: it only compiles). Here indices `[4, 5, 6]`: 120, not `130^4 * 120`.
#[test]
fn gather_with_an_empty_slice_does_not_walk_the_leading_dims() {
    for oob in [
        gather_jit::OutOfRange::Error,
        gather_jit::OutOfRange::Zero,
        gather_jit::OutOfRange::Clamp,
    ] {
        let sig = gather_jit::Signature::gather(&[130, 130, 130, 130, 130, 0], &[4, 5, 6], 4, 0)
            .with_out_of_range(oob);
        let kernel = gather_jit::Kernel::compile(&sig).expect("valid");
        assert!(
            kernel.plan().lookups() <= 120,
            "{oob:?}: {} lookups for an empty output\n{}",
            kernel.plan().lookups(),
            kernel.plan()
        );
    }
}

/// The fuzz input itself: the differential check passes, lookup bound included (before the fix
/// every API path took minutes).
#[test]
fn fuzz_empty_slice_walk_input_passes() {
    case::check(&EMPTY_SLICE_WALK_INPUT);
}

/// Fuzz finding (run 9): GatherElements along axis 0 of u64 data `[1, 17]` with i16 indices
/// `[7, 5]`, banded into 5 bands of one column. The harness splits a call into two
/// `call_range`s and stops at the first failing range; a banded kernel's ranges are column
/// bands, so the first range met the bad index `[3, 0]` while the gather's first, `[0, 1]`,
/// lay in the second range, and `call_range` reported `[3, 0]`. A runtime splitting a gather
/// this way would have got the wrong index too. Now a banded `call_range` that fails scans the
/// indices before the one it met and names the gather's first bad index.
const BANDED_SPLIT_INPUT: [u8; 28] = [
    0x0a, 0x27, 0x3f, 0x3f, 0x0a, 0x01, 0x22, 0x0e, 0xaa, 0x8b, 0x2e, 0xba, 0x17, 0x5d, 0x01, 0x21,
    0x74, 0x01, 0xcc, 0x04, 0xb7, 0x2a, 0x5b, 0x7a, 0x60, 0x29, 0x60, 0x8e,
];

#[test]
fn fuzz_decoder_reaches_the_banded_split_signature() {
    let case = case::decode(&BANDED_SPLIT_INPUT);
    let expected = gather_jit::Signature::gather_elements(&[1, 17], &[7, 5], -2)
        .with_dtype(gather_jit::DType::U64)
        .with_index_type(gather_jit::IndexType::I16);
    assert_eq!(case.signature, expected);
    let kernel =
        gather_jit::Kernel::compile_tuned(&case.signature, case.banded_tuning()).expect("valid");
    assert_eq!(kernel.outer_extent(), 5, "five bands of one column");
    assert!(
        interpret(
            &expected.validate().expect("valid"),
            &case.data,
            &case.indices
        )
        .is_err()
    );
}

#[test]
fn fuzz_banded_split_input_passes() {
    case::check(&BANDED_SPLIT_INPUT);
}

/// The first input of the fuzz run after the typed views were added crashed the harness, not
/// the library: a strided view of indices whose strided axis is not empty but another is
/// (so the array has no element to widen it with). Views of empty arrays now stay plain.
const EMPTY_STRIDED_VIEW_INPUT: [u8; 21] = [
    0x10, 0x47, 0x00, 0x86, 0xb4, 0x6a, 0x20, 0xb8, 0x86, 0x41, 0x5d, 0x00, 0x00, 0x04, 0x02, 0x2b,
    0xa6, 0xa6, 0x31, 0x02, 0x5a,
];

#[test]
fn fuzz_empty_strided_view_input_passes() {
    let case = case::decode(&EMPTY_STRIDED_VIEW_INPUT);
    assert!(case.fortran, "the typed API gets Fortran-order arrays");
    assert!(
        matches!(case.view_kind(), case::ViewKind::StridedIndices(_)),
        "{:?}",
        case.view_kind()
    );
    case::check(&EMPTY_STRIDED_VIEW_INPUT);
}
