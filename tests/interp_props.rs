//! Properties of the reference interpreter (proptest).
//!
//! A [`Problem`] is a valid signature with data bytes and index values; the strategies below
//! build them op by op, with small shapes (dims up to 3, zero-sized dims included) so that the
//! default 256 cases per property stay fast.

use gather_jit::interp::{interpret, interpret_at};
use gather_jit::ir::{ResolvedOp, Validated};
use gather_jit::{DType, Error, Flavor, IndexType, NegativeIndices, Op, OutOfRange, Signature};
use proptest::prelude::*;
use proptest::sample::{Index, select};

use crate::fuzz_replay::case::{gather_batch_dims, max_gather_batch_dims};
use crate::util::index_bytes;

/// A signature with inputs: `data` as raw bytes, indices as values (encoded on use).
#[derive(Clone, Debug)]
struct Problem {
    signature: Signature,
    data: Vec<u8>,
    indices: Vec<i64>,
}

impl Problem {
    fn validated(&self) -> Validated {
        self.signature
            .validate()
            .unwrap_or_else(|e| panic!("{}: {e}", self.signature))
    }

    fn run(&self) -> gather_jit::Result<Vec<u8>> {
        interpret(
            &self.validated(),
            &self.data,
            &index_bytes(self.signature.index_type, &self.indices),
        )
    }

    /// The same inputs under another signature (same data and indices element counts).
    fn with_signature(&self, signature: Signature) -> Problem {
        Problem {
            signature,
            ..self.clone()
        }
    }
}

/// The size of the data dim that the index at flat position `k` addresses.
fn indexed_dim(v: &Validated, k: usize) -> usize {
    let data = &v.signature().data_shape;
    match v.op() {
        ResolvedOp::Gather { axis, .. } | ResolvedOp::GatherElements { axis } => data[axis],
        ResolvedOp::GatherNd {
            batch_dims,
            index_depth,
        } => data[batch_dims + k % index_depth],
    }
}

