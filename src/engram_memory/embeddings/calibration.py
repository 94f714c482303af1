"""The language centroids of multilingual-e5-small, from parallel sentences shipped beside it.

`data/calibration-sentences.json` holds sentences written for this project, each in the five languages
(English, Korean, Simplified and Traditional Chinese, Japanese). A language's centroid is the mean of its
sentences' vectors, as memories (`passage: `) and as queries (`query: `); the semantic channel takes it
away from every vector of that language (engine/recall/semantic_models.py Centroids, decision 0025).
Because the sentences say the same things in every language, what the centroids differ by is the
language, not the topic. They are computed once, when this module runs as a program, and shipped as
`data/e5-centroids.json`, so a process never pays for them and every process uses the same constants:

    python -m engram_memory.embeddings.calibration        # rewrites data/e5-centroids.json
"""

from __future__ import annotations

import hashlib
import json
import sys
from importlib import resources
from typing import Any

import numpy as np

from engram_memory.engine.recall.languages import LANGUAGES
from engram_memory.engine.recall.semantic_models import Centroids, Embedder, Matrix

__all__ = ["CENTROIDS_FILE", "SENTENCES_FILE", "compute_centroids", "e5_centroids", "sentences"]

SENTENCES_FILE = "calibration-sentences.json"
CENTROIDS_FILE = "e5-centroids.json"
NAME = "c1"  # change with the sentences or the way centroids are made: stored vectors then count as missing


def _data(name: str) -> bytes:
    return resources.files("engram_memory.embeddings").joinpath("data", name).read_bytes()


def sentences() -> dict[str, list[str]]:
    """The calibration sentences, per language."""
    rows = json.loads(_data(SENTENCES_FILE))["sentences"]
    return {language: [row[language] for row in rows] for language in LANGUAGES}


def _mean(vectors: Matrix) -> list[float]:
    return [round(float(x), 7) for x in vectors.mean(axis=0)]


def compute_centroids(embedder: Embedder) -> dict[str, Any]:
    """What data/e5-centroids.json holds, computed with `embedder`."""
    by_language = sentences()
    return {
        "name": NAME,
        "model": embedder.model_id,
        "sentences_sha256": hashlib.sha256(_data(SENTENCES_FILE)).hexdigest(),
        "passages": {language: _mean(embedder.embed(texts)) for language, texts in by_language.items()},
        "queries": {language: _mean(embedder.embed_queries(texts)) for language, texts in by_language.items()},
    }


def e5_centroids() -> Centroids:
    """The shipped centroids. Raises ValueError when the file does not belong to the shipped sentences."""
    data = json.loads(_data(CENTROIDS_FILE))
    if data["sentences_sha256"] != hashlib.sha256(_data(SENTENCES_FILE)).hexdigest():
        raise ValueError(
            "e5-centroids.json was computed from other sentences: run engram_memory.embeddings.calibration"
        )

    def vectors(side: str) -> dict[str, Matrix]:
        return {language: np.asarray(data[side][language], dtype=np.float32) for language in LANGUAGES}

    return Centroids(f"{data['name']}", vectors("passages"), vectors("queries"))


def main() -> int:
    from importlib.resources import as_file

    from engram_memory.embeddings.e5_onnx import E5Onnx

    computed = compute_centroids(E5Onnx())
    with as_file(resources.files("engram_memory.embeddings").joinpath("data", CENTROIDS_FILE)) as path:
        path.write_text(json.dumps(computed, indent=None, separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
