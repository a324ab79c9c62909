//! Hostile inputs, each through the public API: sizes that overflow, outputs too large to
//! allocate, rank-0 tensors where the specs forbid them, extreme index values at every
//! position under every policy, wrong buffers and types, unaligned pointers, and what the
//! output holds after an index error. `docs/safety.md` states the contract these tests pin.

use gather_jit::interp::interpret;
use gather_jit::{
    DType, Error, Flavor, IndexPolicy, IndexType, Kernel, KernelCache, NegativeIndices, Options,
    OutOfRange, Signature,
};
use ndarray::{Array, ArrayD, IxDyn, arr0, array};

use crate::util::{i32_bytes, index_bytes};

/// Byte written over outputs before a run, to see what the run left untouched.
const SENTINEL: u8 = 0xA5;

/// Every index policy.
fn policies() -> Vec<IndexPolicy> {
    let mut all = Vec::new();
    for negative in [NegativeIndices::Wrap, NegativeIndices::Invalid] {
        for out_of_range in [OutOfRange::Error, OutOfRange::Zero, OutOfRange::Clamp] {
            all.push(IndexPolicy {
                negative,
                out_of_range,
            });
        }
    }
    all
}

/// `value` stored as `index_type`, or `None` if it does not fit.
fn encode(index_type: IndexType, value: i128) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    index_type.try_encode(value, &mut bytes).then_some(bytes)
}

/// Data bytes that are never zero and differ from their neighbours.
fn data_bytes(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(37) | 1).collect()
}

/// Runs `kernel` on fresh output filled with [`SENTINEL`]; returns the result and the output.
fn run_bytes(kernel: &Kernel, data: &[u8], indices: &[u8]) -> (gather_jit::Result<()>, Vec<u8>) {
    let bytes = kernel.validated().output_len() * kernel.signature().dtype.size();
    let mut output = vec![SENTINEL; bytes];
    let result = kernel.run_bytes(data, indices, &mut output);
    (result, output)
}

// ---------------------------------------------------------------------------------------------
// Sizes.

/// Element counts or byte sizes beyond `usize` / `isize`, in each tensor of each op, are
/// validation errors on every path into the JIT (never a panic, never a cache entry).
#[test]
fn overflowing_sizes_are_errors_on_every_path() {
    let max = usize::MAX;
    let half = isize::MAX as usize / 2 + 1; // 2 bytes each: one past isize::MAX bytes
    let cases: [(Signature, &str); 9] = [
        // Element count overflows usize.
        (Signature::gather(&[max, 2], &[1], 0, 0), "data"),
        (Signature::gather(&[4], &[max, 3], 0, 0), "indices"),
        (Signature::gather_elements(&[max, max], &[1, 1], 0), "data"),
        (Signature::gather_nd(&[2, max, max], &[1, 1], 0), "data"),
        // Byte size overflows isize (the element count fits).
        (
            Signature::gather(&[half], &[1], 0, 0).with_dtype(DType::F16),
            "data",
        ),
        (
            Signature::gather(&[4], &[half], 0, 0).with_index_type(IndexType::U16),
            "indices",
        ),
        // Inputs fit, the output does not: Gather multiplies data's and indices' dims.
        (
            Signature::gather(&[1 << 21, 1 << 20], &[1 << 21, 1 << 20], 0, 0)
                .with_index_type(IndexType::U8),
            "output",
        ),
        // GatherND: 2^31 tuples of 2^31-element slices of f64 (2^65 bytes).
        (
            Signature::gather_nd(&[2, 1 << 31], &[1 << 31, 1], 0)
                .with_dtype(DType::F64)
                .with_index_type(IndexType::U8),
            "output",
        ),
        // GatherElements: u8 indices fit, the same count of f64 outputs does not.
        (
            Signature::gather_elements(&[1], &[1 << 62], 0)
                .with_dtype(DType::F64)
                .with_index_type(IndexType::U8),
            "output",
        ),
    ];
    let cache = KernelCache::new(4);
    for (sig, tensor) in cases {
        let expected = sig.validate().expect_err("must not validate");
        assert!(
            matches!(expected, Error::SizeOverflow { what, .. } if what == tensor),
            "{sig}: {expected:?}"
        );
        assert_eq!(Kernel::compile(&sig).unwrap_err(), expected, "{sig}");
        assert_eq!(cache.get(&sig).unwrap_err(), expected, "{sig}");
        assert_eq!(gather_jit::jit(&sig).unwrap_err(), expected, "{sig}");
    }
    assert_eq!(cache.stats().entries, 0);
    assert_eq!(cache.stats().compilations, 0);

    // The convenience constructors go through the same check.
    let e = gather_jit::jit_gather(&[max, 2], &[1], 0, 0, &Options::default()).unwrap_err();
    assert!(
        matches!(e, Error::SizeOverflow { what: "data", .. }),
        "{e:?}"
    );
}

