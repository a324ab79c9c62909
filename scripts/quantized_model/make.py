#!/usr/bin/env python3
"""Small embedding models whose only quantized ops are com.microsoft.GatherBlockQuantized, with
ONNX Runtime's outputs, for gather-jit-tract's and the CLI's tests.

Rerun from the repository root with

    /work/venv-gbq/bin/python scripts/quantized_model/make.py

(a Python 3.11 virtualenv with scripts/quantized_model/requirements.txt installed:
`python3 -m venv /work/venv-gbq && /work/venv-gbq/bin/pip install -r
scripts/quantized_model/requirements.txt`). Everything is seeded: a rerun with the same
versions rewrites the same bytes. It writes, under
integrations/tract/tests/data/gather_block_quantized/, one directory per case:

    model.onnx            the quantized model
    input_ids.npy         int64 [2, 6] token ids (a negative one included: ONNX Runtime wraps it)
    expected/NAME.npy     ONNX Runtime's output NAME on input_ids (CPU provider, one thread,
                          graph optimisations off)

The float model: `input_ids [batch, seq]` -> Gather over a float32 [100, 96] table (output
`embeddings`) -> LayerNormalization -> MatMul [96, 8] -> Add (output `hidden`) -> ReduceMean
over the sequence (output `pooled`). Opset 21 (the quantizer moves a model to 21 anyway, for
INT4), IR version 10 (what onnxruntime 1.31 reads).

Cases (the first three by ONNX Runtime's own quantizer, `MatMulNBitsQuantizer` with
`op_types_to_quantize=("Gather",)`, so the MatMul stays float):

- `uint4_zero_points`: asymmetric (`is_symmetric=False`): UINT4 data and UINT4 zero points,
  block_size 32 along the hidden axis (3 blocks a row, so the zero points' flat packing is not
  row-aligned).
- `int4_symmetric`: symmetric: INT4 data, no zero points, block_size 16.
- `uint4_quantize_axis_0`: asymmetric, quantized along the vocabulary (quant_axes Gather:0),
  block_size 16 (100 rows: 7 blocks, the last of 4).
- `uint8_bits8_zero_points`, `uint8_bits4`: the uint8 data form (8-bit values with uint8 zero
  points; 4-bit values two to a byte without zero points, default 8), which ONNX Runtime's
  kernels read but its quantizer does not write for Gather (it quantizes Gather to 4 bits only).
  Quantized here in numpy; the expected outputs are still ONNX Runtime's.

Checks, asserted before anything is written:
- the quantized model holds no float Gather and no other quantized op;
- ONNX Runtime's `embeddings` equal, bit for bit, the numpy dequantization of the model's own
  initializers by ONNX Runtime's rules: value `(q - zero_point) * scale` in float32; for INT4 /
  UINT4 data the values are signed / unsigned nibbles packed flat (row-major, first in the low
  nibble) and a missing zero point is 0; for uint8 data the last axis is packed and a missing
  zero point is 8 (4 bits) or 128 (8 bits); negative ids wrap;
- for the INT4 / UINT4 cases whose gather axis is 0 and quantize axis the last, the same model
  rewritten to the uint8 form (data repacked along rows, INT4 nibbles XOR 8 so that the default
  zero point 8 gives back the signed value, zero points repacked per row, an all-zero zero-points
  tensor where UINT4 had none) gives ONNX Runtime's outputs bit for bit: the rewrite that
  gather-jit-tract's loader makes (tract cannot read INT4 / UINT4 tensors) is exact.
"""

from __future__ import annotations

import copy
import logging
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "integrations/tract/tests/data/gather_block_quantized"
VOCAB, HIDDEN, PROJ = 100, 96, 8
IDS = np.array([[3, 0, 99, -1, 42, 3], [7, -100, 50, 1, 98, 64]], np.int64)
OUTPUTS = ("embeddings", "hidden", "pooled")


