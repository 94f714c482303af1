"""What reaches the host's terminal: text an agent chose is shown as text, never obeyed as commands.

An agent writes reason refs, ids, component text and citation refs; the host reads them in
`confirmations list`, `records show`, the review queue. An ESC sequence there could move the cursor,
erase lines or retitle the window, a carriage return or a bidi override could rewrite what the
person approves. So every character that is not plain text is shown as an escape (`\\x1b`, `\\u202e`):
the C0 and C1 controls, DEL, the format characters (bidi overrides, zero-width joiners and spaces)
and the line and paragraph separators. Spaces of every width and every script stay as they are.

`SafeConsole` applies this to everything rich prints except its own control sequences, so no command
can forget it; `inline` also escapes line breaks, for a value shown inside one line, which could
otherwise forge the lines after it.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.segment import Segment

__all__ = ["SafeConsole", "escaped", "inline", "json_text", "printable"]

_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def _unsafe(ch: str) -> bool:
    return unicodedata.category(ch) in _UNSAFE_CATEGORIES


def escaped(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str, *, lines: bool = True) -> str:
    """`text` with every unsafe character escaped; line breaks and tabs are kept when `lines`."""
    kept = "\n\t" if lines else ""
    if text.isascii() and text.isprintable():
        return text
    return "".join(escaped(ch) if _unsafe(ch) and ch not in kept else ch for ch in text)


def inline(text: str) -> str:
    """A value shown inside one line: its line breaks are escaped too."""
    return printable(text, lines=False)


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_text(value: Any, **options: Any) -> str:
    """JSON that keeps every script readable (ensure_ascii off) yet carries no unsafe character raw:
    they are written as JSON escapes, so a parser reads the same value back."""
    text = json.dumps(value, ensure_ascii=False, **options)
    if text.isascii() and "\x7f" not in text:
        return text  # json.dumps escapes the C0 controls itself; DEL is the one ASCII control left
    return "".join(_json_escape(ch) if _unsafe(ch) and ch != "\n" else ch for ch in text)


class SafeConsole(Console):
    """A rich Console whose text segments are escaped as `printable` says; its own control segments
    (cursor moves of a progress bar) and styles pass as rich renders them."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        safe = (
            segment if segment.control else Segment(printable(segment.text), segment.style, segment.control)
            for segment in buffer
        )
        return super()._render_buffer(safe)