/// The largest tensors validation accepts (`isize::MAX` bytes) compile: the plan's strides
/// and extents stay within the immediates of the generated code.
#[test]
fn largest_valid_sizes_compile() {
    let big = isize::MAX as usize;
    for sig in [
        Signature::gather(&[big], &[1], 0, 0).with_dtype(DType::U8),
        Signature::gather(&[1, big / 8], &[1], 0, 0).with_dtype(DType::F64),
        Signature::gather_nd(&[big / 2, 2], &[1, 2], 0).with_dtype(DType::U8),
        Signature::gather(&[3], &[big / 8], 0, 0).with_dtype(DType::U8),
    ] {
        let kernel = Kernel::compile(&sig).unwrap_or_else(|e| panic!("{sig}: {e}"));
        assert_eq!(
            kernel.output_shape(),
            sig.validate().unwrap().output_shape()
        );
    }
}

/// Regression (found by this suite): a short loop with a huge stride panicked in the code
/// generator of debug builds. The innermost loop was unrolled by 8 (1-byte slices) even when its
/// extent was 2, and the unrolled offsets `k * stride` overflowed `u64` for a stride over
/// `u64::MAX / 7`. The unroll factor is now capped by the loop's extent.
#[test]
fn huge_stride_in_a_short_unrolled_loop_compiles() {
    let n = (1usize << 62) - 1; // data [2, n] u8 is isize::MAX - 1 bytes: valid
    for sig in [
        Signature::gather_elements(&[2, n], &[2, 1], 1).with_dtype(DType::U8),
        Signature::gather(&[2, n], &[1], 1, 0).with_dtype(DType::U8),
    ] {
        let kernel = Kernel::compile(&sig).unwrap_or_else(|e| panic!("{sig}: {e}"));
        assert_eq!(kernel.outer_extent(), 2, "{}", kernel.plan());
    }
}

/// An output that validates (under `isize::MAX` bytes) but that no allocator can provide:
/// `Kernel::run` returns `Allocation`, it does not abort. Here 2^49 bytes (512 TiB,
/// beyond the 47-bit user address space of x86-64 Linux, whatever the overcommit setting)
/// from 32 MiB of data and 16 MiB of indices.
#[test]
fn output_too_large_to_allocate_is_an_error() {
    let sig = Signature::gather(&[1 << 11, 1, 1 << 11], &[1 << 24], 1, 0)
        .with_dtype(DType::F64)
        .with_index_type(IndexType::U8);
    let kernel = Kernel::compile(&sig).expect("valid");
    assert_eq!(
        kernel.validated().output_len() as u64 * 8,
        1 << 49,
        "{}",
        kernel.plan()
    );
    let data = Array::<f64, _>::zeros(IxDyn(&sig.data_shape));
    let indices = Array::<u8, _>::zeros(IxDyn(&sig.indices_shape));
    let err = kernel.run(data.view(), indices.view()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Allocation {
                what: "the output",
                bytes,
                ..
            } if bytes == 1 << 49
        ),
        "{err:?}"
    );
    assert_eq!(err.category(), "allocation failed");
}

// ---------------------------------------------------------------------------------------------
// Rank 0.

