//! Validation of a scatter signature: the flavor defines the op, the reduction and the
//! attributes; every rank is within [`MAX_RANK`](crate::ir::MAX_RANK) and every byte size fits
//! in `isize`; the op's shape rules hold. The interpreter (and whatever compiles a scatter)
//! starts from the [`ScatterLayout`] it returns.

use super::{ScatterFlavor, ScatterOp, ScatterSignature};
use crate::error::{Error, Result};
use crate::ir::checks;
use crate::types::OpName;

/// A scatter op with its attributes normalised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResolvedScatter {
    /// ScatterND with index tuples of `index_depth` (`k`, in `1..=rank(data)`) coordinates.
    Nd {
        /// `indices.shape[-1]`.
        index_depth: usize,
    },
    /// ScatterElements along `axis` (in `0..rank(data)`).
    Elements {
        /// The normalised axis.
        axis: usize,
    },
    /// ScatterUpdate along `axis` (in `0..rank(data)`).
    Update {
        /// The normalised axis.
        axis: usize,
    },
}

/// A scatter signature that passed validation, with its normalised attributes.
///
/// The output has data's shape. Each element of `updates` lands on one data element (the
/// table in `docs/semantics.md#scatters`); updates apply in row-major order of `updates`, which
/// is the order of the indices.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScatterLayout {
    signature: ScatterSignature,
    op: ResolvedScatter,
}

impl ScatterLayout {
    /// The signature as given.
    pub fn signature(&self) -> &ScatterSignature {
        &self.signature
    }

    /// The op with normalised attributes.
    pub fn op(&self) -> ResolvedScatter {
        self.op
    }

    /// The output shape: data's.
    pub fn output_shape(&self) -> &[usize] {
        &self.signature.data_shape
    }

    /// Number of elements of data (and of the output).
    pub fn data_len(&self) -> usize {
        self.signature.data_shape.iter().product()
    }

    /// Number of elements of indices.
    pub fn indices_len(&self) -> usize {
        self.signature.indices_shape.iter().product()
    }

    /// Number of elements of updates.
    pub fn updates_len(&self) -> usize {
        self.signature.updates_shape.iter().product()
    }

    /// The number of writes: index tuples for ScatterND (`prod(indices.shape[:-1])`), indices
    /// otherwise.
    pub fn index_count(&self) -> usize {
        let indices = &self.signature.indices_shape;
        match self.op {
            ResolvedScatter::Nd { .. } => indices[..indices.len() - 1].iter().product(),
            _ => indices.iter().product(),
        }
    }

    /// Slices each index writes: `prod(data.shape[:axis])` for ScatterUpdate (one per leading
    /// position), 1 otherwise. `updates_len() == outer_len() * index_count() * slice_len()`.
    pub fn outer_len(&self) -> usize {
        match self.op {
            ResolvedScatter::Update { axis } => self.signature.data_shape[..axis].iter().product(),
            _ => 1,
        }
    }

    /// Elements written per index (ScatterND: per tuple): `prod(data.shape[k:])` for
    /// ScatterND, 1 for ScatterElements, `prod(data.shape[axis+1:])` for ScatterUpdate (one
    /// contiguous run of data for each).
    pub fn slice_len(&self) -> usize {
        let data = &self.signature.data_shape;
        match self.op {
            ResolvedScatter::Nd { index_depth } => data[index_depth..].iter().product(),
            ResolvedScatter::Elements { .. } => 1,
            ResolvedScatter::Update { axis } => data[axis + 1..].iter().product(),
        }
    }

    /// The data dimension indexed by the index at `position` of the indices tensor:
    /// `position[-1]` for ScatterND, `axis` otherwise.
    pub fn indexed_data_dim(&self, position: &[usize]) -> usize {
        match self.op {
            ResolvedScatter::Nd { .. } => position[position.len() - 1],
            ResolvedScatter::Elements { axis } | ResolvedScatter::Update { axis } => axis,
        }
    }
}

const ND_RULE: &str = "indices.shape[:-1] + data.shape[k:] with k = indices.shape[-1]";
const ELEMENTS_RULE: &str = "indices.shape";
const UPDATE_RULE: &str = "data.shape[:axis] + indices.shape + data.shape[axis+1:]";

