"""How hard the reliability suite pushes: a short form inside `make test`, the full one in `make reliability`.

`ENGRAM_RELIABILITY=full` selects the full amounts (issue 14's targets); anything else the short
ones, which exercise every path in a few seconds each. Results go to `ENGRAM_RELIABILITY_REPORT`
(a JSON-lines file) when it is set, and `python -m tests.reliability.summary FILE` prints the table.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

FULL = os.environ.get("ENGRAM_RELIABILITY") == "full"


def amount(short: int, full: int) -> int:
    return full if FULL else short


def report(metric: str, value: float, *, target: str = "", unit: str = "") -> None:
    """One line of the summary table (kills survived, fuzz inputs tried, recall...)."""
    path = os.environ.get("ENGRAM_RELIABILITY_REPORT")
    if not path:
        return
    line = {"metric": metric, "value": value, "target": target, "unit": unit, "mode": "full" if FULL else "short"}
    with Path(path).open("a", encoding="utf-8") as sink:
        sink.write(json.dumps(line, ensure_ascii=False) + "\n")
