//! The cross test's cases: each a signature (a gather or a quantized gather) with its input
//! buffers, and what the reference interpreter says the kernel must do with them.
//!
//! The cases: every vendored conformance vector that runs, the performance cases S1-S9, the
//! real-model shapes and the quantized benches' shapes at small sizes (valid indices, then one
//! bad one), every index policy with every index type for each op family, and random cases
//! from the fuzz target's decoders on seeded bytes.

use gather_jit::interp::{interpret, interpret_quantized};
use gather_jit::quant::{Quantization, QuantizedLayout};
use gather_jit::{
    BlockQuantization, DType, Error, Flavor, GgufFormat, IndexPolicy, IndexType, NegativeIndices,
    Op, OutOfRange, QuantizedSignature, Signature,
};
use gather_jit_workloads::{XorShift, model_cases, performance_cases, random_inputs};
use half::f16;

use crate::fuzz;
use crate::vectors;

/// The signature a case compiles.
#[derive(Clone, Debug)]
pub enum Kernel {
    /// A Gather, GatherElements or GatherND.
    Gather(Signature),
    /// A GatherBlockQuantized or GGUF gather.
    Quantized(QuantizedSignature),
}

impl Kernel {
    /// The op and output type (`Gather f32`), to count cases by.
    pub fn kind(&self) -> String {
        match self {
            Kernel::Gather(s) => format!("{} {}", s.op.name(), s.dtype),
            Kernel::Quantized(s) => format!("{} {}", s.op_name(), s.dtype),
        }
    }
}

impl std::fmt::Display for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kernel::Gather(s) => s.fmt(f),
            Kernel::Quantized(s) => s.fmt(f),
        }
    }
}

/// What the kernel must do, by the interpreter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Return 0 having written these output bytes.
    Output(Vec<u8>),
    /// Return 1 having stored this element position of the indices (the first rejected
    /// index, as the interpreter's error names it).
    Rejected(u64),
}

/// One signature with its inputs.
#[derive(Clone, Debug)]
pub struct Case {
    /// Where it comes from, to find it again (a vector's file, a workload, a fuzz input).
    pub name: String,
    /// The signature.
    pub kernel: Kernel,
    /// The input buffers in the entry point's order: data, indices (and scales, zero points).
    pub inputs: Vec<Vec<u8>>,
    /// The size of the output in bytes.
    pub output_bytes: usize,
    /// Which buffers the driver passes as null pointers (bit per buffer): a quantized gather's
    /// absent zero points, and GGUF's scales, which the kernels must not read.
    pub nulls: u64,
    /// Each buffer's offset from a 16-aligned address (0..=7), output last.
    pub misalign: Vec<u8>,
    /// What the kernel must do.
    pub outcome: Outcome,
    /// For a gather that fails: the output under `OutOfRange::Zero`, which the bytes the
    /// kernel wrote before the rejected index must equal (the rest it must leave as they
    /// were). `None` for the quantized gathers, whose partial output is unspecified.
    pub partial_reference: Option<Vec<u8>>,
}

impl Case {
    /// A gather case; the interpreter gives its outcome.
    pub fn gather(name: String, signature: Signature, data: Vec<u8>, indices: Vec<u8>) -> Case {
        let validated = signature
            .validate()
            .unwrap_or_else(|e| panic!("{name}: {signature}: {e}"));
        let output_bytes = validated.output_len() * signature.dtype.size();
        let (outcome, partial_reference) = match interpret(&validated, &data, &indices) {
            Ok(output) => (Outcome::Output(output), None),
            Err(e) => {
                let position = rejected_position(&name, &e, &signature.indices_shape);
                let zero = signature
                    .clone()
                    .with_out_of_range(OutOfRange::Zero)
                    .validate()
                    .expect("the policy does not affect validation");
                let reference =
                    interpret(&zero, &data, &indices).expect("OutOfRange::Zero rejects no index");
                (Outcome::Rejected(position), Some(reference))
            }
        };
        Case {
            name,
            kernel: Kernel::Gather(signature),
            inputs: vec![data, indices],
            output_bytes,
            nulls: 0,
            misalign: vec![0; 3],
            outcome,
            partial_reference,
        }
    }

