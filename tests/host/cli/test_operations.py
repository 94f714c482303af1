"""`verify`, `serve`'s start-up check, `stats`, `audit export` and `revoke`, driven as the host drives them.

Every command runs as the host runs it against a real home (in process; those marked `process` in a
real subprocess); damage is done to the store's own file.
"""

from __future__ import annotations

import json
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from engram_memory.contract.instants import format_instant, parse_instant
from engram_memory.host.cli.common import INSTANT_FORMS
from engram_memory.host.compose import current_user
from engram_memory.host.settings import HostPaths
from tests.host.clirun import Done, assert_one_line_failure, cli, cli_process
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import capture_args, unique_key
from tests.support.raw import POSTGRES, raw_store, raw_vault, readable_in_store, relation_file, store_kind

ERROR = "engram-memory: error: "
START_MS = 1_800_000_000_000  # 2027-01-15T08:00:00.000Z
STEP_MS = 60_000
TEXTS = ("Deploys need two approvals from the platform rota.", "Hotfix branches are cut from the release tag.")
SECRET = "token: ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
AUDIT_KEYS = [
    "auditId",
    "at",
    "tool",
    "outcome",
    "tenant",
    "workspace",
    "principal",
    "agent_id",
    "session",
    "token_id",
    "request_digest",
    "response_digest",
]
TOKEN_ID_RE = re.compile(r"^bind_[a-z2-7]{16}$")


@dataclass(frozen=True)
class Site:
    paths: HostPaths
    records: list[str]
    pending: str
    calls: list[tuple[int, str, str]]  # (at_ms, tool, outcome) of every agent call, in order


def _ok(done: Done) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.code == 0, done
    return done.stdout


def _populate(paths: HostPaths) -> Site:
    """Alice keeps two records, leaves one candidate pending, has a secret rejected and asks to forget; bob keeps one.

    One agent call per minute from START_MS, so the audit log's times are known.
    """
    clock = ManualClock(START_MS)
    calls: list[tuple[int, str, str]] = []
    with steered_engine(paths, clock=clock) as engine:
        now_s = START_MS // 1000  # bindings valid at the clock's time
        alice = InProcessAgent(engine, bind(paths, now_s=now_s).binding)
        bob = InProcessAgent(engine, bind(paths, workspace="workspace-2", principal="bob", now_s=now_s).binding)

        def call(agent: InProcessAgent, tool: str, arguments: Any) -> dict[str, Any]:
            clock.now = START_MS + len(calls) * STEP_MS
            envelope = agent.call(tool, arguments)
            calls.append((clock.now, tool, "ok" if envelope["ok"] else envelope["error"]["code"]))
            return envelope

        records = []
        for agent, text in ((alice, TEXTS[0]), (alice, TEXTS[1]), (bob, TEXTS[0])):
            captured = call(agent, "engram_memory_capture", capture_args(text))["output"]["value"]
            admit = {"candidate_id": captured["candidate_id"], "idempotency_key": unique_key("admit")}
            records.append(call(agent, "engram_memory_request_admission", admit)["output"]["value"]["outcome"])
        pending = call(alice, "engram_memory_capture", capture_args("Still waiting for admission."))
        secret = call(alice, "engram_memory_capture", capture_args(SECRET))["output"]["value"]["candidate_id"]
        call(alice, "engram_memory_request_admission", {"candidate_id": secret, "idempotency_key": unique_key("a")})
        forget = {"record_id": records[0]["record_id"], "idempotency_key": unique_key("f"), "reason_ref": "r:1"}
        call(alice, "engram_memory_forget", forget)
    assert [outcome["status"] for outcome in records] == ["accepted"] * 3
    return Site(paths, [r["record_id"] for r in records], pending["output"]["value"]["candidate_id"], calls)


@pytest.fixture
def site(paths: HostPaths) -> Site:
    return _populate(paths)


JOURNAL_ROW = "tenant = 'tenant-a' AND workspace = 'workspace-1' AND cursor = ?"


