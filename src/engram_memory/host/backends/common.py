"""What the backends share: the error translation of a PostgreSQL home, private files, sizes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.host import postgres_home
from engram_memory.host.language.catalogue import _
from engram_memory.host.postgres_home import PostgresHomeError
from engram_memory.host.settings import HomeError

POSTGRES_STORE = "postgresql"
_BEHIND = "the PostgreSQL schema is older than this version: run 'engram-memory init' (as the owner) first"


@contextmanager
def postgres_home_errors(url: str | None = None) -> Iterator[None]:
    """A role or URL problem, a schema older than this version, or (given the URL being opened) a server
    that cannot be reached, as the one-line HomeError of a host command: where, and libpq's reason."""
    try:
        yield
    except PostgresHomeError as exc:
        raise HomeError(str(exc)) from exc
    except ContractError as exc:
        if postgres_home.schema_behind(exc):
            raise HomeError(_BEHIND) from exc
        unreachable = (
            None if url is None or exc.__cause__ is None else postgres_home.connect_failure(url, exc.__cause__)
        )
        if exc.code is ErrorCode.STORE_UNAVAILABLE and unreachable is not None:
            raise HomeError(_("cannot connect to PostgreSQL ({unreachable})").format(unreachable=unreachable)) from exc
        raise


def create_private(path: Path, created: list[Path]) -> None:
    if not path.exists():
        # SQLite gives its -wal and -shm files the main file's mode: create it private first.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        created.append(path)


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def database_bytes(url: str) -> int:
    import psycopg

    from engram_memory.stores.postgres.connection import database_bytes as measured

    try:
        return measured(url)
    except psycopg.Error:
        return 0


def sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
