"""A decrypted value cut into plain and marked pieces, so the template can highlight what a detector found."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engram_memory.engine.secrets import SecretFinding
from engram_memory.host.finding_spans import merged_spans


@dataclass(frozen=True)
class Piece:
    text: str
    categories: str = ""  # empty: not a finding


class Marker:
    def __init__(self, findings: Sequence[SecretFinding]) -> None:
        self._by_path: dict[str, list[SecretFinding]] = {}
        for finding in findings:
            self._by_path.setdefault(finding.path, []).append(finding)

    def pieces(self, value: str, path: str) -> list[Piece]:
        pieces, position = [], 0
        for start, end, categories in merged_spans(self._by_path.get(path, [])):
            if start > position:
                pieces.append(Piece(value[position:start]))
            pieces.append(Piece(value[start:end], ", ".join(categories)))
            position = end
        if position < len(value) or not pieces:
            pieces.append(Piece(value[position:]))
        return pieces
