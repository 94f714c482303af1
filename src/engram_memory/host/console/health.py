"""Health: the last verification, records and candidates per state, queues, file sizes, calls over the day.

Verification runs when the person asks (a quick verify, as `engram-memory verify --quick`): at a
million memories even the quick form takes a while, and a page load should not start one.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import MappingProxyType

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from engram_memory.host.console.chart import HOUR_MS, HOURS, hourly_chart
from engram_memory.host.console.context import console_of
from engram_memory.host.console.views import after_decision, render
from engram_memory.host.language.catalogue import N_, _
from engram_memory.host.operations_stats import gather_stats

_verifying = threading.Lock()
FILE_NAMES = MappingProxyType(
    {
        "store_bytes": N_("Store file"),
        "store_wal_bytes": N_("Store write-ahead log"),
        "store_database_bytes": N_("Store database"),
        "vault_bytes": N_("Vault file"),
        "vault_wal_bytes": N_("Vault write-ahead log"),
        "vault_database_bytes": N_("Vault database"),
    }
)


@dataclass(frozen=True)
class Verified:
    at_ms: int
    ok: bool
    problems: list[str]
    scopes: int
    events: int


def health_page(request: Request) -> Response:
    console = console_of(request)
    stats = gather_stats(console.engine, console.paths).as_json()
    now_ms = int(time.time() * 1000)
    with console.engine.audit_rows(now_ms - HOURS * HOUR_MS, None) as rows:
        chart = hourly_chart(rows, now_ms)
    return render(
        request,
        "health.html",
        stats=stats,
        chart=chart,
        verified=request.app.state.last_verify,
        file_names=FILE_NAMES,
        notice=request.query_params.get("notice"),
        active="health",
    )


def health_verify(request: Request, form: FormData) -> Response:
    console = console_of(request)
    if not _verifying.acquire(blocking=False):
        return after_decision("/health", _("A verification is already running."))
    try:
        report = console.engine.verify(full=False)
    finally:
        _verifying.release()
    request.app.state.last_verify = Verified(
        int(time.time() * 1000),
        report.ok,
        [problem.line for problem in report.problems[:20]],
        report.scopes,
        report.events,
    )
    return after_decision("/health", _("Verified: no problems.") if report.ok else _("Verified: problems found."))
