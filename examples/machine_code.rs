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
//!
//! `aot` (with the `aot` feature, on x86-64) compiles the same kernels into an object for this
//! machine (`gather_jit::aot::Target::host()`) and compares each one's machine code with the
//! JIT's for the same plan (the signature with `OutputMemory::Fresh`, compiled with
//! `Tuning::NO_BANDS`: an object's plans never stream nor band), then that plan's code with
//! the JIT's default plan. Code that calls nothing is identical; a call differs in form
//! (the JIT takes the callee's address from a `movabs` immediate, an object, compiled
//! position-independent, from the GOT), and slices over 512 bytes have other calls (the JIT's
//! prefetching copy helper, an object's `memcpy`):
//!
//! ```text
//! cargo run --profile checked --features aot --example machine_code -- aot
//! ```

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
        ["aot"] => aot::compare(),
        _ => Err("usage: machine_code dump DIR | compare BEFORE AFTER | aot".into()),
    }
}

/// The `aot` mode: an object's kernels against the JIT's.
#[cfg(all(feature = "aot", target_arch = "x86_64"))]
mod aot {
    use gather_jit::aot::{AotKernel, ObjectBuilder, Target};
    use gather_jit::{Kernel, OutputMemory, Tuning};

    use super::{kernels, same_but_for_addresses};

    /// How an object's kernel compares with the JIT's code for the same plan.
    enum Verdict {
        Identical,
        /// Equal bytes but in the object's relocated fields, at these offsets.
        ButForRelocations(Vec<usize>),
        /// The first differing offset, and why the code differs.
        Different(usize, String),
    }

    /// Prints one line per kernel (the performance cases first); `MC_DUMP=DIR` also writes
    /// each object kernel's code (`NAME.aot`) and the JIT's for its plan (`NAME.jit`) there.
    pub(super) fn compare() -> Result<(), Box<dyn std::error::Error>> {
        let cases = kernels();
        let mut object = ObjectBuilder::new(&Target::host()?)?;
        for (name, signature) in &cases {
            object.add(&symbol(name), signature)?;
        }
        let object = object.finish()?;
        let dump = std::env::var_os("MC_DUMP").map(std::path::PathBuf::from);
        println!(
            "{:32} {:>6} {:>6}  {:34} JIT's default plan",
            "kernel", "object", "JIT", "object vs JIT of the object's plan"
        );
        for ((name, signature), kernel) in cases.iter().zip(object.kernels()) {
            let fresh = signature.clone().with_output_memory(OutputMemory::Fresh);
            let same_plan = Kernel::compile_tuned(&fresh, Tuning::NO_BANDS)?;
            let default = Kernel::compile(signature)?;
            if let Some(dir) = &dump {
                std::fs::write(dir.join(format!("{name}.aot")), kernel.machine_code())?;
                std::fs::write(dir.join(format!("{name}.jit")), same_plan.machine_code())?;
            }
            let (verdict, why) = match verdict(kernel, &same_plan) {
                Verdict::Identical => ("identical".to_string(), None),
                Verdict::ButForRelocations(offsets) => (
                    format!("identical but for relocations at {offsets:x?}"),
                    None,
                ),
                Verdict::Different(at, why) => (format!("different from {at:#x}"), Some(why)),
            };
            println!(
                "{name:32} {:6} {:6}  {verdict:34} {}",
                kernel.machine_code().len(),
                same_plan.machine_code().len(),
                default_plan(&default, &same_plan)
            );
            if let Some(why) = why {
                println!("{:48}{why}", "");
            }
        }
        Ok(())
    }

    /// A kernel's name as a C identifier.
    fn symbol(name: &str) -> String {
        let name: String = (name.chars())
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        format!("k_{name}")
    }

