"""Page cursors: opaque to agents, integrity-protected (HMAC-SHA256), and pinned to one ranking.

A cursor carries no secret, only what the next page must reproduce; the MAC makes any edit, or a
cursor from another scope or principal, indistinguishable from a stale one.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from engram_memory.contract.canonical import canonical_json

_PREFIX = "pc1."


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mint_cursor(key: bytes, claims: Mapping[str, Any]) -> str:
    body = canonical_json(dict(claims))
    tag = hmac.new(key, body, hashlib.sha256).digest()
    return _PREFIX + _b64(body) + "." + _b64(tag)


def open_cursor(key: bytes, token: str) -> dict[str, Any] | None:
    """The claims of a cursor this key minted, or None for anything else."""
    if not token.startswith(_PREFIX):
        return None
    parts = token[len(_PREFIX) :].split(".")
    if len(parts) != 2:
        return None
    try:
        body = _unb64(parts[0])
        tag = _unb64(parts[1])
    except (ValueError, UnicodeEncodeError):
        return None
    if _b64(body) != parts[0] or _b64(tag) != parts[1]:
        return None  # only the canonical spelling: unused trailing bits must not make a second valid cursor
    if not hmac.compare_digest(tag, hmac.new(key, body, hashlib.sha256).digest()):
        return None
    claims = json.loads(body)
    return claims if isinstance(claims, dict) else None
