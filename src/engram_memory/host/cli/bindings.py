"""`engram-memory bindings list` and `bindings renew`: what this home issued, and keeping a stdio agent's
binding file current.

Listed from the vault's record of issued bindings (their claims, never a token), newest first; a binding
with less than a fifth of its lifetime (and less than a day) left is marked expiring. `renew` replaces a
binding file with the same claims under a new token before its binding lapses; a server reading the file
(`serve --binding-file`) takes it at its next request.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from engram_memory.contract.errors import ContractError
from engram_memory.contract.instants import format_instant
from engram_memory.engine.ports.rows import IssuedBindingRow, RevocationRow
from engram_memory.host.binding_file import BindingFileError, read_token_file, write_token_file
from engram_memory.host.bindings import SIGNED_IN, BindingError, issued_row_of, renewal_due, renewed, verify_binding
from engram_memory.host.cli.common import HomeOption, JsonOption, fail, note_cut_off, opened_engine, say
from engram_memory.host.compose import current_user
from engram_memory.host.keys.files import KeyFileError, load_signing_key
from engram_memory.host.language.catalogue import _
from engram_memory.host.language.formats import when
from engram_memory.host.language.words import label
from engram_memory.host.settings import resolve_home


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
    bindings_app = typer.Typer(
        rich_markup_mode=None, help="The bindings this home issued: claims, grants, expiry, revocation."
    )
    app.add_typer(bindings_app, name="bindings")
    bindings_app.command("list")(bindings_list)
    bindings_app.command("renew")(bindings_renew)


def _status(issued: IssuedBindingRow, revocation: RevocationRow | None, now_ms: int) -> str:
    if revocation is not None:
        return "revoked"
    if now_ms >= issued.expires_at_ms:
        return "expired"
    return "expiring" if renewal_due(issued.issued_at_ms, issued.expires_at_ms, now_ms) else "active"


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
    every_token: Annotated[
        bool,
        typer.Option(
            "--every-token", help="Every access token sign-in issued, not only each grant's newest (one per refresh)."
        ),
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the bindings this home issued, newest first (never a token). Of the access tokens people's clients
    got by signing in, only each grant's newest is listed (engram-memory access grants lists the grants)."""
    with opened_engine(home) as (engine, _paths):
        try:
            found = engine.bindings(limit + 1, latest_only_for=None if every_token else SIGNED_IN)
        except ContractError as exc:
            fail(_("the store is unavailable ({code})").format(code=exc.code.value))
    now_ms = int(time.time() * 1000)
    items = [binding_json(issued, revocation, now_ms) for issued, revocation in found[:limit]]
    if len(found) > limit:
        note_cut_off(limit, _("bindings (newest first)"))
    if as_json:
        sys.stdout.write(json.dumps(items) + "\n")
        return
    if not items:
        say(_("no bindings issued (engram-memory bind issues one)"))
        return
    for (issued, revocation), item in zip(found[:limit], items, strict=True):
        say(f"{item['token_id']}  {label(item['status'])}  {item['tenant']}/{item['workspace']}  {item['principal']}")
        grants = ", ".join(tool.removeprefix("engram_memory_") for tool in item["grants"]) or _("no tools")
        say(
            _("    agent {agent_id}, session {session}, purpose {purpose_ref}; {grants}").format(
                agent_id=item["agent_id"], session=item["session"], purpose_ref=item["purpose_ref"], grants=grants
            )
        )
        ended = (
            _("; revoked {at} by {by}").format(at=when(revocation.revoked_at_ms), by=revocation.revoked_by)
            if revocation is not None
            else ""
        )
        say(
            _("    issued {issued_at} by {issued_by}; expires {expires_at}{ended}").format(
                issued_at=when(issued.issued_at_ms),
                issued_by=issued.issued_by,
                expires_at=when(issued.expires_at_ms),
                ended=ended,
            )
        )


def bindings_renew(
    binding_file: Annotated[Path, typer.Argument(help="The file a stdio server reads (serve --binding-file).")],
    force: Annotated[bool, typer.Option("--force", help="Renew even when the binding is not due.")] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Replace a binding file's token with the same claims and lifetime, once its binding is due (a fifth of its
    lifetime, at most a day, left) or expired; a revoked binding is never renewed. Run it from cron or a timer."""
    path = binding_file.expanduser()
    paths = resolve_home(home)
    try:
        signing_key = load_signing_key(paths)
        previous = verify_binding(signing_key.public_key(), read_token_file(path))
    except (BindingFileError, KeyFileError) as exc:
        fail(str(exc))
    except BindingError:
        fail(
            _(
                "the binding in {path} does not verify against this host's key: only this home's bindings are renewed"
            ).format(path=path)
        )
    now_ms = int(time.time() * 1000)
    with opened_engine(home) as (engine, _paths):
        try:
            if engine.is_revoked(previous.token_id):
                fail(
                    _("binding {token_id} is revoked: it is not renewed (engram-memory bind issues a new one)").format(
                        token_id=previous.token_id
                    )
                )
            due = renewal_due(previous.issued_at_ms, previous.expires_at_ms, now_ms)
            if not (due or force):
                _said_renewal(previous.token_id, None, previous.expires_at_ms, as_json)
                return
            issued = renewed(signing_key, previous, now_s=now_ms // 1000)
            engine.record_binding(issued_row_of(issued.binding, issued_by=current_user()))
        except ContractError as exc:
            fail(_("the store is unavailable ({code})").format(code=exc.code.value))
    try:
        write_token_file(path, issued.token)
    except BindingFileError as exc:
        fail(str(exc))
    _said_renewal(previous.token_id, issued.binding.token_id, issued.binding.expires_at_ms, as_json)


def _said_renewal(previous: str, token_id: str | None, expires_at_ms: int, as_json: bool) -> None:
    expires_at = format_instant(expires_at_ms)
    if as_json:
        answer = {"renewed": token_id is not None, "previous": previous, "token_id": token_id or previous}
        sys.stdout.write(json.dumps({**answer, "expires_at": expires_at}) + "\n")
    elif token_id is None:
        say(_("not due: binding {previous} expires {expires_at}").format(previous=previous, expires_at=expires_at))
    else:
        say(
            _("renewed: binding {previous} -> {token_id}, expires {expires_at}").format(
                previous=previous, token_id=token_id, expires_at=expires_at
            )
        )
