//! The rank, axis, attribute and size checks that every op family's validation shares.
//!
//! One function per rule, each returning the typed [`Error`] that names it: the plain gathers'
//! validation ([`Signature::validate`](crate::Signature::validate)), the generic shape rule
//! (`rule.rs`) and the quantized gathers' layout (`quant/mod.rs`) call these, so a rule and its
//! message cannot drift apart between them. Nothing here knows an op's output shape.

use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::types::{Flavor, MAX_RANK, OpName};

/// The flavor defines the op (OpenVINO Gather-8 has no GatherND, ...).
pub(crate) fn flavor_supports(op: OpName, flavor: Flavor) -> Result<()> {
    if flavor.supports(op) {
        Ok(())
    } else {
        Err(Error::FlavorMismatch { op, flavor })
    }
}

/// An input of rank `rank` has at least `min` dims.
pub(crate) fn min_rank(op: OpName, input: &'static str, rank: usize, min: usize) -> Result<()> {
    if rank < min {
        return Err(Error::RankTooSmall {
            op,
            input,
            rank,
            min,
        });
    }
    Ok(())
}

/// Every tensor has at most [`MAX_RANK`] dims, so that a signature's plan, code and compile
/// time stay small (a GatherND index tuple is unrolled, one check per coordinate).
pub(crate) fn max_rank(op: OpName, input: &'static str, rank: usize) -> Result<()> {
    if rank > MAX_RANK {
        return Err(Error::RankTooLarge {
            op,
            input,
            rank,
            max: MAX_RANK,
        });
    }
    Ok(())
}

/// `axis` of data of rank `rank`, in `[-rank, rank)`, negative counting from the end.
pub(crate) fn normalise_axis(op: OpName, axis: i64, rank: usize) -> Result<usize> {
    // A rank above `i64::MAX` cannot be a real tensor's; saturating keeps the range check
    // total rather than wrapping.
    let r = i64::try_from(rank).unwrap_or(i64::MAX);
    if !(-r..r).contains(&axis) {
        return Err(Error::AxisOutOfRange { op, axis, rank });
    }
    Ok((if axis < 0 { axis + r } else { axis }) as usize)
}

/// Gather's `batch_dims` under `flavor`, normalised against the indices' rank: only 0 for
/// ONNX and OpenVINO Gather-1, 0 or 1 (TensorRT's `num_elementwise_dims`, at most the indices'
/// rank) for TensorRT, `[-rank(indices), rank(indices)]` with negative counting from the end
/// for OpenVINO Gather-7/8.
pub(crate) fn gather_batch_dims(
    flavor: Flavor,
    batch_dims: i64,
    indices_rank: usize,
) -> Result<usize> {
    let op = OpName::Gather;
    let q = i64::try_from(indices_rank).unwrap_or(i64::MAX);
    match flavor {
        Flavor::Onnx | Flavor::OpenvinoGather1 => {
            if batch_dims != 0 {
                return Err(unsupported(flavor, op, "batch_dims", batch_dims, "only 0"));
            }
            Ok(0)
        }
        Flavor::TensorRt => {
            if !(0..=1).contains(&batch_dims) {
                return Err(unsupported(
                    flavor,
                    op,
                    "num_elementwise_dims",
                    batch_dims,
                    "0 or 1",
                ));
            }
            if batch_dims > q {
                return Err(Error::BatchDimsOutOfRange {
                    op,
                    batch_dims,
                    min: 0,
                    max: q,
                });
            }
            Ok(batch_dims as usize)
        }
        // Gather-7/8: batch_dims in [-rank(indices), rank(indices)], negative from the end.
        _ => {
            if !(-q..=q).contains(&batch_dims) {
                return Err(Error::BatchDimsOutOfRange {
                    op,
                    batch_dims,
                    min: -q,
                    max: q,
                });
            }
            Ok((if batch_dims < 0 {
                batch_dims + q
            } else {
                batch_dims
            }) as usize)
        }
    }
}

/// Gather's normalised `batch_dims` does not exceed its normalised `axis` (the batch dims
/// are data's leading dims, before the gathered one).
pub(crate) fn batch_dims_within_axis(op: OpName, batch_dims: usize, axis: usize) -> Result<()> {
    if batch_dims > axis {
        return Err(Error::BatchDimsExceedAxis {
            op,
            batch_dims,
            axis,
        });
    }
    Ok(())
}

