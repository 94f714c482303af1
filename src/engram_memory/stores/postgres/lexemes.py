"""The server store's tsvector: the lexemes of a scope's index row, built here rather than by the server.

Schema 1 computed the column with SQL functions (engram_index_tsvector) at about 200 µs a row, the
largest single cost of an admission on the server; since schema 7 the store sends the same value as a
tsvector literal, which the server parses in a few microseconds. The SQL function stays the definition:
the verifier's integrity check compares every row with it, so a literal that ever disagreed is found.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from types import MappingProxyType

from engram_memory.engine.ports.lexical import FIELDS
from engram_memory.engine.ports.rows import Scope

# Tokens longer than this are indexed (and queried) by digest: a tsvector lexeme holds at most 2047 bytes.
MAX_LEXEME_BYTES = 255
# Each field's label, as engram_index_tsvector gives them (D is tsvector's default and prints bare).
FIELD_LABELS = MappingProxyType({"primary": "A", "decision": "B", "evidence": "C", "context": "D", "citations": "D"})


def scope_token(scope: Scope) -> str:
    """The lexeme (after "scope:") that confines a GIN match to one scope, as SQLite's scope column does."""
    return "s" + hashlib.sha256(scope.ref.encode("utf-8")).hexdigest()[:40]


def lexeme(token: str) -> str:
    """The lexeme a token is indexed under: itself, or "md5:" and its digest when too long (see engram_lexeme)."""
    raw = token.encode("utf-8")
    if len(raw) > MAX_LEXEME_BYTES:
        return "md5:" + hashlib.md5(raw, usedforsecurity=False).hexdigest()
    return token


def quoted(value: str) -> str:
    """A lexeme as tsvector or tsquery input takes it literally: single-quoted, quotes and backslashes escaped."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def index_tsvector(token: str, values: Sequence[str]) -> str:
    """engram_index_tsvector(token, *values) as a tsvector literal: the scope's lexeme without a position,
    then each field's distinct tokens at one position per non-empty field (1, 2, ...: what tsvector's
    concatenation gives them), labelled by field (FIELDS order)."""
    marks: dict[str, list[str]] = {}
    position = 0
    for name, text in zip(FIELDS, values, strict=True):
        tokens = {lexeme(part) for part in text.split(" ") if part}
        if not tokens:
            continue
        position += 1
        mark = f"{position}{FIELD_LABELS[name]}"
        for token_lexeme in tokens:
            marks.setdefault(token_lexeme, []).append(mark)
    parts = [quoted("scope:" + token)]
    parts += [f"{quoted(key)}:{','.join(positions)}" for key, positions in marks.items()]
    return " ".join(parts)
