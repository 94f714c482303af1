"""The backup archive's container: a short plaintext header, then AES-256-GCM chunks that authenticate everything.

Each chunk's nonce and associated data bind the header's digest, the chunk's index and whether it is
the last one (the STREAM construction), so a flipped byte, a reordered or dropped chunk, a cut-off
end and bytes appended after the end all fail to open. Nothing is trusted before every chunk opened.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MAGIC = b"ENGRAMBK"
FORMAT_VERSION = 1
KDF_HKDF_SHA256 = 1  # HKDF-SHA256 over keys/secret.key, salt from the header, info "engram-memory/backup/v1"
CIPHER_AES_256_GCM = 1
CHUNK_BYTES = 1 << 16
SALT_BYTES = 32
NONCE_PREFIX_BYTES = 7
TAG_BYTES = 16
# magic, format version, kdf, cipher, plaintext bytes per chunk, salt, nonce prefix
_HEADER = struct.Struct(">8sHBBI32s7s")
_CHUNK_POSITION = struct.Struct(">IB")  # chunk index, final flag
_SECTION_LENGTH = struct.Struct(">Q")  # the manifest's length, ahead of the manifest and the snapshot

KeyForSalt = Callable[[bytes], bytes]


class ArchiveInvalid(Exception):
    """The file is not an archive this home can open whole and unchanged (a one-line reason)."""


@dataclass(frozen=True, slots=True)
class Header:
    raw: bytes
    chunk_bytes: int
    salt: bytes
    nonce_prefix: bytes

    @property
    def digest(self) -> bytes:
        return hashlib.sha256(self.raw).digest()


def _position(index: int, final: bool) -> bytes:
    return _CHUNK_POSITION.pack(index, int(final))


def _nonce(header: Header, index: int, final: bool) -> bytes:
    return header.nonce_prefix + _position(index, final)


def _aad(header: Header, index: int, final: bool) -> bytes:
    return header.digest + _position(index, final)


def seal_archive(manifest: bytes, snapshot: bytes, key_for_salt: KeyForSalt) -> bytes:
    """The archive's bytes: header, then the manifest and the snapshot in authenticated chunks."""
    salt, prefix = os.urandom(SALT_BYTES), os.urandom(NONCE_PREFIX_BYTES)
    raw = _HEADER.pack(MAGIC, FORMAT_VERSION, KDF_HKDF_SHA256, CIPHER_AES_256_GCM, CHUNK_BYTES, salt, prefix)
    header = Header(raw=raw, chunk_bytes=CHUNK_BYTES, salt=salt, nonce_prefix=prefix)
    cipher = AESGCM(key_for_salt(salt))
    plaintext = memoryview(_SECTION_LENGTH.pack(len(manifest)) + manifest + snapshot)
    starts = range(0, len(plaintext), CHUNK_BYTES)
    parts = [raw]
    for index, start in enumerate(starts):
        final = index == len(starts) - 1
        chunk = plaintext[start : start + CHUNK_BYTES]
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
    """Raises ArchiveInvalid when the header is not one this version writes."""
    if len(data) < _HEADER.size or not data.startswith(MAGIC):
        raise ArchiveInvalid("not an engram-memory backup archive")
    _magic, version, kdf, cipher, chunk_bytes, salt, prefix = _HEADER.unpack_from(data)
    if version != FORMAT_VERSION:
        raise ArchiveInvalid(f"archive format {version} is not one this version reads")
    if kdf != KDF_HKDF_SHA256 or cipher != CIPHER_AES_256_GCM or chunk_bytes != CHUNK_BYTES:
        raise ArchiveInvalid(
            "the archive header names a key derivation, cipher or chunk size this version never writes"
        )
    return Header(raw=data[: _HEADER.size], chunk_bytes=chunk_bytes, salt=salt, nonce_prefix=prefix)


def open_archive(data: bytes, key_for_salt: KeyForSalt) -> tuple[bytes, bytes]:
    """(manifest, snapshot) once every chunk opened. Raises ArchiveInvalid otherwise, naming what failed."""
    header = read_header(data)
    cipher = AESGCM(key_for_salt(header.salt))
    sealed_chunk = header.chunk_bytes + TAG_BYTES
    body = memoryview(data)[_HEADER.size :]
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
    if len(plaintext) < _SECTION_LENGTH.size:
        raise ArchiveInvalid("the archive holds no manifest")
    (manifest_length,) = _SECTION_LENGTH.unpack_from(plaintext)
    end = _SECTION_LENGTH.size + manifest_length
    if end > len(plaintext):
        raise ArchiveInvalid("the archive's manifest runs past its end")
    return plaintext[_SECTION_LENGTH.size : end], plaintext[end:]


def _why_chunk_failed(cipher: AESGCM, header: Header, index: int, final: bool, chunk: memoryview) -> str:
    """Tells a cut-off end and appended bytes apart from a wrong key or a changed byte, for the operator."""
    try:
        cipher.decrypt(_nonce(header, index, not final), chunk, _aad(header, index, not final))
    except InvalidTag:
        if index == 0:
            return "the archive does not open with this home's keys/secret.key (another home's?) or was changed"
        return f"chunk {index} of the archive was changed, cut short or extended"
    if final:
        return "the archive is cut short: its last chunk is missing"
    return "the archive has bytes after its final chunk"
