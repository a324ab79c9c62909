//! Differential property tests: the JIT against the reference interpreter, byte for byte,
//! errors included (same variant, same position, same value).

use crate::fuzz_replay::case::{gather_batch_dims, max_gather_batch_dims};
use gather_jit::interp::interpret;
use gather_jit::ir::Validated;
use gather_jit::specialize::Plan;
use gather_jit::{
    DType, Flavor, IndexPolicy, IndexType, Kernel, KernelCache, NegativeIndices, Op, Options,
    OutOfRange, Signature, Tuning,
};
use proptest::prelude::*;

/// One random test case: a valid signature plus its data and indices bytes.
#[derive(Clone, Debug)]
pub struct Problem {
    pub signature: Signature,
    pub data: Vec<u8>,
    pub indices: Vec<u8>,
}

impl Problem {
    /// Runs both paths and asserts they agree.
    pub fn check(&self) -> Result<(), TestCaseError> {
        self.check_tuned(Tuning::default())
    }

    /// As [`Problem::check`], with the kernel specialised under `tuning`.
    pub fn check_tuned(&self, tuning: Tuning) -> Result<(), TestCaseError> {
        let kernel = Kernel::compile_tuned(&self.signature, tuning).expect("compiles");
        self.check_kernel(&kernel)
    }

    /// As [`Problem::check`], with `kernel` (built for this problem's signature).
    pub fn check_kernel(&self, kernel: &Kernel) -> Result<(), TestCaseError> {
        let validated = self
            .signature
            .validate()
            .expect("strategy builds valid signatures");
        let expected = interpret(&validated, &self.data, &self.indices);
        let mut output = vec![0xA5u8; validated.output_len() * self.signature.dtype.size()];
        let actual = kernel
            .run_bytes(&self.data, &self.indices, &mut output)
            .map(|()| output);
        Self::compare(&self.signature, &expected, &actual, "jit")?;
        // The same split across threads (ranges of the outer loop; with more threads than
        // bands, a banded kernel splits the rows of its bands too).
        for threads in [3, 7] {
            let mut output = vec![0x5Au8; validated.output_len() * self.signature.dtype.size()];
            let parallel = kernel
                .run_bytes_parallel(&self.data, &self.indices, &mut output, threads)
                .map(|()| output);
            Self::compare(&self.signature, &expected, &parallel, "parallel jit")?;
        }
        // One `call_range` per iteration of the outer loop, in order, stopping at the first
        // error: as a runtime with its own threads would split it (a banded kernel's ranges
        // are column bands or batches of them, yet the first failing one names the gather's first bad index).
        let mut output = vec![0x3Cu8; validated.output_len() * self.signature.dtype.size()];
        let mut result = Ok(());
        for start in 0..kernel.outer_extent() {
            // SAFETY: the buffers hold the signature's byte lengths (`run_bytes` accepted
            // them above) and are distinct allocations; the ranges lie within the outer loop
            // and run one after the other.
            result = unsafe {
                kernel.call_range(
                    self.data.as_ptr(),
                    self.indices.as_ptr(),
                    output.as_mut_ptr(),
                    start..start + 1,
                )
            };
            if result.is_err() {
                break;
            }
        }
        let ranges = result.map(|()| output);
        Self::compare(&self.signature, &expected, &ranges, "call_range one by one")
    }

    fn compare(
        signature: &Signature,
        expected: &gather_jit::Result<Vec<u8>>,
        actual: &gather_jit::Result<Vec<u8>>,
        what: &str,
    ) -> Result<(), TestCaseError> {
        match (expected, actual) {
            (Ok(e), Ok(a)) => prop_assert!(e == a, "{what}: output differs for {}", signature),
            (Err(e), Err(a)) => prop_assert_eq!(e, a, "{}: errors differ for {}", what, signature),
            _ => prop_assert!(
                false,
                "{}: interpreter {:?} vs {} {:?}",
                signature,
                expected.as_ref().map(|v| v.len()),
                what,
                actual.as_ref().map(|v| v.len())
            ),
        }
        Ok(())
    }
}

fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0usize), 2 => Just(1usize), 8 => 2usize..=5, 2 => 6usize..=19]
}

