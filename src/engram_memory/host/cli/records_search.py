"""`engram-memory records search`: a workspace's current memories found as its agents would find them.

An audited host read through the agents' own search (host/reads.py): it shows memory text.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from engram_memory.host.cli.common import (
    HomeOption,
    JsonOption,
    OptionalTenant,
    OptionalWorkspace,
    fail,
    only_scope,
    opened_engine,
    say,
)
from engram_memory.host.compose import current_user
from engram_memory.host.language.catalogue import _
from engram_memory.host.reads import HostReadRefused, search_records


def search_command(
    query: Annotated[str, typer.Argument(metavar="QUERY", help="What to look for, as an agent would ask.")],
    tenant: OptionalTenant = None,
    workspace: OptionalWorkspace = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=50, help="At most this many, best first.")] = 10,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Search a workspace's current memories as its agents would (an audited host read; shows text)."""
    with opened_engine(home) as (engine, _paths):
        tenant, workspace = only_scope(engine, tenant, workspace)
        try:
            found = search_records(engine, tenant, workspace, query, limit=limit, read_by=current_user())
        except HostReadRefused as refused:
            fail(_("the search was refused: {refused}").format(refused=refused))
    items = [_hit_json(packet) for packet in found]
    if as_json:
        sys.stdout.write(json.dumps(items, ensure_ascii=False) + "\n")
        return
    if not items:
        say(_("no current memory matches"))
        return
    for number, item in enumerate(items, start=1):
        say(f"{number:>2}. {item['record_id']}  {item['text']}")


def _hit_json(packet: dict[str, Any]) -> dict[str, Any]:
    record = packet["record"]
    primary = next(
        (c for c in record.get("components", []) if c.get("component_id") == record.get("primary_component_id")),
        None,
    )
    return {
        "record_id": record["record_id"],
        "text": "" if primary is None else primary.get("text", ""),
        "citations": record.get("citations", []),
    }
