//! Running the cases on one machine: objects of a few hundred kernels each for its target, a
//! generated table of their entry points linked with the driver (`driver.c`), one inputs file,
//! one run (natively or under qemu-user), one outputs file compared case by case.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gather_jit::aot::{ObjectBuilder, Target};
use gather_jit::{DType, Error};

use crate::cases::{Case, Kernel, Outcome};

/// What the driver reports in an output record's flags (`FLAG_*` in `driver.c`).
pub const GUARD_BEFORE_OUTPUT: u64 = 1;
pub const GUARD_AFTER_OUTPUT: u64 = 2;
pub const INPUT_CHANGED: u64 = 4;
pub const SIZE_MISMATCH: u64 = 8;

/// What the driver fills the output with before a call (`SENTINEL` in `driver.c`).
pub const SENTINEL: u8 = 0xA5;

/// Kernels per object: many, so that objects are few, but each object stays small.
const KERNELS_PER_OBJECT: usize = 200;

/// How long one run of the driver may take before it is killed.
const RUN_LIMIT: Duration = Duration::from_secs(300);

/// The Debian packages of the tools, as one command.
pub const APT_GET: &str = "apt-get install qemu-user gcc-aarch64-linux-gnu \
                           libc6-dev-arm64-cross gcc-riscv64-linux-gnu libc6-dev-riscv64-cross";

/// A machine the objects run on.
pub struct Machine {
    /// Its name in messages.
    pub name: &'static str,
    /// The target its objects are compiled for.
    pub target: fn() -> gather_jit::Result<Target>,
    /// Its architecture's name, as `std::env::consts::ARCH` spells it.
    pub arch: &'static str,
    /// The C compiler that links for it from another architecture.
    pub cross_cc: &'static str,
    /// Whether Cranelift may refuse kernels for it (each refusal is listed, none fails).
    pub may_refuse: bool,
    /// Arguments the emulator takes before the program (e.g. the CPU it emulates).
    pub emulator_args: &'static [&'static str],
}

impl Machine {
    /// Whether it is this machine's architecture (its programs run natively).
    fn native(&self) -> bool {
        self.arch == std::env::consts::ARCH
    }

    /// The C compiler and, if the programs do not run natively, the emulator.
    fn tools(&self) -> (&'static str, Option<String>) {
        match self.native() {
            true => ("cc", None),
            false => (self.cross_cc, Some(format!("qemu-{}", self.arch))),
        }
    }

