"""The scatter cases W1..W5 of issue 32 for compare.py: the cases, their inputs, a plain numpy
reference, and each peer's scatter, in place and out of place (see README.md, "What is measured",
the scatter part).

The cases are those of `gather_jit_workloads::scatter_cases` (workloads/src/scatter.rs), with
indices of the same distributions drawn by numpy's generator (not the same values: the script gives
its indices to `gather-jit bench --indices`, so every side of one run scatters the same ids).

Each `setup_*` returns (call, output): `call()` does one scatter, `output()` the data tensor after
the last call (in place) or the output buffer (out of place), as a numpy array. An in-place setup
works on its own copy of data, so the first call's result is the scatter of the pristine data,
which compare.py checks before timing; later calls scatter into the previous result (with a
reduction the values keep growing, by at most the updates' sum per call).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KV_POSITION = 4000  # W1's new-token position of 4096, as workloads/src/scatter.rs
ZIPF_EXPONENT = 1.1  # W2: id of rank r drawn with probability proportional to 1 / r^1.1

IN_PLACE, OUT_OF_PLACE = "in-place", "out-of-place"
# The modes each peer is timed in. numpy has no out-of-place scatter other than a copy and the
# in-place call; ONNX Runtime's and OpenVINO's in place is the output bound to data's buffer.
MODES = {
    "numpy": (IN_PLACE,),
    "onnxruntime": (OUT_OF_PLACE, IN_PLACE),
    "openvino": (OUT_OF_PLACE, IN_PLACE),
    "jax": (OUT_OF_PLACE, IN_PLACE),
}

# Issue 32's targets, gather-jit / the other: in place vs the best peer (W1: vs numpy), W1's out
# of place vs a memcpy of data. W5's is 50 ns for a raw call, which the criterion bench times.
TARGETS = {"W1": 0.5, "W2": 0.5, "W3": 0.5, "W4": 0.7}
W1_MEMCPY_TARGET = 1.1


@dataclass(frozen=True)
class SCase:
    name: str
    op: str  # "scatter-nd" | "scatter-elements", as the CLI spells it
    data_shape: tuple[int, ...]
    indices_shape: tuple[int, ...]
    updates_shape: tuple[int, ...]
    indices: str  # "kv-cache" | "zipf" | "uniform" | "column-permutations" | "distinct-rows"
    axis: int = 0
    reduction: str = "none"  # "none" | "sum", as the CLI spells it
    dtype: str = "f32"  # "f32" | "f16", as the CLI spells it
    zero_data: bool = False
    index_type = "i64"

    @property
    def np_dtype(self):
        return np.float16 if self.dtype == "f16" else np.float32

    @property
    def label(self) -> str:
        op = "ScatterND" if self.op == "scatter-nd" else f"ScatterElements axis={self.axis}"
        return op + (" add" if self.reduction == "sum" else "") + (" f16" if self.dtype == "f16" else "")

    def output_shape(self) -> tuple[int, ...]:
        return self.data_shape

    def cli_args(self) -> list[str]:
        args = ["--op", self.op, "--flavor", "onnx", "--reduction", self.reduction]
        return args + (["--axis", str(self.axis)] if self.op == "scatter-elements" else [])

    def bench_args(self) -> list[str]:
        shape = "x".join(map(str, self.updates_shape))
        return ["--updates-shape", shape, "--dtype", self.dtype, "--index-type", self.index_type]

    run_check = True


SCASES = [
    SCase("W1", "scatter-nd", (1, 32, 4096, 128), (32, 3), (32, 128), "kv-cache", dtype="f16"),
    SCase("W2", "scatter-nd", (30522, 768), (1024, 1), (1024, 768), "zipf", reduction="sum",
          zero_data=True),  # fmt: skip
    SCase("W3", "scatter-elements", (64, 4096), (64, 1024), (64, 1024), "uniform", axis=1,
          reduction="sum"),  # fmt: skip
    SCase("W4", "scatter-elements", (1024, 1024), (1024, 1024), (1024, 1024),
          "column-permutations"),  # fmt: skip
    SCase("W5", "scatter-nd", (16, 16), (4, 1), (4, 16), "distinct-rows"),
]


def make_sinputs(case: SCase, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Data (zeros for W2, else standard normal values), int64 indices of the case's distribution,
    updates (standard normal), all C-contiguous."""
    rng = np.random.default_rng(seed)
    dt = case.np_dtype
    if case.zero_data:
        # Written zeros: np.zeros' pages would all map the kernel's one zero page, which an
        # out-of-place peer then copies from the cache (ONNX Runtime beat a memcpy of data on W2).
        data = np.full(case.data_shape, 0, dt)
    else:
        data = rng.standard_normal(case.data_shape, dtype=np.float32).astype(dt)
    d, ishape = case.data_shape, case.indices_shape
    if case.indices == "kv-cache":  # tuple h = (0, h, position)
        heads = np.arange(ishape[0])
        indices = np.stack([np.zeros_like(heads), heads, np.full_like(heads, KV_POSITION)], 1)
    elif case.indices == "zipf":  # ranks by Zipf weights, ranks to ids by a shuffle
        weights = np.arange(1, d[0] + 1, dtype=np.float64) ** -ZIPF_EXPONENT
        ranks = rng.choice(d[0], size=ishape[:-1], p=weights / weights.sum())
        indices = rng.permutation(d[0])[ranks][..., None]
    elif case.indices == "uniform":  # ScatterElements: data's dim along the axis
        indices = rng.integers(0, d[case.axis], ishape)
    elif case.indices == "column-permutations":  # every column its own permutation of the rows
        indices = rng.permuted(np.broadcast_to(np.arange(d[0])[:, None], ishape), axis=0)
    elif case.indices == "distinct-rows":
        indices = rng.choice(d[0], size=ishape[:-1], replace=False)[..., None]
    else:
        raise ValueError(case.indices)
    updates = rng.standard_normal(case.updates_shape, dtype=np.float32).astype(dt)
    return data, np.ascontiguousarray(indices, dtype=np.int64), updates


