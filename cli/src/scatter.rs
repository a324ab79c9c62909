//! What the scatters (`--op scatter-nd`, `scatter-elements`, `scatter-update`) need of their
//! own: a third input, the updates. `run` reads the three files into a signature here; `bench`
//! and `explain --check` draw updates and valid indices here; everything else goes through the
//! commands' one path ([`crate::op_kernel`]).

use gather_jit::DType;
use gather_jit::scatter::{ResolvedScatter, ScatterLayout, ScatterSignature};
use gather_jit_workloads::XorShift;

use crate::failure::{Failure, Result};
use crate::opargs::OpArgs;
use crate::quantized::Input;

/// The signature of a scatter `run` on these arrays: data's element type (which the updates
/// must have too), the indices' integer type, the three shapes as read.
///
/// # Errors
/// An element type gather-jit does not take; indices that are not integers; updates of another
/// element type than data's; the flags' errors ([`OpArgs::scatter_signature`]).
pub fn signature_of(
    op: &OpArgs,
    data: &Input,
    indices: &Input,
    updates: &Input,
) -> Result<ScatterSignature> {
    let dtype = data.array.element.dtype().ok_or_else(|| {
        Failure::usage(format!(
            "{}: not an element type gather-jit supports",
            data.path
        ))
    })?;
    let index_type = indices.array.element.index_type().ok_or_else(|| {
        Failure::usage(format!(
            "{}: indices must have an integer type, found {}",
            indices.path,
            indices.array.element.dtype().map_or("?", DType::name)
        ))
    })?;
    let updates_dtype = updates.array.element.dtype();
    if updates_dtype != Some(dtype) {
        return Err(Failure::usage(format!(
            "{}: updates must have data's element type {dtype}, found {}",
            updates.path,
            updates_dtype.map_or("?", DType::name)
        )));
    }
    op.scatter_signature(
        [&data.array.shape, &indices.array.shape],
        Some(&updates.array.shape),
        dtype,
        index_type,
    )
}

/// Fills `bytes` with seeded values of `dtype` that repeated reductions keep away from
/// subnormal numbers (whose arithmetic is slow on some machines and would time something
/// else): floats of magnitude in `[1, 2)` with a random sign, `bool` as 0 or 1 (the only valid
/// bytes), integers as random bytes.
pub fn fill_values(dtype: DType, bytes: &mut [u8], rng: &mut XorShift) {
    // (sign bit, exponent bits of 1.0, mantissa width) of each float type.
    let float = match dtype {
        DType::F16 => Some((15, 15u64 << 10, 10)),
        DType::Bf16 => Some((15, 127u64 << 7, 7)),
        DType::F32 => Some((31, 127u64 << 23, 23)),
        DType::F64 => Some((63, 1023u64 << 52, 52)),
        _ => None,
    };
    let size = dtype.size();
    for element in bytes.chunks_exact_mut(size) {
        let random = rng.next_u64();
        let bits = match (float, dtype) {
            (Some((sign, one, mantissa)), _) => {
                let sign_bit = (random >> 63) << sign;
                sign_bit | one | (random & ((1u64 << mantissa) - 1))
            }
            (None, DType::Bool) => random & 1,
            (None, _) => random,
        };
        element.copy_from_slice(&bits.to_le_bytes()[..size]);
        if cfg!(target_endian = "big") {
            element.reverse();
        }
    }
}

