"""backup and restore of a PostgreSQL home: the same archive format as the embedded store, in both directions.

The store's tables are copied in one snapshot into the SQLite snapshot an archive holds (the index is
never archived); a restore fills an empty PostgreSQL store in one transaction that checks what it wrote.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from engram_memory.contract.tools import Tool
from engram_memory.engine.engine import Engine
from engram_memory.host.compose import open_engine, store_settings
from engram_memory.host.recovery.restore import RESTORE_REASON
from engram_memory.host.settings import HostPaths, StoreSettings
from tests.host.clirun import assert_one_line_failure, cli
from tests.support.homes import bind, make_home
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import unique_key
from tests.support.postgres import APP_ROLE, PostgresCluster, make_postgres_home, owner_url

TEXTS = [
    "Deploys need two approvals before the release train leaves",
    "The billing database migrates during the Sunday window",
    "Hotfix branches are cut from the release tag",
    "Quarterly access reviews cover every production role",
]


def _ok(done: Any) -> dict[str, Any]:
    assert done.code == 0, done.stderr
    return dict(json.loads(done.stdout))


def _forget(paths: HostPaths, agent: InProcessAgent, record_id: str) -> None:
    forget = {"record_id": record_id, "idempotency_key": unique_key("forget"), "reason_ref": "reason:t"}
    assert agent.error_code(Tool.FORGET, forget) == "gate_failed"
    with open_engine(paths) as owner:
        owner.approve_confirmation(owner.confirmations()[0][0].confirmation_id, decided_by="host:t", ttl_ms=60_000)
    assert agent.value(Tool.FORGET, forget)["receipt"]["to_state"] == "tombstoned"


def _fill(paths: HostPaths, *, runtime: bool) -> tuple[list[str], str]:
    """Four records (one forgotten) and a pending candidate; the ids and the candidate."""
    with open_engine(paths, runtime=runtime) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        ids = [agent.remember(text) for text in TEXTS]
        pending = agent.capture("A pending note about the release calendar")["candidate_id"]
        _forget(paths, agent, ids[0])
    return ids, pending


def _found(engine: Engine, paths: HostPaths, query: str) -> list[str]:
    return InProcessAgent(engine, bind(paths).binding).found_ids(query)


def _moved_home(source: HostPaths, target: Path, settings: StoreSettings) -> HostPaths:
    """Another home with the source's keys folder and policy, on the store (and vault) `settings` names."""
    paths = HostPaths(home=target)
    shutil.copytree(source.keys_dir, paths.keys_dir)
    paths.policy.write_bytes(source.policy.read_bytes())
    paths.config.write_text(settings.to_toml(), encoding="utf-8")
    _ok(cli("init", "--home", target, "--json"))  # migrates the new database and grants the runtime role
    return paths


def test_postgres_archive_restores_into_an_empty_postgres_store_and_settles_later_forgets(
    tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    source = make_postgres_home(tmp_path / "source", postgres_cluster)
    ids, pending = _fill(source, runtime=True)
    archive = tmp_path / "store.backup"
    made = _ok(cli("backup", archive, "--home", source.home, "--json"))
    assert made["store"] == "postgresql" and made["counts"]["records"] == len(TEXTS)
    with open_engine(source, runtime=True) as engine:  # forgotten after the backup: its key is gone from the vault
        _forget(source, InProcessAgent(engine, bind(source).binding), ids[1])

    # The store database is lost; the vault database and the keys folder are not.
    new_store = owner_url(postgres_cluster, postgres_cluster.new_database())
    target = _moved_home(source, tmp_path / "target", replace(store_settings(source), store=new_store))
    restored = _ok(cli("restore", archive, "--home", target.home, "--json"))
    assert (restored["records"], restored["indexed"], restored["tombstoned"]) == (len(TEXTS), 2, [ids[1]])
    verified = cli("verify", "--json", "--home", target.home)
    assert json.loads(verified.stdout)["ok"], verified.stdout
    with open_engine(target, runtime=True) as engine:
        assert ids[1] not in _found(engine, target, "billing database")
        assert _found(engine, target, "hotfix release tag")[:1] == [ids[2]]
        assert _found(engine, target, "access reviews production")[:1] == [ids[3]]
    with open_engine(target) as owner:
        with owner.deps.store.read() as tx:
            states = {record_id: tx.find_record(record_id).state for record_id in ids}  # type: ignore[union-attr]
            history = tx.record_history(tx.find_record(ids[1]).scope, ids[1], ["record.transitioned"])  # type: ignore[union-attr]
            assert tx.find_candidate(pending).state == "pending"  # type: ignore[union-attr]
        assert states == {
            ids[0]: "tombstoned",
            ids[1]: "tombstoned",
            ids[2]: "accepted_current",
            ids[3]: "accepted_current",
        }
        assert history[-1].body["data"]["reason_ref"] == RESTORE_REASON
    # A second restore finds the store full and writes nothing.
    line = assert_one_line_failure(cli("restore", archive, "--home", target.home))
    assert "RESTORE_REFUSED" in line and "already holds data" in line


def test_archives_move_between_the_embedded_and_the_server_store(
    tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    embedded = make_home(tmp_path / "embedded")
    ids, _ = _fill(embedded, runtime=False)
    archive = tmp_path / "embedded.backup"
    _ok(cli("backup", archive, "--home", embedded.home, "--json"))
    server_settings = StoreSettings(
        store=owner_url(postgres_cluster, postgres_cluster.new_database()), app_role=APP_ROLE
    )
    server = _moved_home(embedded, tmp_path / "server", server_settings)
    _ok(cli("restore", archive, "--home", server.home, "--json"))
    with open_engine(server, runtime=True) as engine:
        assert _found(engine, server, "billing database")[:1] == [ids[1]]
        assert ids[0] not in _found(engine, server, "deploys approvals")

    back = tmp_path / "server.backup"
    _ok(cli("backup", back, "--home", server.home, "--json"))
    again = HostPaths(home=tmp_path / "embedded-again")
    shutil.copytree(embedded.keys_dir, again.keys_dir)
    _ok(cli("init", "--home", again.home, "--json"))
    _ok(cli("restore", back, "--home", again.home, "--json"))
    with open_engine(again) as engine:
        assert _found(engine, again, "billing database")[:1] == [ids[1]]
    assert json.loads(cli("verify", "--json", "--home", again.home).stdout)["ok"]
