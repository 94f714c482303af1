"""The host reading what its agents remember: through the agents' own search and get, under a binding the
host makes for itself, so a host read sees exactly what an agent of the scope would, and is audited as
one (principal `host:<user>`, token id `host-read`).

The binding is made here, never signed: it exists only inside this process, for one command.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from engram_memory.contract.binding import Binding
from engram_memory.contract.payloads import primary_text
from engram_memory.contract.states import RecordState
from engram_memory.contract.tools import Tool
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.rows import RecordRow

HOST_READ_TOKEN_ID = "host-read"  # noqa: S105 - an id in the audit log, not a secret
HOST_READ_AGENT = "engram-memory-cli"
HOST_READ_PURPOSE = "purpose:host-read"


# Whose calls an audit view shows: the agents' (under a binding), the host's own reads, or every one.
CALLERS = ("agents", "host", "all")


def caller_matches(token_id: str | None, caller: str) -> bool:
    if caller == "agents":
        return token_id != HOST_READ_TOKEN_ID
    if caller == "host":
        return token_id == HOST_READ_TOKEN_ID
    return True


class HostReadRefused(Exception):
    """The read was answered with an error code (the record is gone, the scope is stale…): one line."""


def host_binding(
    tenant: str,
    workspace: str,
    *,
    principal: str,
    tools: frozenset[Tool] = frozenset({Tool.SEARCH, Tool.GET}),
    purpose_ref: str = HOST_READ_PURPOSE,
    token_id: str = HOST_READ_TOKEN_ID,
    agent_id: str = HOST_READ_AGENT,
    lifetime_ms: int = 600_000,
) -> Binding:
    """A binding the host makes for one of its own commands (never signed, never leaves the process)."""
    now_ms = int(time.time() * 1000)
    return Binding(
        token_id=token_id,
        tenant=tenant,
        workspace=workspace,
        principal=principal,
        agent_id=agent_id,
        session="cli",
        purpose_ref=purpose_ref,
        grants=frozenset(tool.value for tool in tools),
        confirm_mutations=False,
        issued_at_ms=now_ms,
        expires_at_ms=now_ms + lifetime_ms,
    )


def _value(engine: Engine, binding: Binding, tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    envelope = engine.handle(binding, tool.value, {**arguments, "purpose_ref": HOST_READ_PURPOSE})
    if not envelope["ok"]:
        raise HostReadRefused(str(envelope["error"]["code"]))
    value: dict[str, Any] = envelope["output"]["value"]
    return value


def read_record(engine: Engine, tenant: str, workspace: str, record_id: str, *, read_by: str) -> dict[str, Any]:
    """The record as `get` gives it (text, citations, provenance). Raises HostReadRefused."""
    record: dict[str, Any] = _value(
        engine, host_binding(tenant, workspace, principal=read_by), Tool.GET, {"record_id": record_id}
    )["record"]
    return record


def search_records(
    engine: Engine, tenant: str, workspace: str, query: str, *, limit: int, read_by: str
) -> list[dict[str, Any]]:
    """The packets `search` gives for the query in the scope, best first. Raises HostReadRefused."""
    value = _value(
        engine, host_binding(tenant, workspace, principal=read_by), Tool.SEARCH, {"query": query, "limit": limit}
    )
    records: list[dict[str, Any]] = value["records"]
    return records


PREVIEW_CHARS = 80
CUT_MARK = "…"


def preview(record: dict[str, Any], width: int = PREVIEW_CHARS) -> str:
    """A record's primary text on one line, cut at `width` characters and marked where it was cut."""
    text = " ".join(primary_text(record).split())
    return text if len(text) <= width else text[: width - 1].rstrip() + CUT_MARK


def previews(engine: Engine, rows: Iterable[RecordRow], *, read_by: str, width: int = PREVIEW_CHARS) -> dict[str, str]:
    """The previews of the current records among `rows`, each an audited host read; a record that cannot
    be read (it changed state meanwhile) has none."""
    shown: dict[str, str] = {}
    for row in rows:
        if row.state != RecordState.ACCEPTED_CURRENT.value:
            continue
        try:
            record = read_record(engine, row.scope.tenant, row.scope.workspace, row.record_id, read_by=read_by)
        except HostReadRefused:
            continue
        shown[row.record_id] = preview(record, width)
    return shown
