"""Plots search latency against corpus size from bench/scale.py results, and fits the growth exponent.

Run on demand, with the `bench` extra (matplotlib):

    .venv/bin/python bench/plot_scale.py docs/scale-results.jsonl docs/scale-latency.png

Each line of the results file is one `bench/scale.py --json` object (`--results FILE` appends them).
Runs of one workspace are plotted per store and profile: in-process search p50 / p95 / p99 and the
floor's p95, on log-log axes. The printed exponent is the slope of log(search p95) against log(records)
by least squares: below 1 means search cost grows sub-linearly with the corpus.
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def load(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [row for row in rows if row.get("workspaces", 1) == 1]


def exponent(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(y) on log(x); None with fewer than two sizes."""
    if len({x for x, _ in points}) < 2:
        return None
    xs = [math.log(x) for x, _ in points]
    ys = [math.log(y) for _, y in points]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in load(Path(argv[0])):
        series[f"{row['store']} {row['channels']}"].append(row)
    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=120)
    for label, rows in sorted(series.items()):
        rows.sort(key=lambda row: row["records"])
        sizes = [row["records"] for row in rows]
        for key, style in (("search_p50_ms", ":"), ("search_p95_ms", "-"), ("search_p99_ms", "--")):
            axes.plot(sizes, [row[key] for row in rows], style, marker="o", label=f"{label} {key[7:10]}")
        axes.plot(sizes, [row["floor_p95_ms"] for row in rows], "-.", marker="x", label=f"{label} floor p95")
        slope = exponent([(row["records"], row["search_p95_ms"]) for row in rows])
        if slope is not None:
            print(f"{label}: search p95 grows as records^{slope:.2f}")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("memories in the workspace")
    axes.set_ylabel("latency (ms)")
    axes.set_title("engram-memory search latency against corpus size (2 cores)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
