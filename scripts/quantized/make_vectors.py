#!/usr/bin/env python3
"""Conformance vectors for the quantized gathers: GatherBlockQuantized and GGUF rows.

Writes one JSON file per case to tests/conformance/quantized/<suite>/<name>.json (format:
tests/conformance/quantized/README.md) and deletes the suites' stale *.json files first, so the
output is exactly what this script produces. Rerun from the repository root with

    /work/venv-peers/bin/python scripts/quantized/make_vectors.py

(any Python 3.11 with numpy==2.4.6, onnx==1.23.2, onnxruntime==1.31.1, gguf==0.19.0 and ml_dtypes,
which onnx depends on; benches/peers/requirements.txt pins them). The inputs are seeded, so a
rerun with the same versions rewrites the same bytes.

Suites:

- `onnxruntime`: GatherBlockQuantized computed by ONNX Runtime's CPU provider (a one-node
  com.microsoft graph; data, scales and zero points as initializers, indices as the graph's input,
  graph optimisations off). Most cases use ORT's uint8 data form (whose packing is ours); the cases
  for other gather/quantize axes use ORT's UInt4 data form (`onnxruntime_data_type: "uint4"`),
  whose flat, row-major, low-nibble-first packing is byte for byte ours when the logical last dim
  is even (asserted below). Every ORT result is also checked bit for bit against the numpy
  definition below. Cases whose outcome is ORT's behaviour but not the issue's definition carry
  `onnxruntime_only` (say how they differ); their definition counterparts are in `definition`.
- `definition`: GatherBlockQuantized from the numpy implementation of the issue's definition in
  this file (`gbq_definition`): combinations ORT does not run (or runs differently).
- `gguf`: llama.cpp's get_rows on Q4_0 / Q8_0 rows, expected values from `gguf.quants.dequantize`
  (cross-checked against the block formula in `gguf_formula`).
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from pathlib import Path

import gguf
import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
from gguf import GGMLQuantizationType
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests/conformance/quantized"
SCRIPT = "scripts/quantized/make_vectors.py"
SUITES = ("onnxruntime", "definition", "gguf")
GGUF_VERSION = version("gguf")

NP_OF = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
TP_OF = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16,
         "bfloat16": TensorProto.BFLOAT16}  # fmt: skip


class Rejected(Exception):
    """The definition (or ORT) rejects the case; `category` is the expect_error string."""

    def __init__(self, category: str, detail: str = ""):
        super().__init__(f"{category}: {detail}")
        self.category = category


# --------------------------------------------------------------------------------------------
# Packing (our layout: the LAST axis of the stored uint8 tensor is packed)


def pack_last(q: np.ndarray, bits: int) -> np.ndarray:
    """Logical unsigned values (each < 2**bits) -> stored uint8, last axis packed: for bits=4 the
    even logical element in the low nibble. The logical last dim must be a multiple of 8/bits."""
    q = np.asarray(q)
    assert q.min(initial=0) >= 0 and q.max(initial=0) < (1 << bits)
    if bits == 8:
        return q.astype(np.uint8)
    assert bits == 4 and q.shape[-1] % 2 == 0, q.shape
    q = q.astype(np.uint8)
    return (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)


def pack_last_padded(q: np.ndarray, bits: int) -> np.ndarray:
    """As pack_last, but an odd last dim gets a zero high nibble in its last byte (zero points:
    ceil(blocks / 2) bytes per row)."""
    if bits == 4 and q.shape[-1] % 2:
        q = np.concatenate([q, np.zeros(q.shape[:-1] + (1,), q.dtype)], axis=-1)
    return pack_last(q, bits)


def unpack_last(stored: np.ndarray, bits: int) -> np.ndarray:
    if bits == 8:
        return stored.astype(np.int32)
    lo, hi = stored & 0x0F, stored >> 4
    return np.stack([lo, hi], axis=-1).reshape(stored.shape[:-1] + (-1,)).astype(np.int32)


def pack_flat_uint4(q: np.ndarray) -> bytes:
    """ONNX's UINT4 raw layout: the flat row-major logical values, two per byte, the first in the
    low nibble; an odd count gets a zero high nibble."""
    flat = np.asarray(q, np.uint8).ravel()
    if flat.size % 2:
        flat = np.append(flat, np.uint8(0))
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8).tobytes()


# --------------------------------------------------------------------------------------------
# GatherBlockQuantized: the definition


def scales_shape(logical: tuple[int, ...], qaxis: int, block: int) -> tuple[int, ...]:
    return tuple(-(-d // block) if i == qaxis else d for i, d in enumerate(logical))


def gbq_definition(q, indices, scales, zp, gather_axis, quantize_axis, block_size, bits):
    """The issue's GatherBlockQuantized on logical (unpacked) integer arrays: output, of scales'
    dtype, = (q - zero_point) * scale rounded once to scales' dtype (computed in float32; exact
    before the rounding for float16/bfloat16 scales), gathered with Gather's rule. Negative indices
    wrap; an index outside [-dim, dim) is an error. zp None -> 2**(bits-1)."""
    rank = q.ndim
    if bits not in (4, 8):
        raise Rejected("unsupported bits", str(bits))
    if block_size < 16 or block_size & (block_size - 1):
        raise Rejected("invalid block size", str(block_size))
    if not (-rank <= gather_axis < rank and -rank <= quantize_axis < rank):
        raise Rejected("axis out of range")
    ga, qa = gather_axis % rank, quantize_axis % rank
    if scales.shape != scales_shape(q.shape, qa, block_size):
        raise Rejected("shape mismatch", f"scales {scales.shape}")
    if zp is None:
        zp = np.full(scales.shape, 1 << (bits - 1), np.int32)
    elif zp.shape != scales.shape:
        raise Rejected("shape mismatch", f"zero points {zp.shape}")
    dim = q.shape[ga]
    idx = np.asarray(indices, np.int64)
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise Rejected("index out of bounds")
    n = q.shape[qa]
    s = np.repeat(scales.astype(np.float32), block_size, axis=qa).take(np.arange(n), axis=qa)
    z = np.repeat(zp.astype(np.int32), block_size, axis=qa).take(np.arange(n), axis=qa)
    full = ((q.astype(np.int32) - z).astype(np.float32) * s).astype(scales.dtype)
    return np.take(full, np.where(idx < 0, idx + dim, idx), axis=ga)


# --------------------------------------------------------------------------------------------
# GatherBlockQuantized: ONNX Runtime


def ort_gbq(q, indices, scales, zp, attrs: dict, data_type: str, bits: int):
    """Runs ORT's GatherBlockQuantized. q and zp are logical; data_type "uint8" packs them our way
    (last axis), "uint4" hands ORT UINT4 tensors (flat packing). `attrs` go to the node as given
    (an attribute left out takes ORT's default). Raises Rejected(ORT's message) on an error."""
    inits = []
    if data_type == "uint8":
        inits.append(numpy_helper.from_array(pack_last(q, bits), "data"))
        if zp is not None:
            inits.append(numpy_helper.from_array(pack_last_padded(zp, bits), "zero_points"))
    else:
        assert bits == 4
        inits.append(helper.make_tensor("data", TensorProto.UINT4, q.shape, pack_flat_uint4(q),
                                        raw=True))  # fmt: skip
        if zp is not None:
            inits.append(helper.make_tensor("zero_points", TensorProto.UINT4, zp.shape,
                                            pack_flat_uint4(zp), raw=True))  # fmt: skip
    if scales.dtype == ml_dtypes.bfloat16:
        inits.append(helper.make_tensor("scales", TensorProto.BFLOAT16, scales.shape,
                                        scales.view(np.uint16).tobytes(), raw=True))  # fmt: skip
        out_tp = TensorProto.BFLOAT16
    else:
        inits.append(numpy_helper.from_array(scales, "scales"))
        out_tp = TP_OF[np.dtype(scales.dtype).name]
    inputs = ["data", "indices", "scales"] + (["zero_points"] if zp is not None else [])
    node = helper.make_node("GatherBlockQuantized", inputs, ["output"], domain="com.microsoft",
                            **attrs)  # fmt: skip
    idx_tp = TensorProto.INT64 if indices.dtype == np.int64 else TensorProto.INT32
    graph = helper.make_graph(
        [node], "gbq", [helper.make_tensor_value_info("indices", idx_tp, indices.shape)],
        [helper.make_tensor_value_info("output", out_tp, None)], initializer=inits)  # fmt: skip
    model = helper.make_model(graph, ir_version=10, opset_imports=[
        helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])  # fmt: skip
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    try:
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return sess.run(None, {"indices": indices})[0]
    except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
        raise Rejected("onnxruntime", str(exc).splitlines()[0]) from exc


# --------------------------------------------------------------------------------------------
# JSON


def tensor(arr, dtype: str | None = None) -> dict:
    arr = np.asarray(arr)
    dtype = dtype or arr.dtype.name
    if dtype in ("float32", "float16", "bfloat16"):
        values = [float(v) for v in arr.ravel()]
        assert all(np.isfinite(values)), "non-finite values are not written"
        # The double is the element's exact value: it must round-trip.
        assert np.array_equal(np.array(values, np.float64).astype(NP_OF[dtype]).view(np.uint8),
                              arr.astype(NP_OF[dtype]).ravel().view(np.uint8))  # fmt: skip
    else:
        values = [int(v) for v in arr.ravel()]
    return {"dtype": dtype, "shape": list(arr.shape), "values": values}


def dump(case: dict) -> str:
    """One key per line, each tensor on one line, like tests/conformance/*/*.json."""
    lines = [f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in case.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"


CASES: dict[str, dict[str, dict]] = {s: {} for s in SUITES}


def emit(case: dict) -> None:
    suite, name = case["suite"], case["name"]
    assert name not in CASES[suite], f"duplicate case {suite}/{name}"
    CASES[suite][name] = case


# --------------------------------------------------------------------------------------------
# GatherBlockQuantized cases


ORT_SOURCE = (f"onnxruntime {ort.__version__} (PyPI), CPU provider, one-node com.microsoft "
              f"GatherBlockQuantized graph built with onnx {onnx.__version__}; {{form}}; "
              f"inputs seeded, {SCRIPT}")  # fmt: skip
DEF_SOURCE = (f"numpy {np.__version__}: gbq_definition() in {SCRIPT} (the issue's definition), "
              "inputs seeded")  # fmt: skip


def gbq_inputs(seed, logical, qaxis, block, bits, scale_dtype, with_zp, indices,
               index_dtype="int64", short=False):  # fmt: skip
    """Random logical data and zero points, random positive scales (exact in scale_dtype);
    short: scales k/256 (0 < k < 64), whose products print in few digits (smaller files)."""
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 1 << bits, logical).astype(np.int32)
    sshape = scales_shape(logical, qaxis, block)
    if short:
        scales = (rng.integers(1, 64, sshape) / 256).astype(np.float32)
    else:
        scales = rng.uniform(0.002, 0.25, sshape).astype(np.float32)
    scales = scales.astype(NP_OF[scale_dtype])
    zp = rng.integers(0, 1 << bits, sshape).astype(np.int32) if with_zp else None
    idx = np.array(indices, dtype=np.dtype(index_dtype))
    return q, idx, scales, zp


def gbq_case(suite, name, q, idx, scales, zp, ga, qa, block, bits, *, note=None,
             ort_form="uint8", ort_attrs=None, ort_zp=None, expected=None, expect_error=None,
             extra=None):  # fmt: skip
    """Builds the JSON case (our layout) for logical inputs. For suite onnxruntime, runs ORT and
    checks it against the definition (unless `expected`/`expect_error` are given: then ORT's
    outcome must equal them). `ort_zp` (logical) replaces `zp` for ORT only."""
    attrs = {"gather_axis": ga, "quantize_axis": qa, "block_size": block, "bits": bits}
    scale_dtype = np.dtype(scales.dtype).name
    case = {"suite": suite, "name": name}
    if suite == "onnxruntime":
        form = ("uint8 data (our packing)" if ort_form == "uint8" else
                "UINT4 data and zero points (ONNX's flat packing; the files hold ours)")  # fmt: skip
        case["source"] = ORT_SOURCE.format(form=form)
        case["onnxruntime_data_type"] = ort_form
    else:
        case["source"] = DEF_SOURCE
    case["op"] = "GatherBlockQuantized"
    case["attrs"] = attrs
    if q.shape[-1] % (8 // bits) == 0:
        case["data"] = tensor(pack_last(q, bits), "uint8")
    else:
        raise ValueError(f"{name}: logical last dim {q.shape[-1]} cannot be packed")
    case["indices"] = tensor(idx)
    case["scales"] = tensor(scales, scale_dtype)
    if zp is not None:
        case["zero_points"] = tensor(pack_last_padded(zp, bits), "uint8")

    if suite == "onnxruntime":
        node_attrs = attrs if ort_attrs is None else ort_attrs
        try:
            got = ort_gbq(q, idx, scales, zp if ort_zp is None else ort_zp, node_attrs, ort_form,
                          bits)  # fmt: skip
            outcome = None
        except Rejected as exc:
            got, outcome = None, str(exc)
        if expect_error is not None:
            assert outcome is not None, f"{name}: ORT accepted a case expected to fail"
            case["expect_error"] = expect_error
            case["onnxruntime_error"] = outcome.split(": ", 1)[1][:300]
            if not (extra or {}).get("onnxruntime_only"):  # the definition rejects it too
                def_bits = (ort_attrs or attrs).get("bits", bits)
                try:
                    gbq_definition(q, idx, scales, zp, ga, qa, block, def_bits)
                    raise AssertionError(f"{name}: the definition accepts it")
                except Rejected as exc:
                    assert exc.category == expect_error, (name, exc)
        else:
            assert outcome is None, f"{name}: ORT failed: {outcome}"
            if expected is None:
                want = gbq_definition(q, idx, scales, zp, ga, qa, block, bits)
                assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
                assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), \
                    f"{name}: ORT differs from the definition"  # fmt: skip
            else:
                assert np.array_equal(got.view(np.uint8), expected.view(np.uint8)), name
            case["expected"] = tensor(got, scale_dtype)
    else:
        try:
            want = gbq_definition(q, idx, scales, zp, ga, qa, block, bits)
            assert expect_error is None, f"{name}: the definition accepted it"
            case["expected"] = tensor(want, scale_dtype)
        except Rejected as exc:
            assert expect_error == exc.category, (name, exc)
            case["expect_error"] = expect_error
    if note:
        case["note"] = note
    case.update(extra or {})
    emit(case)
    return case


def ort_uint8_cases() -> None:
    S = "onnxruntime"
    # (name, seed, logical shape, block, bits, scale dtype, zero points, indices, index dtype, note)
    table = [
        ("b4-bs32-f32-i64", 1, (6, 64), 32, 4, "float32", False, [3, 0, -1, 5, -6], "int64",
         "no zero points: 8; negative indices wrap, -6 = -dim is row 0"),
        ("b4-bs16-zp-f32-i32-2d-indices", 2, (5, 48), 16, 4, "float32", True,
         [[4, -2, 0], [1, 1, -5]], "int32",
         "3 blocks per row: zero points packed into ceil(3/2) = 2 bytes, the last high nibble "
         "padding; a duplicate index"),
        ("b4-bs64-f16-i64", 3, (4, 128), 64, 4, "float16", False, [2, -3], "int64", None),
        ("b4-bs128-zp-f16-i32-2d-indices", 4, (3, 256), 128, 4, "float16", True,
         [[2], [-1]], "int32", None),
        ("b8-bs16-zp-f32-i64", 5, (4, 48), 16, 8, "float32", True, [1, -4, 3], "int64", None),
        ("b8-bs32-f16-i32", 6, (5, 64), 32, 8, "float16", False, [4, 0, -2], "int32",
         "no zero points: 128"),
        ("b8-bs64-zp-f16-i64-2d-indices", 7, (3, 128), 64, 8, "float16", True,
         [[0, 2], [-1, -3]], "int64", "scales k/256"),
        ("b8-bs128-f32-i32", 8, (2, 256), 128, 8, "float32", False, [1], "int32", None),
        ("b4-bs16-nonmultiple-zp-f32-i64", 9, (3, 40), 16, 4, "float32", True, [2, -3], "int64",
         "quantize axis 40 = 2 blocks of 16 and one of 8 (ORT accepts a length that is not a "
         "multiple of block_size: ceil(40/16) = 3 scales per row)"),
        ("b8-bs32-nonmultiple-f16-i32", 10, (3, 72), 32, 8, "float16", False, [0, 2], "int32",
         "quantize axis 72 = 2 blocks of 32 and one of 8"),
        ("b4-bs64-nonmultiple-f32-i64", 11, (2, 100), 64, 4, "float32", False, [-1], "int64",
         "quantize axis 100 = 64 + 36; data 50 bytes per row"),
        ("b4-bs32-scalar-index-i64", 12, (5, 32), 32, 4, "float32", True, -2, "int64",
         "scalar index (shape []): output shape [32]"),
        ("b8-bs16-scalar-index-i32", 13, (3, 16), 16, 8, "float16", True, 1, "int32", None),
        ("b4-bs32-empty-indices", 14, (3, 64), 32, 4, "float32", False, np.zeros((0,), int),
         "int64", "indices shape [0]: output shape [0, 64]"),
    ]
    for name, seed, logical, block, bits, sd, zp, ind, idt, note in table:
        q, idx, scales, zpv = gbq_inputs(seed, logical, 1, block, bits, sd, zp, ind, idt,
                                         short=bool(note and "k/256" in note))  # fmt: skip
        gbq_case(S, name, q, idx, scales, zpv, 0, 1, block, bits, note=note)

    # 3-D data, gather axis 0, quantize axis 2 (the last: all the uint8 form allows).
    for name, seed, bits, block, sd, zp, ind, idt in [
        ("3d-b4-bs32-ga0-qa2-f32-i64", 20, 4, 32, "float32", False, [1, -2], "int64"),
        ("3d-b4-bs16-ga0-qa2-zp-f16-i32", 21, 4, 16, "float16", True, [[0], [1]], "int32"),
        ("3d-b8-bs64-ga0-qa2-zp-f32-i32", 22, 8, 64, "float32", True, [-1], "int32"),
    ]:
        q, idx, scales, zpv = gbq_inputs(seed, (2, 5, 64), 2, block, bits, sd, zp, ind, idt,
                                         short=True)  # fmt: skip
        gbq_case(S, name, q, idx, scales, zpv, 0, 2, block, bits,
                 note="data [2, 5, 64] logical; scales k/256")  # fmt: skip

    # Negative axes (ORT normalises them): gather_axis -2 = 0, quantize_axis -1 = 1.
    q, idx, scales, zpv = gbq_inputs(23, (4, 32), 1, 16, 4, "float32", True, [3, -1], "int64")
    case = gbq_case(S, "b4-bs16-negative-axes", q, idx, scales, zpv, -2, -1, 16, 4,
                    note="gather_axis -2 and quantize_axis -1 of 2-D data: axes 0 and 1")  # fmt: skip
    assert case["expected"]["shape"] == [2, 32]

    # ORT's defaults: a node with no attributes = gather_axis 0, quantize_axis 1, block_size 128,
    # bits 4 (the file states them).
    q, idx, scales, zpv = gbq_inputs(24, (3, 128), 1, 128, 4, "float32", False, [2, 0], "int64")
    gbq_case(S, "defaults-no-attributes", q, idx, scales, zpv, 0, 1, 128, 4, ort_attrs={},
             note="the ORT node had no attributes; ORT's defaults are gather_axis 0, "
                  "quantize_axis 1, block_size 128, bits 4 (block_size has no default in the "
                  "issue, so the file gives all four)")  # fmt: skip

    # Hand-picked nibbles and zero points: the documented values, asserted.
    # Row 0: q alternates 0, 15; row 1: q = 1, 8; one block of 16 per row.
    q = np.array([[0, 15] * 8, [1, 8] * 8], np.int32)
    scales = np.array([[0.5], [0.25]], np.float32)
    idx = np.array([0, 1], np.int64)
    case = gbq_case(S, "b4-default-zero-point-documented", q, idx, scales, None, 0, 1, 16, 4,
                    note="no zero points: q=0 -> -8*scale, q=15 -> 7*scale, q=8 -> 0")  # fmt: skip
    out = np.array(case["expected"]["values"]).reshape(2, 16)
    assert list(out[0, :2]) == [-8 * 0.5, 7 * 0.5] and list(out[1, :2]) == [-7 * 0.25, 0.0]
    zp = np.array([[1], [1]], np.int32)  # zero point nibble 0x1 (stored byte 0x01: one block)
    case = gbq_case(S, "b4-zero-point-nibble-1", q, idx, scales, zp, 0, 1, 16, 4,
                    note="zero point nibble 0x1 (stored bytes 0x01): q=0 -> -1*scale, "
                         "q=15 -> 14*scale, q=1 -> 0")  # fmt: skip
    assert case["zero_points"]["values"] == [0x01, 0x01]
    out = np.array(case["expected"]["values"]).reshape(2, 16)
    assert list(out[0, :2]) == [-0.5, 14 * 0.5] and list(out[1, :2]) == [0.0, 7 * 0.25]
    # Two blocks per row, zero point byte 0x1F: low nibble 0xF (block 0), high 0x1 (block 1).
    q = np.array([[0] * 16 + [15] * 16], np.int32)
    zp = np.array([[15, 1]], np.int32)
    scales = np.array([[2.0, -0.125]], np.float32)
    case = gbq_case(S, "b4-zero-point-nibble-order", q, np.array([0], np.int32), scales, zp, 0,
                    1, 16, 4, note="zero point byte 0x1F: block 0 uses 0xF (q=0 -> -15*2 = -30), "
                    "block 1 uses 0x1 (q=15 -> 14*-0.125 = -1.75)")  # fmt: skip
    assert case["zero_points"]["values"] == [0x1F]
    out = case["expected"]["values"]
    assert out[0] == -30.0 and out[16] == -1.75
    q = np.array([[0, 255, 128, 127] * 4], np.int32)
    case = gbq_case(S, "b8-default-zero-point-documented", q, np.array([0], np.int64),
                    np.array([[0.5]], np.float32), None, 0, 1, 16, 8,
                    note="no zero points: 128; q=0 -> -64, q=255 -> 63.5, q=128 -> 0")  # fmt: skip
    assert case["expected"]["values"][:4] == [-64.0, 63.5, 0.0, -0.5]


def ort_uint4_cases() -> None:
    """Other gather/quantize axes through ORT's UINT4 data (its default zero point is 0, not 8,
    so every case passes zero points)."""
    S = "onnxruntime"
    table = [
        # name, seed, logical, ga, qa, block, scale dtype, indices, index dtype, note
        ("u4-3d-ga1-qa2-bs16-zp-f32-i64", 30, (3, 6, 32), 1, 2, 16, "float32", [5, -1, 0], "int64",
         None),
        ("u4-3d-ga2-qa1-bs32-zp-f16-i32", 31, (2, 36, 10), 2, 1, 32, "float16", [[9, -10], [3, 3]],
         "int32", "quantize axis 1 of length 36: blocks of 32 and 4; gather along the last axis"),
        ("u4-2d-ga1-qa0-bs16-zp-f32-i32", 32, (48, 8), 1, 0, 16, "float32", [7, -8, 2], "int32",
         "quantize axis 0 (3 blocks of 16 rows), gather along axis 1"),
        ("u4-2d-ga0-qa0-bs16-zp-f16-i64", 33, (40, 6), 0, 0, 16, "float16", [39, -1, 0, 17, 16],
         "int64", "gather_axis = quantize_axis = 0 (ORT's UINT4 form accepts it): a gathered row "
                  "keeps the scales and zero points of its own block (40 = 16 + 16 + 8)"),
        ("u4-3d-ga0-qa1-bs16-zp-f32-i64", 34, (3, 20, 4), 0, 1, 16, "float32", -3, "int64",
         "scalar index; zero points [3, 2, 4] logical, [3, 2, 2] stored"),
        ("u4-3d-ga2-qa0-bs16-zp-f32-i64", 35, (17, 2, 6), 2, 0, 16, "float32", [[5], [0]],
         "int64", "zero points [2, 2, 6] logical"),
    ]
    for name, seed, logical, ga, qa, block, sd, ind, idt, note in table:
        q, idx, scales, zp = gbq_inputs(seed, logical, qa, block, 4, sd, True, ind, idt)
        # Our stored data bytes are exactly ONNX's UINT4 raw bytes (flat order, last dim even).
        assert pack_last(q, 4).tobytes() == pack_flat_uint4(q)
        gbq_case(S, name, q, idx, scales, zp, ga, qa, block, 4, ort_form="uint4", note=note)

    # ORT's UINT4 default zero point is 0; the (and the uint8 form's) is 8. A case
    # without zero points in the file: ORT was given explicit zero points 8.
    q, idx, scales, _ = gbq_inputs(36, (2, 4, 32), 2, 32, 4, "float32", False, [3, 0], "int64")
    zp8 = np.full(scales.shape, 8, np.int32)
    attrs = {"gather_axis": 1, "quantize_axis": 2, "block_size": 32, "bits": 4}
    got0 = ort_gbq(q, idx, scales, None, attrs, "uint4", 4)
    zp0 = np.zeros(scales.shape, np.int32)
    assert np.array_equal(got0, gbq_definition(q, idx, scales, zp0, 1, 2, 32, 4)), \
        "ORT's UINT4 form without zero points should use 0"  # fmt: skip
    # gbq_case checks ORT's result (given zp8) against the definition without zero points.
    gbq_case(S, "u4-3d-ga1-qa2-bs32-default-zero-point", q, idx, scales, None, 1, 2, 32, 4,
             ort_form="uint4", ort_zp=zp8,
             note="no zero points in the file (so 8); ORT's UINT4 form defaults to 0, so ORT was "
                  "given UINT4 zero points all 8")  # fmt: skip


def ort_error_cases() -> None:
    S = "onnxruntime"
    rng = np.random.default_rng(40)
    q = rng.integers(0, 16, (4, 64)).astype(np.int32)
    idx = np.array([1], np.int64)

    def sc(block, qa=1, shape=(4, 64), dtype=np.float32):
        return np.full(scales_shape(shape, qa, block), 0.5, dtype)

    for block in (8, 24):
        gbq_case(S, f"error-block-size-{block}", q, idx, sc(block), None, 0, 1, block, 4,
                 expect_error="invalid block size",
                 note="block_size must be a power of two >= 16 (ORT: at session creation)")  # fmt: skip
    # bits 3: the file's data is the bits=4 packing of the same bytes (3-bit values do not pack).
    case = gbq_case(S, "error-bits-3", q, idx, sc(32), None, 0, 1, 32, 4,
                    expect_error="unsupported bits", ort_attrs={"gather_axis": 0,
                    "quantize_axis": 1, "block_size": 32, "bits": 3},
                    note="ORT was given bits=3 with these uint8 bytes (shape [4, 32])")  # fmt: skip
    case["attrs"]["bits"] = 3
    # Scales of the wrong shape.
    bad = np.full((4, 3), 0.5, np.float32)
    gbq_case(S, "error-scales-shape", q, idx, bad, None, 0, 1, 32, 4, expect_error="shape mismatch",
             note="scales [4, 3] for 64 values in blocks of 32 (needs [4, 2])")  # fmt: skip
    # Zero points of the wrong shape (3 bytes per row for 2 blocks; needs 1).
    zp = np.full((4, 6), 8, np.int32)
    gbq_case(S, "error-zero-points-shape", q, idx, sc(32), zp, 0, 1, 32, 4,
             expect_error="shape mismatch",
             note="zero points [4, 3] stored for scales [4, 2] (needs [4, 1])")  # fmt: skip


def ort_vs_definition_cases() -> None:
    """What ORT does differently from the issue's definition: its outcome in `onnxruntime`
    (marked onnxruntime_only), the definition's in `definition`."""
    rng = np.random.default_rng(50)
    q = rng.integers(0, 16, (4, 32)).astype(np.int32)
    scales = rng.uniform(0.01, 0.2, (4, 2)).astype(np.float32)
    # Out-of-range indices: ORT 1.31.1 writes zeros for that index's slice; an error here.
    for name, ind in [("index-out-of-range", [1, 4]), ("index-out-of-range-negative", [-5, 0])]:
        idx = np.array(ind, np.int64)
        got = ort_gbq(q, idx, scales, None, {"block_size": 16, "bits": 4}, "uint8", 4)
        bad = 1 if ind[1] == 4 else 0
        assert not got[bad].any(), "ORT should zero-fill an out-of-range index's row"
        gbq_case("onnxruntime", name, q, idx, scales, None, 0, 1, 16, 4, expected=got,
                 note=f"index {ind[bad]} of a dim of 4: ORT 1.31.1 writes zeros for its row "
                      "and does not fail",
                 extra={"onnxruntime_only": "the definition rejects an index outside "
                                           f"[-dim, dim): definition/{name}"})  # fmt: skip
        gbq_case("definition", name, q, idx, scales, None, 0, 1, 16, 4,
                 expect_error="index out of bounds",
                 note="ORT 1.31.1 does not fail: it writes zeros (onnxruntime/" + name + ")")  # fmt: skip

    # gather_axis 1 with uint8 data: ORT rejects it (uint8 data needs gather_axis 0 and the
    # quantize axis last); the definition computes it.
    q3, idx3, sc3, zp3 = gbq_inputs(51, (3, 4, 32), 2, 16, 4, "float32", True, [3, -4, 1], "int32")
    gbq_case("onnxruntime", "error-uint8-gather-axis-1", q3, idx3, sc3, zp3, 1, 2, 16, 4,
             expect_error="unsupported axes",
             note="ORT's uint8 form allows only gather_axis 0 with the quantize axis last",
             extra={"onnxruntime_only": "the definition allows any gather_axis: "
                                       "definition/uint8-gather-axis-1"})  # fmt: skip
    gbq_case("definition", "uint8-gather-axis-1", q3, idx3, sc3, zp3, 1, 2, 16, 4,
             note="the inputs of onnxruntime/error-uint8-gather-axis-1, which ORT's uint8 form "
                  "rejects (its UINT4 form accepts such axes: the onnxruntime u4-* cases)")  # fmt: skip
    # 2-D, gather_axis 1 = quantize_axis 1 (the combination the probe of ORT used).
    q2, idx2, sc2, _ = gbq_inputs(52, (3, 64), 1, 32, 4, "float32", False, [63, -64, 31, 32],
                                  "int64")  # fmt: skip
    gbq_case("onnxruntime", "error-uint8-gather-axis-1-2d", q2, idx2, sc2, None, 1, 1, 32, 4,
             expect_error="unsupported axes",
             extra={"onnxruntime_only": "the definition allows it: "
                                       "definition/uint8-gather-axis-1-2d"})  # fmt: skip
    gbq_case("definition", "uint8-gather-axis-1-2d", q2, idx2, sc2, None, 1, 1, 32, 4,
             note="gather along the packed, quantized last axis: each gathered column keeps its "
                  "block's scale (ORT's uint8 form rejects this)")  # fmt: skip

    # bfloat16 scales: ORT 1.31.1 has no kernel (T2 is float or float16).
    qb, idxb, scb, zpb = gbq_inputs(53, (3, 32), 1, 16, 4, "bfloat16", True, [2, -3], "int64")
    gbq_case("onnxruntime", "error-scales-bfloat16", qb, idxb, scb, zpb, 0, 1, 16, 4,
             expect_error="unsupported scales dtype",
             note="ORT 1.31.1: no GatherBlockQuantized kernel with bfloat16 scales (NOT_IMPLEMENTED)",
             extra={"onnxruntime_only": "the issue lists bfloat16 scales: definition/scales-bfloat16"})  # fmt: skip
    gbq_case("definition", "scales-bfloat16", qb, idxb, scb, zpb, 0, 1, 16, 4,
             note="bfloat16 scales and output: (q - zero point) * scale in float32 (exact), "
                  "then rounded to bfloat16 (exact too here)")  # fmt: skip
    qb8, idxb8, scb8, _ = gbq_inputs(54, (2, 64), 1, 32, 8, "bfloat16", False, [1], "int32")
    gbq_case("definition", "scales-bfloat16-b8", qb8, idxb8, scb8, None, 0, 1, 32, 8)

    # bits 2: ORT's uint8 form accepts it (four values per byte, lowest bits first, default zero
    # point 2); the issue allows 4 and 8 only.
    rng = np.random.default_rng(55)
    q2b = rng.integers(0, 4, (3, 64)).astype(np.int32)
    packed = (q2b[:, 0::4] | q2b[:, 1::4] << 2 | q2b[:, 2::4] << 4 | q2b[:, 3::4] << 6).astype(np.uint8)
    sc2b = rng.uniform(0.01, 0.2, (3, 2)).astype(np.float32)
    idx2b = np.array([2, -3], np.int64)
    node_attrs = {"block_size": 32, "bits": 2}
    got = _ort_raw_uint8(packed, idx2b, sc2b, node_attrs)
    full = ((q2b - 2).astype(np.float32) * np.repeat(sc2b, 32, axis=1))
    assert np.array_equal(got, full[[2, 0]])
    emit({"suite": "onnxruntime", "name": "b2-bs32-f32-i64",
          "source": ORT_SOURCE.format(form="uint8 data, bits=2 (four values per byte, lowest "
                                           "bits first)"),
          "onnxruntime_data_type": "uint8", "op": "GatherBlockQuantized",
          "attrs": {"gather_axis": 0, "quantize_axis": 1, "block_size": 32, "bits": 2},
          "data": tensor(packed, "uint8"), "indices": tensor(idx2b), "scales": tensor(sc2b),
          "expected": tensor(got),
          "note": "ORT 1.31.1 accepts bits=2 with uint8 data: value (q - 2) * scale",
          "onnxruntime_only": "the issue allows bits 4 and 8 only: definition/error-bits-2"})  # fmt: skip
    emit({"suite": "definition", "name": "error-bits-2", "source": DEF_SOURCE,
          "op": "GatherBlockQuantized",
          "attrs": {"gather_axis": 0, "quantize_axis": 1, "block_size": 32, "bits": 2},
          "data": tensor(packed, "uint8"), "indices": tensor(idx2b), "scales": tensor(sc2b),
          "expect_error": "unsupported bits",
          "note": "the issue's bits are 4 or 8; ORT accepts 2 (onnxruntime/b2-bs32-f32-i64)"})  # fmt: skip


def _ort_raw_uint8(packed, indices, scales, attrs):
    """ORT on already packed uint8 data (for bits=2, which pack_last does not do)."""
    inits = [numpy_helper.from_array(packed, "data"), numpy_helper.from_array(scales, "scales")]
    node = helper.make_node("GatherBlockQuantized", ["data", "indices", "scales"], ["output"],
                            domain="com.microsoft", **attrs)  # fmt: skip
    graph = helper.make_graph(
        [node], "gbq", [helper.make_tensor_value_info("indices", TensorProto.INT64, indices.shape)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, None)], initializer=inits)  # fmt: skip
    model = helper.make_model(graph, ir_version=10, opset_imports=[
        helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])  # fmt: skip
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"indices": indices})[0]


def definition_cases() -> None:
    """Axis combinations ORT's uint8 form rejects, with bits=8 or without zero points (which its
    UINT4 form cannot express)."""
    S = "definition"
    table = [
        ("b8-2d-ga1-qa0-bs16-zp-f32-i32", 60, (40, 6), 1, 0, 16, 8, "float32", True, [5, -6, 0],
         "int32", "quantize axis 0 (40 = 16 + 16 + 8), gather along axis 1"),
        ("b8-3d-ga2-qa1-bs16-f16-i64", 61, (2, 20, 4), 2, 1, 16, 8, "float16", False, [[3, -4]],
         "int64", None),
        ("b8-3d-ga1-qa2-bs32-zp-f32-i64", 62, (2, 5, 32), 1, 2, 32, 8, "float32", True, [4, -5],
         "int64", None),
        ("b8-2d-ga0-qa0-bs16-f32-i64", 63, (20, 4), 0, 0, 16, 8, "float32", False, [19, 15, 16],
         "int64", "gather_axis = quantize_axis: rows 15 and 16 lie in different blocks"),
        ("b4-3d-ga1-qa2-bs16-f32-i32", 64, (3, 6, 32), 1, 2, 16, 4, "float32", False, [5, -6],
         "int32", "no zero points: 8"),
        ("b4-2d-ga1-qa0-bs32-f16-i64", 65, (40, 8), 1, 0, 32, 4, "float16", False, [7, 0], "int64",
         "no zero points: 8; quantize axis 0"),
        ("b4-3d-ga2-qa0-bs16-zp-f32-i64", 66, (17, 2, 6), 2, 0, 16, 4, "float32", True, [1, -1],
         "int64", None),
        ("b4-4d-ga1-qa3-bs16-zp-f16-i32", 67, (2, 3, 2, 16), 1, 3, 16, 4, "float16", True,
         [[2, 0], [1, -3]], "int32", "4-D data"),
    ]
    for name, seed, logical, ga, qa, block, bits, sd, zp, ind, idt, note in table:
        q, idx, scales, zpv = gbq_inputs(seed, logical, qa, block, bits, sd, zp, ind, idt)
        gbq_case(S, name, q, idx, scales, zpv, ga, qa, block, bits, note=note)


# --------------------------------------------------------------------------------------------
# GGUF rows


GGUF = {"q4_0": GGMLQuantizationType.Q4_0, "q8_0": GGMLQuantizationType.Q8_0}


def gguf_formula(data: np.ndarray, fmt: str) -> np.ndarray:
    """The block formula of the issue, byte by byte: uint8 [rows, bytes] -> f32 [rows, row_len]."""
    tsize = 18 if fmt == "q4_0" else 34
    rows, nbytes = data.shape
    out = []
    for r in range(rows):
        row = []
        for b in range(nbytes // tsize):
            blk = data[r, b * tsize:(b + 1) * tsize]
            d = np.float32(blk[:2].view("<f2")[0])
            if fmt == "q4_0":
                lo = [np.float32(int(x & 0x0F) - 8) * d for x in blk[2:]]
                hi = [np.float32(int(x >> 4) - 8) * d for x in blk[2:]]
                row += lo + hi
            else:
                row += [np.float32(int(x)) * d for x in blk[2:].view(np.int8)]
        out.append(row)
    return np.array(out, np.float32).reshape(rows, nbytes // tsize * 32)


def gguf_case(name, fmt, data, indices, note=None, how="random"):
    gtype = GGUF[fmt]
    row_len = gguf.quants.quant_shape_from_byte_shape(data.shape, gtype)[-1]
    gathered = data[indices.reshape(-1)] if indices.ndim else data[int(indices)][None]
    want = gguf.quants.dequantize(gathered, gtype).reshape(indices.shape + (row_len,))
    assert want.dtype == np.float32
    formula = gguf_formula(gathered, fmt).reshape(want.shape)
    assert np.array_equal(want.view(np.uint32), formula.view(np.uint32)), \
        f"{name}: gguf.quants differs from the block formula"  # fmt: skip
    src = (f"gguf {GGUF_VERSION} (PyPI): {how}, expected = gguf.quants.dequantize of the "
           f"gathered rows (equal to the block formula, checked); {SCRIPT}")  # fmt: skip
    case = {"suite": "gguf", "name": name, "source": src, "op": "GgufRows",
            "attrs": {"format": fmt}, "data": tensor(data, "uint8"), "indices": tensor(indices),
            "expected": tensor(want, "float32")}  # fmt: skip
    if note:
        case["note"] = note
    emit(case)


def gguf_cases() -> None:
    table = [
        # name, seed, format, rows, row_len, indices, index dtype
        ("q4_0-row32-i32", 70, "q4_0", 5, 32, [3, 0, 4, 3], "int32"),
        ("q4_0-row64-i64-2d-indices", 71, "q4_0", 4, 64, [[1, 3], [0, 1]], "int64"),
        ("q4_0-row256-i64", 72, "q4_0", 3, 256, [2], "int64"),
        ("q4_0-row32-scalar-index-i64", 73, "q4_0", 3, 32, 1, "int64"),
        ("q8_0-row32-i64-2d-indices", 74, "q8_0", 4, 32, [[3, 1], [1, 0]], "int64"),
        ("q8_0-row64-i32", 75, "q8_0", 5, 64, [4, 2, 2], "int32"),
        ("q8_0-row256-i32-2d-indices", 76, "q8_0", 3, 256, [[2]], "int32"),
        ("q8_0-row64-empty-indices-i64", 77, "q8_0", 2, 64, np.zeros((0,), int), "int64"),
    ]
    for name, seed, fmt, rows, row_len, ind, idt in table:
        rng = np.random.default_rng(seed)
        table_f32 = rng.standard_normal((rows, row_len), dtype=np.float32)
        data = gguf.quants.quantize(table_f32, GGUF[fmt])
        assert data.dtype == np.uint8 and data.shape == (rows, row_len // 32 * (18 if fmt == "q4_0" else 34))
        gguf_case(name, fmt, data, np.array(ind, np.dtype(idt)),
                  how=f"gguf.quants.quantize of a random f32 table [{rows}, {row_len}] (seeded)")  # fmt: skip

    # Hand-picked blocks: extreme nibbles / int8 values and f16 scales.
    ds = [0.5, -2.0, 65504.0, -65504.0, 2.0**-24, 0.0, -0.0, 1.0]  # 2**-24: smallest f16 subnormal

    def d_bytes(d):
        return list(np.array([d], "<f2").view(np.uint8))

    blocks = []
    nib_patterns = [[0x00] * 16, [0xFF] * 16, [0xF0] * 16, [0x0F] * 16,
                    list(range(0, 256, 17)), [0x80, 0x08, 0x7F, 0xF7] * 4, [0x88] * 16,
                    [0x0F, 0xF0] * 8]  # fmt: skip
    for d, qs in zip(ds, nib_patterns):
        blocks.append(d_bytes(d) + qs)
    q4 = np.array(blocks, np.uint8).reshape(4, 2 * 18)  # 4 rows of 2 blocks: row_len 64
    gguf_case("q4_0-extremes", "q4_0", q4, np.array([3, 0, 2, 1, 0], np.int32), how="hand-picked blocks",
              note="d in {0.5, -2, 65504, -65504, 2^-24, 0, -0, 1}; nibbles 0x0 and 0xF (value "
                   "-8*d and 7*d), 0x8 (0); e.g. d=65504 with nibble 0 gives -524032")  # fmt: skip
    i8_patterns = [[-128] * 32, [127] * 32, [-128, 127, 0, -1] * 8, list(range(-16, 16)),
                   [1, -1] * 16, [0] * 32, [-128] * 16 + [127] * 16, list(range(96, 128))]
    blocks = [d_bytes(d) + list(np.array(qs, np.int8).view(np.uint8))
              for d, qs in zip(ds, i8_patterns)]  # fmt: skip
    q8 = np.array(blocks, np.uint8).reshape(4, 2 * 34)
    gguf_case("q8_0-extremes", "q8_0", q8, np.array([[1, 2], [3, 0]], np.int64),
              how="hand-picked blocks",
              note="d in {0.5, -2, 65504, -65504, 2^-24, 0, -0, 1}; q = -128 and 127, e.g. "
                   "d=-65504 with q=-128 gives 8384512")  # fmt: skip
    # The documented values, asserted on the files' numbers (row r = blocks 2r and 2r+1).
    v4 = CASES["gguf"]["q4_0-extremes"]["expected"]["values"]
    neg0 = lambda v: v == 0 and np.signbit(v)  # noqa: E731
    assert all(neg0(v) for v in v4[0:32])  # row 3, block 6: d=-0, nibbles 8: 0 * -0 = -0
    assert v4[32:34] == [7.0, -8.0] and v4[48:50] == [-8.0, 7.0]  # block 7: d=1, 0x0F/0xF0
    assert v4[64] == -4.0 and v4[96] == -14.0  # row 0: d=0.5 nibble 0; d=-2 nibble 0xF
    assert v4[128] == -8 * 2.0**-24 and v4[143] == 7 * 2.0**-24 and v4[144] == -8 * 2.0**-24
    assert neg0(v4[160])  # block 5: d=+0, nibble 0: -8 * 0 = -0
    assert v4[192] == -524032.0 and v4[208] == 7 * 65504.0  # d=65504, byte 0xF0
    assert v4[224] == 7 * -65504.0 and v4[240] == 524032.0  # d=-65504, byte 0x0F
    v8 = CASES["gguf"]["q8_0-extremes"]["expected"]["values"]
    assert v8[0:4] == [-128 * 65504.0, 127 * 65504.0, 0.0, -65504.0]  # row 1, block 2
    assert v8[32] == 16 * 65504.0  # block 3: d=-65504, q=-16
    assert v8[64:66] == [2.0**-24, -(2.0**-24)]  # row 2, block 4
    assert v8[128] == 0.0 and not np.signbit(v8[128])  # row 3, block 6: -0 * -128 = +0
    assert neg0(v8[144]) and v8[160] == 96.0  # -0 * 127 = -0; block 7: d=1, q=96
    assert v8[192] == -64.0 and v8[224] == -254.0  # row 0: 0.5 * -128, -2 * 127


# --------------------------------------------------------------------------------------------


def main() -> int:
    ort_uint8_cases()
    ort_uint4_cases()
    ort_error_cases()
    ort_vs_definition_cases()
    definition_cases()
    gguf_cases()
    total = 0
    for suite in SUITES:
        directory = OUT / suite
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.json"):
            stale.unlink()
        for name, case in sorted(CASES[suite].items()):
            text = dump(case)
            (directory / f"{name}.json").write_text(text)
            total += len(text)
        print(f"{suite}: {len(CASES[suite])} cases", file=sys.stderr)
    print(f"{sum(map(len, CASES.values()))} files, {total:,} bytes under {OUT.relative_to(REPO)}",
          file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
