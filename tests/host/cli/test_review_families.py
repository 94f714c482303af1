"""The review of an adjudicated family pair from the CLI (issue 20): `review show` puts the candidate beside
the current record it competes with, and `review accept --supersede | --keep-both` or `review reject` settle
it; each command is its own process against a real home, on both stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engram_memory.contract.instants import format_instant, parse_instant
from engram_memory.contract.tools import Tool
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML
from engram_memory.host.settings import HostPaths
from tests.host.clirun import assert_one_line_failure, cli
from tests.support.homes import bind, engine_for
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import unique_key

ADMIT = Tool.REQUEST_ADMISSION.value
OLD = "The platform team owns the ingress controller."
NEW = "The networking team owns the ingress controller since the reorg."
T0 = 1_700_000_000_000


def _admit(agent: InProcessAgent, text: str, t: int) -> dict[str, Any]:
    captured = agent.capture(text, valid_from_ms=t, reconciliation={"family_refs": ["team:ingress"]})
    args = {"candidate_id": captured["candidate_id"], "idempotency_key": unique_key("admit")}
    outcome: dict[str, Any] = agent.value(ADMIT, args)["outcome"]
    return outcome


@pytest.fixture
def pair(paths: HostPaths) -> tuple[str, str]:
    """(the current record, the candidate waiting beside it) under an `adjudicate` family rule."""
    text = DEFAULT_POLICY_TOML.replace("consented_families = []", 'consented_families = ["team:*"]')
    text += '\n[[family_rules]]\npattern = "team:*"\nmode = "adjudicate"\n'
    paths.policy.write_text(text, encoding="utf-8")
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        old = _admit(agent, OLD, T0)
        waiting = _admit(agent, NEW, T0 + 86_400_000)
    assert old["status"] == "accepted" and waiting["status"] == "pending_adjudication"
    return str(old["record_id"]), str(waiting["candidate_id"])


def _json(*args: str | Path) -> Any:
    done = cli(*args)
    assert done.code == 0 and done.stderr == "", done
    return json.loads(done.stdout)


def _state(home: Path, record_id: str) -> str:
    return str(_json("records", "show", record_id, "--json", "--home", home)["state"])


def test_review_show_puts_the_candidate_beside_the_current_record(paths: HostPaths, pair: tuple[str, str]) -> None:
    old, candidate = pair
    done = cli("review", "show", candidate, "--home", paths.home)
    assert done.code == 0, done
    assert "current memories of the same families" in done.stdout
    assert old in done.stdout and "team:ingress: adjudicate" in done.stdout
    flat = " ".join(done.stdout.split())
    assert "platform team owns" in flat and "networking team owns" in flat
    shown = _json("review", "show", candidate, "--json", "--home", paths.home)
    [member] = shown["family_members"]
    assert (member["record_id"], member["mode"], member["superseded_on_accept"]) == (old, "adjudicate", False)
    assert member["payload"]["components"][0]["text"] == OLD


def test_accept_with_supersede_makes_the_current_record_historical(paths: HostPaths, pair: tuple[str, str]) -> None:
    old, candidate = pair
    decided = _json("review", "accept", candidate, "--supersede", "--json", "--home", paths.home)
    assert decided["status"] == "accepted" and decided["superseded_record_ids"] == [old]
    assert _state(paths.home, old) == "historical"
    assert _state(paths.home, decided["record_id"]) == "accepted_current"
    plain = cli("review", "accept", candidate, "--home", paths.home)
    assert plain.code != 0  # decided already


def test_accept_keeping_both_leaves_the_current_record_current(paths: HostPaths, pair: tuple[str, str]) -> None:
    old, candidate = pair
    done = cli("review", "accept", candidate, "--keep-both", "--home", paths.home)
    assert done.code == 0, done
    assert "historical" not in done.stdout
    assert _state(paths.home, old) == "accepted_current"


def test_reject_leaves_the_current_record_alone(paths: HostPaths, pair: tuple[str, str]) -> None:
    old, candidate = pair
    decided = _json("review", "reject", candidate, "--json", "--home", paths.home)
    assert decided["status"] == "rejected" and decided["superseded_record_ids"] == []
    assert _state(paths.home, old) == "accepted_current"


def test_supersede_and_keep_both_together_are_refused(paths: HostPaths, pair: tuple[str, str]) -> None:
    _old, candidate = pair
    line = assert_one_line_failure(
        cli("review", "accept", candidate, "--supersede", "--keep-both", "--home", paths.home)
    )
    assert "--supersede" in line and "--keep-both" in line
    assert _json("review", "list", "--json", "--home", paths.home)[0]["candidate_id"] == candidate


def test_records_list_valid_at_reads_the_family_before_and_after_the_supersession(
    paths: HostPaths, pair: tuple[str, str]
) -> None:
    old, candidate = pair
    new = _json("review", "accept", candidate, "--supersede", "--json", "--home", paths.home)["record_id"]
    scope = ("--tenant", "tenant-a", "--workspace", "workspace-1", "--family", "team:ingress")

    def true_at(instant: str) -> list[str]:
        found = _json("records", "list", "--valid-at", instant, *scope, "--json", "--home", paths.home)
        return [item["record_id"] for item in found]

    assert true_at("2023-11-14T22:13:20.000Z") == [old]  # T0 exactly
    assert true_at("2023-11-15T22:13:19.999Z") == [old]  # a millisecond before the new one starts
    assert true_at("2023-11-15T22:13:20.000Z") == [new]
    [item] = _json("records", "list", "--valid-at", "2023-11-15T00:00:00.000Z", *scope, "--json", "--home", paths.home)
    assert (item["state"], item["valid_until"], item["until_inclusive"]) == (
        "historical",
        "2023-11-15T22:13:20.000Z",
        False,
    )
    table = cli("records", "list", "--valid-at", "2023-11-15T00:00:00.000Z", *scope, "--home", paths.home)
    assert table.code == 0 and old in table.stdout and "historical" in table.stdout


def test_records_list_valid_at_needs_a_scope_and_a_real_instant(paths: HostPaths, pair: tuple[str, str]) -> None:
    assert_one_line_failure(cli("records", "list", "--valid-at", "2023-11-15T00:00:00.000Z", "--home", paths.home))
    bad = ("--valid-at", "yesterday", "--tenant", "tenant-a", "--workspace", "workspace-1", "--home", paths.home)
    assert "--valid-at" in assert_one_line_failure(cli("records", "list", *bad))


def test_records_list_known_at_reads_the_family_as_the_store_knew_it(paths: HostPaths, pair: tuple[str, str]) -> None:
    old, candidate = pair
    new = _json("review", "accept", candidate, "--supersede", "--json", "--home", paths.home)["record_id"]
    [supersession] = [
        h
        for h in _json("records", "show", old, "--json", "--home", paths.home)["history"]
        if h["operation"] == "supersede"
    ]
    at_ms = parse_instant(supersession["at"])
    assert at_ms is not None
    scope = ("--tenant", "tenant-a", "--workspace", "workspace-1", "--family", "team:ingress")
    later = "2023-11-20T00:00:00.000Z"  # a valid time after both starts

    def known(instant_ms: int) -> list[str]:
        found = _json(
            "records",
            "list",
            "--valid-at",
            later,
            "--known-at",
            format_instant(instant_ms),
            *scope,
            "--json",
            "--home",
            paths.home,
        )
        return [item["record_id"] for item in found]

    assert known(at_ms - 1) == [old]
    assert known(at_ms) == [new]
    assert "--known-at" in assert_one_line_failure(
        cli("records", "list", "--valid-at", later, "--known-at", "soon", *scope, "--home", paths.home)
    )
