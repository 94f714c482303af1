"""The guard's fingerprints themselves: a candidate is looked up by every form a tombstone may hold."""

from __future__ import annotations

from engram_memory.engine.lifecycle.tombstone_guard import candidate_fingerprints, forgotten_fingerprints, guard_key

KEY = guard_key(b"\x01" * 32)
DIGEST = "sha256:" + "ab" * 32


def _payload(*texts: str) -> dict[str, object]:
    components = [{"component_id": f"c{n}", "kind": "statement", "text": text} for n, text in enumerate(texts)]
    return {"primary_component_id": "c0", "components": components}


def test_a_candidate_matches_a_tombstone_of_the_same_words() -> None:
    forgotten = forgotten_fingerprints(KEY, "sha256:" + "cd" * 32, _payload("The heron 運營 rollout."))
    looked_up = candidate_fingerprints(KEY, DIGEST, _payload("the HERON 运营  rollout"))
    assert set(forgotten) & set(looked_up)


def test_a_candidate_with_format_characters_also_matches_a_tombstone_written_before_they_were_dropped() -> None:
    split = "The her\u200bon rollout"
    looked_up = set(candidate_fingerprints(KEY, DIGEST, _payload(split)))
    now = set(forgotten_fingerprints(KEY, "sha256:" + "cd" * 32, _payload("The heron rollout"))) - {
        forgotten_fingerprints(KEY, "sha256:" + "cd" * 32, None)[0]
    }
    assert now <= looked_up
    # plain digest, keyed digest, the text without the format character, and the text as earlier split
    assert len(looked_up) == 4


def test_text_without_format_characters_is_looked_up_by_one_text_fingerprint_per_component() -> None:
    assert len(candidate_fingerprints(KEY, DIGEST, _payload("The heron rollout.", "운영팀 資料庫"))) == 2 + 2
