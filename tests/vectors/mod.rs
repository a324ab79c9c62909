//! Loading the vendored conformance vectors (`tests/conformance/`), for the conformance tests of
//! the interpreter and the JIT and for the cross test (`tests/cross/`), which includes this
//! module.

pub mod gathers;
pub mod quantized;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The `.json` files under `tests/conformance/DIR`, sorted, leaving out the directories named
/// in `skip` (other formats with runners of their own).
pub fn json_files(dir: &str, skip: &[&str]) -> Vec<PathBuf> {
    fn walk(dir: &Path, skip: &[&str], out: &mut Vec<PathBuf>) {
        let entries =
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                if !path
                    .file_name()
                    .is_some_and(|name| skip.iter().any(|skip| name == *skip))
                {
                    walk(&path, skip, out);
                }
            } else if path.extension().is_some_and(|e| e == "json") {
                out.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance")
        .join(dir);
    let mut files = Vec::new();
    walk(&root, skip, &mut files);
    files.sort();
    files
}

/// A case file's JSON and its name (`suite/name`).
pub fn read_case(path: &Path) -> (String, Value) {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let case: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: invalid JSON: {e}", path.display()));
    let name = format!(
        "{}/{}",
        case["suite"].as_str().unwrap_or("?"),
        case["name"].as_str().unwrap_or("?")
    );
    (name, case)
}