    /// A quantized case; the interpreter gives its outcome.
    pub fn quantized(
        name: String,
        signature: QuantizedSignature,
        inputs: [Vec<u8>; 3],
        zero_points: Option<Vec<u8>>,
    ) -> Case {
        let layout = signature
            .validate()
            .unwrap_or_else(|e| panic!("{name}: {signature}: {e}"));
        let [data, indices, scales] = inputs;
        let result = interpret_quantized(&layout, &data, &indices, &scales, zero_points.as_deref());
        let outcome = match result {
            Ok(output) => Outcome::Output(output),
            Err(e) => Outcome::Rejected(rejected_position(&name, &e, &signature.indices_shape)),
        };
        let gguf = matches!(signature.quantization, Quantization::Gguf(_));
        let nulls = u64::from(gguf) << 2 | u64::from(zero_points.is_none()) << 3;
        Case {
            name,
            output_bytes: layout.output_bytes(),
            kernel: Kernel::Quantized(signature),
            inputs: vec![data, indices, scales, zero_points.unwrap_or_default()],
            nulls,
            misalign: vec![0; 5],
            outcome,
            partial_reference: None,
        }
    }

    /// The same case with its buffers at these offsets from 16-aligned addresses.
    fn misaligned(mut self, offsets: &[usize]) -> Case {
        for (m, &o) in self.misalign.iter_mut().zip(offsets) {
            *m = (o % 8) as u8;
        }
        self
    }
}

/// The element position (row-major) of the index an interpreter's error names.
fn rejected_position(name: &str, error: &Error, indices_shape: &[usize]) -> u64 {
    let Error::IndexOutOfRange { position, .. } = error else {
        panic!("{name}: the interpreter failed otherwise than on an index: {error}");
    };
    let flat = position
        .iter()
        .zip(indices_shape)
        .fold(0usize, |flat, (&p, &d)| flat * d + p);
    flat as u64
}

