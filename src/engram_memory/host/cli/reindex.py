"""Host command `reindex`: move the store's derived indexes to this version (engine/recall/reindex.py).

Needed after an upgrade whose tokenizer or embedding model differs from the one the store was indexed
with. `serve` runs the same work before it serves (logging its progress); this command does it ahead,
with a progress bar, or only reports what is due (`--check`).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import MappingProxyType
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from engram_memory.contract.errors import ContractError
from engram_memory.engine.engine import Engine
from engram_memory.engine.recall.reindex import IndexStatus, ReindexProgress
from engram_memory.host.cli.common import HomeOption, JsonOption, fail, opened_engine, out, say
from engram_memory.host.language.catalogue import N_, _, speaking
from engram_memory.host.language.choice import DEFAULT
from engram_memory.host.language.formats import number

_PHASES = MappingProxyType({"lexical": N_("re-tokenizing memories"), "semantic": N_("embedding memories")})


def register(app: typer.Typer) -> None:
    """Adds this module's command to the main `engram-memory` app."""
    app.command("reindex")(reindex_command)


# Below this many records without a vector, `serve` leaves them to the searches that catch them up (under
# a second of model work, the ordinary lag of an indexer); from it on (a new model, a model installed
# after lexical-only use) it embeds them before it serves, so no search has to.
SERVE_EMBEDS_FROM = 100


def _models(status: IndexStatus) -> str:
    return _(" and ").join(status.models) or _("none")


def describe(status: IndexStatus, *, embed: bool = True) -> str:
    """One line for a person: what a re-index of this store would do."""
    if status.current:
        return _("the indexes are current (tokenizer {tokenizer}, models {models})").format(
            tokenizer=status.tokenizer, models=_models(status)
        )
    parts = []
    if status.stale_scopes:
        scopes = len(status.stale_scopes)
        parts.append(
            _("{records} memories in {scopes} scopes to re-tokenize for {tokenizer}").format(
                records=number(status.stale_records), scopes=number(scopes), tokenizer=status.tokenizer
            )
        )
    if status.unembedded and embed:
        parts.append(
            _("{count} memories to embed by {models}").format(count=number(status.unembedded), models=_models(status))
        )
    return "; ".join(parts)


def serve_reindex(engine: Engine, log: Callable[[str], None]) -> None:
    """What `serve` does before it serves: every stale scope re-tokenized (it could not be searched), and
    the missing vectors embedded when there are many (SERVE_EMBEDS_FROM)."""
    status = engine.index_status()
    embed = status.unembedded >= SERVE_EMBEDS_FROM
    if status.stale_scopes or embed:
        with speaking(DEFAULT):  # serve's log lines stay in English, whatever the operator's locale
            log(_("before serving: {work}").format(work=describe(status, embed=embed)))
            engine.reindex(percent_lines(log), embed=embed)


def percent_lines(line: Callable[[str], None]) -> Callable[[ReindexProgress], None]:
    """Progress as lines, at most one per phase and whole percent (a log shows how far it got)."""
    shown: dict[str, int] = {}

    def report(progress: ReindexProgress) -> None:
        percent = 100 * progress.done // max(progress.total, 1)
        if shown.get(progress.phase) == percent:
            return
        shown[progress.phase] = percent
        line(
            _("{phase}: {done} of {total} ({percent} %)").format(
                phase=_(_PHASES[progress.phase]), done=progress.done, total=progress.total, percent=percent
            )
        )

    return report


@contextmanager
def _progress(as_json: bool) -> Iterator[Callable[[ReindexProgress], None]]:
    if as_json:
        yield lambda _progress: None
        return
    if not out.is_terminal:
        yield percent_lines(say)
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=out, transient=True) as bar:
        tasks: dict[str, TaskID] = {}

        def report(progress: ReindexProgress) -> None:
            task = tasks.get(progress.phase)
            if task is None:
                task = tasks[progress.phase] = bar.add_task(_(_PHASES[progress.phase]), total=progress.total)
            bar.update(task, completed=progress.done, total=progress.total)

        yield report


def reindex_command(
    check: Annotated[
        bool, typer.Option("--check", help="Only say what is due; exit 1 when a re-index is needed.")
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Re-tokenize memories indexed by another tokenizer and embed those the model has no vector of.

    Safe to interrupt: running it again resumes. `serve` does the same before it serves.
    """
    started_at = time.perf_counter()
    with opened_engine(home) as (engine, _paths):
        try:
            status = engine.index_status()
            if check:
                if as_json:
                    sys.stdout.write(json.dumps(_status_json(status)) + "\n")
                else:
                    say(describe(status))
                raise typer.Exit(code=0 if status.current else 1)
            if not as_json and not status.current:
                say(describe(status))
            with _progress(as_json) as report:
                result = engine.reindex(report)
        except ContractError as exc:
            fail(_("the store is unavailable ({code}); running reindex again resumes").format(code=exc.code.value))
    seconds = round(time.perf_counter() - started_at, 3)
    if as_json:
        value = {
            **_status_json(status),
            "scopes_retokenized": result.scopes,
            "entries_rewritten": result.retokenized,
            "vectors_written": result.embedded,
            "unreadable": result.unreadable,
            "seconds": seconds,
        }
        sys.stdout.write(json.dumps(value) + "\n")
        return
    if status.current:
        say(describe(status))
        return
    said = _(
        "re-indexed in {seconds:.1f} s: {scopes} scopes re-tokenized ({entries} entries changed), {vectors} vectors "
        "written"
    ).format(
        seconds=seconds,
        scopes=number(result.scopes),
        entries=number(result.retokenized),
        vectors=number(result.embedded),
    )
    if result.unreadable:
        said += _("; {count} memories could not be read (run engram-memory verify)").format(count=result.unreadable)
    say(said)


def _status_json(status: IndexStatus) -> dict[str, object]:
    return {
        "tokenizer": status.tokenizer,
        "models": list(status.models),
        "stale_scopes": len(status.stale_scopes),
        "stale_records": status.stale_records,
        "unembedded": status.unembedded,
        "current": status.current,
    }
