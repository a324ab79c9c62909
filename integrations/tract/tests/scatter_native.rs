//! The JIT scatter op against tract's own ops (`tract_core::ops::array::{ScatterNd,
//! ScatterElements}`) and against gather-jit's reference interpreter
//! (`gather_jit::scatter::interpret_scatter`), on random problems: every reduction tract has
//! (none, add, mul, min, max), the element types both share, i32/i64 indices, duplicates.
//!
//! - Against tract's ops, on indices in range and not negative (tract's ScatterND refuses or
//!   panics on negative ones): bit-identical outputs.
//! - Against the interpreter, on any indices (negative, out of range): the same bytes or the
//!   same error, word for word, with the data handed over (the op writes in place) and shared
//!   (the op writes a fresh output and the shared tensor is left as it was).

use std::panic::{AssertUnwindSafe, catch_unwind};

use gather_jit::scatter::{ScatterOp, ScatterSignature, interpret_scatter};
use gather_jit_tract::{JitScatter, dtype_of, index_type_of, reduction_of};
use proptest::prelude::*;
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::internal::{EvalContext, EvalOp};
use tract_onnx::tract_hir::tract_core::ops::array::{
    ScatterElements as NativeScatterElements, ScatterNd as NativeScatterNd, ScatterReduction,
};

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

const REDUCTIONS: [ScatterReduction; 5] = [
    ScatterReduction::None,
    ScatterReduction::Add,
    ScatterReduction::Mul,
    ScatterReduction::Min,
    ScatterReduction::Max,
];

/// Which indices a problem draws.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Indices {
    /// In `0..dim`: what tract's ops take.
    InRange,
    /// In `-dim..dim`: ONNX's valid indices.
    Wrapping,
    /// Anywhere in `-2 dim - 1..2 dim + 1`, so often out of range.
    Any,
}

/// One random scatter.
#[derive(Debug, Clone)]
struct Problem {
    op: ScatterOp,
    reduction: ScatterReduction,
    datum_type: DatumType,
    index_type: DatumType,
    data_shape: Vec<usize>,
    indices_shape: Vec<usize>,
    updates_shape: Vec<usize>,
    indices: Vec<i64>,
    seed: u64,
}

/// Small values, exact in every element type: no NaN, no -0.0 (so that min and max have no
/// ties with different bits) and, for mul, products that stay small.
fn values(datum_type: DatumType, shape: &[usize], seed: u64) -> Tensor {
    let len: usize = shape.iter().product();
    let values: Vec<i64> = (0..len as u64)
        .map(|i| {
            let x = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed).rotate_left(17) % 7;
            match datum_type {
                DatumType::Bool => (x & 1) as i64,
                DatumType::U8 | DatumType::U16 | DatumType::U32 | DatumType::U64 => x as i64,
                _ => x as i64 - 3,
            }
        })
        .collect();
    let tensor = Tensor::from_shape(shape, &values).expect("tensor");
    if datum_type == DatumType::Bool {
        return tensor
            .cast_to_dt(DatumType::U8)
            .expect("casts")
            .cast_to_dt(DatumType::Bool)
            .expect("casts")
            .into_owned();
    }
    tensor.cast_to_dt(datum_type).expect("casts").into_owned()
}

impl Problem {
    fn data(&self) -> Tensor {
        values(self.datum_type, &self.data_shape, self.seed)
    }

    fn updates(&self) -> Tensor {
        values(self.datum_type, &self.updates_shape, !self.seed)
    }

    fn indices(&self) -> Tensor {
        Tensor::from_shape(&self.indices_shape, &self.indices)
            .expect("tensor")
            .cast_to_dt(self.index_type)
            .expect("fits")
            .into_owned()
    }

    fn jit(&self) -> JitScatter {
        JitScatter {
            op: self.op,
            reduction: reduction_of(self.reduction),
        }
    }

