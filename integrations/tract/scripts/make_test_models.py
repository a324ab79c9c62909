"""Writes the ONNX models that integrations/tract/tests/onnx_models.rs runs through tract.

Rerun from the repository root with:

    /work/venv-peers/bin/python integrations/tract/scripts/make_test_models.py

(any Python with onnx 1.23.2, onnxruntime 1.31.1 and numpy 2.x will do). Everything goes
under integrations/tract/tests/models/, one directory per case, laid out like the ONNX backend
tests: model.onnx and test_data_set_0/{input_*,output_*}.pb (TensorProtos, in the order of the
graph's inputs and outputs). A case with float math besides the gathers also gets a
tolerances.txt, one line per output: `<output index> exact` or `<output index> <rtol> <atol>`;
an output not listed (and every output of a case without the file) must be bit-identical.

1. The ONNX backend node tests of Gather, GatherElements, GatherND, Scatter, ScatterElements
   and ScatterND, built by the `expect` machinery of `onnx.backend.test.case.node` (the onnx
   wheel ships the generators but not their data). Their expected outputs are numpy's
   (np.take and friends, the reference scatters of the generators).
2. Small multi-op models written with onnx.helper (opset 17, 18 for the scatters' reductions),
   whose expected outputs are ONNX Runtime's: a BERT-style embedding layer, a GPT-2-style head,
   a recommender, a decoder step's KV-cache write (f32 and f16), an embedding gradient
   (scatter-add) and scatters with the other reductions.

The script is deterministic: the node tests seed numpy before each generator, and the models
use a fixed generator below.
"""

from __future__ import annotations

import importlib
import pathlib
import shutil

import numpy as np
import onnx
import onnx.backend.test.case.node as node_cases
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "models"
OPSET = 17

# Float math (LayerNormalization, MatMul, ReduceMean) may round differently in tract and ONNX
# Runtime (other summation orders, fused kernels): a few ULP, so these bounds are generous
# for values of order 1 yet far below any real error. Gathers and TopK indices are exact.
FLOAT_RTOL = 1e-5
FLOAT_ATOL = 1e-6


def write_case(name: str, model: onnx.ModelProto, inputs, outputs, tolerances=None) -> None:
    """Writes one case directory; `inputs` and `outputs` are numpy arrays or TensorProtos in
    the order of the graph's inputs and outputs."""
    onnx.checker.check_model(model, full_check=True)
    case = OUT / name
    if case.exists():
        shutil.rmtree(case)
    data = case / "test_data_set_0"
    data.mkdir(parents=True)
    (case / "model.onnx").write_bytes(model.SerializeToString())
    for kind, values, infos in (
        ("input", inputs, model.graph.input),
        ("output", outputs, model.graph.output),
    ):
        assert len(values) == len(infos), (name, kind)
        for j, (value, info) in enumerate(zip(values, infos, strict=True)):
            proto = value if isinstance(value, TensorProto) else numpy_helper.from_array(
                np.asarray(value), info.name
            )
            (data / f"{kind}_{j}.pb").write_bytes(proto.SerializeToString())
    if tolerances:
        lines = [
            f"{j} exact" if tol is None else f"{j} {tol[0]:g} {tol[1]:g}"
            for j, tol in sorted(tolerances.items())
        ]
        (case / "tolerances.txt").write_text("\n".join(lines) + "\n")


def node_tests() -> list[str]:
    """The backend node tests of the gathers and scatters, from onnx's own generators."""
    # Importing a generator module runs its exports (numpy seeded before each), which append
    # TestCases; importing only these three avoids running every operator's generators.
    node_cases._TargetOpType = None
    modules = ("gather", "gatherelements", "gathernd", "scatter", "scatterelements", "scatternd")
    for module in modules:
        importlib.import_module(f"onnx.backend.test.case.node.{module}")
    names = []
    for case in node_cases._NodeTestCases:
        if not case.name.startswith(("test_gather", "test_scatter")):
            continue
        assert case.model is not None and case.data_sets and len(case.data_sets) == 1
        inputs, outputs = case.data_sets[0]
        write_case(case.name, case.model, inputs, outputs)
        names.append(case.name)
    return names


def make_model(
    name: str, nodes, inputs, outputs, initializers, opset: int = OPSET
) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_operatorsetid("", opset)],
        producer_name="gather-jit make_test_models.py",
    )
    # An IR version that both ONNX Runtime and tract read, whatever onnx.helper defaults to.
    model.ir_version = 8
    return model


