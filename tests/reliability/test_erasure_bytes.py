"""Erasure, byte for byte (issue 14): after forget, withdraw, rejection and a host tombstone, the text and
its index tokens are in no byte of the store's files, of a backup taken afterwards, or of the server's log.

The agent works through a real `serve` over stdio whose stderr goes to a file; the host approves the
gated calls and tombstones one record from its own engine, as its command line would.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from engram_memory.engine.lifecycle import host_transitions as maintenance
from engram_memory.host.recovery.backup import backup_home
from tests.host.clirun import LoggedAgent
from tests.reliability.scale import report
from tests.support.homes import bind, engine_for, make_home
from tests.support.payloads import PURPOSE, capture_args, unique_key

SECRET_VALUE = "Zq8#wLm2v" + "Tr0ub4dor&3"


def _store_bytes(store: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(store.rglob("*")) if path.is_file())


def _approve_all(home_paths: object) -> None:
    with engine_for(home_paths) as engine:  # type: ignore[arg-type]
        for row, status in engine.confirmations():
            if status == "requested":
                engine.approve_confirmation(row.confirmation_id, decided_by="host:erasure", ttl_ms=300_000)


def test_erased_text_is_in_no_store_file_backup_or_log(tmp_path: Path) -> None:
    paths = make_home(tmp_path / "home")
    issued = bind(paths)
    markers = {
        name: f"{name}marker{secrets.token_hex(4)}" for name in ("forgotten", "withdrawn", "rejected", "tombstoned")
    }
    log = tmp_path / "serve.log"
    env = {"ENGRAM_BINDING": issued.token, "ENGRAM_EMBEDDING_MODEL": "off"}
    with LoggedAgent(paths.home, log, env=env) as agent:

        def remember(text: str) -> str:
            candidate = agent.value("engram_memory_capture", capture_args(text))["candidate_id"]
            admitted = agent.value(
                "engram_memory_request_admission", {"candidate_id": candidate, "idempotency_key": unique_key("a")}
            )
            return str(admitted["outcome"]["record_id"])

        forgotten = remember(f"The {markers['forgotten']} cluster keeps its quorum.")
        tombstoned = remember(f"The {markers['tombstoned']} runbook moved to the wiki.")
        live = f"keptmarker{secrets.token_hex(4)}"
        keeper = remember(f"An unrelated {live} neighbour keeps the index busy.")
        pending = agent.value("engram_memory_capture", capture_args(f"A draft about {markers['withdrawn']}."))
        rejected = agent.value(
            "engram_memory_capture", capture_args(f'{markers["rejected"]} password = "{SECRET_VALUE}"')
        )
        outcome = agent.value(
            "engram_memory_request_admission",
            {"candidate_id": rejected["candidate_id"], "idempotency_key": unique_key("r")},
        )["outcome"]
        assert outcome["status"] == "rejected", outcome

        forget = {"record_id": forgotten, "idempotency_key": unique_key("f"), "reason_ref": "r"}
        withdraw = {"candidate_id": pending["candidate_id"], "idempotency_key": unique_key("w"), "reason_ref": "r"}
        for tool, args in (("engram_memory_forget", forget), ("engram_memory_withdraw", withdraw)):
            assert agent.error_code(tool, args) == "gate_failed"
            _approve_all(paths)
            agent.value(tool, args)
        with engine_for(paths) as engine:
            maintenance.tombstone(engine.deps, tombstoned, decided_by="host:erasure")
            assert engine.deps.store.erase_physically(now=True)
        assert agent.value("engram_memory_search", {"query": "neighbour", "purpose_ref": PURPOSE})["records"]
        assert keeper

    backup = tmp_path / "after.backup"
    backup_home(paths, backup)
    surfaces = {
        "store files": _store_bytes(paths.store_dir).lower(),
        "backup": backup.read_bytes().lower(),
        "server log": log.read_bytes().lower(),
    }
    # The check can fail: a live memory's index tokens are in the store's files, and the log was written.
    assert live.encode() in surfaces["store files"] and surfaces["server log"]
    found = [
        (name, surface)
        for name, marker in markers.items()
        for surface, data in surfaces.items()
        if marker.encode() in data
    ]
    assert found == []
    assert SECRET_VALUE.lower().encode() not in surfaces["store files"] + surfaces["server log"]
    report("erased texts absent from store files, backup and log", len(markers) * len(surfaces), unit="checks")
