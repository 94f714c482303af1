"""The health page's small chart: calls per hour over the last day, answered ok or refused, as SVG bars.

Drawn on the server (no script), from audit rows only: times, tools and outcomes, never memory text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engram_memory.engine.ports.store import AuditRow

HOUR_MS = 3_600_000
HOURS = 24
WIDTH, HEIGHT, GAP = 480, 120, 2


@dataclass(frozen=True)
class Bar:
    x: int
    width: int
    ok_y: int
    ok_height: int
    error_y: int
    error_height: int
    hour_ms: int
    ok: int
    errors: int


@dataclass(frozen=True)
class Chart:
    bars: list[Bar]
    peak: int
    ok_total: int
    error_total: int
    width: int = WIDTH
    height: int = HEIGHT


def hourly_chart(rows: Iterable[AuditRow], now_ms: int) -> Chart:
    start = (now_ms // HOUR_MS - HOURS + 1) * HOUR_MS
    ok, errors = [0] * HOURS, [0] * HOURS
    for row in rows:
        slot = (row.at_ms - start) // HOUR_MS
        if 0 <= slot < HOURS:
            (ok if row.outcome == "ok" else errors)[slot] += 1
    peak = max([a + b for a, b in zip(ok, errors, strict=True)] + [1])
    step = WIDTH // HOURS
    bars = []
    for slot in range(HOURS):
        ok_h = round(HEIGHT * ok[slot] / peak)
        error_h = round(HEIGHT * errors[slot] / peak)
        bars.append(
            Bar(
                x=slot * step,
                width=step - GAP,
                ok_y=HEIGHT - ok_h,
                ok_height=ok_h,
                error_y=HEIGHT - ok_h - error_h,
                error_height=error_h,
                hour_ms=start + slot * HOUR_MS,
                ok=ok[slot],
                errors=errors[slot],
            )
        )
    return Chart(bars, peak, sum(ok), sum(errors))
