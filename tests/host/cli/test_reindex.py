"""`engram-memory reindex` and `serve` on a store indexed by the first tokenizer, as real processes."""

from __future__ import annotations

import json

import pytest

from engram_memory.engine.ports.store import Scope
from engram_memory.engine.recall.text import tokenizer_id
from engram_memory.host.settings import HostPaths
from tests.host.clirun import cli
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.legacy_index import make_legacy

SCOPE = Scope(tenant="tenant-a", workspace="workspace-1")
TEXTS = ["운영팀은 데이터베이스를 매일 밤 백업한다.", "資料庫每天晚上備份。", "Deploys need two approvals."]


@pytest.fixture
def legacy(paths: HostPaths) -> HostPaths:
    with steered_engine(paths, clock=ManualClock()) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        for text in TEXTS:
            agent.remember(text)
        make_legacy(paths, engine, SCOPE)
    return paths


def test_reindex_check_exits_one_naming_the_work_when_a_scope_is_stale(legacy: HostPaths) -> None:
    done = cli("reindex", "--check", "--home", legacy.home)
    assert done.code == 1 and "Traceback" not in done.stderr
    assert done.stdout.strip() == f"{len(TEXTS)} memories in 1 scopes to re-tokenize for {tokenizer_id()}"
    as_json = json.loads(cli("reindex", "--check", "--json", "--home", legacy.home).stdout)
    assert as_json["stale_scopes"] == 1 and as_json["stale_records"] == len(TEXTS) and not as_json["current"]


def test_reindex_shows_progress_then_verify_passes(legacy: HostPaths) -> None:
    done = cli("reindex", "--home", legacy.home)
    assert done.code == 0, done
    lines = done.stdout.splitlines()
    assert lines[0] == f"{len(TEXTS)} memories in 1 scopes to re-tokenize for {tokenizer_id()}"
    assert f"re-tokenizing memories: {len(TEXTS)} of {len(TEXTS)} (100 %)" in lines
    assert lines[-1].startswith("re-indexed in ") and "1 scopes re-tokenized (2 entries changed)" in lines[-1]
    assert cli("verify", "--home", legacy.home).code == 0
    again = cli("reindex", "--check", "--home", legacy.home)
    assert again.code == 0 and again.stdout.startswith("the indexes are current")


def test_serve_reindexes_a_stale_store_before_it_serves(legacy: HostPaths) -> None:
    done = cli("serve", "--binding", bind(legacy).token, "--home", legacy.home, timeout=120)
    assert done.code == 0, done
    lines = [line.split(";")[0] for line in done.error_lines]
    assert lines[0].startswith("engram-memory: INFO before serving: 3 memories in 1 scopes to re-tokenize")
    assert "engram-memory: INFO re-tokenizing memories: 3 of 3 (100 %)" in lines
    assert lines[-1] == "engram-memory: INFO serving over stdio"
    assert cli("reindex", "--check", "--home", legacy.home).code == 0
