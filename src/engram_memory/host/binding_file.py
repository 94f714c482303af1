"""A binding token kept in a file for a stdio server to read (`serve --binding-file`), and renewed in place.

The file is replaced, never rewritten: a server reading it meanwhile sees the old token or the new one,
never half of each. It is readable by its owner only, like the home's key files.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from engram_memory.host.language.catalogue import _


class BindingFileError(Exception):
    """The file cannot be read or written; the message is one line naming it."""


def read_token_file(path: Path) -> str:
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or type(exc).__name__
        raise BindingFileError(_("cannot read the binding file {path}: {why}").format(path=path, why=why)) from exc
    if not token:
        raise BindingFileError(_("the binding file {path} is empty").format(path=path))
    return token


def write_token_file(path: Path, token: str) -> None:
    """Replaces `path` with a file (mode 0600) holding `token`, in one rename."""
    folder = path.parent
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    except OSError as exc:
        raise BindingFileError(
            _("cannot write the binding file {path}: {strerror}").format(path=path, strerror=exc.strerror)
        ) from exc
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            os.fchmod(file.fileno(), 0o600)
            file.write(token + "\n")
            file.flush()
            os.fsync(file.fileno())
        Path(temporary).replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            Path(temporary).unlink()
        raise BindingFileError(
            _("cannot write the binding file {path}: {strerror}").format(path=path, strerror=exc.strerror)
        ) from exc