def run_ort(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], threads: int = 0
) -> list[np.ndarray]:
    options = ort.SessionOptions()
    # 0 is ONNX Runtime's default; the scatters ask for one thread, so that the order in which
    # ONNX Runtime applies duplicate indices is its sequential kernel's, never a race.
    options.intra_op_num_threads = threads
    # No graph rewrites, so ORT's answer is its plain kernels' answer (fusions such as
    # EmbedLayerNormalization would otherwise replace the ops under test).
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def table(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def bert_embeddings(rng: np.random.Generator) -> str:
    """Word, position and token-type embeddings summed and layer-normalized, as in BERT.

    Output 0 (the word embeddings, a pure Gather) is exact; output 1 (after Add and
    LayerNormalization) within FLOAT_RTOL/FLOAT_ATOL.
    """
    name = "bert_embeddings"
    vocab, max_pos, types, hidden, batch, seq = 500, 64, 2, 64, 2, 12
    inits = [
        numpy_helper.from_array(table(rng, vocab, hidden), "word_embeddings"),
        numpy_helper.from_array(table(rng, max_pos, hidden), "position_embeddings"),
        numpy_helper.from_array(table(rng, types, hidden), "token_type_embeddings"),
        numpy_helper.from_array(
            (1.0 + 0.1 * rng.standard_normal(hidden)).astype(np.float32), "ln_gamma"
        ),
        numpy_helper.from_array((0.1 * rng.standard_normal(hidden)).astype(np.float32), "ln_beta"),
    ]
    nodes = [
        helper.make_node("Gather", ["word_embeddings", "input_ids"], ["word"], axis=0),
        helper.make_node("Gather", ["position_embeddings", "position_ids"], ["pos"], axis=0),
        helper.make_node("Gather", ["token_type_embeddings", "token_type_ids"], ["tt"], axis=0),
        helper.make_node("Add", ["word", "pos"], ["word_pos"]),
        helper.make_node("Add", ["word_pos", "tt"], ["summed"]),
        helper.make_node(
            "LayerNormalization",
            ["summed", "ln_gamma", "ln_beta"],
            ["embeddings"],
            axis=-1,
            epsilon=1e-12,
        ),
    ]
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq]),
        # Positions as an input (a [1, seq] row broadcast over the batch), so that gather is
        # not constant-folded away.
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, seq]),
        helper.make_tensor_value_info("token_type_ids", TensorProto.INT32, [batch, seq]),
    ]
    outputs = [
        helper.make_tensor_value_info("word", TensorProto.FLOAT, [batch, seq, hidden]),
        helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, [batch, seq, hidden]),
    ]
    model = make_model(name, nodes, inputs, outputs, inits)
    input_ids = rng.integers(0, vocab, (batch, seq), dtype=np.int64)
    # Gather takes negative indices since opset 11: -1 is the vocabulary's last entry.
    input_ids[0, 0] = -1
    input_ids[1, -1] = -vocab
    feeds = {
        "input_ids": input_ids,
        "position_ids": np.arange(seq, dtype=np.int64)[None, :],
        "token_type_ids": (np.arange(seq)[None, :] >= np.array([[5], [7]])).astype(np.int32),
    }
    expected = run_ort(model, feeds)
    words = model.graph.initializer[0]
    assert np.array_equal(expected[0], np.take(numpy_helper.to_array(words), input_ids, axis=0))
    write_case(
        name,
        model,
        list(feeds.values()),
        expected,
        {0: None, 1: (FLOAT_RTOL, FLOAT_ATOL)},
    )
    return name