def _flip_journal_byte(paths: HostPaths, cursor: int) -> None:
    """One letter of the journal row's event id changes behind the engine's back.

    SQLite: the byte is changed in the database file itself, so the append-only trigger never runs.
    PostgreSQL (whose files are the server's): an UPDATE by the owner with the trigger disabled.
    """
    with raw_store(paths) as db:
        event_id = str(db.value(f"SELECT event_id FROM journal WHERE {JOURNAL_ROW}", (cursor,)))
        body = str(db.value(f"SELECT body FROM journal WHERE {JOURNAL_ROW}", (cursor,)))
    needle = f'"event_id":"{event_id}"'
    at = body.find(needle) + 16
    assert at >= 16 and body.find(needle, at) < 0
    changed = "2" if body[at] != "2" else "3"
    if store_kind(paths) == POSTGRES:
        with raw_store(paths) as db:
            db.allow_journal_edits()
            edited = body[:at] + changed + body[at + 1 :]
            db.execute(f"UPDATE journal SET body = ? WHERE {JOURNAL_ROW}", (edited, cursor))
        return
    data = bytearray(paths.sqlite_file.read_bytes())
    found = data.find(needle.encode())
    assert found >= 0 and data.find(needle.encode(), found + 1) < 0
    data[found + 16] = ord(changed)
    paths.sqlite_file.write_bytes(bytes(data))


# -- erase ----------------------------------------------------------------------------------------


