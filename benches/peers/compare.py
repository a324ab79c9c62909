#!/usr/bin/env python3
"""gather-jit beside numpy, ONNX Runtime, OpenVINO and JAX on the cases S1..S9 and three model shapes
(and, when asked with --cases quantized, the quantized gathers Q1..Q3).

Every peer runs single-threaded on float32 data and int64 indices (int32 for two model shapes; random,
valid, seeded), called the cheapest way it allows from Python:

- numpy:        np.take(..., out=) for Gather, np.take_along_axis for GatherElements, fancy
                indexing for GatherND (no `out=` exists for the last two);
- ONNX Runtime: one-node ONNX graph, one session (intra_op=1, inter_op=1, sequential), I/O binding
                of the inputs and of a preallocated output;
- OpenVINO:     one-node model compiled on CPU (1 thread, 1 stream, latency hint, f32), one reused
                infer request with shared input and output tensors;
- JAX:          jax.jit on CPU (XLA's Eigen pool off, 1 intra-op thread), block_until_ready;
- gather-jit:   its CLI, `gather-jit bench --json` (same shapes, its own seeded data).

Before timing, each peer's output (and gather-jit's, through `gather-jit run --check` on the same
.npy inputs) is compared with numpy's; a peer that disagrees, fails to import or fails to run is
reported as n/a with the reason. Each peer gets about --repeat-seconds per case, split into
--rounds interleaved rounds so that a burst of load from elsewhere hits every peer alike; a sample
is a batch of calls (about 20 µs worth) divided by its size, as in the CLI, and a peer's time is
the median of its samples (gather-jit's, the median of its per-round `bench` medians).

The quantized cases (Q1, Q2: GatherBlockQuantized, 4-bit, block 32, f32 scales; Q3-q4_0, Q3-q8_0:
GGUF rows; all on a [32000, 4096] logical table) run only when named: ONNX Runtime's
GatherBlockQuantized and numpy for Q1/Q2, numpy + gguf.quants.dequantize for Q3, gather-jit through
`gather-jit bench --op gather-block-quantized|gather-gguf`. While the CLI lacks those ops gather-jit
is n/a (the CLI's error is the reason) and the CLI's memcpy and fill come from a plain Gather bench
with the same output size.

The scatter cases (W1..W5 of issue 32; scatter_cases.py beside this file) run only when named
(--cases scatter, or W1,W3): each peer in place and, where it has one, out of place, and gather-jit
through `gather-jit bench --in-place` and without, on the script's indices (`--indices FILE.npy`).

It installs nothing: see README.md beside it. Pin the process to one core for steady numbers, e.g.
`taskset -c 0 python compare.py` (the gather-jit child processes inherit the affinity).
"""

from __future__ import annotations

import os

# Single thread everywhere; these must be set before the peers are imported.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)

import argparse
import gc
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

try:
    import numpy as np
except ImportError:
    sys.exit("compare.py needs numpy (the reference): pip install -r requirements.txt, see README.md")

import scatter_cases as sc  # noqa: E402 - beside this file; needs numpy only
from scatter_cases import SCase, SCASES  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PEERS = ("numpy", "onnxruntime", "openvino", "jax")
ALL_PEERS = (*PEERS, "gguf")  # gguf: the peer of the GGUF cases (Q3) only


# --------------------------------------------------------------------------------------------
# Cases


@dataclass(frozen=True)
class Case:
    name: str
    op: str  # "gather" | "gather-elements" | "gather-nd", as the CLI spells it
    data_shape: tuple[int, ...]
    indices_shape: tuple[int, ...]
    axis: int = 0
    batch_dims: int = 0
    index_type: str = "i64"  # "i64" | "i32", as the CLI spells it

    @property
    def index_dtype(self):
        return np.int64 if self.index_type == "i64" else np.int32

    @property
    def label(self) -> str:
        if self.op == "gather":
            return f"Gather axis={self.axis}"
        if self.op == "gather-elements":
            return f"GatherElements axis={self.axis}"
        return f"GatherND b={self.batch_dims}"

    def output_shape(self) -> tuple[int, ...]:
        d, i = self.data_shape, self.indices_shape
        if self.op == "gather":  # batch_dims 0 only here
            return d[: self.axis] + i + d[self.axis + 1 :]
        if self.op == "gather-elements":
            return i
        return i[:-1] + d[self.batch_dims + i[-1] :]

    def cli_args(self) -> list[str]:
        args = ["--op", self.op]
        if self.op in ("gather", "gather-elements"):
            args += ["--axis", str(self.axis)]
        if self.op in ("gather", "gather-nd"):
            args += ["--batch-dims", str(self.batch_dims)]
        return args

    def bench_args(self) -> list[str]:
        return ["--dtype", "f32", "--index-type", self.index_type]

    run_check = True  # `gather-jit run --check`: also the JIT against the interpreter


CASES = [
    Case("S1", "gather-nd", (1000, 256, 10, 15), (25, 125, 3)),
    Case("S2", "gather-nd", (30, 2, 100, 35), (30, 2, 3, 1), batch_dims=2),
    Case("S3", "gather-nd", (1, 64, 64, 320), (1, 64, 64, 1, 1), batch_dims=3),
    Case("S4", "gather", (6, 12, 10, 24), (15, 4, 20, 28), axis=1),
    Case("S5", "gather", (30522, 768), (8, 128), axis=0),
    Case("S6", "gather-elements", (64, 4096), (64, 4096), axis=1),
    Case("S7", "gather-elements", (1024, 1024), (1024, 1024), axis=0),
    Case("S8", "gather-nd", (512, 512), (262144, 2)),
    Case("S9", "gather", (16, 16), (4,), axis=0),
    # The model shapes of benches/gather.rs (workloads/src/lib.rs `model_cases`).
    Case("gpt2-embedding", "gather", (50257, 768), (1, 1024), axis=0),
    Case("topk-gather-elements", "gather-elements", (32, 1000), (32, 5), axis=1, index_type="i32"),
    Case("detection-gather-nd", "gather-nd", (1, 8400, 4), (1, 300, 1), batch_dims=1,
         index_type="i32"),  # fmt: skip
]