def gpt2_head(rng: np.random.Generator) -> str:
    """Token embedding, a projection to the vocabulary, the last position of each sequence
    (GatherND, batch_dims=1) and its top 5 tokens (TopK, then GatherElements with TopK's
    indices, which must give TopK's values back).

    Output 0 (the last positions' logits) and outputs 1 and 3 (float logits) are within
    FLOAT_RTOL/FLOAT_ATOL since they come out of MatMul; output 2 (TopK's indices) is exact.
    """
    name = "gpt2_head"
    vocab, hidden, batch, seq, k = 300, 48, 3, 8, 5
    wte = table(rng, vocab, hidden)
    w = (rng.standard_normal((hidden, vocab)) / np.sqrt(hidden)).astype(np.float32)
    inits = [
        numpy_helper.from_array(wte, "wte"),
        numpy_helper.from_array(w, "lm_head"),
        numpy_helper.from_array(np.array([k], dtype=np.int64), "k"),
    ]
    nodes = [
        helper.make_node("Gather", ["wte", "input_ids"], ["hidden"], axis=0),
        helper.make_node("MatMul", ["hidden", "lm_head"], ["logits"]),
        helper.make_node("GatherND", ["logits", "last_positions"], ["last_logits"], batch_dims=1),
        helper.make_node("TopK", ["last_logits", "k"], ["top_values", "top_indices"], axis=-1),
        helper.make_node(
            "GatherElements", ["last_logits", "top_indices"], ["top_gathered"], axis=1
        ),
    ]
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq]),
        helper.make_tensor_value_info("last_positions", TensorProto.INT64, [batch, 1]),
    ]
    outputs = [
        helper.make_tensor_value_info("last_logits", TensorProto.FLOAT, [batch, vocab]),
        helper.make_tensor_value_info("top_values", TensorProto.FLOAT, [batch, k]),
        helper.make_tensor_value_info("top_indices", TensorProto.INT64, [batch, k]),
        helper.make_tensor_value_info("top_gathered", TensorProto.FLOAT, [batch, k]),
    ]
    model = make_model(name, nodes, inputs, outputs, inits)
    feeds = {
        "input_ids": rng.integers(0, vocab, (batch, seq), dtype=np.int64),
        # Sequences of lengths 8, 5 and 8 (right-padded); GatherND takes negative indices,
        # so -1 is the last position (tract's own GatherND panics on it).
        "last_positions": np.array([[7], [4], [-1]], dtype=np.int64),
    }
    expected = run_ort(model, feeds)
    last, values, indices, gathered = expected
    assert np.array_equal(values, gathered)
    # TopK's indices are compared exactly, so the top 5 (and the 6th) must be far apart
    # compared with the tolerance, or a few ULP elsewhere could reorder them.
    top6 = -np.sort(-last, axis=1)[:, : k + 1]
    assert np.min(-np.diff(top6, axis=1)) > 1e-3, top6
    write_case(
        name,
        model,
        list(feeds.values()),
        expected,
        {
            0: (FLOAT_RTOL, FLOAT_ATOL),
            1: (FLOAT_RTOL, FLOAT_ATOL),
            2: None,
            3: (FLOAT_RTOL, FLOAT_ATOL),
        },
    )
    return name


def recommender(rng: np.random.Generator) -> str:
    """A two-tower-style scorer: user, item-history (rank-2 int32 indices) and category
    embeddings, the history averaged, everything concatenated and projected.

    Output 0 (the history gather) is exact; outputs 1 and 2 (after ReduceMean and MatMul)
    within FLOAT_RTOL/FLOAT_ATOL.
    """
    name = "recommender"
    users, items, cats, batch, hist = 200, 800, 24, 4, 6
    du, di, dc, out = 16, 32, 8, 10
    inits = [
        numpy_helper.from_array(table(rng, users, du), "user_table"),
        numpy_helper.from_array(table(rng, items, di), "item_table"),
        numpy_helper.from_array(table(rng, cats, dc), "category_table"),
        numpy_helper.from_array(
            (rng.standard_normal((du + di + dc, out)) / 8).astype(np.float32), "proj"
        ),
    ]
    nodes = [
        helper.make_node("Gather", ["user_table", "user_id"], ["user_vec"], axis=0),
        helper.make_node("Gather", ["item_table", "history"], ["history_vecs"], axis=0),
        helper.make_node("Gather", ["category_table", "category"], ["category_vec"], axis=0),
        helper.make_node("ReduceMean", ["history_vecs"], ["history_vec"], axes=[1], keepdims=0),
        helper.make_node(
            "Concat", ["user_vec", "history_vec", "category_vec"], ["features"], axis=1
        ),
        helper.make_node("MatMul", ["features", "proj"], ["scores"]),
    ]
    inputs = [
        helper.make_tensor_value_info("user_id", TensorProto.INT64, [batch]),
        helper.make_tensor_value_info("history", TensorProto.INT32, [batch, hist]),
        helper.make_tensor_value_info("category", TensorProto.INT64, [batch]),
    ]
    outputs = [
        helper.make_tensor_value_info("history_vecs", TensorProto.FLOAT, [batch, hist, di]),
        helper.make_tensor_value_info("features", TensorProto.FLOAT, [batch, du + di + dc]),
        helper.make_tensor_value_info("scores", TensorProto.FLOAT, [batch, out]),
    ]
    model = make_model(name, nodes, inputs, outputs, inits)
    history = rng.integers(0, items, (batch, hist), dtype=np.int32)
    # Negative int32 indices count from the end of the item table too.
    history[2, 3] = -1
    history[3, 0] = -items
    feeds = {
        "user_id": rng.integers(0, users, batch, dtype=np.int64),
        "history": history,
        "category": np.array([3, -1, 0, cats - 1], dtype=np.int64),
    }
    expected = run_ort(model, feeds)
    items_table = numpy_helper.to_array(model.graph.initializer[1])
    assert np.array_equal(expected[0], np.take(items_table, history, axis=0))
    write_case(
        name,
        model,
        list(feeds.values()),
        expected,
        {0: None, 1: (FLOAT_RTOL, FLOAT_ATOL), 2: (FLOAT_RTOL, FLOAT_ATOL)},
    )
    return name


