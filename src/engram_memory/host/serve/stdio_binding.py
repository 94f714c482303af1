"""The binding of a stdio server: the token it was started with, or a binding file read again when it changes.

A host renews a short-lived binding by replacing the file (`engram-memory bindings renew FILE`); the
running server takes the new token at its next request, without a restart, so an agent's access does not
lapse while its client stays open. A file that stops verifying takes effect too: the server fails closed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from engram_memory.contract.binding import Binding
from engram_memory.host.binding_file import BindingFileError, read_token_file

logger = logging.getLogger("engram_memory.serve")

Verify = Callable[[str | None], tuple[Binding | None, str | None]]
Unusable = Callable[[Binding], str | None]
_Signature = tuple[int, int, int, int]


class StdioBinding:
    """`verify` turns a token into its binding or the reason there is none; `unusable` says why a verified
    binding would be refused now (revoked, expired). Give `token` or `path`, not both."""

    def __init__(self, verify: Verify, unusable: Unusable, *, token: str | None = None, path: Path | None = None):
        self._verify = verify
        self._unusable = unusable
        self._path = path
        self._lock = threading.Lock()
        self._signature: _Signature | None = None
        self._binding, self._reason = verify(token) if path is None else self._read()

    def binding(self) -> Binding | None:
        """The binding of the request being served, from the file as it is now."""
        self._refresh()
        return self._binding

    def refusal(self) -> str | None:
        """Why a client must not be told this server works (missing, unverifiable, revoked or expired
        binding), as one sentence for the person; None when the binding is usable now."""
        self._refresh()
        if self._binding is None:
            return self._reason
        unusable = self._unusable(self._binding)
        return None if unusable is None else f"binding {self._binding.token_id} {unusable}"

    def describe(self) -> tuple[str, bool]:
        """The start-up log line and whether it is a warning."""
        refusal = self.refusal()
        if refusal is not None:
            return f"{refusal}: clients are refused at connection until the host gives a usable binding", True
        token_id = self._binding.token_id if self._binding is not None else "-"
        source = f" (from {self._path}, read again when it changes)" if self._path is not None else ""
        return f"serving over stdio; binding {token_id} verified{source}", False

    def _refresh(self) -> None:
        if self._path is None:
            return
        with self._lock:
            if self._stat() == self._signature:
                return
            previous = self._binding
            self._binding, self._reason = self._read()
            if self._binding is None:
                logger.warning("the binding file changed and gives no binding: %s", self._reason)
            elif previous is None or previous.token_id != self._binding.token_id:
                logger.info("the binding file changed: binding %s verified", self._binding.token_id)

    def _stat(self) -> _Signature | None:
        assert self._path is not None
        try:
            found = self._path.stat()
        except OSError:
            return None
        return found.st_mtime_ns, found.st_size, found.st_ino, found.st_dev

    def _read(self) -> tuple[Binding | None, str | None]:
        assert self._path is not None
        self._signature = self._stat()
        try:
            return self._verify(read_token_file(self._path))
        except BindingFileError as exc:
            return None, str(exc)