/// Rank-0 tensors where the specs forbid them are validation errors through the JIT; where
/// they are allowed (Gather's scalar indices) the JIT runs them.
#[test]
fn rank_zero_where_forbidden_and_where_allowed() {
    let cache = KernelCache::new(4);
    let forbidden = [
        Signature::gather(&[], &[2], 0, 0),
        Signature::gather(&[], &[], 0, 0),
        Signature::gather_elements(&[], &[], 0),
        Signature::gather_nd(&[], &[1], 0),
        Signature::gather_nd(&[3], &[], 0),
    ];
    for sig in forbidden {
        let e = Kernel::compile(&sig).unwrap_err();
        assert!(
            matches!(e, Error::RankTooSmall { rank: 0, .. }),
            "{sig}: {e:?}"
        );
        assert_eq!(cache.get(&sig).unwrap_err(), e);
    }
    // GatherElements needs equal ranks: scalar indices against rank-1 data.
    let e = Kernel::compile(&Signature::gather_elements(&[3], &[], 0)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::RankMismatch {
                data_rank: 1,
                indices_rank: 0,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(cache.stats().entries, 0);

    // Gather with scalar indices drops the axis: data [3, 2] -> output [2].
    let kernel = cache
        .get(&Signature::gather(&[3, 2], &[], 0, 0))
        .expect("scalar indices are allowed");
    let out = kernel
        .run(
            array![[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]].view(),
            arr0(-1i64).view(),
        )
        .expect("runs");
    assert_eq!(out.shape(), &[2]);
    assert_eq!(out.iter().copied().collect::<Vec<_>>(), vec![5.0, 6.0]);
    // A 0-d array where the kernel expects rank 1 is a shape mismatch, not a read.
    let kernel = cache
        .get(&Signature::gather(&[3], &[1], 0, 0))
        .expect("kernel");
    let e = kernel
        .run(arr0(1.0f32).view(), array![0i64].view())
        .unwrap_err();
    assert!(
        matches!(e, Error::BufferMismatch { what: "data", .. }),
        "{e:?}"
    );
    let e = kernel
        .run(array![1.0f32, 2.0, 3.0].view(), arr0(0i64).view())
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::BufferMismatch {
                what: "indices",
                ..
            }
        ),
        "{e:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Extreme indices.

/// The values worth trying against a dim of size `dim` in `index_type`: both ends of the type,
/// their neighbours, and both ends of the dim (wrapped and not).
fn extreme_values(index_type: IndexType, dim: usize) -> Vec<i128> {
    let (min, max) = (
        i128::from(index_type.min_value()),
        i128::from(index_type.max_value()),
    );
    let s = dim as i128;
    let mut values = vec![
        min,
        min + 1,
        -1,
        -s,
        -s - 1,
        0,
        s - 1,
        s,
        s + 1,
        max - 1,
        max,
    ];
    values.retain(|&v| (min..=max).contains(&v));
    values.sort_unstable();
    values.dedup();
    values
}

/// One bad (or extreme) index at each position, every index type and policy, for each op:
/// the JIT agrees with the interpreter byte for byte, and under `Error` the error names the
/// exact position and value.
#[test]
fn extreme_index_at_every_position_under_every_policy() {
    // (signature, filler index valid for every indexed dim)
    let ops = [
        Signature::gather(&[3, 4, 2], &[2, 3], 1, 0),
        Signature::gather_elements(&[3, 4], &[2, 4], 0),
        Signature::gather_nd(&[3, 4, 2], &[3, 2], 0),
    ];
    let mut runs = 0;
    for base in ops {
        for index_type in IndexType::ALL {
            for policy in policies() {
                let sig = base
                    .clone()
                    .with_dtype(DType::I16)
                    .with_index_type(index_type)
                    .with_policy(policy);
                let validated = sig.validate().expect("valid");
                let kernel = Kernel::compile(&sig).expect("compiles");
                let data = data_bytes(validated.data_len() * 2);
                let count = validated.indices_len();
                for position in 0..count {
                    let coords = unravel(position, &sig.indices_shape);
                    let dim = sig.data_shape[validated.indexed_data_dim(&coords)];
                    for value in extreme_values(index_type, dim) {
                        let mut indices = Vec::new();
                        for k in 0..count {
                            let v = if k == position { value } else { 1 };
                            indices.extend(encode(index_type, v).expect("fits"));
                        }
                        let expected = interpret(&validated, &data, &indices);
                        let (result, output) = run_bytes(&kernel, &data, &indices);
                        match (&expected, result) {
                            (Ok(e), Ok(())) => assert_eq!(e, &output, "{sig} [{position}]={value}"),
                            (Err(e), Err(a)) => {
                                assert_eq!(e, &a, "{sig} [{position}]={value}");
                                let data_dim = validated.indexed_data_dim(&coords);
                                assert!(
                                    matches!(
                                        &a,
                                        Error::IndexOutOfRange {
                                            op, position, value: v, data_dim: d, dim_size, ..
                                        } if *op == sig.op.name() && *position == coords
                                            && *v == value && *d == data_dim && *dim_size == dim
                                    ),
                                    "{a:?}"
                                );
                            }
                            (e, a) => panic!("{sig} [{position}]={value}: {e:?} vs {a:?}"),
                        }
                        // Under Error every value outside the dim (after wrapping) fails.
                        if policy.out_of_range == OutOfRange::Error {
                            let wrapped = if value < 0 && policy.negative == NegativeIndices::Wrap {
                                value + dim as i128
                            } else {
                                value
                            };
                            let good = (0..dim as i128).contains(&wrapped);
                            assert_eq!(expected.is_ok(), good, "{sig} [{position}]={value}");
                        }
                        runs += 1;
                    }
                }
            }
        }
    }
    assert!(runs > 3000, "{runs} runs");
}

/// Row-major coordinates of element `flat` of `shape`.
fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut coords = vec![0; shape.len()];
    for (c, &d) in coords.iter_mut().zip(shape).rev() {
        *c = flat % d;
        flat /= d;
    }
    coords
}

// ---------------------------------------------------------------------------------------------
// Buffers and types in the safe API.

/// `run_bytes` checks every slice's length before running, names the slice, and leaves the
/// output untouched.
#[test]
fn run_bytes_rejects_wrong_lengths_and_touches_nothing() {
    let sig = Signature::gather(&[4, 3], &[2], 0, 0).with_dtype(DType::I32);
    let kernel = Kernel::compile(&sig).expect("kernel");
    let data = data_bytes(48);
    let indices = index_bytes(IndexType::I64, &[1, 3]);
    let good_output = 24;
    for (what, data_len, indices_len, output_len) in [
        ("data", 47, 16, good_output),
        ("data", 49, 16, good_output),
        ("data", 0, 16, good_output),
        ("indices", 48, 15, good_output),
        ("indices", 48, 8, good_output),
        ("indices", 48, 0, good_output),
        ("output", 48, 16, good_output - 1),
        ("output", 48, 16, good_output + 4),
        ("output", 48, 16, 0),
    ] {
        let data = if data_len <= data.len() {
            data[..data_len].to_vec()
        } else {
            [&data[..], &vec![1; data_len - data.len()]].concat()
        };
        let mut output = vec![SENTINEL; output_len];
        let e = kernel
            .run_bytes(&data, &indices[..indices_len], &mut output)
            .unwrap_err();
        assert!(
            matches!(&e, Error::BufferMismatch { what: w, .. } if *w == what),
            "{what}: {e:?}"
        );
        assert!(
            output.iter().all(|&b| b == SENTINEL),
            "{what}: output written"
        );
        let mut output = vec![SENTINEL; output_len];
        let e2 = kernel
            .run_bytes_parallel(&data, &indices[..indices_len], &mut output, 2)
            .unwrap_err();
        assert_eq!(e, e2);
        assert!(
            output.iter().all(|&b| b == SENTINEL),
            "{what}: output written"
        );
    }
}

/// `run` takes only the signature's element and index types (not another type of the same
/// size) and the signature's shapes.
#[test]
fn run_rejects_every_other_type_and_wrong_shapes() {
    let kernel = Kernel::compile(&Signature::gather(&[2, 2], &[1], 0, 0).with_dtype(DType::I32))
        .expect("kernel");
    let idx = array![1i64];
    let ok = kernel
        .run(array![[1i32, 2], [3, 4]].view(), idx.view())
        .expect("right types");
    assert_eq!(ok.iter().copied().collect::<Vec<_>>(), vec![3, 4]);

    macro_rules! wrong_dtype {
        ($($t:ty),*) => {$(
            let data = Array::<$t, _>::default(IxDyn(&[2, 2]));
            let e = kernel.run(data.view(), idx.view()).unwrap_err();
            assert!(
                matches!(e, Error::DTypeMismatch { expected: DType::I32, .. }),
                "{}: {e:?}",
                stringify!($t)
            );
        )*};
    }
    wrong_dtype!(
        f32,
        u32,
        f64,
        i8,
        u8,
        i16,
        u16,
        i64,
        u64,
        bool,
        half::f16,
        half::bf16
    );

    let data = array![[1i32, 2], [3, 4]];
    macro_rules! wrong_index {
        ($($t:ty),*) => {$(
            let indices = Array::<$t, _>::zeros(IxDyn(&[1]));
            let e = kernel.run(data.view(), indices.view()).unwrap_err();
            assert!(
                matches!(e, Error::IndexTypeMismatch { expected: IndexType::I64, .. }),
                "{}: {e:?}",
                stringify!($t)
            );
        )*};
    }
    wrong_index!(u64, i32, u32, i16, u16, i8, u8);

    let shapes: [(&[usize], &[usize], &str); 5] = [
        (&[4], &[1], "data"),
        (&[2, 2, 1], &[1], "data"),
        (&[2, 3], &[1], "data"),
        (&[2, 2], &[2], "indices"),
        (&[2, 2], &[1, 1], "indices"),
    ];
    for (data_shape, indices_shape, what) in shapes {
        let data = ArrayD::<i32>::zeros(IxDyn(data_shape));
        let indices = ArrayD::<i64>::zeros(IxDyn(indices_shape));
        let e = kernel.run(data.view(), indices.view()).unwrap_err();
        assert!(
            matches!(&e, Error::BufferMismatch { what: w, .. } if *w == what),
            "{data_shape:?} {indices_shape:?}: {e:?}"
        );
    }
}

/// A `call_range` outside the outer loop is an error before any pointer is used.
#[test]
fn call_range_outside_the_loop_touches_nothing() {
    let kernel = Kernel::compile(&Signature::gather(&[4, 3], &[5], 0, 0)).expect("kernel");
    let extent = kernel.outer_extent();
    let data = data_bytes(48);
    let indices = [0u8; 40];
    let mut output = vec![SENTINEL; 60];
    #[expect(
        clippy::reversed_empty_ranges,
        reason = "start > end is one of the invalid ranges under test"
    )]
    let backwards = 3..2;
    for range in [
        extent + 1..extent + 1,
        0..extent + 1,
        backwards,
        u64::MAX..u64::MAX,
        0..u64::MAX,
    ] {
        // SAFETY: the buffers match the signature; the invalid range is rejected before the
        // kernel runs.
        let e = unsafe {
            kernel.call_range(
                data.as_ptr(),
                indices.as_ptr(),
                output.as_mut_ptr(),
                range.clone(),
            )
        }
        .unwrap_err();
        assert!(
            matches!(e, Error::BufferMismatch { what: "range", .. }),
            "{range:?}: {e:?}"
        );
    }
    assert!(output.iter().all(|&b| b == SENTINEL));
}

