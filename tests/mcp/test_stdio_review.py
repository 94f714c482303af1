"""SPEC §4, §8, §12: a candidate left for a human is decided with `engram-memory review`, and the agent's
own `request_admission` call, repeated over MCP stdio with the same key, then replays that decision.

Owns its home and server, because it switches the policy to review mode.
"""

from __future__ import annotations

import json

import pytest

from engram_memory.host.settings import HostPaths
from tests.mcp.helpers import ADMIT, HostCli, capture, found_ids, ok_value, unique_word
from tests.support.agents import StdioAgent
from tests.support.homes import bind
from tests.support.payloads import unique_key

pytestmark = pytest.mark.stdio


def test_review_accept_by_the_host_is_replayed_to_the_agent_and_searchable(paths: HostPaths) -> None:
    paths.policy.write_text(
        paths.policy.read_text(encoding="utf-8").replace('mode = "auto"', 'mode = "review"'), encoding="utf-8"
    )
    host = HostCli(paths)
    word = unique_word("review")
    with StdioAgent(paths.home, bind(paths).token) as agent:
        candidate_id = capture(agent, f"The {word} service is owned by the platform team.")["candidate_id"]
        arguments = {"candidate_id": candidate_id, "idempotency_key": unique_key("admit")}
        first = ok_value(agent.call(ADMIT, arguments))
        assert first["replayed"] is False
        assert first["outcome"]["status"] == "pending_adjudication" and "record_id" not in first["outcome"]
        assert found_ids(agent, word) == []

        queue = json.loads(host.run("review", "list", "--json").stdout)
        assert [item["candidate_id"] for item in queue] == [candidate_id]
        decided = json.loads(host.run("review", "accept", candidate_id, "--json").stdout)
        assert decided["status"] == "accepted" and decided["answers_rewritten"] == 1

        again = ok_value(agent.call(ADMIT, arguments))
        assert again["replayed"] is True
        outcome = again["outcome"]
        assert (outcome["status"], outcome["candidate_id"], outcome["record_id"]) == (
            "accepted",
            candidate_id,
            decided["record_id"],
        )
        assert outcome["cursor"] == decided["cursor"]
        assert outcome["decision_receipt_digest"] == decided["decision_receipt_digest"]
        assert found_ids(agent, word) == [decided["record_id"]]
