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

/// The error for a buffer of `bytes` bytes that could not be allocated.
pub(crate) fn allocation(what: &'static str, bytes: usize) -> candle_core::Error {
    from_jit(gather_jit::Error::Allocation { what, bytes })
}
