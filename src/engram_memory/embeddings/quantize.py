"""Integer-arithmetic graphs derived from packaged weights (MiniLM's int8 graph, e5's 4-bit file), cached on disk.

The packaged graph stores int8 weights but multiplies in float32: every run first casts and scales
all weights, then does float matrix products. ONNX Runtime's dynamic quantization (per output
channel, weights only as the constant operand) turns those products into int8 ones, which run about
twice as fast on two cores (VNNI) with neighbours still ranked alike (mean cosine 0.99 to the float
graph on LoCoMo turns). Deriving takes about two seconds, so the result is kept in a cache folder
under a name that carries the source digest, the recipe and the runtime version, and written
atomically: processes racing to derive it all end up with one whole file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["RECIPE", "cache_folder", "derived_graph", "integer_graph"]

RECIPE = "qdyn-pc-1"  # per-channel QInt8 weights, MatMul with a constant operand only


def cache_folder(explicit: Path | None = None) -> Path:
    """`explicit` (the host's ENGRAM_MODEL_CACHE, host/settings.py), else $XDG_CACHE_HOME/engram-memory/models,
    else ~/.cache/engram-memory/models."""
    if explicit is not None:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "engram-memory" / "models"


def _float_graph(source: Path) -> Any:
    """The source graph with each Cast(int8 initializer) -> Mul(scale) pair folded into a float initializer."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    initializers = {item.name: item for item in graph.initializer}
    cast_of = {
        node.output[0]: node.input[0] for node in graph.node if node.op_type == "Cast" and node.input[0] in initializers
    }
    folded: dict[str, Any] = {}
    kept = []
    for node in graph.node:
        if node.op_type == "Cast" and node.input[0] in initializers:
            continue
        if node.op_type == "Mul" and node.input[0] in cast_of and node.input[1] in initializers:
            weights = numpy_helper.to_array(initializers[cast_of[node.input[0]]]).astype(np.float32)
            scale = numpy_helper.to_array(initializers[node.input[1]]).astype(np.float32)
            folded[node.output[0]] = weights * scale
            continue
        kept.append(node)
    used = {name for node in kept for name in node.input}
    remaining = [item for item in graph.initializer if item.name in used and item.name not in folded]
    del graph.node[:]
    graph.node.extend(kept)
    del graph.initializer[:]
    graph.initializer.extend(remaining + [numpy_helper.from_array(value, name) for name, value in folded.items()])
    return model


class _QuietQuantizer(logging.Filter):
    """The quantizer advises pre-processing on the root logger; a server's log has no use for it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "quantization" not in record.pathname


def _derive(build: Callable[[], Any], target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quiet = _QuietQuantizer()
    logging.getLogger().addFilter(quiet)
    try:
        _quantize(build(), target, quantize_dynamic, QuantType.QInt8)
    finally:
        logging.getLogger().removeFilter(quiet)


def _quantize(model: Any, target: Path, quantize_dynamic: Any, weight_type: Any) -> None:
    with tempfile.TemporaryDirectory(prefix="engram-quantize-") as scratch:
        written = Path(scratch) / "model.onnx"
        quantize_dynamic(
            model,
            written,
            per_channel=True,
            weight_type=weight_type,
            extra_options={"MatMulConstBOnly": True},
        )
        data = written.read_bytes()
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(data).hexdigest()
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    partial.write_bytes(data)
    partial.replace(target)
    partial.write_text(digest)
    partial.replace(target.with_suffix(".sha256"))


def _intact(target: Path) -> bool:
    try:
        expected = target.with_suffix(".sha256").read_text().strip()
        return hashlib.sha256(target.read_bytes()).hexdigest() == expected
    except OSError:
        return False


def integer_graph(name: str, build: Callable[[], Any], cache: Path | None = None) -> bytes:
    """The integer graph of the float graph `build` returns, quantised with RECIPE: from the cache when
    intact, else derived now (and cached when the folder is writable; an unwritable cache only costs
    the derivation on every load; `cache` as cache_folder takes it). `name` must change whenever what
    `build` returns may change."""
    target = cache_folder(cache) / f"{name}.onnx"
    if not _intact(target):
        try:
            _derive(build, target)
        except OSError:
            with tempfile.TemporaryDirectory(prefix="engram-quantize-") as scratch:
                fallback = Path(scratch) / target.name
                _derive(build, fallback)
                return fallback.read_bytes()
    return target.read_bytes()


def derived_graph(source: Path, source_sha256: str, runtime_version: str, cache: Path | None = None) -> bytes:
    """The packaged MiniLM's integer graph (see integer_graph)."""
    return integer_graph(
        f"all-minilm-l6-v2-{RECIPE}-ort{runtime_version}-{source_sha256[:16]}", lambda: _float_graph(source), cache
    )
