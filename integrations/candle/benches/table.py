"""The medians of `cargo bench -p gather-jit-candle` as the markdown tables of docs/integrations.md.

Run from the repository's root after the bench: python3 integrations/candle/benches/table.py
"""

import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
# Where cargo put criterion's results: $CARGO_TARGET_DIR if set, as cargo does.
CRITERION = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "criterion"

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
    scatter()


# What candle runs for each scatter case (see benches/scatter.rs).
SCATTER_WAY = {
    "W2": "`index_add` [1024, 768] rows into zeros [30522, 768], Zipf ids",
    "W3": "`scatter_add` [64, 1024] into [64, 4096] along 1",
    "W4": "`scatter` [1024, 1024] along 0, a permutation",
}


def scatter():
    """The medians of benches/scatter.rs, if it ran."""
    if not (CRITERION / "candle-scatter-W2").exists():
        return
    print(
        "\n| case | candle's op | candle | JIT op | speed-up | candle in place "
        "| JIT in place | speed-up |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for case, way in SCATTER_WAY.items():
        group = f"scatter-{case}"
        try:
            candle, jit, jit_set = (
                median_ns(group, f) for f in ("candle", "jit", "jit-in-place")
            )
        except FileNotFoundError:
            print(f"| {case} | {way} | not run | | | | | |")
            continue
        try:
            candle_set = median_ns(group, "candle-in-place")
            in_place = f"{show(candle_set)} | {show(jit_set)} | {candle_set / jit_set:.1f}x"
        except FileNotFoundError:
            in_place = f"none | {show(jit_set)} | {candle / jit_set:.1f}x vs out of place"
        print(
            f"| {case} | {way} | {show(candle)} | {show(jit)} | {candle / jit:.1f}x | {in_place} |"
        )
    try:
        candle, jit = (median_ns("scatter-W2-grad", f) for f in ("candle", "jit"))
        print(
            f"| W2 gradient | backward of an embedding lookup of W2's ids | {show(candle)} "
            f"| {show(jit)} | {candle / jit:.1f}x | | | |"
        )
    except FileNotFoundError:
        pass


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
