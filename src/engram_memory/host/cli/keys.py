"""Host commands for rotate-keys, backup and restore (recovery-key is in recovery_key.py).

Failures are one line naming the ErrorCode where the contract names one (BACKUP_INVALID, RESTORE_REFUSED).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from engram_memory.contract.errors import ContractError
from engram_memory.host.cli.common import HomeOption, JsonOption, fail, out, say, warn
from engram_memory.host.cli.recovery_key import read_key_argument
from engram_memory.host.compose import HomeError, current_user
from engram_memory.host.keys.files import KeyFileError
from engram_memory.host.keys.recovery import RecoveryKeyError
from engram_memory.host.keys.rotation import DEFAULT_BATCH_SIZE, RotationRefused, rotate_keys
from engram_memory.host.language.catalogue import _
from engram_memory.host.language.formats import number
from engram_memory.host.recovery.backup import backup_home
from engram_memory.host.recovery.manifest import BackupRefused
from engram_memory.host.recovery.restore import RestoreReport, restore_home
from engram_memory.host.settings import resolve_home

FileArgument = Annotated[Path, typer.Argument(metavar="FILE", help="The archive file.")]


def _fail_for(exc: Exception) -> NoReturn:
    if isinstance(exc, ContractError):
        fail(_("the store is unavailable ({code})").format(code=exc.code.value))
    if isinstance(exc, OSError):
        fail(f"{exc.strerror or exc}{': ' + str(exc.filename) if exc.filename else ''}")
    fail(str(exc))


_EXPECTED = (HomeError, KeyFileError, BackupRefused, RotationRefused, ContractError, OSError)


def _emit_json(value: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(value) + "\n")


@contextmanager
def _rotation_progress(as_json: bool) -> Iterator[tuple[Callable[[int], None], Callable[[int], None]]]:
    """A progress bar at a terminal; one line per batch through a pipe (so a log shows how far it got)."""
    if as_json:
        yield (lambda _total: None), (lambda _count: None)
        return
    if out.is_terminal:
        columns = (TextColumn(_("re-wrapping data keys")), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        with Progress(*columns, console=out, transient=True) as progress:
            task = progress.add_task("rotate", total=None)
            yield (lambda total: progress.update(task, total=total)), (lambda n: progress.advance(task, n))
        return
    state = {"done": 0, "total": 0}

    def started(total: int) -> None:
        state["total"] = total

    def moved(count: int) -> None:
        state["done"] += count
        say(_("re-wrapped {done} of {total} data keys").format(done=state["done"], total=state["total"]))

    yield started, moved


@contextmanager
def _restore_progress(as_json: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar of the re-indexing at a terminal; nothing through a pipe, where a failure must stay
    one line on stderr and stdout the result."""
    if not out.is_terminal or as_json:
        yield None
        return
    columns = (TextColumn(_("re-indexing bodies")), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=out, transient=True) as bar:
        task = bar.add_task("restore", total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
    app.command("rotate-keys")(rotate_keys_command)
    app.command("backup")(backup_command)
    app.command("restore")(restore_command)


def rotate_keys_command(
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Data keys re-wrapped per vault transaction.")
    ] = DEFAULT_BATCH_SIZE,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Rotate the key-encryption key: re-wrap every data key under a new one (bodies untouched).

    Safe to interrupt: running it again finishes the same rotation.
    """
    paths = resolve_home(home)
    started_at = time.perf_counter()
    try:
        with _rotation_progress(as_json) as (on_start, on_batch):
            report = rotate_keys(paths, batch_size=batch_size, on_start=on_start, on_batch=on_batch)
    except _EXPECTED as exc:
        _fail_for(exc)
    seconds = round(time.perf_counter() - started_at, 3)
    if as_json:
        _emit_json(
            {
                "active": report.active,
                "retired": list(report.retired),
                "rewrapped": report.rewrapped,
                "resumed": report.resumed,
                "seconds": seconds,
            }
        )
        return
    verb = _("finished the interrupted rotation") if report.resumed else _("rotated")
    say(
        _(
            "{verb}: {active} is the active key-encryption key; re-wrapped {rewrapped} data keys in {seconds:.1f} s; "
            "retired {retired}"
        ).format(
            verb=verb,
            active=report.active,
            rewrapped=report.rewrapped,
            seconds=seconds,
            retired=", ".join(report.retired) or _("nothing"),
        )
    )


def backup_command(file: FileArgument, home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Write an encrypted, self-verifying archive of the home to FILE, sealed under its recovery key."""
    paths = resolve_home(home)
    started_at = time.perf_counter()
    try:
        report = backup_home(paths, file.expanduser().absolute())
    except (*_EXPECTED, RecoveryKeyError) as exc:
        _fail_for(exc)
    seconds = round(time.perf_counter() - started_at, 3)
    manifest = report.manifest
    if report.recovery_key_created:
        warn(
            _(
                "this home had no recovery key, so the backup made keys/recovery.key: run 'engram-memory recovery-key "
                "export' and keep it offline, or this archive dies with the disk"
            )
        )
    if report.keyless_bodies:
        warn(
            _(
                "{keyless_bodies} archived bodies have no data key in the vault ('engram-memory verify' names them): "
                "a restore of this archive refuses them"
            ).format(keyless_bodies=report.keyless_bodies)
        )
    if as_json:
        _emit_json({"file": str(report.path), "bytes": report.archive_bytes, "seconds": seconds, **manifest})
        return
    counts = manifest["counts"]
    say(
        _(
            "backup written to {path} ({archive_bytes} bytes, {seconds:.1f} s): {records} records, "
            "{candidates} candidates, {events} journal events in {scopes} scopes"
        ).format(
            path=report.path,
            archive_bytes=number(report.archive_bytes),
            seconds=seconds,
            records=number(counts.get("records", 0)),
            candidates=number(counts.get("candidates", 0)),
            events=number(counts.get("journal", 0)),
            scopes=number(len(manifest["journal"]["scopes"])),
        )
    )
    say(
        _(
            "sealed under recovery key {recovery_key_id}: with it, this archive restores on any machine "
            "(engram-memory restore FILE --recovery-key KEYFILE)"
        ).format(recovery_key_id=manifest["recovery_key_id"])
    )


RecoveryKeyOption = Annotated[
    Path | None,
    typer.Option(
        "--recovery-key",
        metavar="KEYFILE",
        help="The recovery key the archive was made under (a file, or - for stdin); else this home's own.",
    ),
]


def restore_command(
    file: FileArgument,
    recovery_key: RecoveryKeyOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Restore FILE into this home's empty store, or a fresh `init` on another machine; verified before writing."""
    paths = resolve_home(home)
    started_at = time.perf_counter()
    try:
        given = None if recovery_key is None else read_key_argument(recovery_key)
        with _restore_progress(as_json) as progress:
            report = restore_home(
                paths,
                file.expanduser().absolute(),
                decided_by=current_user(),
                recovery_key=given,
                progress=progress,
            )
    except (*_EXPECTED, RecoveryKeyError) as exc:
        _fail_for(exc)
    _report_restore(report, file, paths.store_dir, round(time.perf_counter() - started_at, 3), as_json=as_json)


def _report_restore(report: RestoreReport, file: Path, store_dir: Path, seconds: float, *, as_json: bool) -> None:
    settled, adopted = report.settled, report.adopted
    if adopted is not None and adopted.policy_kept is not None:
        warn(
            _("kept this home's own policy.toml; the archive's is saved as {policy_kept}").format(
                policy_kept=adopted.policy_kept
            )
        )
    if as_json:
        _emit_json(
            {
                "file": str(file),
                "created_at": report.manifest["created_at"],
                "records": report.records,
                "indexed": report.indexed,
                "tombstoned": settled.tombstoned,
                "withdrawn": settled.withdrawn,
                "keys_added": 0 if report.added is None else report.added.keys,
                "replaced": [] if adopted is None else adopted.replaced,
                "seconds": seconds,
            }
        )
        return
    say(
        _(
            "restored the backup of {created_at} into {store_dir} in {seconds:.1f} s: {records} records, {indexed} "
            "indexed; journal, index and bodies verified"
        ).format(
            created_at=report.manifest["created_at"],
            store_dir=store_dir,
            seconds=seconds,
            records=report.records,
            indexed=report.indexed,
        )
    )
    if settled.tombstoned or settled.withdrawn:
        say(
            _(
                "{tombstoned} records tombstoned and {withdrawn} candidates withdrawn: their data keys were "
                "destroyed after the backup, so their bodies were erased"
            ).format(tombstoned=len(settled.tombstoned), withdrawn=len(settled.withdrawn))
        )
    if adopted is not None and adopted.replaced:
        say(
            _(
                "took over the archived home's {replaced}: its bindings verify here again, and bindings made by "
                "this home before the restore no longer do"
            ).format(replaced=", ".join(adopted.replaced))
        )