// ---------------------------------------------------------------------------------------------
// Alignment.

/// A copy of `bytes` at an address `misalign` (0..=7) bytes past a multiple of 8; returns the
/// buffer and the copy's offset in it.
fn placed(bytes: &[u8], misalign: usize) -> (Vec<u8>, usize) {
    let mut buffer = vec![0u8; bytes.len() + 16];
    let at = (8 - buffer.as_ptr() as usize % 8) % 8 + misalign;
    buffer[at..at + bytes.len()].copy_from_slice(bytes);
    (buffer, at)
}

/// `call` on buffers at every misalignment, for every element size, every index type and
/// every copy tier (scalar moves, vectors, memcpy) and zero-fill: the contract promises no
/// alignment, so none may be assumed.
#[test]
fn call_on_unaligned_pointers() {
    let mut calls = 0;
    for dtype in [DType::U8, DType::I16, DType::F32, DType::F64] {
        for index_type in IndexType::ALL {
            for inner in [1usize, 3, 5, 17, 40, 130] {
                for oob in [OutOfRange::Error, OutOfRange::Zero] {
                    let sig = Signature::gather(&[6, inner], &[11], 0, 0)
                        .with_dtype(dtype)
                        .with_index_type(index_type)
                        .with_out_of_range(oob);
                    let validated = sig.validate().expect("valid");
                    let kernel = Kernel::compile(&sig).expect("kernel");
                    let data = data_bytes(validated.data_len() * dtype.size());
                    let mut indices = Vec::new();
                    for k in 0..11i128 {
                        // Under Zero, every third index is out of range (a zero-filled slice).
                        let v = if oob == OutOfRange::Zero && k % 3 == 2 {
                            6
                        } else {
                            (k * 5) % 6
                        };
                        indices.extend(encode(index_type, v).expect("fits"));
                    }
                    let expected = interpret(&validated, &data, &indices).expect("valid");
                    for k in 1..8 {
                        let (d, i, o) = (k, (k * 3) % 8, (k * 5) % 8);
                        let (data_buf, data_at) = placed(&data, d);
                        let (indices_buf, indices_at) = placed(&indices, i);
                        let (mut out_buf, out_at) = placed(&vec![SENTINEL; expected.len()], o);
                        // SAFETY: each buffer holds the signature's byte length from its
                        // offset; they are distinct allocations.
                        unsafe {
                            kernel.call(
                                data_buf[data_at..].as_ptr(),
                                indices_buf[indices_at..].as_ptr(),
                                out_buf[out_at..].as_mut_ptr(),
                            )
                        }
                        .expect("valid indices");
                        assert_eq!(
                            &out_buf[out_at..out_at + expected.len()],
                            &expected[..],
                            "{sig} at offsets {d}, {i}, {o}"
                        );
                        // Nothing written around the output.
                        assert!(out_buf[..out_at].iter().all(|&b| b == 0));
                        assert!(out_buf[out_at + expected.len()..].iter().all(|&b| b == 0));
                        calls += 1;
                    }
                }
            }
        }
    }
    assert_eq!(calls, 4 * 8 * 6 * 2 * 7);
}

