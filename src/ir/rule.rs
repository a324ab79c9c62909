//! The output-shape rule of Gather, GatherElements and GatherND, written once over any dim type.
//!
//! [`output_shape`] (or [`ShapeRule`], in two steps) normalises an op's attributes against its
//! inputs' ranks, checks them under the flavor's rules and composes the output shape from the
//! inputs' dims. It is generic over [`Dim`], so that concrete shapes (`usize`: validation,
//! candle, the CLI) and symbolic ones (tract's `TDim` facts, through an adapter in
//! gather-jit-tract) go through the same function, as tract's own
//! `GatherNd::compute_shape<D: DimLike>` does for its op. The checks themselves are in
//! `checks.rs`; the byte-size and rank-limit checks of a concrete signature stay in
//! [`Signature::validate`](crate::Signature::validate), which calls this rule.

use std::borrow::Cow;
use std::fmt;

use super::Op;
use super::checks;
use crate::error::{Error, Result};
use crate::types::{Flavor, OpName};

/// A dim of a shape: a `usize`, or a symbolic dim that may or may not have a known value.
///
/// The shape rules need a dim's value only where the ONNX rule does (GatherND's index depth,
/// the checks between data's and indices' dims), and otherwise move dims from the inputs to
/// the output. gather-jit implements it for `usize`; a framework with symbolic dims implements
/// it for a newtype of its own (gather-jit-tract's for tract's `TDim`).
pub trait Dim: Clone + fmt::Debug {
    /// The dim's value, if it is known (always, for a `usize`).
    fn value(&self) -> Option<usize>;

    /// The product of two dims; `None` if their values are known and the product overflows,
    /// or if the type cannot express it.
    fn checked_mul_dim(&self, other: &Self) -> Option<Self>;

    /// The dim times `factor`; `None` if it overflows or the type cannot express it.
    fn checked_mul_value(&self, factor: usize) -> Option<Self>;

    /// The dim divided by `divisor`, `None` unless it is known to be a multiple of it.
    fn exact_div_value(&self, divisor: usize) -> Option<Self>;

    /// Every dim's value when all are known: the concrete shape that the checks between
    /// data's and indices' dims read (borrowed for `usize` dims, so that the concrete path
    /// does not allocate).
    fn values(dims: &[Self]) -> Option<Cow<'_, [usize]>> {
        dims.iter()
            .map(Dim::value)
            .collect::<Option<Vec<usize>>>()
            .map(Cow::Owned)
    }
}

impl Dim for usize {
    fn value(&self) -> Option<usize> {
        Some(*self)
    }

    fn checked_mul_dim(&self, other: &usize) -> Option<usize> {
        usize::checked_mul(*self, *other)
    }

    fn checked_mul_value(&self, factor: usize) -> Option<usize> {
        usize::checked_mul(*self, factor)
    }

    fn exact_div_value(&self, divisor: usize) -> Option<usize> {
        (divisor != 0 && self.is_multiple_of(divisor)).then(|| self / divisor)
    }

    fn values(dims: &[usize]) -> Option<Cow<'_, [usize]>> {
        Some(Cow::Borrowed(dims))
    }
}

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

/// The attributes as far as the ranks alone resolve them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Ranked {
    Gather { axis: usize, batch_dims: usize },
    GatherElements { axis: usize },
    GatherNd { batch_dims: usize },
}

/// An op's shape rule, its attributes checked and normalised against the inputs' ranks: what
/// can be said before any dim is known (an inference engine learns ranks first).
/// [`ShapeRule::apply`] finishes with the dims.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShapeRule {
    op: Op,
    flavor: Flavor,
    data_rank: usize,
    indices_rank: usize,
    ranked: Ranked,
}

