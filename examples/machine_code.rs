//! Dumps, or compares, the machine code of a fixed set of kernels: the performance cases
//! S1-S9, the model shapes and 24 index-policy examples. A restructuring that should not
//! change code generation shows its claim with it:
//!
//! ```text
//! git stash; cargo run --example machine_code -- dump /tmp/before; git stash pop
//! cargo run --example machine_code -- dump /tmp/after
//! cargo run --example machine_code -- compare /tmp/before /tmp/after
//! ```
//!
//! `compare` allows differences only inside the 8-byte immediates of `movabs` instructions
//! (REX.W `B8+r`), which is where a kernel holds the address of a Rust helper it calls: those
//! move between builds.

use std::path::Path;

use gather_jit::{IndexPolicy, IndexType, Kernel, NegativeIndices, OutOfRange, Signature};
use gather_jit_workloads::{model_cases, performance_cases};

fn kernels() -> Vec<(String, Signature)> {
    let mut all: Vec<(String, Signature)> = performance_cases()
        .into_iter()
        .chain(model_cases())
        .map(|w| (w.name.to_string(), w.signature))
        .collect();
    let ops = [
        ("gather", Signature::gather(&[4, 5, 3], &[2, 3], 1, 0)),
        ("elements", Signature::gather_elements(&[4, 3], &[2, 3], 0)),
        ("nd", Signature::gather_nd(&[4, 5, 3], &[2, 2], 0)),
    ];
    let policies = [
        ("wrap-error", NegativeIndices::Wrap, OutOfRange::Error),
        ("wrap-zero", NegativeIndices::Wrap, OutOfRange::Zero),
        ("wrap-clamp", NegativeIndices::Wrap, OutOfRange::Clamp),
        ("invalid-error", NegativeIndices::Invalid, OutOfRange::Error),
    ];
    for (op, signature) in &ops {
        for (policy, negative, out_of_range) in policies {
            for index_type in [IndexType::I64, IndexType::U16] {
                let signature =
                    signature
                        .clone()
                        .with_index_type(index_type)
                        .with_policy(IndexPolicy {
                            negative,
                            out_of_range,
                        });
                all.push((format!("{op}-{policy}-{index_type:?}"), signature));
            }
        }
    }
    all
}

fn dump(dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    for (name, signature) in kernels() {
        let kernel = Kernel::compile(&signature)?;
        std::fs::write(dir.join(format!("{name}.bin")), kernel.machine_code())?;
    }
    Ok(())
}

/// Whether `a` and `b` differ only inside `movabs` immediates (the opcode bytes equal).
fn same_but_for_addresses(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] == b[i] {
            i += 1;
            continue;
        }
        // The first differing byte must lie in the 8 bytes after some `REX.W B8+r` pair.
        let movabs = (i.saturating_sub(9)..i.saturating_sub(1))
            .rev()
            .find(|&at| {
                matches!(a[at], 0x48 | 0x49) && (0xB8..=0xBF).contains(&a[at + 1]) && a[at] == b[at]
            });
        match movabs {
            Some(at) => i = at + 10,
            None => return false,
        }
    }
    true
}

fn compare(before: &Path, after: &Path) -> Result<bool, Box<dyn std::error::Error>> {
    let mut all_same = true;
    for (name, _) in kernels() {
        let file = format!("{name}.bin");
        let (a, b) = (
            std::fs::read(before.join(&file))?,
            std::fs::read(after.join(&file))?,
        );
        let verdict = if a == b {
            "identical"
        } else if same_but_for_addresses(&a, &b) {
            "identical but for helper addresses"
        } else {
            all_same = false;
            "DIFFERENT"
        };
        println!("{name:32} {:6} bytes  {verdict}", a.len());
    }
    Ok(all_same)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["dump", dir] => dump(Path::new(dir)),
        ["compare", before, after] => {
            if compare(Path::new(before), Path::new(after))? {
                Ok(())
            } else {
                Err("machine code differs".into())
            }
        }
        _ => Err("usage: machine_code dump DIR | compare BEFORE AFTER".into()),
    }
}
