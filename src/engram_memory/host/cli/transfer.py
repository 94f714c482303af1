"""`engram-memory export` and `engram-memory import`: a workspace's memories out as JSON lines or Markdown,
and memories in (an export file, or a folder of Markdown notes) through the admission policy."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from engram_memory.contract.errors import ContractError
from engram_memory.host.cli.common import (
    HomeOption,
    JsonOption,
    OptionalTenant,
    OptionalWorkspace,
    err,
    fail,
    only_scope,
    opened_engine,
    say,
)
from engram_memory.host.compose import current_user
from engram_memory.host.language.catalogue import _
from engram_memory.host.reads import HostReadRefused
from engram_memory.host.transfer import (
    TransferError,
    export_lines,
    import_memories,
    markdown_of,
    memories_of_jsonl,
    memories_of_notes,
)

FORMATS = ("jsonl", "markdown")


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
    app.command("export")(export_command)
    app.command("import")(import_command)


def export_command(
    tenant: OptionalTenant = None,
    workspace: OptionalWorkspace = None,
    form: Annotated[str, typer.Option("--format", help="jsonl (re-importable) or markdown (for people).")] = "jsonl",
    output: Annotated[Path | None, typer.Option("--output", help="Write to FILE (0600) instead of stdout.")] = None,
    home: HomeOption = None,
) -> None:
    """Export a workspace's current memories with citations and provenance (audited host reads)."""
    if form not in FORMATS:
        fail(_("--format takes one of {formats}").format(formats=", ".join(FORMATS)))
    with opened_engine(home) as (engine, _paths):
        tenant, workspace = only_scope(engine, tenant, workspace)
        sink: IO[str] = sys.stdout
        try:
            if output is not None:
                output.touch(mode=0o600, exist_ok=True)
                sink = output.open("w", encoding="utf-8")
            count = 0
            if form == "markdown":
                sink.write(_("# Memories of {tenant}/{workspace}").format(tenant=tenant, workspace=workspace) + "\n\n")
            for line in export_lines(engine, tenant, workspace, read_by=current_user()):
                sink.write(
                    markdown_of(line) + "\n" if form == "markdown" else json.dumps(line, ensure_ascii=False) + "\n"
                )
                count += 1
        except (HostReadRefused, ContractError) as exc:
            fail(_("the export stopped: {reason}").format(reason=getattr(exc, "code", exc)))
        except OSError as exc:
            fail(_("cannot write {output}: {reason}").format(output=output, reason=exc.strerror or exc))
        finally:
            if sink is not sys.stdout:
                sink.close()
    if output is not None:
        say(
            _("exported {count} memories of {tenant}/{workspace} to {output}").format(
                count=count, tenant=tenant, workspace=workspace, output=output
            )
        )


def import_command(
    source: Annotated[
        Path, typer.Argument(metavar="FILE_OR_FOLDER", help="An export file, or a folder of *.md notes.")
    ],
    tenant: OptionalTenant = None,
    workspace: OptionalWorkspace = None,
    purpose: Annotated[
        str, typer.Option("--purpose", help="For Markdown notes: the purpose_ref their memories serve.")
    ] = "purpose:notes",
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import memories through capture and the admission policy; running it again changes nothing."""
    try:
        memories = list(memories_of_notes(source, purpose)) if source.is_dir() else list(memories_of_jsonl(source))
    except TransferError as exc:
        fail(str(exc))
    except (OSError, UnicodeDecodeError) as exc:
        fail(
            _("cannot read {source}: {reason}").format(
                source=source, reason=getattr(exc, "strerror", None) or type(exc).__name__
            )
        )
    started = time.monotonic()
    with _progress(len(memories), as_json) as progress, opened_engine(home) as (engine, _paths):
        tenant, workspace = only_scope(engine, tenant, workspace)
        try:
            report = import_memories(engine, tenant, workspace, memories, imported_by=current_user(), progress=progress)
        except TransferError as exc:
            fail(str(exc))
        except ContractError as exc:
            fail(_("the import stopped ({code}); running it again is safe").format(code=exc.code.value))
    # The engine is closed: every vector the import asked for is written, and counted in the time.
    seconds = time.monotonic() - started
    summary = {
        "memories": report.total,
        "seconds": round(seconds, 3),
        "memories_per_s": round(report.total / seconds, 1) if seconds > 0 else None,
        "accepted": report.accepted,
        "already_current": report.already,
        "pending_review": report.pending,
        "rejected": report.rejected,
        "refused": report.refused,
    }
    if as_json:
        sys.stdout.write(json.dumps(summary) + "\n")
        return
    refused = ", ".join(f"{n} {code}" for code, n in sorted(report.refused.items())) or _("none")
    say(
        _(
            "imported {total} memories into {tenant}/{workspace}: {accepted} accepted, {already} already current, "
            "{pending} waiting for review, {rejected} rejected; refused: {refused}; {seconds:.1f} s, {memories_per_s} "
            "memories/s"
        ).format(
            total=report.total,
            tenant=tenant,
            workspace=workspace,
            accepted=report.accepted,
            already=report.already,
            pending=report.pending,
            rejected=report.rejected,
            refused=refused,
            seconds=seconds,
            memories_per_s=summary["memories_per_s"],
        )
    )


@contextmanager
def _progress(total: int, as_json: bool) -> Iterator[Callable[[int], None]]:
    """At a terminal, a bar with the count and the rate, gone when done; elsewhere nothing (through a pipe
    stderr keeps only the one-line reasons of failures)."""
    if as_json or not err.is_terminal:
        yield lambda _count: None
        return
    columns = (
        TextColumn(_("importing")),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeRemainingColumn(),
    )
    started = time.monotonic()
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("import", total=total, rate="")
        done = 0

        def report(count: int) -> None:
            nonlocal done
            done += count
            elapsed = time.monotonic() - started
            rate = f"{done / elapsed:,.0f} memories/s" if elapsed > 0 else ""
            bar.update(task, completed=done, rate=rate)

        yield report
