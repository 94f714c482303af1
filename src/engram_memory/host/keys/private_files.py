"""Key files on disk: created once with mode 0600, or replaced atomically, always synced with their folder."""

from __future__ import annotations

import os
from pathlib import Path


def write_private(path: Path, data: bytes) -> None:
    """Creates `path` with mode 0600; refuses to replace an existing file."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def replace_private(path: Path, data: bytes) -> None:
    """Replaces (or creates) `path` atomically with mode 0600: a temporary file is written and synced,
    then renamed over it, and the folder is synced. A crash leaves the old bytes or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # a leftover from a killed run may have been made with another mode
        with os.fdopen(fd, "wb", closefd=False) as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    finally:
        os.close(fd)
    temporary.replace(path)
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
