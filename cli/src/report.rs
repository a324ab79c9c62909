//! One case through the JIT and the interpreter: the row `demo` and `layer` print of it
//! (the table is `table.rs`).

use std::borrow::Cow;
use std::hint::black_box;
use std::time::{Duration, Instant};

use gather_jit::interp::{interpret, interpret_at};
use gather_jit::{Kernel, Signature};

use crate::buffer;
use crate::failure::{Failure, Result};
use crate::op_kernel::plan_bytes_moved;
use crate::progress::Progress;
use crate::random::XorShift;
use crate::timing::measure;

/// Inputs for one row: a signature, its buffers, and optionally the output a spec prints.
pub struct Case {
    /// What the row is called (e.g. `GatherND-8 example 5`).
    pub label: String,
    /// The full signature.
    pub signature: Signature,
    /// Native-endian C-order data bytes.
    pub data: Vec<u8>,
    /// Native-endian C-order index bytes.
    pub indices: Vec<u8>,
    /// The output the spec prints, if any.
    pub expected: Option<Vec<u8>>,
}

impl Case {
    /// `signature` on seeded random data and random valid indices, with no spec output.
    ///
    /// # Errors
    /// An invalid signature, no valid index (an empty indexed dim), or no memory for the
    /// inputs, naming the case.
    pub fn random(label: String, signature: Signature, rng: &mut XorShift) -> Result<Case> {
        let validated = signature
            .validate()
            .map_err(|e| Failure::from(e).context(&label))?;
        let (data, indices) =
            crate::random::inputs(&validated, rng).map_err(|e| e.context(&label))?;
        Ok(Case {
            label,
            signature,
            data,
            indices,
            expected: None,
        })
    }
}

/// Whether the JIT, the interpreter and the spec (when given) agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agreement {
    /// JIT and interpreter give the same bytes (or the same error).
    Yes,
    /// As `Yes`, and both equal the output the spec prints.
    YesWithSpec,
    /// They differ.
    No,
    /// The interpreter was not run (`layer --no-check`).
    NotChecked,
}

impl Agreement {
    /// The verdict as the table's column says it.
    pub fn text(self) -> &'static str {
        match self {
            Agreement::Yes => "yes",
            Agreement::YesWithSpec => "yes (= spec)",
            Agreement::No => "NO",
            Agreement::NotChecked => "not checked",
        }
    }
}

/// The measurements of one case.
pub struct Row {
    /// The case's label.
    pub label: String,
    /// The op, e.g. `GatherND(batch_dims=2)`.
    pub op: String,
    /// Shape of data.
    pub data_shape: Vec<usize>,
    /// Shape of indices.
    pub indices_shape: Vec<usize>,
    /// Inferred output shape.
    pub output_shape: Vec<usize>,
    /// Element and index type, e.g. `f32/i64`.
    pub types: String,
    /// Validation, specialisation and Cranelift compilation.
    pub compile: Duration,
    /// Median time of one warm JIT call.
    pub jit: Duration,
    /// Time of one interpreter run (none when it was not run).
    pub interp: Option<Duration>,
    /// Bytes read and written by one call (see [`plan_bytes_moved`]).
    pub bytes_moved: u64,
    /// The verdict.
    pub agreement: Agreement,
    /// The number of output elements compared when the interpreter checked a sample of them
    /// (`None`: all of them, or none under `--no-check`).
    pub sampled: Option<usize>,
    /// What differs, when the verdict is `No`.
    pub detail: Option<String>,
}

/// How long the warm JIT calls of one row may take in all.
const TIMING_BUDGET: Duration = Duration::from_millis(50);

/// Whether a case's output is checked against the reference interpreter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Run the interpreter on the whole output too and compare (`--full-check`).
    Interpreter,
    /// As [`Check::Interpreter`] for an output of up to [`SAMPLED_ABOVE`] elements; of a
    /// larger one the interpreter computes only the elements [`sample_positions`] draws with
    /// `seed`, and those are compared.
    Sampled {
        /// The seed of the sample (the command's `--seed`).
        seed: u64,
    },
    /// Only the JIT (`layer --no-check`).
    Skip,
}

/// The largest output the default check interprets whole. The interpreter is naive on purpose
/// (an element at a time, its coordinates unravelled into vectors), so the seed layers'
/// Gather-1, of 48 million elements, kept it busy for seconds while its kernel takes
/// milliseconds.
pub const SAMPLED_ABOVE: usize = 1 << 20;

/// The elements a sampled check compares at each end of the output, where a loop's first and
/// last iterations (and a vector loop's tail) write.
const SAMPLE_EDGE: usize = 4096;

/// The elements a sampled check draws between the edges: enough that a kernel that gets a
/// whole slice wrong is caught with near certainty (each of the Gather-1 layer's 201 600
/// slices of 240 elements is drawn from with a probability of about 0.7), few enough that
/// the interpreter takes tens of milliseconds.
const SAMPLE_DRAWN: usize = 1 << 18;