/// GatherND's `batch_dims`, in `[0, min(ranks) - 1]` (ranks of at least 1, checked first).
pub(crate) fn gather_nd_batch_dims(
    op: OpName,
    batch_dims: i64,
    data_rank: usize,
    indices_rank: usize,
) -> Result<usize> {
    let max = i64::try_from(data_rank.min(indices_rank))
        .unwrap_or(i64::MAX)
        .saturating_sub(1);
    if !(0..=max).contains(&batch_dims) {
        return Err(Error::BatchDimsOutOfRange {
            op,
            batch_dims,
            min: 0,
            max,
        });
    }
    Ok(batch_dims as usize)
}

/// GatherElements: the ranks of data and indices are equal.
pub(crate) fn same_rank(op: OpName, data_rank: usize, indices_rank: usize) -> Result<()> {
    if data_rank != indices_rank {
        return Err(Error::RankMismatch {
            op,
            data_rank,
            indices_rank,
        });
    }
    Ok(())
}

/// The first `batch_dims` dims of data and indices are equal.
pub(crate) fn batch_dims_match(
    op: OpName,
    data: &[usize],
    indices: &[usize],
    batch_dims: usize,
) -> Result<()> {
    for dim in 0..batch_dims {
        if data[dim] != indices[dim] {
            return Err(Error::BatchDimMismatch {
                op,
                dim,
                data: data[dim],
                indices: indices[dim],
                data_shape: data.to_vec(),
                indices_shape: indices.to_vec(),
            });
        }
    }
    Ok(())
}

/// GatherElements: every dim but `axis` of indices is at most data's (ONNX), or equal to it
/// (`must_equal`: OpenVINO GatherElements-6). The ranks are equal (checked first).
pub(crate) fn elements_dims(
    op: OpName,
    data: &[usize],
    indices: &[usize],
    axis: usize,
    must_equal: bool,
) -> Result<()> {
    for (dim, (&d, &i)) in data.iter().zip(indices).enumerate() {
        if dim == axis {
            continue;
        }
        let ok = if must_equal { i == d } else { i <= d };
        if !ok {
            return Err(Error::DimMismatch {
                op,
                dim,
                data: d,
                indices: i,
                rule: if must_equal {
                    "equal to data's"
                } else {
                    "at most data's"
                },
            });
        }
    }
    Ok(())
}

/// GatherND's index depth (`indices.shape[-1]`), in `1..=max` (`max` data's rank minus
/// `batch_dims`).
pub(crate) fn index_depth(op: OpName, depth: usize, max: usize) -> Result<usize> {
    if depth == 0 || depth > max {
        return Err(Error::IndexDepthOutOfRange { op, depth, max });
    }
    Ok(depth)
}

/// Checks that a tensor's byte size fits in `isize`, counting zero dims as 1 so that every
/// stride computed from the shape (even of an empty tensor) fits too (as ndarray does), and
/// returns its bytes (`element_size` times its element count).
pub(crate) fn check_size(
    what: &'static str,
    shape: &[usize],
    element_size: usize,
) -> Result<usize> {
    shape
        .iter()
        .try_fold(element_size, |acc, &d| acc.checked_mul(d.max(1)))
        .filter(|&bytes| bytes <= isize::MAX as usize)
        // The product with zeros counted as 1 bounds the true one, so this cannot overflow.
        .map(|_| element_size * shape.iter().product::<usize>())
        .ok_or_else(|| Error::SizeOverflow {
            what,
            shape: shape.to_vec(),
        })
}

/// A size overflow of a shape whose dims may not all be known (the generic rule's, where a
/// product of dims overflows): the shape when it is known, else an empty one.
pub(crate) fn size_overflow(what: &'static str, shape: Option<Cow<'_, [usize]>>) -> Error {
    Error::SizeOverflow {
        what,
        shape: shape.map(Cow::into_owned).unwrap_or_default(),
    }
}

fn unsupported(
    flavor: Flavor,
    op: OpName,
    attribute: &'static str,
    value: i64,
    allowed: &'static str,
) -> Error {
    Error::UnsupportedAttribute {
        op,
        flavor,
        attribute,
        value,
        allowed,
    }
}