def float_model(rng: np.random.Generator) -> onnx.ModelProto:
    table = rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32)
    inits = [
        numpy_helper.from_array(table, "embedding_table"),
        numpy_helper.from_array((1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32), "ln_gamma"),
        numpy_helper.from_array((0.1 * rng.standard_normal(HIDDEN)).astype(np.float32), "ln_beta"),
        numpy_helper.from_array((rng.standard_normal((HIDDEN, PROJ)) / 10).astype(np.float32), "proj_w"),
        numpy_helper.from_array((0.1 * rng.standard_normal(PROJ)).astype(np.float32), "proj_b"),
        numpy_helper.from_array(np.array([1], np.int64), "seq_axis"),
    ]  # fmt: skip
    nodes = [
        helper.make_node("Gather", ["embedding_table", "input_ids"], ["embeddings"], name="embed", axis=0),
        helper.make_node("LayerNormalization", ["embeddings", "ln_gamma", "ln_beta"], ["normed"], name="norm",
                         axis=-1, epsilon=1e-5),
        helper.make_node("MatMul", ["normed", "proj_w"], ["projected"], name="proj"),
        helper.make_node("Add", ["projected", "proj_b"], ["hidden"], name="bias"),
        helper.make_node("ReduceMean", ["hidden", "seq_axis"], ["pooled"], name="pool", keepdims=0),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "quantized_embedding",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [
            helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "seq", HIDDEN]),
            helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "seq", PROJ]),
            helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", PROJ]),
        ],
        inits,
    )
    model = helper.make_model(graph, ir_version=10, producer_name="gather-jit make.py",
                              opset_imports=[helper.make_opsetid("", 21)])  # fmt: skip
    onnx.checker.check_model(model, full_check=True)
    return model


def ort_quantized(model: onnx.ModelProto, **config) -> onnx.ModelProto:
    """The Gather quantized by ONNX Runtime's MatMulNBitsQuantizer (and nothing else)."""
    quantizer = MatMulNBitsQuantizer(copy.deepcopy(model), op_types_to_quantize=("Gather",), **config)
    quantizer.process()
    return quantizer.model.model


# --------------------------------------------------------------------------------------------
# The uint8 form, built here


def pack_rows(q: np.ndarray, bits: int) -> np.ndarray:
    """Unsigned values -> uint8, the last axis packed (4 bits: even element in the low nibble, an
    odd row padded with a zero nibble), as ONNX Runtime's uint8 form stores data and zero points."""
    q = np.asarray(q, np.uint8)
    if bits == 8:
        return q
    if q.shape[-1] % 2:
        q = np.concatenate([q, np.zeros(q.shape[:-1] + (1,), np.uint8)], axis=-1)
    return (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)


