"""Host commands for verify, stats, erase, audit export and revoke (issue 3, items 6, 8, 9; issue 17).

None of them shows memory text: verification names ids and cursors, statistics are counts and sizes,
the audit export carries ids, outcome codes and digests, and a revocation is a token id.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Annotated

import typer
from rich import box
from rich.table import Table

from engram_memory.contract.errors import ContractError
from engram_memory.contract.instants import format_instant
from engram_memory.engine.engine import Engine
from engram_memory.engine.host_front import UnknownBinding
from engram_memory.engine.ports.store import AuditRow
from engram_memory.engine.verify import VerifyReport, problems_json
from engram_memory.host.bindings import TOKEN_ID_RE
from engram_memory.host.cli.common import (
    INSTANT_FORMS,
    HomeOption,
    JsonOption,
    err,
    fail,
    host_instant,
    opened_engine,
    out,
    say,
)
from engram_memory.host.compose import current_user
from engram_memory.host.language.catalogue import _
from engram_memory.host.language.formats import number, when
from engram_memory.host.language.words import label
from engram_memory.host.operations_stats import StoreStats, gather_stats
from engram_memory.host.reads import CALLERS, caller_matches
from engram_memory.host.terminal import json_text

InstantOption = Annotated[str | None, typer.Option(help=f"{INSTANT_FORMS[0].upper()}{INSTANT_FORMS[1:]}.")]


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
    app.command("verify")(verify)
    app.command("stats")(stats)
    app.command("erase")(erase)
    app.command("revoke")(revoke)
    audit_app = typer.Typer(
        rich_markup_mode=None, help="The audit log: one entry per agent call (ids, outcome codes, digests)."
    )
    app.add_typer(audit_app, name="audit")
    audit_app.command("export")(audit_export)


@contextmanager
def _store_faults() -> Iterator[None]:
    try:
        yield
    except ContractError as exc:
        fail(_("{code}: the store could not be read; run engram-memory verify").format(code=exc.code.value))


# -- verify ---------------------------------------------------------------------------------------


def verify(
    quick: Annotated[
        bool, typer.Option("--quick", help="Only the start-up check: chain, heads, fold, body presence.")
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Walk every scope's journal, heads, tables, bodies and index; exit 1 naming what is wrong."""
    with opened_engine(home) as (engine, _paths):
        if as_json or not err.is_terminal:
            report = engine.verify(full=not quick)
        else:
            with err.status(_("verifying the store")):
                report = engine.verify(full=not quick)
    if as_json:
        sys.stdout.write(json_text(problems_json(report)) + "\n")
    else:
        _print_report(report)
    first = report.first
    if first is not None:
        more = len(report.problems) - 1
        fail(first.line + (" " + _("(and {count} more)").format(count=more) if more else ""))


def _print_report(report: VerifyReport) -> None:
    counts = {
        "scopes": number(report.scopes),
        "events": number(report.events),
        "bodies": number(report.bodies),
        "opened": number(report.opened),
        "indexed": number(report.indexed),
        "embedded": number(report.embedded),
    }
    if report.full:
        said = _(
            "full check of {scopes} scope(s): {events} journal events, {bodies} sealed bodies, {opened} opened, "
            "{indexed} index rows, {embedded} vectors"
        )
    else:
        said = _("quick check of {scopes} scope(s): {events} journal events, {bodies} sealed bodies")
    say(said.format(**counts))
    if report.unembedded:
        say(
            _(
                "note: {unembedded} current memories wait for a vector; the next search of their scope embeds them"
            ).format(unembedded=report.unembedded)
        )
    for warning in report.warnings:
        say(_("warning: {warning}").format(warning=warning))
    if report.ok:
        say(_("no problems found"))
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column(_("code"), no_wrap=True)
    table.add_column(_("problem"), overflow="fold")
    for problem in report.problems:
        table.add_row(problem.code.value, problem.detail)
    out.print(table)


# -- erase ----------------------------------------------------------------------------------------


def erase(home: HomeOption = None) -> None:
    """Push forgotten text out of the store's files now (PostgreSQL rewrites its index tables; SQLite
    already did at each forget); exit 1 when an open transaction held it back."""
    with opened_engine(home) as (engine, _paths), _store_faults():
        if err.is_terminal:
            with err.status(_("erasing")):
                done = engine.erase_now()
        else:
            done = engine.erase_now()
    if not done:
        fail(_("an older transaction still sees erased rows (or this role may not VACUUM); run erase again"))
    say(_("erased: no forgotten row is left in the store's live files"))


