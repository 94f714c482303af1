"""Instants on the wire: canonical UTC `YYYY-MM-DDTHH:mm:ss.sssZ`, and epoch milliseconds inside.

One spelling per instant, so that digests over payloads that carry instants are stable.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

INSTANT_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$"
_INSTANT_RE = re.compile(INSTANT_PATTERN)


def parse_instant(text: str) -> int | None:
    """Epoch milliseconds of a canonical instant, or None when it is not one (wrong shape, no such day)."""
    if _INSTANT_RE.fullmatch(text) is None:
        return None
    try:
        moment = datetime(
            int(text[0:4]),
            int(text[5:7]),
            int(text[8:10]),
            int(text[11:13]),
            int(text[14:16]),
            int(text[17:19]),
            int(text[20:23]) * 1000,
            tzinfo=UTC,
        )
    except ValueError:
        return None
    return int(moment.replace(microsecond=0).timestamp()) * 1000 + moment.microsecond // 1000


def format_instant(epoch_ms: int) -> str:
    """The canonical spelling of an epoch-milliseconds instant."""
    seconds, millis = divmod(epoch_ms, 1000)
    moment = datetime.fromtimestamp(seconds, tz=UTC)
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
        f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}.{millis:03d}Z"
    )
