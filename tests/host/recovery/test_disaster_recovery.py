"""Disaster recovery: an archive and the recovery key rebuild a home on another machine, on either store.

The whole source home is deleted (its keys folder included); a fresh home made by `init` elsewhere
restores the archive with `--recovery-key KEYFILE`, the key `recovery-key export` printed. The archive
carries the data keys (wrapped under a key derived from the recovery key), the vault's logs and the
home's secrets: verify passes, searches return the same ids, bindings of the old home verify again
and its revocations still refuse, and what was forgotten before the backup stays gone. The log of
destroyed keys travels with every archive, so an older archive restored into the rebuilt home cannot
bring back a forget that only a newer archive knew.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from engram_memory.engine.ports.store import Scope
from engram_memory.host.compose import open_engine, verify_token
from engram_memory.host.keys.recovery import load_recovery_key, parse_recovery_key
from engram_memory.host.settings import HostPaths
from tests.host.clirun import Done, assert_one_line_failure, cli
from tests.host.recovery.test_backup_postgres import _forget
from tests.support.homes import STORES, Issued, bind, home_on, make_home
from tests.support.inprocess import InProcessAgent

TEXTS = [
    "Deploys need two approvals before the release train leaves.",
    "The billing database migrates during the Sunday window.",
    "Hotfix branches are cut from the release tag, never from main.",
    "Quarterly access reviews cover every production role.",
    "배포 전에는 두 명의 승인이 필요합니다.",
    "账单数据库在周日窗口期间迁移。",
    "検索クラスターはゾーンをまたいで三つのレプリカを保持します。",
]
SCOPE = Scope(tenant="tenant-a", workspace="workspace-1")
QUERIES = [
    "deploy approvals",
    "billing database",
    "hotfix release",
    "production role",
    "배포 승인",
    "账单数据库",
    "レプリカ",
]


def _ok(done: Done) -> dict[str, Any]:
    assert done.code == 0, done.stderr
    return dict(json.loads(done.stdout)) if done.stdout.strip().startswith("{") else {}


def _searches(paths: HostPaths, issued: Issued) -> dict[str, list[str]]:
    with open_engine(paths) as engine:
        agent = InProcessAgent(engine, issued.binding)
        return {query: agent.found_ids(query) for query in QUERIES}


def _export_key(paths: HostPaths, keyfile: Path) -> str:
    done = cli("recovery-key", "export", "--output", keyfile, "--home", paths.home)
    assert done.code == 0 and done.stdout == "", done
    return load_recovery_key(paths).key_id


def _issue(paths: HostPaths, **claims: str) -> str:
    done = cli(
        "bind", "--tenant", "tenant-a", "--workspace", "workspace-1", "--principal", "alice", "--agent", "agent-1",
        "--session", claims.get("session", "s1"), "--purpose", "purpose:test", "--all-tools", "--home", paths.home,
    )  # fmt: skip
    assert done.code == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("target_store", STORES)
def test_archive_and_recovery_key_rebuild_a_deleted_home_on_a_fresh_init(
    paths: HostPaths, target_store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Both stores, both directions: the source home is on `paths`' store, the fresh one on `target_store`."""
    kept_token, revoked_token = _issue(paths, session="kept"), _issue(paths, session="revoked")
    revoked_id = verify_token(paths, revoked_token)[0].token_id  # type: ignore[union-attr]
    assert cli("revoke", revoked_id, "--home", paths.home).code == 0
    with open_engine(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        ids = [agent.remember(text) for text in TEXTS]
        pending = agent.capture("A draft about the osprey migration route.")["candidate_id"]
        forgotten = agent.remember("The zanzibarquux cluster keeps quorum across racks.")
        _forget(paths, agent, forgotten)
    policy = paths.policy.read_text(encoding="utf-8").replace('mode = "auto"', 'mode = "auto"\n# edited by the host')
    paths.policy.write_text(policy, encoding="utf-8")
    found = _searches(paths, bind(paths))
    assert all(found[query][:1] == [record_id] for query, record_id in zip(QUERIES, ids, strict=True)), found
    archive, keyfile = tmp_path / "offsite" / "home.backup", tmp_path / "offsite" / "recovery.key"
    archive.parent.mkdir()
    key_id = _export_key(paths, keyfile)
    made = _ok(cli("backup", archive, "--home", paths.home, "--json"))
    assert made["recovery_key_id"] == key_id and made["keys"]["keys"] == len(ids) + 1  # records and the candidate
    assert made["keys"]["revocations"] == 1 and made["keys"]["issued"] == 2

    shutil.rmtree(paths.home)  # the disk is gone: store, keys folder, policy and all

    with home_on(target_store, tmp_path / "new-machine", request) as fresh:
        refused = assert_one_line_failure(cli("restore", archive, "--home", fresh.home))
        assert f"the archive was made under recovery key {key_id}" in refused and "--recovery-key" in refused
        restored = _ok(cli("restore", archive, "--recovery-key", keyfile, "--home", fresh.home, "--json"))
        assert restored["records"] == len(ids) + 1 and restored["indexed"] == len(ids)
        assert restored["tombstoned"] == [] and restored["keys_added"] == len(ids) + 1
        assert set(restored["replaced"]) == {
            "keys/secret.key",
            "keys/host-signing.pem",
            "keys/recovery.key",
            "policy.toml",
        }
        verified = cli("verify", "--json", "--home", fresh.home)
        assert verified.code == 0 and json.loads(verified.stdout)["ok"] is True, verified.stdout

        assert _searches(fresh, bind(fresh)) == found
        with open_engine(fresh) as engine:
            agent = InProcessAgent(engine, bind(fresh).binding)
            assert all(agent.get(record_id)["ok"] for record_id in ids)
            assert agent.get(forgotten)["error"]["code"] == "NOT_FOUND"
            assert forgotten not in agent.found_ids("zanzibarquux cluster quorum")
            assert agent.admit(pending)["status"] == "accepted"  # the candidate's body opened with its carried key
            again = agent.capture("The zanzibarquux cluster keeps quorum across racks.")["candidate_id"]
            assert agent.admit(again)["status"] != "accepted"  # the tombstone guard still knows the forgotten text
        assert verify_token(fresh, kept_token)[0] is not None  # the old home's bindings verify here
        with open_engine(fresh) as engine:
            binding = verify_token(fresh, revoked_token)[0]
            assert binding is not None and engine.binding_unusable(binding) is not None  # and its revocation holds
        listed = json.loads(cli("bindings", "list", "--json", "--home", fresh.home).stdout)
        assert {row["status"] for row in listed} == {"active", "revoked"}
        assert fresh.policy.read_text(encoding="utf-8") == policy
        # The key kept offline stays this home's: the next archive opens with the same KEYFILE.
        assert load_recovery_key(fresh).key_id == key_id
        assert _ok(cli("backup", tmp_path / "next.backup", "--home", fresh.home, "--json"))["recovery_key_id"] == key_id


def test_an_older_archive_cannot_undo_a_forget_that_a_newer_archive_carried(
    paths: HostPaths, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The log of destroyed keys travels: rebuilt from the newer archive, the home refuses the older one's text."""
    with open_engine(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        kept = agent.remember("The search cluster keeps three replicas across zones.")
        doomed = agent.remember("The osprey migration route crosses the northern ridge.")
    keyfile, older, newer = tmp_path / "recovery.key", tmp_path / "older.backup", tmp_path / "newer.backup"
    _export_key(paths, keyfile)
    _ok(cli("backup", older, "--home", paths.home, "--json"))
    with open_engine(paths) as engine:
        _forget(paths, InProcessAgent(engine, bind(paths).binding), doomed)
    made = _ok(cli("backup", newer, "--home", paths.home, "--json"))
    assert made["keys"]["keys"] == 1 and made["keys"]["destroyed"] >= 1
    shutil.rmtree(paths.home)

    with home_on("sqlite", tmp_path / "rebuilt", request) as rebuilt:
        _ok(cli("restore", newer, "--recovery-key", keyfile, "--home", rebuilt.home, "--json"))
        shutil.rmtree(rebuilt.store_dir)  # a second loss, of the store only: the older archive is all that is left
        restored = _ok(cli("restore", older, "--home", rebuilt.home, "--json"))
        assert restored["tombstoned"] == [doomed] and restored["keys_added"] == 0
        with open_engine(rebuilt) as engine:
            agent = InProcessAgent(engine, bind(rebuilt).binding)
            assert agent.get(doomed)["error"]["code"] == "NOT_FOUND"
            assert agent.found_ids("osprey migration ridge")[:1] != [doomed]
            assert agent.found_ids("search cluster replicas")[:1] == [kept]
            assert engine.deps.vault.get(SCOPE, doomed) is None and engine.deps.vault.shredded([doomed]) == {doomed}
        assert json.loads(cli("verify", "--json", "--home", rebuilt.home).stdout)["ok"] is True


def test_a_rotated_recovery_key_opens_new_archives_and_the_old_one_opens_only_older_ones(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with home_on("sqlite", tmp_path / "home", request) as paths:
        with open_engine(paths) as engine:
            record_id = InProcessAgent(engine, bind(paths).binding).remember("Quarterly access reviews cover roles.")
        old_file, new_file = tmp_path / "old.key", tmp_path / "new.key"
        old_id = _export_key(paths, old_file)
        before, after = tmp_path / "before.backup", tmp_path / "after.backup"
        _ok(cli("backup", before, "--home", paths.home, "--json"))
        rotated = cli("recovery-key", "rotate", "--home", paths.home, "--json")
        assert rotated.code == 0 and "take a new backup" in rotated.stderr
        ids = json.loads(rotated.stdout)
        assert ids["previous_key_id"] == old_id and ids["key_id"] != old_id
        new_id = _export_key(paths, new_file)
        assert _ok(cli("backup", after, "--home", paths.home, "--json"))["recovery_key_id"] == new_id

        for archive, right, wrong, wrong_id in (
            (before, old_file, new_file, new_id),
            (after, new_file, old_file, old_id),
        ):
            with home_on("sqlite", tmp_path / f"machine-{archive.stem}", request) as fresh:
                line = assert_one_line_failure(cli("restore", archive, "--recovery-key", wrong, "--home", fresh.home))
                assert "BACKUP_INVALID" in line and f"the recovery key given is {wrong_id}" in line
                _ok(cli("restore", archive, "--recovery-key", right, "--home", fresh.home, "--json"))
                with open_engine(fresh) as engine:
                    assert InProcessAgent(engine, bind(fresh).binding).get(record_id)["ok"]


def test_recovery_key_from_stdin_and_a_mistyped_one_is_named_as_mistyped(tmp_path: Path) -> None:
    paths = make_home(tmp_path / "home")
    archive = tmp_path / "home.backup"
    _ok(cli("backup", archive, "--home", paths.home, "--json"))
    text = load_recovery_key(paths).text()
    fresh = make_home(tmp_path / "fresh")
    typo = text[:-1] + ("A" if text[-1] != "A" else "B")
    (tmp_path / "typo.key").write_text(typo + "\n", encoding="utf-8")
    line = assert_one_line_failure(
        cli("restore", archive, "--recovery-key", tmp_path / "typo.key", "--home", fresh.home)
    )
    assert line == "engram-memory: error: the recovery key is mistyped: its checksum does not match"
    assert text not in line
    done = cli("restore", archive, "--recovery-key", "-", "--home", fresh.home, "--json", stdin=text.lower() + "\n")
    assert done.code == 0, done.stderr
    assert parse_recovery_key(text).key_id == load_recovery_key(fresh).key_id