/// Appends seeded indices, each in range for the data dim it selects and below `limit` (0
/// counts as 1): ScatterND's coordinate `c` of each tuple selects data dim `c`, the other ops'
/// indices select along the axis. Under a flavor that forbids two updates of one element
/// (TensorRT) they are distinct where it matters: ScatterND's tuples, ScatterElements' indices
/// along each line of the axis.
///
/// # Errors
/// An empty data dim that indices select along; more distinct indices asked for than there
/// are places; no memory for the indices.
pub fn push_valid_indices(
    layout: &ScatterLayout,
    rng: &mut XorShift,
    limit: u64,
    out: &mut Vec<u8>,
) -> Result<()> {
    let sig = layout.signature();
    let index_type = sig.index_type;
    let bound = |dim: usize| {
        (dim as u64)
            .min(index_type.max_value().saturating_add(1))
            .min(limit.max(1))
    };
    // The data dims the indices select along, and the bound of each.
    let dims: Vec<usize> = match layout.op() {
        ResolvedScatter::Nd { index_depth } => (0..index_depth).collect(),
        ResolvedScatter::Elements { axis } | ResolvedScatter::Update { axis } => vec![axis],
    };
    let bounds: Vec<u64> = dims.iter().map(|&d| bound(sig.data_shape[d])).collect();
    if layout.indices_len() > 0
        && let Some(&dim) = dims.iter().find(|&&d| sig.data_shape[d] == 0)
    {
        return Err(Failure::usage(format!(
            "cannot make valid indices: data dim {dim} of shape {:?} is empty",
            sig.data_shape
        )));
    }
    let len = crate::buffer::byte_len(layout.indices_len(), index_type.size(), "the indices")?;
    out.try_reserve_exact(len)
        .map_err(|_| Failure::allocation(len, "the indices"))?;
    let mut push = |value: u64| {
        let fits = index_type.try_encode(value.into(), out);
        debug_assert!(fits, "below the type's maximum");
    };
    if !sig.flavor.forbids_duplicates() {
        for flat in 0..layout.indices_len() {
            let bound = bounds[flat % bounds.len()];
            push(rng.below(bound));
        }
        return Ok(());
    }
    match layout.op() {
        ResolvedScatter::Nd { .. } => {
            // Distinct tuples: the flat numbers start, start + step, ... (mod the number of
            // tuples), with step coprime to it, written in the mixed radix of the bounds.
            let space = bounds
                .iter()
                .try_fold(1u64, |product, &b| product.checked_mul(b))
                .unwrap_or(u64::MAX);
            let count = layout.index_count() as u64;
            if count > space {
                return Err(distinct_error(sig, count, space));
            }
            let start = rng.below(space.max(1));
            let step = coprime_step(space, rng);
            let mut tuple = vec![0u64; bounds.len()];
            for i in 0..count {
                let mut t = (start as u128 + i as u128 * step as u128) % space.max(1) as u128;
                for (coordinate, &b) in tuple.iter_mut().zip(&bounds).rev() {
                    *coordinate = (t % b as u128) as u64;
                    t /= b as u128;
                }
                tuple.iter().for_each(|&c| push(c));
            }
        }
        ResolvedScatter::Elements { axis } | ResolvedScatter::Update { axis } => {
            // Along each line of the axis, the indices rotate 0..bound by a seeded offset:
            // distinct while the line is no longer than the bound.
            let shape = &sig.indices_shape;
            let line = shape[axis] as u64;
            let bound = bounds[0];
            if line > bound {
                return Err(distinct_error(sig, line, bound));
            }
            let inner: usize = shape[axis + 1..].iter().product();
            let key = rng.next_u64();
            for flat in 0..layout.indices_len() {
                let along = (flat / inner.max(1)) % shape[axis].max(1);
                let line_id = (flat / (inner.max(1) * shape[axis].max(1))) * inner.max(1)
                    + flat % inner.max(1);
                let offset = mix(key ^ line_id as u64) % bound;
                push((offset + along as u64) % bound);
            }
        }
    }
    Ok(())
}

/// The error for more distinct indices than places.
fn distinct_error(sig: &ScatterSignature, count: u64, places: u64) -> Failure {
    Failure::usage(format!(
        "cannot make {count} distinct indices among {places} places: flavor {} forbids two \
         updates of one element (give --indices, or fewer indices)",
        sig.flavor
    ))
}

