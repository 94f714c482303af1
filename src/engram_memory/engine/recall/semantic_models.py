"""The embedding model as the semantic channel uses it: one model for every memory, its constants, and the
language centroids taken away from its vectors.

Every memory gets a vector from one model that reads all five of its users' languages (English, Korean,
Simplified and Traditional Chinese, Japanese): multilingual-e5-small by default, so a query in any of them
meets a memory in any other from the first memory of a scope on (docs/decisions/0025-language-centred-vectors.md,
which replaced 0016's two models by script). all-MiniLM-L6-v2 stays available as the operator's choice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

import numpy as np
import numpy.typing as npt

from engram_memory.engine.recall.languages import LANGUAGES, language_of
from engram_memory.engine.recall.ranking import formula_number
from engram_memory.engine.recall.relevance import Floors

__all__ = [
    "CONTEXT_WEIGHT",
    "RELEVANCE_FLOORS",
    "Centroids",
    "Embedder",
    "Matrix",
    "SemanticModel",
    "cosine_formula",
    "unit",
]

Matrix = npt.NDArray[np.float32]

# A memory's vector is its primary text's plus this share of the unit mean of its context lines'
# (decision 0014's measurement for multilingual-e5: the context helps a short conversational turn and
# blurs a self-contained sentence).
CONTEXT_WEIGHT = 0.2


class Embedder(Protocol):
    """A local sentence-embedding model. Vectors are float32 and unit length, so a dot product is the cosine."""

    @property
    def model_id(self) -> str: ...
    @property
    def model_version(self) -> str: ...
    @property
    def dimension(self) -> int: ...
    def embed(self, texts: Sequence[str]) -> Matrix:
        """Vectors of memories' texts."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        """Vectors of search queries (models trained with a query prefix, like e5, use it here)."""
        ...


def unit(vector: Matrix) -> Matrix:
    norm = float(np.linalg.norm(vector))
    scaled: Matrix = np.asarray(vector / norm if norm > 0 else vector, dtype=np.float32)
    return scaled


@dataclass(frozen=True, slots=True)
class Centroids:
    """A multilingual model's mean vector per language, of memories (passages) and of queries.

    A multilingual model places texts of one language near each other whatever they say: e5-small puts
    86 % of a Korean, Chinese or Japanese query's ten nearest memories in the query's own language. Taking
    each language's mean away from a text's vector (and the query language's mean of queries away from
    the query's) leaves what the text says, and across languages that is most of what the model knows.
    The means come from parallel sentences shipped with the model (embeddings/calibration.py): constants,
    named by `name`.
    """

    name: str
    passages: Mapping[str, Matrix]  # language -> mean vector of texts in it, read as memories
    queries: Mapping[str, Matrix]

    def __post_init__(self) -> None:
        if set(self.passages) != set(LANGUAGES) or set(self.queries) != set(LANGUAGES):
            raise ValueError("centroids need every language of LANGUAGES")

    @staticmethod
    def _of(means: Mapping[str, Matrix], text: str) -> Matrix:
        language = language_of(text)
        if language in means:
            return means[language]
        # Another script: no language of its own to take away, so the mean of all (what every text shares).
        mean: Matrix = np.mean(np.stack([means[name] for name in LANGUAGES]), axis=0).astype(np.float32)
        return mean

    def passage(self, vector: Matrix, text: str) -> Matrix:
        return unit(vector - self._of(self.passages, text))

    def query(self, vector: Matrix, text: str) -> Matrix:
        return unit(vector - self._of(self.queries, text))


# What relevance asks of each vector arrangement (vector_id), calibrated on the dev sets (decision 0029,
# engine/recall/relevance.py). A model not named here has no floors: every candidate is returned, as before.
RELEVANCE_FLOORS: Mapping[str, Floors] = MappingProxyType(
    {
        "multilingual-e5-small-onnx-qint8-c1": Floors(
            lexical=0.1, cosine=0.15, clear=0.42, weight=0.4, lead=0.12, cross=0.33
        ),
    }
)


@dataclass(frozen=True, slots=True)
class SemanticModel:
    """The channel's model: its embedder, how much a memory's context weighs, and its centroids (if any)."""

    embedder: Embedder
    centroids: Centroids | None = None
    context_weight: float = CONTEXT_WEIGHT

    @property
    def vector_id(self) -> str:
        """What the store's model column holds for this model's vectors: the model id, and the centroids
        taken away, so that a vector written under another arrangement is never taken for one of this."""
        model_id = self.embedder.model_id
        return model_id if self.centroids is None else f"{model_id}-{self.centroids.name}"

    @property
    def floors(self) -> Floors | None:
        return RELEVANCE_FLOORS.get(self.vector_id)

    def query_vector(self, query: str) -> Matrix:
        """The query's vector as memories' vectors are compared with it."""
        vector = self.embedder.embed_queries([query])[0]
        return vector if self.centroids is None else self.centroids.query(vector, query)

    def memory_vector(self, embed: Callable[[Sequence[str]], Matrix], primary: str, lines: Sequence[str]) -> Matrix:
        """The primary text's vector plus `context_weight` times the unit mean of its context lines', each
        text first taken from its own language's centroid (a Korean line of context beside an English
        statement is centred as Korean).

        The statement alone keeps its own meaning sharp; its surroundings carry the topic a short reply
        ("Wow, that's great!") leaves out. Lines are embedded one by one so that a line already seen (a
        conversation's previous turn is the next turn's context) comes from the caller's cache instead of
        the model: one model pass per memory.
        """
        texts = [primary, *lines]
        vectors = embed(texts)
        if self.centroids is not None:
            centroids = self.centroids
            vectors = np.stack([centroids.passage(vectors[i], text) for i, text in enumerate(texts)])
        if not lines:
            return unit(vectors[0])
        return unit(vectors[0] + self.context_weight * unit(vectors[1:].mean(axis=0)))


def cosine_formula(model: SemanticModel) -> str:
    """How the model's cosine is made, for the rank receipt's formula_ref."""
    centred = "" if model.centroids is None else f",centred={model.centroids.name}"
    return f"cosine({model.embedder.model_id},primary+{formula_number(model.context_weight)}*context{centred})"