# The scatters' models use opset 18, whose ScatterND and ScatterElements take every reduction.
SCATTER_OPSET = 18


def kv_cache_update(rng: np.random.Generator, elem: int) -> str:
    """One decoder step's cache write, as exported decoders write it: each sequence's new key
    and value (one token, every head) go into the caches [batch, heads, max_seq, head_dim] at
    that sequence's own position, by ScatterND with indices [batch, heads, 1, 3] = (b, h,
    position[b]) built from the positions input (Reshape, Mul, Add), so that nothing folds.

    `elem` is FLOAT or FLOAT16; both outputs are exact (ScatterND without reduction copies).
    The positions include the cache's last slot and, in f16, -1 (ScatterND's negative indices
    count from the end of the axis).
    """
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    name = "kv_cache_update" if elem == TensorProto.FLOAT else "kv_cache_update_f16"
    batch, heads, max_seq, dim = 2, 4, 16, 8
    base = np.zeros((batch, heads, 1, 3), dtype=np.int64)
    base[..., 0] = np.arange(batch)[:, None, None]
    base[..., 1] = np.arange(heads)[None, :, None]
    inits = [
        numpy_helper.from_array(base, "batch_head"),
        numpy_helper.from_array(np.array([batch, 1, 1, 1], dtype=np.int64), "position_shape"),
        numpy_helper.from_array(np.array([0, 0, 1], dtype=np.int64), "position_axis"),
    ]
    nodes = [
        helper.make_node("Reshape", ["position", "position_shape"], ["position_4d"]),
        helper.make_node("Mul", ["position_4d", "position_axis"], ["position_column"]),
        helper.make_node("Add", ["batch_head", "position_column"], ["cache_indices"]),
        helper.make_node("ScatterND", ["past_key", "cache_indices", "new_key"], ["present_key"]),
        helper.make_node(
            "ScatterND", ["past_value", "cache_indices", "new_value"], ["present_value"]
        ),
    ]
    cache = [batch, heads, max_seq, dim]
    token = [batch, heads, 1, dim]
    inputs = [
        helper.make_tensor_value_info("past_key", elem, cache),
        helper.make_tensor_value_info("past_value", elem, cache),
        helper.make_tensor_value_info("new_key", elem, token),
        helper.make_tensor_value_info("new_value", elem, token),
        helper.make_tensor_value_info("position", TensorProto.INT64, [batch]),
    ]
    outputs = [
        helper.make_tensor_value_info("present_key", elem, cache),
        helper.make_tensor_value_info("present_value", elem, cache),
    ]
    model = make_model(name, nodes, inputs, outputs, inits, SCATTER_OPSET)
    position = [max_seq - 1, 5] if elem == TensorProto.FLOAT else [-1, 0]
    feeds = {
        "past_key": rng.standard_normal(cache).astype(dtype),
        "past_value": rng.standard_normal(cache).astype(dtype),
        "new_key": rng.standard_normal(token).astype(dtype),
        "new_value": rng.standard_normal(token).astype(dtype),
        "position": np.array(position, dtype=np.int64),
    }
    expected = run_ort(model, feeds, threads=1)
    for cache_name, token_name, got in (
        ("past_key", "new_key", expected[0]),
        ("past_value", "new_value", expected[1]),
    ):
        want = feeds[cache_name].copy()
        for b, p in enumerate(position):
            want[b, :, p, :] = feeds[token_name][b, :, 0, :]
        assert want.tobytes() == got.tobytes(), (name, cache_name)
    write_case(name, model, list(feeds.values()), expected)
    return name


