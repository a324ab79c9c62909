//! Quantized gathers: the vectors from ONNX Runtime, the definition and `gguf.quants`
//! (`tests/conformance/quantized/`, written by `scripts/quantized/make_vectors.py`) through the
//! interpreter and the JIT, property tests of the JIT against the interpreter on random
//! attributes, shapes and indices, and the checked entry points.

use gather_jit::interp::interpret_quantized;
use gather_jit::quant::Quantization;
use gather_jit::{
    BlockQuantization, DType, Error, GgufFormat, IndexPolicy, IndexType, NegativeIndices,
    OutOfRange, QuantizedKernel, QuantizedSignature,
};
use gather_jit_workloads::XorShift;
use half::{bf16, f16};
use ndarray::Array;
use proptest::prelude::*;
use serde_json::Value;

use crate::vectors::quantized::{Loaded, case_files, dtype, floats, load, shape};

/// An implementation under test: signature, data, indices, scales, zero points -> output.
type Runner<'a> = &'a dyn Fn(
    &QuantizedSignature,
    &[u8],
    &[u8],
    &[u8],
    Option<&[u8]>,
) -> gather_jit::Result<Vec<u8>>;

/// The category of a case's `expect_error` that each error of this crate falls under.
fn category(error: &Error) -> &'static str {
    match error {
        Error::IndexOutOfRange { .. } => "index out of bounds",
        Error::InvalidQuantization { what, .. } if what.starts_with("bits") => "unsupported bits",
        Error::InvalidQuantization { what, .. } if what.starts_with("block_size") => {
            "invalid block size"
        }
        Error::BufferMismatch { .. } => "shape mismatch",
        _ => "other",
    }
}

/// Runs one case through `run` (the interpreter or the JIT); `false` if the case is one this
/// crate deliberately does differently (said in the file) and has no counterpart to run.
fn run_case(name: &str, case: &Value, run: Runner<'_>) -> bool {
    let expect_error = case.get("expect_error").and_then(Value::as_str);
    let inputs = match load(name, case) {
        Loaded::Counterpart => return false,
        Loaded::Invalid(e) => {
            match expect_error {
                Some(expected) => assert_eq!(category(&e), expected, "{name}: {e}"),
                None => panic!("{name}: {e}"),
            }
            return true;
        }
        Loaded::Mismatch(what) => {
            assert_eq!(expect_error, Some("shape mismatch"), "{name}: {what} shape");
            return true;
        }
        Loaded::Inputs(inputs) => inputs,
    };
    let result = run(
        &inputs.signature,
        &inputs.data,
        &inputs.indices,
        &inputs.scales,
        inputs.zero_points.as_deref(),
    );
    match (result, expect_error) {
        (Ok(output), None) => {
            let expected = &case["expected"];
            assert_eq!(
                inputs.layout.output_shape(),
                &shape(expected)[..],
                "{name}: output shape"
            );
            let want = floats(expected, dtype(expected["dtype"].as_str().expect("dtype")));
            assert!(output == want, "{name}: output differs");
        }
        (Err(e), Some(expected)) => assert_eq!(category(&e), expected, "{name}: {e}"),
        (Ok(_), Some(expected)) => panic!("{name}: expected {expected:?}, got an output"),
        (Err(e), None) => panic!("{name}: {e}"),
    }
    true
}

fn interpreter(
    sig: &QuantizedSignature,
    data: &[u8],
    indices: &[u8],
    scales: &[u8],
    zero_points: Option<&[u8]>,
) -> gather_jit::Result<Vec<u8>> {
    interpret_quantized(&sig.validate()?, data, indices, scales, zero_points)
}

fn jit(
    sig: &QuantizedSignature,
    data: &[u8],
    indices: &[u8],
    scales: &[u8],
    zero_points: Option<&[u8]>,
) -> gather_jit::Result<Vec<u8>> {
    let kernel = QuantizedKernel::compile(sig)?;
    let mut output =
        vec![0xa5; kernel.layout().output_shape().iter().product::<usize>() * sig.dtype.size()];
    kernel.run_bytes(data, indices, scales, zero_points, &mut output)?;
    Ok(output)
}

