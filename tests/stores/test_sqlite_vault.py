"""The SQLite key vault's batches: keys commit together, or early when the store must commit bodies early.

Visibility is read through a second vault on the same file, as another process would see it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engram_memory.engine.ports.store import WrappedKey
from engram_memory.stores.sqlite.vault import SQLiteKeyVault
from tests.stores.builders import SCOPE_A

KEY = WrappedKey(kek_id="kek-1", wrapped=b"\x01" * 40)


def test_keys_put_in_a_batch_commit_at_its_end(tmp_path: Path) -> None:
    vault, other = SQLiteKeyVault(tmp_path / "v.db"), SQLiteKeyVault(tmp_path / "v.db", busy_timeout_ms=10)
    with vault.batch():
        vault.put(SCOPE_A, "cand_1", KEY, 1)
        vault.put(SCOPE_A, "cand_2", KEY, 1)
    assert set(other.get_many(SCOPE_A, ["cand_1", "cand_2"])) == {"cand_1", "cand_2"}
    vault.close()
    other.close()


def test_commit_pending_makes_the_keys_so_far_durable_and_goes_on_batching(tmp_path: Path) -> None:
    vault, other = SQLiteKeyVault(tmp_path / "v.db"), SQLiteKeyVault(tmp_path / "v.db", busy_timeout_ms=10)
    vault.commit_pending()  # outside a batch: nothing to do
    with pytest.raises(RuntimeError), vault.batch():
        vault.put(SCOPE_A, "cand_1", KEY, 1)
        vault.commit_pending()
        vault.put(SCOPE_A, "cand_2", KEY, 1)
        raise RuntimeError("the batch fails after the early commit")
    # The key committed early survives the batch's rollback; the later one went with it.
    assert set(other.get_many(SCOPE_A, ["cand_1", "cand_2"])) == {"cand_1"}
    with vault.batch():  # and the vault batches again afterwards
        vault.put(SCOPE_A, "cand_3", KEY, 1)
    assert other.get(SCOPE_A, "cand_3") == KEY
    vault.close()
    other.close()
