//! A hostile review of the compiled scatters: raw calls on the pointers the raw contract
//! allows, thread counts far above the data's slices, hostile index values and types, and
//! shapes with empty slices, each against the interpreter (the oracle) or a stated rule.

use gather_jit::interp::interpret_scatter;
use gather_jit::scatter::{Reduction, ScatterFlavor, ScatterOp, ScatterSignature};
use gather_jit::{DType, IndexType, NegativeIndices, ScatterKernel};
use gather_jit_workloads::XorShift;

use crate::util::index_bytes;

/// The raw calls' contract asks each pointer to be valid for its buffer's length; for a
/// length of zero every pointer is, null included (`std::ptr`'s rules). A call on empty
/// indices and updates, and a `mean` on empty data, must then run and leave data as it was.
#[test]
fn raw_calls_accept_null_pointers_for_empty_buffers() {
    let sig = ScatterSignature::scatter_nd(&[4, 2], &[0, 1], &[0, 2]);
    let kernel = ScatterKernel::compile(&sig).expect("compiles");
    let data: Vec<u8> = (0..32).collect();
    let mut out = vec![0u8; 32];
    let null = std::ptr::null::<u8>();
    // SAFETY: data and out are 32 bytes each, disjoint; indices and updates hold 0 bytes,
    // for which a null pointer is valid.
    unsafe { kernel.call(data.as_ptr(), null, null, out.as_mut_ptr()) }.expect("runs");
    assert_eq!(out, data);
    let mut in_place = data.clone();
    // SAFETY: as above, in place.
    unsafe { kernel.call_in_place_parallel(in_place.as_mut_ptr(), null, null, 3) }.expect("runs");
    assert_eq!(in_place, data);

    // Everything empty, under `mean` (which divides after the kernel) and under TensorRT's
    // duplicate check.
    for sig in [
        ScatterSignature::scatter_elements(&[0], &[0], &[0], 0)
            .with_flavor(ScatterFlavor::OpenvinoScatterElementsUpdate12)
            .with_reduction(Reduction::Mean),
        ScatterSignature::scatter_nd(&[0, 3], &[0, 1], &[0, 3])
            .with_flavor(ScatterFlavor::TensorRt),
    ] {
        let kernel = ScatterKernel::compile(&sig).expect("compiles");
        // SAFETY: every buffer holds 0 bytes.
        unsafe { kernel.call(null, null, null, std::ptr::null_mut()) }.expect("runs");
        // SAFETY: as above.
        unsafe { kernel.call_in_place(std::ptr::null_mut(), null, null) }.expect("runs");
    }
}

/// Random bytes of `len` elements of `dtype`.
fn random_bytes(rng: &mut XorShift, len: usize, dtype: DType) -> Vec<u8> {
    let mut bytes = vec![0u8; len * dtype.size()];
    rng.fill(&mut bytes);
    bytes
}

/// The JIT (out of place and in place, on `threads` threads) against the interpreter, errors
/// included, on `indices` values.
fn agrees(sig: &ScatterSignature, indices: &[i64], rng: &mut XorShift, threads: &[usize]) {
    let layout = sig.validate().expect("valid");
    let kernel = ScatterKernel::compile(sig).expect("compiles");
    let data = random_bytes(rng, layout.data_len(), sig.dtype);
    let updates = random_bytes(rng, layout.updates_len(), sig.dtype);
    let ids = index_bytes(sig.index_type, indices);
    let expected = interpret_scatter(&layout, &data, &ids, &updates).map_err(|e| e.to_string());
    for &threads in threads {
        let mut out = vec![0x5a; data.len()];
        let got = kernel
            .run_bytes_parallel(&data, &ids, &updates, &mut out, threads)
            .map(|()| out)
            .map_err(|e| e.to_string());
        assert_eq!(got, expected, "{sig}, {threads} thread(s), out of place");
        let mut in_place = data.clone();
        let got = kernel
            .run_bytes_in_place_parallel(&mut in_place, &ids, &updates, threads)
            .map(|()| in_place.clone())
            .map_err(|e| e.to_string());
        if got.is_err() {
            assert!(in_place == data, "{sig}: a failed in-place call wrote");
        }
        assert_eq!(got, expected, "{sig}, {threads} thread(s), in place");
    }
}

