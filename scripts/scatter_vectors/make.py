#!/usr/bin/env python3
"""Writes the scatter conformance vectors under tests/conformance/scatter/ (format: its README).

Rerun from the repository root (it deletes each suite's old *.json files and rewrites them; same
package versions, same bytes):

    /work/venv-scatter/bin/python scripts/scatter_vectors/make.py

Suites, each file one case:
  onnx-node       the ONNX backend node tests test_scatter* (onnx wheel's test data), converted.
  onnxruntime     one-node ONNX models (opset 18) run by ONNX Runtime's CPU provider.
  onnx-reference  ONNX's own reference implementation (onnx.reference), for the f16 / bf16
                  reductions ONNX Runtime's CPU provider does not implement.
  openvino        one-node OpenVINO models run by the CPU plugin, on the element types the plugin
                  computes natively (f32, f16, bf16, i32, i8, u8).
  openvino-spec   the examples of the OpenVINO operator specs, typed from the spec pages.
  definition      cases no runtime here decides: TensorRT (no GPU), the places where OpenVINO's
                  CPU plugin departs from OpenVINO's reference (recorded, see "openvino_cpu"),
                  and validation errors.

Every runtime output is also compared, bit for bit (any NaN equal to any NaN), with `model()`
below, a NumPy transcription of docs/semantics.md#scatters: the script stops on a difference that
is not one of the known, recorded divergences. The Rust interpreter is never consulted.
"""

from __future__ import annotations

import json
import math
import pathlib
import sys

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "conformance" / "scatter"
BF16 = np.dtype(ml_dtypes.bfloat16)

DTYPE_NAMES = {
    np.dtype(np.float16): "float16",
    BF16: "bfloat16",
    np.dtype(np.float32): "float32",
    np.dtype(np.float64): "float64",
    np.dtype(np.int8): "int8",
    np.dtype(np.uint8): "uint8",
    np.dtype(np.int16): "int16",
    np.dtype(np.uint16): "uint16",
    np.dtype(np.int32): "int32",
    np.dtype(np.uint32): "uint32",
    np.dtype(np.int64): "int64",
    np.dtype(np.uint64): "uint64",
    np.dtype(np.bool_): "bool",
}
ONNX_TYPES = {
    np.dtype(np.float16): TensorProto.FLOAT16,
    BF16: TensorProto.BFLOAT16,
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.int16): TensorProto.INT16,
    np.dtype(np.uint16): TensorProto.UINT16,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.uint32): TensorProto.UINT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.uint64): TensorProto.UINT64,
    np.dtype(np.bool_): TensorProto.BOOL,
}
FLOATS = {np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)}
OP_NAMES = {"nd": "ScatterND", "elements": "ScatterElements", "update": "ScatterUpdate"}


# ------------------------------------------------------------------------------------------
# The semantics, transcribed from docs/semantics.md#scatters (independent of the Rust code).

WRAP_FLAVORS = {
    "onnx",
    "openvino-scatterndupdate3",
    "openvino-scatterndupdate15",
    "openvino-scatterelementsupdate3",
    "openvino-scatterelementsupdate12",
}


def ov_bf16(x: np.float32) -> np.uint16:
    """OpenVINO's ov::bfloat16(float): (b + ((b & 0x10000) >> 1)) >> 16 in 32-bit arithmetic."""
    b = int(np.float32(x).view(np.uint32))
    return np.uint16(((b + ((b & 0x10000) >> 1)) & 0xFFFFFFFF) >> 16)


def to_dtype(x32, dtype, flavor):
    """An f32 arithmetic result as an element of a half type."""
    if dtype == BF16 and flavor.startswith("openvino"):
        return ov_bf16(x32).view(BF16)
    return np.float32(x32).astype(dtype)


def rd_f64(v: int) -> int:
    """The largest f64 not above the integer v."""
    if abs(v) <= 2**53:
        return v
    d = float(v)
    if int(d) > v:
        d = math.nextafter(d, -math.inf)
    return int(d)


def wrap(v: int, dtype) -> int:
    info = np.iinfo(dtype)
    span = int(info.max) - int(info.min) + 1
    return (v - int(info.min)) % span + int(info.min)


def combine(cur, upd, reduction, dtype, flavor):
    """One update of one element (numpy scalars of `dtype`)."""
    if reduction == "none":
        return upd
    if dtype == np.bool_:
        c, u = bool(cur), bool(upd)
        return np.bool_({"sum": c | u, "max": c | u, "mean": c | u, "prod": c & u,
                         "min": c & u, "sub": c ^ u}[reduction])
    if reduction in ("max", "min"):
        c, u = (float(cur), float(upd)) if dtype in FLOATS else (int(cur), int(upd))
        if flavor == "openvino-scatterndupdate15":  # std::max(cur, upd), std::min(cur, upd)
            keep = not (c < u) if reduction == "max" else not (u < c)
        else:  # cur > upd ? cur : upd (ONNX Runtime, OpenVINO ScatterElementsUpdate-12)
            keep = c > u if reduction == "max" else c < u
        return cur if keep else upd
    if dtype in FLOATS:
        wide = np.float64 if dtype == np.float64 else np.float32
        c, u = wide(cur), wide(upd)
        with np.errstate(all="ignore"):
            r = {"sum": c + u, "mean": c + u, "sub": c - u, "prod": c * u}[reduction]
        return r if dtype in (np.float32, np.float64) else to_dtype(r, dtype, flavor)
    c, u = int(cur), int(upd)
    r = {"sum": c + u, "mean": c + u, "sub": c - u, "prod": c * u}[reduction]
    return dtype.type(wrap(r, dtype))


def neutral(reduction, dtype):
    if dtype == np.bool_:
        return np.bool_(reduction in ("prod", "min"))
    if reduction in ("sum", "mean"):
        return dtype.type(0)
    if reduction == "prod":
        return dtype.type(1)
    if dtype in FLOATS:
        info = ml_dtypes.finfo(dtype) if dtype == BF16 else np.finfo(dtype)
        return dtype.type(info.min if reduction == "max" else info.max)
    info = np.iinfo(dtype)
    return dtype.type(info.min if reduction == "max" else info.max)


