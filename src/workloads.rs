//! Named workloads shared by the benches, the CLI's `demo` and `bench`, and the peer script:
//! the performance cases S1..S9 and a few real-model shapes, plus seeded random inputs.

use crate::ir::{Flavor, IndexType, Op, Signature, Validated};

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

/// A small xorshift generator: deterministic inputs without a dependency.
#[derive(Clone, Debug)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
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
}

/// Random data bytes and random *valid* indices (in `0..dim`) for a validated signature,
/// native-endian and C-contiguous.
pub fn random_inputs(validated: &Validated, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let sig = validated.signature();
    let mut rng = XorShift::new(seed);
    let data_bytes = validated.data_len() * sig.dtype.size();
    let mut data = Vec::with_capacity(data_bytes + 8);
    while data.len() < data_bytes {
        data.extend_from_slice(&rng.next_u64().to_ne_bytes());
    }
    data.truncate(data_bytes);
    if sig.dtype == crate::ir::DType::Bool {
        data.iter_mut().for_each(|b| *b &= 1);
    }
    let index_type = sig.index_type;
    // Valid indices must also fit the index type (an i8 index reaches at most 127).
    let type_limit: u64 = match index_type.size() {
        1 if index_type.is_signed() => 1 << 7,
        1 => 1 << 8,
        2 if index_type.is_signed() => 1 << 15,
        2 => 1 << 16,
        4 if index_type.is_signed() => 1 << 31,
        4 => 1 << 32,
        _ => 1 << 63,
    };
    let shape = &sig.indices_shape;
    let mut indices = Vec::with_capacity(validated.indices_len() * index_type.size());
    let mut position = vec![0usize; shape.len()];
    for flat in 0..validated.indices_len() {
        // Only the last coordinate decides which dim a GatherND index selects.
        if let Some(last) = position.last_mut() {
            *last = flat % shape[shape.len() - 1];
        }
        let dim = sig.data_shape[validated.indexed_data_dim(&position)] as u64;
        let limit = dim.min(type_limit);
        let value = if limit == 0 {
            0
        } else {
            rng.next_u64() % limit
        };
        encode_index(index_type, value, &mut indices);
    }
    (data, indices)
}

/// Appends `value` (which fits the type) in `index_type`'s native-endian encoding.
fn encode_index(index_type: IndexType, value: u64, out: &mut Vec<u8>) {
    match index_type {
        IndexType::I8 => out.extend((value as i8).to_ne_bytes()),
        IndexType::U8 => out.extend((value as u8).to_ne_bytes()),
        IndexType::I16 => out.extend((value as i16).to_ne_bytes()),
        IndexType::U16 => out.extend((value as u16).to_ne_bytes()),
        IndexType::I32 => out.extend((value as i32).to_ne_bytes()),
        IndexType::U32 => out.extend((value as u32).to_ne_bytes()),
        IndexType::I64 => out.extend((value as i64).to_ne_bytes()),
        IndexType::U64 => out.extend(value.to_ne_bytes()),
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
