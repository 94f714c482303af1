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
from engram_memory.host.operations_stats import StoreStats, gather_stats
from engram_memory.host.terminal import json_text

InstantOption = Annotated[str | None, typer.Option(help=f"{INSTANT_FORMS[0].upper()}{INSTANT_FORMS[1:]}.")]


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
    app.command("verify")(verify)
    app.command("stats")(stats)
    app.command("erase")(erase)
    app.command("revoke")(revoke)
    audit_app = typer.Typer(help="The audit log: one entry per agent call (ids, outcome codes, digests).")
    app.add_typer(audit_app, name="audit")
    audit_app.command("export")(audit_export)


@contextmanager
def _store_faults() -> Iterator[None]:
    try:
        yield
    except ContractError as exc:
        fail(f"{exc.code.value}: the store could not be read; run engram-memory verify")


# -- verify ---------------------------------------------------------------------------------------


def verify(
    quick: Annotated[
        bool, typer.Option("--quick", help="Only the start-up check: chain, heads, fold, body presence.")
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Walk every scope's journal, heads, tables, bodies and index; exit 1 naming what is wrong."""
    with opened_engine(home) as (engine, _):
        if as_json or not err.is_terminal:
            report = engine.verify(full=not quick)
        else:
            with err.status("verifying the store"):
                report = engine.verify(full=not quick)
    if as_json:
        sys.stdout.write(json_text(problems_json(report)) + "\n")
    else:
        _print_report(report)
    first = report.first
    if first is not None:
        more = len(report.problems) - 1
        fail(first.line + (f" (and {more} more)" if more else ""))


def _print_report(report: VerifyReport) -> None:
    mode = "full" if report.full else "quick"
    opened = f", {report.opened} opened" if report.full else ""
    indexed = f", {report.indexed} index rows, {report.embedded} vectors" if report.full else ""
    say(
        f"{mode} check of {report.scopes} scope(s): {report.events} journal events, "
        f"{report.bodies} sealed bodies{opened}{indexed}"
    )
    if report.unembedded:
        say(f"note: {report.unembedded} current memories wait for a vector; the next search of their scope embeds them")
    for warning in report.warnings:
        say(f"warning: {warning}")
    if report.ok:
        say("no problems found")
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("code", no_wrap=True)
    table.add_column("problem", overflow="fold")
    for problem in report.problems:
        table.add_row(problem.code.value, problem.detail)
    out.print(table)


# -- erase ----------------------------------------------------------------------------------------


def erase(home: HomeOption = None) -> None:
    """Push forgotten text out of the store's files now (PostgreSQL rewrites its index tables; SQLite
    already did at each forget); exit 1 when an open transaction held it back."""
    with opened_engine(home) as (engine, _), _store_faults():
        if err.is_terminal:
            with err.status("erasing"):
                done = engine.erase_now()
        else:
            done = engine.erase_now()
    if not done:
        fail("an older transaction still sees erased rows (or this role may not VACUUM); run erase again")
    say("erased: no forgotten row is left in the store's live files")


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
    totals = Table(title="store", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title_justify="left")
    totals.add_column("what")
    totals.add_column("value", justify="right")
    index = data["index"]
    rows = [
        ("scopes", str(data["scopes"])),
        ("journal events", str(data["journal_events"])),
        ("review queue", str(data["review_queue"])),
        ("open confirmation requests", str(data["open_confirmations"])),
        ("revoked bindings", str(data["revoked_bindings"])),
        ("vault data keys", str(data["vault"]["keys"])),
        ("vault destroyed keys", str(data["vault"]["destroyed_keys"])),
        *_size_rows(data["files"]),
        ("index", f"{index['indexed']} indexed / {index['accepted_current']} accepted_current"),
        ("index health", "ok" if index["healthy"] else "STALE: run engram-memory verify"),
    ]
    for name, value in rows:
        totals.add_row(name, value)
    out.print(totals)
    states = Table(title="states", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title_justify="left")
    states.add_column("kind")
    states.add_column("state")
    states.add_column("count", justify="right")
    for kind in ("candidates", "records"):
        for state, count in data[kind].items():
            states.add_row(kind, state, str(count))
    out.print(states)
    if not data["per_scope"]:
        return
    scopes = Table(title="per scope", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title_justify="left")
    for column in ("scope", "events", "pending", "review", "current", "records", "indexed"):
        scopes.add_column(column, justify="left" if column == "scope" else "right", overflow="fold")
    for item in data["per_scope"]:
        scopes.add_row(
            f"{item['tenant']}/{item['workspace']}",
            str(item["journal_events"]),
            str(item["candidates"].get("pending", 0)),
            str(item["review_queue"]),
            str(item["records"].get("accepted_current", 0)),
            str(sum(item["records"].values())),
            str(item["indexed"]),
        )
    out.print(scopes)


def _size_rows(files: dict[str, int]) -> list[tuple[str, str]]:
    """A SQLite file is reported with its WAL; a PostgreSQL database (store or vault) as the server sizes it."""
    rows = []
    for part in ("store", "vault"):
        if f"{part}_database_bytes" in files:
            rows.append((f"{part} database size", _size(files[f"{part}_database_bytes"])))
        else:
            rows.append((f"{part} size (db + wal)", _size(files[f"{part}_bytes"] + files[f"{part}_wal_bytes"])))
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


def _write_audit(engine: Engine, since_ms: int | None, until_ms: int | None, sink: IO[str]) -> int:
    written = 0
    with engine.audit_rows(since_ms, until_ms) as rows:
        for row in rows:
            sink.write(audit_line(row) + "\n")
            written += 1
    return written


def audit_export(
    since: InstantOption = None,
    until: InstantOption = None,
    output: Annotated[Path | None, typer.Option("--output", help="Write to FILE (0600) instead of stdout.")] = None,
    home: HomeOption = None,
) -> None:
    """The audit log as JSON lines, in audit order; --since is inclusive, --until exclusive."""
    since_ms, until_ms = host_instant("--since", since), host_instant("--until", until)
    if since_ms is not None and until_ms is not None and until_ms <= since_ms:
        fail("--until must be later than --since")
    with opened_engine(home) as (engine, _), _store_faults():
        if output is None:
            try:
                _write_audit(engine, since_ms, until_ms, sys.stdout)
                sys.stdout.flush()
            except BrokenPipeError:
                # The reader stopped early (`| head`): end quietly, and keep the interpreter from
                # complaining about the closed pipe at exit.
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return
        target = output.expanduser().absolute()
        if target.is_dir():
            fail(f"{target} is a folder")
        try:
            # Written beside the target and renamed into place: a failed export never leaves half a file.
            handle, scratch = tempfile.mkstemp(prefix=".audit-", dir=target.parent)
            with os.fdopen(handle, "w", encoding="utf-8") as sink:
                written = _write_audit(engine, since_ms, until_ms, sink)
            Path(scratch).replace(target)
        except OSError as exc:
            fail(f"cannot write {target}: {exc.strerror or 'error'}")
    say(f"exported {written} audit entries to {target}")


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
        fail("a token id looks like bind_ followed by 16 letters a-z and digits 2-7 (see `bindings list`)")
    with opened_engine(home) as (engine, _), _store_faults():
        try:
            revocation = engine.revoke_token(token_id, revoked_by=current_user(), unlisted=unlisted)
        except UnknownBinding:
            fail(
                f"this home issued no binding {token_id} (see `engram-memory bindings list`); a token signed"
                " before homes listed their bindings is revoked with --unlisted"
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
        say(f"{token_id} was already revoked at {format_instant(stored.revoked_at_ms)} by {stored.revoked_by}")
    else:
        say(f"revoked {token_id}: its calls now answer AUTHORIZATION_REVOKED")
