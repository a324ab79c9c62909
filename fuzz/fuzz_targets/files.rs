//! libFuzzer target: the CLI's readers of `.npy` files and `.npz` archives (`cli/src/npy.rs`,
//! `cli/src/npz.rs`, under the bounds of `cli/src/files.rs`), on hostile bytes: the same
//! bytes as a regular `.npy` file and as an `.npz` archive whose every member is read.
//!
//! The oracle: no panic; no allocation past what the bytes can justify (run with
//! `-malloc_limit_mb`, which turns any larger allocation into a crash: an `.npy` whose header
//! announces more than the file holds is refused from its length, and an archive member is
//! reserved at most 16 MiB ahead of what it inflates to); and every array read holds exactly
//! the bytes its shape and type need, bools 0 or 1.
#![no_main]
#![allow(dead_code, reason = "the CLI's modules hold more than this target calls")]

#[path = "../../cli/src/buffer.rs"]
mod buffer;
#[path = "../../cli/src/failure.rs"]
mod failure;
#[path = "../../cli/src/files.rs"]
mod files;
#[path = "../../cli/src/npy.rs"]
mod npy;
#[path = "../../cli/src/npz.rs"]
mod npz;

use std::io::Cursor;
use std::path::Path;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let length = npy::Length::Known(bytes.len() as u64);
    check(npy::read(&mut &bytes[..], length).ok());
    if let Ok(mut archive) = npz::Archive::new(Cursor::new(bytes), Path::new("fuzz.npz")) {
        for name in archive.names() {
            check(archive.read(&name).ok());
        }
    }
});

/// An array read must hold its shape's bytes, and bools must be 0 or 1.
fn check(array: Option<npy::Array>) {
    let Some(array) = array else { return };
    let elements: usize = array.shape.iter().product();
    assert_eq!(array.bytes.len(), elements * array.element.size);
    if array.element.kind == b'b' {
        assert!(array.bytes.iter().all(|&b| b <= 1));
    }
}
