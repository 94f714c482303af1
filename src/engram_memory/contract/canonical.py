"""Canonical JSON (RFC 8785) and domain-separated digests: the identity of everything we keep.

`rfc8785` neither NFC-normalises nor rejects `-0`, so both are checked here first: two values that
print differently must never share a digest, and one value must never have two.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from typing import Any

import rfc8785

DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
_DIGEST_RE = re.compile(DIGEST_PATTERN)
MAX_SAFE_INTEGER = 2**53 - 1


class CanonicalError(ValueError):
    """A value that has no canonical form: non-NFC text, -0, NaN, unsafe integers, non-JSON types."""


# Python's encoder writes RFC 8785 bytes for every value whose floats print alike in both (a fraction
# with a decimal exponent from -4 to 15: the same shortest round-trip digits, in plain notation; ES6
# prints 5.0 as "5" and 1e-7 with an exponent where Python differs) and whose keys stay below U+D800
# (RFC 8785 sorts keys by UTF-16 code units, Python by code points; the orders agree there). Same
# escapes: the two-letter ones, \u00xx for the other controls, everything else literal.
_FAST_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
_LAST_SAFE_KEY_CHAR = "\ud7ff"
_PLAIN_LOW, _PLAIN_HIGH = 1e-4, 1e16


def _check(value: Any) -> bool:  # noqa: PLR0912 (one flat dispatch is the point)
    """Raises CanonicalError when `value` has no canonical form; True when the fast encoder is exact.

    Iterative, with exact-type tests first: it runs on every digest, so it must cost little."""
    fast = True
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            if not item.isascii():
                _check_text(item)
        elif kind is dict:
            for key, child in item.items():
                if type(key) is not str:
                    raise CanonicalError("non-string key")
                if not key.isascii():
                    _check_text(key)
                    if max(key) > _LAST_SAFE_KEY_CHAR:
                        fast = False
                stack.append(child)
        elif kind is list or kind is tuple:
            stack.extend(item)
        elif kind is int:
            if abs(item) > MAX_SAFE_INTEGER:
                raise CanonicalError("unsafe integer")
        elif item is None or kind is bool:
            continue
        elif isinstance(item, str):
            _check_text(item)
        elif isinstance(item, int | float):
            fast = _check_number(item) and fast
        elif isinstance(item, dict):
            stack.append(dict(item))
        elif isinstance(item, list | tuple):
            stack.extend(item)
        else:
            raise CanonicalError("not a JSON value")
    return fast


def _check_number(value: int | float) -> bool:
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise CanonicalError("unsafe integer")
        return True
    if not math.isfinite(value):
        raise CanonicalError("non-finite number")
    if value == 0.0 and math.copysign(1.0, value) < 0:
        raise CanonicalError("negative zero")
    return _PLAIN_LOW <= abs(value) < _PLAIN_HIGH and not value.is_integer()


def _check_text(text: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalError("lone surrogate") from exc
    if not unicodedata.is_normalized("NFC", text):
        raise CanonicalError("text is not NFC")


def canonical_json(value: Any) -> bytes:
    """RFC 8785 bytes of `value`; raises CanonicalError when it has no canonical form."""
    if _check(value):
        return _FAST_ENCODER.encode(value).encode("utf-8")
    try:
        return bytes(rfc8785.dumps(value))
    except rfc8785.CanonicalizationError as exc:
        raise CanonicalError(str(exc)) from exc


def digest_bytes(domain: str, data: bytes) -> str:
    """`sha256:` hex of `domain || 0x00 || data`: the domain keeps digests of different kinds apart."""
    return "sha256:" + hashlib.sha256(domain.encode("utf-8") + b"\x00" + data).hexdigest()


def digest(domain: str, value: Any) -> str:
    """Domain-separated digest of the canonical JSON of `value`."""
    return digest_bytes(domain, canonical_json(value))


def is_digest(text: str) -> bool:
    return _DIGEST_RE.fullmatch(text) is not None


# Domains. The payload domain is the reference design's; the others are ours and versioned.
PAYLOAD_DOMAIN = "graphify-memory/payload/v2"
EVIDENCE_DOMAIN = "engram-memory/evidence/v1"
OPERATION_DOMAIN = "engram-memory/operation/v1"
JOURNAL_DOMAIN = "engram-memory/journal/v1"
JOURNAL_GENESIS_DOMAIN = "engram-memory/journal-genesis/v1"
TRANSACTION_DOMAIN = "engram-memory/transaction/v1"
DECISION_DOMAIN = "engram-memory/decision/v1"
AUTHORIZATION_DOMAIN = "engram-memory/authorization/v1"
REVALIDATION_DOMAIN = "engram-memory/revalidation/v1"
READ_RECEIPT_DOMAIN = "engram-memory/read-receipt/v1"
PACKET_DOMAIN = "engram-memory/packet/v1"
REDACTION_DOMAIN = "engram-memory/redaction/v1"
RANK_REQUEST_DOMAIN = "engram-memory/rank-request/v1"
RANK_ORDER_DOMAIN = "engram-memory/rank-order/v1"
RANK_RECEIPT_DOMAIN = "engram-memory/rank-receipt/v1"
RESPONSE_DOMAIN = "engram-memory/search-response/v1"
COVERAGE_DOMAIN = "engram-memory/coverage/v1"
POLICY_DOMAIN = "engram-memory/policy/v1"