    /// Compares `kernel`'s code with `jit`'s: they may differ only in the object's relocated
    /// fields (zeros until linked).
    fn verdict(kernel: &AotKernel, jit: &Kernel) -> Verdict {
        let (object, code) = (kernel.machine_code(), jit.machine_code());
        if object == code {
            return Verdict::Identical;
        }
        let relocated = |at: usize| {
            (kernel.relocations().iter())
                .any(|r| (r.offset..r.offset + field_bytes(&r.kind)).contains(&at))
        };
        let first = (0..object.len().min(code.len()))
            .find(|&at| object[at] != code[at])
            .unwrap_or(object.len().min(code.len()));
        if object.len() == code.len()
            && (0..object.len()).all(|at| object[at] == code[at] || relocated(at))
        {
            let offsets = kernel.relocations().iter().map(|r| r.offset).collect();
            return Verdict::ButForRelocations(offsets);
        }
        Verdict::Different(first, why(kernel, jit, first))
    }

    /// The size of a relocated field of x86-64 code.
    fn field_bytes(kind: &str) -> usize {
        if kind == "Abs8" { 8 } else { 4 }
    }

    /// Why `kernel`'s code differs from `jit`'s, first at `at`: the calls each makes.
    fn why(kernel: &AotKernel, jit: &Kernel, at: usize) -> String {
        let calls: Vec<String> = (kernel.relocations().iter())
            .map(|r| format!("{} ({} at {:#x})", r.symbol, r.kind, r.offset))
            .collect();
        let object_calls = format!("object calls {}", calls.join(", "));
        let plan = jit.plan();
        // `prefetches_next_slice` of the lowering: slices over its inline limit, not streamed.
        if !plan.lookup.streaming && plan.lookup.slice_bytes > 512 {
            return format!(
                "{}-byte slices: the JIT calls its prefetching copy helper (dest, src, n, next: \
                 the next lookup's slice, read ahead), the object memcpy (dest, src, n); \
                 {object_calls}",
                plan.lookup.slice_bytes
            );
        }
        let (object, code) = (kernel.machine_code(), jit.machine_code());
        // A call from an object takes the callee's address from the GOT (`mov r64, [rip +
        // entry]`, the relocated field 3 bytes in); the JIT's from a `movabs` immediate.
        let got_load = (kernel.relocations().iter()).find(|r| {
            r.kind == "X86GOTPCRel4" && (r.offset.saturating_sub(3)..r.offset + 4).contains(&at)
        });
        if let Some(r) = got_load {
            let start = r.offset - 3;
            if code.len() >= start + 10
                && matches!(code[start], 0x48 | 0x49)
                && (0xB8..=0xBF).contains(&code[start + 1])
            {
                return format!(
                    "the JIT loads {}'s address with movabs (10 bytes), the object from the GOT \
                     (7 bytes); {object_calls}",
                    r.symbol
                );
            }
        }
        let bytes = |code: &[u8]| {
            (code[at.min(code.len())..(at + 8).min(code.len())].iter())
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        format!(
            "object {} JIT {}; {object_calls}",
            bytes(object),
            bytes(code)
        )
    }

    /// How the JIT's default plan differs from the object's, and whether its code does.
    fn default_plan(default: &Kernel, same_plan: &Kernel) -> String {
        let plan = default.plan();
        let mut how = Vec::new();
        if plan.band.is_some() {
            how.push("banded");
        }
        if plan.lookup.streaming {
            how.push("streams");
        }
        let code = if default.machine_code() == same_plan.machine_code() {
            "same code"
        } else if same_but_for_addresses(default.machine_code(), same_plan.machine_code()) {
            "same code but for helper addresses"
        } else {
            "other code"
        };
        if how.is_empty() {
            format!("same plan, {code}")
        } else {
            format!("{}: {code}", how.join(", "))
        }
    }
}

#[cfg(not(all(feature = "aot", target_arch = "x86_64")))]
mod aot {
    pub(super) fn compare() -> Result<(), Box<dyn std::error::Error>> {
        Err("the aot mode needs the `aot` feature and an x86-64 host".into())
    }
}
