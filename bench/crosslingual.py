"""Cross-language retrieval: bench/locomo.py's protocol, reported per file and per language pair.

Run on demand (not part of `make test`):

    .venv/bin/python bench/crosslingual.py DATA_DIR [--json] [--channels lexical|hybrid]

DATA_DIR is a folder of LoCoMo-format files whose questions carry `query_lang` and `memory_lang` (as
the cross-language dev set's do: every question asked in another language than the memory that answers
it). Each file is its own workspace, run through the engine exactly as bench/locomo.py runs one; the
same per-question scores are then grouped by file, by language pair (query → memory) and by direction
(English → Korean/Chinese/Japanese, the reverse, between two of those, Simplified ↔ Traditional). Nothing
about particular files is known here. Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from locomo import KS, SCORED_CATEGORIES, load_conversation, run_conversations

CJK = frozenset({"ko", "zh", "zh-hant", "zh-mixed", "ja"})
CHINESE = frozenset({"zh", "zh-hant", "zh-mixed"})


def direction(query: str, memory: str) -> str:
    if query == "en":
        return "English query → CJK memory"
    if memory == "en":
        return "CJK query → English memory"
    if query in CHINESE and memory in CHINESE:
        return "Simplified ↔ Traditional Chinese"
    return "CJK ↔ CJK, different languages"


def _languages(path: Path) -> list[tuple[str, str]]:
    """Each scored question's (query language, memory language), in the order bench/locomo.py asks them."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return [
        (str(qa.get("query_lang", "?")), str(qa.get("memory_lang", "?")))
        for qa in data.get("qa", [])
        if qa.get("category") in SCORED_CATEGORIES and qa.get("evidence")
    ]


def _mean(rows: list[dict[str, float]], key: str) -> float:
    return round(100 * statistics.fmean(row[key] for row in rows), 1) if rows else 0.0


def _summary(rows: list[dict[str, float]]) -> dict[str, Any]:
    return {"questions": len(rows), **{f"R@{k}": _mean(rows, f"R@{k}") for k in KS}, "Hit@10": _mean(rows, "Hit@10")}


def run(folder: Path, channels: str) -> dict[str, Any]:
    files = sorted(folder.glob("*.json"))
    if not files:
        raise SystemExit(f"no *.json files in {folder}")
    scored: list[dict[str, float]] = []
    groups: dict[str, dict[str, list[dict[str, float]]]] = {"file": defaultdict(list), "pair": defaultdict(list)}
    groups["direction"] = defaultdict(list)
    totals: dict[str, Any] = {}
    for path in files:
        rows: list[dict[str, float]] = []
        result = run_conversations([load_conversation(path)], channels, rows)
        languages = _languages(path)
        if len(languages) != len(rows):
            raise SystemExit(f"{path.name}: {len(rows)} scored questions but {len(languages)} language pairs")
        for row, (query, memory) in zip(rows, languages, strict=True):
            groups["file"][path.stem].append(row)
            groups["pair"][f"{query} → {memory}"].append(row)
            groups["direction"][direction(query, memory)].append(row)
        scored.extend(rows)
        for key in ("search_p50_ms", "search_p95_ms", "ingest_per_s"):
            totals.setdefault(key, []).append(result[key])
        print(f"{path.name}: R@10 {_mean(rows, 'R@10')}", file=sys.stderr, flush=True)
    return {
        "all": _summary(scored),
        **{name: {key: _summary(rows) for key, rows in sorted(group.items())} for name, group in groups.items()},
        "speed (median over files)": {key: statistics.median(values) for key, values in totals.items()},
    }


def _tables(result: dict[str, Any]) -> list[str]:
    lines = [f"all: {result['all']}", ""]
    for name in ("file", "direction", "pair"):
        lines += [f"| {name} | questions | R@5 | R@10 | Hit@10 |", "|---|---|---|---|---|"]
        for key, row in result[name].items():
            lines.append(f"| {key} | {row['questions']} | {row['R@5']} | {row['R@10']} | {row['Hit@10']} |")
        lines.append("")
    lines.append(f"speed: {result['speed (median over files)']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--channels", choices=["lexical", "hybrid"], default="hybrid")
    options = parser.parse_args(argv)
    if not options.data_dir.is_dir():
        parser.error(f"{options.data_dir} is not a folder")
    result = run(options.data_dir, options.channels)
    print(json.dumps(result, ensure_ascii=False) if options.json else "\n".join(_tables(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
