"""Page cursors: opaque to agents, integrity-protected (HMAC-SHA256), and pinned to one ranking.

A cursor carries no secret, only where the next page starts and the state it ranks at. The request it
belongs to (query, parameters, profile, scope, principal: the request digest) is bound by the MAC
instead of carried, so a cursor costs an agent some 35 tokens instead of 195 (decision 0023); any edit,
or a cursor presented with another request, is indistinguishable from a stale one.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

_PREFIX = "pc2."
_TAG_BYTES = 16
_MAX_BODY_BYTES = 4 * 10  # four 64-bit varints


@dataclass(frozen=True, slots=True)
class PagePin:
    """Where the next page starts and the pinned state its ranking is recomputed at."""

    offset: int
    records_cursor: int
    valid_as_of: int
    system_as_of: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _zigzag(n: int) -> int:
    return n * 2 if n >= 0 else -n * 2 - 1


def _unzigzag(n: int) -> int:
    return n // 2 if n % 2 == 0 else -(n + 1) // 2


def _varints(numbers: list[int]) -> bytes:
    """Unsigned LEB128, one number after another."""
    out = bytearray()
    for number in numbers:
        rest = number
        while rest > 0x7F:
            out.append(rest & 0x7F | 0x80)
            rest >>= 7
        out.append(rest)
    return bytes(out)


def _read_varints(data: bytes) -> list[int] | None:
    """The numbers `data` spells in LEB128, or None when it ends inside one or one passes 64 bits."""
    numbers: list[int] = []
    number = shift = 0
    for byte in data:
        number |= (byte & 0x7F) << shift
        shift += 7
        if byte & 0x80:
            if shift >= 64:
                return None
            continue
        numbers.append(number)
        number = shift = 0
    return None if shift else numbers


def _body(pin: PagePin) -> bytes:
    # The system-time as-of is the valid-time one on every cursor minted today: stored as a difference
    return _varints(
        [pin.offset, pin.records_cursor, _zigzag(pin.valid_as_of), _zigzag(pin.system_as_of - pin.valid_as_of)]
    )


def _tag(key: bytes, body: bytes, request_digest: str) -> bytes:
    return hmac.new(key, body + request_digest.encode("ascii"), hashlib.sha256).digest()[:_TAG_BYTES]


def mint_cursor(key: bytes, request_digest: str, pin: PagePin) -> str:
    body = _body(pin)
    return _PREFIX + _b64(body + _tag(key, body, request_digest))


def open_cursor(key: bytes, token: str, request_digest: str) -> PagePin | None:
    """The pin of a cursor this key minted for this request, or None for anything else."""
    if not token.startswith(_PREFIX) or not token.isascii():
        return None
    text = token[len(_PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        return None
    if not _TAG_BYTES < len(raw) <= _TAG_BYTES + _MAX_BODY_BYTES or _b64(raw) != text:
        return None  # only the canonical spelling: unused trailing bits must not make a second valid cursor
    body, tag = raw[:-_TAG_BYTES], raw[-_TAG_BYTES:]
    if not hmac.compare_digest(tag, _tag(key, body, request_digest)):
        return None
    numbers = _read_varints(body)
    if numbers is None or len(numbers) != 4:
        return None
    offset, records_cursor, valid_as_of, difference = (numbers[0], numbers[1], *map(_unzigzag, numbers[2:]))
    return PagePin(offset, records_cursor, valid_as_of, valid_as_of + difference)  # the MAC vouches for the body
