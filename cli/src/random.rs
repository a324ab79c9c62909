//! Seeded random inputs: data bytes and indices that are valid for a signature.

use gather_jit::{IndexType, OutOfRange, ResolvedOp, Validated};

use crate::failure::{Failure, Result};

/// Marsaglia's xorshift64: small, fast and reproducible, which is all a demo needs.
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

/// `len` random bytes: data for any element type (gather only moves bytes, so NaN patterns in
/// float data are fine; agreement is checked byte for byte).
pub fn bytes(len: usize, rng: &mut XorShift) -> Vec<u8> {
    let mut out = vec![0; len];
    rng.fill(&mut out);
    out
}

/// Random indices that are all in range for `validated`: each is drawn from `0..s`, with `s` the
/// data dim it indexes (and at most the index type's largest value + 1).
///
/// # Errors
/// If a data dim that indices point into is empty, no valid index exists (unless the policy
/// zero-fills out-of-range slices, in which case 0 is used).
pub fn valid_indices(validated: &Validated, rng: &mut XorShift) -> Result<Vec<u8>> {
    let sig = validated.signature();
    let index_type = sig.index_type;
    let count = validated.indices_len();
    let mut out = Vec::with_capacity(count * index_type.size());
    let dim_of = |i: usize| -> usize {
        match validated.op() {
            ResolvedOp::Gather { axis, .. } | ResolvedOp::GatherElements { axis } => axis,
            ResolvedOp::GatherNd {
                batch_dims,
                index_depth,
            } => batch_dims + i % index_depth,
        }
    };
    for i in 0..count {
        let dim = dim_of(i);
        let size = (sig.data_shape[dim] as u64).min(max_index(index_type).saturating_add(1));
        let value = if size > 0 {
            rng.below(size)
        } else if sig.policy.out_of_range == OutOfRange::Zero {
            0
        } else {
            return Err(Failure::usage(format!(
                "cannot make valid indices: data dim {dim} of shape {:?} is empty",
                sig.data_shape
            )));
        };
        push_index(&mut out, index_type, value);
    }
    Ok(out)
}

/// The largest value of an index type.
fn max_index(index_type: IndexType) -> u64 {
    match index_type {
        IndexType::I8 => i8::MAX as u64,
        IndexType::U8 => u8::MAX as u64,
        IndexType::I16 => i16::MAX as u64,
        IndexType::U16 => u16::MAX as u64,
        IndexType::I32 => i32::MAX as u64,
        IndexType::U32 => u32::MAX as u64,
        IndexType::I64 => i64::MAX as u64,
        IndexType::U64 => u64::MAX,
    }
}

/// Appends `value` (at most [`max_index`]) as a native-endian `index_type`.
pub fn push_index(out: &mut Vec<u8>, index_type: IndexType, value: u64) {
    let bytes = value.to_ne_bytes();
    let size = index_type.size();
    // The value fits, so its low `size` bytes are the whole number in either byte order.
    if cfg!(target_endian = "little") {
        out.extend_from_slice(&bytes[..size]);
    } else {
        out.extend_from_slice(&bytes[8 - size..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gather_jit::Signature;

    #[test]
    fn indices_are_in_range_for_each_tuple_coordinate() {
        let validated = Signature::gather_nd(&[3, 5, 7], &[100, 2], 0)
            .validate()
            .unwrap();
        let bytes = valid_indices(&validated, &mut XorShift::new(7)).unwrap();
        let values: Vec<i64> = bytes
            .chunks_exact(8)
            .map(|c| i64::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert!(values.iter().step_by(2).all(|&v| (0..3).contains(&v)));
        assert!(
            values
                .iter()
                .skip(1)
                .step_by(2)
                .all(|&v| (0..5).contains(&v))
        );
        assert!(values.contains(&4), "the range is covered");
    }

    #[test]
    fn empty_indexed_dim_has_no_valid_index() {
        let validated = Signature::gather(&[0, 2], &[3], 0, 0).validate().unwrap();
        assert!(valid_indices(&validated, &mut XorShift::new(1)).is_err());
    }

    #[test]
    fn same_seed_same_bytes() {
        assert_eq!(
            bytes(13, &mut XorShift::new(3)),
            bytes(13, &mut XorShift::new(3))
        );
        assert_ne!(
            bytes(13, &mut XorShift::new(3)),
            bytes(13, &mut XorShift::new(4))
        );
    }
}