fn run_all(run: Runner<'_>) -> usize {
    let files = case_files();
    let mut ran = 0;
    for path in &files {
        let case: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("JSON");
        let name = format!(
            "{}/{}",
            case["suite"].as_str().unwrap_or("?"),
            case["name"].as_str().unwrap_or("?")
        );
        ran += usize::from(run_case(&name, &case, run));
    }
    ran
}

#[test]
fn every_quantized_vector_passes_the_interpreter() {
    let ran = run_all(&interpreter);
    // 66 files; ORT's refusals of what the definition allows are checked by their
    // counterparts instead.
    assert!(ran >= 60, "{ran} cases");
    println!("quantized conformance (interpreter): {ran} cases passed");
}

#[test]
fn every_quantized_vector_passes_the_jit() {
    let ran = run_all(&jit);
    assert!(ran >= 60, "{ran} cases");
    println!("quantized conformance (JIT): {ran} cases passed");
}

#[test]
fn a_bad_index_names_its_position_and_value() {
    let sig = QuantizedSignature::block_quantized(
        &[4, 32],
        &[2, 2],
        BlockQuantization {
            gather_axis: 0,
            quantize_axis: 1,
            block_size: 16,
            bits: 4,
            zero_points: false,
        },
    );
    let kernel = QuantizedKernel::compile(&sig).expect("compiles");
    let data = vec![0x21u8; 4 * 16];
    let scales = vec![0u8; 4 * 2 * 4];
    let idx: Vec<u8> = [0i64, -4, 3, -5]
        .iter()
        .flat_map(|i| i.to_ne_bytes())
        .collect();
    let mut out = vec![0u8; 4 * 32 * 4];
    let err = kernel
        .run_bytes(&data, &idx, &scales, None, &mut out)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "GatherBlockQuantized: index -5 at position [1, 1] of indices is out of range for data dim 0 of size 4"
    );
    let interpreted =
        interpret_quantized(&sig.validate().expect("valid"), &data, &idx, &scales, None);
    assert_eq!(interpreted.unwrap_err(), err);
}

#[test]
fn invalid_quantizations_are_errors_that_say_what_is_accepted() {
    let block = |block_size, bits, data: &[usize]| {
        QuantizedSignature::block_quantized(
            data,
            &[1],
            BlockQuantization {
                block_size,
                bits,
                ..BlockQuantization::default()
            },
        )
        .validate()
        .unwrap_err()
        .to_string()
    };
    assert_eq!(
        block(24, 4, &[2, 48]),
        "GatherBlockQuantized: block_size must be a power of two of at least 16, not 24"
    );
    assert_eq!(
        block(8, 4, &[2, 48]),
        "GatherBlockQuantized: block_size must be a power of two of at least 16, not 8"
    );
    assert_eq!(
        block(16, 3, &[2, 48]),
        "GatherBlockQuantized: bits must be 4 or 8, not 3"
    );
    assert_eq!(
        block(16, 4, &[2, 47]),
        "GatherBlockQuantized: data's last dim is 47: 4-bit values pack 2 to a byte along it, so it must be a multiple of 2"
    );
    let gguf = QuantizedSignature::gguf(GgufFormat::Q4_0, 4, 48, &[1])
        .validate()
        .unwrap_err();
    assert_eq!(
        gguf.to_string(),
        "GatherGGUF: a row of 48 values is not a whole number of 32-value q4_0 blocks"
    );
    let f64_out = QuantizedSignature::gguf(GgufFormat::Q8_0, 4, 64, &[1])
        .with_dtype(DType::F64)
        .validate()
        .unwrap_err();
    assert!(
        matches!(f64_out, Error::InvalidQuantization { .. }),
        "{f64_out}"
    );
    let axis = QuantizedSignature::block_quantized(
        &[2, 32],
        &[1],
        BlockQuantization {
            quantize_axis: 2,
            block_size: 16,
            ..BlockQuantization::default()
        },
    )
    .validate()
    .unwrap_err();
    assert!(
        matches!(
            axis,
            Error::AxisOutOfRange {
                axis: 2,
                rank: 2,
                ..
            }
        ),
        "{axis}"
    );
}

