//! The scatter performance cases W1..W5 of `docs/performance.md` and their seeded inputs.
//!
//! Unlike the gathers' cases, whose indices are uniform, each scatter case has indices of its
//! own shape (a KV-cache write at one position, Zipf-distributed token ids, permutations), so a
//! [`ScatterWorkload`] names how its indices are drawn ([`ScatterIndices`]) and
//! [`ScatterWorkload::inputs`] draws all three buffers.

use gather_jit::DType;
use gather_jit::scatter::{Reduction, ScatterSignature};

use crate::XorShift;

/// The sequence position W1 writes its new token's keys at (of 4096).
pub const KV_POSITION: usize = 4000;

/// The exponent `s` of W2's Zipf distribution of token ids: the id of rank `r` is drawn with
/// probability proportional to `1 / r^s`.
pub const ZIPF_EXPONENT: f64 = 1.1;

/// A named scatter to run and time.
#[derive(Clone, Debug, PartialEq)]
pub struct ScatterWorkload {
    /// Short name (`W1`, ...).
    pub name: &'static str,
    /// What it is.
    pub description: &'static str,
    /// The op (i64 indices).
    pub signature: ScatterSignature,
    /// How its indices are drawn.
    pub indices: ScatterIndices,
    /// Whether data starts as zeros (W2's gradient table) rather than random values.
    pub zero_data: bool,
}

/// How a scatter workload's indices are drawn (every draw is valid: in range, non-negative).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScatterIndices {
    /// ScatterND of depth 3 into `[batch, heads, seq, head_dim]`: tuple `h` is
    /// `(0, h, position)`, one new token's row for every head.
    KvCache {
        /// The sequence position written.
        position: usize,
    },
    /// ScatterND of depth 1: ids of rows with repeats, Zipf-distributed with this exponent
    /// over all of data's rows. The rank-to-id map is a seeded shuffle, so that the frequent
    /// rows lie spread over the table as a tokenizer's frequent tokens do.
    Zipf {
        /// The exponent `s` (weights `1 / r^s`, rank `r` from 1).
        exponent: f64,
    },
    /// Each index uniform over the dim it selects (ScatterND: each coordinate; ScatterElements:
    /// data's dim along `axis`), so with more indices per line than the dim holds, or by
    /// chance, some repeat.
    Uniform,
    /// ScatterElements along axis 0 with indices of data's shape: every column of indices an
    /// independent permutation of `0..rows`, so no element is written twice and the writes of
    /// one row of updates land in random rows.
    ColumnPermutations,
    /// ScatterND of depth 1: distinct row ids, uniform over data's rows.
    DistinctRows,
}

/// The three buffers of a scatter, native-endian and C-contiguous.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScatterInputs {
    /// Data (and, in place, the output).
    pub data: Vec<u8>,
    /// The indices, in the signature's index type.
    pub indices: Vec<u8>,
    /// The updates.
    pub updates: Vec<u8>,
}

fn scatter_workload(
    name: &'static str,
    description: &'static str,
    signature: ScatterSignature,
    indices: ScatterIndices,
) -> ScatterWorkload {
    ScatterWorkload {
        name,
        description,
        signature,
        indices,
        zero_data: false,
    }
}

/// The scatter performance cases W1..W5 of `docs/performance.md`, ONNX flavor, i64 indices.
pub fn scatter_cases() -> Vec<ScatterWorkload> {
    vec![
        scatter_workload(
            "W1",
            "KV-cache write: one new token per head, ScatterND into [1,32,4096,128] f16",
            ScatterSignature::scatter_nd(&[1, 32, 4096, 128], &[32, 3], &[32, 128])
                .with_dtype(DType::F16),
            ScatterIndices::KvCache {
                position: KV_POSITION,
            },
        ),
        ScatterWorkload {
            zero_data: true,
            ..scatter_workload(
                "W2",
                "embedding gradient: ScatterND add of [1024,768] rows into a zero [30522,768] \
                 table, Zipf ids with repeats",
                ScatterSignature::scatter_nd(&[30522, 768], &[1024, 1], &[1024, 768])
                    .with_reduction(Reduction::Sum),
                ScatterIndices::Zipf {
                    exponent: ZIPF_EXPONENT,
                },
            )
        },
        scatter_workload(
            "W3",
            "ScatterElements add, axis 1: [64,1024] updates into [64,4096], with duplicates",
            ScatterSignature::scatter_elements(&[64, 4096], &[64, 1024], &[64, 1024], 1)
                .with_reduction(Reduction::Sum),
            ScatterIndices::Uniform,
        ),
        scatter_workload(
            "W4",
            "ScatterElements none, axis 0: [1024,1024], a permutation in every column",
            ScatterSignature::scatter_elements(&[1024, 1024], &[1024, 1024], &[1024, 1024], 0),
            ScatterIndices::ColumnPermutations,
        ),
        scatter_workload(
            "W5",
            "ScatterND tiny: 4 rows into [16,16]",
            ScatterSignature::scatter_nd(&[16, 16], &[4, 1], &[4, 16]),
            ScatterIndices::DistinctRows,
        ),
    ]
}

