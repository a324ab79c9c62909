//! Properties of the scatter interpreter (proptest), each against an oracle simpler than the
//! interpreter: a naive loop written here, the gather interpreter (GatherND undoes ScatterND
//! with unique indices), or the interpreter's other entry point (in place against out of
//! place). Shapes are small (dims up to 3 or 4, zero-sized dims included).

use gather_jit::interp::{interpret, interpret_scatter, interpret_scatter_in_place};
use gather_jit::scatter::{Reduction, ScatterFlavor, ScatterOp, ScatterSignature};
use gather_jit::{DType, Error, IndexType, NegativeIndices, Signature};
use gather_jit_workloads::XorShift;
use proptest::prelude::*;
use proptest::sample::select;

use crate::util::{i32_bytes, i32_values, index_bytes};

/// A signature with its inputs; indices as values (encoded on use).
#[derive(Clone, Debug)]
pub struct Problem {
    pub signature: ScatterSignature,
    pub data: Vec<u8>,
    pub indices: Vec<i64>,
    pub updates: Vec<u8>,
}

impl Problem {
    pub fn indices_bytes(&self) -> Vec<u8> {
        index_bytes(self.signature.index_type, &self.indices)
    }
}

fn dims(rank: std::ops::RangeInclusive<usize>, max: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0..=max, rank)
}

/// The size of the data dim the index at flat position `n` addresses.
fn indexed_size(op: ScatterOp, data: &[usize], indices: &[usize], n: usize) -> usize {
    let r = data.len() as i64;
    match op {
        ScatterOp::Nd => data[n % indices[indices.len() - 1]],
        ScatterOp::Elements { axis } | ScatterOp::Update { axis } => {
            data[(if axis < 0 { axis + r } else { axis }) as usize]
        }
    }
}

/// An op with its shapes: `(op, data, indices, updates)`, valid for every flavor of the op.
type Shapes = (ScatterOp, Vec<usize>, Vec<usize>, Vec<usize>);

fn shapes() -> impl Strategy<Value = Shapes> {
    prop_oneof![
        nd_shapes(),
        elements_shapes(),
        wide_elements_shapes(),
        update_shapes()
    ]
}

fn nd_shapes() -> impl Strategy<Value = Shapes> {
    (dims(1..=3, 3), any::<prop::sample::Index>(), dims(0..=2, 3)).prop_map(|(data, k, grid)| {
        let k = 1 + k.index(data.len());
        let indices = [&grid[..], &[k]].concat();
        let updates = [&grid[..], &data[k..]].concat();
        (ScatterOp::Nd, data, indices, updates)
    })
}

fn elements_shapes() -> impl Strategy<Value = Shapes> {
    (
        dims(1..=3, 3),
        any::<prop::sample::Index>(),
        prop::collection::vec(any::<prop::sample::Index>(), 3),
        0..=4usize,
        any::<bool>(),
    )
        .prop_map(|(data, axis, picks, along, negative)| {
            let r = data.len();
            let axis = axis.index(r);
            let indices: Vec<usize> = (0..r)
                .map(|d| {
                    if d == axis {
                        along
                    } else {
                        picks[d].index(data[d] + 1)
                    }
                })
                .collect();
            let axis = if negative {
                axis as i64 - r as i64
            } else {
                axis as i64
            };
            let updates = indices.clone();
            (ScatterOp::Elements { axis }, data, indices, updates)
        })
}

/// ScatterElements along an axis before a last dim of up to 70: wider than a cache line of
/// every dtype, so the kernel writes in column blocks, a partial one last.
fn wide_elements_shapes() -> impl Strategy<Value = Shapes> {
    (
        dims(1..=2, 3),
        0..=70usize,
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(lead, width, axis, along)| {
            let data = [&lead[..], &[width]].concat();
            let axis = axis.index(lead.len());
            let mut indices = data.clone();
            indices[axis] = along.index(4);
            indices[data.len() - 1] = width.saturating_sub(along.index(3));
            let updates = indices.clone();
            (
                ScatterOp::Elements { axis: axis as i64 },
                data,
                indices,
                updates,
            )
        })
}

fn update_shapes() -> impl Strategy<Value = Shapes> {
    (dims(1..=3, 3), any::<prop::sample::Index>(), dims(0..=2, 3)).prop_map(
        |(data, axis, indices)| {
            let axis = axis.index(data.len());
            let updates = [&data[..axis], &indices[..], &data[axis + 1..]].concat();
            (
                ScatterOp::Update { axis: axis as i64 },
                data,
                indices,
                updates,
            )
        },
    )
}