/// Output shape by the specs' formulas, written here independently of `validate`.
fn expected_shape(v: &Validated) -> Vec<usize> {
    let sig = v.signature();
    let (data, indices) = (&sig.data_shape, &sig.indices_shape);
    match v.op() {
        ResolvedOp::Gather { axis, batch_dims } => {
            let mut s = data[..axis].to_vec();
            s.extend(&indices[batch_dims..]);
            s.extend(&data[axis + 1..]);
            s
        }
        ResolvedOp::GatherElements { .. } => indices.clone(),
        ResolvedOp::GatherNd {
            batch_dims: b,
            index_depth,
        } => {
            let mut s = if sig.flavor == Flavor::OpenvinoGatherNd5 && b > 0 {
                vec![indices[..b].iter().product()]
            } else {
                indices[..b].to_vec()
            };
            s.extend(&indices[b..indices.len() - 1]);
            s.extend(&data[b + index_depth..]);
            s
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Strategies.

const GATHER_FLAVORS: [Flavor; 5] = [
    Flavor::Onnx,
    Flavor::OpenvinoGather1,
    Flavor::OpenvinoGather7,
    Flavor::OpenvinoGather8,
    Flavor::TensorRt,
];
const GATHER_ELEMENTS_FLAVORS: [Flavor; 3] = [
    Flavor::Onnx,
    Flavor::OpenvinoGatherElements6,
    Flavor::TensorRt,
];
const GATHER_ND_FLAVORS: [Flavor; 4] = [
    Flavor::Onnx,
    Flavor::OpenvinoGatherNd5,
    Flavor::OpenvinoGatherNd8,
    Flavor::TensorRt,
];
const SIGNED: [IndexType; 4] = [
    IndexType::I8,
    IndexType::I16,
    IndexType::I32,
    IndexType::I64,
];

fn dims(
    rank: std::ops::RangeInclusive<usize>,
    max_dim: usize,
) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0..=max_dim, rank)
}

fn types() -> impl Strategy<Value = (DType, IndexType)> {
    (select(DType::ALL.to_vec()), select(IndexType::ALL.to_vec()))
}

/// A valid Gather signature: the indexed dim is non-empty, other dims may be 0; batch_dims
/// and axis are sometimes written negatively where the flavor allows it.
fn gather_signature(flavors: &'static [Flavor]) -> impl Strategy<Value = Signature> {
    (
        select(flavors),
        dims(1..=4, 3),
        any::<Index>(),
        any::<Index>(),
        dims(0..=3, 3),
        any::<(bool, bool)>(),
        types(),
    )
        .prop_map(
            |(flavor, mut data, axis, b, tail, (neg_axis, neg_b), (dtype, index_type))| {
                let r = data.len();
                let axis = axis.index(r);
                data[axis] = data[axis].max(1);
                let b = b.index(max_gather_batch_dims(flavor, axis) + 1);
                let indices = [&data[..b], &tail[..]].concat();
                let batch_dims = gather_batch_dims(flavor, b, indices.len(), neg_b);
                let axis = if neg_axis {
                    axis as i64 - r as i64
                } else {
                    axis as i64
                };
                Signature::gather(&data, &indices, axis, batch_dims)
                    .with_flavor(flavor)
                    .with_dtype(dtype)
                    .with_index_type(index_type)
            },
        )
}

/// A valid GatherElements signature (ONNX `<=` rule or GatherElements-6 equal rule).
fn gather_elements_signature(
    flavors: &'static [Flavor],
    max_dim: usize,
    empty_axis: bool,
) -> impl Strategy<Value = Signature> {
    (
        select(flavors),
        dims(1..=4, max_dim),
        any::<Index>(),
        prop::collection::vec(any::<Index>(), 4),
        0..=3usize,
        types(),
    )
        .prop_map(
            move |(flavor, mut data, axis, picks, axis_len, (dtype, index_type))| {
                let axis = axis.index(data.len());
                if !empty_axis {
                    data[axis] = data[axis].max(1);
                }
                let indices: Vec<usize> = (0..data.len())
                    .map(|i| {
                        if i == axis {
                            axis_len
                        } else if flavor == Flavor::OpenvinoGatherElements6 {
                            data[i]
                        } else {
                            picks[i].index(data[i] + 1)
                        }
                    })
                    .collect();
                Signature::gather_elements(&data, &indices, axis as i64)
                    .with_flavor(flavor)
                    .with_dtype(dtype)
                    .with_index_type(index_type)
            },
        )
}

/// A valid GatherND signature with `batch_dims` in `min_b..`; indexed dims are non-empty.
fn gather_nd_signature(
    flavors: &'static [Flavor],
    min_b: usize,
) -> impl Strategy<Value = Signature> {
    (
        select(flavors),
        dims(min_b + 1..=4, 3),
        any::<Index>(),
        any::<Index>(),
        dims(0..=2, 2),
        types(),
    )
        .prop_map(
            move |(flavor, mut data, b, depth, grid, (dtype, index_type))| {
                let r = data.len();
                let b = min_b + b.index(r - min_b);
                let depth = 1 + depth.index(r - b);
                for d in &mut data[b..b + depth] {
                    *d = (*d).max(1);
                }
                let indices = [&data[..b], &grid[..], &[depth]].concat();
                Signature::gather_nd(&data, &indices, b as i64)
                    .with_flavor(flavor)
                    .with_dtype(dtype)
                    .with_index_type(index_type)
            },
        )
}

/// Any valid signature of any op.
fn any_signature() -> impl Strategy<Value = Signature> {
    prop_oneof![
        gather_signature(&GATHER_FLAVORS),
        gather_elements_signature(&GATHER_ELEMENTS_FLAVORS, 3, false),
        gather_nd_signature(&GATHER_ND_FLAVORS, 0),
    ]
}

/// Random data and index values for `signature`. Each index lies in `[0, s)` for the dim of
/// size `s` it addresses, widened by `slack` on both sides; the low side goes down to `-s`
/// when the index type is signed and the policy wraps negatives.
fn problem(signature: Signature, slack: i64) -> impl Strategy<Value = Problem> {
    let v = signature
        .validate()
        .expect("strategies build valid signatures");
    let policy = signature.policy;
    let signed = signature.index_type.is_signed() && policy.negative == NegativeIndices::Wrap;
    let values: Vec<BoxedStrategy<i64>> = (0..v.indices_len())
        .map(|k| {
            let s = indexed_dim(&v, k) as i64;
            let lo = if signed { -s - slack } else { 0 };
            let hi = s + slack;
            if lo < hi {
                (lo..hi).boxed()
            } else {
                Just(0).boxed()
            }
        })
        .collect();
    let data_bytes = v.data_len() * signature.dtype.size();
    (prop::collection::vec(any::<u8>(), data_bytes), values).prop_map(move |(data, indices)| {
        Problem {
            signature: signature.clone(),
            data,
            indices,
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Properties.

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The output has exactly the inferred shape's element count, and the inferred shape is
    /// the specs' formula.
    #[test]
    fn output_len_is_the_inferred_shape(p in any_signature().prop_flat_map(|s| problem(s, 0))) {
        let v = p.validated();
        prop_assert_eq!(v.output_shape(), &expected_shape(&v)[..]);
        let out = p.run().unwrap();
        let elements: usize = v.output_shape().iter().product();
        prop_assert_eq!(out.len(), elements * p.signature.dtype.size());
    }

    /// Gather with `indices = arange(data.shape[axis])` reproduces data, for every flavor.
    #[test]
    fn gather_identity_indices_reproduce_data(
        flavor in select(GATHER_FLAVORS.to_vec()),
        data_shape in dims(1..=4, 3),
        axis in any::<Index>(),
        (dtype, index_type) in types(),
        seed in any::<u64>(),
    ) {
        let axis = axis.index(data_shape.len());
        let s = data_shape[axis];
        let sig = Signature::gather(&data_shape, &[s], axis as i64, 0)
            .with_flavor(flavor)
            .with_dtype(dtype)
            .with_index_type(index_type);
        let v = sig.validate().unwrap();
        prop_assert_eq!(v.output_shape(), &data_shape[..]);
        let data = pattern(v.data_len() * dtype.size(), seed);
        let arange: Vec<i64> = (0..s as i64).collect();
        let out = interpret(&v, &data, &index_bytes(index_type, &arange)).unwrap();
        prop_assert_eq!(out, data);
    }

    /// GatherElements with `indices[.., k, ..] = k` along axis reproduces data.
    #[test]
    fn gather_elements_identity_indices_reproduce_data(
        flavor in select(GATHER_ELEMENTS_FLAVORS.to_vec()),
        data_shape in dims(1..=4, 3),
        axis in any::<Index>(),
        (dtype, index_type) in types(),
        seed in any::<u64>(),
    ) {
        let axis = axis.index(data_shape.len());
        let sig = Signature::gather_elements(&data_shape, &data_shape, axis as i64)
            .with_flavor(flavor)
            .with_dtype(dtype)
            .with_index_type(index_type);
        let v = sig.validate().unwrap();
        let inner: usize = data_shape[axis + 1..].iter().product();
        let s = data_shape[axis];
        let identity: Vec<i64> =
            (0..v.indices_len()).map(|k| ((k / inner) % s) as i64).collect();
        let data = pattern(v.data_len() * dtype.size(), seed);
        let out = interpret(&v, &data, &index_bytes(index_type, &identity)).unwrap();
        prop_assert_eq!(out, data);
    }

    /// GatherND with batch_dims b equals GatherND with batch_dims 0 run batch by batch on the
    /// matching slices of data and indices (out-of-range tuples zero-filled on both sides).
    #[test]
    fn gather_nd_batch_dims_is_a_loop_over_batches(
        p in gather_nd_signature(&[Flavor::Onnx, Flavor::OpenvinoGatherNd8], 1)
            .prop_map(|s| s.with_out_of_range(OutOfRange::Zero))
            .prop_flat_map(|s| problem(s, 1))
    ) {
        let v = p.validated();
        let sig = &p.signature;
        let Op::GatherNd { batch_dims } = sig.op else { unreachable!() };
        let b = batch_dims as usize;
        let batches: usize = sig.data_shape[..b].iter().product();
        let per_data: usize = sig.data_shape[b..].iter().product();
        let per_indices: usize = sig.indices_shape[b..].iter().product();
        let size = sig.dtype.size();
        let inner = Signature {
            op: Op::GatherNd { batch_dims: 0 },
            data_shape: sig.data_shape[b..].to_vec(),
            indices_shape: sig.indices_shape[b..].to_vec(),
            ..sig.clone()
        };
        let mut looped = Vec::new();
        for t in 0..batches {
            let one = Problem {
                signature: inner.clone(),
                data: p.data[t * per_data * size..(t + 1) * per_data * size].to_vec(),
                indices: p.indices[t * per_indices..(t + 1) * per_indices].to_vec(),
            };
            looped.extend(one.run().unwrap());
        }
        let whole = p.run().unwrap();
        prop_assert_eq!(whole.len(), v.output_len() * size);
        prop_assert_eq!(whole, looped);
    }

    /// GatherND-5 and GatherND-8 produce the same bytes; the shapes differ only in that
    /// GatherND-5 flattens the batch dims into one.
    #[test]
    fn gather_nd5_and_nd8_differ_only_by_a_reshape(
        p in gather_nd_signature(&[Flavor::OpenvinoGatherNd8], 0)
            .prop_flat_map(|s| problem(s, 0))
    ) {
        let nd8 = p.validated();
        let p5 = p.with_signature(p.signature.clone().with_flavor(Flavor::OpenvinoGatherNd5));
        let nd5 = p5.validated();
        prop_assert_eq!(p.run().unwrap(), p5.run().unwrap());
        let Op::GatherNd { batch_dims } = p.signature.op else { unreachable!() };
        let b = batch_dims as usize;
        let shape8 = nd8.output_shape();
        let reshaped: Vec<usize> = if b == 0 {
            shape8.to_vec()
        } else {
            [&[shape8[..b].iter().product::<usize>()][..], &shape8[b..]].concat()
        };
        prop_assert_eq!(nd5.output_shape(), &reshaped[..]);
    }

    /// Where the flavor wraps negatives, index `i - s` reads the same as `i` (s = the size of
    /// the dim it addresses); where it does not (TensorRT), a negative index is an error.
    #[test]
    fn negative_index_equals_index_plus_dim(
        p in any_signature()
            .prop_flat_map(|s| (Just(s), select(SIGNED.to_vec())))
            .prop_map(|(s, t)| s.with_index_type(t).with_negative(NegativeIndices::Invalid))
            .prop_flat_map(|s| problem(s, 0)),
        negate in prop::collection::vec(any::<bool>(), 0..64),
    ) {
        // Generated non-negative (the policy said Invalid); now use the flavor's own policy.
        let base = p.with_signature(
            p.signature
                .clone()
                .with_policy(p.signature.flavor.default_policy()),
        );
        let v = base.validated();
        let mut shifted = base.clone();
        let mut any_negated = false;
        for (k, i) in shifted.indices.iter_mut().enumerate() {
            if negate.get(k).copied().unwrap_or(false) {
                *i -= indexed_dim(&v, k) as i64;
                any_negated = true;
            }
        }
        match base.signature.policy.negative {
            NegativeIndices::Wrap => prop_assert_eq!(shifted.run().unwrap(), base.run().unwrap()),
            NegativeIndices::Invalid => {
                let result = shifted.run();
                if any_negated && base.signature.policy.out_of_range == OutOfRange::Error {
                    prop_assert!(
                        matches!(result, Err(Error::IndexOutOfRange { value, .. }) if value < 0),
                        "{:?}", result
                    );
                } else if !any_negated {
                    prop_assert_eq!(result.unwrap(), base.run().unwrap());
                }
            }
        }
    }

    /// GatherElements with zero-sized dims: an empty output when indices are empty, an
    /// out-of-range error when data's axis is empty but indices are not.
    #[test]
    fn gather_elements_with_zero_sized_dims(
        p in gather_elements_signature(&GATHER_ELEMENTS_FLAVORS, 2, true)
            .prop_flat_map(|s| problem(s, 0))
    ) {
        let v = p.validated();
        let sig = &p.signature;
        let ResolvedOp::GatherElements { axis } = v.op() else { unreachable!() };
        let result = p.run();
        if sig.data_shape[axis] == 0 && v.indices_len() > 0 {
            prop_assert!(
                matches!(result, Err(Error::IndexOutOfRange { dim_size: 0, .. })),
                "{:?}", result
            );
        } else {
            let out = result.unwrap();
            prop_assert_eq!(out.len(), v.indices_len() * sig.dtype.size());
        }
    }

    /// `interpret_at` gives `interpret`'s elements at any positions, in their order (repeats
    /// included), and `interpret`'s error whatever the positions: `gather-jit layer` checks a
    /// seeded sample of a large output with it.
    #[test]
    fn interpret_at_is_interpret_at_those_elements(
        p in any_signature().prop_flat_map(|s| problem(s, 2)),
        picks in prop::collection::vec(any::<Index>(), 0..8),
    ) {
        let v = p.validated();
        let indices = index_bytes(p.signature.index_type, &p.indices);
        let element = p.signature.dtype.size();
        let positions: Vec<usize> = match v.output_len() {
            0 => Vec::new(),
            len => picks.iter().map(|pick| pick.index(len)).collect(),
        };
        match (p.run(), interpret_at(&v, &p.data, &indices, &positions)) {
            (Ok(all), Ok(some)) => {
                let expected: Vec<u8> = positions
                    .iter()
                    .flat_map(|&flat| all[flat * element..(flat + 1) * element].to_vec())
                    .collect();
                prop_assert_eq!(some, expected);
            }
            (Err(all), Err(some)) => prop_assert_eq!(all, some),
            (all, some) => prop_assert!(
                false,
                "interpret {:?}, interpret_at {:?}",
                all.map(drop),
                some.map(drop)
            ),
        }
    }
}

/// `len` pseudo-random bytes from `seed` (distinct enough that a wrong element shows).
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            // xorshift64
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