#[test]
fn run_checks_shapes_and_types_and_reads_strided_views() {
    let sig = QuantizedSignature::block_quantized(
        &[3, 32],
        &[2],
        BlockQuantization {
            block_size: 16,
            zero_points: true,
            ..BlockQuantization::default()
        },
    );
    let kernel = QuantizedKernel::compile(&sig).expect("compiles");
    let data = Array::from_shape_fn((3, 16), |(r, c)| (r * 16 + c * 7) as u8);
    let scales = Array::from_shape_fn((3, 2), |(r, c)| 0.25 * (r as f32 + 1.0) - c as f32);
    let zp = Array::from_shape_fn((3, 1), |(r, _)| 0x53u8 + r as u8);
    let idx = ndarray::array![2i64, 0];
    let out = kernel
        .run(data.view(), idx.view(), scales.view(), Some(zp.view()))
        .expect("runs");
    let want = interpret_quantized(
        kernel.layout(),
        data.as_slice().expect("contiguous"),
        &[2i64, 0]
            .iter()
            .flat_map(|i| i.to_ne_bytes())
            .collect::<Vec<_>>(),
        &scales
            .iter()
            .flat_map(|s| s.to_ne_bytes())
            .collect::<Vec<_>>(),
        Some(zp.as_slice().expect("contiguous")),
    )
    .expect("interprets");
    let got: Vec<u8> = out.iter().flat_map(|v| v.to_ne_bytes()).collect();
    assert_eq!(got, want);
    assert_eq!(out.shape(), &[2, 32]);

    // Every other column of a wider array: not contiguous, same values.
    let wide = Array::from_shape_fn((3, 32), |(r, c)| data[(r, c / 2)]);
    let strided = wide.slice(ndarray::s![.., ..;2]);
    assert!(strided.as_slice().is_none());
    let again = kernel
        .run(strided, idx.view(), scales.view(), Some(zp.view()))
        .expect("runs");
    assert_eq!(again, out);

    let wrong_scales = Array::<f32, _>::zeros((3, 1));
    let e = kernel
        .run(
            data.view(),
            idx.view(),
            wrong_scales.view(),
            Some(zp.view()),
        )
        .unwrap_err();
    assert!(
        matches!(e, Error::BufferMismatch { what: "scales", .. }),
        "{e}"
    );
    let f16_scales = scales.mapv(f16::from_f32);
    let e = kernel
        .run(data.view(), idx.view(), f16_scales.view(), Some(zp.view()))
        .unwrap_err();
    assert!(matches!(e, Error::DTypeMismatch { .. }), "{e}");
    let e = kernel
        .run(
            data.view(),
            idx.mapv(|i| i as i32).view(),
            scales.view(),
            Some(zp.view()),
        )
        .unwrap_err();
    assert!(matches!(e, Error::IndexTypeMismatch { .. }), "{e}");
    let e = kernel
        .run(data.view(), idx.view(), scales.view(), None)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::BufferMismatch {
                what: "zero_points",
                ..
            }
        ),
        "{e}"
    );
}

/// Random block-quantized and GGUF signatures with inputs.
#[derive(Debug, Clone)]
struct Case {
    signature: QuantizedSignature,
    seed: u64,
    bad_index: bool,
}

