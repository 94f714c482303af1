"""The host's key material on disk: key-encryption keys, the MAC secret and the binding signing key.

None of it lives in the data store: that separation is what makes destroying a data key final.
Files are created once, mode 0600; only `rotate-keys` replaces kek.json, atomically.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import secrets
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from engram_memory.engine.sealing.keys import KEK_BYTES, StaticKeyRing
from engram_memory.host.keys.private_files import replace_private, write_private
from engram_memory.host.keys.recovery import create_recovery_key
from engram_memory.host.language.catalogue import _
from engram_memory.host.settings import HostPaths

logger = logging.getLogger(__name__)

BACKUP_KDF_INFO = b"engram-memory/backup/v1"


class KeyFileError(Exception):
    """A key file is missing, unreadable or malformed (a one-line reason for the host)."""


def create_key_files(paths: HostPaths) -> list[Path]:
    """Creates whichever key files are missing; returns those it created. Existing keys are kept."""
    created = []
    if not paths.kek_file.exists():
        kek_id = "kek-" + secrets.token_hex(4)
        ring = {"active": kek_id, "keys": {kek_id: base64.b64encode(os.urandom(KEK_BYTES)).decode("ascii")}}
        write_private(paths.kek_file, json.dumps(ring, indent=2).encode("utf-8"))
        created.append(paths.kek_file)
    if not paths.secret_file.exists():
        write_private(paths.secret_file, os.urandom(32))
        created.append(paths.secret_file)
    if not paths.signing_key_file.exists():
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        write_private(paths.signing_key_file, pem)
        created.append(paths.signing_key_file)
    if create_recovery_key(paths):
        created.append(paths.recovery_file)
    return created


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KeyFileError(_("cannot read {name}: run 'engram-memory init' first").format(name=path.name)) from exc


@dataclass(frozen=True, slots=True)
class RingFile:
    """keys/kek.json as data: the active KEK, every KEK still needed, and those a rotation is retiring.

    While `retiring` is not empty a rotation is unfinished: its KEKs still open data keys, but no new
    data key is wrapped by them.
    """

    active: str
    keys: Mapping[str, bytes]
    retiring: tuple[str, ...] = field(default=())

    def to_json(self) -> bytes:
        data: dict[str, object] = {
            "active": self.active,
            "keys": {name: base64.b64encode(value).decode("ascii") for name, value in sorted(self.keys.items())},
        }
        if self.retiring:
            data["retiring"] = list(self.retiring)
        return json.dumps(data, indent=2).encode("utf-8")


def read_ring_file(paths: HostPaths) -> RingFile:
    """Raises KeyFileError when kek.json is missing or malformed."""
    raw = _read(paths.kek_file)
    try:
        data = json.loads(raw)
        keys = {str(name): base64.b64decode(value, validate=True) for name, value in data["keys"].items()}
        active = data["active"]
        retiring = data.get("retiring", [])
        if not isinstance(retiring, list) or any(name not in keys or name == active for name in retiring):
            raise ValueError("retiring names a key that is not in the ring, or the active one")
        ring = RingFile(active=active, keys=keys, retiring=tuple(str(name) for name in retiring))
        StaticKeyRing(ring.keys, ring.active)  # the same checks the engine's ring makes
        return ring
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise KeyFileError(_("{name} is malformed").format(name=paths.kek_file.name)) from exc


def write_ring_file(paths: HostPaths, ring: RingFile) -> None:
    """Replaces kek.json atomically, so a new KEK is durable before any data key is wrapped by it."""
    replace_private(paths.kek_file, ring.to_json())


def new_kek(existing: Collection[str]) -> tuple[str, bytes]:
    """A fresh 256-bit KEK with an id the ring does not use yet."""
    while True:
        kek_id = "kek-" + secrets.token_hex(4)
        if kek_id not in existing:
            return kek_id, os.urandom(KEK_BYTES)


class FileKeyRing:
    """The engine's key ring over kek.json, re-read whenever the file changes.

    A server started before a rotation must open keys the rotation re-wrapped under the new KEK, and
    must wrap new keys with it: it notices the replaced file on its next wrap or unwrap. When a
    replaced file does not load, the ring it had keeps serving and the reason is logged.
    """

    def __init__(self, paths: HostPaths) -> None:
        self._paths = paths
        self._kek_file = os.fspath(paths.kek_file)
        self._lock = threading.Lock()
        self._seen = self._stamp()
        ring = read_ring_file(paths)
        self._ring = StaticKeyRing(ring.keys, ring.active)

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            info = os.stat(self._kek_file)  # noqa: PTH116 (a str path: no Path object per call)
        except OSError:
            return None
        return (info.st_ino, info.st_mtime_ns, info.st_size)

    def _current(self) -> StaticKeyRing:
        stamp = self._stamp()
        with self._lock:
            if stamp is not None and stamp != self._seen:
                try:
                    ring = read_ring_file(self._paths)
                    self._ring = StaticKeyRing(ring.keys, ring.active)
                except (KeyFileError, ValueError) as exc:
                    logger.error("kept the loaded key ring: %s", exc)
                self._seen = stamp
            return self._ring

    @property
    def active_kek_id(self) -> str:
        return self._current().active_kek_id

    def wrap(self, data_key: bytes) -> tuple[str, bytes]:
        return self._current().wrap(data_key)

    def unwrap(self, kek_id: str, wrapped: bytes) -> bytes:
        """Raises ContractError BLOB_MISSING when the KEK is unknown or the wrap does not open."""
        return self._current().unwrap(kek_id, wrapped)


def load_keyring(paths: HostPaths) -> FileKeyRing:
    """Raises KeyFileError when kek.json is missing or malformed."""
    return FileKeyRing(paths)


@dataclass(frozen=True, slots=True)
class MacKeys:
    cursor: bytes
    audit: bytes


def _derive(secret: bytes, purpose: str) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose.encode("ascii")).derive(secret)


def load_mac_keys(paths: HostPaths) -> MacKeys:
    return mac_keys_of(_read(paths.secret_file), paths.secret_file.name)


def mac_keys_of(secret: bytes, name: str = "secret.key") -> MacKeys:
    """The digest keys a 32-byte secret derives. Raises KeyFileError naming `name` when it is malformed."""
    if len(secret) != 32:
        raise KeyFileError(_("{name} is malformed").format(name=name))
    return MacKeys(
        cursor=_derive(secret, "engram-memory/page-cursor/v1"),
        audit=_derive(secret, "engram-memory/audit/v1"),
    )


def upstream_token_key(paths: HostPaths) -> bytes:
    """The AES-256 key that seals the team provider's refresh tokens in the vault (HKDF-SHA256 of secret.key):
    a copy of the vault alone does not give them away."""
    secret = _read(paths.secret_file)
    if len(secret) != 32:
        raise KeyFileError(_("{name} is malformed").format(name=paths.secret_file.name))
    return _derive(secret, "engram-memory/upstream-refresh-token/v1")


def backup_key(paths: HostPaths, salt: bytes) -> bytes:
    """The AES-256 key of one format-1 archive (before recovery keys): HKDF-SHA256 of secret.key with the
    archive's own salt. Only a home holding the same secret.key opens such an archive."""
    secret = _read(paths.secret_file)
    if len(secret) != 32:
        raise KeyFileError(_("{name} is malformed").format(name=paths.secret_file.name))
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=BACKUP_KDF_INFO).derive(secret)


def load_signing_key(paths: HostPaths) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(_read(paths.signing_key_file), password=None)
    except (ValueError, TypeError) as exc:  # TypeError: the key is protected by a passphrase
        raise KeyFileError(_("{name} is malformed").format(name=paths.signing_key_file.name)) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(_("{name} is not an Ed25519 key").format(name=paths.signing_key_file.name))
    return key


def key_id(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "host-" + hashlib.sha256(raw).hexdigest()[:16]
