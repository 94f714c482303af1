"""Identifiers handed to agents and hosts: random, unguessable, and shaped so kinds never mix up.

A `candidate_id` is never a `record_id`: the prefixes differ and only records match
`^mem_[a-z2-7]+$`.
"""

from __future__ import annotations

import base64
import re
import secrets

RECORD_ID_PATTERN = r"^mem_[a-z2-7]+$"
RECORD_ID_RE = re.compile(RECORD_ID_PATTERN)


def _token(nbytes: int = 16) -> str:
    return base64.b32encode(secrets.token_bytes(nbytes)).decode("ascii").rstrip("=").lower()


def new_record_id() -> str:
    return "mem_" + _token()


def new_candidate_id() -> str:
    return "cand_" + _token()


def new_event_id() -> str:
    return "evt_" + _token()


def new_audit_id() -> str:
    return "aud_" + _token()


def new_confirmation_id() -> str:
    return "conf_" + _token(10)


def new_token_id() -> str:
    return "bind_" + _token(10)


def is_record_id(text: str) -> bool:
    return RECORD_ID_RE.fullmatch(text) is not None
