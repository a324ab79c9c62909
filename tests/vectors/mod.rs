//! Loading the vendored conformance vectors (`tests/conformance/`), for the conformance tests of
//! the interpreter and the JIT and for the cross test (`tests/cross/`), which includes this
//! module.

pub mod gathers;
pub mod quantized;