def zipf_ids(rng: np.random.Generator, shape, vocab: int) -> np.ndarray:
    """Token ids with repeats, as text has them: Zipf-distributed ranks, folded into the
    vocabulary."""
    return ((rng.zipf(1.3, size=shape) - 1) % vocab).astype(np.int64)


def embedding_grad(rng: np.random.Generator) -> str:
    """The gradient of an embedding lookup, a scatter-add: each position's output gradient
    [batch, seq, hidden] is added into a zero table [vocab, hidden] at its token's row
    (ScatterND, reduction add, indices = Unsqueeze(ids)); repeated ids fold in index order.
    Also ScatterElements with reduction add along axis 1 (a segment sum over the columns of
    [rows, cols], duplicates and negative indices included).

    Both outputs are exact: ONNX Runtime applies the updates one after the other in index
    order, and the script checks that this order matters for these values (a reversed order
    gives other bits), so that a kernel summing in another order fails the test.
    """
    name = "embedding_grad"
    vocab, hidden, batch, seq = 50, 16, 2, 24
    rows, cols, per_row = 6, 10, 12
    inits = [
        numpy_helper.from_array(np.zeros((vocab, hidden), dtype=np.float32), "zero_table"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "last_axis"),
    ]
    nodes = [
        helper.make_node("Unsqueeze", ["ids", "last_axis"], ["ids_column"]),
        helper.make_node(
            "ScatterND", ["zero_table", "ids_column", "grad"], ["table_grad"], reduction="add"
        ),
        helper.make_node(
            "ScatterElements",
            ["segments", "segment_ids", "segment_values"],
            ["segment_sum"],
            axis=1,
            reduction="add",
        ),
    ]
    inputs = [
        helper.make_tensor_value_info("ids", TensorProto.INT64, [batch, seq]),
        helper.make_tensor_value_info("grad", TensorProto.FLOAT, [batch, seq, hidden]),
        helper.make_tensor_value_info("segments", TensorProto.FLOAT, [rows, cols]),
        helper.make_tensor_value_info("segment_ids", TensorProto.INT64, [rows, per_row]),
        helper.make_tensor_value_info("segment_values", TensorProto.FLOAT, [rows, per_row]),
    ]
    outputs = [
        helper.make_tensor_value_info("table_grad", TensorProto.FLOAT, [vocab, hidden]),
        helper.make_tensor_value_info("segment_sum", TensorProto.FLOAT, [rows, cols]),
    ]
    model = make_model(name, nodes, inputs, outputs, inits, SCATTER_OPSET)
    ids = zipf_ids(rng, (batch, seq), vocab)
    assert len(np.unique(ids)) < ids.size / 2, "ids with many repeats"
    # Magnitudes from 1e-4 to 1e4, so that float addition is far from associative here.
    magnitude = lambda shape: 10.0 ** rng.integers(-4, 5, shape)
    grad = (rng.standard_normal((batch, seq, hidden)) * magnitude((batch, seq, hidden))).astype(
        np.float32
    )
    segment_ids = rng.integers(-cols, cols, (rows, per_row), dtype=np.int64)
    segment_values = (
        rng.standard_normal((rows, per_row)) * magnitude((rows, per_row))
    ).astype(np.float32)
    feeds = {
        "ids": ids,
        "grad": grad,
        "segments": rng.standard_normal((rows, cols)).astype(np.float32),
        "segment_ids": segment_ids,
        "segment_values": segment_values,
    }
    expected = run_ort(model, feeds, threads=1)

    # ONNX Runtime's answers are the updates applied in index order (np.add.at is unbuffered
    # and in order, one float32 addition at a time), and the reversed order differs.
    def table_grad(order) -> np.ndarray:
        out = np.zeros((vocab, hidden), dtype=np.float32)
        flat_ids, flat_grad = ids.reshape(-1), grad.reshape(-1, hidden)
        for i in order(range(flat_ids.size)):
            out[flat_ids[i]] += flat_grad[i]
        return out

    def segment_sum(order) -> np.ndarray:
        out = feeds["segments"].copy()
        for r in range(rows):
            for k in order(range(per_row)):
                out[r, segment_ids[r, k]] += segment_values[r, k]
        return out

    for got, reference in ((expected[0], table_grad), (expected[1], segment_sum)):
        assert got.tobytes() == reference(list).tobytes()
        assert got.tobytes() != reference(lambda r: list(reversed(r))).tobytes()
    write_case(name, model, list(feeds.values()), expected)
    return name