impl ScatterWorkload {
    /// The indices as values, row-major over the indices' shape, seeded: the same seed gives
    /// the same values.
    ///
    /// # Panics
    /// If the signature does not validate or does not fit its [`ScatterIndices`] (for the
    /// cases of [`scatter_cases`] neither happens).
    pub fn index_values(&self, seed: u64) -> Vec<i64> {
        let sig = &self.signature;
        let layout = sig.validate().expect("scatter workloads are valid");
        let data = &sig.data_shape;
        let mut rng = XorShift::new(seed.wrapping_add(1));
        let as_index = |v: usize| i64::try_from(v).expect("dims fit i64");
        match self.indices {
            ScatterIndices::KvCache { position } => {
                assert!(sig.indices_shape[1] == 3 && position < data[2]);
                (0..sig.indices_shape[0])
                    .flat_map(|head| [0, as_index(head), as_index(position)])
                    .collect()
            }
            ScatterIndices::Zipf { exponent } => {
                assert_eq!(sig.indices_shape.last(), Some(&1));
                let rows = data[0];
                let id_of_rank = permutation(rows, &mut rng);
                let mut cdf = Vec::with_capacity(rows);
                let mut total = 0.0f64;
                for rank in 1..=rows {
                    total += (rank as f64).powf(-exponent);
                    cdf.push(total);
                }
                (0..layout.indices_len())
                    .map(|_| {
                        let u = (rng.next_u64() >> 11) as f64 * (total / (1u64 << 53) as f64);
                        let rank = cdf.partition_point(|&c| c <= u).min(rows - 1);
                        as_index(id_of_rank[rank])
                    })
                    .collect()
            }
            ScatterIndices::Uniform => {
                let shape = &sig.indices_shape;
                (0..layout.indices_len())
                    .map(|flat| {
                        let position = [flat % shape[shape.len() - 1]];
                        let dim = data[layout.indexed_data_dim(&position)];
                        as_index(rng.below(dim as u64) as usize)
                    })
                    .collect()
            }
            ScatterIndices::ColumnPermutations => {
                let (rows, cols) = (sig.indices_shape[0], sig.indices_shape[1]);
                assert!(sig.indices_shape.len() == 2 && rows == data[0]);
                let mut values = vec![0; rows * cols];
                for col in 0..cols {
                    for (row, id) in permutation(rows, &mut rng).into_iter().enumerate() {
                        values[row * cols + col] = as_index(id);
                    }
                }
                values
            }
            ScatterIndices::DistinctRows => {
                assert_eq!(sig.indices_shape.last(), Some(&1));
                let count = layout.indices_len();
                let mut ids = permutation(data[0], &mut rng);
                ids.truncate(count);
                assert_eq!(ids.len(), count, "more distinct rows asked than data has");
                ids.into_iter().map(as_index).collect()
            }
        }
    }

    /// Data, indices and updates, seeded: data zeros for a [`ScatterWorkload::zero_data`]
    /// case, else like the updates values from [`random_values`]. Each buffer has a stream of
    /// its own, so the indices of a seed do not depend on data's size.
    ///
    /// # Panics
    /// As [`ScatterWorkload::index_values`].
    pub fn inputs(&self, seed: u64) -> ScatterInputs {
        let sig = &self.signature;
        let layout = sig.validate().expect("scatter workloads are valid");
        let data = if self.zero_data {
            vec![0; layout.data_len() * sig.dtype.size()]
        } else {
            random_values(sig.dtype, layout.data_len(), &mut XorShift::new(seed))
        };
        let mut indices = Vec::with_capacity(layout.indices_len() * sig.index_type.size());
        for value in self.index_values(seed) {
            let fits = sig.index_type.try_encode(value.into(), &mut indices);
            assert!(fits, "index {value} does not fit {}", sig.index_type);
        }
        let updates = random_values(
            sig.dtype,
            layout.updates_len(),
            &mut XorShift::new(seed.wrapping_add(2)),
        );
        ScatterInputs {
            data,
            indices,
            updates,
        }
    }
}

