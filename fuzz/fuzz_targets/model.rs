//! libFuzzer target: ONNX models (bytes, or structured cases) through the tract integration,
//! as `gather-jit model` runs them, against tract's own ops (see `src/model.rs`).
#![no_main]

#[path = "../src/model.rs"]
mod model;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    model::check(bytes);
});