# -- stats ----------------------------------------------------------------------------------------


def stats(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Counts per state and scope, sizes of the store and vault, index health, revoked bindings."""
    with opened_engine(home) as (engine, paths), _store_faults():
        gathered = gather_stats(engine, paths)
    if as_json:
        sys.stdout.write(json_text(gathered.as_json()) + "\n")
        return
    _print_stats(gathered)


def _print_stats(gathered: StoreStats) -> None:
    data = gathered.as_json()
    totals = Table(title=_("store"), box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title_justify="left")
    totals.add_column(_("what"))
    totals.add_column(_("value"), justify="right")
    index = data["index"]
    rows = [
        (_("scopes"), number(data["scopes"])),
        (_("journal events"), number(data["journal_events"])),
        (_("waiting for a person's review"), number(data["review_queue"])),
        (_("open confirmation requests"), number(data["open_confirmations"])),
        (_("revoked bindings"), number(data["revoked_bindings"])),
        (_("vault data keys"), number(data["vault"]["keys"])),
        (_("vault destroyed keys"), number(data["vault"]["destroyed_keys"])),
        *_size_rows(data["files"]),
        (
            _("index"),
            _("{indexed} indexed of {current} current").format(
                indexed=number(index["indexed"]), current=number(index["accepted_current"])
            ),
        ),
        (_("index health"), _("ok") if index["healthy"] else _("STALE: run engram-memory verify")),
    ]
    for name, value in rows:
        totals.add_row(name, value)
    out.print(totals)
    states = Table(title=_("states"), box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title_justify="left")
    states.add_column(_("kind"))
    states.add_column(_("state"))
    states.add_column(_("count"), justify="right")
    for kind, kind_name in (("candidates", _("candidates")), ("records", _("records"))):
        for state, count in data[kind].items():
            states.add_row(kind_name, label(state), number(count))
    out.print(states)
    say(pending_note())
    if not data["per_scope"]:
        return
    scopes = Table(title=_("per scope"), box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title_justify="left")
    columns = (
        _("scope"),
        _("events"),
        _("pending"),
        _("to review"),
        _("current"),
        _("records"),
        _("indexed"),
    )
    for position, column in enumerate(columns):
        # The scope is copied into other commands: it never wraps; the counts fold instead.
        scopes.add_column(column, justify="left" if position == 0 else "right", overflow="fold", no_wrap=position == 0)
    for item in data["per_scope"]:
        scopes.add_row(
            f"{item['tenant']}/{item['workspace']}",
            number(item["journal_events"]),
            number(item["candidates"].get("pending", 0)),
            number(item["review_queue"]),
            number(item["records"].get("accepted_current", 0)),
            number(sum(item["records"].values())),
            number(item["indexed"]),
        )
    out.print(scopes)


def pending_note() -> str:
    """Why `pending` and the review queue differ, said beside them (they are easy to read as one)."""
    return _(
        "pending: captured and not yet decided, whether or not an agent has asked to admit it; waiting for "
        "review: only those the policy left for a person (engram-memory review list)"
    )


def _size_rows(files: dict[str, int]) -> list[tuple[str, str]]:
    """A SQLite file is reported with its WAL; a PostgreSQL database (store or vault) as the server sizes it."""
    rows = []
    for part, database, file in (
        ("store", _("store database size"), _("store size (db + wal)")),
        ("vault", _("vault database size"), _("vault size (db + wal)")),
    ):
        if f"{part}_database_bytes" in files:
            rows.append((database, _size(files[f"{part}_database_bytes"])))
        else:
            rows.append((file, _size(files[f"{part}_bytes"] + files[f"{part}_wal_bytes"])))
    return rows


def _size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


# -- audit export ---------------------------------------------------------------------------------


def audit_line(row: AuditRow) -> str:
    """One call's entry: who (binding ids), what (tool, outcome code), and digests; never memory text."""
    entry = {
        "auditId": row.audit_id,
        "at": format_instant(row.at_ms),
        "tool": row.tool,
        "outcome": row.outcome,
        "tenant": row.tenant,
        "workspace": row.workspace,
        "principal": row.principal,
        "agent_id": row.agent_id,
        "session": row.session,
        "token_id": row.token_id,
        "request_digest": row.request_digest,
        "response_digest": row.response_digest,
    }
    return json_text(entry, separators=(",", ":"))


def _write_audit(engine: Engine, since_ms: int | None, until_ms: int | None, caller: str, sink: IO[str]) -> int:
    written = 0
    with engine.audit_rows(since_ms, until_ms) as rows:
        for row in rows:
            if caller_matches(row.token_id, caller):
                sink.write(audit_line(row) + "\n")
                written += 1
    return written


def audit_export(
    since: InstantOption = None,
    until: InstantOption = None,
    output: Annotated[Path | None, typer.Option("--output", help="Write to FILE (0600) instead of stdout.")] = None,
    caller: Annotated[
        str,
        typer.Option(
            "--caller",
            metavar="WHOSE",
            help="agents (calls under a binding), host (the host's own reads: export, search, record pages) or all.",
        ),
    ] = "all",
    home: HomeOption = None,
) -> None:
    """The audit log as JSON lines, in audit order; --since is inclusive, --until exclusive."""
    if caller not in CALLERS:
        fail(_("--caller takes one of {choices}").format(choices=", ".join(CALLERS)))
    since_ms, until_ms = host_instant("--since", since), host_instant("--until", until)
    if since_ms is not None and until_ms is not None and until_ms <= since_ms:
        fail(_("--until must be later than --since"))
    with opened_engine(home) as (engine, _paths), _store_faults():
        if output is None:
            try:
                _write_audit(engine, since_ms, until_ms, caller, sys.stdout)
                sys.stdout.flush()
            except BrokenPipeError:
                # The reader stopped early (`| head`): end quietly, and keep the interpreter from
                # complaining about the closed pipe at exit.
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return
        target = output.expanduser().absolute()
        if target.is_dir():
            fail(_("{target} is a folder").format(target=target))
        try:
            # Written beside the target and renamed into place: a failed export never leaves half a file.
            handle, scratch = tempfile.mkstemp(prefix=".audit-", dir=target.parent)
            with os.fdopen(handle, "w", encoding="utf-8") as sink:
                written = _write_audit(engine, since_ms, until_ms, caller, sink)
            Path(scratch).replace(target)
        except OSError as exc:
            fail(_("cannot write {target}: {reason}").format(target=target, reason=exc.strerror or type(exc).__name__))
    say(_("exported {written} audit entries to {target}").format(written=written, target=target))


# -- revoke ---------------------------------------------------------------------------------------


def revoke(
    token_id: Annotated[str, typer.Argument(metavar="TOKEN_ID", help="The token id `bind` printed.")],
    unlisted: Annotated[
        bool,
        typer.Option("--unlisted", help="Revoke an id `bindings list` does not show (a token from an older version)."),
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke a binding: every later call with it answers AUTHORIZATION_REVOKED, running servers included."""
    if TOKEN_ID_RE.fullmatch(token_id) is None:
        fail(_("a token id looks like bind_ followed by 16 letters a-z and digits 2-7 (see `bindings list`)"))
    with opened_engine(home) as (engine, _paths), _store_faults():
        try:
            revocation = engine.revoke_token(token_id, revoked_by=current_user(), unlisted=unlisted)
        except UnknownBinding:
            fail(
                _(
                    "this home issued no binding {token_id} (see `engram-memory bindings list`); a token signed "
                    "before homes listed their bindings is revoked with --unlisted"
                ).format(token_id=token_id)
            )
    stored, already = revocation.stored, revocation.already
    if as_json:
        payload = {
            "token_id": stored.token_id,
            "revoked_at": format_instant(stored.revoked_at_ms),
            "revoked_by": stored.revoked_by,
            "already_revoked": already,
        }
        sys.stdout.write(json.dumps(payload) + "\n")
    elif already:
        say(
            _("{token_id} was already revoked at {at} by {revoked_by}").format(
                token_id=token_id, at=when(stored.revoked_at_ms), revoked_by=stored.revoked_by
            )
        )
    else:
        say(_("revoked {token_id}: its calls now answer AUTHORIZATION_REVOKED").format(token_id=token_id))
