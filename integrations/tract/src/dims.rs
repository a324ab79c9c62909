//! gather-jit's shape rule on tract's dims: the adapters that implement `gather_jit::ir::Dim`
//! for symbolic `TDim`s (and for inference-time facts), and the errors they map to.

use gather_jit::ir::Dim;
use tract_onnx::tract_hir::internal::*;

/// A dim of one of a GatherND's inputs, for [`gather_nd_rules`]: the shape rule moves dims
/// from the inputs to the output, and the solver equates each of the output's dims with the
/// input dim it came from. Only the index depth's value is known.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InputDim {
    /// 0 for data, 1 for indices.
    pub(crate) input: usize,
    /// The dim of that input.
    pub(crate) dim: usize,
    /// The index depth's value.
    pub(crate) value: Option<usize>,
}

impl Dim for InputDim {
    fn value(&self) -> Option<usize> {
        self.value
    }

    // ONNX's GatherND multiplies no dims (only OpenVINO's GatherND-5 flattens its batch dims),
    // and an input dim cannot stand for a product.
    fn checked_mul_dim(&self, _: &InputDim) -> Option<InputDim> {
        None
    }

    fn checked_mul_value(&self, _: usize) -> Option<InputDim> {
        None
    }

    fn exact_div_value(&self, _: usize) -> Option<InputDim> {
        None
    }
}

/// A tract dim as gather-jit's shape rule takes it ([`gather_jit::ir::Dim`]): neither the
/// trait nor `TDim` is this crate's, hence the newtype. Its dims are never negative (see
/// [`tract_dims`]).
#[derive(Clone, Debug)]
pub(crate) struct TractDim(pub(crate) TDim);

impl Dim for TractDim {
    fn value(&self) -> Option<usize> {
        self.0.to_i64().ok().and_then(|v| usize::try_from(v).ok())
    }

    fn checked_mul_dim(&self, other: &TractDim) -> Option<TractDim> {
        match (self.value(), other.value()) {
            (Some(a), Some(b)) => a.checked_mul(b).and_then(TractDim::known),
            _ => Some(TractDim(self.0.clone() * &other.0)),
        }
    }

    fn checked_mul_value(&self, factor: usize) -> Option<TractDim> {
        self.checked_mul_dim(&TractDim::known(factor)?)
    }

    fn exact_div_value(&self, divisor: usize) -> Option<TractDim> {
        self.value()?
            .exact_div_value(divisor)
            .and_then(TractDim::known)
    }
}

impl TractDim {
    /// A known value, if tract's `i64` dims hold it.
    fn known(value: usize) -> Option<TractDim> {
        i64::try_from(value).ok().map(|v| TractDim(TDim::Val(v)))
    }
}

/// `dims` for gather-jit's shape rule; an error if one is negative (see [`known_dim`]).
pub(crate) fn tract_dims(op: &str, dims: &[TDim]) -> TractResult<Vec<TractDim>> {
    dims.iter()
        .map(|dim| {
            known_dim(dim).with_context(|| op.to_string())?;
            Ok(TractDim(dim.clone()))
        })
        .collect()
}

/// gather-jit's shape-rule error as tract's. The index depth keeps the words this crate's
/// rules have always used for it ("index depth"), which the errors of models that fail to
/// load name.
pub(crate) fn rule_error(error: gather_jit::Error) -> TractError {
    match error {
        gather_jit::Error::IndexDepthOutOfRange { op, depth, max, .. } => format_err!(
            "{op}: index depth {depth} (the indices' last dim) must be in 1..={max} (data rank minus batch_dims)"
        ),
        other => other.into(),
    }
}

/// A dim's value as a `usize`: `None` while symbolic, an error when negative. tract's facts
/// assert non-negative dims, but its own `to_usize` would cast a negative one to a huge one,
/// so this does not rely on that assertion.
pub(crate) fn known_dim(dim: &TDim) -> TractResult<Option<usize>> {
    match dim.to_i64() {
        Ok(value) => usize::try_from(value)
            .map(Some)
            .map_err(|_| format_err!("dim {value} is negative")),
        Err(_) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use gather_jit::ir::output_shape;
    use gather_jit::{Flavor, Op as GatherOp};

    use super::*;

    fn dims(scope: &SymbolScope, dims: &[&str]) -> Vec<TractDim> {
        dims.iter()
            .map(|d| match d.parse::<i64>() {
                Ok(n) => TractDim(TDim::Val(n)),
                Err(_) => TractDim(scope.sym(d).into()),
            })
            .collect()
    }

    fn shape(op: GatherOp, data: &[&str], indices: &[&str]) -> gather_jit::Result<String> {
        let scope = SymbolScope::default();
        let (_, out) = output_shape(
            op,
            Flavor::Onnx,
            &dims(&scope, data),
            &dims(&scope, indices),
        )?;
        let out: Vec<String> = out.iter().map(|d| d.0.to_string()).collect();
        Ok(out.join(","))
    }

    #[test]
    fn tdims_go_through_gather_jits_rule() {
        let gather = GatherOp::Gather {
            axis: 0,
            batch_dims: 0,
        };
        assert_eq!(shape(gather, &["V", "64"], &["B", "S"]).unwrap(), "B,S,64");
        let nd = GatherOp::GatherNd { batch_dims: 1 };
        assert_eq!(
            shape(nd, &["N", "3", "4"], &["N", "T", "1"]).unwrap(),
            "N,T,4"
        );
        let elements = GatherOp::GatherElements { axis: 1 };
        assert_eq!(shape(elements, &["N", "9"], &["N", "2"]).unwrap(), "N,2");
        let e = shape(nd, &["N", "3", "4"], &["N", "T", "D"]).unwrap_err();
        assert_eq!(e.category(), "symbolic dim");
    }

    #[test]
    fn tdim_arithmetic_is_checked_where_the_values_are_known() {
        let scope = SymbolScope::default();
        let [n, three] = [&scope.sym("N").into(), &TDim::Val(3)].map(|d| TractDim(d.clone()));
        assert_eq!(
            three.checked_mul_dim(&three).and_then(|d| d.value()),
            Some(9)
        );
        assert_eq!(
            n.checked_mul_value(3).map(|d| d.0.to_string()),
            Some("3*N".into())
        );
        assert!(n.exact_div_value(2).is_none());
        assert_eq!(
            TractDim(TDim::Val(36))
                .exact_div_value(18)
                .and_then(|d| d.value()),
            Some(2)
        );
        let huge = TractDim(TDim::Val(i64::MAX));
        assert!(huge.checked_mul_value(2).is_none());
        assert_eq!(TractDim(TDim::Val(-2)).value(), None);
    }
}