/// Outputs large enough for streaming (non-temporal) stores, at odd addresses, with slices
/// that are not a multiple of 16 bytes, and zero-filled slices between them.
#[test]
fn streaming_stores_on_unaligned_output() {
    let rows = 5;
    let row = 1000; // bytes per slice
    let lookups = 34_000; // 34 MB of output
    let sig = Signature::gather(&[rows, row], &[lookups], 0, 0)
        .with_dtype(DType::U8)
        .with_index_type(IndexType::I32)
        .with_out_of_range(OutOfRange::Zero);
    let kernel = Kernel::compile(&sig).expect("kernel");
    assert!(kernel.plan().lookup.streaming, "{}", kernel.plan());
    let data = data_bytes(rows * row);
    let raw: Vec<i32> = (0..lookups as i32).map(|k| k % 7 - 1).collect();
    let indices = i32_bytes(&raw);
    // The one-line oracle: row k, -1 wraps to the last row, 5 is out of range (zeros).
    let expected: Vec<u8> = raw
        .iter()
        .flat_map(|&k| match k {
            -1 => data[(rows - 1) * row..].to_vec(),
            k if (k as usize) < rows => data[k as usize * row..(k as usize + 1) * row].to_vec(),
            _ => vec![0; row],
        })
        .collect();
    for misalign in [3, 0] {
        let mut out = vec![SENTINEL; expected.len() + 32];
        let at = (16 - out.as_ptr() as usize % 16) % 16 + misalign;
        kernel
            .run_bytes(&data, &indices, &mut out[at..at + expected.len()])
            .expect("runs");
        assert!(
            out[at..at + expected.len()] == expected[..],
            "misalign {misalign}"
        );
        assert!(out[..at].iter().all(|&b| b == SENTINEL));
        assert!(out[at + expected.len()..].iter().all(|&b| b == SENTINEL));
    }
}

