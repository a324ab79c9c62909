//! The JIT-backed op against tract's own ops (`tract_core::ops::array::{Gather,
//! GatherElements, GatherNd}`) on random problems: bit-identical outputs where tract's op
//! succeeds, an index error naming the bad index where an index is out of range (tract's op
//! then errs or panics), and the ONNX answer for negative GatherND indices, on which tract's
//! op panics.

use std::panic::{AssertUnwindSafe, catch_unwind};

use gather_jit::Op as GatherOp;
use gather_jit_tract::JitGather;
use proptest::prelude::*;
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::internal::{EvalContext, EvalOp};
use tract_onnx::tract_hir::tract_core::ops::array as native;

/// What the ops are evaluated in: no plan, as tract's constant folding evaluates them.
fn out_of_plan() -> EvalContext<'static> {
    EvalContext::out_of_plan()
}

/// Element types tract and gather-jit share.
const DATUM_TYPES: [DatumType; 11] = [
    DatumType::F32,
    DatumType::F64,
    DatumType::F16,
    DatumType::I8,
    DatumType::U8,
    DatumType::I16,
    DatumType::U16,
    DatumType::I32,
    DatumType::I64,
    DatumType::U64,
    DatumType::Bool,
];

/// One random gather: the op, data of `data_shape` filled from `seed`, indices as `i64` values
/// (stored as `index_type`).
#[derive(Debug, Clone)]
struct Problem {
    op: GatherOp,
    datum_type: DatumType,
    index_type: DatumType,
    data_shape: Vec<usize>,
    indices_shape: Vec<usize>,
    indices: Vec<i64>,
    seed: u8,
}

impl Problem {
    fn data(&self) -> Tensor {
        let len: usize = self.data_shape.iter().product::<usize>() * self.datum_type.size_of();
        let bytes: Vec<u8> = (0..len)
            .map(|i| {
                let x = (i as u8).wrapping_mul(37).wrapping_add(self.seed);
                if self.datum_type == DatumType::Bool {
                    x & 1
                } else {
                    x
                }
            })
            .collect();
        // SAFETY: plain-data types, and for `bool` every byte is 0 or 1.
        unsafe { Tensor::from_raw_dt(self.datum_type, &self.data_shape, &bytes) }.expect("tensor")
    }

    fn indices(&self) -> Tensor {
        let tensor = Tensor::from_shape(&self.indices_shape, &self.indices).expect("tensor");
        tensor
            .cast_to_dt(self.index_type)
            .expect("fits")
            .into_owned()
    }

    fn native_eval(
        &self,
        mut inputs: TVec<TValue>,
    ) -> std::thread::Result<TractResult<TVec<TValue>>> {
        let op = self.op;
        // tract's typed Gather takes i64 indices (its ONNX loader casts them first).
        if let GatherOp::Gather { .. } = op {
            let indices = inputs[1]
                .cast_to_dt(DatumType::I64)
                .expect("casts")
                .into_owned();
            inputs[1] = indices.into_tvalue();
        }
        catch_unwind(AssertUnwindSafe(move || match op {
            GatherOp::Gather { axis, .. } => {
                native::Gather::new(axis as usize).eval(&out_of_plan(), inputs)
            }
            GatherOp::GatherElements { axis } => native::GatherElements {
                axis: axis as usize,
            }
            .eval(&out_of_plan(), inputs),
            GatherOp::GatherNd { batch_dims } => {
                native::GatherNd::new(batch_dims as usize).eval(&out_of_plan(), inputs)
            }
        }))
    }

    fn jit_eval(&self, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        JitGather { op: self.op }.eval(&out_of_plan(), inputs)
    }

    /// Runs both; `in_range` says whether every index is valid for ONNX.
    fn check(&self, in_range: bool) -> Result<(), TestCaseError> {
        let inputs = || tvec!(self.data().into_tvalue(), self.indices().into_tvalue());
        let jit = self.jit_eval(inputs());
        let native = self.native_eval(inputs());
        if in_range {
            let jit = jit.map_err(|e| TestCaseError::fail(format!("JIT failed: {e:?}")))?;
            let native = native
                .map_err(|_| TestCaseError::fail("tract's op panicked"))?
                .map_err(|e| TestCaseError::fail(format!("tract's op failed: {e:?}")))?;
            prop_assert_eq!(jit[0].shape(), native[0].shape());
            prop_assert_eq!(jit[0].datum_type(), native[0].datum_type());
            prop_assert_eq!(jit[0].as_bytes(), native[0].as_bytes(), "{:?}", self);
        } else {
            let error = jit.expect_err("an index out of range is an error");
            prop_assert!(format!("{error:?}").contains("out of range"), "{error:?}");
            prop_assert!(
                !matches!(native, Ok(Ok(_))),
                "tract's op accepted an index out of range"
            );
        }
        Ok(())
    }
}