/// The output elements (row-major offsets) a sampled check of an output of `len` elements
/// compares: the first and last [`SAMPLE_EDGE`], and [`SAMPLE_DRAWN`] drawn with `seed`,
/// sorted, each once.
pub fn sample_positions(len: usize, seed: u64) -> Vec<usize> {
    let mut rng = XorShift::new(seed);
    let edges = (0..SAMPLE_EDGE.min(len)).chain(len.saturating_sub(SAMPLE_EDGE)..len);
    let drawn = (0..SAMPLE_DRAWN).map(|_| rng.below(len as u64) as usize);
    let mut positions: Vec<usize> = edges.chain(drawn).collect();
    positions.sort_unstable();
    positions.dedup();
    positions
}

/// [`run_case`] as a step of `progress`, named after the case.
///
/// # Errors
/// As [`run_case`].
pub fn run_case_with(case: &Case, check: Check, progress: &Progress) -> Result<Row> {
    progress.start(case.label.clone());
    let row = run_case(case, check);
    progress.done();
    row
}

/// Compiles and runs `case` through the JIT and, unless `check` is [`Check::Skip`], the
/// interpreter, and compares them.
///
/// # Errors
/// The signature's validation error, an output too large for memory, or (unchecked) an error
/// of the JIT (exit 2), naming the case.
pub fn run_case(case: &Case, check: Check) -> Result<Row> {
    let sig = &case.signature;
    let kernel = Kernel::compile(sig).map_err(|e| Failure::from(e).context(&case.label))?;
    let validated = kernel.validated();

    let output_bytes = buffer::byte_len(validated.output_len(), sig.dtype.size(), "the output")
        .map_err(|e| e.context(&case.label))?;
    let mut output =
        buffer::zeroed(output_bytes, "the JIT's output").map_err(|e| e.context(&case.label))?;
    let jit_result = kernel.run_bytes(&case.data, &case.indices, &mut output);
    let sample = match check {
        Check::Skip => {
            jit_result.map_err(|e| Failure::from(e).context(&case.label))?;
            let verdict = (Agreement::NotChecked, None);
            return Ok(row(case, &kernel, Some(&mut output), None, verdict));
        }
        Check::Sampled { seed } if validated.output_len() > SAMPLED_ABOVE => {
            Some(sample_positions(validated.output_len(), seed))
        }
        Check::Sampled { .. } | Check::Interpreter => None,
    };
    let started = Instant::now();
    let interp_result = match &sample {
        Some(positions) => interpret_at(validated, &case.data, &case.indices, positions),
        None => interpret(validated, &case.data, &case.indices),
    };
    let interp = started.elapsed();
    // Memory running out is the machine's limit, not a disagreement between the two.
    for (who, result) in [
        ("JIT", jit_result.as_ref().err()),
        ("interpreter", interp_result.as_ref().err()),
    ] {
        if let Some(e) = result.filter(|e| e.category() == "allocation failed") {
            return Err(Failure::usage(format!("{}: the {who}: {e}", case.label)));
        }
    }

    let verdict = verdict(
        case,
        (&jit_result, &output),
        &interp_result,
        sample.as_deref(),
    );
    // Warm calls are timed only where the first one succeeded.
    let output = jit_result.is_ok().then_some(&mut output[..]);
    let mut row = row(case, &kernel, output, Some(interp), verdict);
    row.sampled = sample.map(|positions| positions.len());
    Ok(row)
}

/// Whether the JIT's result (`jit`, and the output it wrote) agrees with the interpreter's
/// (`interp`: the whole output, or its elements at `sample`) and with the spec's output, and
/// what differs if not.
fn verdict(
    case: &Case,
    (jit, output): (&gather_jit::Result<()>, &[u8]),
    interp: &gather_jit::Result<Vec<u8>>,
    sample: Option<&[usize]>,
) -> (Agreement, Option<String>) {
    let element = case.signature.dtype.size();
    // What the interpreter's output is compared with: the JIT's whole output, or its elements
    // at the sampled positions.
    let compared = match sample {
        Some(positions) => Cow::Owned(elements_at(output, positions, element)),
        None => Cow::Borrowed(output),
    };
    match (jit, interp) {
        (Ok(()), Ok(expected)) if *expected == *compared => match &case.expected {
            Some(spec) if spec == output => (Agreement::YesWithSpec, None),
            Some(_) => (
                Agreement::No,
                Some("JIT and interpreter agree but differ from the spec's output".to_string()),
            ),
            None => (Agreement::Yes, None),
        },
        (Err(a), Err(b)) if a == b => (Agreement::Yes, None),
        (Ok(()), Ok(expected)) => {
            let at = first_difference(&compared, expected) / element;
            let at = sample.map_or(at, |positions| positions.get(at).copied().unwrap_or(at));
            (
                Agreement::No,
                Some(format!("JIT and interpreter differ at output element {at}")),
            )
        }
        (jit, interp) => (
            Agreement::No,
            Some(format!(
                "JIT gave {}, interpreter gave {}",
                outcome(jit.as_ref().map(|_| ())),
                outcome(interp.as_ref().map(|_| ()))
            )),
        ),
    }
}