// ---------------------------------------------------------------------------------------------
// The output after an index error.

/// Under `OutOfRange::Error` the kernel writes the output in row-major order and stops at the
/// first lookup whose index is bad: everything before that slice is the correct result,
/// everything from it on is what the caller left there.
#[test]
fn output_after_an_index_error_is_the_prefix_before_the_bad_lookup() {
    // Gather axis 0: rows for indices 1 and 2 written; nothing for 9 and the 0 after it.
    let sig = Signature::gather(&[5, 3], &[4], 0, 0).with_dtype(DType::U8);
    let kernel = Kernel::compile(&sig).expect("kernel");
    let data: Vec<u8> = (10..25).collect();
    let indices = index_bytes(IndexType::I64, &[1, 2, 9, 0]);
    let (result, output) = run_bytes(&kernel, &data, &indices);
    assert!(
        matches!(result, Err(Error::IndexOutOfRange { ref position, value: 9, .. }) if position == &[2])
    );
    assert_eq!(&output[..6], &[13, 14, 15, 16, 17, 18]);
    assert_eq!(&output[6..], &[SENTINEL; 6]);

    // Gather axis 1: the output is [rows, indices]; the walk is row by row, so in row 0 the
    // slice of index 0 is written, then index 1 (=5) fails: row 1 is untouched even for the
    // good index before the bad one.
    let sig = Signature::gather(&[2, 4], &[3], 1, 0).with_dtype(DType::U8);
    let kernel = Kernel::compile(&sig).expect("kernel");
    let data: Vec<u8> = (10..18).collect();
    let indices = index_bytes(IndexType::I64, &[3, 5, 1]);
    let (result, output) = run_bytes(&kernel, &data, &indices);
    assert!(
        matches!(result, Err(Error::IndexOutOfRange { ref position, value: 5, .. }) if position == &[1])
    );
    assert_eq!(
        output,
        vec![13, SENTINEL, SENTINEL, SENTINEL, SENTINEL, SENTINEL]
    );

    // GatherND: a tuple whose second coordinate is bad writes nothing for that tuple.
    let sig = Signature::gather_nd(&[3, 4], &[3, 2], 0).with_dtype(DType::U8);
    let kernel = Kernel::compile(&sig).expect("kernel");
    let data: Vec<u8> = (10..22).collect();
    let indices = index_bytes(IndexType::I64, &[2, 3, 0, 4, 1, 1]);
    let (result, output) = run_bytes(&kernel, &data, &indices);
    assert!(
        matches!(result, Err(Error::IndexOutOfRange { ref position, value: 4, data_dim: 1, .. }) if position == &[1, 1])
    );
    assert_eq!(output, vec![21, SENTINEL, SENTINEL]);

    // Clamp with an empty dim: the first lookup fails, nothing is written.
    let sig = Signature::gather(&[2, 0, 3], &[2], 1, 0)
        .with_dtype(DType::U8)
        .with_out_of_range(OutOfRange::Clamp);
    let kernel = Kernel::compile(&sig).expect("kernel");
    let indices = index_bytes(IndexType::I64, &[0, 0]);
    let (result, output) = run_bytes(&kernel, &[], &indices);
    assert!(matches!(
        result,
        Err(Error::IndexOutOfRange { dim_size: 0, .. })
    ));
    assert_eq!(output, vec![SENTINEL; 12]);
}

