"""The one way a driver's error becomes the contract's: each driver gives its error types and a classifier.

Every store and vault translates through its driver's `Faults`, so the code a caller sees, the fault
behind it and what is logged are decided in one place; a block whose failure means something else
(a failed COMMIT, a conflict the engine may run again) says so where it is, through the arguments.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import TracebackType

from engram_memory.contract.errors import ErrorCode
from engram_memory.engine.ports.faults import StoreError, StoreFault, TransientConflict
from engram_memory.stores.sql.base import StoreInvariantError

logger = logging.getLogger(__name__)

Classifier = Callable[[BaseException], StoreFault]


class Faults:
    """A driver's errors (plus StoreInvariantError, which the shared statements raise) and their classifier."""

    def __init__(self, errors: tuple[type[BaseException], ...], classify: Classifier) -> None:
        self.errors: tuple[type[BaseException], ...] = (*errors, StoreInvariantError)
        self.classify = classify

    def error(
        self, exc: BaseException, code: ErrorCode = ErrorCode.STORE_UNAVAILABLE, *, conflicts_rerun: bool = False
    ) -> StoreError:
        """`conflicts_rerun` only where the whole body is known to be rolled back (a store's own
        transaction): there a conflict becomes TransientConflict, which the engine runs again."""
        fault = self.classify(exc)
        if conflicts_rerun and fault is StoreFault.CONFLICT:
            return TransientConflict()
        return StoreError(code, fault)

    def translated(
        self,
        code: ErrorCode = ErrorCode.STORE_UNAVAILABLE,
        *,
        undo: Callable[[], None] | None = None,
        failed: str | None = None,
        conflicts_rerun: bool = False,
    ) -> Translated:
        """A driver error inside becomes StoreError `code`, after `undo` ran and `failed` was logged
        with the error's type (never its text, which may quote a row)."""
        return Translated(self, code, undo, failed, conflicts_rerun)

    def ignored(self, *, undo: Callable[[], None] | None = None, failed: str | None = None) -> Ignored:
        """For work whose failure is answered otherwise (a sweep later, False): a driver error inside
        ends the block quietly, after `undo` ran and `failed` was logged."""
        return Ignored(self.errors, undo, failed)


class Translated:
    """A class, not a generator: every store call enters one, and a generator's context costs a write
    several times as much for nothing."""

    __slots__ = ("_code", "_conflicts_rerun", "_failed", "_faults", "_undo")

    def __init__(
        self,
        faults: Faults,
        code: ErrorCode,
        undo: Callable[[], None] | None,
        failed: str | None,
        conflicts_rerun: bool,
    ) -> None:
        self._faults = faults
        self._code = code
        self._undo = undo
        self._failed = failed
        self._conflicts_rerun = conflicts_rerun

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc is None or not isinstance(exc, self._faults.errors):
            return
        if self._undo is not None:
            self._undo()
        if self._failed is not None:
            logger.error("%s: %s", self._failed, type(exc).__name__)
        raise self._faults.error(exc, self._code, conflicts_rerun=self._conflicts_rerun) from exc


class Ignored:
    """A class, not a generator, so that type checkers see the block may end early (its exit returns bool)."""

    def __init__(
        self, errors: tuple[type[BaseException], ...], undo: Callable[[], None] | None, failed: str | None
    ) -> None:
        self._errors = errors
        self._undo = undo
        self._failed = failed

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        if not isinstance(exc, self._errors):
            return False
        if self._undo is not None:
            self._undo()
        if self._failed is not None:
            logger.error("%s (%s)", self._failed, type(exc).__name__)
        return True