    /// The interpreter's answer: output bytes or the error's message.
    fn interpreter(&self) -> Result<Vec<u8>, String> {
        let signature = ScatterSignature::new(
            self.op,
            &self.data_shape,
            &self.indices_shape,
            &self.updates_shape,
        )
        .with_reduction(reduction_of(self.reduction))
        .with_dtype(dtype_of(self.datum_type).expect("shared type"))
        .with_index_type(index_type_of(self.index_type).expect("an index type"));
        let layout = signature.validate().map_err(|e| e.to_string())?;
        interpret_scatter(
            &layout,
            self.data().as_bytes(),
            self.indices().as_bytes(),
            self.updates().as_bytes(),
        )
        .map_err(|e| e.to_string())
    }

    /// tract's own op, `None` if it panicked.
    fn native(&self) -> Option<TractResult<Tensor>> {
        let inputs = tvec!(
            self.data().into_tvalue(),
            self.indices().into_tvalue(),
            self.updates().into_tvalue()
        );
        let (op, reduction) = (self.op, self.reduction);
        catch_unwind(AssertUnwindSafe(move || {
            let ctx = EvalContext::out_of_plan();
            let outputs = match op {
                ScatterOp::Nd => NativeScatterNd::new(reduction).eval(&ctx, inputs),
                ScatterOp::Elements { axis } => NativeScatterElements {
                    axis: usize::try_from(axis).expect("normalised"),
                    reduction,
                }
                .eval(&ctx, inputs),
                ScatterOp::Update { .. } => unreachable!("not an ONNX op"),
            };
            outputs.map(|mut o| o.remove(0).into_tensor())
        }))
        .ok()
    }

    /// The JIT op with the data handed over (`shared` false: the op may write into it) or
    /// kept by the caller too (`shared`: the caller's tensor must come back unchanged).
    fn jit_eval(&self, shared: bool) -> Result<Tensor, String> {
        let data = self.data().into_tvalue();
        let kept = shared.then(|| data.clone());
        let result = self.jit().eval(
            &EvalContext::out_of_plan(),
            tvec!(
                data,
                self.indices().into_tvalue(),
                self.updates().into_tvalue()
            ),
        );
        if let Some(kept) = kept {
            assert_eq!(
                kept.as_bytes(),
                self.data().as_bytes(),
                "the op wrote into a tensor the caller still holds: {self:?}"
            );
        }
        result
            .map(|mut o| o.remove(0).into_tensor())
            .map_err(|e| e.to_string())
    }
}

/// A random ScatterND (`nd`) or ScatterElements problem with indices drawn as `mode` says.
fn problem(nd: bool, mode: Indices) -> impl Strategy<Value = Problem> {
    (
        prop::collection::vec(1..5usize, 1..5),
        prop::collection::vec(0..4usize, 0..3),
        any::<u64>(),
        prop::sample::select(DATUM_TYPES.to_vec()),
        prop::sample::select(vec![DatumType::I32, DatumType::I64]),
        prop::sample::select(REDUCTIONS.to_vec()),
        any::<u64>(),
    )
        .prop_map(
            move |(data_shape, batch, choice, datum_type, index_type, reduction, seed)| {
                let mut rng = Rng(choice | 1);
                let rank = data_shape.len();
                let index = |rng: &mut Rng, dim: usize| -> i64 {
                    let dim = dim as i64;
                    match mode {
                        Indices::InRange => rng.below(dim as u64) as i64,
                        Indices::Wrapping => rng.below(2 * dim as u64) as i64 - dim,
                        Indices::Any => rng.below(4 * dim as u64 + 3) as i64 - 2 * dim - 1,
                    }
                };
                let (op, indices_shape, updates_shape, indices) = if nd {
                    let depth = 1 + rng.below(rank as u64) as usize;
                    let tuples: usize = batch.iter().product();
                    let indices = (0..tuples * depth)
                        .map(|i| index(&mut rng, data_shape[i % depth]))
                        .collect();
                    let indices_shape = [&batch[..], &[depth]].concat();
                    let updates_shape = [&batch[..], &data_shape[depth..]].concat();
                    (ScatterOp::Nd, indices_shape, updates_shape, indices)
                } else {
                    let axis = rng.below(rank as u64) as usize;
                    // Along the axis any length (0 included); elsewhere at most data's.
                    let indices_shape: Vec<usize> = (0..rank)
                        .map(|d| match d == axis {
                            true => rng.below(6) as usize,
                            false => rng.below(data_shape[d] as u64 + 1) as usize,
                        })
                        .collect();
                    let count: usize = indices_shape.iter().product();
                    let indices = (0..count)
                        .map(|_| index(&mut rng, data_shape[axis]))
                        .collect();
                    let op = ScatterOp::Elements { axis: axis as i64 };
                    (op, indices_shape.clone(), indices_shape, indices)
                };
                Problem {
                    op,
                    reduction,
                    datum_type,
                    index_type,
                    data_shape,
                    indices_shape,
                    updates_shape,
                    indices,
                    seed,
                }
            },
        )
}