fn block_case() -> impl Strategy<Value = Case> {
    (
        1usize..=3,
        0usize..3,
        0usize..3,
        0usize..3,
        any::<bool>(),
        any::<bool>(),
        0usize..3,
        prop::collection::vec(0usize..4, 1..=3),
        any::<u64>(),
        0u8..10,
    )
        .prop_map(|(rank, g, q, bs, bits4, zp, dt, extra, seed, policy)| {
            let block_size = [16usize, 32, 64][bs];
            let bits = if bits4 { 4 } else { 8 };
            let g = g % rank;
            let q = q % rank;
            // Dims: small, the quantize axis long enough for a block and a partial one.
            let mut dims: Vec<usize> = (0..rank)
                .map(|i| 1 + (extra[i % extra.len()] + i) % 3)
                .collect();
            dims[q] = block_size + 2 * (extra[0] + 1) + if extra[0] == 0 { block_size } else { 0 };
            if bits == 4 && dims[rank - 1] % 2 == 1 {
                dims[rank - 1] += 1;
            }
            let indices_shape: Vec<usize> = extra.iter().map(|&e| e % 3 + 1).take(2).collect();
            let dtype = [DType::F32, DType::F16, DType::Bf16][dt];
            let policy = match policy {
                0 => IndexPolicy {
                    negative: NegativeIndices::Invalid,
                    out_of_range: OutOfRange::Zero,
                },
                1 => IndexPolicy {
                    negative: NegativeIndices::Wrap,
                    out_of_range: OutOfRange::Clamp,
                },
                _ => IndexPolicy {
                    negative: NegativeIndices::Wrap,
                    out_of_range: OutOfRange::Error,
                },
            };
            let signature = QuantizedSignature::block_quantized(
                &dims,
                &indices_shape,
                BlockQuantization {
                    gather_axis: g as i64,
                    quantize_axis: q as i64,
                    block_size,
                    bits,
                    zero_points: zp,
                },
            )
            .with_dtype(dtype)
            .with_index_type(if seed % 2 == 0 {
                IndexType::I64
            } else {
                IndexType::I32
            })
            .with_policy(policy);
            Case {
                signature,
                seed,
                bad_index: seed % 5 == 0,
            }
        })
}

fn gguf_case() -> impl Strategy<Value = Case> {
    (
        any::<bool>(),
        1usize..6,
        1usize..4,
        0usize..3,
        prop::collection::vec(1usize..4, 0..=2),
        any::<u64>(),
    )
        .prop_map(|(q4, rows, blocks, dt, indices_shape, seed)| {
            let format = if q4 {
                GgufFormat::Q4_0
            } else {
                GgufFormat::Q8_0
            };
            let signature = QuantizedSignature::gguf(format, rows, blocks * 32, &indices_shape)
                .with_dtype([DType::F32, DType::F16, DType::Bf16][dt]);
            Case {
                signature,
                seed,
                bad_index: seed % 7 == 0,
            }
        })
}

/// Deterministic pseudo-random bytes.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut bytes = vec![0; len];
    XorShift::new(seed).fill(&mut bytes);
    bytes
}

/// Inputs for `case`: random data, finite scales (every float pattern but NaN/inf), indices
/// mostly in range (negatives included), one out of range if `bad_index`.
fn inputs(case: &Case) -> (Vec<u8>, Vec<u8>, Vec<u8>, Option<Vec<u8>>) {
    let layout = case.signature.validate().expect("valid");
    let sig = &case.signature;
    let mut data = noise(case.seed, layout.data_bytes_shape().iter().product());
    if let Quantization::Gguf(format) = sig.quantization {
        // Each block's scale: a finite f16.
        for block in data.chunks_mut(format.block_bytes()) {
            let d = f16::from_f32((block[0] as f32 - 128.0) / 64.0);
            block[..2].copy_from_slice(&d.to_le_bytes());
        }
    }
    let count: usize = layout.scales_shape().iter().product::<usize>()
        * usize::from(!layout.scales_shape().is_empty());
    let raw = noise(case.seed ^ 0x55, count);
    let mut scales = Vec::new();
    for r in raw {
        let value = (r as f32 - 100.0) / 8.0;
        match sig.dtype {
            DType::F16 => scales.extend_from_slice(&f16::from_f32(value).to_ne_bytes()),
            DType::Bf16 => scales.extend_from_slice(&bf16::from_f32(value).to_ne_bytes()),
            _ => scales.extend_from_slice(&(value * 1.37).to_ne_bytes()),
        }
    }
    let zero_points = layout
        .zero_points_bytes_shape()
        .map(|shape| noise(case.seed ^ 0xaa, shape.iter().product()));
    let dim = sig.data_shape[match sig.quantization {
        Quantization::Block(q) => q.gather_axis as usize,
        Quantization::Gguf(_) => 0,
    }] as i64;
    let n: usize = sig.indices_shape.iter().product();
    let picks = noise(case.seed ^ 0x33, n);
    let mut indices = Vec::new();
    for (i, p) in picks.iter().enumerate() {
        let mut v = i64::from(*p) % dim;
        if p % 3 == 0 && sig.policy.negative == NegativeIndices::Wrap {
            v -= dim;
        }
        if case.bad_index && i == n / 2 {
            v = dim + i64::from(*p % 3);
        }
        match sig.index_type {
            IndexType::I32 => indices.extend_from_slice(&(v as i32).to_ne_bytes()),
            _ => indices.extend_from_slice(&v.to_ne_bytes()),
        }
    }
    (data, indices, scales, zero_points)
}