/// Every case of the test, in a fixed order, and how many came from each source.
pub fn all(
    seed: u64,
    random_gathers: usize,
    random_quantized: usize,
) -> (Vec<Case>, Vec<(&'static str, usize)>) {
    let sources: [(&str, Vec<Case>); 6] = [
        ("gather vectors", gather_vectors()),
        ("quantized vectors", quantized_vectors()),
        ("workloads", workloads()),
        ("gather policies", gather_policies()),
        ("quantized policies", quantized_policies()),
        ("random", random(seed, random_gathers, random_quantized)),
    ];
    let counts = sources.iter().map(|(name, c)| (*name, c.len())).collect();
    (sources.into_iter().flat_map(|(_, c)| c).collect(), counts)
}

/// Every gather vector with values (`tests/conformance/`, but `quantized/` and `scatter/`).
pub fn gather_vectors() -> Vec<Case> {
    let mut cases = Vec::new();
    for path in vectors::gathers::case_files() {
        let (name, case) = vectors::read_case(&path);
        let name = format!("vector {name}");
        let (data, indices) = (&case["data"], &case["indices"]);
        if data.get("values").is_none() || indices.get("values").is_none() {
            continue; // a shape-only case: nothing to run
        }
        let signature = vectors::gathers::signature_of(&name, &case);
        if signature.validate().is_err() {
            continue; // an expected validation error: nothing to run
        }
        let data = vectors::gathers::encode_data(&name, signature.dtype, &data["values"]);
        let indices =
            vectors::gathers::encode_indices(&name, signature.index_type, &indices["values"]);
        cases.push(Case::gather(name, signature, data, indices));
    }
    cases
}

/// Every quantized vector that runs (`tests/conformance/quantized/`).
pub fn quantized_vectors() -> Vec<Case> {
    let mut cases = Vec::new();
    for path in vectors::quantized::case_files() {
        let (name, case) = vectors::read_case(&path);
        let name = format!("vector quantized/{name}");
        if let vectors::quantized::Loaded::Inputs(i) = vectors::quantized::load(&name, &case) {
            let i = *i;
            let inputs = [i.data, i.indices, i.scales];
            cases.push(Case::quantized(name, i.signature, inputs, i.zero_points));
        }
    }
    cases
}

/// `signature` with its dims capped (workload shapes at a size the interpreter and qemu run
/// quickly).
fn shrunk(signature: &Signature, data: &[usize], indices: &[usize]) -> Signature {
    Signature {
        data_shape: data.to_vec(),
        indices_shape: indices.to_vec(),
        ..signature.clone()
    }
}

/// The performance cases S1-S9, the real-model shapes and the quantized benches' shapes
/// (Q1-Q3 and a decode step) with their structure kept and their large dims shrunk; each
/// with random valid indices, and again with one index out of range (the first index of the
/// middle tuple set to the size of its dim).
pub fn workloads() -> Vec<Case> {
    let small: &[(&str, &[usize], &[usize])] = &[
        ("S1", &[12, 9, 10, 15], &[5, 7, 3]),
        ("S2", &[3, 2, 20, 35], &[3, 2, 3, 1]),
        ("S3", &[1, 8, 8, 320], &[1, 8, 8, 1, 1]),
        ("S4", &[2, 12, 10, 24], &[3, 4, 5]),
        ("S5", &[40, 768], &[2, 16]),
        ("S6", &[4, 1024], &[4, 1024]),
        ("S7", &[64, 64], &[64, 64]),
        ("S8", &[64, 64], &[1024, 2]),
        ("S9", &[16, 16], &[4]),
        ("gpt2-embedding", &[64, 768], &[1, 24]),
        ("topk-gather-elements", &[8, 1000], &[8, 5]),
        ("detection-gather-nd", &[1, 840, 4], &[1, 300, 1]),
    ];
    let all: Vec<_> = performance_cases()
        .into_iter()
        .chain(model_cases())
        .collect();
    let mut cases = Vec::new();
    for (k, &(name, data, indices)) in small.iter().enumerate() {
        let workload = all
            .iter()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("no workload {name}"));
        let signature = shrunk(&workload.signature, data, indices);
        let validated = signature.validate().expect("valid");
        let (data, mut indices) = random_inputs(&validated, k as u64);
        cases.push(Case::gather(
            format!("workload {name} (shrunk)"),
            signature.clone(),
            data.clone(),
            indices.clone(),
        ));
        let size = signature.index_type.size();
        let depth = match signature.op {
            Op::GatherNd { .. } => *signature.indices_shape.last().expect("rank >= 1"),
            _ => 1,
        };
        let tuples = validated.indices_len() / depth;
        let bad = tuples / 2 * depth;
        let position = gather_jit::ir::unravel(bad, &signature.indices_shape);
        let dim = signature.data_shape[validated.indexed_data_dim(&position)];
        let mut value = Vec::new();
        signature
            .index_type
            .encode_wrapping(dim as i128, &mut value);
        indices[bad * size..(bad + 1) * size].copy_from_slice(&value);
        cases.push(
            Case::gather(
                format!("workload {name} (shrunk), index {bad} out of range"),
                signature,
                data,
                indices,
            )
            .misaligned(&[k, k + 3, k + 5]),
        );
    }
    let q4 = |data: &[usize], indices: &[usize]| {
        QuantizedSignature::block_quantized(
            data,
            indices,
            BlockQuantization {
                gather_axis: 0,
                quantize_axis: 1,
                block_size: 32,
                bits: 4,
                zero_points: false,
            },
        )
    };
    let quantized = [
        ("Q1", q4(&[16, 4096], &[1, 8])),
        ("Q2", q4(&[16, 512], &[1, 64])),
        ("decode-step", q4(&[16, 4096], &[1, 1])),
        (
            "Q3-q4_0",
            QuantizedSignature::gguf(GgufFormat::Q4_0, 16, 4096, &[1, 8]),
        ),
        (
            "Q3-q8_0",
            QuantizedSignature::gguf(GgufFormat::Q8_0, 16, 4096, &[1, 8]),
        ),
    ];
    for (k, (name, signature)) in quantized.into_iter().enumerate() {
        let mut rng = XorShift::new(100 + k as u64);
        let count: usize = signature.indices_shape.iter().product();
        let values: Vec<i128> = (0..count).map(|_| i128::from(rng.below(16))).collect();
        let inputs = quantized_inputs(&signature, &values, &mut rng);
        let mut bad = values.clone();
        bad[count / 2] = 16;
        let bad_inputs = quantized_inputs(&signature, &bad, &mut XorShift::new(100 + k as u64));
        cases.push(inputs.into_case(format!("workload {name} (shrunk)"), signature.clone()));
        cases.push(
            bad_inputs
                .into_case(
                    format!("workload {name} (shrunk), index {} out of range", count / 2),
                    signature,
                )
                .misaligned(&[k, k + 1, k + 2, 0, k + 7]),
        );
    }
    cases
}

