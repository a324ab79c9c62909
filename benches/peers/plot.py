#!/usr/bin/env python3
"""The figure and the tables of docs/performance.md, from the JSON that `compare.py --json` writes.

    python benches/peers/plot.py benches/peers/results.json -o docs/figures/peers.svg
    python benches/peers/plot.py benches/peers/results.json --table     # Markdown tables only

The figure shows, per case, gather-jit's median time divided by the best peer's (the fastest of
numpy, ONNX Runtime, OpenVINO and JAX on that case) and divided by a `memcpy` of its output's size
(the CLI's, timed in the same process as the kernel), on a log scale with a line at 1.0. Needs
matplotlib (only for the figure); see README.md.

The quantized cases (Q1..Q3, rows with a "quantized" key) and the scatter cases (W1..W5, rows with
a "scatter" key) are not in the figure: `--table` lists each group in a table of its own, with the
peers' times even where gather-jit has none yet.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PEERS = ("numpy", "onnxruntime", "openvino", "jax")
Q_PEERS = ("numpy", "onnxruntime", "gguf")  # the peers of the quantized cases
PEER_NAMES = {"numpy": "numpy", "onnxruntime": "ONNX Runtime", "openvino": "OpenVINO", "jax": "JAX",
              "gguf": "numpy + gguf"}  # fmt: skip
# Under the bars, where space is short.
PEER_SHORT = {"numpy": "numpy", "onnxruntime": "ORT", "openvino": "OpenVINO", "jax": "JAX"}
CASE_SHORT = {"gpt2-embedding": "GPT-2 emb.", "topk-gather-elements": "top-k",
              "detection-gather-nd": "detection"}  # fmt: skip

# The targets of issue 5: gather-jit / best peer at most this much.
TARGETS = {"S1": 0.5, "S2": 0.5, "S3": 0.5, "S4": 0.9, "S5": 0.9, "S6": 0.7, "S7": 0.7,
           "S8": 0.5, "S9": 0.5}  # fmt: skip


def load(path: Path) -> list[dict]:
    """One dict per case that gather-jit and at least one peer timed, with the derived figures."""
    rows = []
    for raw in json.loads(path.read_text())["rows"]:
        if "quantized" in raw or "scatter" in raw:  # load_quantized's, load_scatter's
            continue
        times, cli = raw["median_ns"], raw["gather_jit_cli"]
        peers = {p: times[p] for p in PEERS if p in times}
        jit = times.get("gather-jit")
        if jit is None or not peers or cli is None:
            print(f"{raw['case']}: no gather-jit or peer time, left out", file=sys.stderr)
            continue
        best = min(peers, key=peers.get)
        rows.append({
            "case": raw["case"], "op": raw.get("op", ""), "data": raw.get("data_shape"),
            "indices": raw.get("indices_shape"), "index_type": raw.get("index_type", "i64"),
            "jit": jit, "best": best, "best_ns": peers[best], "memcpy": cli["memcpy_ns"],
            "fill": cli["fill_ns"], "compile": cli["compile_ns"], "hit": cli["cache_hit_ns"],
            "na": raw.get("n/a", {}),
        })  # fmt: skip
    return rows


def load_quantized(path: Path) -> list[dict]:
    """The quantized cases (Q1..Q3) that at least one peer timed; gather-jit's figures are None
    where it has none (its CLI without the op). memcpy and fill come from gather-jit's own bench,
    else from the plain Gather bench of the same output size compare.py ran instead."""
    rows = []
    for raw in json.loads(path.read_text())["rows"]:
        if "quantized" not in raw:
            continue
        times = raw["median_ns"]
        cli = raw.get("gather_jit_cli") or {}
        copy_fill = cli or raw.get("gather_jit_cli_copy_fill") or {}
        peers = {p: times[p] for p in Q_PEERS if p in times}
        if not peers:
            print(f"{raw['case']}: no peer time, left out", file=sys.stderr)
            continue
        best = min(peers, key=peers.get)
        rows.append({
            "case": raw["case"], "op": raw.get("op", ""), "data": raw.get("data_shape"),
            "indices": raw.get("indices_shape"), "index_type": raw.get("index_type", "i64"),
            "jit": times.get("gather-jit"), "best": best, "best_ns": peers[best],
            "memcpy": copy_fill.get("memcpy_ns"), "fill": copy_fill.get("fill_ns"),
            "compile": cli.get("compile_ns"), "hit": cli.get("cache_hit_ns"),
            "na": raw.get("n/a", {}),
        })  # fmt: skip
    return rows


# Issue 32's targets for the scatters: gather-jit in place / the best peer (W1: / numpy in place).
S_TARGETS = {"W1": 0.5, "W2": 0.5, "W3": 0.5, "W4": 0.7}


def load_scatter(path: Path) -> list[dict]:
    """The scatter cases (W1..W5) that at least one peer timed. Times are keyed "peer/mode"; the
    best peer is the fastest over every peer and mode (W1's target names numpy in place);
    gather-jit's figures are None where it has none."""
    rows = []
    for raw in json.loads(path.read_text())["rows"]:
        if "scatter" not in raw:
            continue
        times = raw["median_ns"]
        peers = {k: v for k, v in times.items() if not k.startswith("gather-jit")}
        if not peers:
            print(f"{raw['case']}: no peer time, left out", file=sys.stderr)
            continue
        best = min(peers, key=peers.get)
        if raw["case"] == "W1" and "numpy/in-place" in peers:
            best = "numpy/in-place"
        cli = raw.get("gather_jit_cli") or {}
        cli_in_place = raw.get("gather_jit_cli_in_place") or {}
        rows.append({
            "case": raw["case"], "op": raw.get("op", ""), "data": raw.get("data_shape"),
            "indices": raw.get("indices_shape"), "in_place": times.get("gather-jit/in-place"),
            "out_of_place": times.get("gather-jit/out-of-place"), "best": best,
            "best_ns": peers[best], "memcpy": cli.get("memcpy_ns"),
            "to_memcpy": cli.get("ratio_to_memcpy"),
            "memcpy_numpy": raw.get("memcpy_numpy_ns"),
            "compile": cli.get("compile_ns", cli_in_place.get("compile_ns")),
            "na": raw.get("n/a", {}),
        })  # fmt: skip
    return rows


def us(ns: float) -> str:
    """µs with three significant digits, thousands separated, as compare.py prints them."""
    v = ns / 1000
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def shape(dims) -> str:
    return "[" + ",".join(map(str, dims)) + "]" if dims else "?"


def table(rows: list[dict]) -> str:
    head = ["case", "op", "data", "indices", "gather-jit (µs)", "best peer (µs)", "/ best peer",
            "memcpy (µs)", "fill (µs)", "/ memcpy", "/ fill", "compile (µs)", "cache hit (ns)"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        indices = shape(r["indices"]) + (f" {r['index_type']}" if r["index_type"] != "i64" else "")
        cells = [r["case"], r["op"], shape(r["data"]), indices, us(r["jit"]),
                 f"{us(r['best_ns'])} {PEER_NAMES[r['best']]}", f"{r['jit'] / r['best_ns']:.2f}",
                 us(r["memcpy"]), us(r["fill"]), f"{r['jit'] / r['memcpy']:.2f}",
                 f"{r['jit'] / r['fill']:.2f}", f"{r['compile'] / 1000:.0f}", f"{r['hit']:.0f}"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def qtable(rows: list[dict]) -> str:
    """The quantized cases; n/a where gather-jit (or the CLI's memcpy/fill) has no figure."""
    head = ["case", "op", "data (logical)", "indices", "gather-jit (µs)", "best peer (µs)",
            "/ best peer", "memcpy (µs)", "fill (µs)", "/ memcpy", "/ fill", "compile (µs)",
            "cache hit (ns)"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def div(a, b) -> str:
        return f"{a / b:.2f}" if a is not None and b else "n/a"

    for r in rows:
        indices = shape(r["indices"]) + (f" {r['index_type']}" if r["index_type"] != "i64" else "")
        jit = r["jit"]
        cells = [r["case"], r["op"], shape(r["data"]), indices,
                 us(jit) if jit is not None else "n/a",
                 f"{us(r['best_ns'])} {PEER_NAMES[r['best']]}", div(jit, r["best_ns"]),
                 us(r["memcpy"]) if r["memcpy"] is not None else "n/a",
                 us(r["fill"]) if r["fill"] is not None else "n/a",
                 div(jit, r["memcpy"]), div(jit, r["fill"]),
                 f"{r['compile'] / 1000:.0f}" if r["compile"] is not None else "n/a",
                 f"{r['hit']:.0f}" if r["hit"] is not None else "n/a"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def stable(rows: list[dict]) -> str:
    """The scatter cases: gather-jit in place beside the best peer (any mode; W1 beside numpy in
    place, as its target reads), out of place beside a memcpy of data (the CLI's, else numpy's;
    the ratio is the CLI's `ratio_to_memcpy`, both timed in one process, where it has one), and
    issue 32's target; n/a where gather-jit has no figure."""
    head = ["case", "op", "data", "indices", "gather-jit in place (µs)", "best peer (µs)",
            "/ best peer", "target", "gather-jit out of place (µs)", "memcpy of data (µs)",
            "out of place / memcpy", "compile (µs)"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def div(a, b) -> str:
        return f"{a / b:.2f}" if a is not None and b else "n/a"

    def opt(ns) -> str:
        return us(ns) if ns is not None else "n/a"

    for r in rows:
        peer, mode = r["best"].split("/")
        memcpy = r["memcpy"] if r["memcpy"] is not None else r["memcpy_numpy"]
        target = S_TARGETS.get(r["case"])
        target = (f"≤ {target}" if target else "raw call ≤ 50 ns") + (
            ", out of place ≤ 1.1x memcpy" if r["case"] == "W1" else "")  # fmt: skip
        cells = [r["case"], r["op"], shape(r["data"]), shape(r["indices"]), opt(r["in_place"]),
                 f"{us(r['best_ns'])} {PEER_NAMES[peer]} {mode.replace('-', ' ')}",
                 div(r["in_place"], r["best_ns"]), target, opt(r["out_of_place"]),
                 opt(memcpy) + ("" if r["memcpy"] is not None or memcpy is None else " (numpy)"),
                 f"{r['to_memcpy']:.2f}" if r["to_memcpy"] is not None
                 else div(r["out_of_place"], memcpy),
                 f"{r['compile'] / 1000:.0f}" if r["compile"] is not None else "n/a"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(rows: list[dict], out: Path, title: str) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "gather-jit", "font.size": 9})
    n = len(rows)
    # A gap between the cases S1..S9 and the model shapes.
    xs = [i + (0.6 if not r["case"].startswith("S") else 0) for i, r in enumerate(rows)]
    width = 0.38
    fig, ax = plt.subplots(figsize=(10, 4.4))
    series = [
        ("gather-jit / best peer", [r["jit"] / r["best_ns"] for r in rows], "#1f77b4", -width / 2),
        ("gather-jit / memcpy of its output", [r["jit"] / r["memcpy"] for r in rows], "#ff7f0e",
         width / 2),
    ]  # fmt: skip
    for label, values, color, dx in series:
        bars = ax.bar([x + dx for x in xs], values, width, label=label, color=color)
        for bar, v in zip(bars, values):
            ax.annotate(f"{v:.2f}" if v < 10 else f"{v:.0f}",
                        (bar.get_x() + bar.get_width() / 2, v), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=7)  # fmt: skip
    target_x = [x - width / 2 for x, r in zip(xs, rows) if r["case"] in TARGETS]
    target_y = [TARGETS[r["case"]] for r in rows if r["case"] in TARGETS]
    ax.scatter(target_x, target_y, marker="_", s=300, linewidths=2, color="#d62728", zorder=3,
               label="target / best peer (issue 5)")  # fmt: skip
    ax.axhline(1.0, color="gray", linewidth=1, linestyle="--", zorder=0)
    ax.set_yscale("log")
    ax.set_ylim(0.004, 80)
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_ylabel("gather-jit's time / the other's (log; under 1: faster)")
    labels = [f"{CASE_SHORT.get(r['case'], r['case'])}\nvs {PEER_SHORT[r['best']]}" for r in rows]
    ax.set_xticks(xs, labels, fontsize=7.5)
    ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
    models = [x for x, r in zip(xs, rows) if not r["case"].startswith("S")]
    if models:
        ax.axvline(models[0] - 0.8, color="#bbbbbb", linewidth=0.8)
        ax.text(models[0] - 0.7, 45, "model shapes", fontsize=7.5, color="#555555")
    ax.set_title(title, fontsize=9.5)
    ax.legend(loc="upper left", fontsize=8, frameon=False, ncol=3)
    ax.grid(axis="y", which="major", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    # No creation date or tool version in the file, so that a rerun on the same JSON is the same.
    meta = {"Date": None, "Creator": None} if out.suffix == ".svg" else {"Software": None}
    fig.savefig(out, metadata=meta, dpi=110)
    print(f"wrote {out} ({out.stat().st_size:,} bytes)", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", type=Path, help="the file `compare.py --json` wrote")
    ap.add_argument("-o", "--output", type=Path, default=Path("docs/figures/peers.svg"),
                    help="the figure (.svg or .png; default docs/figures/peers.svg)")  # fmt: skip
    ap.add_argument("--table", action="store_true", help="print the Markdown tables, draw nothing")
    args = ap.parse_args()
    rows = load(args.json)
    quantized = load_quantized(args.json)
    scatters = load_scatter(args.json)
    if args.table:
        cases = [r for r in rows if r["case"].startswith("S")]
        models = [r for r in rows if not r["case"].startswith("S")]
        tables = [table(t) for t in (cases, models) if t]
        if quantized:
            tables.append(qtable(quantized))
        if scatters:
            tables.append(stable(scatters))
        print("\n\n".join(tables))
        return 0
    if not rows:
        sys.exit("no case with gather-jit and peer times to plot")
    title = ("gather-jit, one thread: median time per call relative to the fastest peer and to a "
             "memcpy of the output (f32 data)")  # fmt: skip
    plot(rows, args.output, title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
