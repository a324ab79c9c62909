//! The cross test: ahead-of-time kernels (`gather_jit::aot`) compiled for x86-64 (baseline
//! and this host's features), aarch64 and riscv64, linked with a C driver (`driver.c`) and
//! run natively or under qemu-user, against the reference interpreter byte for byte: every
//! output, every rejected index (status and position), guard bytes before and after every
//! buffer, and the inputs left as they were.
//!
//! ```sh
//! cargo test --profile checked --features aot --test cross
//! ```
//!
//! It needs a C compiler, the cross compilers and qemu-user (`machine::APT_GET`); without
//! them it fails naming the command that installs them, unless `GATHER_JIT_CROSS=skip`, which
//! skips out loud. `GATHER_JIT_CROSS_SEED` draws other random cases;
//! `GATHER_JIT_CROSS_VERBOSE=1` lists every refused kernel.
//!
//! The cases (`cases.rs`) are built once and shared by the four machines. Kernels the target
//! refuses are listed: on riscv64 Cranelift's backend may refuse what our lowerings emit,
//! elsewhere no refusal is allowed.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::OnceLock;
use std::time::Instant;

use gather_jit::aot::Target;

#[path = "../../fuzz/src/lib.rs"]
#[allow(
    dead_code,
    reason = "the fuzz target's checks are not used here, only its decoders"
)]
#[allow(
    unexpected_cfgs,
    reason = "`cfg(fuzzing)` (set by cargo-fuzz) gates the guard-page check, whose libc \
              dependency the tests do not have"
)]
mod fuzz;
#[path = "../vectors/mod.rs"]
#[allow(
    dead_code,
    reason = "what the conformance tests check of a vector that does not run is not used here"
)]
mod vectors;

mod cases;
mod harness;
mod machine;

use cases::{Case, Outcome};
use machine::{APT_GET, Machine};

/// Random cases drawn per run: gathers, then quantized gathers.
const RANDOM_GATHERS: usize = 6000;
const RANDOM_QUANTIZED: usize = 2000;

/// The seed of the random cases unless `GATHER_JIT_CROSS_SEED` names another.
const DEFAULT_SEED: u64 = 31;

fn seed() -> u64 {
    match std::env::var("GATHER_JIT_CROSS_SEED") {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("GATHER_JIT_CROSS_SEED={s} is not a number")),
        Err(_) => DEFAULT_SEED,
    }
}

/// The cases, built once for all machines.
fn cases() -> &'static [Case] {
    static CASES: OnceLock<Vec<Case>> = OnceLock::new();
    CASES.get_or_init(|| {
        let started = Instant::now();
        let (cases, sources) = cases::all(seed(), RANDOM_GATHERS, RANDOM_QUANTIZED);
        let sources: Vec<String> = (sources.iter())
            .map(|(name, count)| format!("{count} {name}"))
            .collect();
        let rejecting = (cases.iter())
            .filter(|c| matches!(c.outcome, Outcome::Rejected(_)))
            .count();
        say(&format!(
            "cross: {} cases ({}; seed {}), {rejecting} of them rejecting an index, built in \
             {:.1} s",
            cases.len(),
            sources.join(", "),
            seed(),
            started.elapsed().as_secs_f64()
        ));
        cases
    })
}