impl ShapeRule {
    /// Checks `op` under `flavor` against data of rank `data_rank` and indices of rank
    /// `indices_rank`.
    ///
    /// # Errors
    /// The flavor does not define the op ([`Error::FlavorMismatch`]), a rank too small, `axis`
    /// or `batch_dims` out of range (or not allowed by the flavor), `batch_dims` past the
    /// axis, or GatherElements ranks that differ: the errors of
    /// [`Signature::validate`](crate::Signature::validate), in its order.
    pub fn new(op: Op, flavor: Flavor, data_rank: usize, indices_rank: usize) -> Result<ShapeRule> {
        checks::flavor_supports(op.name(), flavor)?;
        let ranked = match op {
            Op::Gather { axis, batch_dims } => {
                let name = OpName::Gather;
                checks::min_rank(name, "data", data_rank, 1)?;
                let axis = checks::normalise_axis(name, axis, data_rank)?;
                let batch_dims = checks::gather_batch_dims(flavor, batch_dims, indices_rank)?;
                checks::batch_dims_within_axis(name, batch_dims, axis)?;
                Ranked::Gather { axis, batch_dims }
            }
            Op::GatherElements { axis } => {
                let name = OpName::GatherElements;
                checks::min_rank(name, "data", data_rank, 1)?;
                checks::same_rank(name, data_rank, indices_rank)?;
                let axis = checks::normalise_axis(name, axis, data_rank)?;
                Ranked::GatherElements { axis }
            }
            Op::GatherNd { batch_dims } => {
                let name = OpName::GatherNd;
                checks::min_rank(name, "data", data_rank, 1)?;
                checks::min_rank(name, "indices", indices_rank, 1)?;
                let batch_dims =
                    checks::gather_nd_batch_dims(name, batch_dims, data_rank, indices_rank)?;
                Ranked::GatherNd { batch_dims }
            }
        };
        Ok(ShapeRule {
            op,
            flavor,
            data_rank,
            indices_rank,
            ranked,
        })
    }

    /// The op as given.
    pub fn op(&self) -> Op {
        self.op
    }

    /// The flavor whose rules apply.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The output's shape for data of dims `data` and indices of dims `indices`, with the op's
    /// normalised attributes. Dims of other ranks than this rule's are checked afresh.
    ///
    /// The checks between data's and indices' dims (equal batch dims, GatherElements' dims)
    /// run when both shapes are known; over symbolic dims they wait for the concrete
    /// signature's validation, at run time.
    ///
    /// # Errors
    /// Those of [`ShapeRule::new`] (for other ranks), then batch dims that differ, GatherND's
    /// index depth out of `1..=rank(data)-batch_dims` or not known
    /// ([`Error::SymbolicDim`]), GatherElements dims that data's do not allow, or (GatherND-5's
    /// flattened batch) a product that overflows.
    pub fn apply<D: Dim>(&self, data: &[D], indices: &[D]) -> Result<(ResolvedOp, Vec<D>)> {
        if data.len() != self.data_rank || indices.len() != self.indices_rank {
            return ShapeRule::new(self.op, self.flavor, data.len(), indices.len())?
                .apply(data, indices);
        }
        let known = D::values(data).zip(D::values(indices));
        match self.ranked {
            Ranked::Gather { axis, batch_dims } => {
                if let Some((data, indices)) = &known {
                    checks::batch_dims_match(OpName::Gather, data, indices, batch_dims)?;
                }
                Ok((
                    ResolvedOp::Gather { axis, batch_dims },
                    gather_shape(data, &indices[batch_dims..], axis),
                ))
            }
            Ranked::GatherElements { axis } => {
                if let Some((data, indices)) = &known {
                    let must_equal = self.flavor == Flavor::OpenvinoGatherElements6;
                    checks::elements_dims(OpName::GatherElements, data, indices, axis, must_equal)?;
                }
                Ok((ResolvedOp::GatherElements { axis }, indices.to_vec()))
            }
            Ranked::GatherNd { batch_dims: b } => {
                let op = OpName::GatherNd;
                if let Some((data, indices)) = &known {
                    checks::batch_dims_match(op, data, indices, b)?;
                }
                // Ranks of at least 1 (checked by `new`).
                let Some((last, tuples)) = indices.split_last() else {
                    return Err(Error::RankTooSmall {
                        op,
                        input: "indices",
                        rank: 0,
                        min: 1,
                    });
                };
                let depth = last.value().ok_or(Error::SymbolicDim {
                    op,
                    what: "the index depth (the indices' last dim)",
                })?;
                let depth = checks::index_depth(op, depth, data.len() - b)?;
                let slice = &data[b + depth..];
                let mut output = Vec::with_capacity(tuples.len() + slice.len());
                if self.flavor == Flavor::OpenvinoGatherNd5 && b > 0 {
                    // GatherND-5 flattens the batch dims into one (for concrete shapes, a
                    // sub-product of the indices' checked size).
                    let batch = indices[1..b]
                        .iter()
                        .try_fold(indices[0].clone(), |product, dim| {
                            product.checked_mul_dim(dim)
                        })
                        .ok_or_else(|| checks::size_overflow("indices", D::values(indices)))?;
                    output.push(batch);
                    output.extend_from_slice(&tuples[b..]);
                } else {
                    output.extend_from_slice(tuples);
                }
                output.extend_from_slice(slice);
                Ok((
                    ResolvedOp::GatherNd {
                        batch_dims: b,
                        index_depth: depth,
                    },
                    output,
                ))
            }
        }
    }
}

