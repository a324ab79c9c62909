//! Seeded random inputs: data bytes and indices that are valid for a signature, from the
//! library's [`gather_jit::workloads`] generator, with a usage error where none can be valid.

pub use gather_jit::workloads::XorShift;
use gather_jit::workloads::random_indices_below;
use gather_jit::{OutOfRange, Validated};

use crate::failure::{Failure, Result};

/// `len` random bytes: data for any element type (gather only moves bytes, so NaN patterns in
/// float data are fine; agreement is checked byte for byte).
pub fn bytes(len: usize, rng: &mut XorShift) -> Vec<u8> {
    let mut out = vec![0; len];
    rng.fill(&mut out);
    out
}

/// Random data bytes and valid indices for `validated`, drawn in that order from `rng`.
///
/// # Errors
/// As [`valid_indices`].
pub fn inputs(validated: &Validated, rng: &mut XorShift) -> Result<(Vec<u8>, Vec<u8>)> {
    inputs_below(validated, rng, u64::MAX)
}

/// As [`inputs`], with every index also below `limit` (see
/// [`gather_jit::workloads::random_indices_below`]): a gather that reads only a corner of
/// data.
///
/// # Errors
/// As [`valid_indices`].
pub fn inputs_below(
    validated: &Validated,
    rng: &mut XorShift,
    limit: u64,
) -> Result<(Vec<u8>, Vec<u8>)> {
    let data = bytes(
        validated.data_len() * validated.signature().dtype.size(),
        rng,
    );
    Ok((data, valid_indices(validated, rng, limit)?))
}

/// Random indices that are all in range for `validated` and below `limit` (0 counts as 1):
/// each is drawn from `0..min(s, limit)`, with `s` the data dim it indexes (and at most the index
/// type's largest value + 1).
///
/// # Errors
/// If a data dim that indices point into is empty, no valid index exists (unless the policy
/// zero-fills out-of-range slices, in which case 0 is used).
pub fn valid_indices(validated: &Validated, rng: &mut XorShift, limit: u64) -> Result<Vec<u8>> {
    let sig = validated.signature();
    let needs_valid = validated.indices_len() > 0 && sig.policy.out_of_range != OutOfRange::Zero;
    if needs_valid {
        let depth = sig.indices_shape.last().copied().unwrap_or(1);
        // Every data dim an index can select (GatherND: one per tuple coordinate).
        for coordinate in 0..depth {
            let mut position = vec![0; sig.indices_shape.len()];
            if let Some(last) = position.last_mut() {
                *last = coordinate;
            }
            let dim = validated.indexed_data_dim(&position);
            if sig.data_shape[dim] == 0 {
                return Err(Failure::usage(format!(
                    "cannot make valid indices: data dim {dim} of shape {:?} is empty",
                    sig.data_shape
                )));
            }
        }
    }
    Ok(random_indices_below(validated, rng, limit))
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
        let bytes = valid_indices(&validated, &mut XorShift::new(7), u64::MAX).unwrap();
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
    fn indices_below_a_limit_stay_below_it_and_their_dim() {
        let validated = Signature::gather_nd(&[3, 500], &[1000, 2], 0)
            .validate()
            .unwrap();
        let (_, bytes) = inputs_below(&validated, &mut XorShift::new(7), 10).unwrap();
        let values: Vec<i64> = bytes
            .chunks_exact(8)
            .map(|c| i64::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        let (rows, columns): (Vec<i64>, Vec<i64>) =
            values.chunks_exact(2).map(|t| (t[0], t[1])).unzip();
        assert!(rows.iter().all(|&v| (0..3).contains(&v)), "below the dim");
        assert!(
            columns.iter().all(|&v| (0..10).contains(&v)),
            "below the limit"
        );
        assert!(
            columns.contains(&9) && rows.contains(&2),
            "both bounds reached"
        );
    }

    #[test]
    fn empty_indexed_dim_has_no_valid_index() {
        let validated = Signature::gather(&[0, 2], &[3], 0, 0).validate().unwrap();
        assert!(valid_indices(&validated, &mut XorShift::new(1), u64::MAX).is_err());
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
