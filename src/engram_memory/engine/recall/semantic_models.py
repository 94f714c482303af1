"""Which embedding model reads which texts, and with what weight its nearest memories vote.

The default channel pairs two models (docs/decisions/0016-two-models-by-script.md): all-MiniLM-L6-v2 for
texts written in the Latin alphabet, multilingual-e5-small for every other text. MiniLM ranks English
conversations better in fusion and costs a third of e5's time per memory; e5 is the one that reads Korean,
Chinese and Japanese. Each memory is embedded once, by the model that reads all of its text (its primary
component and the context lines its vector takes in); a query is answered
by the model of its own text, and a Latin-alphabet query also consults e5's memories (Korean, Chinese or
Japanese ones, across languages) in the same list, each model's cosines measured against its own
memories'. With one model (the operator's choice, or the only one installed) it reads everything, as
before.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from engram_memory.engine.recall.ranking import formula_number

__all__ = [
    "ALL",
    "CROSS_SCRIPT_MIN_MEMORIES",
    "LATIN",
    "OTHER",
    "Embedder",
    "Matrix",
    "SemanticModel",
    "cosine_formulas",
    "in_latin_alphabet",
    "model_for",
    "models_for_query",
    "paired",
    "single",
]

Matrix = npt.NDArray[np.float32]


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


# Which texts a model reads: every text (one model), or the Latin-alphabet ones, or all the others.
ALL = "all"
LATIN = "latin"
OTHER = "other"

# A model alone: its memory vectors take 0.2 x their context, and its list votes like the lexical one
# (multilingual-e5-small's measurements, docs/decisions/0014-multilingual-model.md).
SINGLE_CONTEXT_WEIGHT = 0.2
SINGLE_WEIGHT = 1.0
# The pair. MiniLM on Latin-alphabet texts keeps the constants it was tuned with on LoCoMo (decision 0009:
# context 0.7, half a vote; R@10 / Hit@10 79.0 / 85.5 against e5's best 78.6 / 84.7 with its own), e5 on the
# others those of decision 0014.
LATIN_CONTEXT_WEIGHT = 0.7
LATIN_WEIGHT = 0.5
OTHER_CONTEXT_WEIGHT = 0.2
OTHER_WEIGHT = 1.0
# A Latin-alphabet query also ranks the multilingual model's memories (Korean, Chinese, Japanese… across
# languages) once the scope holds this many of them: both models' cosines are then measured against their
# own memories' (how far above the rest of its model's memories a memory stands, in standard deviations),
# and one list is made of both. Below it, the few memories in another script are left to the lexical
# channel: a statistic of three cosines would lift them above every English memory by chance.
CROSS_SCRIPT_MIN_MEMORIES = 30


@dataclass(frozen=True, slots=True)
class SemanticModel:
    """An embedding model as the channel uses it: which texts it reads and its two constants."""

    embedder: Embedder
    texts: str  # ALL, LATIN or OTHER
    context_weight: float  # how much a memory's context lines weigh in its vector
    weight: float  # its list's vote in the fusion, for a query it reads

    @property
    def vector_id(self) -> str:
        """What the store's model column holds for this model's vectors: the model id alone when it reads
        every text (as stores written before the pair hold), else the id and the texts it reads, so that a
        vector written under another arrangement is never taken for one of this."""
        model_id = self.embedder.model_id
        return model_id if self.texts == ALL else f"{model_id}+{self.texts}"

    def reads(self, text: str) -> bool:
        if self.texts == ALL:
            return True
        return in_latin_alphabet(text) == (self.texts == LATIN)


def single(embedder: Embedder) -> tuple[SemanticModel, ...]:
    return (SemanticModel(embedder, ALL, SINGLE_CONTEXT_WEIGHT, SINGLE_WEIGHT),)


def paired(english: Embedder, multilingual: Embedder) -> tuple[SemanticModel, ...]:
    return (
        SemanticModel(english, LATIN, LATIN_CONTEXT_WEIGHT, LATIN_WEIGHT),
        SemanticModel(multilingual, OTHER, OTHER_CONTEXT_WEIGHT, OTHER_WEIGHT),
    )


# Letters of the Latin script, by block: Basic Latin and Latin-1 (with ª, µ and º), Extended-A and -B, IPA,
# the phonetic extensions, Extended Additional (Vietnamese), Extended-C, -D and -E, the ff/fi ligatures and
# the fullwidth forms.
_LATIN_BLOCKS = (
    (0x0000, 0x02AF),
    (0x1D00, 0x1DBF),
    (0x1E00, 0x1EFF),
    (0x2C60, 0x2C7F),
    (0xA720, 0xA7FF),
    (0xAB30, 0xAB6F),
    (0xFB00, 0xFB06),
    (0xFF21, 0xFF5A),
)


@functools.lru_cache(maxsize=8192)
def _foreign_letter(character: str) -> bool:
    if not character.isalpha():
        return False
    code = ord(character)
    return not any(low <= code <= high for low, high in _LATIN_BLOCKS)


def in_latin_alphabet(text: str) -> bool:
    """True when no letter of the text is outside the Latin script (digits, symbols and emoji are no letters).

    One Han, Kana, Hangul, Cyrillic, Greek… letter is enough to send a text to the multilingual model: it
    reads English too, while the English model cannot read the rest.
    """
    return text.isascii() or not any(_foreign_letter(character) for character in set(text))


def model_for(models: Sequence[SemanticModel], text: str) -> SemanticModel:
    """The model that embeds `text` (a query, or all of a memory's text the vector is made of)."""
    return next((model for model in models if model.reads(text)), models[0])


def models_for_query(models: Sequence[SemanticModel], query: str) -> list[SemanticModel]:
    """The models whose memories a query's semantic list ranks: its own model, then for a Latin-alphabet
    query the multilingual one too (which reads English as well as the memories' languages). A query in
    another script never consults the English model, which would only add noise to it."""
    own = model_for(models, query)
    if own.texts != LATIN:
        return [own]
    return [own, *(model for model in models if model.texts == OTHER)]


def cosine_formulas(models: Sequence[SemanticModel]) -> list[str]:
    """How each model's list enters the fusion, for the rank receipt's formula_ref."""
    formulas = [
        f"{formula_number(model.weight)}*cosine({model.embedder.model_id},{model.texts},primary+{formula_number(model.context_weight)}*context)"
        for model in models
    ]
    if any(model.texts == LATIN for model in models):
        formulas.append(f"latin-query:+{OTHER}[>={CROSS_SCRIPT_MIN_MEMORIES}],zscore")
    return formulas