fn shape(min: usize, max: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(dim(), min..=max)
}

fn policy() -> impl Strategy<Value = Option<IndexPolicy>> {
    let negative = prop_oneof![Just(NegativeIndices::Wrap), Just(NegativeIndices::Invalid)];
    let oob = prop_oneof![
        Just(OutOfRange::Error),
        Just(OutOfRange::Zero),
        Just(OutOfRange::Clamp)
    ];
    prop::option::of(
        (negative, oob).prop_map(|(negative, out_of_range)| IndexPolicy {
            negative,
            out_of_range,
        }),
    )
}

/// A raw index choice, turned into a value once the indexed dim size is known.
fn index_choice() -> impl Strategy<Value = (u8, u64)> {
    (0u8..100, any::<u64>())
}

fn index_value(choice: (u8, u64), size: usize) -> i128 {
    let s = size as i128;
    let r = choice.1 as i128;
    match choice.0 {
        0..=69 if s > 0 => r % s,         // valid
        70..=81 if s > 0 => -(r % s) - 1, // negative, wraps
        82..=87 => s + (r % 3),           // just past the end
        88..=91 => -s - 1 - (r % 3),      // just below -s
        92..=95 => i64::MIN as i128 + r % 2,
        _ => i64::MAX as i128 - r % 2,
    }
}

/// Whether a problem is small enough for a quick interpreter run.
fn quick(validated: &Validated) -> bool {
    validated.data_len() <= 200_000 && validated.output_len() <= 20_000
}

/// Fills data and indices for a signature that has already been built.
fn fill(signature: Signature, choices: Vec<(u8, u64)>, seed: u8) -> Problem {
    let validated = signature.validate().expect("valid");
    if !quick(&validated) {
        // Too large for a quick interpreter run: `small` drops it before anything is filled.
        return Problem {
            signature,
            data: Vec::new(),
            indices: Vec::new(),
        };
    }
    let data_bytes = validated.data_len() * signature.dtype.size();
    // Distinct-looking bytes so a wrong source offset shows up.
    let data = (0..data_bytes)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
        .collect();
    let mut indices = Vec::new();
    let shape = &signature.indices_shape;
    for flat in 0..validated.indices_len() {
        let mut position = vec![0; shape.len()];
        let mut rest = flat;
        for (p, &d) in position.iter_mut().zip(shape).rev() {
            *p = rest % d;
            rest /= d;
        }
        let size = signature.data_shape[validated.indexed_data_dim(&position)];
        let choice = choices[flat % choices.len()];
        // Truncated like a C cast: negatives in unsigned types become large values.
        signature
            .index_type
            .encode_wrapping(index_value(choice, size), &mut indices);
    }
    Problem {
        signature,
        data,
        indices,
    }
}

fn common() -> impl Strategy<Value = (DType, IndexType, Option<IndexPolicy>, Vec<(u8, u64)>, u8)> {
    (
        prop::sample::select(DType::ALL.to_vec()),
        prop::sample::select(IndexType::ALL.to_vec()),
        policy(),
        prop::collection::vec(index_choice(), 1..16),
        any::<u8>(),
    )
}

fn finish(
    op: Op,
    flavor: Flavor,
    data: &[usize],
    indices: &[usize],
    (dtype, index_type, policy, choices, seed): (
        DType,
        IndexType,
        Option<IndexPolicy>,
        Vec<(u8, u64)>,
        u8,
    ),
) -> Problem {
    let options = Options {
        flavor,
        dtype,
        index_type,
        policy,
    };
    fill(options.signature(op, data, indices), choices, seed)
}

