//! Small helpers shared by the test modules: typed values to native-endian bytes and back.

use gather_jit::IndexType;

/// Native-endian bytes of `indices` stored as `index_type`.
///
/// # Panics
/// If a value does not fit `index_type`.
pub fn index_bytes(index_type: IndexType, indices: &[i64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(indices.len() * index_type.size());
    for &i in indices {
        assert!(
            index_type.try_encode(i.into(), &mut out),
            "index {i} does not fit {index_type}"
        );
    }
    out
}

/// Native-endian bytes of `i32` values.
pub fn i32_bytes(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

/// Native-endian bytes of `f32` values.
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

/// Decodes native-endian `i32` values.
pub fn f32_values(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

pub fn i32_values(bytes: &[u8]) -> Vec<i32> {
    assert_eq!(bytes.len() % 4, 0, "not a whole number of i32");
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_ne_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

/// A command running this test binary again (for tests that need a child process): directly,
/// or under the emulator named by `GATHER_JIT_TEST_RUNNER` (e.g. `qemu-aarch64 -L
/// /usr/aarch64-linux-gnu`), which a cross-built test binary needs to start its child.
pub fn this_test_binary() -> std::process::Command {
    let exe = std::env::current_exe().expect("test binary");
    let runner = std::env::var("GATHER_JIT_TEST_RUNNER").unwrap_or_default();
    let mut words = runner.split_whitespace();
    match words.next() {
        Some(emulator) => {
            let mut command = std::process::Command::new(emulator);
            command.args(words).arg(exe);
            command
        }
        None => std::process::Command::new(exe),
    }
}
