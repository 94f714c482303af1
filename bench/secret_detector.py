"""The secret detector on its labelled corpus (tests/support/secret_corpus.py), every part, by kind.

Run on demand (not part of `make test`):

    .venv/bin/python bench/secret_detector.py [--json]

Recall is the share of secrets caught, by kind and overall; false positives the share of benign texts
(public keys included) refused. `tune` and `seen` to `seen5` were tuned on; `held` and `held2` were each
measured once before a widening; `held3` and `held4` were written before the last widening and measured after it.
Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.secret_corpus import KINDS, corpus

from engram_memory.engine.secrets import DEFAULT_CATEGORIES, scan_text

PARTS = ("tune", "seen", "seen2", "seen3", "seen4", "seen5", "held", "held2", "held3", "held4")
BENIGN_KINDS = frozenset({"public_key", "benign"})


def measure(part: str) -> dict[str, Any]:
    right, total = Counter[str](), Counter[str]()
    for sample in corpus(part):
        total[sample.kind] += 1
        right[sample.kind] += bool(scan_text(sample.text, categories=DEFAULT_CATEGORIES)) == sample.secret
    secrets = [kind for kind in KINDS if kind not in BENIGN_KINDS]
    caught = sum(right[k] for k in secrets) / max(1, sum(total[k] for k in secrets))
    refused = sum(total[k] - right[k] for k in BENIGN_KINDS) / max(1, sum(total[k] for k in BENIGN_KINDS))
    row: dict[str, Any] = {"part": part, "recall": round(100 * caught, 1), "false_positives": round(100 * refused, 1)}
    for kind in KINDS:
        share = right[kind] / total[kind] if total[kind] else 0.0
        row[kind] = round(100 * (share if kind not in BENIGN_KINDS else 1 - share), 1)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args(argv)
    rows = [measure(part) for part in PARTS]
    if options.json:
        print(json.dumps(rows))
        return 0
    keys = ["recall", "false_positives", *KINDS]
    print("| part | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    for row in rows:
        print(f"| {row['part']} | " + " | ".join(str(row[key]) for key in keys) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
