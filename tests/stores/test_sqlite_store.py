"""The embedded store's own mechanisms: migrations and their ledger, WAL, and secure deletion."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.stores.sqlite.store import SQLiteStore


def test_new_store_records_its_migrations(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "s.db").close()
    with sqlite3.connect(tmp_path / "s.db") as db:
        rows = db.execute("SELECT version, name, digest FROM schema_migrations").fetchall()
        assert rows and rows[0][0] == 1 and rows[0][2].startswith("sha256:")
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_reopening_a_store_applies_nothing_twice(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "s.db").close()
    SQLiteStore(tmp_path / "s.db").close()
    with sqlite3.connect(tmp_path / "s.db") as db:
        assert db.execute("SELECT count(*) FROM schema_migrations").fetchone() == (1,)


def test_tampered_migration_ledger_is_refused(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "s.db").close()
    with sqlite3.connect(tmp_path / "s.db") as db:
        db.execute("UPDATE schema_migrations SET digest = 'sha256:' || hex(zeroblob(32))")
    with pytest.raises(ContractError) as caught:
        SQLiteStore(tmp_path / "s.db")
    assert caught.value.code is ErrorCode.MIGRATION_LEDGER_INVALID


def test_unopenable_store_is_store_unavailable(tmp_path: Path) -> None:
    with pytest.raises(ContractError) as caught:
        SQLiteStore(tmp_path / "missing-folder" / "s.db")
    assert caught.value.code is ErrorCode.STORE_UNAVAILABLE
