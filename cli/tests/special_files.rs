//! The CLI's file policy (src/files.rs, docs/safety.md "Files"): every command against FIFOs,
//! devices, directories and archive bombs, as inputs and as outputs.
//!
//! Each run goes under a 1.5 GiB address-space limit and a deadline; the test checks the exit
//! status, the one `error:` line, how long it took and the peak resident memory, and that each
//! FIFO and device is still what it was. The devices are private nodes made in a temporary
//! directory (`mknod`, when the tests run as root), never the system's: `/dev/zero` is only
//! read.

#![cfg(target_os = "linux")]

use std::ffi::CString;
use std::fs;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

#[allow(
    dead_code,
    reason = "this binary runs the binary its own way (run) and writes .npy files only"
)]
mod common;
use common::npy;

/// The address-space limit of every run.
const ADDRESS_SPACE: u64 = 1536 << 20;
/// Peak resident memory a refused or bounded read may reach (the binary itself, Cranelift and
/// tract included, takes about 20 MB).
const PEAK_KIB: i64 = 200 << 10;
/// The time a refusal may take. The policy answers in milliseconds; the margin is for a loaded
/// CI host running the tests in parallel.
const REFUSED_WITHIN: Duration = Duration::from_secs(5);

/// How one run of the binary ended.
struct Ran {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: String,
    took: Duration,
    peak_kib: i64,
}

impl Ran {
    /// The one `error:` line of a refusal (status 2, nothing on stdout), checked to have come
    /// within [`REFUSED_WITHIN`] and under [`PEAK_KIB`].
    #[track_caller]
    fn refused(&self, args: &[&str]) -> &str {
        assert_eq!(self.code, Some(2), "{args:?}: {}", self.stderr);
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {:?}", self.stderr);
        assert!(lines[0].starts_with("error: "), "{args:?}: {}", lines[0]);
        assert!(self.stdout.is_empty(), "{args:?}");
        self.bounded(args);
        lines[0]
    }

    /// Checks that the run was quick and small.
    #[track_caller]
    fn bounded(&self, args: &[&str]) {
        assert!(self.took < REFUSED_WITHIN, "{args:?} took {:?}", self.took);
        assert!(
            self.peak_kib < PEAK_KIB,
            "{args:?}: peak RSS {} KiB",
            self.peak_kib
        );
    }

    #[track_caller]
    fn succeeded(&self, args: &[&str]) {
        assert_eq!(self.code, Some(0), "{args:?}: {}", self.stderr);
    }
}

/// Runs the binary with `args` under [`ADDRESS_SPACE`], killed after 20 s, and measures it.
fn run(args: &[&str]) -> Ran {
    let dir = TempDir::new().expect("temp dir");
    let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_gather-jit"));
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out).expect("stdout file"))
        .stderr(fs::File::create(&err).expect("stderr file"));
    // SAFETY: setrlimit is async-signal-safe, and the closure touches nothing else.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: ADDRESS_SPACE,
                rlim_max: ADDRESS_SPACE,
            };
            match libc::setrlimit(libc::RLIMIT_AS, &limit) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
    }
    let started = Instant::now();
    #[allow(
        clippy::zombie_processes,
        reason = "reaped by wait4 below, which also gives its peak memory"
    )]
    let child = command.spawn().expect("the binary starts");
    let pid = child.id() as libc::pid_t;
    let (mut status, mut usage) = (0, unsafe_zeroed_rusage());
    loop {
        // SAFETY: `status` and `usage` are valid for writes; `pid` is this test's child, which
        // only this loop waits for (the `Child` is never waited on).
        let done = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if done == pid {
            break;
        }
        assert!(done == 0, "wait4: {}", std::io::Error::last_os_error());
        if started.elapsed() > Duration::from_secs(20) {
            // SAFETY: `pid` is our child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{args:?} still running after 20 s");
        }
        thread::sleep(Duration::from_millis(2));
    }
    let took = started.elapsed();
    Ran {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        stdout: fs::read(out).expect("stdout"),
        stderr: fs::read_to_string(err).expect("stderr"),
        took,
        peak_kib: usage.ru_maxrss,
    }
}