/// The elements of `output` (of `element` bytes each) at `positions`, in order.
fn elements_at(output: &[u8], positions: &[usize], element: usize) -> Vec<u8> {
    positions
        .iter()
        .flat_map(|&flat| &output[flat * element..(flat + 1) * element])
        .copied()
        .collect()
}

/// The row of `case`, its warm calls timed on `output` (if any), with the verdict and what
/// differs.
fn row(
    case: &Case,
    kernel: &Kernel,
    output: Option<&mut [u8]>,
    interp: Option<Duration>,
    (agreement, detail): (Agreement, Option<String>),
) -> Row {
    let sig = &case.signature;
    let validated = kernel.validated();
    Row {
        label: case.label.clone(),
        op: sig.op.to_string(),
        data_shape: sig.data_shape.clone(),
        indices_shape: sig.indices_shape.clone(),
        output_shape: validated.output_shape().to_vec(),
        types: format!("{}/{}", sig.dtype, sig.index_type),
        compile: kernel.compile_time(),
        jit: output.map_or(Duration::ZERO, |output| {
            time_warm_calls(kernel, case, output)
        }),
        interp,
        bytes_moved: plan_bytes_moved(kernel.plan()),
        agreement,
        sampled: None,
        detail,
    }
}

fn outcome(result: std::result::Result<(), &gather_jit::Error>) -> String {
    match result {
        Ok(()) => "an output".to_string(),
        Err(e) => format!("error '{e}'"),
    }
}

pub fn first_difference(a: &[u8], b: &[u8]) -> usize {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()))
}

/// The median time of one warm call (see [`measure`]).
fn time_warm_calls(kernel: &Kernel, case: &Case, output: &mut [u8]) -> Duration {
    let stats = measure(TIMING_BUDGET, || {
        // The first call succeeded on these buffers, so this one does too.
        let _ = kernel.run_bytes(&case.data, &case.indices, black_box(&mut *output));
    });
    Duration::from_nanos(stats.median.round() as u64)
}

/// `[2, 3]` without spaces: `[2,3]`.
pub fn shape_text(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("[{}]", dims.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gather of 4 rows of an [8, 4] f32 table: 16 output elements, on seeded inputs, with the
    /// interpreter's whole output.
    fn gather_case() -> (Case, Vec<u8>) {
        let signature = Signature::gather(&[8, 4], &[4], 0, 0);
        let case = Case::random("rows".into(), signature, &mut XorShift::new(7)).unwrap();
        let validated = case.signature.validate().unwrap();
        let output = interpret(&validated, &case.data, &case.indices).unwrap();
        (case, output)
    }

    /// Issue 39: a sampled check compares the elements it samples, and a wrong one among them
    /// is a disagreement naming its place in the whole output, as a full check's is.
    #[test]
    fn a_sampled_check_catches_a_wrong_element_it_samples() {
        let (case, right) = gather_case();
        let validated = case.signature.validate().unwrap();
        let sample = [0, 5, 9, 15];
        let interp = interpret_at(&validated, &case.data, &case.indices, &sample);
        let check = |output: &[u8], sample: Option<&[usize]>| {
            let interp = match sample {
                Some(_) => interp.clone(),
                None => Ok(right.clone()),
            };
            verdict(&case, (&Ok(()), output), &interp, sample)
        };
        assert_eq!(check(&right, Some(&sample)), (Agreement::Yes, None));
        assert_eq!(check(&right, None), (Agreement::Yes, None));
        for wrong_element in [0, 9, 15] {
            let mut wrong = right.clone();
            wrong[wrong_element * case.signature.dtype.size()] ^= 0x40;
            let differ = format!("JIT and interpreter differ at output element {wrong_element}");
            for sample in [Some(&sample[..]), None] {
                assert_eq!(
                    check(&wrong, sample),
                    (Agreement::No, Some(differ.clone())),
                    "{sample:?}"
                );
            }
        }
    }

    /// The sample holds both ends of the output and a seeded draw between them, each element
    /// once and in order; another seed draws other elements.
    #[test]
    fn the_sample_holds_both_ends_and_a_seeded_draw() {
        let len = 50_000_000;
        let sample = sample_positions(len, 42);
        assert!(sample.windows(2).all(|w| w[0] < w[1]));
        assert!(sample.iter().all(|&flat| flat < len));
        assert_eq!(sample[..SAMPLE_EDGE], (0..SAMPLE_EDGE).collect::<Vec<_>>());
        assert_eq!(
            sample[sample.len() - SAMPLE_EDGE..],
            (len - SAMPLE_EDGE..len).collect::<Vec<_>>()
        );
        assert!(sample.len() > SAMPLE_DRAWN, "{}", sample.len());
        assert_eq!(sample, sample_positions(len, 42));
        assert_ne!(sample, sample_positions(len, 43));
        // An output smaller than the two edges is compared whole.
        assert_eq!(sample_positions(100, 1), (0..100).collect::<Vec<_>>());
    }
}
