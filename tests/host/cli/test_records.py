"""`engram-memory records ...` driven as the host drives it: a real process per command.

Records are made in-process by an agent, then the host works on them from the command line.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from engram_memory.contract.instants import format_instant
from engram_memory.host.compose import current_user
from engram_memory.host.settings import HostPaths
from tests.host.clirun import Done, assert_one_line_failure, cli
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine
from tests.support.homes import bind, remember
from tests.support.inprocess import InProcessAgent

RECORD_KEYS = {
    "record_id",
    "tenant",
    "workspace",
    "state",
    "record_digest",
    "candidate_id",
    "trust_class",
    "principal",
    "agent_id",
    "session",
    "captured_at",
    "admitted_at",
    "valid_from",
    "valid_to",
    "expires_at",
    "state_cursor",
    "superseded_by",
}
TRANSITION_KEYS = {
    "record_id",
    "tenant",
    "workspace",
    "operation",
    "from_state",
    "to_state",
    "cursor",
    "at",
    "event_id",
    "event_digest",
}
TEXTS = ("The kestrel gateway drains before deploys.", "The kestrel gateway now drains per zone.")


@pytest.fixture
def home(paths: HostPaths) -> HostPaths:
    return paths


def _ok(done: Done) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.code == 0, done
    return done.stdout


def _json(*args: str | Path) -> Any:
    return json.loads(_ok(cli(*args, "--json")))


def _records(paths: HostPaths, *args: str) -> Any:
    return _json("records", *args, "--home", paths.home)


def test_list_json_gives_metadata_and_never_text(home: HostPaths) -> None:
    old, new = remember(home, *TEXTS)
    (elsewhere,) = remember(home, "A record in the second workspace.", workspace="workspace-2")
    listed = _json("records", "list", "--home", home.home)
    assert [item["record_id"] for item in listed] == [old, new, elsewhere]
    assert all(set(item) == RECORD_KEYS for item in listed)
    assert {item["state"] for item in listed} == {"accepted_current"}
    raw = cli("records", "list", "--home", home.home, "--json").stdout
    assert "kestrel" not in raw and "second workspace" not in raw
    only = _json("records", "list", "--workspace", "workspace-2", "--home", home.home)
    assert [item["record_id"] for item in only] == [elsewhere]
    assert _json("records", "list", "--state", "historical", "--home", home.home) == []
    assert _json("records", "list", "--tenant", "nobody", "--home", home.home) == []


def test_list_for_people_shows_whole_ids(home: HostPaths) -> None:
    assert _ok(cli("records", "list", "--home", home.home)).strip() == "no records"
    ids = remember(home, *TEXTS)
    shown = _ok(cli("records", "list", "--no-text", "--home", home.home))
    assert all(record_id in shown for record_id in ids)
    assert "kestrel" not in shown  # with --no-text, no text (the default shows it: test_first_hour.py)


def test_supersede_then_rewind_swaps_and_show_tells_the_history(home: HostPaths) -> None:
    old, new = remember(home, *TEXTS)
    superseded = _records(home, "supersede", old, "--by", new, "--reason", "ticket:42")
    assert (superseded["record_id"], superseded["operation"]) == (old, "supersede")
    assert (superseded["from_state"], superseded["to_state"]) == ("accepted_current", "historical")
    (only,) = superseded["transitions"]
    assert set(only) == TRANSITION_KEYS | {"superseded_by"} and only["superseded_by"] == new
    rewound = _records(home, "rewind", old)
    assert (rewound["operation"], rewound["to_state"]) == ("rewind", "accepted_current")
    assert [(t["record_id"], t["operation"], t["to_state"]) for t in rewound["transitions"]] == [
        (new, "supersede", "historical"),
        (old, "rewind", "accepted_current"),
    ]
    cursors = [t["cursor"] for t in rewound["transitions"]]
    assert cursors[1] == cursors[0] + 1
    shown = _records(home, "show", new)
    assert set(shown) == RECORD_KEYS | {"supersedes", "history"}
    assert (shown["state"], shown["superseded_by"]) == ("historical", old)
    assert [(h["operation"], h["from_state"], h["to_state"]) for h in shown["history"]] == [
        ("accept", None, "accepted_current"),
        ("supersede", "accepted_current", "historical"),
    ]
    assert shown["history"][-1]["actor"] == {"principal": current_user(), "agent_id": "host", "session": "host"}
    first = _records(home, "show", old)["history"]
    assert [h["reason_ref"] for h in first] == [None, "ticket:42", None]
    assert "kestrel" not in json.dumps(shown)


def test_every_transition_answers_with_its_json_shape(home: HostPaths) -> None:
    record_id, other = remember(home, *TEXTS)
    steps: list[tuple[list[str], str, str]] = [
        (["dispute", record_id], "accepted_current", "accepted_disputed"),
        (["resolve", record_id, "--to", "current"], "accepted_disputed", "accepted_current"),
        (["dispute", record_id], "accepted_current", "accepted_disputed"),
        (["resolve", record_id, "--to", "historical"], "accepted_disputed", "historical"),
        (["rewind", record_id], "historical", "accepted_current"),
        (["mark-non-current", record_id], "accepted_current", "historical"),
        (["expire", record_id], "historical", "expired"),
        (["trust-invalidate", other], "accepted_current", "trust_invalid"),
        (["tombstone", record_id, "--yes"], "expired", "tombstoned"),
    ]
    for args, from_state, to_state in steps:
        answer = _records(home, *args, "--reason", "ticket:7")
        assert (answer["from_state"], answer["to_state"]) == (from_state, to_state), args
        assert all(set(t) >= TRANSITION_KEYS for t in answer["transitions"])
    listed = {item["record_id"]: item["state"] for item in _json("records", "list", "--home", home.home)}
    assert listed == {record_id: "tombstoned", other: "trust_invalid"}


def test_tombstone_needs_yes_and_then_erases(home: HostPaths) -> None:
    (record_id,) = remember(home, "The plover queue holds customer escalations.")
    line = assert_one_line_failure(cli("records", "tombstone", record_id, "--home", home.home))
    assert "--yes" in line
    assert _records(home, "show", record_id)["state"] == "accepted_current"
    answer = _records(home, "tombstone", record_id, "--yes")
    assert answer["erasure"]["surfaces"]["body"] == "erased"
    assert answer["erasure"]["surfaces"]["data_key"] == "destroyed"
    assert answer["erasure"]["coverage_receipt_digest"].startswith("sha256:")
    stored = b"".join(p.read_bytes() for p in Path(home.store_dir).rglob("*") if p.is_file())
    assert b"plover" not in stored.lower()


def test_transition_for_people_is_one_line_per_state_change(home: HostPaths) -> None:
    old, new = remember(home, *TEXTS)
    _ok(cli("records", "supersede", old, "--by", new, "--home", home.home))
    lines = _ok(cli("records", "rewind", old, "--home", home.home)).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"superseded {new} (tenant-a/workspace-1): accepted_current -> historical")
    assert lines[1].startswith(f"rewound {old} (tenant-a/workspace-1): historical -> accepted_current")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["dispute", "mem_nosuchrecord"], "no such record: mem_nosuchrecord"),
        (["show", "mem_nosuchrecord"], "no such record: mem_nosuchrecord"),
        (["rewind", "{current}"], "ILLEGAL_TRANSITION: rewind needs a record that is historical"),
        (["resolve", "{current}", "--to", "historical"], "ILLEGAL_TRANSITION: "),
        (["supersede", "{current}", "--by", "{current}"], "ILLEGAL_TRANSITION: the successor cannot be"),
        (["expire", "{tombstoned}"], "ALREADY_TERMINAL: record "),
        (["tombstone", "{tombstoned}", "--yes"], "ALREADY_TERMINAL: record "),
        (["dispute", "{current}", "--reason", ""], "INVALID_SCHEMA: "),
        (["resolve", "{current}", "--to", "sideways"], "'sideways' is not one of"),
        (["supersede", "{current}"], "Missing option '--by'"),
    ],
)
def test_failures_are_one_line_and_change_nothing(home: HostPaths, args: list[str], expected: str) -> None:
    current, tombstoned = remember(home, *TEXTS)
    _records(home, "tombstone", tombstoned, "--yes")
    before = _json("records", "list", "--home", home.home)
    filled = [arg.format(current=current, tombstoned=tombstoned) for arg in args]
    line = assert_one_line_failure(cli("records", *filled, "--home", home.home, "--json"))
    assert line.startswith("engram-memory: error: ") and expected in line
    assert _json("records", "list", "--home", home.home) == before


def test_records_without_a_home_fail_in_one_line(tmp_path: Path) -> None:
    line = assert_one_line_failure(cli("records", "list", "--home", tmp_path / "nowhere"))
    assert "init" in line


def test_expire_due_expires_what_is_past_its_expiry(home: HostPaths) -> None:
    an_hour_ago = ManualClock(start_ms=int(time.time() * 1000) - 3_600_000)
    with steered_engine(home, clock=an_hour_ago) as engine:
        agent = InProcessAgent(engine, bind(home).binding)
        retention = {"derivative_rule": "make-ineligible", "expires_at": format_instant(an_hour_ago.now + 60_000)}
        due = agent.remember("The wren cache warms at noon.", retention=retention)
        later = {"derivative_rule": "make-ineligible", "expires_at": format_instant(an_hour_ago.now + 86_400_000)}
        kept = agent.remember("The wren cache cools at midnight.", retention=later)
    answer = _json("records", "expire-due", "--home", home.home)
    (only,) = answer["expired"]
    assert set(only) == TRANSITION_KEYS | {"expires_at"}
    assert (only["record_id"], only["from_state"], only["to_state"]) == (due, "accepted_current", "expired")
    assert only["expires_at"] == format_instant(an_hour_ago.now + 60_000)
    history = _records(home, "show", due)["history"]
    assert history[-1]["actor"]["principal"] == "host:auto-expiry"
    assert _records(home, "show", kept)["state"] == "accepted_current"
    assert _json("records", "expire-due", "--home", home.home) == {"expired": []}
    assert _ok(cli("records", "expire-due", "--home", home.home)).strip() == "0 records expired"
