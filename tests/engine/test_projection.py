"""A search hit's record is the summary of the view get returns: never more, never a field get lacks."""

from __future__ import annotations

import copy
from typing import Any

from engram_memory.engine.projection import summary_view
from tests.support.inprocess import InProcessAgent

VIEW: dict[str, Any] = {
    "record_id": "mem_abc",
    "state": "accepted_current",
    "record_digest": "sha256:" + "1" * 64,
    "purpose_ref": "purpose:tests",
    "valid_time": {"t": 1},
    "components": [{"citation_ids": ["s"], "component_id": "c", "kind": "decision", "text": "x"}],
    "primary_component_id": "c",
    "primary_event": {"at": 1, "citation_id": "s", "type_ref": "event:x"},
    "citations": [
        {
            "citation_id": "s",
            "content_digest": "sha256:" + "2" * 64,
            "locator": {"scheme": "document", "value": "#a"},
            "source_ref": "doc:a",
        }
    ],
    "retention": {"derivative_rule": "make-ineligible"},
    "reconciliation": {"family_refs": []},
    "trust_class": "asserted",
    "provenance": {
        "candidate_id": "cand_x",
        "principal": "alice",
        "agent_id": "agent-1",
        "session": "s-1",
        "captured_at": "2026-12-06T00:00:00.000Z",
        "admitted_at": "2026-12-06T00:00:01.000Z",
    },
}


def test_the_summary_leaves_out_digests_defaults_and_bookkeeping() -> None:
    summary = summary_view(VIEW)
    assert set(summary) == {
        "record_id",
        "state",
        "valid_time",
        "components",
        "primary_component_id",
        "primary_event",
        "citations",
        "trust_class",
        "provenance",
    }
    assert summary["citations"] == [
        {"citation_id": "s", "locator": {"scheme": "document", "value": "#a"}, "source_ref": "doc:a"}
    ]
    assert summary["provenance"] == {"principal": "alice", "captured_at": "2026-12-06T00:00:00.000Z"}
    assert VIEW["citations"][0]["content_digest"].startswith("sha256:")  # the view itself is left as it was


def test_the_summary_keeps_a_retention_or_families_that_say_something() -> None:
    view = copy.deepcopy(VIEW)
    view["retention"] = {"derivative_rule": "retain", "expires_at": "2027-01-01T00:00:00.000Z"}
    view["reconciliation"] = {"family_refs": ["family:release"]}
    summary = summary_view(view)
    assert summary["retention"] == view["retention"]
    assert summary["reconciliation"] == {"family_refs": ["family:release"]}


def test_the_summary_never_brings_back_what_the_host_redacted() -> None:
    view = copy.deepcopy(VIEW)
    del view["provenance"]
    del view["citations"][0]["source_ref"]
    summary = summary_view(view)
    assert "provenance" not in summary
    assert "source_ref" not in summary["citations"][0]


def test_a_search_hit_is_the_summary_of_what_get_returns(agent: InProcessAgent) -> None:
    record_id = agent.remember("The blue-green switch happens only after the smoke suite passes.")
    packet = agent.search("blue-green smoke suite")["records"][0]
    whole = agent.get(record_id)["output"]["value"]
    assert packet["record"]["record_id"] == record_id
    assert packet["record"] == summary_view(whole["record"])
    assert packet["redaction_receipt_digest"] == whole["redaction_receipt_digest"]
    assert whole["record"]["record_digest"] == whole["read_receipt"]["record_digest"]
