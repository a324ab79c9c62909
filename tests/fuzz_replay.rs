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
        if case::scatter::is_scatter(&bytes) {
            let case = case::scatter::decode(&bytes);
            let result = std::panic::catch_unwind(|| case.check());
            assert!(result.is_ok(), "corpus input {} fails", path.display());
            *kinds.entry(case.kind()).or_default() += 1;
            continue;
        }
        if case::is_quantized(&bytes) {
            let case = case::quantized::decode(&bytes);
            let result = std::panic::catch_unwind(|| case.check());
            assert!(result.is_ok(), "corpus input {} fails", path.display());
            *kinds.entry(case.kind()).or_default() += 1;
            continue;
        }
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
        "quantized ran: GatherBlockQuantized Error",
        "quantized ran: GatherBlockQuantized Zero",
        "quantized ran: GatherBlockQuantized index out of bounds",
        "quantized ran: GatherGGUF Error",
        "quantized invalid: invalid quantization",
        "quantized invalid: size overflow",
        "scatter ran: ScatterND none",
        "scatter ran: ScatterND sub",
        "scatter ran: ScatterElements mean",
        "scatter ran: ScatterUpdate none",
        "scatter ran: ScatterND index out of bounds",
        "scatter ran: ScatterUpdate index out of bounds",
        "scatter ran: ScatterElements duplicate index",
        "scatter invalid: size overflow",
        "scatter invalid: rank too large",
        "scatter invalid: updates shape mismatch",
        "scatter invalid: unsupported reduction",
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

/// A quantized input (first byte `0xC0` or more; see `fuzz/src/quantized.rs`): ONNX Runtime's
/// defaults but for a block of 16, 4-bit data `[8, 64]` gathered by four valid `i64` indices.
const QUANTIZED_BLOCK_INPUT: [u8; 35] = [
    0xC0, // quantized, structured shapes
    0x00, // block quantization
    0x00, // the form's policy (wrap, error)
    0x00, // f32 scales and output
    0x06, // i64 indices
    0x00, // 4 bits
    0x00, // block size 16
    0x00, // no zero points, axes counted from the front
    0x00, 0x00, 0x00, 0x00, // C-contiguous views
    0x07, // no wrong buffer
    0x00, 0x00, // aligned buffers
    0x01, 0x02, 0x01, // seeds of data and scales, ordinary scales with a few specials
    0x01, 0x00, 0x01, // rank 2, gather axis 0, quantize axis 1
    0x0B, 0x0B, // data [8, 64]
    0x01, 0x07, // indices [4]
    0x00, 0x03, 0x01, 0x06, 0x02, 0x05, 0x03, 0x01, 0x04, 0x00, // index choices
];

#[test]
fn fuzz_decoder_reaches_a_block_quantized_signature() {
    assert!(case::is_quantized(&QUANTIZED_BLOCK_INPUT));
    let case = case::quantized::decode(&QUANTIZED_BLOCK_INPUT);
    let expected = gather_jit::QuantizedSignature::block_quantized(
        &[8, 64],
        &[4],
        gather_jit::BlockQuantization {
            block_size: 16,
            ..Default::default()
        },
    );
    assert_eq!(case.signature, expected);
    assert_eq!(
        (case.data.len(), case.indices.len(), case.scales.len()),
        (256, 32, 128)
    );
    assert_eq!(case.zero_points, None);
    assert_eq!(case.kind(), "quantized ran: GatherBlockQuantized Error");
    case::check(&QUANTIZED_BLOCK_INPUT);
}

/// A raw-mode quantized input: GGUF `Q4_0` on data of rank 3 (only `[rows, row_len]` is
/// valid), through the signature's struct.
const QUANTIZED_GGUF_RANK_3_INPUT: [u8; 36] = [
    0xF0, 0x03, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x01,
    0x02, 0x01, 0x03, 0x04, 0x04, 0x04, 0x01, 0x04, 0x00, 0x03, 0x07, 0x01, 0x09, 0x00, 0x00, 0x07,
    0x0D, 0x00, 0x02, 0x05,
];

#[test]
fn fuzz_decoder_reaches_an_invalid_gguf_rank() {
    let case = case::quantized::decode(&QUANTIZED_GGUF_RANK_3_INPUT);
    let expected = gather_jit::QuantizedSignature {
        data_shape: vec![2, 2, 2],
        ..gather_jit::QuantizedSignature::gguf(gather_jit::GgufFormat::Q4_0, 0, 0, &[2])
    };
    assert_eq!(case.signature, expected);
    assert!(matches!(
        expected.validate(),
        Err(gather_jit::Error::InvalidQuantization { .. })
    ));
    case::check(&QUANTIZED_GGUF_RANK_3_INPUT);
}

