"""The host's key material on disk: key-encryption keys, the MAC secret and the binding signing key.

None of it lives in the data store: that separation is what makes destroying a data key final.
Files are created once, mode 0600, and never overwritten.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from engram_memory.engine.keys import KEK_BYTES, StaticKeyRing
from engram_memory.host.settings import HostPaths


class KeyFileError(Exception):
    """A key file is missing, unreadable or malformed (a one-line reason for the host)."""


def _write_private(path: Path, data: bytes) -> None:
    """Creates `path` with mode 0600; refuses to replace an existing file."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def create_key_files(paths: HostPaths) -> list[Path]:
    """Creates whichever key files are missing; returns those it created. Existing keys are kept."""
    created = []
    if not paths.kek_file.exists():
        kek_id = "kek-" + secrets.token_hex(4)
        ring = {"active": kek_id, "keys": {kek_id: base64.b64encode(os.urandom(KEK_BYTES)).decode("ascii")}}
        _write_private(paths.kek_file, json.dumps(ring, indent=2).encode("utf-8"))
        created.append(paths.kek_file)
    if not paths.secret_file.exists():
        _write_private(paths.secret_file, os.urandom(32))
        created.append(paths.secret_file)
    if not paths.signing_key_file.exists():
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        _write_private(paths.signing_key_file, pem)
        created.append(paths.signing_key_file)
    return created


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KeyFileError(f"cannot read {path.name}: run 'engram-memory init' first") from exc


def load_keyring(paths: HostPaths) -> StaticKeyRing:
    try:
        data = json.loads(_read(paths.kek_file))
        keys = {name: base64.b64decode(value, validate=True) for name, value in data["keys"].items()}
        return StaticKeyRing(keys, data["active"])
    except (ValueError, KeyError, TypeError) as exc:
        raise KeyFileError(f"{paths.kek_file.name} is malformed") from exc


@dataclass(frozen=True, slots=True)
class MacKeys:
    cursor: bytes
    audit: bytes


def _derive(secret: bytes, purpose: str) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose.encode("ascii")).derive(secret)


def load_mac_keys(paths: HostPaths) -> MacKeys:
    secret = _read(paths.secret_file)
    if len(secret) != 32:
        raise KeyFileError(f"{paths.secret_file.name} is malformed")
    return MacKeys(
        cursor=_derive(secret, "engram-memory/page-cursor/v1"),
        audit=_derive(secret, "engram-memory/audit/v1"),
    )


def load_signing_key(paths: HostPaths) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(_read(paths.signing_key_file), password=None)
    except (ValueError, TypeError) as exc:  # TypeError: the key is protected by a passphrase
        raise KeyFileError(f"{paths.signing_key_file.name} is malformed") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{paths.signing_key_file.name} is not an Ed25519 key")
    return key


def key_id(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "host-" + hashlib.sha256(raw).hexdigest()[:16]