/// Index values at the edges of their types: `u64` values past `i64::MAX` (which read as
/// negative `i64`s), `i64::MIN`, and `i8` indices wrapped into a dimension longer than 128.
#[test]
fn hostile_index_values_are_the_interpreters_errors_or_results() {
    let mut rng = XorShift::new(7);
    let threads = [1, 2, 5];
    // u64: 2^64 - 1 is out of range, not -1 wrapped.
    for big in [u64::MAX, 1 << 63, (1 << 63) + 2] {
        let sig = ScatterSignature::scatter_elements(&[4, 3], &[1, 3], &[1, 3], 0)
            .with_index_type(IndexType::U64);
        let layout = sig.validate().expect("valid");
        let kernel = ScatterKernel::compile(&sig).expect("compiles");
        let ids: Vec<u8> = [0u64, big, 1]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        let data = random_bytes(&mut rng, 12, DType::F32);
        let updates = random_bytes(&mut rng, 3, DType::F32);
        let expected = interpret_scatter(&layout, &data, &ids, &updates)
            .expect_err("out of range")
            .to_string();
        let mut out = vec![0; 48];
        let got = kernel
            .run_bytes(&data, &ids, &updates, &mut out)
            .expect_err("out of range");
        assert_eq!(got.to_string(), expected);
    }
    // i64::MIN and i64::MIN + dim under wrap: out of range.
    let sig = ScatterSignature::scatter_nd(&[5, 2], &[2, 1], &[2, 2]);
    agrees(&sig, &[i64::MIN, 0], &mut rng, &threads);
    agrees(&sig, &[0, i64::MIN + 5], &mut rng, &threads);
    // i8 indices into a dim of 200: -128..-1 wrap to 72..199.
    let sig = ScatterSignature::scatter_nd(&[200, 3], &[4, 1], &[4, 3])
        .with_index_type(IndexType::I8)
        .with_reduction(Reduction::Sum);
    agrees(&sig, &[-128, 127, -1, -128], &mut rng, &threads);
    // Invalid negatives (TensorRT): -1 is out of range.
    let sig = ScatterSignature::scatter_nd(&[200, 3], &[2, 1], &[2, 3])
        .with_index_type(IndexType::I16)
        .with_flavor(ScatterFlavor::TensorRt);
    agrees(&sig, &[3, -1], &mut rng, &threads);
    let sig = sig.with_negative(NegativeIndices::Wrap);
    agrees(&sig, &[3, -1], &mut rng, &threads);
}

/// An op, its flavor and its data, indices and updates shapes.
type Case = (ScatterOp, ScatterFlavor, Vec<usize>, Vec<usize>, Vec<usize>);