impl ScatterSignature {
    /// Checks the signature against its op's and flavor's rules.
    ///
    /// # Errors
    /// A typed [`Error`] naming the first violated rule, in this order: the flavor does not
    /// define the op ([`Error::ScatterFlavorMismatch`]); the reduction is not the flavor's, or
    /// `mean` on `bool` ([`Error::UnsupportedReduction`]); `use_init_val = false` outside
    /// ScatterElementsUpdate-12 ([`Error::UnsupportedScatterAttribute`]); a tensor of more than
    /// [`MAX_RANK`](crate::ir::MAX_RANK) dims or a byte size that overflows; then the op's own rules: a rank too
    /// small, `axis` out of range, ScatterND's `indices.shape[-1]` outside `1..=rank(data)`,
    /// ScatterElements' ranks or dims, and last the updates shape
    /// ([`Error::UpdatesShapeMismatch`]).
    pub fn validate(&self) -> Result<ScatterLayout> {
        let op = self.op.name();
        let flavor = self.flavor;
        if !flavor.supports(op) {
            return Err(Error::ScatterFlavorMismatch { op, flavor });
        }
        if !flavor.reductions().contains(&self.reduction) {
            return Err(self.unsupported_reduction(flavor.reductions_text()));
        }
        if !self.reduction.defined_on(self.dtype) {
            return Err(self.unsupported_reduction("mean is not defined on bool"));
        }
        if !self.use_init_val && !flavor.has_use_init_val() {
            return Err(Error::UnsupportedScatterAttribute {
                op,
                flavor,
                attribute: "use_init_val",
                value: "false".into(),
                allowed: "only ScatterElementsUpdate-12 has it",
            });
        }
        let (data, indices, updates) = (&self.data_shape, &self.indices_shape, &self.updates_shape);
        checks::max_rank(op, "data", data.len())?;
        checks::max_rank(op, "indices", indices.len())?;
        checks::max_rank(op, "updates", updates.len())?;
        checks::check_size("data", data, self.dtype.size())?;
        checks::check_size("indices", indices, self.index_type.size())?;
        checks::check_size("updates", updates, self.dtype.size())?;
        checks::min_rank(op, "data", data.len(), 1)?;
        let resolved = match self.op {
            ScatterOp::Nd => {
                checks::min_rank(op, "indices", indices.len(), 1)?;
                let depth = checks::index_depth(op, indices[indices.len() - 1], data.len())?;
                let expected = [&indices[..indices.len() - 1], &data[depth..]].concat();
                // OpenVINO's ScatterNDUpdate: "If expected updates rank is 0D it can be a tensor
                // with single element".
                let openvino_scalar = expected.is_empty()
                    && updates.as_slice() == [1]
                    && matches!(
                        self.flavor,
                        ScatterFlavor::OpenvinoScatterNdUpdate3
                            | ScatterFlavor::OpenvinoScatterNdUpdate15
                    );
                if !openvino_scalar {
                    updates_shape(op, expected, updates, ND_RULE)?;
                }
                ResolvedScatter::Nd { index_depth: depth }
            }
            ScatterOp::Elements { axis } => {
                let axis = checks::normalise_axis(op, axis, data.len())?;
                checks::same_rank(op, data.len(), indices.len())?;
                checks::elements_dims(op, data, indices, axis, false)?;
                updates_shape(op, indices.clone(), updates, ELEMENTS_RULE)?;
                ResolvedScatter::Elements { axis }
            }
            ScatterOp::Update { axis } => {
                let axis = checks::normalise_axis(op, axis, data.len())?;
                let expected = [&data[..axis], &indices[..], &data[axis + 1..]].concat();
                updates_shape(op, expected, updates, UPDATE_RULE)?;
                ResolvedScatter::Update { axis }
            }
        };
        Ok(ScatterLayout {
            signature: self.clone(),
            op: resolved,
        })
    }

    fn unsupported_reduction(&self, allowed: &'static str) -> Error {
        Error::UnsupportedReduction {
            op: self.op.name(),
            flavor: self.flavor,
            reduction: self.reduction,
            dtype: self.dtype,
            allowed,
        }
    }
}

/// The updates shape is `expected`.
fn updates_shape(
    op: OpName,
    expected: Vec<usize>,
    actual: &[usize],
    rule: &'static str,
) -> Result<()> {
    if expected != actual {
        return Err(Error::UpdatesShapeMismatch {
            op,
            expected,
            actual: actual.to_vec(),
            rule,
        });
    }
    Ok(())
}