/// The six explicit index policies, after `None` (the flavor's default).
fn policies() -> [Option<IndexPolicy>; 7] {
    let policy = |negative, out_of_range| {
        Some(IndexPolicy {
            negative,
            out_of_range,
        })
    };
    [
        None,
        policy(NegativeIndices::Wrap, OutOfRange::Error),
        policy(NegativeIndices::Wrap, OutOfRange::Zero),
        policy(NegativeIndices::Wrap, OutOfRange::Clamp),
        policy(NegativeIndices::Invalid, OutOfRange::Error),
        policy(NegativeIndices::Invalid, OutOfRange::Zero),
        policy(NegativeIndices::Invalid, OutOfRange::Clamp),
    ]
}

/// Index values for dims of size `size` (one per index): in range, negative in range, and
/// with `bad` also past either end and the type's extremes.
fn index_values(sizes: &[usize], index_type: IndexType, bad: bool) -> Vec<i128> {
    sizes
        .iter()
        .enumerate()
        .map(|(k, &s)| {
            let s = s as i128;
            match (bad, k % 6) {
                (_, 0) => 0,
                (_, 1) => s - 1,
                (_, 2) => -1,
                (_, 3) => -s,
                (false, _) => (k as i128 * 7) % s,
                (true, 4) if k % 12 == 4 => s,
                (true, 4) => -s - 1,
                (true, _) if k % 12 == 5 => i128::from(index_type.max_value()),
                (true, _) => i128::from(index_type.min_value()),
            }
        })
        .collect()
}

fn indices_kind(bad: bool) -> &'static str {
    match bad {
        true => "indices out of range too",
        false => "indices in range",
    }
}

/// Each gather op under each index policy with each index type, with indices in range and
/// with bad ones; data types cycle through all thirteen.
pub fn gather_policies() -> Vec<Case> {
    let ops: [(Op, &[usize], &[usize]); 3] = [
        (
            Op::Gather {
                axis: 1,
                batch_dims: 0,
            },
            &[3, 5, 4],
            &[2, 6],
        ),
        (Op::GatherElements { axis: 0 }, &[5, 3], &[4, 3]),
        (Op::GatherNd { batch_dims: 0 }, &[4, 5, 2], &[6, 2]),
    ];
    let mut cases = Vec::new();
    let mut k = 0usize;
    for (op, data_shape, indices_shape) in ops {
        for policy in policies() {
            for index_type in IndexType::ALL {
                for bad in [false, true] {
                    let dtype = DType::ALL[k % DType::ALL.len()];
                    let mut signature = Signature::new(op, data_shape, indices_shape)
                        .with_flavor(Flavor::Onnx)
                        .with_dtype(dtype)
                        .with_index_type(index_type);
                    if let Some(policy) = policy {
                        signature = signature.with_policy(policy);
                    }
                    let validated = signature.validate().expect("valid");
                    let sizes: Vec<usize> = (0..validated.indices_len())
                        .map(|flat| {
                            let position = gather_jit::ir::unravel(flat, indices_shape);
                            data_shape[validated.indexed_data_dim(&position)]
                        })
                        .collect();
                    let mut indices = Vec::new();
                    for v in index_values(&sizes, index_type, bad) {
                        index_type.encode_wrapping(v, &mut indices);
                    }
                    let data = data_bytes(validated.data_len() * dtype.size(), dtype, k as u64);
                    let name = format!("policy matrix {k}: {}", indices_kind(bad));
                    cases.push(Case::gather(name, signature, data, indices).misaligned(&[
                        k,
                        k / 2,
                        k / 3,
                    ]));
                    k += 1;
                }
            }
        }
    }
    cases
}