/// Writes to the test's stderr directly, so that it shows although the harness captures
/// what passing tests print.
fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// Runs every case on `machine` and fails on any disagreement; lists what the target refused.
fn check(machine: &Machine) {
    let missing = machine.missing_tools();
    if !missing.is_empty() {
        let message = format!(
            "cross test on {}: missing {} (install with `{APT_GET}`)",
            machine.name,
            missing.join(", ")
        );
        if std::env::var("GATHER_JIT_CROSS").is_ok_and(|v| v == "skip") {
            say(&format!(
                "\n*** SKIPPED (GATHER_JIT_CROSS=skip): {message} ***\n"
            ));
            return;
        }
        panic!("{message}, or set GATHER_JIT_CROSS=skip to skip it");
    }
    let cases = cases();
    let report = machine::run(machine, cases);
    let mut summary = format!(
        "cross {}: {} of {} cases ran (objects {:.1} s, link {:.1} s, run {:.1} s), {} refused, \
         {} failed, {} NaN elements differed in sign or payload only",
        machine.name,
        report.ran,
        cases.len(),
        report.compile.as_secs_f64(),
        report.link.as_secs_f64(),
        report.run.as_secs_f64(),
        report.refused.len(),
        report.failures.len(),
        report.nan_differences,
    );
    // Refusals grouped by reason (the signature taken out of it), each group with its count
    // by op and output type and a few of its cases (all with GATHER_JIT_CROSS_VERBOSE=1).
    let verbose = std::env::var_os("GATHER_JIT_CROSS_VERBOSE").is_some();
    let mut groups: BTreeMap<String, Vec<&Case>> = BTreeMap::new();
    let mut unexpected = 0;
    for (number, reason) in &report.refused {
        let case = &cases[*number];
        let allowed = machine.may_refuse;
        let reason = first_line(reason).replace(&case.kernel.to_string(), "<signature>");
        let key = match allowed {
            true => reason,
            false => format!("{reason} (NOT ALLOWED on {})", machine.name),
        };
        groups.entry(key).or_default().push(case);
        unexpected += usize::from(!allowed);
    }
    for (reason, group) in &groups {
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for case in group {
            *kinds.entry(case.kernel.kind()).or_default() += 1;
        }
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
        summary.push_str(&format!(
            "\n  refused {} ({}): {reason}",
            group.len(),
            kinds.join(", ")
        ));
        let shown = if verbose { group.len() } else { 3 };
        for case in group.iter().take(shown) {
            summary.push_str(&format!("\n    {} ({})", case.name, case.kernel));
        }
        if group.len() > shown {
            summary.push_str("\n    ... (GATHER_JIT_CROSS_VERBOSE=1 lists them all)");
        }
    }
    if !report.link_warnings.is_empty() {
        summary.push_str(&format!(
            "\n  the linker said: {}",
            report.link_warnings.trim()
        ));
    }
    for failure in report.failures.iter().take(40) {
        summary.push_str(&format!("\n  FAILED {failure}"));
    }
    say(&summary);
    assert!(
        report.failures.is_empty() && unexpected == 0,
        "{}: {} cases disagree with the interpreter, {} refused where no refusal is allowed \
         (listed above)",
        machine.name,
        report.failures.len(),
        unexpected
    );
    assert_eq!(
        report.ran + report.refused.len(),
        cases.len(),
        "every case ran or was refused"
    );
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

#[test]
fn x86_64() {
    check(&Machine {
        name: "x86_64",
        target: || Target::from_triple("x86_64-unknown-linux-gnu"),
        arch: "x86_64",
        cross_cc: "x86_64-linux-gnu-gcc",
        may_refuse: false,
        emulator_args: &[],
    });
}

#[test]
fn host_with_its_cpu_features() {
    check(&Machine {
        name: "host",
        target: Target::host,
        arch: std::env::consts::ARCH,
        cross_cc: "cc",
        may_refuse: false,
        emulator_args: &[],
    });
}

#[test]
fn aarch64() {
    check(&Machine {
        name: "aarch64",
        target: || Target::from_triple("aarch64-unknown-linux-gnu"),
        arch: "aarch64",
        cross_cc: "aarch64-linux-gnu-gcc",
        may_refuse: false,
        emulator_args: &[],
    });
}

#[test]
fn riscv64() {
    check(&Machine {
        name: "riscv64",
        target: || Target::from_triple("riscv64gc-unknown-linux-gnu"),
        arch: "riscv64",
        cross_cc: "riscv64-linux-gnu-gcc",
        may_refuse: true,
        emulator_args: &[],
    });
}

/// riscv64 with the vector extension (128-bit vector registers), which the emulator is told
/// to provide: every kernel compiles there.
#[test]
fn riscv64_with_vectors() {
    check(&Machine {
        name: "riscv64v",
        target: || Target::with_features("riscv64gc-unknown-linux-gnu", &["has_v", "has_zvl128b"]),
        arch: "riscv64",
        cross_cc: "riscv64-linux-gnu-gcc",
        may_refuse: false,
        emulator_args: &["-cpu", "rv64,v=true,vlen=128"],
    });
}