def test_erase_pushes_a_waiting_forget_out_of_the_store_files(paths: HostPaths) -> None:
    marker = "quillondrix" + secrets.token_hex(4)
    with steered_engine(paths, clock=ManualClock(START_MS)) as engine:
        agent = InProcessAgent(engine, bind(paths, now_s=START_MS // 1000).binding)
        record_id = agent.remember(f"The {marker} relay restarts at dawn.")
        forget = {"record_id": record_id, "idempotency_key": unique_key("f"), "reason_ref": "r:1"}
        agent.error_code("engram_memory_forget", forget)
        engine.approve_confirmation(engine.confirmations()[0][0].confirmation_id, decided_by="host:t", ttl_ms=60_000)
        agent.value("engram_memory_forget", forget)
    assert readable_in_store(paths, [marker]) == []  # no row holds it any more
    postgres = store_kind(paths) == POSTGRES
    if postgres:  # but the index tables' rewrite waits for later forgets to share it
        index_file = relation_file(paths, "lexical_index")
        with raw_store(paths) as db:
            assert db.count("erasure_requests") == 1
    assert "erased" in _ok(cli("erase", "--home", paths.home))
    if postgres:  # rewritten into a new file (what the old one held is the reliability tests' concern)
        assert relation_file(paths, "lexical_index") != index_file
        with raw_store(paths) as db:
            assert db.count("erasure_requests") == 0


# -- verify ---------------------------------------------------------------------------------------


def test_verify_exits_zero_and_says_so_when_the_store_is_clean(site: Site) -> None:
    lines = _ok(cli("verify", "--home", site.paths.home)).splitlines()
    assert lines == [
        "full check of 2 scope(s): 9 journal events, 4 sealed bodies, 4 opened, 3 index rows, 3 vectors",
        "no problems found",
    ]
    quick = json.loads(_ok(cli("verify", "--quick", "--json", "--home", site.paths.home)))
    assert quick == {
        "ok": True,
        "mode": "quick",
        "scopes": 2,
        "events": 9,
        "bodies": 4,
        "opened": 0,
        "indexed": 0,
        "embedded": 0,
        "unembedded": 0,
        "problems": [],
        "warnings": [],
    }
    full = json.loads(_ok(cli("verify", "--json", "--home", site.paths.home)))
    assert (full["indexed"], full["embedded"], full["unembedded"]) == (3, 3, 0)


@pytest.mark.process
def test_verify_exits_one_naming_journal_corrupt_when_a_journal_byte_is_flipped(site: Site) -> None:
    _flip_journal_byte(site.paths, 3)
    done = cli_process("verify", "--home", site.paths.home)
    assert "Traceback" not in done.stderr
    assert done.code == 1
    assert done.error_lines == [
        ERROR + "JOURNAL_CORRUPT: the journal of tenant-a/workspace-1 fails at cursor 3 (its columns disagree with"
        " its body)"
    ]
    assert "JOURNAL_CORRUPT" in done.stdout
    report = json.loads(cli("verify", "--json", "--home", site.paths.home).stdout)
    assert report["ok"] is False
    assert [(p["code"], p["tenant"], p["workspace"], p["subject"]) for p in report["problems"]] == [
        ("JOURNAL_CORRUPT", "tenant-a", "workspace-1", "cursor 3")
    ]


def test_verify_lists_every_problem_and_names_the_first_on_stderr(site: Site) -> None:
    with raw_store(site.paths) as db:
        db.execute("DELETE FROM sealed_bodies WHERE owner_id = ?", (site.pending,))
        db.execute(
            f"DELETE FROM lexical_index WHERE {db.index_rid} = (SELECT rid FROM records WHERE record_id = ?)",
            (site.records[2],),
        )
    done = cli("verify", "--json", "--home", site.paths.home)
    assert done.code == 1
    codes = [problem["code"] for problem in json.loads(done.stdout)["problems"]]
    assert codes[0] == "BLOB_MISSING" and "PROJECTION_STALE" in codes
    more = len(codes) - 1
    assert done.error_lines == [
        ERROR
        + f"BLOB_MISSING: the body of candidate {site.pending} in tenant-a/workspace-1 is missing (and {more} more)"
    ]


def test_verify_quick_leaves_the_index_to_the_full_check(site: Site) -> None:
    with raw_store(site.paths) as db:
        db.execute(
            f"DELETE FROM lexical_index WHERE {db.index_rid} = (SELECT rid FROM records WHERE record_id = ?)",
            (site.records[0],),
        )
    assert _ok(cli("verify", "--quick", "--home", site.paths.home)).endswith("no problems found\n")
    assert cli("verify", "--home", site.paths.home).code == 1


def test_verify_fails_in_one_line_without_a_home(tmp_path: Path) -> None:
    line = assert_one_line_failure(cli("verify", "--home", tmp_path / "nowhere"))
    assert line.startswith(ERROR)


# -- serve's start-up check -----------------------------------------------------------------------


def _serve(site: Site, *, process: bool = False) -> Done:
    token = bind(site.paths).token
    run = cli_process if process else cli
    return run("serve", "--binding", token, "--home", site.paths.home, timeout=60)


@pytest.mark.process
def test_serve_starts_on_a_clean_store(site: Site) -> None:
    done = _serve(site, process=True)  # stdin is empty: the server starts, reads end-of-file and stops
    assert done.code == 0, done
    assert [line.split(";")[0] for line in done.error_lines] == ["engram-memory: INFO serving over stdio"]


@pytest.mark.process
def test_serve_refuses_a_store_whose_journal_has_a_flipped_byte(site: Site) -> None:
    _flip_journal_byte(site.paths, 3)
    line = assert_one_line_failure(_serve(site, process=True))
    assert line == (
        ERROR + "JOURNAL_CORRUPT: the journal of tenant-a/workspace-1 fails at cursor 3 (its columns disagree with"
        " its body); run engram-memory verify"
    )


def test_serve_refuses_a_store_with_a_missing_body(site: Site) -> None:
    with raw_store(site.paths) as db:
        db.execute("DELETE FROM sealed_bodies WHERE owner_id = ?", (site.records[1],))
    line = assert_one_line_failure(_serve(site))
    assert line == (
        ERROR + f"BLOB_MISSING: the body of record {site.records[1]} in tenant-a/workspace-1 is missing;"
        " run engram-memory verify"
    )


def test_serve_refuses_a_store_with_a_cursor_gap(site: Site) -> None:
    with raw_store(site.paths) as db:
        db.allow_journal_edits()
        db.execute("DELETE FROM journal WHERE workspace = 'workspace-2' AND cursor = 1")
    line = assert_one_line_failure(_serve(site))
    assert line.startswith(ERROR + "CURSOR_GAP: the journal of tenant-a/workspace-2 has a gap")


# -- stats ----------------------------------------------------------------------------------------


def test_stats_json_counts_states_queues_keys_sizes_and_index_health(site: Site) -> None:
    _ok(cli("revoke", bind(site.paths).binding.token_id, "--unlisted", "--home", site.paths.home))
    data = json.loads(_ok(cli("stats", "--json", "--home", site.paths.home)))
    files = data.pop("files")
    if store_kind(site.paths) == POSTGRES:  # sizes of the two databases, as the server reports them
        assert set(files) == {"store_database_bytes", "vault_database_bytes"}
        assert files["store_database_bytes"] > 0 and files["vault_database_bytes"] > 0
    else:
        assert set(files) == {"store_bytes", "store_wal_bytes", "vault_bytes", "vault_wal_bytes"}
        assert files["store_bytes"] > 0 and files["vault_bytes"] > 0
    per_scope = data.pop("per_scope")
    assert data == {
        "scopes": 2,
        "candidates": {"pending": 1, "accepted_current": 3, "rejected": 1, "withdrawn": 0},
        "records": {
            "accepted_current": 3,
            "accepted_disputed": 0,
            "historical": 0,
            "expired": 0,
            "trust_invalid": 0,
            "tombstoned": 0,
        },
        "journal_events": 9,
        "review_queue": 0,
        "open_confirmations": 1,
        "revoked_bindings": 1,
        "vault": {"keys": 4, "destroyed_keys": 4},
        "index": {"indexed": 3, "accepted_current": 3, "stray_rows": 0, "healthy": True},
    }
    assert [(s["tenant"], s["workspace"], s["journal_events"], s["indexed"]) for s in per_scope] == [
        ("tenant-a", "workspace-1", 7, 2),
        ("tenant-a", "workspace-2", 2, 1),
    ]
    assert per_scope[0]["candidates"]["pending"] == 1 and per_scope[0]["open_confirmations"] == 1
    assert all(s["index_healthy"] for s in per_scope)


def test_stats_reports_stale_index_when_a_row_is_missing(site: Site) -> None:
    with raw_store(site.paths) as db:
        db.execute(
            f"DELETE FROM lexical_index WHERE {db.index_rid} = (SELECT rid FROM records WHERE record_id = ?)",
            (site.records[2],),
        )
    data = json.loads(_ok(cli("stats", "--json", "--home", site.paths.home)))
    assert data["index"] == {"indexed": 2, "accepted_current": 3, "stray_rows": 0, "healthy": False}
    assert [s["index_healthy"] for s in data["per_scope"]] == [True, False]


def test_stats_prints_tables_for_people_without_memory_text(site: Site) -> None:
    text = _ok(cli("stats", "--home", site.paths.home))
    lines = [" ".join(line.split()) for line in text.splitlines()]
    assert "journal events 9" in lines
    assert "open confirmation requests 1" in lines
    assert "index 3 indexed of 3 current" in lines
    assert "index health ok" in lines
    assert "candidates pending 1" in lines
    # pending beside the review queue, and why they differ, said where both are shown
    assert "waiting for a person's review 0" in lines
    assert any(line.startswith("pending: captured and not yet decided") for line in lines)
    assert "tenant-a/workspace-1 7 1 0 2 2 2" in lines, text
    assert not any(word in text for word in ("Deploys", "Hotfix", "ghp_"))


# -- audit export ---------------------------------------------------------------------------------


def _audit(site: Site, *args: str | Path, process: bool = False) -> list[dict[str, Any]]:
    run = cli_process if process else cli
    return [json.loads(line) for line in _ok(run("audit", "export", *args, "--home", site.paths.home)).splitlines()]


@pytest.mark.process
def test_audit_export_writes_one_json_line_per_call_in_audit_order(site: Site) -> None:
    entries = _audit(site, process=True)
    assert [(parse_instant(e["at"]), e["tool"], e["outcome"]) for e in entries] == site.calls
    for entry in entries:
        assert list(entry) == AUDIT_KEYS
        assert re.fullmatch(r"aud_[a-z2-7]+", entry["auditId"])
        assert entry["tenant"] == "tenant-a" and entry["agent_id"] == "agent-1" and entry["session"] == "session-1"
        assert TOKEN_ID_RE.fullmatch(entry["token_id"])
        assert re.fullmatch(r"hmac-sha256:[0-9a-f]{64}", entry["request_digest"])
        assert re.fullmatch(r"hmac-sha256:[0-9a-f]{64}", entry["response_digest"])
    assert [(e["workspace"], e["principal"]) for e in entries[4:6]] == [("workspace-2", "bob")] * 2
    assert [(e["workspace"], e["principal"]) for e in entries[:4] + entries[6:]] == [("workspace-1", "alice")] * 8
    assert len({e["token_id"] for e in entries}) == 2
    assert len({entry["auditId"] for entry in entries}) == len(entries)
    assert [e["outcome"] for e in entries][-1] == "gate_failed"
    exported = json.dumps(entries)
    assert not any(word in exported for word in ("Deploys", "Hotfix", "ghp_", "Still waiting"))


def test_audit_export_keeps_since_inclusive_and_until_exclusive(site: Site) -> None:
    since, until = format_instant(START_MS + 2 * STEP_MS), format_instant(START_MS + 5 * STEP_MS)
    entries = _audit(site, "--since", since, "--until", until)
    assert [(parse_instant(e["at"]), e["tool"], e["outcome"]) for e in entries] == site.calls[2:5]
    assert _audit(site, "--since", format_instant(START_MS + 100 * STEP_MS)) == []


def test_audit_export_writes_a_private_file_with_output(site: Site, tmp_path: Path) -> None:
    target = tmp_path / "audit.jsonl"
    target.write_text("an older export\n", encoding="utf-8")
    said = _ok(cli("audit", "export", "--output", target, "--home", site.paths.home))
    assert said == f"exported {len(site.calls)} audit entries to {target}\n"
    lines = target.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(site.calls) and json.loads(lines[0])["tool"] == "engram_memory_capture"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".audit-")] == []


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("--since", "yesterday"), f"--since must be {INSTANT_FORMS}"),
        (("--until", "2026-02-30T00:00:00.000Z"), f"--until must be {INSTANT_FORMS}"),
        (
            ("--since", "2026-01-02T00:00:00.000Z", "--until", "2026-01-01T00:00:00.000Z"),
            "--until must be later than --since",
        ),
    ],
)
def test_audit_export_refuses_bad_instants_in_one_line(site: Site, args: tuple[str, ...], reason: str) -> None:
    assert assert_one_line_failure(cli("audit", "export", *args, "--home", site.paths.home)) == ERROR + reason


