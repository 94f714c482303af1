"""Where a decrypted value shows what the secret detectors found: one span per overlap, naming each category.

Shared by `review show` in the terminal and the console's review queue in the browser.
"""

from __future__ import annotations

from collections.abc import Sequence

from engram_memory.engine.secrets import SecretFinding


def merged_spans(findings: Sequence[SecretFinding]) -> list[tuple[int, int, list[str]]]:
    """Overlapping findings in one string become one marked span naming every category."""
    spans: list[tuple[int, int, list[str]]] = []
    for finding in sorted(findings, key=lambda f: (f.start, f.end)):
        if spans and finding.start < spans[-1][1]:
            start, end, categories = spans[-1]
            names = categories if finding.category in categories else [*categories, finding.category]
            spans[-1] = (start, max(end, finding.end), names)
        else:
            spans.append((finding.start, finding.end, [finding.category]))
    return spans