fn jit_matches_interpreter(case: &Case) -> Result<(), TestCaseError> {
    let (data, indices, scales, zp) = inputs(case);
    let layout = case.signature.validate().expect("valid");
    let want = interpret_quantized(&layout, &data, &indices, &scales, zp.as_deref());
    let got = jit(&case.signature, &data, &indices, &scales, zp.as_deref());
    match (&want, got) {
        (Ok(w), Ok(g)) => prop_assert!(*w == g, "{}: outputs differ", case.signature),
        (Err(w), Err(g)) => prop_assert_eq!(w, &g),
        (w, g) => prop_assert!(false, "{}: {:?} vs {:?}", case.signature, w, g.err()),
    }
    // Split across threads: the same bytes, or the same first bad index.
    let kernel = QuantizedKernel::compile(&case.signature).expect("compiles");
    for threads in [2, 3, 7] {
        let mut output = vec![0xEE; layout.output_bytes()];
        let got = kernel
            .run_bytes_parallel(
                &data,
                &indices,
                &scales,
                zp.as_deref(),
                &mut output,
                threads,
            )
            .map(|()| output);
        prop_assert_eq!(&got, &want, "{} on {} threads", case.signature, threads);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn block_quantized_jit_matches_the_interpreter(case in block_case()) {
        jit_matches_interpreter(&case)?;
    }

    #[test]
    fn gguf_jit_matches_the_interpreter(case in gguf_case()) {
        jit_matches_interpreter(&case)?;
    }
}

#[test]
fn an_output_of_every_float_type_matches_the_interpreter_on_a_large_table() {
    // The SIMD path (f32, whole blocks) and the scalar one (f16, bf16) over many blocks.
    for dtype in [DType::F32, DType::F16, DType::Bf16] {
        for bits in [4u8, 8] {
            let case = Case {
                signature: QuantizedSignature::block_quantized(
                    &[64, 512],
                    &[1, 9],
                    BlockQuantization {
                        block_size: 32,
                        bits,
                        zero_points: bits == 8,
                        ..BlockQuantization::default()
                    },
                )
                .with_dtype(dtype),
                seed: 7,
                bad_index: false,
            };
            jit_matches_interpreter(&case).expect("agrees");
        }
    }
}

#[test]
fn a_quantized_kernel_of_any_output_type_calls_no_function() {
    // Kernels compiled for other targets may refer to no symbol but memcpy, memmove and
    // memset: f16 output is rounded in the code, not by a helper.
    let block = QuantizedSignature::block_quantized(
        &[8, 64],
        &[3],
        BlockQuantization {
            quantize_axis: 1,
            block_size: 16,
            ..BlockQuantization::default()
        },
    );
    let gguf = QuantizedSignature::gguf(GgufFormat::Q8_0, 4, 64, &[2]);
    for dtype in [DType::F32, DType::F16, DType::Bf16] {
        for signature in [&block, &gguf] {
            let signature = signature.clone().with_dtype(dtype);
            let clif = QuantizedKernel::compile(&signature)
                .expect("compiles")
                .clif()
                .expect("CLIF");
            let calls = clif
                .lines()
                .map(str::trim_start)
                .filter(|line| line.starts_with("fn") || line.contains("call"))
                .collect::<Vec<_>>();
            assert!(calls.is_empty(), "{signature}: {calls:?}");
        }
    }
}

#[test]
fn a_prefill_sized_output_matches_the_interpreter() {
    // 32 MiB of f32 output, as in a prompt's embedding lookup: thousands of rows of whole
    // blocks through the SIMD path.
    let block = QuantizedSignature::block_quantized(
        &[512, 4096],
        &[2048],
        BlockQuantization {
            block_size: 32,
            ..BlockQuantization::default()
        },
    );
    let gguf = QuantizedSignature::gguf(GgufFormat::Q4_0, 512, 4096, &[2048]);
    for signature in [block, gguf] {
        let case = Case {
            signature,
            seed: 11,
            bad_index: false,
        };
        jit_matches_interpreter(&case).expect("agrees");
    }
}

/// Runs `f` on a thread of its own and fails the test if it has not returned within `limit`
/// (the thread is left spinning; the test binary exits when the tests end).
fn within<T: Send + 'static>(
    limit: std::time::Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(f());
    });
    receive
        .recv_timeout(limit)
        .unwrap_or_else(|_| panic!("{what} did not return within {limit:?}"))
}