/// The same rule per range: a range before the bad lookup is complete, the failing range
/// stops at it, and a range after it is not affected by it.
#[test]
fn output_after_an_index_error_in_call_range() {
    let sig = Signature::gather(&[6, 2], &[8], 0, 0).with_dtype(DType::U8);
    let kernel = Kernel::compile(&sig).expect("kernel");
    assert_eq!(kernel.outer_extent(), 8, "{}", kernel.plan());
    let data: Vec<u8> = (10..22).collect();
    let indices = index_bytes(IndexType::I64, &[0, 1, 2, 3, 4, 60, 5, 0]);
    let mut output = vec![SENTINEL; 16];
    for (range, fails) in [(0..4, false), (4..7, true), (7..8, false)] {
        // SAFETY: buffers sized by the signature, distinct; ranges within the outer loop.
        let result = unsafe {
            kernel.call_range(data.as_ptr(), indices.as_ptr(), output.as_mut_ptr(), range)
        };
        assert_eq!(result.is_err(), fails);
    }
    let mut expected: Vec<u8> = (10..20).collect(); // rows 0..=4
    expected.extend([SENTINEL; 4]); // the bad index and the one after it in the same range
    expected.extend([10, 11]); // row 0 from the last range
    assert_eq!(output, expected);
}

/// Negative indices under `Invalid` (TensorRT's default) are errors even where they would
/// wrap to a valid row, and flavors' defaults hold through the JIT.
#[test]
fn negative_indices_under_invalid_through_the_jit() {
    let sig = Signature::gather(&[3, 2], &[2], 0, 0)
        .with_flavor(Flavor::TensorRt)
        .with_dtype(DType::U8);
    let kernel = Kernel::compile(&sig).expect("kernel");
    for index_type in [IndexType::I8, IndexType::I64] {
        let sig = sig.clone().with_index_type(index_type);
        let kernel2 = Kernel::compile(&sig).expect("kernel");
        let mut indices = encode(index_type, 0).unwrap();
        indices.extend(encode(index_type, -1).unwrap());
        let (result, output) = run_bytes(&kernel2, &[1, 2, 3, 4, 5, 6], &indices);
        assert!(
            matches!(result, Err(Error::IndexOutOfRange { value: -1, .. })),
            "{result:?}"
        );
        assert_eq!(output, vec![1, 2, SENTINEL, SENTINEL]);
    }
    assert_eq!(
        kernel.signature().policy,
        IndexPolicy {
            negative: NegativeIndices::Invalid,
            out_of_range: OutOfRange::Error
        }
    );
}