/// Any valid signature (every flavor, reduction, dtype and index type the op allows) with
/// random bytes and indices that are mostly in range, sometimes negative, sometimes bad.
pub fn any_problem() -> impl Strategy<Value = Problem> {
    (
        shapes(),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
        select(DType::ALL.to_vec()),
        select(vec![
            IndexType::I8,
            IndexType::I16,
            IndexType::I32,
            IndexType::I64,
        ]),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(
            |((op, data, indices, updates), flavor, reduction, dtype, index_type, init, seed)| {
                let flavors: Vec<ScatterFlavor> = ScatterFlavor::ALL
                    .into_iter()
                    .filter(|f| f.supports(op.name()))
                    .collect();
                let flavor = flavors[flavor.index(flavors.len())];
                let reductions: Vec<Reduction> = flavor
                    .reductions()
                    .iter()
                    .copied()
                    .filter(|r| r.defined_on(dtype))
                    .collect();
                let reduction = reductions[reduction.index(reductions.len())];
                let signature = ScatterSignature::new(op, &data, &indices, &updates)
                    .with_flavor(flavor)
                    .with_reduction(reduction)
                    .with_use_init_val(init || !flavor.has_use_init_val())
                    .with_dtype(dtype)
                    .with_index_type(index_type);
                let mut rng = XorShift::new(seed);
                let mut bytes = |shape: &[usize]| {
                    let mut b = vec![0u8; shape.iter().product::<usize>() * dtype.size()];
                    rng.fill(&mut b);
                    b
                };
                let data_bytes = bytes(&data);
                let updates_bytes = bytes(&updates);
                let count: usize = indices.iter().product();
                // One problem in four draws indices that may be out of range; the others keep
                // every index valid (negative ones only where the flavor wraps), so that
                // problems with many indices still reach the writes.
                let may_be_bad = rng.below(4) == 0;
                let wraps = signature.negative == NegativeIndices::Wrap;
                let indices_values = (0..count)
                    .map(|n| {
                        let s = indexed_size(op, &data, &indices, n) as i64;
                        if may_be_bad {
                            // In [-s - 1, s]: the ends are out of range (and -s - 1 fits i8
                            // for s <= 3).
                            rng.below((2 * s + 2) as u64) as i64 - s - 1
                        } else if wraps {
                            rng.below((2 * s).max(1) as u64) as i64 - s
                        } else {
                            rng.below(s.max(1) as u64) as i64
                        }
                    })
                    .collect();
                Problem {
                    signature,
                    data: data_bytes,
                    indices: indices_values,
                    updates: updates_bytes,
                }
            },
        )
}

/// The first index (row-major) that is out of range under the problem's negative rule.
pub fn first_bad_index(p: &Problem) -> Option<usize> {
    let sig = &p.signature;
    (0..p.indices.len()).find(|&n| {
        let s = indexed_size(sig.op, &sig.data_shape, &sig.indices_shape, n) as i64;
        let v = p.indices[n];
        let lowest = if sig.negative == NegativeIndices::Wrap {
            -s
        } else {
            0
        };
        !(lowest..s).contains(&v)
    })
}

/// A ScatterND problem on i32 with unique index tuples (a random subset of the data prefixes,
/// each component written negatively or not), under a wrapping flavor.
fn unique_nd_problem() -> impl Strategy<Value = (Problem, Vec<Vec<usize>>)> {
    (
        dims(1..=3, 4),
        any::<prop::sample::Index>(),
        any::<u64>(),
        select(vec![
            (ScatterFlavor::Onnx, Reduction::None),
            (ScatterFlavor::Onnx, Reduction::Sum),
            (ScatterFlavor::Onnx, Reduction::Prod),
            (ScatterFlavor::Onnx, Reduction::Max),
            (ScatterFlavor::OpenvinoScatterNdUpdate3, Reduction::None),
            (ScatterFlavor::OpenvinoScatterNdUpdate15, Reduction::Sub),
            (ScatterFlavor::OpenvinoScatterNdUpdate15, Reduction::Min),
            (ScatterFlavor::TensorRt, Reduction::None),
        ]),
    )
        .prop_map(|(data_shape, k, seed, (flavor, reduction))| {
            let k = 1 + k.index(data_shape.len());
            let mut rng = XorShift::new(seed);
            // Every prefix of data.shape[..k], shuffled; take some.
            let prefixes: usize = data_shape[..k].iter().product();
            let mut order: Vec<usize> = (0..prefixes).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let n = rng.below(prefixes as u64 + 1) as usize;
            let tuples: Vec<Vec<usize>> = order[..n]
                .iter()
                .map(|&flat| gather_jit::ir::unravel(flat, &data_shape[..k]))
                .collect();
            let negative = flavor != ScatterFlavor::TensorRt;
            let indices: Vec<i64> = tuples
                .iter()
                .flat_map(|t| t.iter().zip(&data_shape))
                .map(|(&c, &d)| {
                    if negative && rng.below(2) == 1 {
                        c as i64 - d as i64
                    } else {
                        c as i64
                    }
                })
                .collect();
            let slice: usize = data_shape[k..].iter().product();
            let values = |rng: &mut XorShift, len: usize| -> Vec<i32> {
                (0..len).map(|_| rng.below(2001) as i32 - 1000).collect()
            };
            let data = values(&mut rng, data_shape.iter().product());
            let updates = values(&mut rng, n * slice);
            let updates_shape = [&[n][..], &data_shape[k..]].concat();
            let signature = ScatterSignature::scatter_nd(&data_shape, &[n, k], &updates_shape)
                .with_flavor(flavor)
                .with_reduction(reduction)
                .with_dtype(DType::I32);
            let problem = Problem {
                signature,
                data: i32_bytes(&data),
                indices,
                updates: i32_bytes(&updates),
            };
            (problem, tuples)
        })
}

/// ScatterElements on i64 with repeats and negatives, for a naive loop with any reduction.
fn elements_i64_problem() -> impl Strategy<Value = Problem> {
    (
        elements_shapes(),
        any::<u64>(),
        any::<prop::sample::Index>(),
    )
        .prop_map(|((op, data, indices, updates), seed, reduction)| {
            let reduction = [
                Reduction::None,
                Reduction::Sum,
                Reduction::Prod,
                Reduction::Min,
                Reduction::Max,
            ][reduction.index(5)];
            let mut rng = XorShift::new(seed);
            let count: usize = indices.iter().product();
            let index_values: Vec<i64> = (0..count)
                .map(|n| {
                    let s = indexed_size(op, &data, &indices, n) as i64;
                    // Valid under wrapping; an empty axis has no valid index, so none are drawn.
                    if s == 0 {
                        0
                    } else {
                        rng.below(2 * s as u64) as i64 - s
                    }
                })
                .collect();
            let mut values = |len: usize| -> Vec<u8> {
                (0..len)
                    .flat_map(|_| (rng.next_u64() as i64).to_ne_bytes())
                    .collect()
            };
            let signature = ScatterSignature::new(op, &data, &indices, &updates)
                .with_reduction(reduction)
                .with_dtype(DType::I64);
            Problem {
                data: values(data.iter().product()),
                updates: values(updates.iter().product()),
                indices: index_values,
                signature,
            }
        })
}

fn i64_values(bytes: &[u8]) -> Vec<i64> {
    bytes
        .chunks_exact(8)
        .map(|c| i64::from_ne_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

fn ravel(coords: &[usize], shape: &[usize]) -> usize {
    coords
        .iter()
        .zip(shape)
        .fold(0, |acc, (&c, &d)| acc * d + c)
}

proptest! {
    /// In place and out of place agree on every problem: the same output, or the same error
    /// with the in-place data untouched; and the error is the first bad index, found by a scan
    /// written here.
    #[test]
    fn in_place_equals_out_of_place(p in any_problem()) {
        let layout = p.signature.validate().expect("generated signatures are valid");
        prop_assert_eq!(
            layout.updates_len(),
            layout.outer_len() * layout.index_count() * layout.slice_len()
        );
        let indices = p.indices_bytes();
        let out = interpret_scatter(&layout, &p.data, &indices, &p.updates);
        let mut buffer = p.data.clone();
        let in_place = interpret_scatter_in_place(&layout, &mut buffer, &indices, &p.updates);
        match (&out, &in_place) {
            (Ok(out), Ok(())) => prop_assert_eq!(out, &buffer),
            (Err(a), Err(b)) => {
                prop_assert_eq!(a, b);
                prop_assert_eq!(&buffer, &p.data, "a failed in-place call changed data");
            }
            _ => prop_assert!(false, "out of place {:?}, in place {:?}", out, in_place),
        }
        match (first_bad_index(&p), &out) {
            (Some(n), Err(Error::IndexOutOfRange { position, .. })) => {
                prop_assert_eq!(position, &gather_jit::ir::unravel(n, &p.signature.indices_shape));
            }
            (Some(n), other) => prop_assert!(false, "index {} is bad, yet {:?}", n, other),
            (None, Err(Error::IndexOutOfRange { .. })) => prop_assert!(false, "no bad index, yet an index error"),
            (None, _) => {}
        }
    }

    /// ScatterND with unique tuples against a naive loop over the tuples.
    #[test]
    fn scatter_nd_with_unique_indices_matches_a_naive_loop((p, tuples) in unique_nd_problem()) {
        let sig = &p.signature;
        let layout = sig.validate().expect("valid");
        let out = i32_values(&interpret_scatter(&layout, &p.data, &p.indices_bytes(), &p.updates).expect("in range"));
        let k = sig.indices_shape[1];
        let slice: usize = sig.data_shape[k..].iter().product();
        let mut want = i32_values(&p.data);
        let updates = i32_values(&p.updates);
        for (t, tuple) in tuples.iter().enumerate() {
            let base = ravel(tuple, &sig.data_shape[..k]) * slice;
            for j in 0..slice {
                let (w, u) = (&mut want[base + j], updates[t * slice + j]);
                *w = match sig.reduction {
                    Reduction::None => u,
                    Reduction::Sum => w.wrapping_add(u),
                    Reduction::Sub => w.wrapping_sub(u),
                    Reduction::Prod => w.wrapping_mul(u),
                    Reduction::Max => (*w).max(u),
                    Reduction::Min => (*w).min(u),
                    Reduction::Mean => unreachable!("not generated"),
                };
            }
        }
        prop_assert_eq!(out, want);
    }

    /// GatherND reads back what ScatterND wrote: with unique tuples, gathering the scatter's
    /// output at the same indices gives the updates (the gather interpreter is the oracle).
    #[test]
    fn gather_nd_undoes_scatter_nd((p, _) in unique_nd_problem()) {
        let sig = p.signature.clone().with_reduction(Reduction::None);
        let layout = sig.validate().expect("valid");
        let indices = p.indices_bytes();
        let out = interpret_scatter(&layout, &p.data, &indices, &p.updates).expect("in range");
        let gather = Signature::gather_nd(&sig.data_shape, &sig.indices_shape, 0)
            .with_dtype(DType::I32)
            .validate()
            .expect("valid gather");
        let read = interpret(&gather, &out, &indices).expect("in range");
        prop_assert_eq!(read, p.updates);
    }

    /// ScatterElements on i64 against a naive loop over the positions, repeats and negatives
    /// included: updates fold in row-major order.
    #[test]
    fn scatter_elements_matches_a_naive_loop(p in elements_i64_problem()) {
        let sig = &p.signature;
        let layout = sig.validate().expect("valid");
        let result = interpret_scatter(&layout, &p.data, &p.indices_bytes(), &p.updates);
        let ScatterOp::Elements { axis } = sig.op else { unreachable!() };
        let r = sig.data_shape.len() as i64;
        let axis = (if axis < 0 { axis + r } else { axis }) as usize;
        if sig.data_shape[axis] == 0 && !p.indices.is_empty() {
            prop_assert!(result.is_err(), "an index into an empty axis must fail");
            return Ok(());
        }
        let out = i64_values(&result.expect("in range"));
        let mut want = i64_values(&p.data);
        let updates = i64_values(&p.updates);
        let s = sig.data_shape[axis] as i64;
        for (n, &u) in updates.iter().enumerate() {
            let mut pos = gather_jit::ir::unravel(n, &sig.indices_shape);
            let i = p.indices[n];
            pos[axis] = (if i < 0 { i + s } else { i }) as usize;
            let w = &mut want[ravel(&pos, &sig.data_shape)];
            *w = match sig.reduction {
                Reduction::None => u,
                Reduction::Sum => w.wrapping_add(u),
                Reduction::Prod => w.wrapping_mul(u),
                Reduction::Max => (*w).max(u),
                Reduction::Min => (*w).min(u),
                _ => unreachable!("not generated"),
            };
        }
        prop_assert_eq!(out, want);
    }
}