/// The output shape of `op` under `flavor` on data of dims `data` and indices of dims
/// `indices`, with the op's normalised attributes: ONNX's (and the flavor's) rule,
///
/// - Gather: `data[:axis] + indices[batch_dims:] + data[axis+1:]`;
/// - GatherElements: `indices`;
/// - GatherND: `indices[:-1] + data[batch_dims + indices[-1]:]` (OpenVINO GatherND-5: the
///   batch dims flattened into one).
///
/// ```
/// use gather_jit::ir::{Op, Flavor, ResolvedOp, output_shape};
///
/// let op = Op::GatherNd { batch_dims: 1 };
/// let (resolved, shape) = output_shape(op, Flavor::Onnx, &[2usize, 3, 4], &[2, 5, 1])?;
/// assert_eq!(shape, [2, 5, 4]);
/// assert_eq!(resolved, ResolvedOp::GatherNd { batch_dims: 1, index_depth: 1 });
/// # Ok::<(), gather_jit::Error>(())
/// ```
///
/// # Errors
/// Those of [`ShapeRule::new`] and [`ShapeRule::apply`].
pub fn output_shape<D: Dim>(
    op: Op,
    flavor: Flavor,
    data: &[D],
    indices: &[D],
) -> Result<(ResolvedOp, Vec<D>)> {
    ShapeRule::new(op, flavor, data.len(), indices.len())?.apply(data, indices)
}

/// `data[:axis] + indices + data[axis+1:]`: Gather's composition (its `indices` already past
/// the batch dims), which the quantized gathers share. `axis < data.len()` (checked by the
/// callers).
pub(crate) fn gather_shape<D: Dim>(data: &[D], indices: &[D], axis: usize) -> Vec<D> {
    let mut output = Vec::with_capacity((data.len() + indices.len()).saturating_sub(1));
    output.extend_from_slice(&data[..axis]);
    output.extend_from_slice(indices);
    output.extend_from_slice(&data[axis + 1..]);
    output
}

// Expected shapes are written by hand from the ONNX operator docs (Gather-13, GatherElements-13,
// GatherND-13 and its examples) and OpenVINO's (Gather-8, GatherND-5), not computed.
#[cfg(test)]
mod tests {
    use super::*;

    /// A second dim type: a known value or a named symbol, as tract's `TDim` facts are.
    #[derive(Clone, Debug, PartialEq, Eq)]
    enum Sym {
        Known(usize),
        Named(String),
    }

    fn n(name: &str) -> Sym {
        Sym::Named(name.to_string())
    }

    fn k(value: usize) -> Sym {
        Sym::Known(value)
    }

    impl Dim for Sym {
        fn value(&self) -> Option<usize> {
            match self {
                Sym::Known(v) => Some(*v),
                Sym::Named(_) => None,
            }
        }