def mean(total, n, dtype, flavor):
    if dtype in FLOATS:
        wide = np.float64 if dtype == np.float64 else np.float32
        r = wide(total) / wide(n)
        return r if dtype in (np.float32, np.float64) else to_dtype(r, dtype, flavor)
    return dtype.type(rd_f64(rd_f64(int(total)) // n))  # floor of the f64 quotient, rounded down


class IndexError_(Exception):
    pass


def model(op, flavor, data, indices, updates, axis=0, reduction="none", use_init_val=True):
    """The output of a scatter, or IndexError_ / a duplicate error (as exceptions)."""
    dtype = data.dtype
    out = data.copy().reshape(-1)
    dshape = data.shape
    negative_wraps = flavor in WRAP_FLAVORS
    if axis < 0:
        axis += data.ndim

    def resolve(value, size):
        value = int(value)
        if value < 0 and negative_wraps:
            value += size
        if not 0 <= value < size:
            raise IndexError_("index out of bounds")
        return value

    flat_idx = indices.reshape(-1)
    targets = []  # per update element, the data offset
    if op == "nd":
        k = indices.shape[-1]
        resolved = [resolve(v, dshape[n % k]) for n, v in enumerate(flat_idx)]
        slice_len = int(np.prod(dshape[k:], dtype=np.int64))
        tuples = len(resolved) // k if k else 0
        for t in range(tuples):
            base = int(np.ravel_multi_index(resolved[t * k:(t + 1) * k], dshape[:k])) if k else 0
            targets.extend(base * slice_len + j for j in range(slice_len))
    elif op == "elements":
        resolved = [resolve(v, dshape[axis]) for v in flat_idx]
        for n, pos in enumerate(np.ndindex(*indices.shape)):
            p = list(pos)
            p[axis] = resolved[n]
            targets.append(int(np.ravel_multi_index(p, dshape)))
    else:  # update
        resolved = [resolve(v, dshape[axis]) for v in flat_idx]
        q = indices.ndim
        for pos in np.ndindex(*updates.shape):
            i = int(np.ravel_multi_index(pos[axis:axis + q], indices.shape)) if q else 0
            p = list(pos[:axis]) + [resolved[i]] + list(pos[axis + q:])
            targets.append(int(np.ravel_multi_index(p, dshape)))
    if flavor == "tensorrt" and len(set(targets)) != len(targets):
        raise IndexError_("duplicate index")
    flat_upd = updates.reshape(-1)
    if not use_init_val and reduction != "none":
        for t in targets:
            out[t] = neutral(reduction, dtype)
    counts = {}
    for u, t in enumerate(targets):
        out[t] = combine(out[t], flat_upd[u], reduction, dtype, flavor)
        counts[t] = counts.get(t, 0) + 1
    if reduction == "mean":
        for t, c in counts.items():
            out[t] = mean(out[t], c + int(use_init_val), dtype, flavor)
    return out.reshape(dshape)


# ------------------------------------------------------------------------------------------
# JSON.


def values_of(a: np.ndarray):
    out = []
    for v in a.reshape(-1):
        if a.dtype == np.bool_:
            out.append(bool(v))
        elif a.dtype in FLOATS:
            f = float(np.float64(v) if a.dtype != BF16 else np.float32(v))
            if math.isnan(f):
                out.append("nan")
            elif math.isinf(f):
                out.append("inf" if f > 0 else "-inf")
            else:
                out.append(f)
        else:
            out.append(int(v))
    return out


def tensor(a: np.ndarray, with_values=True):
    t = {"dtype": DTYPE_NAMES[a.dtype], "shape": list(a.shape)}
    if with_values:
        t["values"] = values_of(a)
    return t


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype in FLOATS:
        fa, fb = a.astype(np.float64).reshape(-1), b.astype(np.float64).reshape(-1)
        nan = np.isnan(fa) & np.isnan(fb)
        bits = a.reshape(-1).view(np.uint8).reshape(a.size, -1) == b.reshape(-1).view(np.uint8).reshape(b.size, -1)
        return bool(np.all(nan | bits.all(axis=1)))
    return a.tobytes() == b.tobytes()


CASES: dict[str, list[dict]] = {}


def add_case(suite, name, source, op, flavor, data, indices, updates, axis=None, reduction="none",
             use_init_val=None, expected=None, expect_error=None, **extra):
    attrs = {"reduction": reduction}
    if axis is not None:
        attrs["axis"] = axis
    if use_init_val is not None:
        attrs["use_init_val"] = use_init_val
    case = {
        "suite": suite,
        "name": name,
        "source": source,
        "op": OP_NAMES[op],
        "flavor": flavor,
        "attrs": attrs,
        "data": tensor(data),
        "indices": tensor(indices),
        "updates": tensor(updates),
    }
    if expect_error is not None:
        case["expect_error"] = expect_error
    else:
        case["expected"] = tensor(expected)
    case.update(extra)
    names = {c["name"] for c in CASES.setdefault(suite, [])}
    assert name not in names, f"{suite}/{name} twice"
    CASES[suite].append(case)


def check_against_model(label, op, flavor, data, indices, updates, axis, reduction, use_init_val,
                        got=None, error=None):
    """The runtime's outcome must be the model's: returns the model's expectation."""
    try:
        want = model(op, flavor, data, indices, updates, axis or 0, reduction,
                     True if use_init_val is None else use_init_val)
        want_error = None
    except IndexError_ as e:
        want, want_error = None, str(e)
    if error is not None or want_error is not None:
        if not (error is not None and want_error is not None):
            sys.exit(f"{label}: runtime error {error!r} but model error {want_error!r}")
        return None, want_error
    if not same_bits(got, want):
        sys.exit(f"{label}: runtime and model differ\n runtime {got!r}\n model   {want!r}")
    return want, None


# ------------------------------------------------------------------------------------------
# Suite onnx-node.

def onnx_node():
    node_dir = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"
    for d in sorted(node_dir.glob("test_scatter*")):
        m = onnx.load(d / "model.onnx")
        node = m.graph.node[0]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        op = {"ScatterND": "nd", "ScatterElements": "elements", "Scatter": "elements"}[node.op_type]
        ins = [numpy_helper.to_array(onnx.load_tensor(d / "test_data_set_0" / f"input_{i}.pb"))
               for i in range(3)]
        out = numpy_helper.to_array(onnx.load_tensor(d / "test_data_set_0" / "output_0.pb"))
        reduction = attrs.get("reduction", b"none")
        reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
        reduction = {"add": "sum", "mul": "prod"}.get(reduction, reduction)
        axis = attrs.get("axis", 0) if op == "elements" else None
        opset = m.opset_import[0].version
        want, _ = check_against_model(d.name, op, "onnx", *ins, axis, reduction, None, got=out)
        add_case("onnx-node", d.name,
                 f"onnx (PyPI package onnx=={onnx.__version__}): onnx/backend/test/data/node/{d.name}",
                 op, "onnx", *ins, axis=axis, reduction=reduction, expected=out,
                 onnx_opset=opset, onnx_op=node.op_type)


# ------------------------------------------------------------------------------------------
# ONNX Runtime and ONNX's reference implementation.

def onnx_model(op, dtype, index_dtype, reduction, axis):
    onnx_reduction = {"sum": "add", "prod": "mul"}.get(reduction, reduction)
    kwargs = {"reduction": onnx_reduction}
    if op == "elements":
        kwargs["axis"] = axis
    node = helper.make_node(OP_NAMES[op], ["data", "indices", "updates"], ["output"], **kwargs)
    t = ONNX_TYPES[dtype]
    graph = helper.make_graph(
        [node], "scatter",
        [helper.make_tensor_value_info("data", t, None),
         helper.make_tensor_value_info("indices", ONNX_TYPES[index_dtype], None),
         helper.make_tensor_value_info("updates", t, None)],
        [helper.make_tensor_value_info("output", t, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def run_ort(op, data, indices, updates, axis, reduction):
    m = onnx_model(op, data.dtype, indices.dtype, reduction, axis)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    session = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    if data.dtype != BF16:
        return session.run(None, {"data": data, "indices": indices, "updates": updates})[0]
    # NumPy has no bf16 that ONNX Runtime's Python API knows: hand it the bits.
    def bits(a):
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            np.ascontiguousarray(a.view(np.uint16)), TensorProto.BFLOAT16)
    out = np.zeros(data.shape, np.uint16)
    binding = session.io_binding()
    binding.bind_ortvalue_input("data", bits(data))
    binding.bind_ortvalue_input("indices", ort.OrtValue.ortvalue_from_numpy(indices))
    binding.bind_ortvalue_input("updates", bits(updates))
    binding.bind_ortvalue_output("output", bits(out))  # shares `out`'s memory
    session.run_with_iobinding(binding)
    return out.view(BF16)


def run_onnx_reference(op, data, indices, updates, axis, reduction):
    m = onnx_model(op, data.dtype, indices.dtype, reduction, axis)
    return ReferenceEvaluator(m).run(None, {"data": data, "indices": indices, "updates": updates})[0]


def values(rng, dtype, shape, kind="mixed"):
    """Test values of `dtype`: floats of several magnitudes (so that sums round), integers
    over the type's range or small (for products), bools."""
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == np.bool_:
        return rng.integers(0, 2, n).astype(np.bool_).reshape(shape)
    if dtype in FLOATS:
        scale = rng.choice([1e-3, 0.1, 1.0, 30.0, 1000.0], n)
        x = np.round(rng.standard_normal(n) * scale, 6)
        return x.astype(np.float32).astype(dtype).reshape(shape)
    info = np.iinfo(dtype)
    if kind == "small":
        lo, hi = max(int(info.min), -4), min(int(info.max), 5)
    else:
        lo, hi = int(info.min), int(info.max)
    return rng.integers(lo, hi, n, endpoint=True, dtype=np.int64 if dtype != np.uint64 else np.uint64).astype(dtype).reshape(shape)


ALL_DTYPES = [np.float32, np.float64, np.float16, BF16, np.int8, np.uint8, np.int16, np.uint16,
              np.int32, np.uint32, np.int64, np.uint64, np.bool_]


def nd_problem(rng, dtype, reduction, signed=True):
    """data [4, 3]; five tuples with repeats (and negatives when the index type is signed)."""
    data = values(rng, dtype, (4, 3), "small" if reduction == "prod" else "mixed")
    idx = [1, -1, 1, 0, -4] if signed else [1, 3, 1, 0, 0]
    indices = np.array(idx, np.int64).reshape(5, 1)
    updates = values(rng, dtype, (5, 3), "small" if reduction == "prod" else "mixed")
    return data, indices, updates


def nd_deep_problem(rng, dtype, reduction):
    """data [2, 3, 2]; tuples of depth 2 with a repeat and negatives."""
    data = values(rng, dtype, (2, 3, 2), "small" if reduction == "prod" else "mixed")
    indices = np.array([[0, 1], [-1, -2], [0, 1], [1, 0]], np.int64)
    updates = values(rng, dtype, (4, 2), "small" if reduction == "prod" else "mixed")
    return data, indices, updates


def elements_problem(rng, dtype, reduction, axis, index_dtype=np.int64):
    """data [3, 4]; indices [3, 3] (dims at most data's), repeats along the axis, negatives."""
    data = values(rng, dtype, (3, 4), "small" if reduction == "prod" else "mixed")
    size = 3 if axis in (0, -2) else 4
    idx = rng.integers(-size, size, (3, 3))
    # Repeats: two updates of one element, and a negative index naming the same as a positive.
    if axis in (0, -2):
        idx[1, 0] = idx[0, 0]
        idx[2, 1] = idx[0, 1] - size if idx[0, 1] >= 0 else idx[0, 1] + size
    else:
        idx[0, 1] = idx[0, 0]
        idx[1, 2] = idx[1, 0] - size if idx[1, 0] >= 0 else idx[1, 0] + size
    updates = values(rng, dtype, (3, 3), "small" if reduction == "prod" else "mixed")
    return data, idx.astype(index_dtype), updates


def onnxruntime_suite(rng):
    skipped = []
    for dtype in map(np.dtype, ALL_DTYPES):
        for reduction in ["none", "sum", "prod", "max", "min"]:
            problems = [("nd", None) + nd_problem(rng, dtype, reduction),
                        ("nd_depth2", None) + nd_deep_problem(rng, dtype, reduction),
                        ("elements_axis0", 0) + elements_problem(rng, dtype, reduction, 0),
                        ("elements_axis-1", -1) + elements_problem(rng, dtype, reduction, -1)]
            for label, axis, data, indices, updates in problems:
                op = "nd" if label.startswith("nd") else "elements"
                name = f"{label}_{reduction}_{DTYPE_NAMES[dtype]}"
                try:
                    got = run_ort(op, data, indices, updates, axis, reduction)
                except Exception as e:  # ONNX Runtime's CPU provider lacks this one
                    message = str(e).splitlines()[0][:160]
                    skipped.append(f"{name}: {message}")
                    if dtype not in (np.float16, BF16, np.bool_):
                        continue
                    try:
                        got = run_onnx_reference(op, data, indices, updates, axis, reduction)
                    except Exception as e:  # its ScatterND max/min index tuples as arrays
                        reference_error = " ".join(str(e).split())[:160]
                        want = model(op, "onnx", data, indices, updates, axis or 0, reduction)
                        add_case("definition", f"onnx_{name}",
                                 "docs/semantics.md#scatters (no rounding involved)", op, "onnx",
                                 data, indices, updates, axis=axis, reduction=reduction,
                                 expected=want, onnxruntime_error=message,
                                 onnx_reference_error=reference_error)
                        continue
                    want, _ = check_against_model(f"onnx-reference/{name}", op, "onnx", data,
                                                  indices, updates, axis, reduction, None, got=got)
                    add_case("onnx-reference", name,
                             f"onnx=={onnx.__version__} onnx.reference.ReferenceEvaluator, opset 18",
                             op, "onnx", data, indices, updates, axis=axis,
                             reduction=reduction, expected=want, onnx_opset=18,
                             onnxruntime_error=message)
                    continue
                want, _ = check_against_model(f"onnxruntime/{name}", op, "onnx", data, indices,
                                              updates, axis, reduction, None, got=got)
                add_case("onnxruntime", name, f"onnxruntime=={ort.__version__} CPUExecutionProvider, opset 18",
                         op, "onnx", data, indices, updates, axis=axis, reduction=reduction,
                         expected=want, onnx_opset=18)
    # int32 indices (ScatterElements only takes them).
    for reduction in ["none", "sum"]:
        data, indices, updates = elements_problem(rng, np.dtype(np.float32), reduction, 1, np.int32)
        got = run_ort("elements", data, indices, updates, 1, reduction)
        want, _ = check_against_model("i32", "elements", "onnx", data, indices, updates, 1, reduction, None, got=got)
        add_case("onnxruntime", f"elements_axis1_{reduction}_float32_int32_indices",
                 f"onnxruntime=={ort.__version__} CPUExecutionProvider, opset 18", "elements", "onnx",
                 data, indices, updates, axis=1, reduction=reduction, expected=want, onnx_opset=18)
    # Ties and NaNs under max and min: ONNX Runtime keeps the update.
    f = np.float32
    data = np.array([np.nan, 1.0, -0.0, 0.0, 2.0], f)
    updates = np.array([1.0, np.nan, 0.0, -0.0, np.nan], f)
    for reduction in ["max", "min"]:
        for op, indices, axis in [("nd", np.arange(5, dtype=np.int64).reshape(5, 1), None),
                                  ("elements", np.arange(5, dtype=np.int64), 0)]:
            got = run_ort(op, data, indices, updates, axis, reduction)
            want, _ = check_against_model("ties", op, "onnx", data, indices, updates, axis, reduction, None, got=got)
            add_case("onnxruntime", f"{op}_{reduction}_ties_and_nans_float32",
                     f"onnxruntime=={ort.__version__} CPUExecutionProvider, opset 18", op, "onnx",
                     data, indices, updates, axis=axis, reduction=reduction, expected=want,
                     onnx_opset=18, note="equal or unordered operands: ONNX Runtime keeps the update")
    # Out-of-range indices: an error, before anything is written.
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    for op, indices, updates, axis, label in [
        ("nd", np.array([[1], [4]], np.int64), np.ones((2, 3), np.float32), None, "nd_index_4_of_4"),
        ("nd", np.array([[-5]], np.int64), np.ones((1, 3), np.float32), None, "nd_index_-5_of_4"),
        ("elements", np.array([[0, 3, 0]], np.int64), np.ones((1, 3), np.float32), 1, "elements_index_3_of_3"),
        ("elements", np.array([[-5, 0, 0]], np.int64), np.ones((1, 3), np.float32), 0, "elements_index_-5_of_4"),
    ]:
        try:
            run_ort(op, data, indices, updates, axis, "none")
            sys.exit(f"{label}: ONNX Runtime accepted an out-of-range index")
        except Exception as e:
            message = str(e).splitlines()[0][:200]
        _, err = check_against_model(label, op, "onnx", data, indices, updates, axis, "none", None,
                                     error=message)
        add_case("onnxruntime", label, f"onnxruntime=={ort.__version__} CPUExecutionProvider, opset 18",
                 op, "onnx", data, indices, updates, axis=axis, expect_error=err,
                 onnx_opset=18, onnxruntime_error=message)
    return skipped


# ------------------------------------------------------------------------------------------
# OpenVINO.

def openvino_suite(rng):
    try:
        import openvino as ov
        import openvino.opset3 as op3
        import openvino.opset4 as op4
        import openvino.opset12 as op12
        import openvino.opset15 as op15
    except ImportError as e:
        print(f"openvino not importable ({e}): suite openvino skipped")
        return []
    core = ov.Core()
    version = f"openvino=={ov.__version__.split('-')[0]}"

    def ovtype(a):
        if a.dtype == BF16:
            return ov.Type.bf16
        if a.dtype == np.bool_:
            return ov.Type.boolean
        return ov.Type(a.dtype)

    def ovtensor(a):
        if a.dtype == BF16:
            t = ov.Tensor(ov.Type.bf16, ov.Shape(list(a.shape)))
            t.data[...] = a.view(np.uint16).view(np.float16)
            return t
        return ov.Tensor(np.ascontiguousarray(a))

    def build(flavor, reduction, axis, use_init_val):
        if flavor == "openvino-scatterndupdate3":
            return lambda d, i, u: op4.scatter_nd_update(d, i, u)
        if flavor == "openvino-scatterndupdate15":
            return lambda d, i, u: op15.scatter_nd_update(d, i, u, reduction)
        if flavor == "openvino-scatterelementsupdate3":
            return lambda d, i, u: op3.scatter_elements_update(d, i, u, op3.constant(np.int64(axis)))
        if flavor == "openvino-scatterelementsupdate12":
            return lambda d, i, u: op12.scatter_elements_update(
                d, i, u, op3.constant(np.int64(axis)), reduction, use_init_val)
        return lambda d, i, u: op3.scatter_update(d, i, u, op3.constant(np.int64(axis)))

    def run(flavor, data, indices, updates, axis=0, reduction="none", use_init_val=True):
        params = [op15.parameter(list(a.shape), ovtype(a)) for a in (data, indices, updates)]
        m = ov.Model([build(flavor, reduction, axis, use_init_val)(*params)], params)
        # Not INFERENCE_NUM_THREADS = 1: with it this plugin version skips the index check and
        # returns unwritten memory for an out-of-range ScatterNDUpdate-15 index.
        compiled = core.compile_model(m, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        request = compiled.create_infer_request()
        request.infer([ovtensor(data), ovtensor(indices), ovtensor(updates)])
        out = request.get_output_tensor(0).data
        if data.dtype == BF16:
            return out.view(np.uint16).view(BF16).copy()
        return out.copy()

    ov_reduction = {"sum": "sum", "prod": "prod", "none": "none", "max": "max", "min": "min",
                    "sub": "sub", "mean": "mean"}
    op_of = {"openvino-scatterndupdate3": "nd", "openvino-scatterndupdate15": "nd",
             "openvino-scatterelementsupdate3": "elements",
             "openvino-scatterelementsupdate12": "elements", "openvino-scatterupdate3": "update"}
    divergences = []

    def record(flavor, name, data, indices, updates, axis=None, reduction="none", use_init_val=None,
               known_divergence=None):
        op = op_of[flavor]
        uiv = True if use_init_val is None else use_init_val
        try:
            got = run(flavor, data, indices, updates, axis or 0, ov_reduction[reduction], uiv)
            error = None
        except Exception as e:
            got, error = None, " ".join(str(e).split())[:300]
        try:
            want = model(op, flavor, data, indices, updates, axis or 0, reduction, uiv)
            want_error = None
        except IndexError_ as e:
            want, want_error = None, str(e)
        if want_error is not None or error is not None:
            if want_error is None or error is None:
                sys.exit(f"openvino/{name}: OpenVINO error {error!r}, model error {want_error!r}")
            add_case("openvino", name, f"{version} CPU plugin", op, flavor, data, indices, updates,
                     axis=axis, reduction=reduction, use_init_val=use_init_val,
                     expect_error=want_error, openvino_error=error)
            return
        if same_bits(got, want):
            add_case("openvino", name, f"{version} CPU plugin", op, flavor, data, indices, updates,
                     axis=axis, reduction=reduction, use_init_val=use_init_val, expected=want)
            return
        if known_divergence is None:
            sys.exit(f"openvino/{name}: OpenVINO and model differ\n ov    {got!r}\n model {want!r}")
        divergences.append(name)
        add_case("definition", f"openvino_cpu_{name}",
                 f"OpenVINO reference (docs/semantics.md#scatters); {version} CPU plugin differs",
                 op, flavor, data, indices, updates, axis=axis, reduction=reduction,
                 use_init_val=use_init_val, expected=want, openvino_cpu=tensor(got)["values"],
                 note=known_divergence)

    dtypes = list(map(np.dtype, [np.float32, np.float16, BF16, np.int32, np.int8, np.uint8]))
    F16_NOTE = ("f16: the CPU plugin (without native f16 on this CPU) runs the model in f32 and "
                "rounds once at the end; OpenVINO's reference (ov::float16) rounds after every update")
    for dtype in dtypes:
        dn = DTYPE_NAMES[dtype]
        # ScatterNDUpdate-3 / -3 elements / ScatterUpdate-3: no reduction, no repeats (the CPU
        # plugin writes in parallel), negative indices.
        data = values(rng, dtype, (4, 3))
        record("openvino-scatterndupdate3", f"nd3_none_{dn}", data,
               np.array([[2], [-1], [0]], np.int64), values(rng, dtype, (3, 3)))
        record("openvino-scatterndupdate3", f"nd3_depth2_none_{dn}", values(rng, dtype, (2, 3, 2)),
               np.array([[0, 2], [-1, -3]], np.int64), values(rng, dtype, (2, 2)))
        idx = np.array([[2, -1, 0], [-3, 1, 2]], np.int64)
        record("openvino-scatterelementsupdate3", f"seu3_axis0_none_{dn}", values(rng, dtype, (3, 4)),
               idx, values(rng, dtype, (2, 3)), axis=0)
        record("openvino-scatterelementsupdate3", f"seu3_axis-1_none_{dn}", values(rng, dtype, (3, 4)),
               np.array([[3, -1], [0, 2]], np.int64), values(rng, dtype, (2, 2)), axis=-1)
        record("openvino-scatterupdate3", f"su3_axis1_none_{dn}", values(rng, dtype, (3, 5, 2)),
               np.array([[4, 0], [2, 1]], np.int64), values(rng, dtype, (3, 2, 2, 2)), axis=1)
        # ScatterNDUpdate-15: every reduction, with repeats and negatives.
        for reduction in ["none", "sum", "sub", "prod", "min", "max"]:
            kind = "small" if reduction == "prod" else "mixed"
            if reduction == "none":  # the plugin copies slices in parallel: no repeats
                indices = np.array([[1], [-1], [0]], np.int64)
                updates = values(rng, dtype, (3, 3))
            else:
                indices = np.array([[1], [-1], [1], [0], [-4]], np.int64)
                updates = values(rng, dtype, (5, 3), kind)
            record("openvino-scatterndupdate15", f"nd15_{reduction}_{dn}",
                   values(rng, dtype, (4, 3), kind), indices, updates, reduction=reduction,
                   known_divergence=F16_NOTE if dtype == np.float16 else None)
        # ScatterElementsUpdate-12: every reduction, use_init_val both ways, repeats, negatives.
        for reduction in ["none", "sum", "prod", "min", "max", "mean"]:
            for uiv in [True, False]:
                if reduction == "none" and not uiv:
                    continue
                for axis in [0, 1]:
                    kind = "small" if reduction == "prod" else "mixed"
                    data = values(rng, dtype, (3, 4), kind)
                    indices = np.array([[0, -1, 2], [0, 3, -4], [-3, 3, 1]], np.int64) if axis == 1 \
                        else np.array([[0, -1, 2], [0, 2, -3], [-3, 2, 1]], np.int64)
                    updates = values(rng, dtype, (3, 3), kind)
                    note = F16_NOTE if dtype == np.float16 else None
                    if reduction == "mean" and dtype.kind in "iu":
                        note = ("integer mean: the spec and reference round down (floor); the CPU "
                                "plugin truncates toward zero")
                    record("openvino-scatterelementsupdate12",
                           f"seu12_axis{axis}_{reduction}_init{str(uiv).lower()}_{dn}",
                           data, indices, updates, axis=axis, reduction=reduction,
                           use_init_val=None if uiv else False, known_divergence=note)
    # Ties and NaNs: ScatterNDUpdate-15's reference keeps the current element (std::max), as the
    # CPU plugin does; ScatterElementsUpdate-12's reference keeps the update, the plugin does not.
    f = np.float32
    data = np.array([np.nan, 1.0, -0.0, 0.0, 2.0], f)
    updates = np.array([1.0, np.nan, 0.0, -0.0, np.nan], f)
    for reduction in ["max", "min"]:
        record("openvino-scatterndupdate15", f"nd15_{reduction}_ties_and_nans_float32", data,
               np.arange(5, dtype=np.int64).reshape(5, 1), updates, reduction=reduction)
        record("openvino-scatterelementsupdate12", f"seu12_{reduction}_ties_and_nans_float32", data,
               np.arange(5, dtype=np.int64), updates, axis=0, reduction=reduction,
               known_divergence=("equal or unordered operands: the reference (`a > b ? a : b`) keeps "
                                 "the update, the CPU plugin keeps the current element"))
    # A mean that needs the integer rounding, non-negative (the plugin agrees there).
    record("openvino-scatterelementsupdate12", "seu12_mean_rounds_down_int32",
           np.array([0, 10, 7], np.int32), np.array([0, 0, 1, 1, 2], np.int64),
           np.array([1, 2, 3, 4, 0], np.int32), axis=0, reduction="mean")
    # bf16 rounding: OpenVINO's ov::bfloat16 differs from IEEE rounding.
    record("openvino-scatterndupdate15", "nd15_sum_bf16_rounding",
           np.array([1.0, 1.0, 3.0], BF16), np.array([[0], [1], [2]], np.int64),
           np.array([0.005859375, 0.01171875, 0.01], BF16), reduction="sum")
    # Out-of-range indices.
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    record("openvino-scatterndupdate15", "nd15_index_4_of_4", data, np.array([[4]], np.int64),
           np.ones((1, 3), np.float32), reduction="sum")
    record("openvino-scatterupdate3", "su3_negative_index", data, np.array([-1], np.int64),
           np.ones((1, 3), np.float32), axis=0)
    record("openvino-scatterupdate3", "su3_index_4_of_4", data, np.array([4], np.int64),
           np.ones((1, 3), np.float32), axis=0)
    record("openvino-scatterelementsupdate12", "seu12_index_3_of_3", data,
           np.array([[0, 3, 0]], np.int64), np.ones((1, 3), np.float32), axis=1)
    return divergences


# ------------------------------------------------------------------------------------------
# The OpenVINO spec examples, typed from the spec pages.

SPEC_MISPRINTS = []


def spec_case(name, source, op, flavor, d, i, u, printed, axis=None, reduction="none",
              use_init_val=True):
    """A spec example: expects what its inputs give; records the printed output if it differs."""
    want = model(op, flavor, d, i, u, axis or 0, reduction, use_init_val)
    extra = {}
    if want.tolist() != np.array(printed, d.dtype).tolist():
        SPEC_MISPRINTS.append(name)
        extra = {"spec_printed_output": printed,
                 "note": "the spec page prints an output its inputs cannot give under any update order"}
    add_case("openvino-spec", name, source, op, flavor, d, i, u, axis=axis, reduction=reduction,
             use_init_val=None if use_init_val else False, expected=want, **extra)


def openvino_spec():
    src15 = "OpenVINO ScatterNDUpdate-15 spec (docs/.../movement/scatter-nd-update-15.rst), example {}"
    data = np.array([1, 2, 3, 4], np.float32)
    idx = np.array([0, 2, -3, -3, 0], np.int32).reshape(5, 1)
    upd = np.array([10, 20, 30, 40, 50], np.float32)
    for n, reduction, dtype, printed in [(1, "none", np.float32, [50, 20, 20, 4]),
                                         (2, "sum", np.float16, [61, 72, 23, 4]),
                                         (3, "sub", np.int32, [-59, -68, -17, 4]),
                                         (4, "prod", np.float32, [500, 3600, 40, 4])]:
        spec_case(f"scatterndupdate15_example{n}_{reduction}", src15.format(n), "nd",
                  "openvino-scatterndupdate15", data.astype(dtype), idx, upd.astype(dtype), printed,
                  reduction=reduction)
    spec_case("scatterndupdate15_detailed_example", src15.format("in the description"), "nd",
              "openvino-scatterndupdate15", np.array([1, 2, 3, 4, 5, 6, 7, 8], np.float32),
              np.array([[4], [3], [1], [7], [-2], [-4]], np.int64),
              np.array([9, 10, 11, 12, 13, 14], np.float32), [1, 11, 3, 10, 4, 6, 13, 12])
    src12 = "OpenVINO ScatterElementsUpdate-12 spec (docs/.../movement/scatter-elements-update-12.rst), example {}"
    examples = [
        (1, "sum", True, [2, 3, 4, 6], [1, 0, 0, -2, -1, 2], [10, 20, 30, 40, 70, 60], 0, [52, 13, 104, 76]),
        (2, "sum", False, [2, 3, 4, 6], [1, 0, 0, 2, 3, 2], [10, 20, 30, 40, 70, 60], 0, [50, 10, 100, 70]),
        (3, "none", True, [[0] * 4] * 3, [[1, 2], [0, 3]], [[11, 12], [13, 14]], 1,
         [[0, 11, 12, 0], [13, 0, 0, 14], [0, 0, 0, 0]]),
        (4, "sum", True, [[1] * 4] * 3, [[1, 1], [0, 3]], [[11, 12], [13, 14]], 1,
         [[1, 24, 1, 1], [14, 1, 1, 15], [1, 1, 1, 1]]),
        (5, "prod", True, [[2] * 4] * 3, [[1, 1], [0, 3]], [[11, 12], [13, 14]], 1,
         [[2, 264, 2, 2], [26, 2, 2, 28], [2, 2, 2, 2]]),
    ]
    for n, reduction, uiv, d, i, u, axis, printed in examples:
        dtype = np.float32 if n <= 2 else np.int32
        spec_case(f"scatterelementsupdate12_example{n}_{reduction}", src12.format(n), "elements",
                  "openvino-scatterelementsupdate12", np.array(d, dtype), np.array(i, np.int64),
                  np.array(u, dtype), printed, axis=axis, reduction=reduction, use_init_val=uiv)
    spec_case("scatterupdate3_example2",
              "OpenVINO ScatterUpdate-3 spec (docs/.../movement/scatter-update-3.rst), example 2",
              "update", "openvino-scatterupdate3",
              np.array([[-1, 1, -1, 3, 4], [-1, 6, -1, 8, 9], [-1, 11, 1, 13, 14]], np.float32),
              np.array([0, 2], np.int64), np.array([[1, 1], [1, 1], [1, 2]], np.float32),
              [[1, 1, 1, 3, 4], [1, 6, 1, 8, 9], [1, 11, 2, 13, 14]], axis=1)
    src3 = "OpenVINO ScatterNDUpdate-3 spec (docs/.../movement/scatter-nd-update-3.rst), example {}"
    spec_case("scatterndupdate3_example1", src3.format(1), "nd", "openvino-scatterndupdate3",
              np.array([1, 2, 3, 4, 5, 6, 7, 8], np.float32), np.array([[4], [3], [1], [7]], np.int64),
              np.array([9, 10, 11, 12], np.float32), [1, 11, 3, 10, 9, 6, 7, 12])
    block = [[1, 2, 3, 4], [5, 6, 7, 8], [8, 7, 6, 5], [4, 3, 2, 1]]
    rev = [[8, 7, 6, 5], [4, 3, 2, 1], [1, 2, 3, 4], [5, 6, 7, 8]]
    u = [[[5] * 4, [6] * 4, [7] * 4, [8] * 4], [[1] * 4, [2] * 4, [3] * 4, [4] * 4]]
    spec_case("scatterndupdate3_example2", src3.format(2), "nd", "openvino-scatterndupdate3",
              np.array([block, block, rev, rev], np.float32), np.array([[0], [2]], np.int64),
              np.array(u, np.float32), [u[0], block, u[1], rev])


# ------------------------------------------------------------------------------------------
# TensorRT and validation errors.

def definition():
    trt = "TensorRT IScatterLayer (NvInfer.h): {}"
    # The TensorRT operator page's kELEMENT example: data (2,1,5), axis 2.
    d = np.array([[[-3.0, -2.0, -1.0, 10.0, -25.0]], [[0.0, 1.0, 2.0, -2.0, -1.0]]], np.float32)
    i = np.array([[[1, 2, 3, 0, 4]], [[4, 1, 2, 3, 0]]], np.int32)
    u = np.array([[[-1.0, 2.4, 3.2, 10.8, 8.9]], [[0, -11.2, 34.2, 223.9, -100]]], np.float32)
    add_case("definition", "tensorrt_element_axis2_doc_example",
             "TensorRT operator docs, Scatter (operators/docs/Scatter.html), kELEMENT example",
             "elements", "tensorrt", d, i, u, axis=2,
             expected=model("elements", "tensorrt", d, i, u, 2), trt_mode="kELEMENT")
    d = np.arange(12, dtype=np.float32).reshape(4, 3)
    add_case("definition", "tensorrt_nd_rows", trt.format("kND, foreach slice output[indices[slice]] = updates[slice]"),
             "nd", "tensorrt", d, np.array([[3], [0]], np.int64), np.ones((2, 3), np.float32),
             expected=model("nd", "tensorrt", d, np.array([[3], [0]], np.int64), np.ones((2, 3), np.float32)),
             trt_mode="kND")
    add_case("definition", "tensorrt_nd_duplicate", trt.format("writes to the same output element cause undefined behavior"),
             "nd", "tensorrt", d, np.array([[3], [1], [3]], np.int64), np.ones((3, 3), np.float32),
             expect_error="duplicate index", trt_mode="kND")
    add_case("definition", "tensorrt_element_duplicate", trt.format("writes to the same output element cause undefined behavior"),
             "elements", "tensorrt", d, np.array([[1, 0, 2], [1, 2, 2]], np.int64), np.ones((2, 3), np.float32),
             axis=0, expect_error="duplicate index", trt_mode="kELEMENT")
    add_case("definition", "tensorrt_element_same_index_other_column", trt.format("kELEMENT"),
             "elements", "tensorrt", d, np.array([[1, 1, 1]], np.int64), np.full((1, 3), 7, np.float32),
             axis=0, expected=model("elements", "tensorrt", d, np.array([[1, 1, 1]], np.int64),
                                    np.full((1, 3), 7, np.float32), 0), trt_mode="kELEMENT")
    add_case("definition", "tensorrt_negative_index", trt.format("indices in [0, d)"),
             "nd", "tensorrt", d, np.array([[-1]], np.int64), np.ones((1, 3), np.float32),
             expect_error="index out of bounds", trt_mode="kND")
    # ScatterUpdate-3 with a 0-D index (the spec's first example form; OpenVINO's CPU plugin
    # rejects scalar inputs).
    d = np.arange(6, dtype=np.float32).reshape(3, 2)
    i, u = np.array(-1 + 3, np.int64), np.array([7.0, 8.0], np.float32)
    add_case("definition", "scatterupdate3_scalar_index",
             "OpenVINO ScatterUpdate-3 spec: indices is a 0D tensor: data[indices, ...] = updates[...]",
             "update", "openvino-scatterupdate3", d, i, u, axis=0,
             expected=model("update", "openvino-scatterupdate3", d, i, u, 0))
    # Validation errors (shapes and attributes; no run).
    f = np.float32
    errors = [
        ("nd_updates_shape", "nd", "onnx", (4, 3), (2, 1), (2, 2), None, "none", None, "updates shape mismatch"),
        ("nd_depth_above_rank", "nd", "onnx", (4, 3), (2, 3), (2,), None, "none", None, "indices last dim too large"),
        ("nd_depth_zero", "nd", "onnx", (4, 3), (2, 0), (2, 4, 3), None, "none", None, "indices last dim too large"),
        ("elements_rank_mismatch", "elements", "onnx", (4, 3), (2,), (2,), 0, "none", None, "rank mismatch"),
        ("elements_dim_above_data", "elements", "onnx", (4, 3), (2, 4), (2, 4), 0, "none", None, "shape mismatch"),
        ("elements_updates_shape", "elements", "onnx", (4, 3), (2, 3), (2, 2), 0, "none", None, "updates shape mismatch"),
        ("elements_axis_2_of_rank_2", "elements", "onnx", (4, 3), (2, 3), (2, 3), 2, "none", None, "axis out of range"),
        ("update_updates_shape", "update", "openvino-scatterupdate3", (4, 3), (2,), (3, 2), 1, "none", None, "updates shape mismatch"),
        ("onnx_sub", "nd", "onnx", (4, 3), (2, 1), (2, 3), None, "sub", None, "unsupported reduction"),
        ("nd3_sum", "nd", "openvino-scatterndupdate3", (4, 3), (2, 1), (2, 3), None, "sum", None, "unsupported reduction"),
        ("nd15_mean", "nd", "openvino-scatterndupdate15", (4, 3), (2, 1), (2, 3), None, "mean", None, "unsupported reduction"),
        ("seu12_mean_bool", "elements", "openvino-scatterelementsupdate12", (4, 3), (2, 3), (2, 3), 0, "mean", None, "unsupported reduction"),
        ("nd15_use_init_val_false", "nd", "openvino-scatterndupdate15", (4, 3), (2, 1), (2, 3), None, "sum", False, "unsupported attribute"),
        ("update_under_onnx", "update", "onnx", (4, 3), (2,), (2, 3), 0, "none", None, "flavor mismatch"),
        ("elements_under_nd15", "elements", "openvino-scatterndupdate15", (4, 3), (2, 3), (2, 3), 0, "none", None, "flavor mismatch"),
    ]
    for name, op, flavor, ds, is_, us, axis, reduction, uiv, category in errors:
        dtype = np.bool_ if name.endswith("bool") else f
        case = {
            "suite": "definition", "name": f"invalid_{name}",
            "source": "docs/semantics.md#scatters, validation", "op": OP_NAMES[op], "flavor": flavor,
            "attrs": {"reduction": reduction, **({"axis": axis} if axis is not None else {}),
                      **({"use_init_val": uiv} if uiv is not None else {})},
            "data": {"dtype": DTYPE_NAMES[np.dtype(dtype)], "shape": list(ds)},
            "indices": {"dtype": "int64", "shape": list(is_)},
            "updates": {"dtype": DTYPE_NAMES[np.dtype(dtype)], "shape": list(us)},
            "expect_error": category,
        }
        CASES.setdefault("definition", []).append(case)


# ------------------------------------------------------------------------------------------

def main():
    ort.set_default_logger_severity(4)
    np.seterr(over="ignore")
    rng = np.random.default_rng(20260632)
    onnx_node()
    skipped = onnxruntime_suite(rng)
    openvino_spec()
    divergences = openvino_suite(rng)
    definition()
    for suite, cases in sorted(CASES.items()):
        d = OUT / suite
        d.mkdir(parents=True, exist_ok=True)
        for old in d.glob("*.json"):
            old.unlink()
        for case in cases:
            text = json.dumps(case, allow_nan=False)
            (d / f"{case['name']}.json").write_text(text + "\n")
        print(f"{suite}: {len(cases)} cases")
    print(f"ONNX Runtime declined {len(skipped)} combinations (f16/bf16 reductions go to onnx-reference):")
    for s in skipped:
        print("  " + s)
    print(f"OpenVINO spec examples printing an output their inputs cannot give: {SPEC_MISPRINTS}")
    print(f"OpenVINO CPU plugin departs from the reference in {len(divergences)} cases (suite definition, openvino_cpu_*)")


if __name__ == "__main__":
    main()
