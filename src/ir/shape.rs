//! Validation of a concrete signature: the one function every path uses.
//!
//! [`Signature::validate`] checks every precondition of the op under its flavor, normalises
//! `axis` and `batch_dims` and infers the output shape (through the generic rule of `rule.rs`),
//! and proves that every rank is within [`MAX_RANK`](crate::ir::MAX_RANK) and every element
//! count and byte size fits in `isize` (the checks of `checks.rs`). The interpreter, the
//! specialiser and the public API all start from the [`Validated`] it returns, so they cannot
//! disagree about shapes.

use super::Signature;
use super::checks;
use super::rule::{ResolvedOp, output_shape};
use crate::error::Result;

/// A signature that passed validation, with its normalised attributes and output shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Validated {
    signature: Signature,
    op: ResolvedOp,
    output_shape: Vec<usize>,
}

impl Validated {
    /// The signature as given.
    #[inline]
    pub fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The op with normalised attributes.
    pub fn op(&self) -> ResolvedOp {
        self.op
    }

    /// The inferred output shape.
    #[inline]
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
    #[inline]
    pub fn data_len(&self) -> usize {
        self.signature.data_shape.iter().product()
    }

    /// Number of elements of indices.
    #[inline]
    pub fn indices_len(&self) -> usize {
        self.signature.indices_shape.iter().product()
    }

    /// Number of elements of the output.
    #[inline]
    pub fn output_len(&self) -> usize {
        self.output_shape.iter().product()
    }
}

impl Signature {
    /// Checks the signature against its op's and flavor's rules and infers the output shape.
    ///
    /// # Errors
    /// A typed [`Error`](crate::Error) naming the first violated rule: the flavor does not
    /// define the op, a rank too small, `axis` or `batch_dims` out of range, batch dims that
    /// differ, `indices.shape[-1]` out of `1..=rank-batch_dims`, GatherElements rank or dim
    /// mismatch, a tensor of more than [`MAX_RANK`](crate::ir::MAX_RANK) dims, or an element
    /// count or byte size that overflows.
    pub fn validate(&self) -> Result<Validated> {
        let op_name = self.op.name();
        checks::flavor_supports(op_name, self.flavor)?;
        let data = &self.data_shape;
        let indices = &self.indices_shape;
        checks::max_rank(op_name, "data", data.len())?;
        checks::max_rank(op_name, "indices", indices.len())?;
        checks::check_size("data", data, self.dtype.size())?;
        checks::check_size("indices", indices, self.index_type.size())?;
        let (op, output_shape) = output_shape(self.op, self.flavor, data, indices)?;
        checks::max_rank(op_name, "output", output_shape.len())?;
        checks::check_size("output", &output_shape, self.dtype.size())?;
        Ok(Validated {
            signature: self.clone(),
            op,
            output_shape,
        })
    }
}
