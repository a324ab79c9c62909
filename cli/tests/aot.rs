//! `gather-jit aot` and `explain --target` (issue 31, item 3): objects of each target's format,
//! their headers, an x86-64 object linked into a C program and run, every bad input refused
//! with one line and no file left behind, and the target's machine code disassembled.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use tempfile::TempDir;

#[allow(dead_code, reason = "this binary writes no .npy files")]
mod common;
#[path = "common/files.rs"]
mod files;

use common::{gather_jit, ok, one_error_line, usage_error};
use files::{utf8, write};

/// A Gather of 4 rows of a 5x3 f32 table with i64 indices: 60 bytes of data, 32 of indices,
/// 48 of output.
const GATHER: [&str; 6] = [
    "--op",
    "gather",
    "--data-shape",
    "5x3",
    "--indices-shape",
    "4",
];

/// Runs `aot` on [`GATHER`] with `extra` flags, expects success, returns stdout.
#[track_caller]
fn aot(extra: &[&str]) -> String {
    ok(&[&["aot"][..], &GATHER, extra].concat())
}

/// The names in `dir`.
fn names(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .expect("readable")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

#[test]
fn each_target_writes_an_object_of_its_format() {
    let dir = tempfile::tempdir().unwrap();
    // Magic numbers and machine fields from the formats' specifications: ELF's e_machine at
    // byte 18 (62 x86-64, 183 AArch64, 243 RISC-V), Mach-O's 64-bit magic and CPU_TYPE_ARM64
    // (0x0100000c), COFF's machine field IMAGE_FILE_MACHINE_AMD64 (0x8664) first.
    let elf = |machine: u16| {
        let mut head = b"\x7fELF\x02\x01".to_vec(); // 64-bit, little-endian
        head.resize(18, 0);
        head.extend(machine.to_le_bytes());
        head
    };
    let cases: [(&str, Vec<u8>, &[usize]); 5] = [
        (
            "x86_64-unknown-linux-gnu",
            elf(62),
            &[0, 1, 2, 3, 4, 5, 18, 19],
        ),
        (
            "aarch64-unknown-linux-gnu",
            elf(183),
            &[0, 1, 2, 3, 4, 5, 18, 19],
        ),
        (
            "riscv64gc-unknown-linux-gnu",
            elf(243),
            &[0, 1, 2, 3, 4, 5, 18, 19],
        ),
        (
            "aarch64-apple-darwin",
            [0xfeed_facf_u32.to_le_bytes(), 0x0100_000c_u32.to_le_bytes()].concat(),
            &[0, 1, 2, 3, 4, 5, 6, 7],
        ),
        (
            "x86_64-pc-windows-msvc",
            0x8664_u16.to_le_bytes().to_vec(),
            &[0, 1],
        ),
    ];
    for (triple, expected, at) in cases {
        let object = dir.path().join(format!("{triple}.o"));
        aot(&["--target", triple, "-o", utf8(&object)]);
        let bytes = fs::read(&object).expect("written");
        let fields: Vec<u8> = at.iter().map(|&i| bytes[i]).collect();
        let wanted: Vec<u8> = at.iter().map(|&i| expected[i]).collect();
        assert_eq!(fields, wanted, "{triple}");
    }
    // `host` is this machine: an ELF object on Linux.
    if cfg!(target_os = "linux") {
        let object = dir.path().join("host.o");
        aot(&["--target", "host", "-o", utf8(&object)]);
        assert!(fs::read(&object).unwrap().starts_with(b"\x7fELF"));
    }
}

#[test]
fn the_header_declares_the_symbol_and_its_buffer_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let (object, header) = (dir.path().join("k.o"), dir.path().join("my-kernels.h"));
    let triple = "aarch64-unknown-linux-gnu";
    let (object, header) = (utf8(&object), utf8(&header));
    let text = aot(&["--target", triple, "-o", object, "--header", header]);
    assert!(text.contains("gather_jit_gather"), "{text}");
    let h = fs::read_to_string(header).expect("header written");
    for line in [
        "#ifndef MY_KERNELS_H",
        "#define gather_jit_gather_DATA_BYTES 60",
        "#define gather_jit_gather_INDICES_BYTES 32",
        "#define gather_jit_gather_OUTPUT_BYTES 48",
        "int32_t gather_jit_gather(const void *data, const void *indices, void *output, uint64_t *bad_position);",
    ] {
        assert!(h.lines().any(|l| l == line), "{line}\n{h}");
    }

    // A quantized op with its own flags, under a symbol of the user's: two rows of one Q8_0
    // block (2 bytes of scale and 32 quants) out of four, dequantized to f32.
    let q8 = [
        "aot",
        "--op",
        "gather-gguf",
        "--format",
        "q8_0",
        "--data-shape",
        "4x32",
        "--indices-shape",
        "2",
        "--index-type",
        "i32",
        "--target",
        triple,
        "--symbol",
        "rows_q8",
        "-o",
        object,
        "--header",
        header,
    ];
    ok(&q8);
    let h = fs::read_to_string(header).unwrap();
    for line in [
        "#define rows_q8_DATA_BYTES 136",
        "#define rows_q8_INDICES_BYTES 8",
        "#define rows_q8_OUTPUT_BYTES 256",
        "int32_t rows_q8(const void *data, const void *indices, const void *scales, const void *zero_points, void *output, uint64_t *bad_position);",
    ] {
        assert!(h.lines().any(|l| l == line), "{line}\n{h}");
    }
    assert!(!h.contains("gather_jit_gather"), "{h}");
}

