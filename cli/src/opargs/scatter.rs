//! The scatters' flags: the flavor, the reduction, `use_init_val` and the updates shape, and
//! how they become a [`ScatterSignature`].

use gather_jit::scatter::{Reduction, ScatterFlavor, ScatterOp, ScatterSignature};
use gather_jit::{DType, IndexType, NegativeIndices};

use super::{Negative, OpArgs, OpKind};
use crate::failure::{Failure, Result};

impl OpArgs {
    /// The flavor of a scatter `kind`: `--flavor`, else onnx, but for scatter-update
    /// openvino-scatterupdate3, the one flavor that defines it.
    ///
    /// # Errors
    /// `--flavor` names a gather flavor only, or a scatter flavor that does not define `kind`
    /// (the message names those that do).
    pub fn scatter_flavor(&self, kind: OpKind) -> Result<ScatterFlavor> {
        let op = scatter_op(kind, 0)?.name();
        let defining: Vec<&str> = ScatterFlavor::ALL
            .into_iter()
            .filter(|f| f.supports(op))
            .map(ScatterFlavor::name)
            .collect();
        let flavor = match self.flavor {
            None if kind == OpKind::ScatterUpdate => ScatterFlavor::OpenvinoScatterUpdate3,
            None => ScatterFlavor::Onnx,
            Some(name) => name.scatter().ok_or_else(|| {
                Failure::usage(format!(
                    "--flavor {name} is a gather flavor; --op {} takes {}",
                    kind.flag(),
                    defining.join(", ")
                ))
            })?,
        };
        if !flavor.supports(op) {
            return Err(Failure::usage(format!(
                "--flavor {flavor} does not define --op {} ({op}); the flavors that do: {}",
                kind.flag(),
                defining.join(", ")
            )));
        }
        Ok(flavor)
    }

    /// Whether a scatter-only flag was given (an error with the gathers).
    pub(super) fn scatter_flag(&self) -> Option<&'static str> {
        [
            ("reduction", self.reduction.is_some()),
            ("use-init-val", self.use_init_val.is_some()),
        ]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
    }

    /// The scatter signature on these shapes and types (not yet validated): the updates shape
    /// as given, else the one the op's rule derives from data's and indices'.
    ///
    /// # Errors
    /// A flag the scatters do not take (`--batch-dims`, `--oob`, the quantized ops'), `--axis`
    /// with scatter-nd; a flavor that does not define the op.
    pub fn scatter_signature(
        &self,
        [data_shape, indices_shape]: [&[usize]; 2],
        updates_shape: Option<&[usize]>,
        dtype: DType,
        index_type: IndexType,
    ) -> Result<ScatterSignature> {
        let kind = self.kind()?;
        let reject = |flag: &str| {
            Failure::usage(format!(
                "--{flag} does not apply to --op {} (it has no such attribute)",
                kind.flag()
            ))
        };
        if let Some(flag) = self.quantized_flag() {
            return Err(reject(flag));
        }
        if self.batch_dims.is_some() {
            return Err(reject("batch-dims"));
        }
        if self.oob.is_some() {
            return Err(Failure::usage(format!(
                "--oob does not apply to --op {}: an out-of-range index is always an error \
                 for the scatters",
                kind.flag()
            )));
        }
        if kind == OpKind::ScatterNd && self.axis.is_some() {
            return Err(reject("axis"));
        }
        let op = scatter_op(kind, self.axis.unwrap_or(0))?;
        let flavor = self.scatter_flavor(kind)?;
        let updates_shape = match updates_shape {
            Some(shape) => shape.to_vec(),
            None => derived_updates_shape(op, data_shape, indices_shape),
        };
        let mut sig = ScatterSignature::new(op, data_shape, indices_shape, &updates_shape)
            .with_flavor(flavor)
            .with_reduction(self.reduction.unwrap_or(Reduction::None))
            .with_use_init_val(self.use_init_val.unwrap_or(true))
            .with_dtype(dtype)
            .with_index_type(index_type);
        if let Some(negative) = self.negative {
            sig = sig.with_negative(match negative {
                Negative::Wrap => NegativeIndices::Wrap,
                Negative::Invalid => NegativeIndices::Invalid,
            });
        }
        Ok(sig)
    }
}

/// The scatter op of `kind` with its axis.
///
/// # Errors
/// `kind` is not a scatter.
fn scatter_op(kind: OpKind, axis: i64) -> Result<ScatterOp> {
    match kind {
        OpKind::ScatterNd => Ok(ScatterOp::Nd),
        OpKind::ScatterElements => Ok(ScatterOp::Elements { axis }),
        OpKind::ScatterUpdate => Ok(ScatterOp::Update { axis }),
        other => Err(Failure::usage(format!(
            "--op {} is not a scatter",
            other.flag()
        ))),
    }
}

/// The updates shape `op`'s rule gives for these shapes; where the shapes break the rule's
/// preconditions (an axis or index depth out of range), something the library's validation
/// then reports on its own terms.
fn derived_updates_shape(op: ScatterOp, data: &[usize], indices: &[usize]) -> Vec<usize> {
    match op {
        ScatterOp::Nd => {
            let Some((&depth, outer)) = indices.split_last() else {
                return Vec::new();
            };
            let rest = data.get(depth..).unwrap_or(&[]);
            [outer, rest].concat()
        }
        ScatterOp::Elements { .. } => indices.to_vec(),
        ScatterOp::Update { axis } => {
            let rank = data.len() as i64;
            let axis = if axis < 0 { axis + rank } else { axis };
            match usize::try_from(axis) {
                Ok(axis) if axis < data.len() => {
                    [&data[..axis], indices, &data[axis + 1..]].concat()
                }
                _ => indices.to_vec(),
            }
        }
    }
}