/// One null-pointer contract for every family: a raw call takes a null pointer for any buffer
/// of 0 bytes (for a zero-length access every pointer is valid, null included, as `std::ptr`
/// says), as the scatters' calls do (`scatter_review::raw_calls_accept_null_pointers_*`).
#[test]
fn raw_calls_of_the_gathers_accept_null_pointers_for_empty_buffers() {
    use gather_jit::quant::{BlockQuantization, GgufFormat, QuantizedSignature};
    use gather_jit::{Kernel, QuantizedKernel};

    let null = std::ptr::null::<u8>();
    let null_mut = std::ptr::null_mut::<u8>();
    // Empty indices, so an empty output, over data that is there and data that is empty.
    for (data_shape, indices_shape) in [(&[4usize, 3][..], &[0usize][..]), (&[0, 3], &[0])] {
        let kernel =
            Kernel::compile(&Signature::gather(data_shape, indices_shape, 0, 0)).expect("compiles");
        let data = vec![7u8; data_shape.iter().product::<usize>() * 4];
        let data_ptr = if data.is_empty() { null } else { data.as_ptr() };
        // SAFETY: data holds the signature's bytes (or none, and is null); indices and output
        // hold 0 bytes, for which null is valid.
        unsafe { kernel.call(data_ptr, null, null_mut) }.expect("call");
        // SAFETY: as above.
        unsafe { kernel.call_parallel(data_ptr, null, null_mut, 3) }.expect("call_parallel");
    }
    // A quantized gather of no rows: indices and output empty; and GGUF takes no scales.
    let block = QuantizedSignature::block_quantized(
        &[8, 64],
        &[0],
        BlockQuantization {
            block_size: 32,
            ..BlockQuantization::default()
        },
    );
    let gguf = QuantizedSignature::gguf(GgufFormat::Q8_0, 4, 32, &[0]);
    for signature in [block, gguf] {
        let kernel = QuantizedKernel::compile(&signature).expect("compiles");
        let layout = kernel.layout();
        let data = vec![0u8; layout.data_bytes_shape().iter().product()];
        let scales = vec![0u8; layout.scales_shape().iter().product::<usize>() * 4];
        let scales_ptr = if scales.is_empty() {
            null
        } else {
            scales.as_ptr()
        };
        // SAFETY: data and scales hold the layout's bytes (scales none, and null, for GGUF);
        // indices, zero points (absent) and output hold 0 bytes.
        unsafe { kernel.call(data.as_ptr(), null, scales_ptr, null, null_mut) }.expect("call");
    }
}
