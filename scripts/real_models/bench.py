#!/usr/bin/env python3
"""Whole-model and per-gather-node timings of the real models: `gather-jit model MODEL --input
... --bench --json` on each model of models.json that tract runs, printed as the two Markdown
tables of docs/real-models.md (one run of the command per model gives both).

Rerun from the repository root, after fetch.py and a build of the CLI:

    cargo build --profile checked -p gather-jit-cli --features model
    python3 scripts/real_models/bench.py --out target/real-models

`--bin` names the binary (default: the checked profile's, under CARGO_TARGET_DIR or target/),
`--json FILE` also keeps the commands' reports. Needs only Python's standard library.

`--bench` times the whole model with gather-jit's gathers and with tract's own ops (the median
of runs over about half a second each) and each gather node around its own evaluation, both
ways; a node that tract's optimiser leaves only one way has a time only that way.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MANIFEST = HERE / "models.json"
DATA = ROOT / "cli" / "tests" / "data" / "real_models"


def default_bin() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "checked" / "gather-jit"


def model_file(out: Path, model: dict) -> Path:
    return out / model["name"] / model["sha256"][:12] / Path(model["path"]).name


def bench(binary: Path, out: Path, model: dict) -> dict:
    args = [str(binary), "model", str(model_file(out, model))]
    for entry in model["inputs"]:
        args += ["--input", f"{entry['name']}={DATA / model['name'] / 'inputs' / entry['file']}"]
    run = subprocess.run(args + ["--bench", "--json"], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"error: {model['name']}: {run.stderr.strip()}")
    return json.loads(run.stdout)


def duration(ns: int | None) -> str:
    if ns is None:
        return "-"
    if ns >= 1_000_000:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 10_000:
        return f"{ns / 1e3:.1f} µs"
    if ns >= 1_000:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns} ns"


def fact(text: str) -> str:
    """`F32 [30522, 384]` of the CLI's `F32 30522,384` (`I64 []` of a scalar's `I64 `)."""
    dt, _, dims = text.partition(" ")
    return f"{dt} [{dims.replace(',', ', ')}]"


def speedup(jit: int | None, native: int | None) -> str:
    return f"{native / jit:.2f}x" if jit and native else "-"


def tables(reports: list[tuple[str, dict]]) -> str:
    lines = [
        "| model | gather-jit nodes | tract's own ops | JIT gathers | speedup |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, report in reports:
        b = report["bench"]
        jit_nodes = sum("gather-jit" in g["op"] for g in report["gathers"])
        lines.append(
            f"| {name} | {jit_nodes} | {duration(b['tract_native_ns'])} | "
            f"{duration(b['gather_jit_ns'])} | {speedup(b['gather_jit_ns'], b['tract_native_ns'])} |"
        )
    lines += [
        "",
        "| model | gather node | data, indices | JIT gathers | tract's own | speedup |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for name, report in reports:
        shapes = {g["node"]: ", ".join(map(fact, g["inputs"])) for g in report["gathers"]}
        for node in report["bench"]["gather_nodes"]:
            jit, native = node["gather_jit_ns"], node["tract_native_ns"]
            lines.append(
                f"| {name} | `{node['node']}` | {shapes.get(node['node'], '-')} | "
                f"{duration(jit)} | {duration(native)} | {speedup(jit, native)} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "target" / "real-models",
                        help="the directory fetch.py fetched into (default target/real-models)")
    parser.add_argument("--bin", type=Path, default=default_bin(),
                        help="the gather-jit binary (default: the checked profile's)")
    parser.add_argument("--json", type=Path, help="also write the commands' reports here")
    parser.add_argument("models", nargs="*", help="only these models (default: every one tract runs)")
    args = parser.parse_args()
    models = json.loads(MANIFEST.read_text(encoding="utf-8"))["models"]
    runs = [m for m in models if m["tract"]["status"] in ("matches", "differs")]
    if args.models:
        runs = [m for m in runs if m["name"] in args.models]
    out = args.out if args.out.is_absolute() else Path.cwd() / args.out
    reports = []
    for model in runs:
        print(f"{model['name']} ...", file=sys.stderr)
        reports.append((model["name"], bench(args.bin, out, model)))
    if args.json:
        args.json.write_text(json.dumps(dict(reports), indent=2) + "\n", encoding="utf-8")
    print(tables(reports))


if __name__ == "__main__":
    main()