/// Issue 28's reproducer: data `[1, 2^60, 0]` (no bytes), a scalar index, scales
/// `[1, 2^56, 0]`. The kernel looped over the 2^60 dim for an output of no bytes.
#[test]
fn an_empty_output_costs_nothing_whatever_the_other_dims() {
    let big = 1usize << 60;
    let block = |gather_axis, quantize_axis| BlockQuantization {
        gather_axis,
        quantize_axis,
        block_size: 16,
        bits: 8,
        zero_points: false,
    };
    let index = |value: i64| value.to_ne_bytes().to_vec();
    /// Data, gather axis, quantize axis, the index, and the bad value reported (if any).
    type Case<'a> = (&'a [usize], i64, i64, i64, Option<i128>);
    let cases: [Case; 5] = [
        (&[1, big, 0], 0, 1, 0, None),
        (&[1, big, 0], 0, 1, 3, Some(3)),
        (&[1, big, 0], 1, 1, (big - 1) as i64, None),
        (&[big, 2, 0], 1, 0, -3, Some(-3)),
        (&[0, big >> 4, 16], 1, 2, 5, None),
    ];
    for (data_shape, g, q, value, bad) in cases {
        let sig = QuantizedSignature::block_quantized(data_shape, &[], block(g, q));
        let layout = sig.validate().expect("valid: every buffer is empty");
        assert_eq!(layout.output_bytes(), 0, "{sig}");
        let scales = vec![0u8; layout.scales_bytes()];
        let kernel = QuantizedKernel::compile(&sig).expect("compiles");
        let idx = index(value);
        let (idx2, scales2) = (idx.clone(), scales.clone());
        let got = within(
            std::time::Duration::from_secs(10),
            &sig.to_string(),
            move || kernel.run_bytes(&[], &idx2, &scales2, None, &mut []),
        );
        let want = interpret_quantized(&layout, &[], &idx, &scales, None).map(|_| ());
        assert_eq!(got, want, "{sig}");
        match bad {
            None => assert_eq!(got, Ok(()), "{sig}"),
            Some(bad) => assert!(
                matches!(got, Err(Error::IndexOutOfRange { value, .. }) if value == bad),
                "{sig}: {got:?}"
            ),
        }
    }
}

