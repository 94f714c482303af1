"""`records list --valid-at INSTANT [--family REF] [--known-at INSTANT]`: which records were true at a valid
time, as the store knows it now or knew it then (issue 20)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from engram_memory.contract.instants import parse_instant
from engram_memory.contract.states import RecordState
from engram_memory.engine.ports.store import Scope
from engram_memory.host.cli.common import fail, note_cut_off, opened_engine, out, say
from engram_memory.host.cli.record_json import instant, record_json
from engram_memory.host.language.catalogue import _


@dataclass(frozen=True)
class AsOf:
    """The as-of options of `records list`, as typed."""

    valid_at: str | None
    family: str | None
    known_at: str | None


def _instant_of(option: str, text: str) -> int:
    at_ms = parse_instant(text)
    if at_ms is None:
        fail(_("{option} takes an instant such as 2026-08-16T12:34:56.789Z (UTC, milliseconds)").format(option=option))
    return at_ms


def list_valid_at(
    tenant: str | None,
    workspace: str | None,
    state: RecordState | None,
    as_of: AsOf,
    limit: int,
    home: Path | None,
    as_json: bool,
) -> None:
    if as_of.valid_at is None or tenant is None or workspace is None or state is not None:
        fail(_("--valid-at (with --family, --known-at) needs --tenant and --workspace, and goes without --state"))
    at_ms = _instant_of("--valid-at", as_of.valid_at)
    known_ms = None if as_of.known_at is None else _instant_of("--known-at", as_of.known_at)
    with opened_engine(home) as (engine, _paths):
        found = engine.records_valid_at(
            Scope(tenant, workspace), at_ms, family_ref=as_of.family, limit=limit + 1, known_at_ms=known_ms
        )
    if len(found) > limit:
        note_cut_off(limit, _("records"))
    items = [
        {
            **record_json(item.record),
            "valid_until": instant(item.valid_until_ms),
            "until_inclusive": item.until_inclusive,
        }
        for item in found[:limit]
    ]
    if as_json:
        sys.stdout.write(json.dumps(items) + "\n")
        return
    if not items:
        say(_("no records true at {valid_at}").format(valid_at=as_of.valid_at))
        return
    table = Table(box=None, pad_edge=False)
    table.add_column(_("record"), no_wrap=True, min_width=len(items[0]["record_id"]))
    table.add_column(_("state"), no_wrap=True)
    table.add_column(_("valid"), overflow="fold")
    table.add_column(_("superseded by"), overflow="fold")
    for item in items:
        table.add_row(
            item["record_id"],
            item["state"],
            f"{item['valid_from']} .. {item['valid_until'] or _('open')}",
            item["superseded_by"] or "-",
        )
    out.print(table, markup=False, highlight=False)
