"""Secret recall and false positives over a labelled corpus (issue 14): recall ≥ 97 %, false positives
≤ 1 % on the corpus and ≤ 0.5 % of the dev sets' turns (when the dev data sits beside the checkout).

The corpus (secret_corpus.py) is generated, so every run measures the same texts; the full mode
draws more values from each template.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from engram_memory.engine.secrets import DEFAULT_CATEGORIES, scan_text
from tests.reliability.scale import amount, report
from tests.reliability.secret_corpus import corpus

DEV_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def test_secret_recall_and_false_positives_on_the_labelled_corpus() -> None:
    samples = corpus(per_template=amount(8, 60))
    missed: Counter[str] = Counter()
    flagged: Counter[str] = Counter()
    for sample in samples:
        found = bool(scan_text(sample.text, categories=DEFAULT_CATEGORIES))
        if sample.secret and not found:
            missed[sample.kind] += 1
        elif not sample.secret and found:
            flagged[sample.kind] += 1
    positives = sum(sample.secret for sample in samples)
    negatives = len(samples) - positives
    recall = 100 * (1 - sum(missed.values()) / positives)
    false_positives = 100 * sum(flagged.values()) / negatives
    report("secret recall (labelled corpus)", recall, target=">= 97", unit="%")
    report("secret false positives (labelled corpus)", false_positives, target="<= 1", unit="%")
    report("secret corpus size", len(samples), unit="texts")
    assert recall >= 97, missed
    assert false_positives <= 1, flagged


def _dev_turns() -> list[str]:
    texts = []
    for path in sorted(DEV_DATA.glob("**/*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "qa" not in data:
            continue
        for key, turns in data.items():
            if key.startswith("session_") and isinstance(turns, list):
                texts += [str(turn.get("text", "")) for turn in turns if isinstance(turn, dict)]
    return texts


def test_false_positives_on_the_dev_turns() -> None:
    turns = _dev_turns()
    if not turns:
        pytest.skip(f"the dev data is not beside this checkout ({DEV_DATA})")
    flagged = sum(bool(scan_text(text)) for text in turns)
    share = 100 * flagged / len(turns)
    report("secret false positives (dev turns)", share, target="<= 0.5", unit=f"% of {len(turns):,}")
    assert share <= 0.5
