"""What verify found: problems named by code, ids and cursors (never memory text), and the report they make up."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.ports.faults import StoreFault, fault_of
from engram_memory.engine.ports.store import Scope

MAX_SUBJECTS_PER_CHECK = 20


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong, as a one-line detail that names ids and cursors but never memory text."""

    code: ErrorCode
    scope: Scope | None
    subject: str
    detail: str

    @property
    def line(self) -> str:
        return f"{self.code.value}: {self.detail}"


@dataclass
class VerifyReport:
    full: bool
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    scopes: int = 0
    events: int = 0
    bodies: int = 0
    opened: int = 0
    indexed: int = 0
    embedded: int = 0
    unembedded: int = 0  # accepted_current records still waiting for a vector by the current model

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first(self) -> Problem | None:
        return self.problems[0] if self.problems else None


def scope_name(scope: Scope) -> str:
    return f"{scope.tenant}/{scope.workspace}"


def unreadable(code: ErrorCode, scope: Scope | None, what: str, exc: ContractError) -> Problem:
    """A read the store could not finish, worded by the fault the store classified. The driver's own message is
    never read or copied: it may quote row text."""
    fault = fault_of(exc)
    if fault is StoreFault.CORRUPT:
        reason = "the database disk image is malformed"
    elif fault is StoreFault.BUSY:  # not damage: the same check passes once the writer is done
        code, reason = ErrorCode.STORE_UNAVAILABLE, "the store is busy; try again"
    else:
        reason = "unreadable"
    where = f" of {scope_name(scope)}" if scope is not None else ""
    return Problem(code, scope, what, f"{what}{where} cannot be read ({reason})")


class Checks:
    """The problems of one scope, at most MAX_SUBJECTS_PER_CHECK per kind of check, then how many more."""

    def __init__(self, scope: Scope, report: VerifyReport) -> None:
        self.scope = scope
        self.report = report
        self._seen: dict[str, tuple[ErrorCode, int]] = {}

    def add(self, check: str, code: ErrorCode, subject: str, detail: str) -> None:
        seen = self._seen.get(check, (code, 0))[1] + 1
        self._seen[check] = (code, seen)
        if seen <= MAX_SUBJECTS_PER_CHECK:
            self.report.problems.append(Problem(code, self.scope, subject, detail))

    def close(self) -> None:
        for check, (code, seen) in self._seen.items():
            if seen > MAX_SUBJECTS_PER_CHECK:
                more = seen - MAX_SUBJECTS_PER_CHECK
                detail = f"{more} more problems of the same kind ({check}) in {scope_name(self.scope)}"
                self.report.problems.append(Problem(code, self.scope, check, detail))


def problems_json(report: VerifyReport) -> dict[str, Any]:
    """The report as the `verify --json` output: codes, scopes, subjects and details."""
    return {
        "ok": report.ok,
        "mode": "full" if report.full else "quick",
        "scopes": report.scopes,
        "events": report.events,
        "bodies": report.bodies,
        "opened": report.opened,
        "indexed": report.indexed,
        "embedded": report.embedded,
        "unembedded": report.unembedded,
        "problems": [
            {
                "code": problem.code.value,
                "tenant": None if problem.scope is None else problem.scope.tenant,
                "workspace": None if problem.scope is None else problem.scope.workspace,
                "subject": problem.subject,
                "detail": problem.detail,
            }
            for problem in report.problems
        ],
        "warnings": list(report.warnings),
    }
