"""How `serve` writes its log lines on stderr: a level chosen by the operator, as text or as JSON lines.

Text is for a person at a terminal; JSON lines are for a log shipper (one object a line: time, level,
logger, message). Either way a line is one line: a message that holds a line break is escaped.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
TEXT_FORMAT = "engram-memory: %(levelname)s %(message)s"


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "at": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = type(record.exc_info[1]).__name__
        return json.dumps(entry, ensure_ascii=False)


class _OneLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).replace("\r", "\\r").replace("\n", "\\n")


def configure(level: str = "info", form: str = "text") -> None:
    """Sends every log line to stderr at `level` and above, formatted as `form` ('text' or 'json')."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines() if form == "json" else _OneLine(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
