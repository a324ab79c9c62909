//! The single integration-test binary: one module per concern.

mod conformance;
mod errors;
mod interp_props;
mod jit;
mod jit_props;
mod seeds;
mod util;