        fn checked_mul_dim(&self, other: &Sym) -> Option<Sym> {
            match (self, other) {
                (Sym::Known(a), Sym::Known(b)) => a.checked_mul(*b).map(Sym::Known),
                _ => Some(Sym::Named(format!("{self:?}*{other:?}"))),
            }
        }

        fn checked_mul_value(&self, factor: usize) -> Option<Sym> {
            self.checked_mul_dim(&Sym::Known(factor))
        }

        fn exact_div_value(&self, divisor: usize) -> Option<Sym> {
            self.value()?.exact_div_value(divisor).map(Sym::Known)
        }
    }

    fn shape(op: Op, flavor: Flavor, data: &[usize], indices: &[usize]) -> Vec<usize> {
        output_shape(op, flavor, data, indices).expect("valid").1
    }

    #[test]
    fn gather_inserts_the_indices_shape_at_the_axis() {
        let gather = |axis, batch_dims| Op::Gather { axis, batch_dims };
        let onnx = Flavor::Onnx;
        assert_eq!(shape(gather(0, 0), onnx, &[3, 2], &[2, 2]), [2, 2, 2]);
        assert_eq!(shape(gather(1, 0), onnx, &[3, 3], &[1, 2]), [3, 1, 2]);
        assert_eq!(shape(gather(-1, 0), onnx, &[2, 3, 4], &[5]), [2, 3, 5]);
        // Scalar indices remove the axis.
        assert_eq!(shape(gather(1, 0), onnx, &[2, 3, 4], &[]), [2, 4]);
        // OpenVINO Gather-8: data[:axis] + indices[batch_dims:] + data[axis+1:].
        let gather8 = Flavor::OpenvinoGather8;
        assert_eq!(shape(gather(2, 1), gather8, &[2, 3, 4], &[2, 5]), [2, 3, 5]);
        assert_eq!(
            shape(gather(2, -1), gather8, &[2, 3, 4], &[2, 5]),
            [2, 3, 5]
        );
        assert_eq!(
            shape(gather(1, 1), gather8, &[2, 3, 4], &[2, 5, 6]),
            [2, 5, 6, 4]
        );
    }

    #[test]
    fn gather_elements_has_the_indices_shape() {
        let op = Op::GatherElements { axis: 1 };
        assert_eq!(shape(op, Flavor::Onnx, &[2, 2], &[2, 2]), [2, 2]);
        let op = Op::GatherElements { axis: 0 };
        assert_eq!(shape(op, Flavor::Onnx, &[3, 3], &[2, 3]), [2, 3]);
    }

    #[test]
    fn gather_nd_follows_the_onnx_examples() {
        let nd = |batch_dims| Op::GatherNd { batch_dims };
        let onnx = Flavor::Onnx;
        assert_eq!(shape(nd(0), onnx, &[2, 2], &[2, 2]), [2]);
        assert_eq!(shape(nd(0), onnx, &[2, 2], &[2, 1]), [2, 2]);
        assert_eq!(shape(nd(0), onnx, &[2, 2, 2], &[2, 2]), [2, 2]);
        assert_eq!(shape(nd(0), onnx, &[2, 2, 2], &[2, 1, 2]), [2, 1, 2]);
        assert_eq!(shape(nd(1), onnx, &[2, 2, 2], &[2, 1]), [2, 2]);
        // GatherND-8 keeps the batch dims; GatherND-5 flattens them into one.
        let nd8 = Flavor::OpenvinoGatherNd8;
        let nd5 = Flavor::OpenvinoGatherNd5;
        assert_eq!(
            shape(nd(2), nd8, &[2, 3, 4, 5], &[2, 3, 7, 1]),
            [2, 3, 7, 5]
        );
        assert_eq!(shape(nd(2), nd5, &[2, 3, 4, 5], &[2, 3, 7, 1]), [6, 7, 5]);
        assert_eq!(shape(nd(1), nd5, &[2, 3, 4], &[2, 5, 1]), [2, 5, 4]);
    }

