"""`records list --valid-at INSTANT [--family REF]`: which records were true at a valid time (issue 20)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.table import Table

from engram_memory.contract.instants import format_instant, parse_instant
from engram_memory.contract.states import RecordState
from engram_memory.engine.ports.store import Scope
from engram_memory.host.cli.common import fail, note_cut_off, opened_engine, out, say
from engram_memory.host.cli.record_json import record_json


def list_valid_at(
    tenant: str | None,
    workspace: str | None,
    state: RecordState | None,
    valid_at: str | None,
    family: str | None,
    limit: int,
    home: Path | None,
    as_json: bool,
) -> None:
    if valid_at is None or tenant is None or workspace is None or state is not None:
        fail("--valid-at (and --family) need --tenant and --workspace, and go without --state")
    at_ms = parse_instant(valid_at)
    if at_ms is None:
        fail("--valid-at takes an instant such as 2026-08-16T12:34:56.789Z (UTC, milliseconds)")
    with opened_engine(home) as (engine, _paths):
        found = engine.records_valid_at(Scope(tenant, workspace), at_ms, family_ref=family, limit=limit + 1)
    if len(found) > limit:
        note_cut_off(limit, "records")
    items = [
        {
            **record_json(item.record),
            "valid_until": None if item.valid_until_ms is None else format_instant(item.valid_until_ms),
            "until_inclusive": item.until_inclusive,
        }
        for item in found[:limit]
    ]
    if as_json:
        sys.stdout.write(json.dumps(items) + "\n")
        return
    if not items:
        say(f"no records true at {valid_at}")
        return
    table = Table(box=None, pad_edge=False)
    table.add_column("record", no_wrap=True, min_width=len(items[0]["record_id"]))
    table.add_column("state", no_wrap=True)
    table.add_column("valid", overflow="fold")
    table.add_column("superseded by", overflow="fold")
    for item in items:
        table.add_row(
            item["record_id"],
            item["state"],
            f"{item['valid_from']} .. {item['valid_until'] or 'open'}",
            item["superseded_by"] or "-",
        )
    out.print(table, markup=False, highlight=False)
