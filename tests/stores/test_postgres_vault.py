"""The PostgreSQL key vault's batches: a thread's keys commit together, before the store's bodies do.

What another connection sees is read through a second vault on the same database.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engram_memory.contract.errors import ContractError
from engram_memory.engine.ports.store import WrappedKey
from engram_memory.stores.postgres.vault import PostgresKeyVault
from tests.stores.builders import SCOPE_A, SCOPE_B

KEY = WrappedKey(kek_id="kek-1", wrapped=b"\x01" * 40)


@pytest.fixture
def vaults(pg_url: str) -> Iterator[tuple[PostgresKeyVault, PostgresKeyVault]]:
    vault, other = PostgresKeyVault(pg_url), PostgresKeyVault(pg_url)
    try:
        yield vault, other
    finally:
        vault.close()
        other.close()


def test_keys_put_in_a_batch_commit_at_its_end_and_its_thread_reads_them(
    vaults: tuple[PostgresKeyVault, PostgresKeyVault],
) -> None:
    vault, other = vaults
    with vault.batch():
        vault.put(SCOPE_A, "cand_1", KEY, 1)
        vault.put(SCOPE_B, "cand_2", KEY, 1)  # another tenant's key, in the same commit
        assert vault.get(SCOPE_A, "cand_1") == KEY and vault.get(SCOPE_B, "cand_1") is None
        assert vault.get_many(SCOPE_B, ["cand_1", "cand_2"]) == {"cand_2": KEY}
        assert other.get(SCOPE_A, "cand_1") is None
    assert other.get(SCOPE_A, "cand_1") == KEY and other.get(SCOPE_B, "cand_2") == KEY


def test_commit_pending_commits_the_keys_so_far_and_a_failed_batch_drops_the_rest(
    vaults: tuple[PostgresKeyVault, PostgresKeyVault],
) -> None:
    vault, other = vaults
    with pytest.raises(RuntimeError), vault.batch():
        vault.put(SCOPE_A, "cand_1", KEY, 1)
        vault.commit_pending()
        assert other.get(SCOPE_A, "cand_1") == KEY
        vault.put(SCOPE_A, "cand_2", KEY, 1)
        raise RuntimeError("the store's batch failed")
    assert other.get_many(SCOPE_A, ["cand_1", "cand_2"]) == {"cand_1": KEY}


def test_keys_retired_or_destroyed_in_a_batch_wait_for_run_deferred(
    vaults: tuple[PostgresKeyVault, PostgresKeyVault],
) -> None:
    vault, other = vaults
    vault.put(SCOPE_A, "cand_1", KEY, 1)
    vault.put(SCOPE_A, "rec_1", KEY, 1)
    with vault.batch():
        assert vault.retire(["cand_1"], 2) and vault.destroy(["rec_1"], 2)
    assert other.get_many(SCOPE_A, ["cand_1", "rec_1"]) == {"cand_1": KEY, "rec_1": KEY}
    assert vault.run_deferred()
    assert other.get_many(SCOPE_A, ["cand_1", "rec_1"]) == {} and other.shredded(["cand_1", "rec_1"]) == {
        "cand_1",
        "rec_1",
    }
    assert vault.run_deferred()  # nothing left to do


def test_a_key_that_cannot_commit_fails_the_batch_end(vaults: tuple[PostgresKeyVault, PostgresKeyVault]) -> None:
    vault, _ = vaults
    vault.put(SCOPE_A, "cand_1", KEY, 1)
    with pytest.raises(ContractError), vault.batch():
        vault.put(SCOPE_A, "cand_1", KEY, 1)  # the owner already has a key: the insert is refused


def test_vault_batches_do_not_nest(vaults: tuple[PostgresKeyVault, PostgresKeyVault]) -> None:
    vault, _ = vaults
    with pytest.raises(RuntimeError), vault.batch(), vault.batch():
        pass