@dataclass(frozen=True)
class QCase:
    """A quantized gather (the cases Q1..Q3): GatherBlockQuantized (gather_axis 0, quantize_axis 1,
    no zero points, f32 scales) or GGUF rows. `data_shape` is the logical (dequantized) shape."""

    name: str
    op: str  # "gather-block-quantized" | "gather-gguf", as the CLI spells it
    data_shape: tuple[int, int]
    indices_shape: tuple[int, ...]
    bits: int = 4
    block_size: int = 32
    format: str = ""  # "q4_0" | "q8_0" for gather-gguf
    index_type: str = "i64"

    @property
    def label(self) -> str:
        if self.op == "gather-gguf":
            return f"GGUF rows {self.format.upper()}"
        return f"GatherBlockQuantized {self.bits}-bit block {self.block_size}"

    def output_shape(self) -> tuple[int, ...]:
        return self.indices_shape + self.data_shape[1:]

    def cli_args(self) -> list[str]:
        if self.op == "gather-gguf":
            return ["--op", self.op, "--format", self.format]
        return ["--op", self.op, "--bits", str(self.bits), "--block-size", str(self.block_size),
                "--gather-axis", "0", "--quantize-axis", "1"]  # fmt: skip

    def bench_args(self) -> list[str]:
        return []

    run_check = False

    def peers(self) -> tuple[str, ...]:
        """The peers that run this case (OpenVINO and JAX have no quantized gather here)."""
        return ("gguf",) if self.op == "gather-gguf" else ("numpy", "onnxruntime")


# A 4-bit LLaMA-sized embedding table (vocabulary 32000, width 4096), one prompt of 32 tokens
# (Q1, Q3) or 2048 (Q2).
QCASES = [
    QCase("Q1", "gather-block-quantized", (32000, 4096), (1, 32)),
    QCase("Q2", "gather-block-quantized", (32000, 4096), (1, 2048)),
    QCase("Q3-q4_0", "gather-gguf", (32000, 4096), (1, 32), format="q4_0"),
    QCase("Q3-q8_0", "gather-gguf", (32000, 4096), (1, 32), format="q8_0"),
]
GGUF_BLOCK_BYTES = {"q4_0": 18, "q8_0": 34}  # per block of 32 values: f16 d, then the values


