//! Validation and shape inference: the one function every path uses.
//!
//! [`Signature::validate`] checks every precondition of the op under its flavor, normalises
//! `axis` and `batch_dims`, infers the output shape and proves that every element count and
//! byte size fits in `isize`. The interpreter, the specialiser and the public API all start
//! from the [`Validated`] it returns, so they cannot disagree about shapes.

use super::{Flavor, MAX_RANK, Op, OpName, Signature};
use crate::error::{Error, Result};

/// The op with its attributes normalised (non-negative, checked against the shapes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResolvedOp {
    /// `output = data[:axis] + indices[batch_dims:] + data[axis+1:]`.
    Gather {
        /// Axis of data, in `[batch_dims, data.rank)`.
        axis: usize,
        /// Leading dims shared by data and indices.
        batch_dims: usize,
    },
    /// `output.shape = indices.shape`.
    GatherElements {
        /// Axis of data, in `[0, data.rank)`.
        axis: usize,
    },
    /// Tuples of `index_depth` coordinates index data dims `batch_dims..batch_dims+index_depth`.
    GatherNd {
        /// Leading dims shared by data and indices.
        batch_dims: usize,
        /// `indices.shape[-1]`, in `[1, data.rank - batch_dims]`.
        index_depth: usize,
    },
}

/// A signature that passed validation, with its normalised attributes and output shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Validated {
    signature: Signature,
    op: ResolvedOp,
    output_shape: Vec<usize>,
}

impl Validated {
    /// The signature as given.
    pub fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The op with normalised attributes.
    pub fn op(&self) -> ResolvedOp {
        self.op
    }

    /// The inferred output shape.
    pub fn output_shape(&self) -> &[usize] {
        &self.output_shape
    }

    /// The data dimension indexed by the index at `position` of the indices tensor: `axis`
    /// for Gather and GatherElements, `batch_dims + position[-1]` for GatherND.
    pub fn indexed_data_dim(&self, position: &[usize]) -> usize {
        match self.op {
            ResolvedOp::Gather { axis, .. } | ResolvedOp::GatherElements { axis } => axis,
            ResolvedOp::GatherNd { batch_dims, .. } => batch_dims + position[position.len() - 1],
        }
    }

    /// Number of elements of data.
    pub fn data_len(&self) -> usize {
        self.signature.data_shape.iter().product()
    }

    /// Number of elements of indices.
    pub fn indices_len(&self) -> usize {
        self.signature.indices_shape.iter().product()
    }

    /// Number of elements of the output.
    pub fn output_len(&self) -> usize {
        self.output_shape.iter().product()
    }
}

impl Signature {
    /// Checks the signature against its op's and flavor's rules and infers the output shape.
    ///
    /// # Errors
    /// A typed [`Error`] naming the first violated rule: the flavor does not define the op, a
    /// rank too small, `axis` or `batch_dims` out of range, batch dims that differ,
    /// `indices.shape[-1]` out of `1..=rank-batch_dims`, GatherElements rank or dim mismatch, a
    /// tensor of more than [`MAX_RANK`] dims, or an element count or byte size that overflows.
    pub fn validate(&self) -> Result<Validated> {
        let op_name = self.op.name();
        if !self.flavor.supports(op_name) {
            return Err(Error::FlavorMismatch {
                op: op_name,
                flavor: self.flavor,
            });
        }
        let data = &self.data_shape;
        let indices = &self.indices_shape;
        max_rank(op_name, "data", data)?;
        max_rank(op_name, "indices", indices)?;
        check_size("data", data, self.dtype.size())?;
        check_size("indices", indices, self.index_type.size())?;

        let (op, output_shape) = match self.op {
            Op::Gather { axis, batch_dims } => self.infer_gather(axis, batch_dims)?,
            Op::GatherElements { axis } => self.infer_gather_elements(axis)?,
            Op::GatherNd { batch_dims } => self.infer_gather_nd(batch_dims)?,
        };
        max_rank(op_name, "output", &output_shape)?;
        check_size("output", &output_shape, self.dtype.size())?;
        Ok(Validated {
            signature: self.clone(),
            op,
            output_shape,
        })
    }