/// A seeded random permutation of `0..n` (Fisher-Yates).
fn permutation(n: usize, rng: &mut XorShift) -> Vec<usize> {
    let mut values: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        values.swap(i, j);
    }
    values
}

/// `len` random elements of `dtype`, native-endian. Float types get values `k / 2^(p-1)` with
/// `k` uniform in `-2^(p-1)..2^(p-1)` (`p` the type's significand bits: 11 for `f16`, 8 for
/// `bf16`, 24 for `f32`, 53 for `f64`), exact in the type, in `[-1, 1)`: no NaN, infinity or
/// subnormal, which would make a reduction's time depend on the draw. Integers get random
/// bits, `bool` 0 or 1.
pub fn random_values(dtype: DType, len: usize, rng: &mut XorShift) -> Vec<u8> {
    let mut out = Vec::with_capacity(len * dtype.size());
    // A signed value `k` with |k| < 2^bits, as a float divided by 2^bits.
    let draw = |rng: &mut XorShift, bits: u32| {
        let k = (rng.next_u64() >> (63 - bits)) as i64 - (1i64 << bits);
        k as f64 / (1u64 << bits) as f64
    };
    match dtype {
        DType::F16 => (0..len).for_each(|_| {
            let bits = f16_bits(draw(rng, 10) as f32);
            out.extend_from_slice(&bits.to_ne_bytes());
        }),
        DType::Bf16 => (0..len).for_each(|_| {
            // Exactly a bf16 value: its low 16 bits are zero.
            let bits = ((draw(rng, 7) as f32).to_bits() >> 16) as u16;
            out.extend_from_slice(&bits.to_ne_bytes());
        }),
        DType::F32 => (0..len).for_each(|_| {
            out.extend_from_slice(&(draw(rng, 23) as f32).to_ne_bytes());
        }),
        DType::F64 => (0..len).for_each(|_| {
            out.extend_from_slice(&draw(rng, 52).to_ne_bytes());
        }),
        _ => {
            out.resize(len * dtype.size(), 0);
            rng.fill(&mut out);
            if dtype == DType::Bool {
                out.iter_mut().for_each(|b| *b &= 1);
            }
        }
    }
    out
}

