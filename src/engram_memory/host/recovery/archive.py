"""The backup archive's container: a short plaintext header, then AES-256-GCM chunks that authenticate everything.

Each chunk's nonce and associated data bind the header's digest, the chunk's index and whether it is
the last one (the STREAM construction), so a flipped byte, a reordered or dropped chunk, a cut-off
end and bytes appended after the end all fail to open. Nothing is trusted before every chunk opened.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from engram_memory.host.language.catalogue import _

MAGIC = b"ENGRAMBK"
FORMAT_VERSION = 2
# Format 1 (until 0.x): sealed under HKDF-SHA256 of keys/secret.key, manifest and snapshot only, no key id.
LEGACY_FORMAT_VERSION = 1
KDF_HKDF_SHA256 = 1  # HKDF-SHA256, salt from the header; format 2 over the recovery key, format 1 over secret.key
CIPHER_AES_256_GCM = 1
CHUNK_BYTES = 1 << 16
SALT_BYTES = 32
NONCE_PREFIX_BYTES = 7
KEY_ID_BYTES = 8
TAG_BYTES = 16
# magic, format version, kdf, cipher, plaintext bytes per chunk, salt, nonce prefix (format 2: + key id)
_HEADER_V1 = struct.Struct(">8sHBBI32s7s")
_HEADER = struct.Struct(">8sHBBI32s7s8s")
_CHUNK_POSITION = struct.Struct(">IB")  # chunk index, final flag
_SECTION_LENGTH = struct.Struct(">Q")  # ahead of every section but the last (the snapshot)


class ArchiveInvalid(Exception):
    """The file is not an archive this home can open whole and unchanged (a one-line reason)."""


@dataclass(frozen=True, slots=True)
class Header:
    raw: bytes
    version: int
    chunk_bytes: int
    salt: bytes
    nonce_prefix: bytes
    key_id: bytes  # which recovery key seals it (format 2); empty for format 1

    @property
    def digest(self) -> bytes:
        return hashlib.sha256(self.raw).digest()


KeyForHeader = Callable[[Header], bytes]


@dataclass(frozen=True, slots=True)
class Opened:
    header: Header
    manifest: bytes
    keys: bytes | None  # the key section (format 2)
    snapshot: bytes


def _position(index: int, final: bool) -> bytes:
    return _CHUNK_POSITION.pack(index, int(final))


def _nonce(header: Header, index: int, final: bool) -> bytes:
    return header.nonce_prefix + _position(index, final)


def _aad(header: Header, index: int, final: bool) -> bytes:
    return header.digest + _position(index, final)


def new_header(key_id: bytes) -> Header:
    """A fresh format-2 header (new salt and nonce prefix) naming the recovery key that seals it."""
    salt, prefix = os.urandom(SALT_BYTES), os.urandom(NONCE_PREFIX_BYTES)
    raw = _HEADER.pack(MAGIC, FORMAT_VERSION, KDF_HKDF_SHA256, CIPHER_AES_256_GCM, CHUNK_BYTES, salt, prefix, key_id)
    return Header(raw, FORMAT_VERSION, CHUNK_BYTES, salt, prefix, key_id)


def seal_archive(header: Header, sections: Sequence[bytes], key: bytes) -> bytes:
    """The archive's bytes: the header, then the sections (the last one unprefixed) in authenticated chunks."""
    cipher = AESGCM(key)
    framed = [part for section in sections[:-1] for part in (_SECTION_LENGTH.pack(len(section)), section)]
    plaintext = memoryview(b"".join([*framed, sections[-1]]))
    starts = range(0, len(plaintext), header.chunk_bytes)
    parts = [header.raw]
    for index, start in enumerate(starts):
        final = index == len(starts) - 1
        chunk = plaintext[start : start + header.chunk_bytes]
        parts.append(cipher.encrypt(_nonce(header, index, final), chunk, _aad(header, index, final)))
    return b"".join(parts)


