"""The `store` fixture: each conformance test runs on a fresh SQLite file and on a fresh PostgreSQL database.

`stores`: two PostgreSQL stores on one fresh database, for what one connection does while another watches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engram_memory.engine.ports.store import Store
from engram_memory.stores.postgres.store import PostgresStore
from engram_memory.stores.sqlite.store import SQLiteStore

STORES = ["sqlite", "postgresql"]


def open_store(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if kind == "sqlite":
        return SQLiteStore(tmp_path / "store.db")
    return PostgresStore(request.getfixturevalue("pg_url"))


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened = open_store(request.param, request, tmp_path)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def stores(pg_url: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    batching, other = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        yield batching, other
    finally:
        batching.close()
        other.close()
