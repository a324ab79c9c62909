"""The medians of `cargo bench -p gather-jit-candle` as the markdown tables of docs/integrations.md.

Run from the repository's root after the bench: python3 integrations/candle/benches/table.py
"""

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
CRITERION = ROOT / "target" / "criterion"

# What candle runs for each case (see benches/candle.rs).
CANDLE_WAY = {
    "S1": "GatherND b=0: row numbers (`broadcast_mul`, `sum`) + `index_select`",
    "S2": "GatherND b=2: row numbers + batch offsets + `index_select`",
    "S3": "GatherND b=3 as `gather` on the squeezed ids",
    "S4": "Gather axis=1: `index_select` of the flattened ids + `reshape`",
    "S5": "`candle_nn::Embedding` [30522, 768], ids [8, 128]",
    "S6": "`gather` axis=1 [64, 4096]",
    "S7": "`gather` axis=0 [1024, 1024]",
    "S8": "GatherND [512, 512] by [262144, 2]: row numbers + `index_select`",
    "S9": "`index_select` [16, 16] by [4]",
}


def median_ns(case, function):
    path = CRITERION / f"candle-{case}" / function / "new" / "estimates.json"
    with open(path) as f:
        return json.load(f)["median"]["point_estimate"]


def show(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def main():
    print("| case | candle's way | candle | JIT op | speed-up | kernel `call` | overhead |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for case, way in CANDLE_WAY.items():
        try:
            candle, jit, kernel = (median_ns(case, f) for f in ("candle", "jit", "kernel"))
        except FileNotFoundError:
            print(f"| {case} | {way} | not run | | | | |")
            continue
        print(
            f"| {case} | {way} | {show(candle)} | {show(jit)} | {candle / jit:.1f}x "
            f"| {show(kernel)} | {show(jit - kernel)} |"
        )
    plumbing = CRITERION / "candle-plumbing" / "new" / "estimates.json"
    if plumbing.exists():
        with open(plumbing) as f:
            floor = json.load(f)["median"]["point_estimate"]
        print(f"\ncandle's custom-op floor (an op that only allocates S9's output): {show(floor)}")
    quantized()


def quantized():
    """The medians of benches/quantized_embedding.rs, if it ran."""
    if not (CRITERION / "candle-quantized-q4_0-1x32").exists():
        return
    print(
        "\n| table | ids | `QuantizedEmbedding` | kernel `call` | `QTensor::embedding` "
        "| dequantized table + `candle_nn::Embedding` |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name in ("q4_0", "q8_0"):
        for ids in ("1x32", "1x1"):
            case = f"quantized-{name}-{ids}"
            try:
                jit, kernel, qtensor, dequantized = (
                    median_ns(case, f) for f in ("jit", "kernel", "qtensor", "dequantized")
                )
            except FileNotFoundError:
                print(f"| {name} | [{ids.replace('x', ', ')}] | not run | | | |")
                continue
            print(
                f"| {name} | [{ids.replace('x', ', ')}] | {show(jit)} | {show(kernel)} "
                f"| {show(qtensor)} ({qtensor / jit:.1f}x) "
                f"| {show(dequantized)} ({dequantized / jit:.1f}x) |"
            )
    print("\n| table | dequantize the whole table | compile for 32 ids | compile for 1 id |")
    print("| --- | ---: | ---: | ---: |")
    for name in ("q4_0", "q8_0"):
        case = f"quantized-{name}-load"
        try:
            table, c32, c1 = (
                median_ns(case, f) for f in ("dequantize-table", "compile-32", "compile-1")
            )
        except FileNotFoundError:
            print(f"| {name} | not run | | |")
            continue
        print(f"| {name} | {show(table)} | {show(c32)} | {show(c1)} |")


if __name__ == "__main__":
    sys.exit(main())
