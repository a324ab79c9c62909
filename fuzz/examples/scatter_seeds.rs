//! Writes the scatter seeds of the `differential` target into `corpus/differential/` (run from
//! `fuzz/`: `cargo run --example scatter_seeds`), each as `scatter-<name>`: every op under
//! every flavor and reduction, hostile shapes and indices, validation errors, wrong buffers
//! and types, long slices (see `scatter::seeds` in `src/scatter.rs`). `--print` prints each
//! seed's case.

use std::path::Path;

fn main() {
    let print = std::env::args().any(|a| a == "--print");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/differential");
    std::fs::create_dir_all(&dir).expect("corpus/differential");
    for (name, bytes) in gather_jit_fuzz::scatter::seeds() {
        if print {
            let case = gather_jit_fuzz::scatter::decode(&bytes);
            println!("{name}: {} ({})", case.signature, case.kind());
        }
        let path = dir.join(format!("scatter-{name}"));
        std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}