def write_archive(target: Path, data: bytes) -> None:
    """Writes a temporary file beside `target` (0600), syncs it, and renames it into place."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        temporary.replace(target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    folder = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def read_header(data: bytes) -> Header:
    """Raises ArchiveInvalid when the header is not one this version reads."""
    if len(data) < _HEADER_V1.size or not data.startswith(MAGIC):
        raise ArchiveInvalid("not an engram-memory backup archive")
    version = struct.unpack_from(">H", data, len(MAGIC))[0]
    if version == LEGACY_FORMAT_VERSION:
        _magic, _v, kdf, cipher, chunk_bytes, salt, prefix = _HEADER_V1.unpack_from(data)
        key_id, size = b"", _HEADER_V1.size
    elif version == FORMAT_VERSION and len(data) >= _HEADER.size:
        _magic, _v, kdf, cipher, chunk_bytes, salt, prefix, key_id = _HEADER.unpack_from(data)
        size = _HEADER.size
    elif version == FORMAT_VERSION:
        raise ArchiveInvalid("the archive is cut short inside its header")
    else:
        raise ArchiveInvalid(f"archive format {version} is not one this version reads")
    if kdf != KDF_HKDF_SHA256 or cipher != CIPHER_AES_256_GCM or chunk_bytes != CHUNK_BYTES:
        raise ArchiveInvalid(
            "the archive header names a key derivation, cipher or chunk size this version never writes"
        )
    return Header(data[:size], version, chunk_bytes, salt, prefix, key_id)


def open_archive(data: bytes, key_for: KeyForHeader) -> Opened:
    """The archive's sections once every chunk opened. Raises ArchiveInvalid otherwise, naming what failed."""
    header = read_header(data)
    cipher = AESGCM(key_for(header))
    sealed_chunk = header.chunk_bytes + TAG_BYTES
    body = memoryview(data)[len(header.raw) :]
    if len(body) < TAG_BYTES:
        raise ArchiveInvalid("the archive is cut short: it holds no chunk")
    opened: list[bytes] = []
    starts = range(0, len(body), sealed_chunk)
    for index, start in enumerate(starts):
        final = index == len(starts) - 1
        chunk = body[start : start + sealed_chunk]
        try:
            opened.append(cipher.decrypt(_nonce(header, index, final), chunk, _aad(header, index, final)))
        except InvalidTag:
            raise ArchiveInvalid(_why_chunk_failed(cipher, header, index, final, chunk)) from None
    plaintext = b"".join(opened)
    manifest, at = _section(plaintext, 0, "manifest")
    keys = None
    if header.version == FORMAT_VERSION:
        keys, at = _section(plaintext, at, "key section")
    return Opened(header=header, manifest=manifest, keys=keys, snapshot=plaintext[at:])


def _section(plaintext: bytes, at: int, name: str) -> tuple[bytes, int]:
    if len(plaintext) < at + _SECTION_LENGTH.size:
        raise ArchiveInvalid(f"the archive holds no {name}")
    (length,) = _SECTION_LENGTH.unpack_from(plaintext, at)
    end = at + _SECTION_LENGTH.size + length
    if end > len(plaintext):
        raise ArchiveInvalid(f"the archive's {name} runs past its end")
    return plaintext[at + _SECTION_LENGTH.size : end], end


def _why_chunk_failed(cipher: AESGCM, header: Header, index: int, final: bool, chunk: memoryview) -> str:
    """Tells a cut-off end and appended bytes apart from a wrong key or a changed byte, for the operator."""
    try:
        cipher.decrypt(_nonce(header, index, not final), chunk, _aad(header, index, not final))
    except InvalidTag:
        if index == 0:
            if header.version == LEGACY_FORMAT_VERSION:
                return _("the archive does not open with this home's keys/secret.key or was changed")
            return _("the archive does not open with its recovery key or was changed")
        return _("chunk {index} of the archive was changed, cut short or extended").format(index=index)
    if final:
        return _("the archive is cut short: its last chunk is missing")
    return _("the archive has bytes after its final chunk")
