"""`engram-memory recovery-key export | rotate`: the one secret a host keeps offline to survive losing the machine.

Export prints it (or writes it to a new file, mode 0600); the key goes to stdout or the file only, the
guidance to stderr. Rotation makes a new one: archives made before it open only with the old key, so
destroying every copy of the old key is how a host makes its older archives unreadable.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from engram_memory.host.cli.common import HomeOption, JsonOption, err, fail, say, warn
from engram_memory.host.keys.private_files import write_private
from engram_memory.host.keys.recovery import (
    RecoveryKey,
    RecoveryKeyError,
    load_recovery_key,
    parse_recovery_key,
    read_recovery_key,
    rotate_recovery_key,
)
from engram_memory.host.language.catalogue import _
from engram_memory.host.settings import resolve_home


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
    group = typer.Typer(
        rich_markup_mode=None, help="The recovery key: with it and an archive, this home restores on another machine."
    )
    app.add_typer(group, name="recovery-key")
    group.command("export")(export)
    group.command("rotate")(rotate)


def read_key_argument(path: Path) -> RecoveryKey:
    """A recovery key from a KEYFILE option: a file, or '-' for stdin. Raises RecoveryKeyError."""
    if str(path) == "-":
        return parse_recovery_key(sys.stdin.read())
    return read_recovery_key(path.expanduser())


def _tell(text: str) -> None:
    err.print(_("engram-memory: {text}").format(text=text), markup=False, highlight=False)


def export(
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write it to a new file (mode 0600) instead of stdout."),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print this home's recovery key. Keep it offline: with it, any archive of this home restores anywhere."""
    paths = resolve_home(home)
    try:
        key = load_recovery_key(paths)
    except RecoveryKeyError as exc:
        fail(str(exc))
    if output is not None:
        target = output.expanduser()
        try:
            write_private(target, (key.text() + "\n").encode("ascii"))
        except FileExistsError:
            fail(_("{target} already exists: the recovery key is never written over a file").format(target=target))
        except OSError as exc:
            fail(_("cannot write {target}: {reason}").format(target=target, reason=exc.strerror or exc))
        _tell(
            _("recovery key {key_id} written to {target}; move it offline and delete it from this disk").format(
                key_id=key.key_id, target=target
            )
        )
        return
    if as_json:
        sys.stdout.write(json.dumps({"key_id": key.key_id, "recovery_key": key.text()}) + "\n")
    else:
        sys.stdout.write(key.text() + "\n")
    _tell(
        _(
            "recovery key {key_id}: keep it offline (a password manager, paper in a safe). With it and an archive: "
            "engram-memory restore FILE --recovery-key KEYFILE, into a fresh 'engram-memory init' home"
        ).format(key_id=key.key_id)
    )


def rotate(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Replace this home's recovery key. Archives made before open only with the old one."""
    paths = resolve_home(home)
    try:
        old, new = rotate_recovery_key(paths)
    except (RecoveryKeyError, OSError) as exc:
        fail(str(exc))
    if as_json:
        sys.stdout.write(json.dumps({"previous_key_id": old.key_id, "key_id": new.key_id}) + "\n")
    else:
        say(_("rotated the recovery key: {key_id} replaces {previous}").format(key_id=new.key_id, previous=old.key_id))
    warn(
        _(
            "export the new key now (engram-memory recovery-key export) and take a new backup; archives made before "
            "open only with {key_id}: keep it while you keep them, destroy every copy to make them unreadable"
        ).format(key_id=old.key_id)
    )
