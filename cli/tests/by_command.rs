//! The CLI by command, not by op family (issue 29, item 5): `run`, `explain` and `bench` take
//! every op through one path, with one JSON schema per command; every flag is honoured or
//! refused with one line; `layer --no-check`; help wrapped to the terminal.

use std::path::Path;

use assert_cmd::cargo::cargo_bin_cmd;
use serde_json::Value;

fn gather_jit() -> assert_cmd::Command {
    cargo_bin_cmd!("gather-jit")
}

/// Runs `args`, expects success, returns stdout.
#[track_caller]
fn ok(args: &[&str]) -> String {
    let out = gather_jit().args(args).output().expect("the binary runs");
    assert!(
        out.status.success(),
        "{args:?} failed with {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// Runs `args`, expects one JSON object on stdout.
#[track_caller]
fn json(args: &[&str]) -> Value {
    let out = ok(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

/// Help text wraps to the terminal's width (`COLUMNS` where there is no terminal); it was
/// 100 columns wide whatever the terminal.
#[test]
fn help_wraps_to_the_terminal() {
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["bench", "--help"],
        &["layer", "--help"],
    ] {
        let out = gather_jit()
            .args(args)
            .env("COLUMNS", "60")
            .output()
            .unwrap();
        assert!(out.status.success());
        let help = String::from_utf8(out.stdout).unwrap();
        // clap never wraps the usage line (a list of placeholders).
        let widest = (help.lines())
            .filter(|l| !l.starts_with("Usage:"))
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0);
        assert!(
            widest <= 60,
            "{args:?}: a line of {widest} columns:\n{help}"
        );
    }
}

/// `layer --no-check` compiles and times each layer but skips the reference interpreter, and
/// says so.
#[test]
fn layer_no_check_skips_the_interpreter_and_says_so() {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/seed_layers.xml");
    let seeds = seeds.to_str().unwrap();
    let text = ok(&["layer", seeds, "--no-check"]);
    assert!(text.contains("not checked"), "{text}");
    assert!(text.contains("--no-check"), "{text}");
    assert!(!text.contains("yes"), "{text}");
    let rows = json(&["layer", seeds, "--no-check", "--json"]);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for row in rows {
        assert_eq!(row["checked"], false, "{row}");
        assert!(
            row["agree"].is_null() && row["interp_ns"].is_null(),
            "{row}"
        );
        assert!(row["jit_ns"].as_u64().is_some_and(|ns| ns > 0), "{row}");
    }
    let checked = json(&["layer", seeds, "--json"]);
    assert_eq!(checked[0]["checked"], true);
    assert_eq!(checked[0]["agree"], true);
}
