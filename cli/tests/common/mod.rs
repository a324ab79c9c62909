//! Helpers every CLI test binary shares: run the binary, expect success or one `error:` line,
//! write `.npy` files.

use std::process::Output;

use assert_cmd::cargo::cargo_bin_cmd;

/// The `gather-jit` binary of this build.
pub fn gather_jit() -> assert_cmd::Command {
    cargo_bin_cmd!("gather-jit")
}

/// Runs `args`, expects success, returns stdout.
#[track_caller]
pub fn ok(args: &[&str]) -> String {
    let out = gather_jit().args(args).output().expect("the binary runs");
    assert!(
        out.status.success(),
        "{args:?} failed with {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// Runs `args`, expects exit status 2 with exactly one line on stderr and nothing on stdout;
/// returns that line.
#[track_caller]
pub fn usage_error(args: &[&str]) -> String {
    let out = gather_jit().args(args).output().expect("the binary runs");
    one_error_line(args, out)
}

/// Expects `out` to be exit status 2 with exactly one line on stderr and nothing on stdout;
/// returns that line.
#[track_caller]
pub fn one_error_line(args: &[&str], out: Output) -> String {
    assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    let stderr = String::from_utf8(out.stderr).expect("utf-8 stderr");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "{args:?}: one line expected on stderr, got {stderr:?}"
    );
    assert!(lines[0].starts_with("error: "), "{stderr:?}");
    assert!(out.stdout.is_empty(), "{args:?}: stdout {:?}", out.stdout);
    lines[0].to_string()
}

/// An `.npy` file (version 1.0) with a hand-written header.
pub fn npy(descr: &str, fortran: bool, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let shape = match shape {
        [d] => format!("({d},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let order = if fortran { "True" } else { "False" };
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut file = b"\x93NUMPY\x01\x00".to_vec();
    file.extend_from_slice(&(header.len() as u16).to_le_bytes());
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(data);
    file
}
