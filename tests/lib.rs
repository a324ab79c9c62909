//! The single integration-test binary: one module per concern.

#[cfg(feature = "aot")]
mod aot;
mod cache_hostile;
mod conformance;
mod errors;
mod fuzz_replay;
mod golden;
mod hostile;
mod interp_props;
mod jit;
mod jit_props;
mod quantized;
mod reliability;
mod scatter;
mod scatter_conformance;
mod scatter_fuzz_seeds;
mod scatter_jit;
mod scatter_props;
mod scatter_review;
mod seeds;
mod soundness;
mod util;
mod vectors;
