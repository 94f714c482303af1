"""`engram-memory review list|show|accept|reject`, driven as the host drives it: a real process per command.

The candidates are made in-process through the same engine an agent reaches; every review command runs
as its own subprocess against that home, so what is tested is what a person at a terminal gets.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from engram_memory.contract.tools import Tool
from engram_memory.host.compose import current_user
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML
from engram_memory.host.settings import HostPaths
from tests.host.clirun import Done, assert_one_line_failure, cli
from tests.support.homes import bind, engine_for, make_home
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import unique_key

ADMIT = Tool.REQUEST_ADMISSION.value
ERROR = "engram-memory: error: "
EMAIL = "dana.quill@acme.io"
MARKER = "zanzibarquux"
ENTRY_KEYS = {
    "candidate_id",
    "state",
    "in_review",
    "tenant",
    "workspace",
    "principal",
    "agent_id",
    "session",
    "trust_class",
    "captured_at",
    "review_reasons",
    "size_bytes",
    "citation_count",
    "secret_categories",
}
DECISION_KEYS = {
    "candidate_id",
    "status",
    "record_id",
    "reasons",
    "tenant",
    "workspace",
    "cursor",
    "event_id",
    "decision_receipt_digest",
    "decided_by",
    "decided_at",
    "answers_rewritten",
    "key_destruction",
    "superseded_record_ids",
}


@dataclass(frozen=True)
class Site:
    paths: HostPaths
    flagged: str  # in review, its text holds an e-mail address and a control character
    plain: str  # in review
    unsent: str  # pending, no admission asked
    keys: dict[str, str]

    @property
    def home(self) -> Path:
        return self.paths.home

    def replay(self, candidate_id: str) -> dict[str, Any]:
        with engine_for(self.paths) as engine:
            agent = InProcessAgent(engine, bind(self.paths).binding)
            return agent.value(ADMIT, {"candidate_id": candidate_id, "idempotency_key": self.keys[candidate_id]})


@pytest.fixture
def site(paths: HostPaths) -> Site:
    """A home in review mode with two candidates waiting for a person and one never sent to review."""
    paths.policy.write_text(DEFAULT_POLICY_TOML.replace('mode = "auto"', 'mode = "review"'), encoding="utf-8")
    keys: dict[str, str] = {}
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        waiting = []
        for text in (
            f"Invoice disputes about {MARKER} go to {EMAIL}; \x1b[2J is what the export wrote.",
            "Release trains leave every second Tuesday.",
        ):
            candidate_id = agent.capture(text)["candidate_id"]
            keys[candidate_id] = unique_key("admit")
            answer = agent.value(ADMIT, {"candidate_id": candidate_id, "idempotency_key": keys[candidate_id]})
            assert answer["outcome"]["status"] == "pending_adjudication"
            waiting.append(candidate_id)
        unsent = agent.capture("Nobody asked admission for this yet.")["candidate_id"]
    return Site(paths, waiting[0], waiting[1], unsent, keys)


def _ok(done: Done) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.code == 0, done
    assert done.stderr == "", done.stderr
    return done.stdout


def _json(*args: str | Path) -> Any:
    return json.loads(_ok(cli(*args)))


# -- review list ----------------------------------------------------------------------------------


def test_review_list_json_is_metadata_only_oldest_first(site: Site) -> None:
    done = cli("review", "list", "--json", "--home", site.home)
    items = json.loads(_ok(done))
    assert [item["candidate_id"] for item in items] == [site.flagged, site.plain]
    assert all(set(item) == ENTRY_KEYS for item in items)
    assert items[0]["review_reasons"] == ["review_mode"] and items[0]["in_review"] is True
    assert (items[0]["tenant"], items[0]["principal"], items[0]["trust_class"]) == ("tenant-a", "alice", "asserted")
    assert MARKER not in done.stdout and EMAIL not in done.stdout
    everything = _json("review", "list", "--all", "--json", "--home", site.home)
    assert [item["candidate_id"] for item in everything] == [site.flagged, site.plain, site.unsent]
    assert everything[2]["in_review"] is False and everything[2]["review_reasons"] == []


def test_review_list_for_people_names_each_candidate_and_why(site: Site, tmp_path: Path) -> None:
    done = cli("review", "list", "--limit", "1", "--home", site.home)
    assert done.code == 0
    text = done.stdout
    assert site.flagged in text and site.plain not in text
    assert "the policy sends every candidate to review" in text and "tenant-a/workspace-1" in text
    assert done.stderr == (
        "engram-memory: showing the first 1 candidates (oldest first); more exist (raise --limit to see them)\n"
    )
    whole = cli("review", "list", "--limit", "2", "--home", site.home)
    assert whole.code == 0 and whole.stderr == ""
    assert MARKER not in text
    empty = make_home(tmp_path / "empty")
    assert _ok(cli("review", "list", "--home", empty.home)) == "no candidates waiting for review\n"


# -- review show ----------------------------------------------------------------------------------


def test_review_show_json_decrypts_and_locates_every_finding(site: Site) -> None:
    shown = _json("review", "show", site.flagged, "--json", "--home", site.home)
    assert set(shown) == {"candidate", "payload", "evidence", "findings", "family_members", "near_matches"}
    assert shown["family_members"] == []
    assert set(shown["candidate"]) == ENTRY_KEYS
    text = shown["payload"]["components"][0]["text"]
    assert MARKER in text and "\x1b" in text
    [finding] = shown["findings"]
    assert (finding["category"], finding["path"]) == ("personal_data", "payload/components/0/text")
    assert text[finding["start"] : finding["end"]] == EMAIL
    assert shown["evidence"]["evidence_ref"] == "evidence:review"


def test_review_show_marks_findings_in_plain_text_and_never_passes_control_characters(site: Site) -> None:
    text = _ok(cli("review", "show", site.flagged, "--home", site.home))
    assert f"[[personal_data: {EMAIL}]]" in text
    assert "personal_data at payload/components/0/text" in text
    assert MARKER in text and "doc:handbook" in text
    assert "\x1b" not in text and "\\x1b[2J" in text


# -- review accept / reject -----------------------------------------------------------------------


def test_review_accept_json_and_the_agent_replays_the_decision(site: Site) -> None:
    decided = _json("review", "accept", site.flagged, "--json", "--home", site.home)
    assert set(decided) == DECISION_KEYS
    assert (decided["status"], decided["reasons"], decided["decided_by"]) == (
        "accepted",
        ["host_review"],
        current_user(),
    )
    assert decided["record_id"].startswith("mem_") and decided["answers_rewritten"] == 1
    assert decided["key_destruction"] == "complete"
    replay = site.replay(site.flagged)
    assert replay["replayed"] is True
    outcome = replay["outcome"]
    assert (outcome["status"], outcome["record_id"], outcome["cursor"]) == (
        "accepted",
        decided["record_id"],
        decided["cursor"],
    )
    assert outcome["decision_receipt_digest"] == decided["decision_receipt_digest"]
    assert [item["candidate_id"] for item in _json("review", "list", "--json", "--home", site.home)] == [site.plain]


def test_a_review_decision_keeps_its_reason_ref_in_the_journal_and_verify_passes(site: Site) -> None:
    decided = _json("review", "accept", site.flagged, "--reason", "ticket:OPS-7", "--json", "--home", site.home)
    shown = _json("records", "show", decided["record_id"], "--json", "--home", site.home)
    assert [item["reason_ref"] for item in shown["history"]] == ["ticket:OPS-7"]
    _ok(cli("verify", "--home", site.home))


def test_a_review_reason_ref_that_breaks_the_ref_rule_is_refused_and_nothing_is_decided(site: Site) -> None:
    line = assert_one_line_failure(cli("review", "reject", site.plain, "--reason", "x" * 513, "--home", site.home))
    assert line == ERROR + "INVALID_SCHEMA: a reason ref is an NFC string of 1-512 UTF-8 bytes"
    assert site.plain in [item["candidate_id"] for item in _json("review", "list", "--json", "--home", site.home)]


def test_review_reject_for_people_and_as_json(site: Site) -> None:
    said = _ok(cli("review", "reject", site.plain, "--home", site.home))
    assert said.startswith(f"rejected {site.plain} (tenant-a/workspace-1, cursor ")
    assert "its body is destroyed" in said
    assert site.replay(site.plain)["outcome"]["status"] == "rejected"
    decided = _json("review", "reject", site.unsent, "--json", "--home", site.home)
    assert set(decided) == DECISION_KEYS
    assert (decided["status"], decided["record_id"], decided["answers_rewritten"]) == ("rejected", None, 0)


# -- one-line failures ----------------------------------------------------------------------------


def test_review_refusals_are_one_line_and_name_the_code(site: Site) -> None:
    _ok(cli("review", "reject", site.plain, "--home", site.home))
    _ok(cli("review", "accept", site.flagged, "--home", site.home))
    cases = [
        (("review", "accept", "cand_nope"), "no such candidate: cand_nope"),
        (("review", "show", "cand_nope"), "no such candidate: cand_nope"),
        (("review", "accept", site.plain), f"ALREADY_TERMINAL: candidate {site.plain} is rejected, not pending"),
        (("review", "reject", site.flagged), f"ILLEGAL_TRANSITION: candidate {site.flagged} is accepted_current"),
    ]
    for args, reason in cases:
        line = assert_one_line_failure(cli(*args, "--json", "--home", site.home))
        assert line.startswith(ERROR + reason), line
    decided = _json("review", "show", site.plain, "--json", "--home", site.home)
    assert (decided["candidate"]["state"], decided["reasons"]) == ("rejected", ["review:person"])


def test_review_decision_with_a_broken_policy_is_policy_unavailable(site: Site) -> None:
    site.paths.policy.write_text('mode = "sometimes"\n', encoding="utf-8")
    line = assert_one_line_failure(cli("review", "accept", site.plain, "--home", site.home))
    assert line == (
        ERROR + "POLICY_UNAVAILABLE: mode must be 'auto' or 'review' (policy.toml); fix it, then decide again"
    )
    site.paths.policy.unlink()
    line = assert_one_line_failure(cli("review", "reject", site.plain, "--home", site.home))
    assert line.startswith(ERROR + "POLICY_UNAVAILABLE: cannot read policy.toml (")
    # Reading the queue needs no policy: the host can still see what waits.
    assert len(_json("review", "list", "--json", "--home", site.home)) == 2


def test_review_without_a_home_or_with_a_bad_limit_fails_in_one_line(tmp_path: Path) -> None:
    line = assert_one_line_failure(cli("review", "list", "--home", tmp_path / "nowhere"))
    assert line.startswith(ERROR) and "engram-memory init" in line
    line = assert_one_line_failure(cli("review", "list", "--limit", "0", "--home", tmp_path))
    assert line.startswith(ERROR) and "--limit" in line