/// The first quantized fuzz run crashed the harness, not the library: ndarray makes no array
/// whose nonzero dims multiply past `isize::MAX`, even an empty one, so the typed views of
/// this case's tensors could not be built. Such cases now skip the typed `run`.
const QUANTIZED_UNVIEWABLE_INPUT: [u8; 26] = [
    0xFE, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10, 0x00, 0x27, 0x43, 0x60, 0x2A, 0x27, 0x43,
    0x60, 0x2A, 0xED, 0x5F, 0x80, 0xFF, 0xFF, 0xFB, 0xF5, 0x60,
];

#[test]
fn fuzz_quantized_unviewable_input_passes() {
    case::check(&QUANTIZED_UNVIEWABLE_INPUT);
}

/// Fuzz finding (issue 24's run; fixed, see `quantized_run_of_a_valid_empty_output_*`):
/// `GatherBlockQuantized(gather_axis=-2, quantize_axis=0, block_size=2^63, bits=8)` on bf16
/// scales, data `[0, 1, 1, 2^62]`, u16 indices `[5, 5]`. Valid, and `run_bytes` gives the
/// interpreter's empty output, but the typed `run` fails with `BufferMismatch { what:
/// "output", actual: "ShapeError/Overflow: arithmetic overflow" }`: the output `[0, 1, 5, 5,
/// 2^62]` has no bytes, yet its nonzero dims multiply past `isize::MAX`, so no ndarray holds it.
const QUANTIZED_EMPTY_OUTPUT_INPUT: [u8; 27] = [
    0xFC, 0x10, 0xDA, 0xFD, 0x2B, 0x2B, 0xDA, 0x02, 0x11, 0xFC, 0xB3, 0x8A, 0x3D, 0x02, 0x28, 0x09,
    0xDC, 0xD4, 0xDD, 0x60, 0x02, 0x11, 0xFC, 0x02, 0x08, 0x28, 0xAE,
];

#[test]
fn fuzz_quantized_empty_output_input_passes() {
    case::check(&QUANTIZED_EMPTY_OUTPUT_INPUT);
}

/// The finding above, minimal. `QuantizedLayout` checks each buffer's size by multiplying its
/// dims, so a zero dim before a huge one makes any shape valid (and, multiplied in order, a
/// zero after the overflow does not: `[2, 2^62, 4, 0]` is a `SizeOverflow`, `[0, 2, 2^62, 4]`
/// is valid). The gathers' `check_size` counts a zero dim as 1, "so that every stride computed
/// from the shape (even of an empty tensor) fits too (as ndarray does)", and refuses the same
/// shapes. Here the output `[0, 2, 2^62]` of f32 is valid, and `run` on valid views (data
/// `[0, 1, 2^62]`, scales `[0, 1, 2^58]`, two zero indices) cannot return it.
#[test]
fn quantized_run_of_a_valid_empty_output_with_huge_dims() {
    use gather_jit::{
        BlockQuantization, DType, Error, QuantizedKernel, QuantizedSignature, Signature,
    };
    use ndarray::{ArrayD, IxDyn};

    // The gathers refuse such an output (of bytes, even).
    let gather = Signature::gather(&[0, 1, 1 << 62], &[2], 1, 0).with_dtype(DType::U8);
    assert!(matches!(
        gather.validate(),
        Err(Error::SizeOverflow { what: "output", .. })
    ));
    let sig = QuantizedSignature::block_quantized(
        &[0, 1, 1 << 62],
        &[2],
        BlockQuantization {
            gather_axis: 1,
            quantize_axis: 2,
            block_size: 16,
            bits: 8,
            zero_points: false,
        },
    );
    let kernel = match QuantizedKernel::compile(&sig) {
        Err(e) => {
            assert!(matches!(e, Error::SizeOverflow { .. }), "{e}");
            return;
        }
        Ok(kernel) => kernel,
    };
    let data = ArrayD::<u8>::zeros(IxDyn(&[0, 1, 1 << 62]));
    let scales = ArrayD::<f32>::zeros(IxDyn(&[0, 1, 1 << 58]));
    let indices = ndarray::arr1(&[0i64, 0]);
    let out = kernel.run(data.view(), indices.view(), scales.view(), None);
    // Now: Err(BufferMismatch { what: "output", .., actual: "ShapeError/Overflow: ..." }).
    assert!(out.is_ok(), "valid, but run fails: {out:?}");
}