/// A random problem; with `oob`, one index lies outside its dim.
fn problem(oob: bool) -> impl Strategy<Value = (Problem, bool)> {
    (
        0..3usize,
        prop::collection::vec(1..5usize, 1..5),
        prop::sample::select(DATUM_TYPES.to_vec()),
        prop::sample::select(vec![DatumType::I32, DatumType::I64]),
        any::<u8>(),
        any::<u64>(),
        0..4usize,
    )
        .prop_map(
            move |(kind, data_shape, datum_type, index_type, seed, salt, pick)| {
                let rank = data_shape.len();
                let mut rng = salt | 1;
                let mut next = move |n: usize| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    (rng % n as u64) as usize
                };
                let (op, indices_shape, dims): (GatherOp, Vec<usize>, Vec<usize>) = match kind {
                    0 => {
                        let axis = pick % rank;
                        let shape: Vec<usize> = (0..1 + pick % 3).map(|_| 1 + next(4)).collect();
                        let count = shape.iter().product();
                        (
                            GatherOp::Gather {
                                axis: axis as i64,
                                batch_dims: 0,
                            },
                            shape,
                            vec![data_shape[axis]; count],
                        )
                    }
                    1 => {
                        let axis = pick % rank;
                        let shape: Vec<usize> = data_shape
                            .iter()
                            .enumerate()
                            .map(|(d, &n)| if d == axis { 1 + next(4) } else { 1 + next(n) })
                            .collect();
                        let count = shape.iter().product();
                        (
                            GatherOp::GatherElements { axis: axis as i64 },
                            shape,
                            vec![data_shape[axis]; count],
                        )
                    }
                    _ => {
                        let batch_dims = pick % rank;
                        let depth = 1 + next(rank - batch_dims);
                        let mut shape = data_shape[..batch_dims].to_vec();
                        shape.push(1 + next(3));
                        shape.push(depth);
                        let tuples: usize = shape[..shape.len() - 1].iter().product();
                        let dims = (0..tuples)
                            .flat_map(|_| data_shape[batch_dims..batch_dims + depth].to_vec())
                            .collect();
                        (
                            GatherOp::GatherNd {
                                batch_dims: batch_dims as i64,
                            },
                            shape,
                            dims,
                        )
                    }
                };
                // tract's GatherND takes no negative index; the others count from the end.
                let negatives = !matches!(op, GatherOp::GatherNd { .. });
                let mut indices: Vec<i64> = dims
                    .iter()
                    .map(|&d| {
                        let d = d as i64;
                        if negatives && next(3) == 0 {
                            -1 - next(d as usize) as i64
                        } else {
                            next(d as usize) as i64
                        }
                    })
                    .collect();
                let bad = oob && !indices.is_empty();
                if bad {
                    let at = next(indices.len());
                    indices[at] = if next(2) == 0 {
                        dims[at] as i64
                    } else {
                        -(dims[at] as i64) - 1
                    };
                }
                let problem = Problem {
                    op,
                    datum_type,
                    index_type,
                    data_shape,
                    indices_shape,
                    indices,
                    seed,
                };
                (problem, !bad)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn jit_matches_tract_on_valid_indices((problem, in_range) in problem(false)) {
        problem.check(in_range)?;
    }

    #[test]
    fn jit_rejects_what_tract_cannot_take((problem, in_range) in problem(true)) {
        problem.check(in_range)?;
    }
}

/// tract's GatherND panics (`assertion failed: index < dim`) on the negative indices ONNX
/// allows; the JIT-backed op counts them from the end.
#[test]
fn negative_gather_nd_indices_count_from_the_end() {
    let data = Tensor::from_shape(&[2, 3], &[0f32, 1., 2., 10., 11., 12.]).expect("tensor");
    let indices = Tensor::from_shape(&[2, 2], &[-1i64, -1, 0, -3]).expect("tensor");
    let inputs = || tvec!(data.clone().into_tvalue(), indices.clone().into_tvalue());
    let op = GatherOp::GatherNd { batch_dims: 0 };
    let jit = JitGather { op }
        .eval(&out_of_plan(), inputs())
        .expect("ONNX allows negative indices");
    let jit = jit[0].try_as_plain_ram().expect("plain");
    assert_eq!(jit.as_slice::<f32>().expect("f32"), &[12.0, 0.0]);
    let native = catch_unwind(AssertUnwindSafe(|| {
        native::GatherNd::new(0).eval(&out_of_plan(), inputs())
    }));
    assert!(
        !matches!(native, Ok(Ok(_))),
        "tract's GatherND now takes negative indices: this test's premise is gone"
    );
}