/// The `f16` bits of `value`, which must be zero or a normal `f16` value held exactly (as
/// [`random_values`]' are): the exponent rebiased, the significand's low 13 bits dropped.
fn f16_bits(value: f32) -> u16 {
    let bits = value.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    if value == 0.0 {
        return sign;
    }
    let exponent = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    debug_assert!((1..31).contains(&exponent) && bits & 0x1fff == 0);
    sign | ((exponent as u16) << 10) | ((bits >> 13) & 0x3ff) as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use gather_jit::scatter::ResolvedScatter;

    fn case(name: &str) -> ScatterWorkload {
        scatter_cases()
            .into_iter()
            .find(|w| w.name == name)
            .expect("a case of that name")
    }

    #[test]
    fn every_case_validates_and_its_inputs_fit_it() {
        let names: Vec<_> = scatter_cases().iter().map(|w| w.name).collect();
        assert_eq!(names, ["W1", "W2", "W3", "W4", "W5"]);
        for w in scatter_cases() {
            let layout = w.signature.validate().expect(w.name);
            let sig = &w.signature;
            let inputs = w.inputs(42);
            assert_eq!(inputs.data.len(), layout.data_len() * sig.dtype.size());
            assert_eq!(inputs.indices.len(), layout.indices_len() * 8);
            assert_eq!(
                inputs.updates.len(),
                layout.updates_len() * sig.dtype.size()
            );
            // Every index in range for the dim it selects (the cases have no negative ones).
            let values = w.index_values(42);
            let last = sig.indices_shape[sig.indices_shape.len() - 1];
            for (flat, &v) in values.iter().enumerate() {
                let dim = sig.data_shape[layout.indexed_data_dim(&[flat % last])];
                assert!(v >= 0 && (v as usize) < dim, "{}: {v} at {flat}", w.name);
            }
            assert_eq!(inputs, w.inputs(42), "{}: same seed, same inputs", w.name);
            assert_ne!(inputs.updates, w.inputs(43).updates, "{}", w.name);
        }
    }

    #[test]
    fn the_shapes_are_the_issues() {
        let w1 = case("W1");
        assert_eq!(w1.signature.dtype, DType::F16);
        assert_eq!(w1.signature.data_shape, [1, 32, 4096, 128]);
        let layout = w1.signature.validate().unwrap();
        assert_eq!(layout.op(), ResolvedScatter::Nd { index_depth: 3 });
        assert_eq!((layout.index_count(), layout.slice_len()), (32, 128));
        let w3 = case("W3").signature.validate().unwrap();
        assert_eq!(w3.op(), ResolvedScatter::Elements { axis: 1 });
        assert_eq!(case("W3").signature.reduction, Reduction::Sum);
        let w4 = case("W4").signature.validate().unwrap();
        assert_eq!(w4.op(), ResolvedScatter::Elements { axis: 0 });
        assert_eq!(case("W4").signature.reduction, Reduction::None);
        let w5 = case("W5").signature.validate().unwrap();
        assert_eq!((w5.index_count(), w5.slice_len()), (4, 16));
    }

    #[test]
    fn w1_writes_one_position_of_every_head() {
        let values = case("W1").index_values(7);
        let expected: Vec<i64> = (0..32).flat_map(|h| [0, h, 4000]).collect();
        assert_eq!(values, expected);
    }

    #[test]
    fn w2_has_repeats_skewed_to_few_rows_and_a_zero_table() {
        let w2 = case("W2");
        let ids = w2.index_values(42);
        assert_eq!(ids.len(), 1024);
        let mut counts = std::collections::HashMap::new();
        for &id in &ids {
            *counts.entry(id).or_insert(0usize) += 1;
        }
        // Zipf s=1.1 over 30522 ranks: the top rank has 14.2% of the mass (146 of 1024 draws
        // expected) and numpy's sampler gives 440 to 480 distinct ids; uniform draws would
        // give one id at most a handful of times and about 1007 distinct ids.
        let most = *counts.values().max().unwrap();
        assert!(
            (100..200).contains(&most),
            "the most frequent id {most} times"
        );
        assert!(
            (350..600).contains(&counts.len()),
            "{} distinct",
            counts.len()
        );
        // The frequent ids are spread over the table, not the first rows.
        assert!(ids.iter().any(|&id| id > 15000));
        let inputs = w2.inputs(42);
        assert!(inputs.data.iter().all(|&b| b == 0));
        assert!(inputs.updates.iter().any(|&b| b != 0));
    }

    #[test]
    fn w3_has_duplicates_in_a_row() {
        let ids = case("W3").index_values(42);
        let row = &ids[..1024];
        let mut seen = vec![false; 4096];
        let repeats = row
            .iter()
            .filter(|&&id| std::mem::replace(&mut seen[id as usize], true))
            .count();
        // 1024 uniform draws of 4096: about 120 repeats expected.
        assert!((60..200).contains(&repeats), "{repeats} repeats");
    }

    #[test]
    fn w4_indices_are_a_permutation_in_every_column() {
        let ids = case("W4").index_values(42);
        for col in 0..1024 {
            let mut seen = vec![false; 1024];
            for row in 0..1024 {
                let id = ids[row * 1024 + col] as usize;
                assert!(
                    !std::mem::replace(&mut seen[id], true),
                    "column {col} repeats {id}"
                );
            }
        }
        // The columns are independent: not the same permutation broadcast.
        assert_ne!(ids[0], ids[1]);
        assert!((0..1024).any(|row| ids[row * 1024] != ids[row * 1024 + 1]));
    }

    #[test]
    fn w5_rows_are_distinct() {
        let mut ids = case("W5").index_values(42);
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 4);
    }

    #[test]
    fn random_floats_are_finite_normal_values_in_range() {
        let mut rng = XorShift::new(3);
        let f32s = random_values(DType::F32, 10_000, &mut rng);
        for chunk in f32s.chunks_exact(4) {
            let v = f32::from_ne_bytes(chunk.try_into().unwrap());
            assert!(
                (-1.0..1.0).contains(&v) && (v == 0.0 || v.is_normal()),
                "{v}"
            );
        }
        // f16 bits checked by decoding them independently of `f16_bits`.
        let f16s = random_values(DType::F16, 10_000, &mut rng);
        let mut negative = 0;
        for chunk in f16s.chunks_exact(2) {
            let bits = u16::from_ne_bytes(chunk.try_into().unwrap());
            let exponent = (bits >> 10) & 0x1f;
            assert!(
                bits & 0x7fff == 0 || (1..16).contains(&exponent),
                "{bits:#06x}"
            );
            negative += usize::from(bits & 0x8000 != 0);
        }
        assert!((4000..6000).contains(&negative), "{negative} negative");
        assert_eq!(f16_bits(1.0 / 1024.0), 0x1400);
        assert_eq!(f16_bits(-0.5), 0xb800);
        assert_eq!(f16_bits(0.75), 0x3a00);
    }
}