/// Fuzz finding (issue 24's run; fixed, see the test below): `GatherBlockQuantized(gather_axis=4,
/// quantize_axis=5, block_size=16, bits=4)` on data of rank 61, `[1, 1, 1, 1, 1, 0, 3, 3, ...,
/// 2]` (the quantize axis empty, then dozens of dims of 3), a scalar i16 index, wrap/clamp. Valid
/// (it has no bytes), and `QuantizedKernel::compile` panics with "attempt to multiply with
/// overflow" in `src/quant/lower/mod.rs`'s `runs` (the product of the dims after the quantize axis).
const QUANTIZED_DEEP_EMPTY_AXIS_INPUT: [u8; 74] = [
    0xC2, 0xA5, 0xD5, 0xD2, 0xD2, 0xD2, 0x41, 0x30, 0xE5, 0xCE, 0xF3, 0x00, 0xF9, 0xF8, 0xF8, 0xF8,
    0xF8, 0xF8, 0xF8, 0xF8, 0xF9, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F,
    0x00, 0xF4, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F,
    0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F, 0x6F,
    0x6F, 0x6F, 0x6F, 0x6F, 0x00, 0xF4, 0x6F, 0x6F, 0x00, 0xF4,
];

#[test]
fn fuzz_quantized_deep_empty_axis_input_passes() {
    case::check(&QUANTIZED_DEEP_EMPTY_AXIS_INPUT);
}

/// The same zero-dim rule, minimal (the fuzz run found it as above): data `[0, 2^62, 4, 1]`
/// (8 bits, gathered along axis 0 by indices `[0]`, quantized along the last axis) and
/// its output `[0, 2^62, 4, 1]` are valid, and `QuantizedKernel::compile` panics with "attempt
/// to multiply with overflow" (`src/quant/lower/mod.rs`: the rows of a slice, `2^62 * 4`), as does
/// `interpret_quantized` (`interp.rs`: the values after the gather axis), in every build with
/// overflow checks (tests, the `checked` profile, fuzzing); release builds wrap silently.
#[test]
fn quantized_compile_of_an_empty_table_with_huge_dims_does_not_overflow() {
    use gather_jit::interp::interpret_quantized;
    use gather_jit::{BlockQuantization, Error, QuantizedKernel, QuantizedSignature};

    let sig = QuantizedSignature::block_quantized(
        &[0, 1 << 62, 4, 1],
        &[0],
        BlockQuantization {
            gather_axis: 0,
            quantize_axis: 3,
            block_size: 16,
            bits: 8,
            zero_points: false,
        },
    );
    match sig.validate() {
        Err(e) => {
            assert!(matches!(e, Error::SizeOverflow { .. }), "{e}");
            assert_eq!(QuantizedKernel::compile(&sig).err(), Some(e));
        }
        Ok(layout) => {
            let kernel = QuantizedKernel::compile(&sig).expect("a valid signature compiles");
            let expected = interpret_quantized(&layout, &[], &[], &[], None);
            assert_eq!(expected, Ok(Vec::new()));
            assert_eq!(kernel.run_bytes(&[], &[], &[], None, &mut []), Ok(()));
        }
    }
}

/// The scatter seeds (`fuzz/src/scatter.rs`'s `seeds`) pass the differential check, name
/// every flavor with every op it defines and every reduction it has (and `use_init_val =
/// false` where it exists), all thirteen dtypes and eight index types among cases that run,
/// and are in the kept corpus (`cargo run --example scatter_seeds` in `fuzz/` writes them).
#[test]
fn scatter_seeds_cover_every_flavor_and_reduction_and_are_kept() {
    use gather_jit::scatter::{ScatterFlavor, ScatterOp};
    use std::collections::BTreeSet;

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/differential");
    let mut ran = BTreeSet::new();
    let (mut dtypes, mut index_types) = (BTreeSet::new(), BTreeSet::new());
    for (name, bytes) in case::scatter::seeds() {
        assert!(case::scatter::is_scatter(&bytes), "{name}");
        let case = case::scatter::decode(&bytes);
        let result = std::panic::catch_unwind(|| case.check());
        assert!(result.is_ok(), "seed {name} fails");
        let kept = std::fs::read(dir.join(format!("scatter-{name}")));
        assert_eq!(
            kept.ok(),
            Some(bytes),
            "seed {name} is not in the corpus as written"
        );
        let sig = &case.signature;
        if case.kind().starts_with("scatter ran") {
            ran.insert((
                sig.op.name().to_string(),
                sig.flavor.name(),
                sig.reduction.name(),
                sig.use_init_val,
            ));
            dtypes.insert(format!("{:?}", sig.dtype));
            index_types.insert(format!("{:?}", sig.index_type));
        }
    }
    for op in [
        ScatterOp::Nd,
        ScatterOp::Elements { axis: 0 },
        ScatterOp::Update { axis: 0 },
    ] {
        for flavor in ScatterFlavor::ALL {
            if !flavor.supports(op.name()) {
                continue;
            }
            for &reduction in flavor.reductions() {
                for init in [true, false] {
                    if !init && !flavor.has_use_init_val() {
                        continue;
                    }
                    let key = (op.name().to_string(), flavor.name(), reduction.name(), init);
                    assert!(ran.contains(&key), "no seed runs {key:?}");
                }
            }
        }
    }
    assert_eq!(dtypes.len(), 13, "{dtypes:?}");
    assert_eq!(index_types.len(), 8, "{index_types:?}");
}