    #[test]
    fn the_errors_are_validations() {
        let e = output_shape(
            Op::GatherNd { batch_dims: 0 },
            Flavor::Onnx,
            &[2, 3],
            &[4, 3],
        );
        assert_eq!(
            e.expect_err("depth 3 of rank 2").to_string(),
            "GatherND: indices last dim 3 must be in 1..=2 (data rank minus batch_dims)"
        );
        let e = output_shape(
            Op::Gather {
                axis: 2,
                batch_dims: 0,
            },
            Flavor::Onnx,
            &[2, 3],
            &[1],
        );
        assert_eq!(
            e.expect_err("axis 2 of rank 2").to_string(),
            "Gather: axis 2 is out of range for data of rank 2 (allowed -2..=1)"
        );
        let op = Op::GatherNd { batch_dims: 1 };
        let e = output_shape(op, Flavor::Onnx, &[2, 3], &[3, 1]).expect_err("2 != 3");
        assert_eq!(e.category(), "batch dims mismatch");
        let op = Op::GatherNd { batch_dims: 0 };
        let e = output_shape(op, Flavor::OpenvinoGather8, &[2], &[1]).expect_err("no ND");
        assert_eq!(e.category(), "flavor mismatch");
    }

    #[test]
    fn symbolic_dims_move_as_the_concrete_ones_do() {
        let gather = Op::Gather {
            axis: 0,
            batch_dims: 0,
        };
        let (_, out) =
            output_shape(gather, Flavor::Onnx, &[n("V"), k(64)], &[n("B"), n("S")]).expect("valid");
        assert_eq!(out, [n("B"), n("S"), k(64)]);
        let nd = Op::GatherNd { batch_dims: 1 };
        let (resolved, out) = output_shape(
            nd,
            Flavor::Onnx,
            &[n("N"), k(3), k(4)],
            &[n("N"), n("T"), k(1)],
        )
        .expect("valid");
        assert_eq!(out, [n("N"), n("T"), k(4)]);
        assert_eq!(
            resolved,
            ResolvedOp::GatherNd {
                batch_dims: 1,
                index_depth: 1
            }
        );
        let (_, out) = output_shape(
            nd,
            Flavor::OpenvinoGatherNd5,
            &[n("N"), k(3), k(4)],
            &[n("N"), n("T"), k(2)],
        )
        .expect("valid");
        assert_eq!(out, [n("N"), n("T")]);
        let elements = Op::GatherElements { axis: -1 };
        let (_, out) =
            output_shape(elements, Flavor::Onnx, &[n("B"), k(9)], &[n("B"), k(2)]).expect("valid");
        assert_eq!(out, [n("B"), k(2)]);
    }

    #[test]
    fn symbolic_dims_are_checked_where_their_values_are_needed() {
        let nd = Op::GatherNd { batch_dims: 0 };
        let e = output_shape(nd, Flavor::Onnx, &[k(2), k(3)], &[n("T"), n("D")])
            .expect_err("the depth decides the rank");
        assert_eq!(e.category(), "symbolic dim");
        let e =
            output_shape(nd, Flavor::Onnx, &[k(2), k(3)], &[n("T"), k(0)]).expect_err("depth 0");
        assert_eq!(e.category(), "indices last dim too large");
        let e = output_shape(nd, Flavor::Onnx, &[n("A")], &[]).expect_err("rank 0");
        assert_eq!(e.category(), "rank too small");
        // Batch dims of unknown value wait for the concrete signature.
        let nd = Op::GatherNd { batch_dims: 1 };
        assert!(output_shape(nd, Flavor::Onnx, &[n("A"), k(3)], &[n("B"), k(1)]).is_ok());
    }

    #[test]
    fn a_rule_checks_dims_of_other_ranks_afresh() {
        let op = Op::GatherNd { batch_dims: 1 };
        let rule = ShapeRule::new(op, Flavor::Onnx, 3, 2).expect("valid ranks");
        assert_eq!(
            rule.apply(&[2usize, 3, 4], &[2, 1]).expect("valid").1,
            [2, 4]
        );
        let e = rule
            .apply(&[2usize], &[2, 1])
            .expect_err("batch_dims 1 of rank 1");
        assert_eq!(e.category(), "batch dims out of range");
    }
}