def s_reference(case: SCase, data, indices, updates) -> np.ndarray:
    """The ONNX definition spelled plainly (not timed): a copy of data, then the updates in index
    order. ScatterND: one index tuple at a time. ScatterElements: one step per position j along
    the axis, each writing indices[..., j, ...] at once; within a step every update lands on a
    different element (they differ in another coordinate), and updates of one element come in
    increasing j, which is their row-major order."""
    out = data.copy()
    add = case.reduction == "sum"
    if case.op == "scatter-nd":
        for t in np.ndindex(indices.shape[:-1]):
            key = tuple(int(i) for i in indices[t])
            if add:
                out[key] += updates[t]
            else:
                out[key] = updates[t]
        return out
    axis, nd = case.axis, indices.ndim
    for j in range(indices.shape[axis]):
        at = tuple(j if k == axis else slice(None) for k in range(nd))
        ij, uj = indices[at], updates[at]
        key = list(np.ogrid[tuple(slice(0, s) for s in ij.shape)])
        key.insert(axis, ij)
        if add:
            out[tuple(key)] += uj
        else:
            out[tuple(key)] = uj
    return out


def writes_distinct(case: SCase, data, indices) -> bool:
    """Whether no two updates land on one element (W1, W4, W5): then JAX is told
    `unique_indices=True`."""
    if case.op == "scatter-nd":
        k = indices.shape[-1]
        flat = np.ravel_multi_index(tuple(indices.reshape(-1, k).T), data.shape[:k])
    else:
        flat = np.ravel_multi_index(elements_key(np, case, indices), data.shape).ravel()
    return np.unique(flat).size == flat.size


def nd_key(case: SCase, indices) -> tuple:
    """ScatterND's index tuple for advanced indexing: one column per indexed dim, or 0 for a dim
    of size 1 (its only valid index: W1's batch), which numpy indexes more cheaply than a column
    of zeros."""
    return tuple(
        0 if case.data_shape[j] == 1 else np.ascontiguousarray(indices[..., j])
        for j in range(indices.shape[-1])
    )


def elements_key(xp, case: SCase, indices) -> tuple:
    """ScatterElements' targets as an advanced-indexing tuple: the indices on the axis, broadcast
    aranges on the other dims. `xp` is numpy or jax.numpy."""
    nd = indices.ndim
    return tuple(
        indices if k == case.axis
        else xp.arange(indices.shape[k]).reshape([-1 if m == k else 1 for m in range(nd)])
        for k in range(nd)
    )  # fmt: skip