# -- revoke ---------------------------------------------------------------------------------------


def test_revoke_json_records_who_and_when_and_is_idempotent(paths: HostPaths) -> None:
    token_id = json.loads(
        _ok(
            cli(
                "bind", "--tenant", "t", "--workspace", "w", "--principal", "p", "--agent", "a", "--session", "s",
                "--purpose", "purpose:x", "--json", "--home", paths.home,
            )
        )
    )["token_id"]  # fmt: skip
    first = json.loads(_ok(cli("revoke", token_id, "--json", "--home", paths.home)))
    assert list(first) == ["token_id", "revoked_at", "revoked_by", "already_revoked"]
    assert first["token_id"] == token_id and first["already_revoked"] is False
    assert first["revoked_by"] == current_user()
    assert parse_instant(first["revoked_at"]) is not None
    again = json.loads(_ok(cli("revoke", token_id, "--json", "--home", paths.home)))
    assert again == {**first, "already_revoked": True}
    said = _ok(cli("revoke", token_id, "--home", paths.home))
    assert said == f"{token_id} was already revoked at {first['revoked_at']} by {current_user()}\n"
    with raw_vault(paths) as db:
        assert db.count("revocations") == 1


def test_revoke_says_what_it_did_for_people(paths: HostPaths) -> None:
    token_id = bind(paths).binding.token_id  # signed by the key alone: unlisted, as an older version's
    said = _ok(cli("revoke", token_id, "--unlisted", "--home", paths.home))
    assert said == f"revoked {token_id}: its calls now answer AUTHORIZATION_REVOKED\n"


@pytest.mark.parametrize("token_id", ["bind_short", "BIND_AAAAAAAAAAAAAAAA", "bind_aaaaaaaaaaaaaaa1", "eyJhbGciOi.x.y"])
def test_revoke_refuses_an_id_of_another_shape_in_one_line(paths: HostPaths, token_id: str) -> None:
    line = assert_one_line_failure(cli("revoke", token_id, "--home", paths.home))
    assert line == ERROR + "a token id looks like bind_ followed by 16 letters a-z and digits 2-7 (see `bindings list`)"
    with raw_vault(paths) as db:
        assert db.count("revocations") == 0
