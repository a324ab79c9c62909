//! File helpers of the `model` tests that write inputs into temporary directories.

use std::fs;
use std::path::{Path, PathBuf};

/// `path` as text (the tests' temporary paths are UTF-8).
pub fn utf8(path: &Path) -> &str {
    path.to_str().expect("a utf-8 path")
}

/// Writes `bytes` as `name` in `dir`; returns its path.
pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, bytes).expect("written");
    path
}
