//! Named workloads shared by the benches, the CLI and the tests (not part of the library):
//! the performance cases S1..S9 and a few real-model shapes, the scatter cases W1..W5
//! ([`scatter_cases`]), plus seeded random inputs.
//!
//! Its buffers are allocated infallibly: it is for benchmarks and tests, whose shapes are
//! known, not for inputs from users.
#![warn(missing_docs)]

mod scatter;

pub use scatter::{
    KV_POSITION, ScatterIndices, ScatterInputs, ScatterWorkload, ZIPF_EXPONENT, random_values,
    scatter_cases,
};

use gather_jit::ir::Validated;
use gather_jit::{DType, Flavor, IndexType, Op, Signature};

/// A named signature to run and time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// Short name (`S1`, `gpt2-embedding`, ...).
    pub name: &'static str,
    /// What it is.
    pub description: &'static str,
    /// The op (f32 data, i64 indices unless stated).
    pub signature: Signature,
}

fn workload(name: &'static str, description: &'static str, signature: Signature) -> Workload {
    Workload {
        name,
        description,
        signature,
    }
}

/// The performance cases S1..S9 of `docs/performance.md`, f32 data and i64 indices.
pub fn performance_cases() -> Vec<Workload> {
    let nd8 = |data: &[usize], indices: &[usize], b: i64| {
        Signature::gather_nd(data, indices, b).with_flavor(Flavor::OpenvinoGatherNd8)
    };
    vec![
        workload(
            "S1",
            "GatherND b=0 (OpenVINO IR layer)",
            nd8(&[1000, 256, 10, 15], &[25, 125, 3], 0),
        ),
        workload(
            "S2",
            "GatherND b=2 (OpenVINO IR layer)",
            nd8(&[30, 2, 100, 35], &[30, 2, 3, 1], 2),
        ),
        workload(
            "S3",
            "GatherND b=3 (OpenVINO IR layer)",
            nd8(&[1, 64, 64, 320], &[1, 64, 64, 1, 1], 3),
        ),
        workload(
            "S4",
            "Gather axis=1 (OpenVINO Gather-1 layer)",
            Signature::gather(&[6, 12, 10, 24], &[15, 4, 20, 28], 1, 0),
        ),
        workload(
            "S5",
            "Gather axis=0 (BERT embedding lookup)",
            Signature::gather(&[30522, 768], &[8, 128], 0, 0),
        ),
        workload(
            "S6",
            "GatherElements axis=1",
            Signature::gather_elements(&[64, 4096], &[64, 4096], 1),
        ),
        workload(
            "S7",
            "GatherElements axis=0",
            Signature::gather_elements(&[1024, 1024], &[1024, 1024], 0),
        ),
        workload(
            "S8",
            "GatherND b=0, element gather",
            Signature::gather_nd(&[512, 512], &[262144, 2], 0),
        ),
        workload(
            "S9",
            "Gather axis=0, tiny",
            Signature::gather(&[16, 16], &[4], 0, 0),
        ),
    ]
}

/// Shapes from real models, beside the performance cases.
pub fn model_cases() -> Vec<Workload> {
    vec![
        workload(
            "gpt2-embedding",
            "GPT-2 token embedding: wte [50257,768], ids [1,1024]",
            Signature::gather(&[50257, 768], &[1, 1024], 0, 0),
        ),
        workload(
            "topk-gather-elements",
            "top-k scores: GatherElements of [32,1000] logits with [32,5] i32 indices",
            Signature::gather_elements(&[32, 1000], &[32, 5], 1).with_index_type(IndexType::I32),
        ),
        workload(
            "detection-gather-nd",
            "detection post-processing: boxes [1,8400,4] by [1,300,1] i32 (batch_dims 1)",
            Signature::gather_nd(&[1, 8400, 4], &[1, 300, 1], 1).with_index_type(IndexType::I32),
        ),
    ]
}

/// Marsaglia's xorshift64: small, fast and reproducible, for inputs without a dependency.
#[derive(Clone, Debug)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator for `seed` (any value, 0 included).
    pub fn new(seed: u64) -> XorShift {
        // Mix the seed (splitmix64 constant) so that nearby seeds start far apart; never 0.
        XorShift((seed ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(0xBF58_476D_1CE4_E5B9) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value in `0..n` (`n > 0`), by multiply-shift (bias below 2^-32 for the sizes here).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Fills `bytes` with random bits.
    pub fn fill(&mut self, bytes: &mut [u8]) {
        let mut chunks = bytes.chunks_exact_mut(8);
        for chunk in &mut chunks {
            chunk.copy_from_slice(&self.next_u64().to_ne_bytes());
        }
        let rest = chunks.into_remainder();
        let last = self.next_u64().to_ne_bytes();
        rest.copy_from_slice(&last[..rest.len()]);
    }
}

/// Random data bytes and random *valid* indices for a validated signature, native-endian and
/// C-contiguous. Each index is drawn from `0..s` (`s` the data dim it selects, capped by the
/// index type's range); an index into an empty dim is 0, which only the `Zero` policy accepts.
pub fn random_inputs(validated: &Validated, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let sig = validated.signature();
    let mut rng = XorShift::new(seed);
    let mut data = vec![0u8; validated.data_len() * sig.dtype.size()];
    rng.fill(&mut data);
    if sig.dtype == DType::Bool {
        data.iter_mut().for_each(|b| *b &= 1);
    }
    let indices = random_indices(validated, &mut rng);
    (data, indices)
}

/// Random valid indices for `validated` (see [`random_inputs`]).
pub fn random_indices(validated: &Validated, rng: &mut XorShift) -> Vec<u8> {
    random_indices_below(validated, rng, u64::MAX)
}

/// Random valid indices for `validated`, each also below `limit` (0 counts as 1): a gather
/// that only reads a corner of its data, to see how much of a kernel's time is cache misses on
/// the data.
pub fn random_indices_below(validated: &Validated, rng: &mut XorShift, limit: u64) -> Vec<u8> {
    let size = validated.signature().index_type.size();
    let mut indices = Vec::with_capacity(validated.indices_len() * size);
    push_random_indices_below(validated, rng, limit, &mut indices);
    indices
}

/// Appends the indices of [`random_indices_below`] to `out`; a caller that must not abort
/// reserves room for them first (`Vec::try_reserve_exact`), and nothing is allocated then.
pub fn push_random_indices_below(
    validated: &Validated,
    rng: &mut XorShift,
    limit: u64,
    indices: &mut Vec<u8>,
) {
    let sig = validated.signature();
    let index_type = sig.index_type;
    let shape = &sig.indices_shape;
    let mut position = vec![0usize; shape.len()];
    for flat in 0..validated.indices_len() {
        // Only the last coordinate decides which dim a GatherND index selects.
        if let Some(last) = position.last_mut() {
            *last = flat % shape[shape.len() - 1];
        }
        let dim = sig.data_shape[validated.indexed_data_dim(&position)] as u64;
        let bound = dim
            .min(index_type.max_value().saturating_add(1))
            .min(limit.max(1));
        let value = if bound == 0 { 0 } else { rng.below(bound) };
        let fits = index_type.try_encode(value.into(), indices);
        debug_assert!(fits, "below the type's maximum");
    }
}

/// The op name and attributes as a short label (`GatherND b=2`).
pub fn label(signature: &Signature) -> String {
    match signature.op {
        Op::Gather { axis, batch_dims } => format!("Gather axis={axis} b={batch_dims}"),
        Op::GatherElements { axis } => format!("GatherElements axis={axis}"),
        Op::GatherNd { batch_dims } => format!("GatherND b={batch_dims}"),
    }
}