/// Gather problems for every flavor that defines Gather, with batch_dims where allowed.
pub fn gather_problem() -> impl Strategy<Value = Problem> {
    let flavor = prop::sample::select(vec![
        Flavor::Onnx,
        Flavor::OpenvinoGather1,
        Flavor::OpenvinoGather7,
        Flavor::OpenvinoGather8,
        Flavor::TensorRt,
    ]);
    (
        flavor,
        shape(1, 6),
        shape(0, 3),
        any::<u16>(),
        any::<bool>(),
        common(),
    )
        .prop_map(|(flavor, data, extra, pick, negative_attrs, common)| {
            let r = data.len();
            let axis = pick as usize % r;
            let b = (pick as usize / 7) % (max_gather_batch_dims(flavor, axis) + 1);
            let indices = [&data[..b], &extra[..]].concat();
            let batch = gather_batch_dims(flavor, b, indices.len(), negative_attrs);
            let axis = if negative_attrs {
                axis as i64 - r as i64
            } else {
                axis as i64
            };
            let op = Op::Gather {
                axis,
                batch_dims: batch,
            };
            finish(op, flavor, &data, &indices, common)
        })
}

/// GatherElements problems (ONNX `<=` rule, OpenVINO-6 equal rule, TensorRT).
pub fn gather_elements_problem() -> impl Strategy<Value = Problem> {
    let flavor = prop::sample::select(vec![
        Flavor::Onnx,
        Flavor::OpenvinoGatherElements6,
        Flavor::TensorRt,
    ]);
    (
        flavor,
        shape(1, 4),
        prop::collection::vec(any::<u8>(), 4),
        any::<u16>(),
        common(),
    )
        .prop_map(|(flavor, data, shrink, pick, common)| {
            let axis = pick as usize % data.len();
            let indices: Vec<usize> = data
                .iter()
                .enumerate()
                .map(|(d, &size)| {
                    if d == axis {
                        shrink[d] as usize % 5
                    } else if flavor == Flavor::OpenvinoGatherElements6 {
                        size
                    } else {
                        size - (shrink[d] as usize % (size + 1)).min(size)
                            * (shrink[d] as usize % 2)
                    }
                })
                .collect();
            let axis = if pick % 2 == 0 {
                axis as i64
            } else {
                axis as i64 - data.len() as i64
            };
            finish(Op::GatherElements { axis }, flavor, &data, &indices, common)
        })
}

/// GatherElements problems along the rows of data `[rows, columns, tail]`, `[1, rows,
/// columns, tail]` or `[batches, rows, columns, tail]` with about as many index rows as data
/// rows, each with a tuning that bands tables of any size into a scratch buffer of a random
/// budget (whether it bands is up to the plan; see `banded`).
pub fn banded_problem() -> impl Strategy<Value = (Problem, Tuning)> {
    let flavor = prop::sample::select(vec![
        Flavor::Onnx,
        Flavor::OpenvinoGatherElements6,
        Flavor::TensorRt,
    ]);
    let scratch = prop::sample::select(vec![64u64, 200, 1024, 4096, 1 << 20]);
    (
        flavor,
        1usize..=12,
        2usize..=40,
        1usize..=4,
        any::<u8>(),
        0u8..4,
        scratch,
        common(),
    )
        .prop_map(
            |(flavor, rows, columns, tail, pick, lead, scratch, common)| {
                // Sometimes behind a leading 1 (axis 1 then), which the plan drops, or 2 or 3
                // batches (a loop outside the bands).
                let lead: &[usize] = match lead {
                    0 => &[1],
                    1 => &[2],
                    2 => &[3],
                    _ => &[],
                };
                let index_rows = rows.div_ceil(2) + pick as usize % (rows / 2 + 3);
                let index_columns = match flavor {
                    Flavor::OpenvinoGatherElements6 => columns,
                    _ => columns - pick as usize % columns.min(3),
                };
                let problem = finish(
                    Op::GatherElements {
                        axis: lead.len() as i64,
                    },
                    flavor,
                    &[lead, &[rows, columns, tail]].concat(),
                    &[lead, &[index_rows, index_columns, tail]].concat(),
                    common,
                );
                let tuning = Tuning::bands_always(scratch);
                (problem, tuning)
            },
        )
}