def scatter_reductions(rng: np.random.Generator) -> str:
    """ScatterND with reduction mul (rows of [rows, cols] by tuples of one coordinate, repeats
    included) and ScatterElements with max (axis 0) and min (axis -1), negative indices
    included, all on one data input: the data each scatter reads is shared with the others.

    Outputs exact, as ONNX Runtime's (updates in index order; max and min exact anyway).
    """
    name = "scatter_reductions"
    rows, cols, tuples, picks = 8, 6, 5, 4
    nodes = [
        helper.make_node("ScatterND", ["x", "row_ids", "row_factors"], ["row_product"],
                         reduction="mul"),
        helper.make_node(
            "ScatterElements", ["x", "max_ids", "max_values"], ["column_max"], axis=0,
            reduction="max",
        ),
        helper.make_node(
            "ScatterElements", ["x", "min_ids", "min_values"], ["row_min"], axis=-1,
            reduction="min",
        ),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, cols]),
        helper.make_tensor_value_info("row_ids", TensorProto.INT64, [tuples, 1]),
        helper.make_tensor_value_info("row_factors", TensorProto.FLOAT, [tuples, cols]),
        helper.make_tensor_value_info("max_ids", TensorProto.INT64, [picks, cols]),
        helper.make_tensor_value_info("max_values", TensorProto.FLOAT, [picks, cols]),
        helper.make_tensor_value_info("min_ids", TensorProto.INT64, [rows, picks]),
        helper.make_tensor_value_info("min_values", TensorProto.FLOAT, [rows, picks]),
    ]
    outputs = [
        helper.make_tensor_value_info("row_product", TensorProto.FLOAT, [rows, cols]),
        helper.make_tensor_value_info("column_max", TensorProto.FLOAT, [rows, cols]),
        helper.make_tensor_value_info("row_min", TensorProto.FLOAT, [rows, cols]),
    ]
    model = make_model(name, nodes, inputs, outputs, [], SCATTER_OPSET)
    normal = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    feeds = {
        "x": normal(rows, cols),
        "row_ids": np.array([[1], [-1], [1], [3], [-7]], dtype=np.int64),
        "row_factors": (1.0 + normal(tuples, cols)).astype(np.float32),
        "max_ids": rng.integers(-rows, rows, (picks, cols), dtype=np.int64),
        "max_values": normal(picks, cols),
        "min_ids": rng.integers(-cols, cols, (rows, picks), dtype=np.int64),
        "min_values": normal(rows, picks),
    }
    expected = run_ort(model, feeds, threads=1)
    product = feeds["x"].copy()
    for t in range(tuples):
        product[feeds["row_ids"][t, 0]] *= feeds["row_factors"][t]
    assert expected[0].tobytes() == product.tobytes()
    column_max = feeds["x"].copy()
    np.maximum.at(column_max, (feeds["max_ids"], np.arange(cols)[None, :]), feeds["max_values"])
    assert expected[1].tobytes() == column_max.tobytes()
    row_min = feeds["x"].copy()
    np.minimum.at(row_min, (np.arange(rows)[:, None], feeds["min_ids"]), feeds["min_values"])
    assert expected[2].tobytes() == row_min.tobytes()
    write_case(name, model, list(feeds.values()), expected)
    return name


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    names = node_tests()
    rng = np.random.default_rng(23)
    names += [bert_embeddings(rng), gpt2_head(rng), recommender(rng)]
    # A generator of their own, so that adding them changed none of the models above.
    rng = np.random.default_rng(32)
    names += [
        kv_cache_update(rng, TensorProto.FLOAT),
        kv_cache_update(rng, TensorProto.FLOAT16),
        embedding_grad(rng),
        scatter_reductions(rng),
    ]
    # Drop directories of cases that no longer exist, so the tests run exactly these.
    for stale in OUT.iterdir():
        if stale.is_dir() and stale.name not in names:
            shutil.rmtree(stale)
    size = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"{len(names)} cases, {size} bytes under {OUT}:")
    for name in names:
        print(f"  {name}")


if __name__ == "__main__":
    main()