fn unsafe_zeroed_rusage() -> libc::rusage {
    // SAFETY: rusage is plain integers and timevals, for which all zeros is valid.
    unsafe { std::mem::zeroed() }
}

/// `aot` of the gather on data [4, 6] and indices [2] for this machine, to `out`, then `extra`.
fn aot_gather(out: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "aot",
        "--op",
        "gather",
        "--data-shape",
        "4x6",
        "--indices-shape",
        "2",
    ];
    args.extend(["--target", "host", "-o", out]);
    args.extend(extra);
    args.into_iter().map(String::from).collect()
}

/// `args` as the `&str`s [`run`] takes.
fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// Runs `args`, expects a refusal ([`Ran::refused`]) whose line contains `says`.
#[track_caller]
fn refused_saying(args: &[&str], says: &str) {
    let ran = run(args);
    let line = ran.refused(args);
    assert!(line.contains(says), "{args:?}: {line}");
}

/// `path` as text.
fn utf8(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// A FIFO at `path`.
fn fifo(path: &Path) -> PathBuf {
    let name = CString::new(path.as_os_str().as_bytes()).expect("no NUL");
    // SAFETY: `name` is a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o666) }, 0, "mkfifo");
    path.to_path_buf()
}

/// A private character device at `path` with the numbers of /dev/null (1, 3) or /dev/zero
/// (1, 5); `None` unless the tests run as root (and the filesystem allows devices).
fn device(path: &Path, minor: u32) -> Option<PathBuf> {
    let name = CString::new(path.as_os_str().as_bytes()).expect("no NUL");
    // SAFETY: `name` is a NUL-terminated path.
    let made = unsafe {
        libc::mknod(
            name.as_ptr(),
            libc::S_IFCHR | 0o666,
            libc::makedev(1, minor),
        )
    };
    let usable = made == 0 && fs::File::open(path).is_ok();
    usable.then(|| path.to_path_buf())
}

/// Checks that `path` is still the FIFO or device it was made as.
#[track_caller]
fn still_special(path: &Path) {
    let kind = fs::symlink_metadata(path).expect("still there").file_type();
    assert!(
        kind.is_fifo() || kind.is_char_device(),
        "{} was replaced by a {kind:?}",
        path.display()
    );
}

/// Opens the FIFO `path` for reading on another thread and returns what a writer sends.
fn read_fifo(path: &Path) -> thread::JoinHandle<Vec<u8>> {
    let path = path.to_path_buf();
    thread::spawn(move || {
        let mut bytes = Vec::new();
        fs::File::open(path)
            .expect("fifo opens")
            .read_to_end(&mut bytes)
            .expect("fifo reads");
        bytes
    })
}

/// A directory of valid inputs: data.npy [4, 6] f32, ids.npy [2] i64, and the other files the
/// commands take.
struct Inputs {
    dir: TempDir,
}

impl Inputs {
    fn new() -> Inputs {
        let dir = TempDir::new().expect("temp dir");
        let data: Vec<u8> = (0..24)
            .flat_map(|i: i32| (i as f32).to_le_bytes())
            .collect();
        fs::write(
            dir.path().join("data.npy"),
            npy("<f4", false, &[4, 6], &data),
        )
        .unwrap();
        let ids: Vec<u8> = [1i64, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
        fs::write(dir.path().join("ids.npy"), npy("<i8", false, &[2], &ids)).unwrap();
        Inputs { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn text(&self, name: &str) -> String {
        utf8(&self.path(name)).to_string()
    }
}

/// The data files of the repository's tests.
fn data(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    utf8(&path).to_string()
}

/// bomb.npz with the archive's sizes of `data.npy` patched to the 224 bytes its header
/// announces: a lying archive whose member inflates to 2 GB.
fn lying_bomb(dir: &Path) -> String {
    let mut bytes = fs::read(data("bomb.npz")).expect("bomb.npz");
    let declared = 2_000_000_000u32.to_le_bytes();
    let mut patched = 0;
    // The uncompressed size of data.npy is at offset 22 of its local header and 24 of its
    // central directory entry.
    for (signature, offset) in [(0x04034b50u32, 22), (0x02014b50, 24)] {
        let at = (bytes.windows(4))
            .position(|w| w == signature.to_le_bytes())
            .expect("header");
        assert_eq!(bytes[at + offset..at + offset + 4], declared);
        bytes[at + offset..at + offset + 4].copy_from_slice(&224u32.to_le_bytes());
        patched += 1;
    }
    assert_eq!(patched, 2);
    let path = dir.join("lying.npz");
    fs::write(&path, bytes).unwrap();
    utf8(&path).to_string()
}

/// Every command that reads an array refuses a FIFO or a device in the array's place at once,
/// naming the path and what it is.
#[test]
fn inputs_that_are_fifos_or_devices_are_refused_at_once() {
    let inputs = Inputs::new();
    let fifo = fifo(&inputs.path("f.npy"));
    let zero = device(&inputs.path("zero.npy"), 5);
    let mut specials = vec![(utf8(&fifo).to_string(), "a FIFO")];
    specials.push(("/dev/zero".to_string(), "a character device"));
    if let Some(zero) = &zero {
        specials.push((utf8(zero).to_string(), "a character device"));
    }
    let (data, ids, out) = (
        inputs.text("data.npy"),
        inputs.text("ids.npy"),
        inputs.text("o.npy"),
    );
    for (special, what) in &specials {
        let special = special.as_str();
        let cases: Vec<Vec<&str>> = vec![
            vec!["run", "--op", "gather", special, &ids, "-o", &out],
            vec!["run", "--op", "gather", &data, special, "-o", &out],
            vec![
                "run",
                "--op",
                "scatter-nd",
                &data,
                &ids,
                special,
                "-o",
                &out,
            ],
            vec![
                "bench",
                "--op",
                "gather",
                "--data-shape",
                "4x6",
                "--indices",
                special,
            ],
            vec!["layer", special],
        ];
        for args in cases {
            refused_saying(&args, &format!("{special}: {what}, not a regular file"));
        }
    }
    still_special(&fifo);
    zero.iter().for_each(|zero| still_special(zero));
    assert!(!inputs.path("o.npy").exists());
}

/// A directory where a file is read: one line saying so (not "No such device").
#[test]
fn a_directory_as_an_input_is_named_as_one() {
    let inputs = Inputs::new();
    let dir = inputs.path("adir.npy");
    fs::create_dir(&dir).unwrap();
    let args = ["run", "--op", "gather", utf8(&dir), "x.npy", "-o", "o.npy"];
    refused_saying(&args, "adir.npy: a directory, not a regular file");
}

/// The archive bomb: a member whose header announces 96 bytes and which inflates to 2 GB is
/// refused without being inflated, whether the archive declares its size honestly (the 2 GB
/// less the header's 128 bytes are found from the sizes alone) or lies.
#[test]
fn an_archive_bomb_is_refused_without_inflating() {
    let dir = TempDir::new().unwrap();
    let out = utf8(&dir.path().join("o.npy")).to_string();
    let honest = data("bomb.npz");
    let lying = lying_bomb(dir.path());
    let honest_says =
        "expected 96 bytes of data for shape [4, 6] and descr '<f4', found 1999999872";
    // The lying archive's member is read to one byte past what its header announces, which the
    // zip reader itself finds to be past the archive's word.
    let lying_says = "data: File is larger than its declared uncompressed size";
    for (bomb, says) in [(&honest, honest_says), (&lying, lying_says)] {
        let (member, ids) = (format!("{bomb}:data"), format!("{bomb}:ids"));
        let args = ["run", "--op", "gather", &member, &ids, "-o", &out];
        let line = run(&args).refused(&args).to_string();
        assert!(line.ends_with(says), "{line}");
    }
    assert!(!dir.path().join("o.npy").exists());
}

/// A truncated `.npy` and one whose header is longer than numpy reads: refused from the
/// header, quickly.
#[test]
fn truncated_and_oversized_headers_are_refused() {
    let inputs = Inputs::new();
    let whole = fs::read(inputs.path("data.npy")).unwrap();
    fs::write(inputs.path("cut.npy"), &whole[..40]).unwrap();
    let mut long = b"\x93NUMPY\x02\x00".to_vec();
    long.extend_from_slice(&u32::MAX.to_le_bytes());
    fs::write(inputs.path("long.npy"), long).unwrap();
    let ids = inputs.text("ids.npy");
    for (name, says) in [
        ("cut.npy", "truncated .npy header"),
        ("long.npy", "more than the 10000 numpy itself reads"),
    ] {
        let file = inputs.text(name);
        let args = ["run", "--op", "gather", &file, &ids, "-o", "o.npy"];
        refused_saying(&args, says);
    }
}

/// `-o` naming a FIFO or a device: the output is written through it, and it stays a FIFO or a
/// device.
#[test]
fn outputs_that_are_fifos_or_devices_are_written_through() {
    let inputs = Inputs::new();
    let (data, ids) = (inputs.text("data.npy"), inputs.text("ids.npy"));
    let through_fifo = |name: &str, args: &dyn Fn(&str) -> Vec<String>| -> Vec<u8> {
        let fifo = fifo(&inputs.path(name));
        let reader = read_fifo(&fifo);
        let args = args(utf8(&fifo));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let ran = run(&args);
        ran.succeeded(&args);
        still_special(&fifo);
        reader.join().expect("reader")
    };
    let run_to = |out: &str| -> Vec<String> {
        ["run", "--op", "gather", &data, &ids, "-o", out]
            .map(String::from)
            .to_vec()
    };
    let npy_bytes = through_fifo("out.npy", &run_to);
    assert!(npy_bytes.starts_with(b"\x93NUMPY"), "{npy_bytes:?}");
    // An archive cannot seek back on a FIFO: its member is streamed (sizes after the data).
    let npz_bytes = through_fifo("out.npz", &run_to);
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(npz_bytes)).expect("a zip");
    let mut member = Vec::new();
    (archive.by_name("output.npy").expect("output.npy"))
        .read_to_end(&mut member)
        .unwrap();
    assert_eq!(member, npy_bytes);
    let aot_to = |out: &str| aot_gather(out, &[]);
    let object = through_fifo("k.o", &aot_to);
    assert!(object.starts_with(b"\x7fELF"), "an ELF object");
    // Without an extension: a FIFO or a device takes any name.
    through_fifo("plain", &run_to);

    let Some(null) = device(&inputs.path("null"), 3) else {
        return;
    };
    for args in [run_to(utf8(&null)), aot_to(utf8(&null))] {
        run(&strs(&args)).succeeded(&strs(&args));
        still_special(&null);
    }
    let header = inputs.text("k.h");
    let args = aot_gather(utf8(&null), &["--header", &header]);
    run(&strs(&args)).succeeded(&strs(&args));
    still_special(&null);
    assert!(fs::read_to_string(&header).unwrap().contains("#define"));
}

/// `-o /dev/stdout`: the output alone goes to standard output (no "wrote" line after it), and
/// `--json`, which prints there too, is refused.
#[test]
fn standard_output_as_an_output_holds_the_output_alone() {
    let inputs = Inputs::new();
    let (data, ids) = (inputs.text("data.npy"), inputs.text("ids.npy"));
    let args = ["run", "--op", "gather", &data, &ids, "-o", "/dev/stdout"];
    let ran = run(&args);
    ran.succeeded(&args);
    let expected: Vec<u8> = [
        6.0f32, 7.0, 8.0, 9.0, 10.0, 11.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0,
    ]
    .iter()
    .flat_map(|v| v.to_le_bytes())
    .collect();
    assert_eq!(ran.stdout, npy("<f4", false, &[2, 6], &expected));
    let args = [
        "run",
        "--op",
        "gather",
        &data,
        &ids,
        "-o",
        "/dev/stdout",
        "--json",
    ];
    refused_saying(&args, "standard output, where --json prints");
    let args = aot_gather("/dev/stdout", &[]);
    let args = strs(&args);
    let ran = run(&args);
    ran.succeeded(&args);
    assert!(ran.stdout.starts_with(b"\x7fELF") && !ran.stdout.ends_with(b" bytes\n"));
}

/// A symbolic link as `-o`: the file it points to is replaced whole, and the link stays.
#[test]
fn an_output_through_a_link_replaces_the_file_and_keeps_the_link() {
    let inputs = Inputs::new();
    let (data, ids) = (inputs.text("data.npy"), inputs.text("ids.npy"));
    let target = inputs.path("target.npy");
    fs::write(&target, b"old").unwrap();
    let link = inputs.path("link.npy");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let args = ["run", "--op", "gather", &data, &ids, "-o", utf8(&link)];
    run(&args).succeeded(&args);
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(fs::read(&target).unwrap().starts_with(b"\x93NUMPY"));
}

/// An output named as the command does not write it: one line naming what it does write.
#[test]
fn outputs_with_other_extensions_are_refused() {
    let inputs = Inputs::new();
    let (data, ids) = (inputs.text("data.npy"), inputs.text("ids.npy"));
    for out in ["o.txt", "o.npz:", "o"] {
        let out = inputs.text(out);
        let args = ["run", "--op", "gather", &data, &ids, "-o", &out];
        let line = run(&args).refused(&args).to_string();
        assert!(
            line.contains("run -o writes an .npy file or an .npz archive")
                && line.contains(".npy or .npz"),
            "{line}"
        );
        assert!(!Path::new(&out).exists());
    }
    let args = aot_gather("k.txt", &[]);
    let args = strs(&args);
    refused_saying(&args, ".o or .obj");
}

/// A bool `.npy` with a byte other than 0 or 1 is refused by `run`, as `model` refuses it.
#[test]
fn run_refuses_bools_other_than_0_and_1() {
    let inputs = Inputs::new();
    fs::write(inputs.path("b.npy"), npy("|b1", false, &[3], &[0, 1, 7])).unwrap();
    let (data, ids) = (inputs.text("b.npy"), inputs.text("ids.npy"));
    let args = ["run", "--op", "gather", &data, &ids, "-o", "o.npy"];
    let line = run(&args).refused(&args).to_string();
    assert!(
        line.ends_with("b.npy: bool element 2 is 7, not 0 or 1"),
        "{line}"
    );
}

/// `aot --symbol` with a name a C program or its C library defines.
#[test]
fn aot_refuses_symbols_a_c_program_defines() {
    for symbol in ["main", "errno", "exit", "malloc", "__start", "_Exit"] {
        let args = aot_gather("k.o", &["--symbol", symbol]);
        refused_saying(&strs(&args), symbol);
    }
}

/// `gather-jit model` with its model, `--input`, `--inputs` and `--assert-outputs` entries as
/// FIFOs and devices; `-o DIR` whose output file is a FIFO or a device.
#[cfg(feature = "model")]
mod model {
    use super::*;

    fn tiny() -> String {
        data("tiny.onnx")
    }

    #[test]
    fn model_inputs_that_are_fifos_or_devices_are_refused() {
        let inputs = Inputs::new();
        let fifo = fifo(&inputs.path("f.onnx"));
        let set = inputs.path("set");
        fs::create_dir(&set).unwrap();
        let pb_fifo = super::fifo(&set.join("input_0.pb"));
        let refs = inputs.path("refs");
        fs::create_dir(&refs).unwrap();
        let out_fifo = super::fifo(&refs.join("output_0.pb"));
        let zeros = inputs.path("zeros");
        fs::create_dir(&zeros).unwrap();
        std::os::unix::fs::symlink("/dev/zero", zeros.join("input_0.pb")).unwrap();
        let ids_fifo = super::fifo(&inputs.path("ids.fifo.npy"));
        let tiny = tiny();
        let ids_input = format!("ids={}", utf8(&ids_fifo));
        let cases: Vec<(Vec<&str>, String)> = vec![
            (
                vec!["model", utf8(&fifo)],
                format!("{}: a FIFO", utf8(&fifo)),
            ),
            (
                vec!["model", "/dev/zero"],
                "/dev/zero: a character device".into(),
            ),
            (
                vec!["model", utf8(inputs.dir.path())],
                format!("{}: a directory", utf8(inputs.dir.path())),
            ),
            (
                vec!["model", &tiny, "--input", &ids_input],
                format!("{}: a FIFO", utf8(&ids_fifo)),
            ),
            (
                vec!["model", &tiny, "--inputs", utf8(&set)],
                format!("{}: a FIFO", utf8(&pb_fifo)),
            ),
            (
                vec!["model", &tiny, "--inputs", utf8(&zeros)],
                "input_0.pb: a character device".into(),
            ),
            (
                vec![
                    "model",
                    &tiny,
                    "--dim",
                    "batch=2",
                    "--assert-outputs",
                    utf8(&refs),
                ],
                format!("{}: a FIFO", utf8(&out_fifo)),
            ),
        ];
        for (args, says) in cases {
            refused_saying(&args, &says);
        }
        for node in [&fifo, &pb_fifo, &out_fifo, &ids_fifo] {
            still_special(node);
        }
    }

    #[test]
    fn model_outputs_that_are_fifos_or_devices_are_written_through() {
        let inputs = Inputs::new();
        let out = inputs.path("out");
        fs::create_dir(&out).unwrap();
        let picked = fifo(&out.join("picked.npy"));
        let reader = read_fifo(&picked);
        let tiny = tiny();
        let args = ["model", &tiny, "--dim", "batch=2", "-o", utf8(&out)];
        run(&args).succeeded(&args);
        assert!(reader.join().unwrap().starts_with(b"\x93NUMPY"));
        still_special(&picked);
        fs::remove_file(&picked).unwrap();
        if let Some(null) = device(&out.join("picked.npy"), 3) {
            run(&args).succeeded(&args);
            still_special(&null);
        }
    }

    /// A `TensorProto` with both `raw_data` and a typed field: ONNX takes one or the other.
    #[test]
    fn a_tensor_proto_with_raw_data_and_a_typed_field_is_refused() {
        let inputs = Inputs::new();
        let set = inputs.path("set");
        fs::create_dir(&set).unwrap();
        // dims [2, 3] (field 1), data_type INT64 = 7 (field 2), int64_data [0; 6] packed
        // (field 7), raw_data 48 zero bytes (field 9).
        let mut pb = vec![
            0x08, 2, 0x08, 3, 0x10, 7, 0x3a, 6, 0, 0, 0, 0, 0, 0, 0x4a, 48,
        ];
        pb.extend([0u8; 48]);
        fs::write(set.join("input_0.pb"), pb).unwrap();
        let args = ["model", &tiny(), "--inputs", utf8(&set)];
        refused_saying(&args, "both raw_data and a typed field");
    }
}

/// The node checks of this file can fail: a regular file is not special.
#[test]
fn still_special_fails_on_a_regular_file() {
    let dir = TempDir::new().unwrap();
    let file = dir.path().join("f");
    fs::write(&file, b"x").unwrap();
    let caught = std::panic::catch_unwind(|| still_special(&file));
    assert!(caught.is_err());
    assert_eq!(fs::metadata(&file).unwrap().size(), 1);
}