def uint8_form(model: onnx.ModelProto, bits: int, block: int, zero_points: bool) -> onnx.ModelProto:
    """`model`'s Gather as a uint8-form GatherBlockQuantized (quantize axis 1, the last),
    asymmetric with zero points or, without, symmetric around the default zero point."""
    model = copy.deepcopy(model)
    graph = model.graph
    table = numpy_helper.to_array(next(i for i in graph.initializer if i.name == "embedding_table"))
    top = (1 << bits) - 1
    blocks = -(-HIDDEN // block)
    q = np.zeros(table.shape, np.int32)
    scales = np.zeros((VOCAB, blocks), np.float32)
    zps = np.zeros((VOCAB, blocks), np.int32)
    for b in range(blocks):
        part = table[:, b * block:(b + 1) * block]
        if zero_points:
            lo = np.minimum(part.min(axis=1), 0)
            hi = np.maximum(part.max(axis=1), 0)
            scale = ((hi - lo) / top).astype(np.float32)
            zp = np.clip(np.round(-lo / scale), 0, top).astype(np.int32)
        else:
            scale = (np.abs(part).max(axis=1) / (top // 2)).astype(np.float32)
            zp = np.full(VOCAB, 1 << (bits - 1), np.int32)
        q[:, b * block:(b + 1) * block] = np.clip(np.round(part / scale[:, None]) + zp[:, None], 0, top)
        scales[:, b], zps[:, b] = scale, zp
    del graph.initializer[[i.name for i in graph.initializer].index("embedding_table")]
    inits = [numpy_helper.from_array(pack_rows(q, bits), "embedding_table_q"),
             numpy_helper.from_array(scales, "embedding_table_scales")]  # fmt: skip
    if zero_points:
        inits.append(numpy_helper.from_array(pack_rows(zps, bits), "embedding_table_zero_points"))
    graph.initializer.extend(inits)
    gather = next(n for n in graph.node if n.op_type == "Gather")
    gbq = helper.make_node("GatherBlockQuantized", [inits[0].name, "input_ids"] + [i.name for i in inits[1:]],
                           ["embeddings"], name="embed_q",
                           domain="com.microsoft", gather_axis=0, quantize_axis=1,
                           block_size=block, bits=bits)  # fmt: skip
    nodes = [gbq if n is gather else n for n in graph.node]
    del graph.node[:]
    graph.node.extend(nodes)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


# --------------------------------------------------------------------------------------------
# ONNX Runtime and the definition


def run_ort(model: onnx.ModelProto) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    assert tuple(names) == OUTPUTS, names
    return session.run(None, {"input_ids": IDS})


def nibbles_flat(tensor: TensorProto) -> np.ndarray:
    """An INT4 / UINT4 initializer's logical values (ONNX's flat packing)."""
    raw = np.frombuffer(tensor.raw_data, np.uint8)
    flat = np.stack([raw & 0xF, raw >> 4], axis=-1).reshape(-1).astype(np.int32)
    count = int(np.prod(tensor.dims))
    flat = flat[:count]
    if tensor.data_type == TensorProto.INT4:
        flat = np.where(flat >= 8, flat - 16, flat)
    return flat.reshape(tuple(tensor.dims))


def unpack_rows(stored: np.ndarray, bits: int, last: int) -> np.ndarray:
    if bits == 8:
        return stored.astype(np.int32)
    both = np.stack([stored & 0xF, stored >> 4], axis=-1).reshape(stored.shape[:-1] + (-1,))
    return both[..., :last].astype(np.int32)


def gbq_parts(model: onnx.ModelProto):
    """The GatherBlockQuantized node, its attributes and its initializers (logical values)."""
    (node,) = [n for n in model.graph.node if n.op_type == "GatherBlockQuantized"]
    assert node.domain == "com.microsoft"
    attrs = {a.name: a.i for a in node.attribute}
    inits = {i.name: i for i in model.graph.initializer}
    data, scales = inits[node.input[0]], numpy_helper.to_array(inits[node.input[2]])
    zp = inits[node.input[3]] if len(node.input) > 3 and node.input[3] else None
    return node, attrs, data, scales, zp


def definition(model: onnx.ModelProto) -> np.ndarray:
    """The embeddings by ONNX Runtime's GatherBlockQuantized rules (module docs)."""
    node, attrs, data, scales, zp = gbq_parts(model)
    gather_axis, qaxis = attrs.get("gather_axis", 0), attrs.get("quantize_axis", 1)
    block, bits = attrs.get("block_size", 128), attrs.get("bits", 4)
    if data.data_type in (TensorProto.INT4, TensorProto.UINT4):
        q = nibbles_flat(data)
        z = nibbles_flat(zp) if zp is not None else np.zeros(scales.shape, np.int32)
    else:
        assert data.data_type == TensorProto.UINT8
        stored = numpy_helper.to_array(data)
        q = unpack_rows(stored, bits, stored.shape[-1] * (8 // bits))
        z = (unpack_rows(numpy_helper.to_array(zp), bits, scales.shape[-1]) if zp is not None
             else np.full(scales.shape, 1 << (bits - 1), np.int32))  # fmt: skip
    n = q.shape[qaxis]
    s = np.repeat(scales, block, axis=qaxis).take(np.arange(n), axis=qaxis)
    zz = np.repeat(z, block, axis=qaxis).take(np.arange(n), axis=qaxis)
    full = (q - zz).astype(np.float32) * s
    dim = q.shape[gather_axis]
    return np.take(full, np.where(IDS < 0, IDS + dim, IDS), axis=gather_axis)


def as_uint8_form(model: onnx.ModelProto) -> onnx.ModelProto:
    """An INT4 / UINT4 model (gather axis 0, quantize axis last) rewritten to the uint8 form, as
    gather-jit-tract's loader rewrites it."""
    model = copy.deepcopy(model)
    node, attrs, data, scales, zp = gbq_parts(model)
    assert attrs.get("gather_axis", 0) == 0 and attrs.get("quantize_axis", 1) == len(data.dims) - 1
    signed = data.data_type == TensorProto.INT4
    offset = 8 if signed else 0
    q = nibbles_flat(data) + offset
    graph = model.graph
    keep = [i for i in graph.initializer if i.name not in (data.name, getattr(zp, "name", None))]
    del graph.initializer[:]
    graph.initializer.extend(keep)
    graph.initializer.append(numpy_helper.from_array(pack_rows(q, 4), data.name))
    if zp is None and signed:
        # The uint8 form's default zero point, 8, is the offset: no zero points needed.
        return model
    z = nibbles_flat(zp) + offset if zp is not None else np.zeros(scales.shape, np.int32)
    zp_name = zp.name if zp is not None else data.name + "_zero_points"
    graph.initializer.append(numpy_helper.from_array(pack_rows(z, 4), zp_name))
    del node.input[3:]
    node.input.append(zp_name)
    return model


# --------------------------------------------------------------------------------------------


def write_case(name: str, model: onnx.ModelProto) -> None:
    ops = [(n.domain, n.op_type) for n in model.graph.node]
    assert ("", "Gather") not in ops and ("com.microsoft", "GatherBlockQuantized") in ops, ops
    assert [d for d, _ in ops].count("com.microsoft") == 1, ops
    expected = run_ort(model)
    want = definition(model)
    assert want.dtype == expected[0].dtype and want.shape == expected[0].shape
    assert np.array_equal(want.view(np.uint32), expected[0].view(np.uint32)), \
        f"{name}: ONNX Runtime's embeddings differ from the definition"  # fmt: skip
    node, attrs, data, _, _ = gbq_parts(model)
    last = len(data.dims) - 1
    if data.data_type != TensorProto.UINT8 and attrs.get("quantize_axis", 1) in (last, -1):
        rewritten = run_ort(as_uint8_form(model))
        for a, b, out in zip(expected, rewritten, OUTPUTS, strict=True):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), f"{name}: {out} differs in uint8 form"
    case = OUT / name
    (case / "expected").mkdir(parents=True)
    (case / "model.onnx").write_bytes(model.SerializeToString())
    np.save(case / "input_ids.npy", IDS)
    for out, value in zip(OUTPUTS, expected, strict=True):
        np.save(case / "expected" / f"{out}.npy", value)
    size = sum(f.stat().st_size for f in case.rglob("*") if f.is_file())
    print(f"{name}: {size} bytes; GatherBlockQuantized data {TensorProto.DataType.Name(data.data_type)} "
          f"{list(data.dims)}, attributes {attrs}", flush=True)  # fmt: skip


def main() -> None:
    logging.getLogger("onnxruntime.quantization").setLevel(logging.WARNING)
    print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}")
    if OUT.exists():
        shutil.rmtree(OUT)
    model = float_model(np.random.default_rng(2026))
    write_case("uint4_zero_points", ort_quantized(model, block_size=32, is_symmetric=False))
    write_case("int4_symmetric", ort_quantized(model, block_size=16, is_symmetric=True))
    write_case("uint4_quantize_axis_0", ort_quantized(model, block_size=16, is_symmetric=False,
                                                      quant_axes=(("Gather", 0),)))  # fmt: skip
    write_case("uint8_bits8_zero_points", uint8_form(model, bits=8, block=32, zero_points=True))
    write_case("uint8_bits4", uint8_form(model, bits=4, block=64, zero_points=False))


if __name__ == "__main__":
    main()
