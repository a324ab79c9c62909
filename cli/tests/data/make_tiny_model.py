"""Writes tiny.onnx and its inputs for the CLI's `model` tests: a token Gather from a table,
then a GatherND with one batch dim picking a position per sequence (a negative one included,
on which tract's own GatherND panics).

Rerun (from the repository root, with the `onnx` and `numpy` packages):
    python3 cli/tests/data/make_tiny_model.py
"""
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).parent
table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")
gather = helper.make_node("Gather", ["table", "ids"], ["emb"], axis=0)
pick = helper.make_node("GatherND", ["emb", "last"], ["picked"], batch_dims=1)
graph = helper.make_graph(
    [gather, pick],
    "tiny",
    [
        helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 3]),
        helper.make_tensor_value_info("last", TensorProto.INT64, ["batch", 1]),
    ],
    [helper.make_tensor_value_info("picked", TensorProto.FLOAT, ["batch", 4])],
    [table],
)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), HERE / "tiny.onnx")
np.save(HERE / "tiny_ids.npy", np.array([[1, 2, -1], [0, 5, 9]], dtype=np.int64))
np.save(HERE / "tiny_last.npy", np.array([[-1], [1]], dtype=np.int64))
np.save(HERE / "tiny_last_positive.npy", np.array([[2], [1]], dtype=np.int64))