/// Shapes whose slices are empty or single elements, ScatterUpdate with several outer
/// positions, ScatterElements with indices shorter than data, and `bool` bytes other than 0
/// and 1, split into more parts than data has slices.
#[test]
fn hostile_shapes_in_many_parts_match_the_interpreter() {
    let mut rng = XorShift::new(32);
    let threads = [1, 2, 3, 7, 64];
    let cases: Vec<Case> = vec![
        // Empty slices: data [3, 0], one index per row.
        (
            ScatterOp::Nd,
            ScatterFlavor::OpenvinoScatterNdUpdate15,
            vec![3, 0],
            vec![4, 1],
            vec![4, 0],
        ),
        // k = rank: single elements, updates of the tuples' shape.
        (
            ScatterOp::Nd,
            ScatterFlavor::Onnx,
            vec![3, 4],
            vec![5, 2],
            vec![5],
        ),
        // ScatterUpdate along the last axis, 6 outer positions.
        (
            ScatterOp::Update { axis: -1 },
            ScatterFlavor::OpenvinoScatterUpdate3,
            vec![2, 3, 5],
            vec![2, 2],
            vec![2, 3, 2, 2],
        ),
        // ScatterUpdate along the middle axis, empty outer.
        (
            ScatterOp::Update { axis: 1 },
            ScatterFlavor::OpenvinoScatterUpdate3,
            vec![0, 3, 5],
            vec![2],
            vec![0, 2, 5],
        ),
        // ScatterElements, indices shorter than data off the axis.
        (
            ScatterOp::Elements { axis: -2 },
            ScatterFlavor::OpenvinoScatterElementsUpdate12,
            vec![4, 5, 3],
            vec![3, 7, 2],
            vec![3, 7, 2],
        ),
    ];
    let mut checked = 0;
    for (op, flavor, data, indices, updates) in cases {
        for dtype in [
            DType::F32,
            DType::F16,
            DType::Bf16,
            DType::I8,
            DType::U64,
            DType::Bool,
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
                    let dims: Vec<i64> = match layout.op() {
                        gather_jit::scatter::ResolvedScatter::Nd { index_depth } => {
                            data[..index_depth].iter().map(|&d| d as i64).collect()
                        }
                        gather_jit::scatter::ResolvedScatter::Elements { axis }
                        | gather_jit::scatter::ResolvedScatter::Update { axis } => {
                            vec![data[axis] as i64]
                        }
                    };
                    // Valid indices, few distinct (duplicates), some negative where that wraps.
                    let wraps = sig.negative == NegativeIndices::Wrap;
                    let ids: Vec<i64> = (0..layout.indices_len())
                        .map(|n| {
                            let dim = dims[n % dims.len()];
                            let v = rng.below(dim.clamp(1, 2) as u64) as i64;
                            if wraps && rng.below(3) == 0 {
                                v - dim
                            } else {
                                v
                            }
                        })
                        .collect();
                    agrees(&sig, &ids, &mut rng, &threads);
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 60, "only {checked} signatures checked");
}

/// `explain` names every step a call takes before it writes (the index check, TensorRT's
/// duplicate check), the neutral values of `use_init_val = false`, and how parts split.
#[test]
fn explain_names_every_step_before_the_writes() {
    let text = |sig: ScatterSignature| ScatterKernel::compile(&sig).expect("compiles").explain();
    let trt = text(
        ScatterSignature::scatter_nd(&[4, 2], &[3, 1], &[3, 2])
            .with_flavor(ScatterFlavor::TensorRt),
    );
    assert!(
        trt.contains(
            "pass 1: check the 3 index(es) in row-major order (negative=invalid); a bad one \
             fails the call before anything is written\n\
             then: look for duplicate indices (flavor tensorrt forbids them)"
        ),
        "{trt}"
    );
    let mean = text(
        ScatterSignature::scatter_elements(&[64, 4096], &[64, 1024], &[64, 1024], 1)
            .with_flavor(ScatterFlavor::OpenvinoScatterElementsUpdate12)
            .with_reduction(Reduction::Mean)
            .with_use_init_val(false),
    );
    assert!(
        mean.contains(
            "pass 2: every element an update lands on set to mean's neutral value \
             (use_init_val=false); then for each of 65536 index(es), along data axis 1"
        ),
        "{mean}"
    );
    assert!(
        mean.contains("each part runs pass 2 and writes its own range only"),
        "{mean}"
    );
}

/// Parts beyond the cores repeat the walk of every update: a call asking for 1024 threads on
/// ScatterElements [1024, 1024] gets at most the cores or `MAX_PARTS_BEYOND_CORES`.
#[test]
fn parts_beyond_the_cores_do_not_repeat_the_walk() {
    let sig = ScatterSignature::scatter_elements(&[1024, 1024], &[1024, 1024], &[1024, 1024], 0);
    let kernel = ScatterKernel::compile(&sig).expect("compiles");
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let most = cores.max(gather_jit::MAX_PARTS_BEYOND_CORES);
    let parts = kernel.parallel_parts(1024, false);
    assert!(parts <= most, "{parts} parts on {cores} core(s)");
    assert!(parts >= 2, "a large call still splits");
}