def setup_numpy(case: SCase, mode: str, data, indices, updates):
    """In place, on a copy of data, the cheapest spelling found of each (all apply the updates in
    index order, so their results are bit-identical to the reference):

    - ScatterND none: `data[cols] = updates` (fancy assignment; W1 as `data[0, heads, pos] = upd`);
    - ScatterND add: a Python loop `for i, u in zip(ids.tolist(), updates): data[i] += u` (W2:
      1.5 ms, where `np.add.at(data, ids, updates)` takes 10 ms and `np.add.at` on the flattened
      table with element ids computed in the call 2.2 ms);
    - ScatterElements none: `np.put_along_axis(data, indices, updates, axis)` (W4: as fast as
      `data[indices, arange]`, faster than a flat assignment);
    - ScatterElements add: `np.add.at` on the flattened data with flat ids computed in the call,
      `indices + row offsets` (W3: 0.12 ms, where `np.add.at` with the 2-D key takes 1-2 ms and
      a 1-D `np.add.at` per row 0.17 ms)."""
    assert mode == IN_PLACE
    d = data.copy()
    if case.op == "scatter-nd" and case.reduction == "sum":
        k = indices.shape[-1]
        tuples = indices.reshape(-1, k)
        rows = updates.reshape((tuples.shape[0],) + updates.shape[indices.ndim - 1:])

        def call():
            for key, u in zip(map(tuple, tuples.tolist()), rows):
                d[key] += u

    elif case.op == "scatter-nd":
        key = nd_key(case, indices)
        call = lambda: d.__setitem__(key, updates)  # noqa: E731
    elif case.reduction == "sum":
        # The flat id of indices[p] is indices[p] * stride(axis) + the offset of p with its
        # coordinate along the axis set to 0.
        strides = [int(np.prod(d.shape[k + 1:])) for k in range(d.ndim)]
        offsets = sum(a * strides[k] for k, a in enumerate(elements_key(np, case, indices))
                      if k != case.axis)  # fmt: skip
        flat_data, flat_updates = d.reshape(-1), updates.reshape(-1)
        axis_stride = strides[case.axis]

        def call():
            np.add.at(flat_data, (indices * axis_stride + offsets).reshape(-1), flat_updates)

    else:
        call = lambda: np.put_along_axis(d, indices, updates, axis=case.axis)  # noqa: E731
    return call, lambda: d