/// With an empty output, each index is checked once, as the plain gathers do (the dims before
/// the gather axis may be empty too); under `Zero` none is; under `Clamp` an index into an
/// empty dim is an error.
#[test]
fn empty_outputs_check_each_index_once_as_the_other_gathers_do() {
    let policies = [
        (NegativeIndices::Wrap, OutOfRange::Error),
        (NegativeIndices::Invalid, OutOfRange::Error),
        (NegativeIndices::Wrap, OutOfRange::Zero),
        (NegativeIndices::Wrap, OutOfRange::Clamp),
    ];
    // (logical data, gather axis, indices)
    let shapes: [(&[usize], i64, &[usize]); 5] = [
        (&[0, 4, 32], 1, &[2, 3]),
        (&[3, 0, 32], 1, &[2]),
        (&[3, 4, 0], 0, &[3]),
        (&[2, 4, 0], 1, &[2, 2]),
        (&[0, 32], 0, &[3]),
    ];
    for (data_shape, g, indices_shape) in shapes {
        for (negative, out_of_range) in policies {
            let policy = IndexPolicy {
                negative,
                out_of_range,
            };
            let sig = QuantizedSignature::block_quantized(
                data_shape,
                indices_shape,
                BlockQuantization {
                    gather_axis: g,
                    quantize_axis: data_shape.len() as i64 - 1,
                    block_size: 16,
                    bits: 8,
                    zero_points: false,
                },
            )
            .with_policy(policy);
            let layout = sig.validate().expect("valid");
            let count: usize = indices_shape.iter().product();
            // One negative index and one past the end, after a good one.
            let values: Vec<i64> = (0..count as i64)
                .map(|i| [0, -1, 9][i as usize % 3])
                .collect();
            let idx: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
            let scales = vec![0u8; layout.scales_bytes()];
            let data = vec![0u8; layout.data_bytes()];
            let mut out = vec![0u8; layout.output_bytes()];
            let kernel = QuantizedKernel::compile(&sig).expect("compiles");
            let got = kernel.run_bytes(&data, &idx, &scales, None, &mut out);
            let want = interpret_quantized(&layout, &data, &idx, &scales, None).map(|_| ());
            assert_eq!(got, want, "{sig}");
            // The plain Gather on the same shapes reports the same index (or none).
            let plain = gather_jit::Signature::gather(data_shape, indices_shape, g, 0)
                .with_dtype(DType::F32)
                .with_index_type(IndexType::I64)
                .with_policy(policy)
                .validate()
                .expect("valid");
            let plain_data = vec![0u8; plain.data_len() * 4];
            let expected = gather_jit::interp::interpret(&plain, &plain_data, &idx).map(|_| ());
            let position = |r: &gather_jit::Result<_>| match r {
                Err(Error::IndexOutOfRange {
                    position, value, ..
                }) => Some((position.clone(), *value)),
                _ => None,
            };
            assert_eq!(position(&got), position(&expected), "{sig}");
            assert_eq!(got.is_ok(), expected.is_ok(), "{sig}");
        }
    }
}

/// Ranges of the indices partition the work: run one by one they write what one call writes,
/// and split across threads the error is the first bad index, whichever part met it.
#[test]
fn a_split_quantized_gather_writes_one_calls_bytes_and_reports_the_first_bad_index() {
    // Gather axis 1 with two positions before it, so each range is written at two places.
    let signature = QuantizedSignature::block_quantized(
        &[2, 10, 64],
        &[12],
        BlockQuantization {
            gather_axis: 1,
            quantize_axis: 2,
            block_size: 32,
            ..BlockQuantization::default()
        },
    );
    let case = Case {
        signature: signature.clone(),
        seed: 3,
        bad_index: false,
    };
    let (data, mut indices, scales, _) = inputs(&case);
    let layout = signature.validate().expect("valid");
    let kernel = QuantizedKernel::compile(&signature).expect("compiles");
    assert_eq!(kernel.outer_extent(), 12);
    let whole = interpret_quantized(&layout, &data, &indices, &scales, None).expect("in range");
    let mut output = vec![0xEE; layout.output_bytes()];
    for range in [0..5, 5..5, 5..11, 11..12] {
        // SAFETY: every buffer has the layout's size; the ranges lie within the 12 indices.
        unsafe {
            kernel.call_range(
                data.as_ptr(),
                indices.as_ptr(),
                scales.as_ptr(),
                std::ptr::null(),
                output.as_mut_ptr(),
                range,
            )
        }
        .expect("in range");
    }
    assert!(output == whole, "ranges write what one call writes");

    // Bad indices at positions 9 and 5 (i64): every split reports position 5.
    for (position, value) in [(9usize, 10i64), (5, -11)] {
        indices[position * 8..position * 8 + 8].copy_from_slice(&value.to_ne_bytes());
    }
    for threads in 1..=12 {
        let mut output = vec![0; layout.output_bytes()];
        let error = kernel
            .run_bytes_parallel(&data, &indices, &scales, None, &mut output, threads)
            .expect_err("bad indices");
        assert_eq!(
            error.to_string(),
            "GatherBlockQuantized: index -11 at position [5] of indices is out of range for data dim 1 of size 10",
            "{threads} threads"
        );
    }
    assert_eq!(kernel.parallel_parts(100), 12, "at most a part per index");
}