/// A seeded step in `1..n` coprime to `n` (1 for `n <= 2`).
fn coprime_step(n: u64, rng: &mut XorShift) -> u64 {
    if n <= 2 {
        return 1;
    }
    loop {
        let step = 1 + rng.below(n - 1);
        if gcd(step, n) == 1 {
            return step;
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// SplitMix64's finaliser: a line's seeded offset.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gather_jit::IndexType;
    use gather_jit::scatter::ScatterFlavor;
    use std::collections::HashSet;

    fn decode(index_type: IndexType, bytes: &[u8]) -> Vec<i128> {
        (0..bytes.len() / index_type.size())
            .map(|i| index_type.read(bytes, i))
            .collect()
    }

    #[test]
    fn indices_are_in_range_for_each_tuple_coordinate() {
        let layout = ScatterSignature::scatter_nd(&[3, 70, 2], &[500, 2], &[500, 2])
            .validate()
            .unwrap();
        let mut out = Vec::new();
        push_valid_indices(&layout, &mut XorShift::new(7), u64::MAX, &mut out).unwrap();
        let values = decode(IndexType::I64, &out);
        assert_eq!(values.len(), 1000);
        let (first, second): (Vec<_>, Vec<_>) = values.chunks(2).map(|t| (t[0], t[1])).unzip();
        assert!(first.iter().all(|&v| (0..3).contains(&v)));
        assert!(second.iter().all(|&v| (0..70).contains(&v)));
        // Both coordinates reach beyond the other's dim, so they are drawn each by its own.
        assert!(second.iter().any(|&v| v >= 3));
    }

    #[test]
    fn tensorrt_tuples_and_lines_are_distinct() {
        let nd = ScatterSignature::scatter_nd(&[4, 5, 3], &[20, 2], &[20, 3])
            .with_flavor(ScatterFlavor::TensorRt)
            .validate()
            .unwrap();
        let mut out = Vec::new();
        push_valid_indices(&nd, &mut XorShift::new(1), u64::MAX, &mut out).unwrap();
        let tuples: HashSet<Vec<i128>> = decode(IndexType::I64, &out)
            .chunks(2)
            .map(<[i128]>::to_vec)
            .collect();
        assert_eq!(tuples.len(), 20, "every one of the 20 tuples of [4, 5]");
        let elements = ScatterSignature::scatter_elements(&[6, 4], &[3, 4], &[3, 4], 0)
            .with_flavor(ScatterFlavor::TensorRt)
            .validate()
            .unwrap();
        let mut out = Vec::new();
        push_valid_indices(&elements, &mut XorShift::new(2), u64::MAX, &mut out).unwrap();
        let values = decode(IndexType::I64, &out);
        for column in 0..4 {
            let line: HashSet<i128> = (0..3).map(|row| values[row * 4 + column]).collect();
            assert_eq!(line.len(), 3, "column {column} of {values:?}");
            assert!(line.iter().all(|v| (0..6).contains(v)));
        }
        let too_many = ScatterSignature::scatter_nd(&[2, 3], &[3, 1], &[3, 3])
            .with_flavor(ScatterFlavor::TensorRt)
            .validate()
            .unwrap();
        let e = push_valid_indices(&too_many, &mut XorShift::new(1), u64::MAX, &mut Vec::new())
            .unwrap_err();
        assert!(
            e.one_line()
                .contains("cannot make 3 distinct indices among 2"),
            "{e:?}"
        );
    }

    #[test]
    fn values_stay_normal_and_bools_valid() {
        let mut rng = XorShift::new(3);
        let mut bytes = vec![0u8; 4 * 64];
        fill_values(DType::F32, &mut bytes, &mut rng);
        for c in bytes.chunks(4) {
            let v = f32::from_ne_bytes(c.try_into().unwrap()).abs();
            assert!((1.0..2.0).contains(&v), "{v}");
        }
        let mut bytes = vec![0u8; 2 * 64];
        fill_values(DType::F16, &mut bytes, &mut rng);
        for c in bytes.chunks(2) {
            let v = half::f16::from_ne_bytes([c[0], c[1]]).to_f32().abs();
            assert!((1.0..2.0).contains(&v), "{v}");
        }
        let mut bytes = vec![7u8; 64];
        fill_values(DType::Bool, &mut bytes, &mut rng);
        assert!(bytes.iter().all(|&b| b <= 1) && bytes.contains(&1) && bytes.contains(&0));
    }
}
