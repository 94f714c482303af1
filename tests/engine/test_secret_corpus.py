"""The secret detector on its own labelled corpus (tests/support/secret_corpus.py): the parts it was widened
against stay caught and nothing benign there is refused; the parts held apart from the last widening keep
issue 43's targets (bench/secret_detector.py prints every part; docs/benchmarks.md has the first
measurement of each)."""

from __future__ import annotations

from collections import Counter

import pytest

from engram_memory.engine.secrets import DEFAULT_CATEGORIES, scan_text
from tests.support.secret_corpus import KINDS, corpus

BENIGN_KINDS = frozenset({"public_key", "benign"})


def _wrong_by_kind(part: str) -> tuple[Counter[str], Counter[str]]:
    wrong: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for sample in corpus(part):
        total[sample.kind] += 1
        if bool(scan_text(sample.text, categories=DEFAULT_CATEGORIES)) != sample.secret:
            wrong[sample.kind] += 1
    return wrong, total


@pytest.mark.parametrize("part", ["tune", "seen", "seen2", "seen3", "seen4", "seen5", "held", "held2"])
def test_every_secret_of_the_widened_parts_is_caught_and_nothing_benign_is_refused(part: str) -> None:
    wrong, total = _wrong_by_kind(part)
    assert sum(wrong.values()) <= 0.005 * sum(total.values()), wrong


@pytest.mark.parametrize("part", ["held3", "held4"])
def test_the_parts_held_apart_keep_the_targets(part: str) -> None:
    """Recall >= 97 % overall and >= 90 % in every kind, false positives <= 1 %."""
    wrong, total = _wrong_by_kind(part)
    secret_kinds = [kind for kind in KINDS if kind not in BENIGN_KINDS]
    missed = sum(wrong[kind] for kind in secret_kinds) / sum(total[kind] for kind in secret_kinds)
    refused = sum(wrong[kind] for kind in BENIGN_KINDS) / sum(total[kind] for kind in BENIGN_KINDS)
    assert missed <= 0.03, wrong
    assert refused <= 0.01, wrong
    assert all(wrong[kind] <= 0.10 * total[kind] for kind in secret_kinds), wrong