/// The banded strategy reaches both banded loop nests: bands outermost, and bands inside a
/// batches loop.
#[test]
fn banded_problems_cover_batches() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = banded_problem().prop_filter("banded", banded);
    let mut loop_counts = Vec::new();
    for _ in 0..200 {
        let (problem, tuning) = strategy.new_tree(&mut runner).expect("a case").current();
        let validated = problem.signature.validate().expect("valid");
        let plan = Plan::with_tuning(&validated, tuning).expect("plans");
        loop_counts.push(plan.loops.len());
    }
    for loops in [3, 4] {
        let seen = loop_counts.iter().filter(|&&n| n == loops).count();
        assert!(seen >= 20, "{seen} of 200 banded plans have {loops} loops");
    }
}

/// Whether `problem` is banded under `tuning`.
fn banded((problem, tuning): &(Problem, Tuning)) -> bool {
    let validated = problem.signature.validate().expect("valid");
    Plan::with_tuning(&validated, *tuning).is_ok_and(|plan| plan.band.is_some())
}

/// GatherND problems (ONNX, OpenVINO-5 and -8, TensorRT) with batch_dims.
pub fn gather_nd_problem() -> impl Strategy<Value = Problem> {
    let flavor = prop::sample::select(vec![
        Flavor::Onnx,
        Flavor::OpenvinoGatherNd5,
        Flavor::OpenvinoGatherNd8,
        Flavor::TensorRt,
    ]);
    (flavor, shape(1, 6), shape(0, 2), any::<u16>(), common()).prop_map(
        |(flavor, data, extra, pick, common)| {
            let r = data.len();
            let b = pick as usize % r;
            let depth = 1 + (pick as usize / 5) % (r - b);
            let indices = [&data[..b], &extra[..], &[depth]].concat();
            finish(
                Op::GatherNd {
                    batch_dims: b as i64,
                },
                flavor,
                &data,
                &indices,
                common,
            )
        },
    )
}

/// Keeps the interpreter fast: data up to 200,000 and outputs up to 20,000 elements (dims reach 19 so that unrolled
/// loops run whole groups).
fn small(problem: &Problem) -> bool {
    problem.signature.validate().is_ok_and(|v| {
        quick(&v) && problem.indices.len() == v.indices_len() * problem.signature.index_type.size()
    })
}

/// `signature` with its first dim of indices set to `first`, and its first dim of data too
/// when the two must agree (a batch dim); `None` if neither is valid.
fn with_first_dim(signature: &Signature, first: usize) -> Option<Signature> {
    if signature.indices_shape.is_empty() {
        return None;
    }
    let mut both = signature.clone();
    both.indices_shape[0] = first;
    let indices_only = both.clone();
    both.data_shape[0] = first;
    [indices_only, both]
        .into_iter()
        .find(|sibling| sibling.validate().is_ok())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Kernels of one cache whose signatures differ only in their first dim (a dynamic batch)
    /// run on one machine code where their plans allow; each still matches the interpreter.
    #[test]
    fn kernels_sharing_code_match_the_interpreter(
        problem in prop_oneof![gather_problem(), gather_elements_problem(), gather_nd_problem()]
            .prop_filter("small", small),
        firsts in prop::collection::vec(0usize..=24, 1..5),
        choices in prop::collection::vec(index_choice(), 1..16),
        seed in any::<u8>(),
    ) {
        let cache = KernelCache::new(8);
        let first = cache.get(&problem.signature).expect("compiles");
        problem.check_kernel(&first)?;
        for n in firsts {
            let Some(sibling) = with_first_dim(&problem.signature, n) else { continue };
            let sibling = fill(sibling, choices.clone(), seed);
            if small(&sibling) {
                sibling.check_kernel(&cache.get(&sibling.signature).expect("compiles"))?;
            }
        }
    }

    #[test]
    fn gather_jit_matches_interpreter(problem in gather_problem().prop_filter("small", small)) {
        problem.check()?;
    }

    #[test]
    fn gather_elements_jit_matches_interpreter(
        problem in gather_elements_problem().prop_filter("small", small)
    ) {
        problem.check()?;
    }

    #[test]
    fn banded_gather_elements_jit_matches_interpreter(
        (problem, tuning) in banded_problem().prop_filter("banded", banded)
    ) {
        problem.check_tuned(tuning)?;
    }

    #[test]
    fn gather_nd_jit_matches_interpreter(problem in gather_nd_problem().prop_filter("small", small)) {
        problem.check()?;
    }
}