/// Random bytes, never zero (so that a missed copy shows) and valid for `bool`.
fn data_bytes(len: usize, dtype: DType, seed: u64) -> Vec<u8> {
    let mut bytes = vec![0; len];
    XorShift::new(seed).fill(&mut bytes);
    for b in &mut bytes {
        *b = if dtype == DType::Bool { *b & 1 } else { *b | 1 };
    }
    bytes
}

/// A quantized signature's inputs, before the interpreter has seen them.
struct QuantizedInputs {
    data: Vec<u8>,
    indices: Vec<u8>,
    scales: Vec<u8>,
    zero_points: Option<Vec<u8>>,
}

impl QuantizedInputs {
    fn into_case(self, name: String, signature: QuantizedSignature) -> Case {
        Case::quantized(
            name,
            signature,
            [self.data, self.indices, self.scales],
            self.zero_points,
        )
    }
}

/// Random data, finite scales (and for GGUF finite block scales) and zero points for
/// `signature`, with these index values.
fn quantized_inputs(
    signature: &QuantizedSignature,
    values: &[i128],
    rng: &mut XorShift,
) -> QuantizedInputs {
    let layout: QuantizedLayout = signature.validate().expect("valid");
    let mut data = vec![0; layout.data_bytes()];
    rng.fill(&mut data);
    if let Quantization::Gguf(format) = signature.quantization {
        for block in data.chunks_mut(format.block_bytes()) {
            let d = f16::from_f32((f32::from(block[0]) - 128.0) / 64.0);
            block[..2].copy_from_slice(&d.to_le_bytes());
        }
    }
    let count = layout.scales_bytes() / signature.dtype.size();
    let mut scales = Vec::new();
    for _ in 0..count {
        let value = (rng.below(4096) as f32 - 2048.0) / 256.0;
        match signature.dtype {
            DType::F16 => scales.extend(f16::from_f32(value).to_ne_bytes()),
            DType::Bf16 => scales.extend(half::bf16::from_f32(value).to_ne_bytes()),
            _ => scales.extend((value * 1.37).to_ne_bytes()),
        }
    }
    let zero_points = layout.zero_points_bytes_shape().map(|_| {
        let mut z = vec![0; layout.zero_points_bytes()];
        rng.fill(&mut z);
        z
    });
    let mut indices = Vec::new();
    for &v in values {
        signature.index_type.encode_wrapping(v, &mut indices);
    }
    QuantizedInputs {
        data,
        indices,
        scales,
        zero_points,
    }
}

