//! gather-jit's errors as candle's: every failure reaches the caller as a
//! [`candle_core::Error`], never as a panic.

/// A gather-jit error (a bad index with its position and value, a shape the op rejects, ...)
/// as a candle error carrying its message. Without a backtrace (`Error::wrap` takes one under
/// `RUST_BACKTRACE`): a bad index is the caller's data, and its message says where it is.
pub(crate) fn from_jit(error: gather_jit::Error) -> candle_core::Error {
    candle_core::Error::Wrapped(Box::new(error))
}

/// A candle error with `message`.
pub(crate) fn msg(message: String) -> candle_core::Error {
    candle_core::Error::Msg(message)
}

/// The error for a buffer of `bytes` bytes that could not be allocated (gather-jit's
/// wording; its errors are made by gather-jit only).
pub(crate) fn allocation(what: &str, bytes: usize) -> candle_core::Error {
    msg(format!("could not allocate {bytes} bytes for {what}"))
}

/// The error for a bad index found by this crate's own check, in gather-jit's wording.
pub(crate) fn index_out_of_range(
    op: gather_jit::ir::OpName,
    position: &[usize],
    value: i128,
    data_dim: usize,
    dim_size: usize,
) -> candle_core::Error {
    msg(format!(
        "{op}: index {value} at position {position:?} of indices is out of range for data dim \
         {data_dim} of size {dim_size}"
    ))
}

/// The error for a buffer of `actual` bytes where `expected` are needed, in gather-jit's
/// wording.
pub(crate) fn buffer_mismatch(what: &str, expected: usize, actual: usize) -> candle_core::Error {
    msg(format!(
        "{what}: expected {expected} bytes, got {actual} bytes"
    ))
}
