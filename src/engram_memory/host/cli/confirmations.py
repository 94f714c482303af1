"""Host commands `confirmations list|approve|deny`: the human gate for withdraw and forget."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from engram_memory.contract.errors import ContractError
from engram_memory.contract.instants import format_instant
from engram_memory.engine.lifecycle.gate import APPROVAL_TTL_MAX_MS, ConfirmationError
from engram_memory.engine.ports.store import ConfirmationRow
from engram_memory.host.cli.common import HomeOption, JsonOption, fail, note_cut_off, out, say
from engram_memory.host.compose import (
    HomeError,
    current_user,
    open_engine,
)
from engram_memory.host.keys.files import KeyFileError
from engram_memory.host.language.catalogue import _
from engram_memory.host.language.formats import when
from engram_memory.host.language.words import label
from engram_memory.host.language.words import refusal as refusal_words
from engram_memory.host.settings import resolve_home
from engram_memory.host.terminal import json_text


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
    group = typer.Typer(
        rich_markup_mode=None, help="The human gate for withdraw and forget (and gated capture/admission)."
    )
    app.add_typer(group, name="confirmations")
    group.command("list")(confirmations_list)
    group.command("approve")(confirmations_approve)
    group.command("deny")(confirmations_deny)


def _confirmation_json(row: ConfirmationRow, status: str) -> dict[str, Any]:
    return {
        "id": row.confirmation_id,
        "status": status,
        "tool": row.tool,
        "target": row.target,
        "tenant": row.scope.tenant,
        "workspace": row.scope.workspace,
        "principal": row.actor.principal,
        "agent_id": row.actor.agent_id,
        "session": row.actor.session,
        "reason_ref": row.reason_ref,
        "summary": dict(row.summary),
        "operation_digest": row.operation_digest,
        "requested_at": format_instant(row.requested_at_ms),
        "decided_at": None if row.decided_at_ms is None else format_instant(row.decided_at_ms),
        "decided_by": row.decided_by,
        "approval_expires_at": None
        if row.approval_expires_at_ms is None
        else format_instant(row.approval_expires_at_ms),
    }


def confirmations_list(
    include_all: Annotated[bool, typer.Option("--all", help="Include decided, consumed and expired ones.")] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many, in the order listed.")] = 1000,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """List confirmation requests waiting for a human (or all of them)."""
    try:
        with open_engine(resolve_home(home)) as engine:
            rows = engine.confirmations(include_decided=include_all)
    except (HomeError, KeyFileError) as exc:
        fail(str(exc))
    except ContractError:
        fail(_("the store is unavailable"))
    items = [_confirmation_json(row, status) for row, status in rows[:limit]]
    if len(rows) > limit:
        note_cut_off(limit, _("confirmation requests"))
    if as_json:
        sys.stdout.write(json.dumps(items) + "\n")
        return
    if not items:
        out.print(_("no confirmation requests"))
        return
    for (row, _status), item in zip(rows[:limit], items, strict=True):
        # One block per request: readable at any terminal width, and the id is never cut short. Every
        # value an agent chose is shown inline-escaped (say), so none can forge or hide a line.
        say(f"{item['id']}  {label(item['status'])}  {item['tool']} {item['target']}")
        say(
            _("    asked by {principal} ({tenant}/{workspace}), agent {agent_id}, session {session}").format(
                principal=item["principal"],
                tenant=item["tenant"],
                workspace=item["workspace"],
                agent_id=item["agent_id"],
                session=item["session"],
            )
        )
        details = _("    reason {reason}; requested {requested_at}").format(
            reason=item["reason_ref"] or "-", requested_at=when(row.requested_at_ms)
        )
        if row.approval_expires_at_ms is not None:
            details += _("; approved until {until}").format(until=when(row.approval_expires_at_ms))
        say(details)
        say(f"    {json_text(item['summary'])}")


def _decide(confirmation_id: str, home: Path | None, approve_ttl_s: int | None, as_json: bool) -> None:
    try:
        with open_engine(resolve_home(home)) as engine:
            if approve_ttl_s is None:
                row = engine.deny_confirmation(confirmation_id, decided_by=current_user())
            else:
                row = engine.approve_confirmation(
                    confirmation_id, decided_by=current_user(), ttl_ms=approve_ttl_s * 1000
                )
    except ConfirmationError as refused:
        fail(refusal_words(refused))
    except (HomeError, KeyFileError) as exc:
        fail(str(exc))
    except ContractError:
        fail(_("the store is unavailable"))
    if as_json:
        sys.stdout.write(json.dumps(_confirmation_json(row, row.status)) + "\n")
    elif row.status == "approved" and row.approval_expires_at_ms is not None:
        say(
            _(
                "approved {confirmation_id} ({tool} {target}) until {until}: the agent may now repeat the "
                "identical call"
            ).format(
                confirmation_id=row.confirmation_id,
                tool=row.tool,
                target=row.target,
                until=when(row.approval_expires_at_ms),
            )
        )
    else:
        say(
            _("denied {confirmation_id} ({tool} {target})").format(
                confirmation_id=row.confirmation_id, tool=row.tool, target=row.target
            )
        )


def confirmations_approve(
    confirmation_id: Annotated[str, typer.Argument(metavar="ID")],
    ttl: Annotated[
        int, typer.Option("--ttl", help=f"Seconds the approval stays valid (1-{APPROVAL_TTL_MAX_MS // 1000}).")
    ] = APPROVAL_TTL_MAX_MS // 1000,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Approve one request: the agent's identical retry then executes, once."""
    _decide(confirmation_id, home, ttl, as_json)


def confirmations_deny(
    confirmation_id: Annotated[str, typer.Argument(metavar="ID")],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Deny one request: the operation is not asked again (the agent would need a new key)."""
    _decide(confirmation_id, home, None, as_json)