/// xorshift64: the problem's choices from one seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        if n == 0 { 0 } else { self.0 % n }
    }
}

/// The JIT op and tract's own op give the same bytes on indices in range. tract's reductions
/// do not take bool (its op errs), which the interpreter test covers.
fn check_against_tract(p: &Problem) -> Result<(), TestCaseError> {
    let jit = p
        .jit_eval(false)
        .map_err(|e| TestCaseError::fail(format!("JIT failed: {e} on {p:?}")))?;
    let native = p.native().ok_or_else(|| {
        TestCaseError::fail(format!("tract's op panicked on indices in range: {p:?}"))
    })?;
    if p.datum_type == DatumType::Bool && p.reduction != ScatterReduction::None {
        prop_assert!(native.is_err(), "tract reduced bools: {:?}", p);
        return Ok(());
    }
    let native = native.map_err(|e| TestCaseError::fail(format!("tract's op failed: {e:?}")))?;
    prop_assert_eq!(jit.datum_type(), native.datum_type());
    prop_assert_eq!(jit.shape(), native.shape());
    prop_assert_eq!(jit.as_bytes(), native.as_bytes(), "{:?}", p);
    Ok(())
}

/// The JIT op, in place and out of place, gives the interpreter's bytes or its error.
fn check_against_interpreter(p: &Problem) -> Result<(), TestCaseError> {
    let expected = p.interpreter();
    for shared in [false, true] {
        let got = p.jit_eval(shared).map(|t| t.as_bytes().to_vec());
        match (&got, &expected) {
            (Ok(got), Ok(expected)) => prop_assert_eq!(got, expected, "{:?}", p),
            // The op's error is gather-jit's, word for word.
            (Err(got), Err(expected)) => prop_assert_eq!(got, expected, "{:?}", p),
            _ => prop_assert!(false, "JIT {got:?}, interpreter {expected:?} on {p:?}"),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn scatter_nd_matches_tracts_op(p in problem(true, Indices::InRange)) {
        check_against_tract(&p)?;
    }

    #[test]
    fn scatter_elements_matches_tracts_op(p in problem(false, Indices::InRange)) {
        check_against_tract(&p)?;
    }

    #[test]
    fn scatter_nd_matches_the_interpreter(p in problem(true, Indices::Any)) {
        check_against_interpreter(&p)?;
    }

    #[test]
    fn scatter_elements_matches_the_interpreter(p in problem(false, Indices::Any)) {
        check_against_interpreter(&p)?;
    }

    #[test]
    fn negative_indices_wrap(p in problem(true, Indices::Wrapping)) {
        check_against_interpreter(&p)?;
        prop_assert!(p.jit_eval(false).is_ok(), "{:?}", p);
    }
}

/// The problems above do reach what they are for: duplicates, every reduction, errors.
#[test]
fn the_problems_cover_duplicates_and_errors() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut duplicates, mut errors, mut reductions) = (0, 0, std::collections::HashSet::new());
    for nd in [true, false] {
        let strategy = problem(nd, Indices::Any);
        for _ in 0..200 {
            let p = strategy.new_tree(&mut runner).expect("a problem").current();
            let mut seen = p.indices.clone();
            seen.sort();
            duplicates += usize::from(seen.windows(2).any(|w| w[0] == w[1]));
            errors += usize::from(p.interpreter().is_err());
            reductions.insert(p.reduction.as_str());
        }
    }
    assert!(
        duplicates > 50,
        "{duplicates} problems with duplicate indices"
    );
    assert!(errors > 50, "{errors} problems with an index out of range");
    assert_eq!(reductions.len(), REDUCTIONS.len());
}
