//! Seeded random inputs: data bytes and indices that are valid for a signature, from the
//! library's [`gather_jit_workloads`] generator, with a usage error where none can be valid.

use std::fmt::Display;

use gather_jit::OutOfRange;
use gather_jit::ir::{ResolvedOp, Validated};
pub use gather_jit_workloads::XorShift;

use crate::buffer;
use crate::failure::{Failure, Result};
use crate::op_kernel::OpLayout;

/// `len` random bytes: data for any element type (gather only moves bytes, so NaN patterns in
/// float data are fine; agreement is checked byte for byte). `what` names the buffer in an
/// allocation error.
///
/// # Errors
/// The buffer cannot be allocated.
pub fn bytes(len: usize, rng: &mut XorShift, what: impl Display) -> Result<Vec<u8>> {
    let mut out = buffer::zeroed(len, what)?;
    rng.fill(&mut out);
    Ok(out)
}

/// Random data bytes and valid indices for `validated`, drawn in that order from `rng`.
///
/// # Errors
/// As [`push_valid_indices`], or no memory for the data.
pub fn inputs(validated: &Validated, rng: &mut XorShift) -> Result<(Vec<u8>, Vec<u8>)> {
    let len = buffer::byte_len(
        validated.data_len(),
        validated.signature().dtype.size(),
        "the data",
    )?;
    let data = bytes(len, rng, "the data")?;
    Ok((data, valid_indices(validated, rng, u64::MAX)?))
}

/// Random indices that are all in range for `validated` and below `limit` (0 counts as 1):
/// each is drawn from `0..min(s, limit)`, with `s` the data dim it indexes (and at most the index
/// type's largest value + 1).
///
/// # Errors
/// As [`push_valid_indices`].
pub fn valid_indices(validated: &Validated, rng: &mut XorShift, limit: u64) -> Result<Vec<u8>> {
    let mut indices = Vec::new();
    push_valid_indices(validated, rng, limit, &mut indices)?;
    Ok(indices)
}

/// Appends the indices of [`valid_indices`] to `out`, which may have been given room for them
/// (as `bench` gives a buffer advised huge pages).
///
/// The values are those of [`gather_jit_workloads::random_indices_below`] for the same `rng`,
/// appended after a fallible reservation.
///
/// # Errors
/// If a data dim that indices point into is empty, no valid index exists (unless the policy
/// zero-fills out-of-range slices, in which case 0 is used); no memory for the indices.
pub fn push_valid_indices(
    validated: &Validated,
    rng: &mut XorShift,
    limit: u64,
    out: &mut Vec<u8>,
) -> Result<()> {
    let sig = validated.signature();
    let shape = &sig.indices_shape;
    let needs_valid = validated.indices_len() > 0 && sig.policy.out_of_range != OutOfRange::Zero;
    if needs_valid {
        // Every data dim an index can select: GatherND's one per tuple coordinate, the axis
        // of the others (whatever the size of the indices' last dim).
        let depth = match validated.op() {
            ResolvedOp::GatherNd { index_depth, .. } => index_depth,
            _ => 1,
        };
        for coordinate in 0..depth {
            let mut position = vec![0; shape.len()];
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
    let index_type = sig.index_type;
    let len = buffer::byte_len(validated.indices_len(), index_type.size(), "the indices")?;
    out.try_reserve_exact(len)
        .map_err(|_| Failure::allocation(len, "the indices"))?;
    gather_jit_workloads::push_random_indices_below(validated, rng, limit, out);
    Ok(())
}

/// [`push_valid_indices`] for any op: a quantized gather's indices are drawn by the same rule,
/// as those of a Gather along its gather axis ([`crate::quantized::index_rule`]); a scatter's
/// by [`crate::scatter::push_valid_indices`].
///
/// # Errors
/// As [`push_valid_indices`].
pub fn push_valid_op_indices(
    layout: OpLayout,
    rng: &mut XorShift,
    limit: u64,
    out: &mut Vec<u8>,
) -> Result<()> {
    match layout {
        OpLayout::Plain(validated) => push_valid_indices(validated, rng, limit, out),
        OpLayout::Quantized(layout) => {
            push_valid_indices(&crate::quantized::index_rule(layout)?, rng, limit, out)
        }
        OpLayout::Scatter(layout) => crate::scatter::push_valid_indices(layout, rng, limit, out),
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
        let bytes = valid_indices(&validated, &mut XorShift::new(7), 10).unwrap();
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
        let bytes = |seed| bytes(13, &mut XorShift::new(seed), "a test").unwrap();
        assert_eq!(bytes(3), bytes(3));
        assert_ne!(bytes(3), bytes(4));
    }

    #[test]
    fn indices_are_the_librarys() {
        use gather_jit_workloads::random_indices_below;
        let signatures = [
            Signature::gather(&[7, 300], &[5, 4], 1, 0),
            Signature::gather(&[1000], &[], 0, 0).with_index_type(gather_jit::IndexType::U8),
            Signature::gather_nd(&[3, 5, 7], &[10, 2], 0)
                .with_index_type(gather_jit::IndexType::I16),
            Signature::gather_elements(&[4, 6], &[9, 6], 0),
        ];
        for signature in signatures {
            let validated = signature.validate().unwrap();
            for limit in [u64::MAX, 3] {
                let ours = valid_indices(&validated, &mut XorShift::new(11), limit).unwrap();
                let theirs = random_indices_below(&validated, &mut XorShift::new(11), limit);
                assert_eq!(ours, theirs, "{signature} below {limit}");
            }
        }
    }

    #[test]
    fn indices_too_large_for_memory_are_an_error() {
        let validated = Signature::gather(&[2], &[1 << 58], 0, 0)
            .validate()
            .unwrap();
        let e = valid_indices(&validated, &mut XorShift::new(1), u64::MAX).unwrap_err();
        assert!(
            e.one_line().starts_with("cannot allocate"),
            "{}",
            e.one_line()
        );
    }
}