def make_qinputs(case: QCase, seed: int) -> tuple[np.ndarray, ...]:
    """The stored inputs, in the order `gather-jit run` takes them. GatherBlockQuantized: data
    uint8 [rows, cols * bits / 8] (last axis packed, low nibble first), indices, scales f32
    [rows, cols / block]. GGUF: data uint8 [rows, blocks * block bytes] of random blocks (a random
    finite f16 d, random quants), indices. Indices uniform over the rows."""
    rng = np.random.default_rng(seed)
    rows, cols = case.data_shape
    indices = rng.integers(0, rows, case.indices_shape, dtype=np.int64)
    if case.index_type == "i32":
        indices = indices.astype(np.int32)
    if case.op == "gather-gguf":
        blocks, size = cols // 32, GGUF_BLOCK_BYTES[case.format]
        data = rng.integers(0, 256, (rows, blocks, size), dtype=np.uint8)
        d = (rng.standard_normal((rows, blocks), dtype=np.float32) * 0.02).astype("<f2")
        data[..., :2] = d.view(np.uint8).reshape(rows, blocks, 2)
        return data.reshape(rows, blocks * size), indices
    data = rng.integers(0, 256, (rows, cols * case.bits // 8), dtype=np.uint8)
    scales = rng.uniform(0.001, 0.05, (rows, -(-cols // case.block_size))).astype(np.float32)
    return data, indices, scales


def q_reference(case: QCase, inputs) -> np.ndarray:
    """The definition, spelled plainly (allocating; not timed): GatherBlockQuantized
    (q - 2**(bits-1)) * scale in float32; GGUF Q4_0 (nibble - 8) * d (value j from the low nibble
    of byte j, value 16 + j from its high nibble), Q8_0 q * d."""
    rows, cols = case.data_shape
    if case.op == "gather-gguf":
        data, indices = inputs
        size = GGUF_BLOCK_BYTES[case.format]
        g = data[indices.reshape(-1)].reshape(-1, cols // 32, size)
        d = np.ascontiguousarray(g[..., :2]).view("<f2")[..., 0].astype(np.float32)
        if case.format == "q4_0":
            qs = g[..., 2:]
            q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.int8) - np.int8(8)
        else:
            q = g[..., 2:].view(np.int8)
        out = q.astype(np.float32) * d[..., None]
        return out.reshape(case.output_shape())
    data, indices, scales = inputs
    g = data[indices]
    if case.bits == 4:
        q = np.stack([g & 0x0F, g >> 4], axis=-1).reshape(g.shape[:-1] + (cols,))
    else:
        q = g
    zp = 1 << (case.bits - 1)
    s = np.repeat(scales[indices], case.block_size, axis=-1)[..., :cols]
    return (q.astype(np.int32) - zp).astype(np.float32) * s


def setup_q_numpy(case: QCase, data, indices, scales):
    """GatherBlockQuantized in numpy with preallocated buffers: take the packed rows and their
    scales, a 256-entry table byte -> (low nibble - 8, high nibble - 8) as float32 pairs (which
    unpacks and subtracts the zero point in one take), one multiply by the block scales."""
    assert case.bits == 4 and case.data_shape[1] % case.block_size == 0
    cols, block = case.data_shape[1], case.block_size
    b = np.arange(256)
    lut = np.stack([(b & 0x0F) - 8, (b >> 4) - 8], axis=-1).astype(np.float32)
    g = np.empty(indices.shape + (data.shape[1],), np.uint8)
    s = np.empty(indices.shape + (scales.shape[1],), np.float32)
    pairs = np.empty(g.shape + (2,), np.float32)
    out = np.empty(case.output_shape(), np.float32)
    blocked = indices.shape + (cols // block, block)
    pairs_b, out_b, s_b = pairs.reshape(blocked), out.reshape(blocked), s[..., None]

    def call():
        np.take(data, indices, axis=0, out=g, mode="clip")  # valid indices: as mode="raise"
        np.take(scales, indices, axis=0, out=s, mode="clip")
        np.take(lut, g, axis=0, out=pairs, mode="clip")
        np.multiply(pairs_b, s_b, out=out_b)

    return call, lambda: out


def setup_q_onnxruntime(case: QCase, data, indices, scales):
    """ONNX Runtime's GatherBlockQuantized (com.microsoft, opset 1), a one-node graph over uint8
    data, I/O bound like the Gather cases."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    node = helper.make_node("GatherBlockQuantized", ["data", "indices", "scales"], ["out"],
                            domain="com.microsoft", gather_axis=0, quantize_axis=1,
                            block_size=case.block_size, bits=case.bits)  # fmt: skip
    idx_type = TensorProto.INT64 if indices.dtype == np.int64 else TensorProto.INT32
    graph = helper.make_graph(
        [node],
        "gather_block_quantized",
        [
            helper.make_tensor_value_info("data", TensorProto.UINT8, data.shape),
            helper.make_tensor_value_info("indices", idx_type, indices.shape),
            helper.make_tensor_value_info("scales", TensorProto.FLOAT, scales.shape),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, case.output_shape())],
    )
    model = helper.make_model(graph, ir_version=10, opset_imports=[
        helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])  # fmt: skip
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    out = np.empty(case.output_shape(), np.float32)
    binding = sess.io_binding()
    inputs = [ort.OrtValue.ortvalue_from_numpy(a) for a in (data, indices, scales)]
    for name, value in zip(("data", "indices", "scales"), inputs):
        binding.bind_ortvalue_input(name, value)
    binding.bind_output("out", "cpu", 0, np.float32, list(out.shape), out.ctypes.data)

    def call():
        sess.run_with_iobinding(binding)

    call.keep = (sess, inputs, binding, out)  # type: ignore[attr-defined]
    return call, lambda: out


def setup_q_gguf(case: QCase, data, indices):
    """GGUF rows: the gathered raw rows (np.take into a preallocated buffer), then
    `gguf.quants.dequantize` (llama.cpp's Python reference, numpy inside; it allocates)."""
    import gguf

    qtype = {"q4_0": gguf.GGMLQuantizationType.Q4_0, "q8_0": gguf.GGMLQuantizationType.Q8_0}
    qtype = qtype[case.format]
    flat = indices.reshape(-1)
    g = np.empty((flat.size, data.shape[1]), np.uint8)
    shape = case.output_shape()
    last = [None]

    def call():
        np.take(data, flat, axis=0, out=g, mode="clip")
        last[0] = gguf.quants.dequantize(g, qtype).reshape(shape)

    return call, lambda: last[0]


Q_SETUPS: dict[str, Callable] = {
    "numpy": setup_q_numpy,
    "onnxruntime": setup_q_onnxruntime,
    "gguf": setup_q_gguf,
}


def make_inputs(case: Case, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """float32 data and the case's indices, uniform in each indexed dim's valid range [0, size)."""
    rng = np.random.default_rng(seed)
    data = rng.standard_normal(case.data_shape, dtype=np.float32)
    ishape = case.indices_shape
    if case.op == "gather-nd":
        k, b = ishape[-1], case.batch_dims
        cols = [rng.integers(0, case.data_shape[b + j], ishape[:-1]) for j in range(k)]
        indices = np.stack(cols, axis=-1).astype(case.index_dtype)
    else:
        indices = rng.integers(0, case.data_shape[case.axis], ishape, dtype=case.index_dtype)
    return data, np.ascontiguousarray(indices)


def nd_index_tuple(xp, case: Case, indices) -> tuple:
    """GatherND as an advanced-indexing tuple: broadcast aranges for the batch dims, then one
    column of `indices` per indexed dim. `xp` is numpy or jax.numpy."""
    b, lead = case.batch_dims, indices.ndim - 1
    batch = [
        xp.arange(case.data_shape[i]).reshape([-1 if j == i else 1 for j in range(lead)])
        for i in range(b)
    ]
    cols = [indices[..., j] for j in range(indices.shape[-1])]
    return tuple(batch + cols)


# --------------------------------------------------------------------------------------------
# Peers: each `setup_*` returns (call, output) where `call()` does one gather and `output()`
# returns the result of the last call as a numpy array.

Setup = Callable[[Case, np.ndarray, np.ndarray], tuple[Callable[[], object], Callable[[], np.ndarray]]]


def setup_numpy(case, data, indices):
    if case.op == "gather":
        out = np.empty(case.output_shape(), np.float32)
        # mode="clip" writes straight into `out`; mode="raise" (the default) buffers and copies.
        # For the valid, non-negative indices used here both give the same result.
        return (lambda: np.take(data, indices, axis=case.axis, out=out, mode="clip")), (lambda: out)
    if case.op == "gather-elements":
        last = [None]

        def call():
            last[0] = np.take_along_axis(data, indices, axis=case.axis)

        return call, lambda: last[0]
    key = nd_index_tuple(np, case, indices)  # views of `indices` and shape-only aranges
    last = [None]

    def call():
        last[0] = data[key]

    return call, lambda: last[0]


def setup_onnxruntime(case, data, indices):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    attrs = {"axis": case.axis} if case.op != "gather-nd" else {"batch_dims": case.batch_dims}
    op_type = {"gather": "Gather", "gather-elements": "GatherElements", "gather-nd": "GatherND"}
    node = helper.make_node(op_type[case.op], ["data", "indices"], ["out"], **attrs)
    graph = helper.make_graph(
        [node],
        "gather",
        [
            helper.make_tensor_value_info("data", TensorProto.FLOAT, data.shape),
            helper.make_tensor_value_info(
                "indices",
                TensorProto.INT64 if case.index_type == "i64" else TensorProto.INT32,
                indices.shape,
            ),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, case.output_shape())],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model)

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(
        model.SerializeToString(), so, providers=["CPUExecutionProvider"]
    )
    out = np.empty(case.output_shape(), np.float32)
    binding = sess.io_binding()
    # OrtValues over the numpy buffers (no copy on CPU); kept alive by the closure below.
    inputs = [ort.OrtValue.ortvalue_from_numpy(data), ort.OrtValue.ortvalue_from_numpy(indices)]
    binding.bind_ortvalue_input("data", inputs[0])
    binding.bind_ortvalue_input("indices", inputs[1])
    binding.bind_output("out", "cpu", 0, np.float32, list(out.shape), out.ctypes.data)

    def call():
        sess.run_with_iobinding(binding)

    call.keep = (sess, inputs, binding, out)  # type: ignore[attr-defined]
    return call, lambda: out


def setup_openvino(case, data, indices):
    import openvino as ov
    import openvino.opset13 as ops

    p_data = ops.parameter(list(data.shape), ov.Type.f32, name="data")
    p_idx = ops.parameter(
        list(indices.shape), ov.Type.i64 if case.index_type == "i64" else ov.Type.i32, name="indices"
    )
    if case.op == "gather":  # Gather-8
        node = ops.gather(p_data, p_idx, ops.constant(np.int64(case.axis)), case.batch_dims)
    elif case.op == "gather-elements":  # GatherElements-6
        node = ops.gather_elements(p_data, p_idx, case.axis)
    else:  # GatherND-8: batch dims kept as they are, like ONNX
        node = ops.gather_nd(p_data, p_idx, case.batch_dims)
    model = ov.Model([node], [p_data, p_idx], "gather")
    config = {
        "INFERENCE_NUM_THREADS": 1,
        "NUM_STREAMS": 1,
        "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_PRECISION_HINT": "f32",
    }
    compiled = ov.Core().compile_model(model, "CPU", config)
    request = compiled.create_infer_request()
    out = np.empty(case.output_shape(), np.float32)
    tensors = [ov.Tensor(data, shared_memory=True), ov.Tensor(indices, shared_memory=True)]
    request.set_input_tensor(0, tensors[0])
    request.set_input_tensor(1, tensors[1])
    out_tensor = ov.Tensor(out, shared_memory=True)
    request.set_output_tensor(0, out_tensor)

    def call():
        # Inputs and output are already bound; share_outputs avoids copying the result.
        request.infer(share_inputs=True, share_outputs=True)

    call.keep = (compiled, tensors, out_tensor, out)  # type: ignore[attr-defined]
    return call, lambda: out


def setup_jax(case, data, indices):
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)  # keep int64 indices int64
    # XLA's own gather clamps start indices, so "promise_in_bounds" is memory-safe; it drops the
    # extra masking of jnp's default "fill" mode (our indices are all valid).
    mode = "promise_in_bounds"
    if case.op == "gather":
        # data[:, ..., indices]: jnp.take knows no "promise_in_bounds", and its "clip" mode is
        # several times slower on S5.
        key = (slice(None),) * case.axis
        fn = lambda d, i: d.at[key + (i,)].get(mode=mode)  # noqa: E731
    elif case.op == "gather-elements":
        fn = lambda d, i: jnp.take_along_axis(d, i, axis=case.axis, mode=mode)  # noqa: E731
    else:
        fn = lambda d, i: d.at[nd_index_tuple(jnp, case, i)].get(mode=mode)  # noqa: E731
    cpu = jax.devices("cpu")[0]
    d = jax.device_put(data, cpu)
    i = jax.device_put(indices, cpu)
    f = jax.jit(fn)
    last = [f(d, i).block_until_ready()]  # compile outside the timing

    def call():
        last[0] = f(d, i)
        last[0].block_until_ready()

    return call, lambda: np.asarray(last[0])


SETUPS: dict[str, Setup] = {
    "numpy": setup_numpy,
    "onnxruntime": setup_onnxruntime,
    "openvino": setup_openvino,
    "jax": setup_jax,
}


def peer_version(peer: str) -> str:
    """The peer's version, or raises (ImportError etc.) if it cannot be imported."""
    if peer == "numpy":
        return np.__version__
    if peer == "onnxruntime":
        import onnx
        import onnxruntime

        return f"{onnxruntime.__version__} (onnx {onnx.__version__})"
    if peer == "openvino":
        import openvino

        return openvino.__version__
    if peer == "jax":
        import jax
        import jaxlib

        return f"{jax.__version__} (jaxlib {jaxlib.__version__})"
    if peer == "gguf":
        import gguf  # noqa: F401 - importable, not only installed
        from importlib.metadata import version

        return f"{version('gguf')} (gguf.quants)"
    raise ValueError(peer)


# --------------------------------------------------------------------------------------------
# Timing


class Sampler:
    """Times one callable in slices: warmed up and its batch size fixed once, then each
    `take(seconds)` adds samples (ns per call: a batch of ~20 µs worth of calls, at least one,
    divided by its size, as in the CLI) for about that long."""

    def __init__(self, call: Callable[[], object]):
        for _ in range(3):  # warm caches, pages and lazy initialisation
            call()
        t = time.perf_counter_ns()
        call()
        once = max(time.perf_counter_ns() - t, 1)
        self.call = call
        self.batch = max(1, min(10_000, 20_000 // once))
        self.samples: list[float] = []

    def take(self, seconds: float, at_least: int = 3) -> None:
        call, batch, samples = self.call, self.batch, []
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            deadline = time.perf_counter() + seconds
            while len(samples) < at_least or (
                time.perf_counter() < deadline and len(samples) < 200_000
            ):
                t = time.perf_counter_ns()
                for _ in range(batch):
                    call()
                samples.append((time.perf_counter_ns() - t) / batch)
        finally:
            if gc_was_enabled:
                gc.enable()
        self.samples += samples

    def median(self) -> float:
        return statistics.median(self.samples)


def median_ns(call: Callable[[], object], seconds: float) -> float:
    sampler = Sampler(call)
    sampler.take(seconds, at_least=5)
    return sampler.median()


def memcpy_call(nbytes: int) -> Callable[[], object]:
    """np.copyto of an output-sized buffer into a preallocated one."""
    src = np.random.default_rng(1).standard_normal(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    return lambda: np.copyto(dst, src)


# --------------------------------------------------------------------------------------------
# gather-jit through its CLI


def run_cli(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, check=False)


def check_gather_jit(binary: Path, case: Case | QCase | SCase, inputs, reference,
                     tmp: Path) -> str | None:  # fmt: skip
    """None if `gather-jit run` (with `--check` for the Gather and scatter cases) on the same
    inputs (data, indices[, scales or updates]) gives numpy's result, else why not."""
    names = ["data", "indices", "updates" if isinstance(case, SCase) else "scales"][: len(inputs)]
    paths = [tmp / f"{name}.npy" for name in names]
    out = tmp / "out.npy"
    try:
        for path, array in zip(paths, inputs):
            np.save(path, array)
        cmd = [str(binary), "run", *case.cli_args(), *map(str, paths), "-o", str(out)]
        proc = run_cli(cmd + (["--check"] if case.run_check else []))
        if proc.returncode != 0:
            return f"`gather-jit run` exited {proc.returncode}: {proc.stderr.strip()[:200]}"
        got = np.load(out)
        return mismatch(got, reference)
    finally:
        for p in [*paths, out]:
            p.unlink(missing_ok=True)


def bench_gather_jit(binary: Path, case: Case | QCase, seconds: float) -> dict:
    shape = lambda s: "x".join(map(str, s))  # noqa: E731
    cmd = [str(binary), "bench", *case.cli_args(), "--data-shape", shape(case.data_shape),
           "--indices-shape", shape(case.indices_shape), *case.bench_args(),
           "--time-ms", str(max(1, round(seconds * 1000))), "--json"]  # fmt: skip
    proc = run_cli(cmd)
    if proc.returncode != 0:
        raise RuntimeError(f"exited {proc.returncode}: {proc.stderr.strip()[:200]}")
    result = json.loads(proc.stdout)
    if tuple(result["output_shape"]) != case.output_shape():
        raise RuntimeError(f"output shape {result['output_shape']} != {case.output_shape()}")
    return result


def bench_scatter_jit(binary: Path, case: SCase, seconds: float, indices: Path,
                      in_place: bool) -> dict:  # fmt: skip
    """`gather-jit bench` of a scatter case on the script's indices (`--indices FILE.npy`; data and
    updates are the CLI's own random values), `--in-place` or not."""
    shape = lambda s: "x".join(map(str, s))  # noqa: E731
    cmd = [str(binary), "bench", *case.cli_args(), "--data-shape", shape(case.data_shape),
           "--indices-shape", shape(case.indices_shape), *case.bench_args(),
           "--indices", str(indices), *(["--in-place"] if in_place else []),
           "--time-ms", str(max(1, round(seconds * 1000))), "--json"]  # fmt: skip
    proc = run_cli(cmd)
    if proc.returncode != 0:
        raise RuntimeError(f"exited {proc.returncode}: {proc.stderr.strip()[:200]}")
    result = json.loads(proc.stdout)
    got = result.get("output_shape")
    if got is not None and tuple(got) != case.output_shape():
        raise RuntimeError(f"output shape {got} != {case.output_shape()}")
    return result


def cli_copy_fill(binary: Path, case: QCase, seconds: float) -> dict:
    """memcpy_ns and fill_ns of the output's size from a plain f32 Gather bench whose output has
    the quantized case's shape (data [rows, row_len] with one row per index): for when the CLI
    cannot bench the quantized op itself. Only those two fields (and memcpy_bytes) are kept."""
    rows = max(1, int(np.prod(case.indices_shape)))
    probe = Case(case.name, "gather", (rows, case.data_shape[1]), case.indices_shape)
    result = bench_gather_jit(binary, probe, seconds)
    return {k: result[k] for k in ("memcpy_ns", "fill_ns", "memcpy_bytes") if k in result}


# --------------------------------------------------------------------------------------------
# Driver


def mismatch(got: np.ndarray, want: np.ndarray) -> str | None:
    """None if equal (shape, dtype and every bit of every value), else a short description."""
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"wrong output shape {got.shape}, numpy gives {want.shape}"
    if got.dtype != want.dtype:
        return f"wrong output dtype {got.dtype}"
    if not np.array_equal(got, want):
        bad = int(np.count_nonzero(got != want))
        return f"output differs from numpy in {bad} of {want.size} elements"
    return None


def short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
    return text[:160]


@dataclass
class Row:
    case: Case | QCase | SCase
    # peer -> median ns; for the scatter cases "peer/in-place" or "peer/out-of-place"
    times: dict[str, float] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # peer -> why n/a
    memcpy_np: float | None = None
    cli: dict | None = None
    # Quantized cases whose op the CLI cannot bench: memcpy/fill from `cli_copy_fill`.
    cli_copy_fill: dict | None = None
    # Scatter cases: `cli` is the out-of-place bench, this the in-place one.
    cli_in_place: dict | None = None


def set_up_and_check(case_name: str, name: str, set_up, reference: np.ndarray, row,
                     samplers: dict, log) -> None:  # fmt: skip
    """Sets up the peer run `name` (`set_up()` returns its call and its output), calls it once and
    checks the output against `reference`: a sampler in `samplers` if it agrees, else a note in
    `row.notes` saying why (a peer that fails is n/a, not a crash)."""
    log(f"{case_name} {name}: set up and check")
    try:
        call, output = set_up()
        call()
        why = mismatch(output(), reference)
        if why:
            row.notes[name] = why
        else:
            # `output` too: it owns the buffer that ONNX Runtime and OpenVINO write into.
            samplers[name] = Sampler(call)
            samplers[name].keep = output  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 - a peer that fails is n/a, not a crash
        row.notes[name] = short(exc)
        log(traceback.format_exc())


def checked_gather_jit(binary: Path, case, inputs, reference: np.ndarray, tmp,
                       log) -> str | None:  # fmt: skip
    """`check_gather_jit`, with an exception of its own as the reason it failed."""
    log(f"{case.name} gather-jit: check")
    try:
        return check_gather_jit(binary, case, inputs, reference, tmp)
    except Exception as exc:  # noqa: BLE001
        return short(exc)


def run_case(case: Case | QCase, peers: list[str], broken: dict[str, str], binary: Path,
             seconds: float, rounds: int, seed: int, tmp: Path, log) -> Row:  # fmt: skip
    """Sets every peer up and checks its output, then times them all in `rounds` interleaved
    rounds, the order rotating, so that a burst of load from elsewhere is shared out rather than
    landing on one peer. A peer's time is the median of all its samples; gather-jit's is the
    median of its per-round `gather-jit bench` medians."""
    row = Row(case)
    if isinstance(case, QCase):
        inputs = make_qinputs(case, seed)
        reference = q_reference(case, inputs)
        setups, peers = Q_SETUPS, [p for p in peers if p in case.peers()]
    else:
        inputs = make_inputs(case, seed)
        reference = setup_numpy_reference(case, *inputs)
        setups, peers = SETUPS, [p for p in peers if p in PEERS]
    assert reference.shape == case.output_shape(), (reference.shape, case.output_shape())

    samplers: dict[str, Sampler] = {}
    for peer in peers:
        if peer in broken:  # not importable: said once, in the header
            continue
        set_up_and_check(case.name, peer, lambda: setups[peer](case, *inputs), reference, row,
                         samplers, log)  # fmt: skip
    samplers["memcpy"] = Sampler(memcpy_call(reference.nbytes))

    why = checked_gather_jit(binary, case, inputs, reference, tmp, log)
    if why:
        row.notes["gather-jit"] = why

    names = list(samplers) + ([] if why else ["gather-jit"])
    cli_runs: list[dict] = []
    for r in range(rounds):
        log(f"{case.name} timing, round {r + 1} of {rounds}")
        for name in names[r % len(names) :] + names[: r % len(names)]:
            if name != "gather-jit":
                samplers[name].take(seconds / rounds)
                continue
            try:
                cli_runs.append(bench_gather_jit(binary, case, seconds / rounds))
            except Exception as exc:  # noqa: BLE001
                row.notes["gather-jit"] = short(exc)
                names.remove("gather-jit")

    for name, sampler in samplers.items():
        if name == "memcpy":
            row.memcpy_np = sampler.median()
        else:
            row.times[name] = sampler.median()
    if cli_runs and "gather-jit" in names:
        row.cli = merge_cli_runs(cli_runs)
        row.times["gather-jit"] = row.cli["median_ns"]
    elif isinstance(case, QCase):
        log(f"{case.name} memcpy and fill of the output through a plain Gather bench")
        try:
            row.cli_copy_fill = cli_copy_fill(binary, case, seconds)
        except Exception as exc:  # noqa: BLE001
            log(f"{case.name}: no CLI memcpy/fill ({short(exc)})")
    del samplers, inputs
    gc.collect()
    return row


def run_scase(case: SCase, peers: list[str], broken: dict[str, str], binary: Path,
              seconds: float, rounds: int, seed: int, tmp: Path, log) -> Row:  # fmt: skip
    """A scatter case as `run_case` times a gather: every peer in each of its modes (in place, out
    of place; see scatter_cases.MODES) set up, called once and checked against the plain
    reference, then all timed in interleaved rounds beside a memcpy of data's size and gather-jit's
    `bench` in place and out of place on the same indices."""
    row = Row(case)
    inputs = sc.make_sinputs(case, seed)
    reference = sc.s_reference(case, *inputs)
    samplers: dict[str, Sampler] = {}
    for peer in (p for p in peers if p in sc.SETUPS and p not in broken):
        for mode in sc.MODES[peer]:
            name = f"{peer}/{mode}"
            set_up_and_check(case.name, name, lambda: sc.SETUPS[peer](case, mode, *inputs),
                             reference, row, samplers, log)  # fmt: skip
    samplers["memcpy"] = Sampler(memcpy_call(reference.nbytes))

    why = checked_gather_jit(binary, case, inputs, reference, tmp, log)
    jit_names = [f"gather-jit/{mode}" for mode in (sc.IN_PLACE, sc.OUT_OF_PLACE)]
    if why:
        row.notes["gather-jit"] = why
        jit_names = []
    indices_path = tmp / f"{case.name}-indices.npy"
    np.save(indices_path, inputs[1])

    names = list(samplers) + jit_names
    cli_runs: dict[str, list[dict]] = {name: [] for name in jit_names}
    for r in range(rounds):
        log(f"{case.name} timing, round {r + 1} of {rounds}")
        for name in names[r % len(names):] + names[: r % len(names)]:
            if name in samplers:
                samplers[name].take(seconds / rounds)
                continue
            if name not in cli_runs:  # failed in an earlier round
                continue
            try:
                in_place = name.endswith(sc.IN_PLACE)
                run = bench_scatter_jit(binary, case, seconds / rounds, indices_path, in_place)
                cli_runs[name].append(run)
            except Exception as exc:  # noqa: BLE001
                row.notes[name] = short(exc)
                del cli_runs[name]
    indices_path.unlink(missing_ok=True)

    for name, sampler in samplers.items():
        if name == "memcpy":
            row.memcpy_np = sampler.median()
        else:
            row.times[name] = sampler.median()
    for name, runs in cli_runs.items():
        merged = merge_cli_runs(runs)
        row.times[name] = merged["median_ns"]
        if name.endswith(sc.IN_PLACE):
            row.cli_in_place = merged
        else:
            row.cli = merged
    del samplers, inputs, reference
    gc.collect()
    return row


def merge_cli_runs(runs: list[dict]) -> dict:
    """The first run's JSON with every numeric field replaced by its median over the runs."""
    merged = dict(runs[0])
    for key, value in runs[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            merged[key] = statistics.median(run[key] for run in runs)
    merged["runs"] = len(runs)
    return merged


def setup_numpy_reference(case: Case, data, indices) -> np.ndarray:
    """numpy's result, computed with the plain (raising, allocating) spellings."""
    if case.op == "gather":
        return np.take(data, indices, axis=case.axis)
    if case.op == "gather-elements":
        return np.take_along_axis(data, indices, axis=case.axis)
    return data[nd_index_tuple(np, case, indices)]


def fmt_us(ns: float | None) -> str:
    if ns is None:
        return "n/a"
    us = ns / 1000
    if us >= 100:
        return f"{us:,.0f}"
    if us >= 10:
        return f"{us:.1f}"
    if us >= 1:
        return f"{us:.2f}"
    return f"{us:.3f}"


def table(rows: list[Row], peers: list[str]) -> str:
    head = ["case", "op", "data shape", "indices shape", "gather-jit", *peers, "best peer",
            "gather-jit / best", "memcpy (numpy)", "memcpy (gather-jit CLI)",
            "fill (gather-jit CLI)"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        c = r.case
        timed = {p: r.times[p] for p in peers if p in r.times}
        best = min(timed, key=timed.get) if timed else None
        jit = r.times.get("gather-jit")
        ratio = f"{jit / timed[best]:.2f}" if best and jit else "n/a"
        cells = [
            c.name,
            c.label,
            "[" + ",".join(map(str, c.data_shape)) + "]",
            "[" + ",".join(map(str, c.indices_shape)) + "]"
            + ("" if c.index_type == "i64" else f" {c.index_type}"),
            fmt_us(jit),
            *(fmt_us(r.times.get(p)) for p in peers),
            f"{fmt_us(timed[best])} ({best})" if best else "n/a",
            ratio,
            fmt_us(r.memcpy_np),
            fmt_us(r.cli["memcpy_ns"]) if r.cli else "n/a",
            fmt_us(r.cli.get("fill_ns")) if r.cli else "n/a",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def qtable(rows: list[Row]) -> str:
    """The quantized cases: their own peers (numpy and ONNX Runtime for GatherBlockQuantized,
    numpy + gguf.quants for GGUF rows); `-` where a peer does not apply."""
    peers = ("numpy", "onnxruntime", "gguf")
    head = ["case", "op", "data shape (logical)", "indices shape", "gather-jit", "numpy",
            "onnxruntime", "numpy + gguf", "best peer", "gather-jit / best", "memcpy (numpy)",
            "memcpy (gather-jit CLI)", "fill (gather-jit CLI)"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        c = r.case
        timed = {p: r.times[p] for p in peers if p in r.times}
        best = min(timed, key=timed.get) if timed else None
        jit = r.times.get("gather-jit")
        ratio = f"{jit / timed[best]:.2f}" if best and jit else "n/a"
        cli = r.cli or r.cli_copy_fill or {}
        cells = [
            c.name,
            c.label,
            "[" + ",".join(map(str, c.data_shape)) + "]",
            "[" + ",".join(map(str, c.indices_shape)) + "]"
            + ("" if c.index_type == "i64" else f" {c.index_type}"),
            fmt_us(jit),
            *(fmt_us(r.times.get(p)) if p in c.peers() else "-" for p in peers),
            f"{fmt_us(timed[best])} ({best})" if best else "n/a",
            ratio,
            fmt_us(r.memcpy_np),
            fmt_us(cli.get("memcpy_ns")),
            fmt_us(cli.get("fill_ns")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def best_of(times: dict[str, float], names) -> tuple[str | None, float | None]:
    timed = {n: times[n] for n in names if n in times}
    best = min(timed, key=timed.get) if timed else None
    return best, (timed[best] if best else None)


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "n/a"


def stables(rows: list[Row], peers: list[str]) -> str:
    """The scatter cases: in place (gather-jit's `--in-place` beside every peer's in-place mode,
    the best peer over all modes), then out of place (beside the peers that have that mode and a
    memcpy of data's size)."""
    peer_modes = [f"{p}/{m}" for p in peers if p in sc.MODES for m in sc.MODES[p]]
    shape = lambda dims: "[" + ",".join(map(str, dims)) + "]"  # noqa: E731

    def cell(r: Row, name: str) -> str:
        return fmt_us(r.times.get(name)) if name.split("/")[0] in peers else "-"

    def best_cell(best, ns) -> str:
        return f"{fmt_us(ns)} ({best.replace('/', ', ')})" if best else "n/a"

    in_peers = [p for p in peers if sc.IN_PLACE in sc.MODES.get(p, ())]
    head = ["case", "op", "data", "indices", "gather-jit", *in_peers, "best peer (any mode)",
            "gather-jit / best", "target"]  # fmt: skip
    lines = ["In place (data becomes the output; ONNX Runtime and OpenVINO with the output bound "
             "to data's buffer, JAX donating data):", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]  # fmt: skip
    for r in rows:
        c, jit = r.case, r.times.get(f"gather-jit/{sc.IN_PLACE}")
        best, best_ns = best_of(r.times, peer_modes)
        target = sc.TARGETS.get(c.name)
        cells = [c.name, c.label, shape(c.data_shape), shape(c.indices_shape), fmt_us(jit),
                 *(cell(r, f"{p}/{sc.IN_PLACE}") for p in in_peers), best_cell(best, best_ns),
                 ratio(jit, best_ns), f"{target}" if target else "50 ns raw call (criterion)"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")

    out_peers = [p for p in peers if sc.OUT_OF_PLACE in sc.MODES.get(p, ())]
    head = ["case", "gather-jit", *out_peers, "best peer", "gather-jit / best",
            "memcpy of data (numpy)", "memcpy of data (gather-jit CLI)", "gather-jit / memcpy"]  # fmt: skip
    lines += ["", "Out of place (output = data with the updates applied, in a separate buffer):", "",
              "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]  # fmt: skip
    for r in rows:
        jit = r.times.get(f"gather-jit/{sc.OUT_OF_PLACE}")
        best, best_ns = best_of(r.times, [f"{p}/{sc.OUT_OF_PLACE}" for p in out_peers])
        cli = r.cli or {}
        # The CLI's own ratio (the median over the rounds of each run's kernel / memcpy, both
        # timed in one process): steadier under load than a ratio of the two medians.
        to_memcpy = cli.get("ratio_to_memcpy")
        cells = [r.case.name, fmt_us(jit), *(cell(r, f"{p}/{sc.OUT_OF_PLACE}") for p in out_peers),
                 best_cell(best, best_ns), ratio(jit, best_ns), fmt_us(r.memcpy_np),
                 fmt_us(cli.get("memcpy_ns")),
                 f"{to_memcpy:.2f}" if to_memcpy is not None else "n/a"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cli_table(rows: list[Row]) -> str:
    lines = ["| case | compile, median (µs) | first compile (µs) | on shared code (µs) "
             "| cache hit (ns) | hit, lent (ns) | gather-jit / memcpy (CLI) | GB/s | code bytes |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        if not r.cli:
            continue
        j = r.cli

        def num(key: str, scale: float = 1.0, digits: int = 0) -> str:
            return f"{j[key] / scale:.{digits}f}" if isinstance(j.get(key), (int, float)) else "n/a"

        cells = [r.case.name, num("compile_ns", 1000), num("first_compile_ns", 1000),
                 num("shared_code_ns", 1000, 1), num("cache_hit_ns"), num("cache_hit_lent_ns"), num("ratio_to_memcpy", digits=2),
                 num("gbps", digits=1), num("code_bytes")]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def header(binary: Path, versions: dict[str, str], broken: dict[str, str]) -> str:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    jit_version = run_cli([str(binary), "--version"]).stdout.strip() or "n/a"
    # The commit of the checkout the binary was built in (target/release/ lies inside it).
    where = str(binary.resolve().parent)
    commit = run_cli(["git", "-C", where, "rev-parse", "--short", "HEAD"]).stdout.strip()
    if commit:
        dirty = run_cli(["git", "-C", where, "status", "--porcelain", "--", ":/src", ":/cli",
                         ":/Cargo.toml", ":/Cargo.lock"]).stdout.strip()  # fmt: skip
        commit += " + uncommitted changes in src/ or cli/" if dirty else ""
    out = [
        f"date: {time.strftime('%Y-%m-%d %H:%M %Z')}",
        f"machine: {cpu}, {os.cpu_count()} cpus, affinity {sorted(os.sched_getaffinity(0))}, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        f"python {platform.python_version()}; {jit_version} at commit {commit or '?'}",
    ]
    for peer in (*PEERS, "gguf"):
        if peer in versions:
            out.append(f"{peer} {versions[peer]}")
        elif peer in broken:
            out.append(f"{peer}: n/a ({broken[peer]})")
    return "\n".join(out)


def huge_pages_note() -> str:
    """The kernel's THP mode and whether numpy advises huge pages for its large arrays (as
    `gather-jit bench` does unless `--no-huge-pages`): where the mode is `madvise`, a gather
    over a large table runs measurably faster with the advice."""
    try:
        modes = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().split()
        mode = next((m.strip("[]") for m in modes if m.startswith("[")), "unknown")
    except OSError:
        mode = "unknown"
    try:
        from numpy._core import multiarray

        advised = multiarray._set_madvise_hugepage(True)  # returns the previous setting
        multiarray._set_madvise_hugepage(advised)
    except (ImportError, AttributeError):
        advised = "unknown"
    return f"THP mode {mode}; numpy advises its arrays of 4 MiB or more: {advised}; gather-jit bench: yes"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="all",
                    help="comma-separated, e.g. S1,S5,gpt2-embedding,Q1,W2; all (default: S1..S9 "
                         "and the models), models, quantized (Q1, Q2, Q3-q4_0, Q3-q8_0; Q3 is both), "
                         "scatter (W1..W5)")  # fmt: skip
    ap.add_argument("--peers", default=",".join(ALL_PEERS),
                    help="comma-separated subset of peers (gguf: Q3's numpy + gguf.quants)")  # fmt: skip
    ap.add_argument("--repeat-seconds", type=float, default=1.0,
                    help="time spent timing each peer on each case (default 1.0)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved rounds the time of each peer is split into (default 3)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=42, help="seed of the data and indices")
    ap.add_argument("--gather-jit", type=Path, default=REPO / "target/release/gather-jit",
                    help="the CLI binary (cargo build --release -p gather-jit-cli)")  # fmt: skip
    ap.add_argument("--json", type=Path, help="also write the raw results here")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = ap.parse_args()

    by_name = {c.name.lower(): c for c in [*CASES, *QCASES, *SCASES]}
    groups = {
        "all": [c.name.lower() for c in CASES],
        "models": [c.name.lower() for c in CASES if not c.name.startswith("S")],
        "quantized": [c.name.lower() for c in QCASES],
        "q3": [c.name.lower() for c in QCASES if c.name.startswith("Q3")],
        "scatter": [c.name.lower() for c in SCASES],
    }
    names = []
    for n in (s.strip().lower() for s in args.cases.split(",") if s.strip()):
        names += [m for m in groups.get(n, [n]) if m not in names]
    unknown = [n for n in names if n not in by_name]
    wanted = [p.strip() for p in args.peers.split(",") if p.strip()]
    peers = [p for p in ALL_PEERS if p in wanted]
    if unknown or any(p not in ALL_PEERS for p in wanted):
        ap.error(f"cases are {', '.join(c.name for c in [*CASES, *QCASES, *SCASES])} (or all, "
                 f"models, quantized, Q3, scatter); peers are {', '.join(ALL_PEERS)}")  # fmt: skip
    if not args.gather_jit.exists():
        ap.error(f"{args.gather_jit} not found: cargo build --release -p gather-jit-cli")

    log = (lambda msg: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    versions, broken = {}, {}
    # Only the peers some selected case runs (gguf only for Q3, OpenVINO and JAX not for Q*).
    needed = {p for n in names for p in (by_name[n].peers() if isinstance(by_name[n], QCase)
                                         else PEERS)}  # fmt: skip
    for peer in (p for p in peers if p in needed):
        try:
            versions[peer] = peer_version(peer)
        except Exception as exc:  # noqa: BLE001 - not installed or broken: n/a for every case
            broken[peer] = short(exc)

    start_load = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="gather-jit-peers-") as tmp:
        for name in names:
            run = run_scase if isinstance(by_name[name], SCase) else run_case
            rows.append(run(by_name[name], peers, broken, args.gather_jit, args.repeat_seconds,
                            max(1, args.rounds), args.seed, Path(tmp), log))  # fmt: skip

    head = header(args.gather_jit, versions, broken)
    end_load = os.getloadavg()
    pages = huge_pages_note()
    floor = median_ns(lambda: None, min(args.repeat_seconds, 0.2))
    print(head)
    print(f"load average at start {start_load[0]:.2f}, at end {end_load[0]:.2f} (1 min)")
    print(f"huge pages: {pages}")
    print(f"harness floor: one call of an empty Python function in the timing loop {floor:.0f} ns")
    print()
    plain = [r for r in rows if isinstance(r.case, Case)]
    quantized = [r for r in rows if isinstance(r.case, QCase)]
    scatters = [r for r in rows if isinstance(r.case, SCase)]
    if plain:
        print("Median µs per call, single thread, f32 data, i64 indices unless marked:")
        print()
        print(table(plain, [p for p in peers if p in PEERS]))
        print()
    if quantized:
        print("Quantized gathers, median µs per call, single thread, f32 output, i64 indices "
              "(GatherBlockQuantized: f32 scales, no zero points):")  # fmt: skip
        print()
        print(qtable(quantized))
        print()
    if scatters:
        print("Scatters, median µs per call, single thread, i64 indices:")
        print()
        print(stables(scatters, [p for p in peers if p in PEERS]))
        print()
    print("gather-jit (from `gather-jit bench --json`):")
    print()
    print(cli_table(rows))
    notes = [(r.case.name, p, why) for r in rows for p, why in r.notes.items()]
    if notes:
        print()
        print("n/a:")
        for name, peer, why in notes:
            print(f"- {name} {peer}: {why}")
    if args.json:
        raw = [
            {"case": r.case.name, "op": r.case.label, "data_shape": r.case.data_shape,
             "indices_shape": r.case.indices_shape, "index_type": r.case.index_type,
             "median_ns": r.times, "n/a": r.notes,
             "memcpy_numpy_ns": r.memcpy_np, "gather_jit_cli": r.cli}  # fmt: skip
            for r in rows
        ]
        for entry, r in zip(raw, rows):
            if isinstance(r.case, QCase):
                c = r.case
                entry["quantized"] = (
                    {"format": c.format} if c.op == "gather-gguf" else
                    {"bits": c.bits, "block_size": c.block_size, "gather_axis": 0,
                     "quantize_axis": 1, "scales": "f32", "zero_points": False})  # fmt: skip
                if r.cli_copy_fill:
                    entry["gather_jit_cli_copy_fill"] = r.cli_copy_fill
            if isinstance(r.case, SCase):
                c = r.case
                entry["scatter"] = {"op": c.op, "axis": c.axis, "reduction": c.reduction,
                                    "dtype": c.dtype, "updates_shape": c.updates_shape,
                                    "indices": c.indices, "zero_data": c.zero_data}  # fmt: skip
                entry["gather_jit_cli_in_place"] = r.cli_in_place
        setup = {
            # The header without its date line: the file is kept in the repo, git dates it.
            "header": [line for line in head.splitlines() if not line.startswith("date:")],
            "load_average_1min": {"start": start_load[0], "end": end_load[0]},
            "huge_pages": pages,
            "python_floor_ns": floor,
            "repeat_seconds": args.repeat_seconds,
            "rounds": args.rounds,
            "seed": args.seed,
        }
        args.json.write_text(
            json.dumps({"versions": versions, "setup": setup, "rows": raw}, indent=1) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