/// Both kernel types through [`CompiledOp`]: the same questions, and `run_inputs` agrees with
/// each family's interpreter; a plain gather refuses scales and zero points.
#[test]
fn every_kernel_type_answers_through_compiled_op() {
    use gather_jit::interp::interpret;
    use gather_jit::{CompiledOp, Inputs, Kernel, Signature};
    let plain_sig = Signature::gather(&[5, 3], &[4], 0, 0);
    let quantized_sig = QuantizedSignature::gguf(GgufFormat::Q8_0, 6, 64, &[2, 5]);
    let case = Case {
        signature: quantized_sig.clone(),
        seed: 11,
        bad_index: false,
    };
    let (q_data, q_indices, q_scales, _) = inputs(&case);
    let p_data: Vec<u8> = (0..5 * 3 * 4).map(|i| i as u8).collect();
    let p_indices: Vec<u8> = [4i64, 0, -1, 2]
        .iter()
        .flat_map(|i| i.to_ne_bytes())
        .collect();
    let kernels: Vec<(Box<dyn CompiledOp>, Inputs<'_>, Vec<u8>)> = vec![
        (
            Box::new(Kernel::compile(&plain_sig).expect("compiles")),
            Inputs {
                data: &p_data,
                indices: &p_indices,
                ..Inputs::default()
            },
            interpret(&plain_sig.validate().expect("valid"), &p_data, &p_indices).expect("runs"),
        ),
        (
            Box::new(QuantizedKernel::compile(&quantized_sig).expect("compiles")),
            Inputs {
                data: &q_data,
                indices: &q_indices,
                scales: &q_scales,
                zero_points: None,
                updates: &[],
            },
            interpret_quantized(
                &quantized_sig.validate().expect("valid"),
                &q_data,
                &q_indices,
                &q_scales,
                None,
            )
            .expect("runs"),
        ),
    ];
    let expected_shapes: [&[usize]; 2] = [&[4, 3], &[2, 5, 64]];
    for ((kernel, inputs, expected), shape) in kernels.iter().zip(expected_shapes) {
        assert_eq!(kernel.output_shape(), shape);
        assert_eq!(kernel.dtype(), DType::F32);
        assert!(kernel.explain().contains(&kernel.signature_text()));
        assert!(kernel.clif().expect("clif").contains("function"));
        assert!(!kernel.machine_code().is_empty());
        for threads in [1, 2] {
            let mut output = vec![0xEE; expected.len()];
            kernel
                .run_inputs(*inputs, &mut output, threads)
                .expect("runs");
            assert!(output == *expected, "{} on {threads}", kernel.op_name());
        }
    }
    let (plain, inputs, expected) = &kernels[0];
    let mut output = vec![0; expected.len()];
    let scales = [0u8; 4];
    let error = plain
        .run_inputs(
            Inputs {
                scales: &scales,
                ..*inputs
            },
            &mut output,
            1,
        )
        .expect_err("a gather takes no scales");
    assert!(error.to_string().contains("scales"), "{error}");
}