    /// The tools it needs that are not on the `PATH`.
    pub fn missing_tools(&self) -> Vec<String> {
        let (cc, emulator) = self.tools();
        std::iter::once(cc.to_string())
            .chain(emulator)
            .filter(|tool| !on_path(tool))
            .collect()
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// What one machine did with the cases.
#[derive(Default)]
pub struct Report {
    /// Cases whose kernel ran (every other one was refused).
    pub ran: usize,
    /// Cases whose kernel the target refused: (case number, error).
    pub refused: Vec<(usize, String)>,
    /// Every disagreement with the interpreter, one line each.
    pub failures: Vec<String>,
    /// Output elements of quantized gathers that differ from the interpreter's only as NaNs
    /// may across ISAs (see [`same_nan`]).
    pub nan_differences: usize,
    /// What the compiler and linker printed.
    pub link_warnings: String,
    /// Time spent compiling objects.
    pub compile: Duration,
    /// Time spent linking the driver.
    pub link: Duration,
    /// Time the driver ran.
    pub run: Duration,
}

/// A directory of its own under the target directory, removed when dropped.
pub struct WorkDir(pub PathBuf);

impl WorkDir {
    /// A new directory, its name starting with `cross-{name}`.
    pub fn new(name: &str) -> WorkDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("cross-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        WorkDir(dir)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A kernel that went into an object: its case and its buffers' sizes by the object.
struct Entry {
    case: usize,
    symbol: String,
    buffers: Vec<(&'static str, u64)>,
}

/// Compiles, links and runs every case on `machine`.
pub fn run(machine: &Machine, cases: &[Case]) -> Report {
    let mut report = Report::default();
    let work = WorkDir::new(machine.name);
    let dir = &work.0;
    let target = (machine.target)().unwrap_or_else(|e| panic!("{}: {e}", machine.name));

    let started = Instant::now();
    let mut entries = Vec::new();
    let mut objects = Vec::new();
    let mut headers = Vec::new();
    for (n, chunk) in cases.chunks(KERNELS_PER_OBJECT).enumerate() {
        let mut builder = ObjectBuilder::new(&target).expect("an object builder");
        for (k, case) in chunk.iter().enumerate() {
            let number = n * KERNELS_PER_OBJECT + k;
            let symbol = format!("k{number}");
            let added = match &case.kernel {
                Kernel::Gather(s) => builder.add(&symbol, s),
                Kernel::Quantized(s) => builder.add_quantized(&symbol, s),
            };
            match added {
                Ok(kernel) => {
                    let buffers: Vec<_> = (kernel.buffers().iter())
                        .map(|b| (b.name, b.bytes))
                        .collect();
                    let expected = (case.inputs.iter().map(|b| b.len() as u64))
                        .chain([case.output_bytes as u64]);
                    if !buffers.iter().map(|b| b.1).eq(expected) {
                        report.failures.push(failure(
                            machine,
                            case,
                            &format!("the object's buffer sizes are {buffers:?}"),
                        ));
                        continue;
                    }
                    entries.push(Entry {
                        case: number,
                        symbol,
                        buffers,
                    });
                }
                Err(Error::UnsupportedTarget { reason, .. }) => {
                    report.refused.push((number, reason));
                }
                Err(e) => {
                    report
                        .failures
                        .push(failure(machine, case, &format!("not compiled: {e}")))
                }
            }
        }
        let object = builder.finish().expect("an object");
        let path = dir.join(format!("objects{n}.o"));
        std::fs::write(&path, object.bytes()).expect("write the object");
        objects.push(path);
        let header = format!("objects{n}.h");
        let guard = format!("GJ_CROSS_OBJECTS{n}_H");
        std::fs::write(dir.join(&header), object.header(&guard)).expect("write the header");
        headers.push(header);
    }
    report.compile = started.elapsed();
    if entries.is_empty() {
        return report;
    }

    std::fs::write(dir.join("table.c"), table(&headers, &entries)).expect("write table.c");
    let started = Instant::now();
    let (program, warnings) = link(machine, dir, &objects);
    report.link = started.elapsed();
    report.link_warnings = warnings;

    let inputs = dir.join("inputs.bin");
    std::fs::write(&inputs, inputs_file(cases, &entries)).expect("write the inputs");
    let outputs = dir.join("outputs.bin");
    let started = Instant::now();
    let stderr = execute(machine, &program, &inputs, &outputs);
    report.run = started.elapsed();

    let records = read_outputs(&outputs);
    // The interpreter ran on this machine's architecture: its NaNs are the ones the kernels
    // must make.
    let exact_nans = machine.native();
    for (entry, record) in entries.iter().zip(&records) {
        let case = &cases[entry.case];
        match compare(case, record, exact_nans) {
            Ok(nans) => report.nan_differences += nans,
            Err(what) => report.failures.push(failure(machine, case, &what)),
        }
    }
    if records.len() < entries.len() {
        let case = &cases[entries[records.len()].case];
        report.failures.push(failure(
            machine,
            case,
            &format!(
                "the driver stopped in this case ({} of {} ran): {}",
                records.len(),
                entries.len(),
                stderr.trim()
            ),
        ));
    }
    report.ran = records.len();
    report
}

fn failure(machine: &Machine, case: &Case, what: &str) -> String {
    format!("{}: {} ({}): {what}", machine.name, case.name, case.kernel)
}

/// The C table of the entry points, with each buffer size as its header `#define`s it.
fn table(headers: &[String], entries: &[Entry]) -> String {
    let mut c = String::from("#include \"table.h\"\n");
    for header in headers {
        let _ = writeln!(c, "#include \"{header}\"");
    }
    c.push_str("\nconst struct gj_kernel gj_kernels[] = {\n");
    for entry in entries {
        let sizes: Vec<String> = (entry.buffers.iter())
            .map(|(name, _)| format!("{}_{}_BYTES", entry.symbol, name.to_ascii_uppercase()))
            .collect();
        let _ = writeln!(
            c,
            "    {{(gj_entry){}, {}, {{{}}}}},",
            entry.symbol,
            entry.buffers.len(),
            sizes.join(", ")
        );
    }
    let _ = writeln!(
        c,
        "}};\nconst uint64_t gj_kernel_count = {};",
        entries.len()
    );
    c
}

/// Links the driver, the table and the objects: statically for an emulator, so that it
/// needs no libraries of the target's. Returns the program and what the compiler and linker
/// printed (warnings).
pub fn link(machine: &Machine, dir: &Path, objects: &[PathBuf]) -> (PathBuf, String) {
    let sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cross");
    let program = dir.join("driver");
    let (cc, emulator) = machine.tools();
    let mut command = Command::new(cc);
    command
        .args(["-O1", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(&sources)
        .arg("-I")
        .arg(dir)
        .arg("-o")
        .arg(&program)
        .arg(sources.join("driver.c"))
        .arg(dir.join("table.c"))
        .args(objects);
    if emulator.is_some() {
        command.arg("-static");
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{}: cannot run {cc}: {e}", machine.name));
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{}: linking the driver failed ({}; the tools: {APT_GET}):\n{stderr}",
        machine.name,
        output.status,
    );
    (program, stderr)
}

pub fn push_u64(out: &mut Vec<u8>, value: u64) {
    out.extend(value.to_le_bytes());
}

/// The inputs file (format: `driver.c`), one record per entry of the table, in its order.
fn inputs_file(cases: &[Case], entries: &[Entry]) -> Vec<u8> {
    let mut out = b"GJXIN001".to_vec();
    push_u64(&mut out, entries.len() as u64);
    for (k, entry) in entries.iter().enumerate() {
        let case = &cases[entry.case];
        push_u64(&mut out, k as u64);
        let mut misalign = [0u8; 8];
        misalign[..case.misalign.len()].copy_from_slice(&case.misalign);
        push_u64(&mut out, u64::from_le_bytes(misalign));
        push_u64(&mut out, case.nulls);
        for (_, bytes) in &entry.buffers {
            push_u64(&mut out, *bytes);
        }
        for input in &case.inputs {
            out.extend(input);
            out.resize(out.len().next_multiple_of(8), 0);
        }
    }
    out
}

/// Runs the driver (under the emulator if there is one) and returns its stderr.
pub fn execute(machine: &Machine, program: &Path, inputs: &Path, outputs: &Path) -> String {
    let (_, emulator) = machine.tools();
    let mut command = match &emulator {
        Some(emulator) => {
            let mut c = Command::new(emulator);
            c.args(machine.emulator_args).arg(program);
            c
        }
        None => Command::new(program),
    };
    let mut child = command
        .arg(inputs)
        .arg(outputs)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: cannot start the driver: {e}", machine.name));
    let mut stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the driver") {
            break Some(status);
        }
        if started.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = reader.join().unwrap_or_default();
    match status {
        None => format!("killed after {RUN_LIMIT:?}; {text}"),
        Some(s) if !s.success() => format!("exit status {s}; {text}"),
        Some(_) => text,
    }
}

/// One record of the outputs file.
pub struct Record {
    /// What the kernel returned.
    pub status: i64,
    /// What it stored to `*bad_position` (`BAD_POSITION_UNSET` in `driver.c` if nothing).
    pub bad_position: u64,
    /// What the driver saw around the call (`FLAG_*` in `driver.c`).
    pub flags: u64,
    /// The output buffer after the call.
    pub output: Vec<u8>,
}

/// The whole records of the outputs file (all of them unless the driver stopped early).
pub fn read_outputs(path: &Path) -> Vec<Record> {
    let bytes = std::fs::read(path).unwrap_or_default();
    let mut records = Vec::new();
    if bytes.len() < 16 || &bytes[..8] != b"GJXOUT01" {
        return records;
    }
    let mut at = 16;
    let u64_at = |at: usize| -> Option<u64> {
        let b = bytes.get(at..at + 8)?;
        Some(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    while let Some(len) = u64_at(at + 32) {
        let len = len as usize;
        let Some(output) = bytes.get(at + 40..at + 40 + len) else {
            break;
        };
        records.push(Record {
            status: u64_at(at + 8).expect("read above") as i64,
            bad_position: u64_at(at + 16).expect("read above"),
            flags: u64_at(at + 24).expect("read above"),
            output: output.to_vec(),
        });
        at += 40 + len.next_multiple_of(8);
    }
    records
}

/// Whether a run did what the interpreter says: the status, the output or the rejected
/// index's position, the guards around the output and the inputs untouched. A quantized
/// gather's NaN may differ in sign and payload as [`same_nan`] allows unless `exact_nans`;
/// returns how many did.
pub fn compare(case: &Case, record: &Record, exact_nans: bool) -> Result<usize, String> {
    let flags = [
        (
            SIZE_MISMATCH,
            "the header's buffer sizes are not the object's",
        ),
        (GUARD_BEFORE_OUTPUT, "wrote before its output"),
        (GUARD_AFTER_OUTPUT, "wrote past the end of its output"),
        (
            INPUT_CHANGED,
            "changed an input buffer or wrote next to one",
        ),
    ];
    let flagged: Vec<&str> = (flags.iter())
        .filter(|(flag, _)| record.flags & flag != 0)
        .map(|(_, what)| *what)
        .collect();
    if !flagged.is_empty() {
        return Err(flagged.join("; "));
    }
    match (&case.outcome, record.status) {
        (Outcome::Output(expected), 0) => {
            let float = match &case.kernel {
                Kernel::Quantized(s) if !exact_nans => Some(s.dtype),
                _ => None,
            };
            compare_output(expected, &record.output, float)
        }
        (Outcome::Rejected(position), 1) if *position == record.bad_position => {
            match &case.partial_reference {
                None => Ok(0),
                Some(reference) => check_partial_output(reference, &record.output).map(|()| 0),
            }
        }
        (Outcome::Rejected(position), 1) => Err(format!(
            "rejected the index at {}, the interpreter the one at {position}",
            record.bad_position
        )),
        (Outcome::Output(_), status) => Err(format!(
            "returned {status} (bad position {}), the interpreter an output",
            record.bad_position
        )),
        (Outcome::Rejected(position), status) => Err(format!(
            "returned {status}, the interpreter rejected the index at {position}"
        )),
    }
}

/// Compares outputs byte for byte, or element by element of `float` (a float type whose NaNs
/// may differ as [`same_nan`] allows); returns how many elements differed only so.
fn compare_output(expected: &[u8], actual: &[u8], float: Option<DType>) -> Result<usize, String> {
    if expected.len() != actual.len() {
        return Err(format!(
            "{} output bytes, the interpreter {}",
            actual.len(),
            expected.len()
        ));
    }
    let size = float.map_or(1, DType::size);
    let mut nans = 0;
    for (k, (e, a)) in expected.chunks(size).zip(actual.chunks(size)).enumerate() {
        if e == a {
            continue;
        }
        if let Some(dtype) = float
            && same_nan(dtype, e, a)
        {
            nans += 1;
            continue;
        }
        return Err(format!(
            "output bytes {}..{} of {} are {a:02x?}, the interpreter's {e:02x?}",
            k * size,
            (k + 1) * size,
            expected.len()
        ));
    }
    Ok(nans)
}

/// Whether `actual` is a NaN the kernel may make where the interpreter made the NaN
/// `expected` on another ISA: IEEE 754 leaves the sign of a NaN result open, and its payload
/// may be the operand's (x86-64, aarch64) or none (riscv64's canonical NaN), and a NaN made
/// from no NaN is the ISA's default one (negative on x86-64, positive on aarch64 and riscv64).
/// So: both NaNs, `actual` quiet, its payload `expected`'s or zero.
fn same_nan(dtype: DType, expected: &[u8], actual: &[u8]) -> bool {
    let bits = |b: &[u8]| match b.len() {
        4 => u64::from(u32::from_ne_bytes(b.try_into().expect("4 bytes"))),
        _ => u64::from(u16::from_ne_bytes(b.try_into().expect("2 bytes"))),
    };
    let mantissa_bits = match dtype {
        DType::F32 => 23,
        DType::F16 => 10,
        DType::Bf16 => 7,
        _ => return false,
    };
    let exponent_bits = expected.len() as u32 * 8 - 1 - mantissa_bits;
    let exponent_mask = ((1u64 << exponent_bits) - 1) << mantissa_bits;
    let quiet = 1u64 << (mantissa_bits - 1);
    let payload_mask = quiet - 1;
    let is_nan = |x: u64| x & exponent_mask == exponent_mask && x & (quiet | payload_mask) != 0;
    let (e, a) = (bits(expected), bits(actual));
    is_nan(e)
        && is_nan(a)
        && a & quiet != 0
        && (a & payload_mask == e & payload_mask || a & payload_mask == 0)
}

/// After a rejected index a gather has written the output before it and left the rest as it
/// was: a prefix of the `OutOfRange::Zero` output, then the driver's sentinel.
fn check_partial_output(reference: &[u8], output: &[u8]) -> Result<(), String> {
    let prefix = (reference.iter().zip(output))
        .take_while(|(r, o)| r == o)
        .count();
    match output[prefix..].iter().position(|&b| b != SENTINEL) {
        None => Ok(()),
        Some(at) => Err(format!(
            "after the rejected index, output byte {} was written but is neither the correct \
             value nor the caller's byte",
            prefix + at
        )),
    }
}
