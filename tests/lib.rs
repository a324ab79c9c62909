//! The single integration-test binary: one module per concern.

mod conformance;
mod seeds;
mod util;