    fn infer_gather(&self, axis: i64, batch_dims: i64) -> Result<(ResolvedOp, Vec<usize>)> {
        let op = OpName::Gather;
        let (data, indices) = (&self.data_shape, &self.indices_shape);
        min_rank(op, "data", data, 1)?;
        let axis = normalise_axis(op, axis, data.len())?;
        let q = indices.len() as i64;
        let batch_dims = match self.flavor {
            Flavor::Onnx | Flavor::OpenvinoGather1 => {
                if batch_dims != 0 {
                    return Err(unsupported(
                        self.flavor,
                        op,
                        "batch_dims",
                        batch_dims,
                        "only 0",
                    ));
                }
                0
            }
            Flavor::TensorRt => {
                if !(0..=1).contains(&batch_dims) {
                    return Err(unsupported(
                        self.flavor,
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
                batch_dims as usize
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
                (if batch_dims < 0 {
                    batch_dims + q
                } else {
                    batch_dims
                }) as usize
            }
        };
        if batch_dims > axis {
            return Err(Error::BatchDimsExceedAxis {
                op,
                batch_dims,
                axis,
            });
        }
        self.check_batch_dims(op, batch_dims)?;
        let output = [&data[..axis], &indices[batch_dims..], &data[axis + 1..]].concat();
        Ok((ResolvedOp::Gather { axis, batch_dims }, output))
    }

    fn infer_gather_elements(&self, axis: i64) -> Result<(ResolvedOp, Vec<usize>)> {
        let op = OpName::GatherElements;
        let (data, indices) = (&self.data_shape, &self.indices_shape);
        min_rank(op, "data", data, 1)?;
        if data.len() != indices.len() {
            return Err(Error::RankMismatch {
                op,
                data_rank: data.len(),
                indices_rank: indices.len(),
            });
        }
        let axis = normalise_axis(op, axis, data.len())?;
        let must_equal = self.flavor == Flavor::OpenvinoGatherElements6;
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
        Ok((ResolvedOp::GatherElements { axis }, indices.clone()))
    }

    fn infer_gather_nd(&self, batch_dims: i64) -> Result<(ResolvedOp, Vec<usize>)> {
        let op = OpName::GatherNd;
        let (data, indices) = (&self.data_shape, &self.indices_shape);
        min_rank(op, "data", data, 1)?;
        min_rank(op, "indices", indices, 1)?;
        let max = data.len().min(indices.len()) as i64 - 1;
        if !(0..=max).contains(&batch_dims) {
            return Err(Error::BatchDimsOutOfRange {
                op,
                batch_dims,
                min: 0,
                max,
            });
        }
        let b = batch_dims as usize;
        self.check_batch_dims(op, b)?;
        let depth = indices[indices.len() - 1];
        let max_depth = data.len() - b;
        if depth == 0 || depth > max_depth {
            return Err(Error::IndexDepthOutOfRange {
                op,
                depth,
                max: max_depth,
            });
        }
        let slice = &data[b + depth..];
        let tuples = &indices[..indices.len() - 1];
        let output = if self.flavor == Flavor::OpenvinoGatherNd5 && b > 0 {
            // GatherND-5 flattens the batch dims into one (checked: a sub-product of indices).
            let batch: usize = indices[..b].iter().product();
            [&[batch][..], &tuples[b..], slice].concat()
        } else {
            [tuples, slice].concat()
        };
        Ok((
            ResolvedOp::GatherNd {
                batch_dims: b,
                index_depth: depth,
            },
            output,
        ))
    }

    fn check_batch_dims(&self, op: OpName, batch_dims: usize) -> Result<()> {
        let (data, indices) = (&self.data_shape, &self.indices_shape);
        for dim in 0..batch_dims {
            if data[dim] != indices[dim] {
                return Err(Error::BatchDimMismatch {
                    op,
                    dim,
                    data: data[dim],
                    indices: indices[dim],
                    data_shape: data.clone(),
                    indices_shape: indices.clone(),
                });
            }
        }
        Ok(())
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

fn min_rank(op: OpName, input: &'static str, shape: &[usize], min: usize) -> Result<()> {
    if shape.len() < min {
        return Err(Error::RankTooSmall {
            op,
            input,
            rank: shape.len(),
            min,
        });
    }
    Ok(())
}

/// Every tensor has at most [`MAX_RANK`] dims, so that a signature's plan, code and compile
/// time stay small (a GatherND index tuple is unrolled, one check per coordinate).
fn max_rank(op: OpName, input: &'static str, shape: &[usize]) -> Result<()> {
    if shape.len() > MAX_RANK {
        return Err(Error::RankTooLarge {
            op,
            input,
            rank: shape.len(),
            max: MAX_RANK,
        });
    }
    Ok(())
}

fn normalise_axis(op: OpName, axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if !(-r..r).contains(&axis) {
        return Err(Error::AxisOutOfRange { op, axis, rank });
    }
    Ok((if axis < 0 { axis + r } else { axis }) as usize)
}

/// Checks that a tensor's byte size fits in `isize`, counting zero dims as 1 so that every
/// stride computed from the shape (even of an empty tensor) fits too (as ndarray does).
fn check_size(what: &'static str, shape: &[usize], element_size: usize) -> Result<()> {
    let bytes = shape
        .iter()
        .try_fold(element_size, |acc, &d| acc.checked_mul(d.max(1)));
    match bytes {
        Some(b) if b <= isize::MAX as usize => Ok(()),
        _ => Err(Error::SizeOverflow {
            what,
            shape: shape.to_vec(),
        }),
    }
}
