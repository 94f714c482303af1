"""Prints the reliability summary table from the JSON lines the suite wrote (see scale.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _value(value: float, unit: str) -> str:
    text = f"{value:,.2f}" if isinstance(value, float) and not value.is_integer() else f"{int(value):,}"
    return f"{text} {unit}".strip()


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else Path(".reliability.jsonl")
    if not path.exists():
        print(f"no reliability results at {path}", file=sys.stderr)
        return 1
    rows: dict[str, dict[str, object]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        rows[str(row["metric"])] = row  # the last run of a metric wins
    print("| metric | measured | target | mode |")
    print("|---|---|---|---|")
    for metric, row in rows.items():
        print(f"| {metric} | {_value(float(row['value']), str(row['unit']))} | {row['target']} | {row['mode']} |")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
