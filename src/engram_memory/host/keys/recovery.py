"""The recovery key: the one small secret a host keeps offline to rebuild its home on another machine.

Every archive is sealed under a key derived from it and carries the home's data keys wrapped under
another key derived from it, so an archive and this key are all a restore needs. It is written as
text a person can copy by hand: `ERK1-` and 56 base32 letters in groups of four, whose last five
letters are a checksum, so a mistyped key is refused as mistyped rather than as a wrong key.
It changes only when the host rotates it (`recovery-key rotate`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from engram_memory.host.keys.private_files import replace_private, write_private
from engram_memory.host.language.catalogue import _
from engram_memory.host.settings import HostPaths

PREFIX = "ERK1"
SECRET_BYTES = 32
CHECKSUM_BYTES = 3  # 32 + 3 bytes are 56 base32 letters exactly: no padding to type
KEY_ID_BYTES = 8
_CHECKSUM_DOMAIN = b"engram-memory/recovery-key/v1"
_ID_INFO = b"engram-memory/recovery-key-id/v1"
ARCHIVE_INFO = b"engram-memory/backup/v2"
DATA_KEYS_INFO = b"engram-memory/backup-data-keys/v2"
_FILE_HEADER = (
    "# engram-memory recovery key. Keep a copy offline (a password manager, paper in a safe):\n"
    "# with it and a backup archive, this home can be rebuilt on another machine.\n"
)
_ALPHABET = re.compile(r"[A-Z2-7]+")


class RecoveryKeyError(Exception):
    """A recovery key that is missing, unreadable or mistyped (a one-line reason, never the key)."""


@dataclass(frozen=True, slots=True)
class RecoveryKey:
    secret: bytes

    def __repr__(self) -> str:  # never the secret, in a traceback or a log line
        return f"RecoveryKey({self.key_id})"

    @property
    def key_id_bytes(self) -> bytes:
        """What an archive's header names: derived one way, so it tells nothing about the key."""
        return _derive(self.secret, None, _ID_INFO)[:KEY_ID_BYTES]

    @property
    def key_id(self) -> str:
        return shown_key_id(self.key_id_bytes)

    def archive_key(self, salt: bytes) -> bytes:
        """The AES-256-GCM key of the archive whose header holds `salt`."""
        return _derive(self.secret, salt, ARCHIVE_INFO)

    def data_keys_key(self, salt: bytes) -> bytes:
        """The AES key-wrap key of the data keys inside the archive whose header holds `salt`."""
        return _derive(self.secret, salt, DATA_KEYS_INFO)

    def text(self) -> str:
        letters = base64.b32encode(self.secret + _checksum(self.secret)).decode("ascii")
        return "-".join([PREFIX, *(letters[i : i + 4] for i in range(0, len(letters), 4))])


def shown_key_id(raw: bytes) -> str:
    return "rk-" + raw.hex()


def _derive(secret: bytes, salt: bytes | None, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=info).derive(secret)


def _checksum(secret: bytes) -> bytes:
    return hashlib.sha256(_CHECKSUM_DOMAIN + secret).digest()[:CHECKSUM_BYTES]


def new_recovery_key() -> RecoveryKey:
    return RecoveryKey(os.urandom(SECRET_BYTES))


def parse_recovery_key(text: str) -> RecoveryKey:
    """The key in `text`: lines starting with '#' are ignored, and so are case, spaces and dashes.

    Raises RecoveryKeyError naming what is wrong.
    """
    kept = "".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    letters = re.sub(r"[\s-]+", "", kept).upper()
    if not letters.startswith(PREFIX):
        raise RecoveryKeyError(_("not an engram-memory recovery key (it starts with {prefix}-)").format(prefix=PREFIX))
    letters = letters[len(PREFIX) :]
    if len(letters) != 56 or _ALPHABET.fullmatch(letters) is None:
        raise RecoveryKeyError(_("the recovery key is mistyped: it has 56 letters A-Z and digits 2-7 after ERK1"))
    raw = base64.b32decode(letters)
    secret, checksum = raw[:SECRET_BYTES], raw[SECRET_BYTES:]
    if not hmac.compare_digest(checksum, _checksum(secret)):
        raise RecoveryKeyError(_("the recovery key is mistyped: its checksum does not match"))
    return RecoveryKey(secret)


def _file_text(key: RecoveryKey) -> bytes:
    return (_FILE_HEADER + key.text() + "\n").encode("ascii")


def create_recovery_key(paths: HostPaths) -> bool:
    """Creates keys/recovery.key when the home has none; True when it made one."""
    if paths.recovery_file.exists():
        return False
    write_private(paths.recovery_file, _file_text(new_recovery_key()))
    return True


def read_recovery_key(path: Path) -> RecoveryKey:
    """A recovery key from a file a person saved (or keys/recovery.key). Raises RecoveryKeyError."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecoveryKeyError(_("cannot read the recovery key file {path}").format(path=path)) from exc
    return parse_recovery_key(text)


def load_recovery_key(paths: HostPaths) -> RecoveryKey:
    """The home's own recovery key. Raises RecoveryKeyError."""
    if not paths.recovery_file.exists():
        raise RecoveryKeyError(_("keys/recovery.key is missing: run 'engram-memory init' to make one"))
    return read_recovery_key(paths.recovery_file)


def install_recovery_key(paths: HostPaths, key: RecoveryKey) -> None:
    """Makes `key` the home's recovery key, replacing the file atomically."""
    replace_private(paths.recovery_file, _file_text(key))


def rotate_recovery_key(paths: HostPaths) -> tuple[RecoveryKey, RecoveryKey]:
    """(old, new): a fresh recovery key replaces the home's; archives made before open only with the old one."""
    old = load_recovery_key(paths)
    new = new_recovery_key()
    install_recovery_key(paths, new)
    return old, new
