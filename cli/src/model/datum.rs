//! How `gather-jit model` names tract's tensors in its messages and reads their values.

use tract_onnx::prelude::*;

/// A short name of a datum type: `f32`, `i64`, `bool`, `string`.
pub(super) fn type_name(dt: DatumType) -> String {
    format!("{dt:?}").to_lowercase()
}

/// `type [d0, d1]`, as the messages describe a tensor.
pub(super) fn describe(tensor: &Tensor) -> String {
    format!("{} {:?}", type_name(tensor.datum_type()), tensor.shape())
}

/// The elements of `tensor`, of type `T`: the one place where this command's
/// modules read a tensor's values, so that a change in tract's accessors is one change.
pub(super) fn values<T: Datum>(tensor: &Tensor) -> TractResult<&[T]> {
    tensor.try_as_plain_ram()?.as_slice::<T>()
}
