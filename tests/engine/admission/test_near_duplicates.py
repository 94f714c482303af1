# ruff: noqa: RUF001 - Chinese and Japanese text carries full-width punctuation on purpose
"""The near-duplicate rule (issue 20), in-process on both stores: off by default; when on, a near-identical
candidate waits for a person with the match shown, in every language, and nothing is ever dropped. (Text
that is the same once folded is one memory, `duplicate_exact`: the near texts here reorder their words.)"""

from __future__ import annotations

import pytest

from engram_memory.engine.admission.policy import NearDuplicates, PolicyError, policy_from_mapping
from engram_memory.engine.engine import Engine
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML
from engram_memory.host.settings import HostPaths
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import unique_key

ADMIT = "engram_memory_request_admission"
HOST = "host:reviewer"


def _rule(paths: HostPaths, action: str = "review", threshold: float = 0.9, families: bool = False) -> None:
    text = DEFAULT_POLICY_TOML.replace('action = "accept"', f'action = "{action}"')
    text = text.replace("threshold = 0.9", f"threshold = {threshold}")
    if families:
        text = text.replace("consented_families = []", 'consented_families = ["fact:*"]')
        text += '\n[[family_rules]]\npattern = "fact:*"\nmode = "supersede"\n'
    paths.policy.write_text(text, encoding="utf-8")


def _status(agent: InProcessAgent, text: str, **options: object) -> dict[str, object]:
    candidate_id = agent.capture(text, **options)["candidate_id"]
    outcome: dict[str, object] = agent.value(ADMIT, {"candidate_id": candidate_id, "idempotency_key": unique_key("a")})[
        "outcome"
    ]
    return outcome


def test_the_rule_is_off_by_default(agent: InProcessAgent) -> None:
    agent.remember("The nightly export writes parquet files to the analytics bucket.")
    again = _status(agent, "To the analytics bucket the nightly export writes parquet files.")
    assert again["status"] == "accepted"


def test_a_near_identical_candidate_waits_for_a_person_who_sees_the_match(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    _rule(paths)
    first = agent.remember("The nightly export writes parquet files to the analytics bucket.")
    waiting = _status(agent, "To the analytics bucket the nightly export writes Parquet files!")
    assert waiting["status"] == "pending_adjudication"
    [queued] = steered.review_queue()
    assert queued.review_reasons == ("near_duplicate",)
    view = steered.candidate_view(str(waiting["candidate_id"]))
    [match] = view.near_matches
    assert match.record_id == first and match.similarity == 1.0
    assert match.payload["components"][0]["text"].startswith("The nightly export")
    kept = steered.accept_candidate(str(waiting["candidate_id"]), decided_by=HOST)
    assert kept.status == "accepted" and kept.record_id != first
    assert sorted(agent.found_ids("nightly export parquet")) == sorted([first, str(kept.record_id)])


def test_different_short_or_superseding_texts_pass(agent: InProcessAgent, paths: HostPaths) -> None:
    _rule(paths, families=True)
    agent.remember("The nightly export writes parquet files to the analytics bucket.")
    assert _status(agent, "The weekly export writes CSV files to the finance share.")["status"] == "accepted"
    agent.remember("Thanks, sounds good!")
    assert _status(agent, "Sounds good, thanks!")["status"] == "accepted"  # fewer than min_terms tokens
    old = _status(agent, "The staging refresh runs every night at two.", reconciliation={"family_refs": ["fact:x"]})
    new = _status(
        agent,
        "The staging refresh runs every night at three.",
        valid_from_ms=1_700_000_100_000,
        reconciliation={"family_refs": ["fact:x"]},
    )
    assert new["status"] == "accepted" and new["superseded_record_ids"] == [old["record_id"]]


@pytest.mark.parametrize(
    ("stored", "again"),
    [
        (
            "배포는 격주 화요일 오전에 진행하며 핫픽스는 리뷰어 승인 후에만 포함한다.",
            "핫픽스는 리뷰어 승인 후에만 포함한다, 배포는 격주 화요일 오전에 진행하며",
        ),
        (
            "发布列车每隔一个星期二出发，热修复须经评审者批准才能搭车。",
            "熱修復須經評審者批准才能搭車，發布列車每隔一個星期二出發。",
        ),
        (
            "リリースは隔週火曜日で、ホットフィックスはレビュアーの承認が必要です。",
            "ホットフィックスはレビュアーの承認が必要です、リリースは隔週火曜日で！",
        ),
    ],
)
def test_near_identical_korean_chinese_and_japanese_are_found(
    agent: InProcessAgent, paths: HostPaths, stored: str, again: str
) -> None:
    _rule(paths)
    agent.remember(stored)
    assert _status(agent, again)["status"] == "pending_adjudication"


@pytest.mark.parametrize(
    ("table", "reason"),
    [
        ({"action": "drop"}, "near_duplicates.action"),
        ({"threshold": 0}, "near_duplicates.threshold"),
        ({"threshold": 1.5}, "near_duplicates.threshold"),
        ({"semantic_threshold": "high"}, "near_duplicates.semantic_threshold"),
        ({"min_terms": 0}, "near_duplicates.min_terms"),
        ({"other": 1}, "near_duplicates.other"),
    ],
)
def test_a_bad_rule_is_refused_naming_the_key(table: dict[str, object], reason: str) -> None:
    with pytest.raises(PolicyError, match=reason.replace(".", r"\.")):
        policy_from_mapping({"near_duplicates": table})


def test_the_default_rule_leaves_the_policy_digest_as_it_was() -> None:
    assert policy_from_mapping({}).digest == policy_from_mapping({"near_duplicates": {"action": "accept"}}).digest
    assert policy_from_mapping({"near_duplicates": {"action": "review"}}).near_duplicates == NearDuplicates("review")


SPELLED = (
    "The colour of the staging banner is grey so nobody mistakes it for production.",
    "The color of the staging banner is gray so nobody mistakes it for production.",
)


def test_with_a_model_a_respelling_the_tokens_miss_is_found_by_the_embeddings(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    _rule(paths)
    first = agent.remember(SPELLED[0])
    waiting = _status(agent, SPELLED[1])
    assert waiting["status"] == "pending_adjudication"
    [match] = steered.candidate_view(str(waiting["candidate_id"])).near_matches
    assert match.record_id == first and match.similarity < 0.9
    assert match.semantic is not None and match.semantic >= NearDuplicates().semantic_threshold


def test_without_a_model_the_same_respelling_is_accepted(lexical_agent: InProcessAgent, paths: HostPaths) -> None:
    _rule(paths)
    lexical_agent.remember(SPELLED[0])
    assert _status(lexical_agent, SPELLED[1])["status"] == "accepted"
