//! libFuzzer target: the JIT against the reference interpreter (see `src/lib.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    gather_jit_fuzz::check(bytes);
});
