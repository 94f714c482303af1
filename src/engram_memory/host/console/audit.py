"""The audit log: every agent call's who, what and outcome, filtered by time, tool, outcome and binding.

Read as a stream (the store's cursor) and filtered here, keeping only the newest matches: the log of a
busy home can be millions of rows. Audit rows hold ids and digests only, never memory text.
"""

from __future__ import annotations

from collections import deque
from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import Response

from engram_memory.contract.instants import parse_instant
from engram_memory.contract.tools import Tool
from engram_memory.engine.ports.store import AuditRow
from engram_memory.host.console.context import console_of
from engram_memory.host.console.views import render
from engram_memory.host.language.catalogue import N_, _
from engram_memory.host.reads import CALLERS, caller_matches

SHOWN = 200
FILTERS = ("since", "until", "tool", "outcome", "token_id", "caller")
# Whose calls the log shows: the agents' by default, so the host's own reads (export, search, record
# pages) do not bury them.
CALLER_NAMES = (("agents", N_("agents")), ("host", N_("the host's own reads")), ("all", N_("everyone")))


def instant_of(text: str) -> int | None:
    """A date or ISO instant typed in a filter (a time without a zone is UTC); None when unreadable."""
    canonical = parse_instant(text)
    if canonical is not None:
        return canonical
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _matches(row: AuditRow, tool: str | None, outcome: str | None, token_id: str | None, caller: str) -> bool:
    return (
        caller_matches(row.token_id, caller)
        and (tool is None or row.tool == tool)
        and (outcome is None or row.outcome == outcome or (outcome == "refused" and row.outcome != "ok"))
        and (token_id is None or row.token_id == token_id)
    )


def audit_page(request: Request) -> Response:
    chosen = {name: request.query_params.get(name, "").strip()[:128] for name in FILTERS}
    if chosen["caller"] not in CALLERS:
        chosen["caller"] = "agents"
    since = instant_of(chosen["since"]) if chosen["since"] else None
    until = instant_of(chosen["until"]) if chosen["until"] else None
    problems = [name for name in ("since", "until") if chosen[name] and instant_of(chosen[name]) is None]
    newest: deque[AuditRow] = deque(maxlen=SHOWN)
    matched = 0
    if not problems:
        with console_of(request).engine.audit_rows(since, until) as rows:
            for row in rows:
                if _matches(
                    row, chosen["tool"] or None, chosen["outcome"] or None, chosen["token_id"] or None, chosen["caller"]
                ):
                    newest.append(row)
                    matched += 1
    notice = None
    if problems:
        notice = _("Not a date or ISO instant: {fields} (for example 2026-01-31 or 2026-01-31T09:00Z).").format(
            fields=", ".join(problems)
        )
    return render(
        request,
        "audit.html",
        rows=list(reversed(newest)),
        matched=matched,
        chosen=chosen,
        tools=[tool.value for tool in Tool],
        callers=CALLER_NAMES,
        notice=notice,
        active="audit",
    )