/// Block quantization (4 and 8 bits, with and without zero points) and GGUF rows (Q4_0 and
/// Q8_0) under each index policy with each index type, with indices in range and with bad
/// ones; the output types cycle through f32, bf16 and f16.
pub fn quantized_policies() -> Vec<Case> {
    let mut cases = Vec::new();
    let mut k = 0usize;
    for form in 0..2 {
        for policy in policies() {
            for index_type in IndexType::ALL {
                for bad in [false, true] {
                    let dtype = [DType::F32, DType::Bf16, DType::F16][k % 3];
                    let mut signature = if form == 0 {
                        QuantizedSignature::block_quantized(
                            &[5, 40],
                            &[2, 6],
                            BlockQuantization {
                                gather_axis: 0,
                                quantize_axis: 1,
                                block_size: 16,
                                bits: [4, 8][k / 2 % 2],
                                zero_points: (k / 4).is_multiple_of(2),
                            },
                        )
                    } else {
                        let format = [GgufFormat::Q4_0, GgufFormat::Q8_0][k / 2 % 2];
                        QuantizedSignature::gguf(format, 5, 64, &[2, 6])
                    };
                    signature = signature.with_dtype(dtype).with_index_type(index_type);
                    if let Some(policy) = policy {
                        signature = signature.with_policy(policy);
                    }
                    let values = index_values(&[5; 12], index_type, bad);
                    let inputs =
                        quantized_inputs(&signature, &values, &mut XorShift::new(k as u64));
                    let name = format!("quantized policy matrix {k}: {}", indices_kind(bad));
                    cases.push(inputs.into_case(name, signature).misaligned(&[
                        k,
                        k / 2,
                        k / 3,
                        k / 5,
                        k / 7,
                    ]));
                    k += 1;
                }
            }
        }
    }
    cases
}

/// Largest inputs plus output, in bytes, of a random case (bigger ones are drawn again): the
/// interpreter and qemu then take seconds for all of them.
const RANDOM_CASE_BYTES: usize = 1 << 17;

/// Random cases from the fuzz target's decoders (`fuzz/src/`) on seeded random bytes: valid
/// signatures small enough to run, their data, and indices that are valid, negative, just
/// out of range at either end or extremes of their type. The name holds the bytes, which
/// `fuzz::decode` (or `fuzz::quantized::decode`) turns back into the case.
pub fn random(seed: u64, gathers: usize, quantized: usize) -> Vec<Case> {
    let mut rng = XorShift::new(seed);
    let mut cases = Vec::new();
    let (mut have_gathers, mut have_quantized) = (0, 0);
    while have_gathers < gathers || have_quantized < quantized {
        let mut bytes = vec![0u8; 16 + rng.below(80) as usize];
        rng.fill(&mut bytes);
        let want_quantized = have_gathers >= gathers;
        // Structured inputs only (the raw ones are mostly invalid signatures, which
        // `tests/aot.rs` covers): a first byte below 0x80, or a quantized selector without
        // both 0x30 bits.
        bytes[0] = match want_quantized {
            false => bytes[0] & 0x7F,
            true => fuzz::quantized::SELECTOR | (bytes[0] & 0x1F),
        };
        let name = |bytes: &[u8]| {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            format!("fuzz input {hex}")
        };
        if want_quantized {
            let case = fuzz::quantized::decode(&bytes);
            let Ok(layout) = case.signature.validate() else {
                continue;
            };
            let total = layout.data_bytes()
                + layout.indices_bytes()
                + layout.scales_bytes()
                + layout.zero_points_bytes()
                + layout.output_bytes();
            if !fuzz::quantized::runnable(&layout) || total > RANDOM_CASE_BYTES {
                continue;
            }
            let misalign = case.misalign;
            let inputs = [case.data, case.indices, case.scales];
            let c = Case::quantized(name(&bytes), case.signature, inputs, case.zero_points);
            cases.push(c.misaligned(&misalign));
            have_quantized += 1;
        } else {
            let case = fuzz::decode(&bytes);
            let Ok(validated) = case.signature.validate() else {
                continue;
            };
            let total = (validated.data_len() + validated.output_len())
                * case.signature.dtype.size()
                + validated.indices_len() * case.signature.index_type.size();
            if !fuzz::runnable(&validated) || total > RANDOM_CASE_BYTES {
                continue;
            }
            let misalign = case.misalign;
            let c = Case::gather(name(&bytes), case.signature, case.data, case.indices);
            cases.push(c.misaligned(&misalign));
            have_gathers += 1;
        }
    }
    cases
}