#[test]
fn json_says_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let (object, header) = (dir.path().join("e.o"), dir.path().join("e.h"));
    let out = ok(&[
        "aot",
        "--op",
        "gather-nd",
        "--data-shape",
        "5x3",
        "--indices-shape",
        "4x1",
        "--target",
        "aarch64-apple-darwin",
        "-o",
        utf8(&object),
        "--header",
        utf8(&header),
        "--json",
    ]);
    let json: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(json["target"], "aarch64-apple-darwin");
    assert_eq!(json["symbol"], "gather_jit_gather_nd");
    assert_eq!(json["object"], utf8(&object));
    assert_eq!(json["object_bytes"], fs::metadata(&object).unwrap().len());
    assert_eq!(json["header"], utf8(&header));
    assert_eq!(json["header_bytes"], fs::metadata(&header).unwrap().len());
    assert_eq!(json["header_guard"], "E_H");
    let buffers: Vec<(String, u64)> = (json["buffers"].as_array().unwrap().iter())
        .map(|b| {
            (
                b["name"].as_str().unwrap().into(),
                b["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    // GatherND of 4 one-element tuples into the 5x3 table: 4 rows of 3 f32.
    let expected = [("data", 60), ("indices", 32), ("output", 48)];
    assert_eq!(
        buffers,
        expected.map(|(n, b)| (n.to_string(), b)).to_vec(),
        "{json}"
    );
    assert!(json["code_bytes"].as_u64().unwrap() > 0, "{json}");
}

/// The C program of [`an_x86_64_object_links_into_a_c_program_and_gathers`]: rows 4, 0, -1
/// (the last, under ONNX's wrap) and 2 of a 5x3 table whose element (r, c) is 10r + c, then
/// indices whose second is out of range.
const PROGRAM: &str = r#"
#include <stdio.h>
#include "kernel.h"

int main(void) {
    float data[5][3];
    for (int r = 0; r < 5; r++)
        for (int c = 0; c < 3; c++)
            data[r][c] = (float)(10 * r + c);
    int64_t indices[4] = {4, 0, -1, 2};
    float output[4][3];
    uint64_t bad = 99;
    if (sizeof data != gather_jit_gather_DATA_BYTES || sizeof indices != gather_jit_gather_INDICES_BYTES
        || sizeof output != gather_jit_gather_OUTPUT_BYTES)
        return 3;
    int32_t status = gather_jit_gather(data, indices, output, &bad);
    printf("%d", status);
    for (int i = 0; i < 4; i++)
        for (int c = 0; c < 3; c++)
            printf(" %g", output[i][c]);
    int64_t wrong[4] = {0, 5, 1, 1};
    status = gather_jit_gather(data, wrong, output, &bad);
    printf("\n%d %llu\n", status, (unsigned long long)bad);
    return 0;
}
"#;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[test]
fn an_x86_64_object_links_into_a_c_program_and_gathers() {
    if Command::new("cc").arg("--version").output().is_err() {
        eprintln!("skipped: no `cc` on PATH to link the object with");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let object = dir.path().join("kernel.o");
    let header = dir.path().join("kernel.h");
    aot(&[
        "--target",
        "x86_64-unknown-linux-gnu",
        "-o",
        utf8(&object),
        "--header",
        utf8(&header),
    ]);
    let program = write(dir.path(), "main.c", PROGRAM.as_bytes());
    let exe = dir.path().join("main");
    let built = Command::new("cc")
        .arg(&program)
        .arg(&object)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("cc runs");
    assert!(
        built.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let run = Command::new(&exe).output().expect("the program runs");
    assert!(run.status.success(), "{run:?}");
    assert_eq!(
        String::from_utf8(run.stdout).unwrap(),
        "0 40 41 42 0 1 2 40 41 42 20 21 22\n1 1\n"
    );
}

/// A directory for one refused command, holding `keep` (name and contents) beforehand.
fn refusal_dir(keep: &[(&str, &[u8])]) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    for &(name, contents) in keep {
        write(dir.path(), name, contents);
    }
    dir
}

/// Runs `args`, expects status 2 with one `error:` line containing `needle`, and `dir`
/// holding what it held before, unchanged.
#[track_caller]
fn refused(dir: &Path, args: &[&str], needle: &str) {
    let before: Vec<(String, Vec<u8>)> = contents(dir);
    let line = usage_error(args);
    assert!(line.contains(needle), "{args:?}: {line}");
    assert_eq!(contents(dir), before, "{args:?} left files behind");
}

fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    (names(dir).into_iter())
        .map(|name| {
            let bytes = fs::read(dir.join(&name)).unwrap_or_default();
            (name, bytes)
        })
        .collect()
}

#[test]
fn every_bad_input_is_one_line_and_no_file() {
    let dir = refusal_dir(&[]);
    let at = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let (object, header) = (at("k.o"), at("k.h"));
    let with = |extra: &[&str]| -> Vec<String> {
        [&["aot"][..], &GATHER, extra]
            .concat()
            .into_iter()
            .map(String::from)
            .collect()
    };
    let check = |args: Vec<String>, needle: &str| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(dir.path(), &args, needle);
    };
    let both = ["-o", object.as_str(), "--header", header.as_str()];
    // Unknown and unsupported triples.
    for triple in [
        "foo",
        "",
        "wasm32-unknown-unknown",
        "mips-unknown-linux-gnu",
    ] {
        check(
            with(&[&["--target", triple][..], &both].concat()),
            &format!("target {triple}"),
        );
    }
    // A kernel the target cannot take: 16-byte vector moves on riscv64 without its vector
    // extension.
    check(
        [&["aot"][..], &RISCV_VECTOR_KERNEL, &both]
            .concat()
            .into_iter()
            .map(String::from)
            .collect(),
        "target riscv64gc-unknown-linux-gnu",
    );
    // Invalid symbols, as the library refuses them.
    for symbol in ["1st", "", "dash-ed", "x__gather_jit_y", "é"] {
        check(
            with(&[&["--target", "host", "--symbol", symbol][..], &both].concat()),
            &format!("symbol {symbol:?}"),
        );
    }
    // A signature that fails validation: the message of `explain`.
    let bad_axis = ["--axis", "2", "--target", "host"];
    let explained = usage_error(&[&["explain"][..], &GATHER, &bad_axis[..2]].concat());
    let line = usage_error(&[&["aot"][..], &GATHER, &bad_axis, &both].concat());
    assert_eq!(line, explained);
    assert!(names(dir.path()).is_empty());
    // The object and the header in one file.
    check(
        with(&["--target", "host", "-o", &object, "--header", &object]),
        "one file",
    );
    let dotted = format!("{}/./k.o", utf8(dir.path()));
    check(
        with(&["--target", "host", "-o", &object, "--header", &dotted]),
        "one file",
    );
    // Directories that cannot be written in, for the object or for the header alone.
    let missing = at("missing/k.o");
    check(with(&["--target", "host", "-o", &missing]), "missing");
    let missing_h = at("missing/k.h");
    check(
        with(&["--target", "host", "-o", &object, "--header", &missing_h]),
        "missing",
    );
    check(
        with(&["--target", "host", "-o", utf8(dir.path())]),
        "directory",
    );
    assert!(names(dir.path()).is_empty());
}

/// Existing files: a regular file in place of a directory, and a header that is the object
/// through a symlink; neither is touched.
#[test]
fn existing_files_are_never_overwritten_by_a_refused_command() {
    let dir = refusal_dir(&[("plain", b"not a directory"), ("k.h", b"keep me")]);
    let at = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let args = |extra: &[&str]| -> Vec<String> {
        [&["aot"][..], &GATHER, &["--target", "host"], extra]
            .concat()
            .into_iter()
            .map(String::from)
            .collect()
    };
    let (plain_child, object, header) = (at("plain/k.o"), at("k.o"), at("k.h"));
    for extra in [
        vec!["-o", plain_child.as_str()],
        vec!["-o", object.as_str(), "--header", plain_child.as_str()],
    ] {
        let args = args(&extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(dir.path(), &args, "plain");
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&header, &object).unwrap();
        let args = args(&["-o", &object, "--header", &header]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(dir.path(), &args, "one file");
    }
}

/// A kernel riscv64gc cannot take: 16-byte vector moves without its vector extension.
const RISCV_VECTOR_KERNEL: [&str; 8] = [
    "--op",
    "gather",
    "--data-shape",
    "100x64",
    "--indices-shape",
    "4",
    "--target",
    "riscv64gc-unknown-linux-gnu",
];

/// Whether `tool` runs.
fn on_path(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}

#[test]
fn explain_target_disassembles_the_objects_kernel() {
    let args = [
        &["explain"][..],
        &GATHER,
        &["--target", "aarch64-unknown-linux-gnu"],
    ]
    .concat();
    let host = ok(&[&["explain"][..], &GATHER].concat());
    let text = ok(&args);
    // The host's header lines and Cranelift IR, then the target's code.
    let first = |text: &str| text.lines().take(3).collect::<Vec<_>>().join("\n");
    assert_eq!(first(&text), first(&host));
    assert!(
        text.contains("target:        aarch64-unknown-linux-gnu"),
        "{text}"
    );
    assert!(text.contains("function u0:0("), "{text}");
    if !on_path("aarch64-linux-gnu-objdump") && !on_path("llvm-objdump") {
        eprintln!("skipped the disassembly: no AArch64 objdump on PATH");
        return;
    }
    let code = text
        .split_once("\nmachine code (aarch64-unknown-linux-gnu, ")
        .unwrap_or_else(|| panic!("{text}"))
        .1;
    // The entry point and the kernel behind it, nothing else of the object's listing.
    assert!(code.contains("<gather_jit_gather>:"), "{code}");
    assert!(
        code.contains("<gather_jit_gather__gather_jit_kernel>:"),
        "{code}"
    );
    assert!(!code.contains("file format"), "{code}");
    assert!(code.lines().any(|l| l.contains("\tret")), "{code}");
}

#[test]
fn explain_target_says_when_no_disassembler_is_found() {
    let empty = tempfile::tempdir().unwrap();
    let args = [
        &["explain"][..],
        &GATHER,
        &["--target", "aarch64-apple-darwin"],
    ]
    .concat();
    let out = gather_jit()
        .args(&args)
        .env("PATH", empty.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with("machine code: no disassembler for aarch64-apple-darwin was found"),
        "{text}"
    );
    let json = gather_jit()
        .args(&args)
        .arg("--json")
        .env("PATH", empty.path())
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["target"], "aarch64-apple-darwin");
    assert_eq!(json["disassembly"], Value::Null);
    assert_eq!(json["disassembler"], Value::Null);
    assert_eq!(json["plan"]["band"], Value::Null);
}

#[test]
fn explain_target_refuses_what_aot_refuses() {
    for (triple, needle) in [
        ("mips-unknown-linux-gnu", "target mips-unknown-linux-gnu"),
        ("nonsense", "target nonsense"),
    ] {
        let line = usage_error(&[&["explain"][..], &GATHER, &["--target", triple]].concat());
        assert!(line.contains(needle), "{line}");
    }
    let vectors = [&["explain"][..], &RISCV_VECTOR_KERNEL].concat();
    let out = gather_jit().args(&vectors).output().unwrap();
    let line = one_error_line(&vectors, out);
    assert!(
        line.contains("target riscv64gc-unknown-linux-gnu"),
        "{line}"
    );
}