def setup_onnxruntime(case: SCase, mode: str, data, indices, updates):
    """A one-node opset-18 graph (ScatterND, or ScatterElements with `axis`; `reduction` none or
    add), session as for the gathers, I/O binding: inputs as OrtValues over numpy buffers, output
    bound to a preallocated buffer (out of place) or to the data input's own buffer (in place:
    ONNX Runtime's kernels skip their copy of data when output and input are one buffer)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    reduction = "add" if case.reduction == "sum" else "none"
    if case.op == "scatter-nd":
        node = helper.make_node("ScatterND", ["data", "indices", "updates"], ["out"],
                                reduction=reduction)  # fmt: skip
    else:
        node = helper.make_node("ScatterElements", ["data", "indices", "updates"], ["out"],
                                axis=case.axis, reduction=reduction)  # fmt: skip
    elem = TensorProto.FLOAT16 if case.dtype == "f16" else TensorProto.FLOAT
    graph = helper.make_graph(
        [node],
        "scatter",
        [
            helper.make_tensor_value_info("data", elem, data.shape),
            helper.make_tensor_value_info("indices", TensorProto.INT64, indices.shape),
            helper.make_tensor_value_info("updates", elem, updates.shape),
        ],
        [helper.make_tensor_value_info("out", elem, case.output_shape())],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    onnx.checker.check_model(model)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    d = data.copy() if mode == IN_PLACE else data
    out = d if mode == IN_PLACE else np.empty_like(data)
    binding = sess.io_binding()
    inputs = [ort.OrtValue.ortvalue_from_numpy(a) for a in (d, indices, updates)]
    for name, value in zip(("data", "indices", "updates"), inputs):
        binding.bind_ortvalue_input(name, value)
    binding.bind_output("out", "cpu", 0, case.np_dtype, list(out.shape), out.ctypes.data)

    def call():
        sess.run_with_iobinding(binding)

    call.keep = (sess, inputs, binding, d, out)  # type: ignore[attr-defined]
    return call, lambda: out


def setup_openvino(case: SCase, mode: str, data, indices, updates):
    """A one-node model, ScatterNDUpdate-15 or ScatterElementsUpdate-12 (`reduction` none or sum,
    `use_init_val` true), compiled and called as for the gathers (1 thread, shared-memory tensors
    bound once); in place, the output tensor is the data input's tensor."""
    import openvino as ov
    import openvino.opset12 as ops12
    import openvino.opset15 as ops15

    elem = ov.Type.f16 if case.dtype == "f16" else ov.Type.f32
    p_data = ops15.parameter(list(data.shape), elem, name="data")
    p_idx = ops15.parameter(list(indices.shape), ov.Type.i64, name="indices")
    p_upd = ops15.parameter(list(updates.shape), elem, name="updates")
    if case.op == "scatter-nd":
        node = ops15.scatter_nd_update(p_data, p_idx, p_upd, reduction=case.reduction)
    else:
        node = ops12.scatter_elements_update(p_data, p_idx, p_upd, case.axis,
                                             reduction=case.reduction, use_init_val=True)  # fmt: skip
    model = ov.Model([node], [p_data, p_idx, p_upd], "scatter")
    config = {
        "INFERENCE_NUM_THREADS": 1,
        "NUM_STREAMS": 1,
        "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_PRECISION_HINT": "f32",
    }
    compiled = ov.Core().compile_model(model, "CPU", config)
    request = compiled.create_infer_request()
    d = data.copy() if mode == IN_PLACE else data
    tensors = [ov.Tensor(a, shared_memory=True) for a in (d, indices, updates)]
    for k, tensor in enumerate(tensors):
        request.set_input_tensor(k, tensor)
    out = d if mode == IN_PLACE else np.empty_like(data)
    out_tensor = tensors[0] if mode == IN_PLACE else ov.Tensor(out, shared_memory=True)
    request.set_output_tensor(0, out_tensor)

    def call():
        request.infer(share_inputs=True, share_outputs=True)

    call.keep = (compiled, tensors, out_tensor, d, out)  # type: ignore[attr-defined]
    return call, lambda: out


def setup_jax(case: SCase, mode: str, data, indices, updates):
    """`jax.jit` of `d.at[key].set(u)` / `.add(u)` (ScatterND: the index columns, 0 for a dim of
    size 1; ScatterElements: as numpy's add.at key) with `mode="promise_in_bounds"` and
    `unique_indices=True` where no two updates land on one element (W1, W4, W5). Out of place XLA
    allocates each output; in place the function donates data (`donate_argnums=0`) and each call
    scatters into the previous call's result."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)  # keep int64 indices int64
    unique = writes_distinct(case, data, indices)
    sum_ = case.reduction == "sum"

    def fn(d, i, u):
        if case.op == "scatter-nd":
            key = tuple(0 if case.data_shape[j] == 1 else i[..., j] for j in range(i.shape[-1]))
        else:
            key = elements_key(jnp, case, i)
        ref = d.at[key]
        kw = {"mode": "promise_in_bounds", "unique_indices": unique}
        return ref.add(u, **kw) if sum_ else ref.set(u, **kw)

    cpu = jax.devices("cpu")[0]
    i, u = jax.device_put(indices, cpu), jax.device_put(updates, cpu)
    if mode == OUT_OF_PLACE:
        f = jax.jit(fn)
        d = jax.device_put(data, cpu)
        last = [f(d, i, u).block_until_ready()]  # compile outside the timing

        def call():
            last[0] = f(d, i, u)
            last[0].block_until_ready()

        return call, lambda: np.asarray(last[0])
    f = jax.jit(fn, donate_argnums=0)
    # Compiled on a throwaway copy, so that the first call scatters into pristine data.
    f(jax.device_put(data.copy(), cpu), i, u).block_until_ready()
    state = [jax.device_put(data.copy(), cpu)]

    def call():
        state[0] = f(state[0], i, u)
        state[0].block_until_ready()

    return call, lambda: np.asarray(state[0])


SETUPS = {
    "numpy": setup_numpy,
    "onnxruntime": setup_onnxruntime,
    "openvino": setup_openvino,
    "jax": setup_jax,
}
