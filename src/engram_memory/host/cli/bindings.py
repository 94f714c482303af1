"""`engram-memory bindings list`: what this home issued, to whom, with which tools, until when, revoked or not.

Listed from the vault's record of issued bindings (their claims, never a token), newest first.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated, Any

import typer

from engram_memory.contract.errors import ContractError
from engram_memory.contract.instants import format_instant
from engram_memory.engine.ports.rows import IssuedBindingRow, RevocationRow
from engram_memory.host.cli.common import HomeOption, JsonOption, fail, note_cut_off, opened_engine, say


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
    bindings_app = typer.Typer(help="The bindings this home issued: claims, grants, expiry, revocation.")
    app.add_typer(bindings_app, name="bindings")
    bindings_app.command("list")(bindings_list)


def _status(issued: IssuedBindingRow, revocation: RevocationRow | None, now_ms: int) -> str:
    if revocation is not None:
        return "revoked"
    return "expired" if now_ms >= issued.expires_at_ms else "active"


def binding_json(issued: IssuedBindingRow, revocation: RevocationRow | None, now_ms: int) -> dict[str, Any]:
    return {
        "token_id": issued.token_id,
        "status": _status(issued, revocation, now_ms),
        "tenant": issued.tenant,
        "workspace": issued.workspace,
        "principal": issued.principal,
        "agent_id": issued.agent_id,
        "session": issued.session,
        "purpose_ref": issued.purpose_ref,
        "grants": list(issued.grants),
        "confirm_mutations": issued.confirm_mutations,
        "trust_class": issued.trust_class,
        "issued_at": format_instant(issued.issued_at_ms),
        "issued_by": issued.issued_by,
        "expires_at": format_instant(issued.expires_at_ms),
        "revoked_at": None if revocation is None else format_instant(revocation.revoked_at_ms),
        "revoked_by": None if revocation is None else revocation.revoked_by,
    }


def bindings_list(
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many, newest first.")] = 1000,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the bindings this home issued, newest first (never a token)."""
    with opened_engine(home) as (engine, _paths):
        try:
            found = engine.bindings(limit + 1)
        except ContractError as exc:
            fail(f"the store is unavailable ({exc.code.value})")
    now_ms = int(time.time() * 1000)
    items = [binding_json(issued, revocation, now_ms) for issued, revocation in found[:limit]]
    if len(found) > limit:
        note_cut_off(limit, "bindings (newest first)")
    if as_json:
        sys.stdout.write(json.dumps(items) + "\n")
        return
    if not items:
        say("no bindings issued (engram-memory bind issues one)")
        return
    for item in items:
        say(f"{item['token_id']}  {item['status']}  {item['tenant']}/{item['workspace']}  {item['principal']}")
        grants = ", ".join(tool.removeprefix("engram_memory_") for tool in item["grants"]) or "no tools"
        say(f"    agent {item['agent_id']}, session {item['session']}, purpose {item['purpose_ref']}; {grants}")
        ended = f"; revoked {item['revoked_at']} by {item['revoked_by']}" if item["revoked_at"] else ""
        say(f"    issued {item['issued_at']} by {item['issued_by']}; expires {item['expires_at']}{ended}")
