"""The admission policy as a TOML file in the host's home, re-read when it changes.

A policy that fails to parse is never replaced by a guess: capture, admission and reads answer
POLICY_UNAVAILABLE until the host fixes the file.
"""

from __future__ import annotations

import logging
import os
import threading
import tomllib
from pathlib import Path

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.admission.policy import AdmissionPolicy, PolicyError, policy_from_mapping
from engram_memory.host.language.catalogue import _

logger = logging.getLogger(__name__)

DEFAULT_POLICY_TOML = """\
# engram-memory admission policy. Edited by the host; re-read on change, no restart needed.
policy_id = "default"
version = 1

# "auto": accept a candidate that passes every check below.
# "review": send every candidate that passes them to a human (engram-memory review ...).
mode = "auto"

min_citations = 1
require_attestation = false
max_payload_bytes = 1048576

# Principals allowed to capture with retention.derivative_rule = "retain" ("*" for everyone).
retain_principals = []
# Upper bound for retention.expires_at, in days after capture.
max_retention_days = 365
# Reconciliation families the host consents to: exact refs, or globs such as "fact:*".
consented_families = []

# Record fields removed from what agents read, e.g. ["provenance.session", "citations.locator"].
redact_fields = []

# The secret detector: every category is on by default except personal_data.
[secrets]
personal_data = false

# In mode "review" only: candidates captured under these exact names skip the human and are
# accepted, once every check above, the duplicate rule and the tombstone guard have passed.
# Ignored in mode "auto". Trust classes are "asserted", "earned", "signed" (set by `bind --trust-class`).
[auto_accept]
principals = []
agents = []
trust_classes = []

# What a newly accepted memory does to the current memories of its workspace that share one of its
# (consented) families, by the first rule whose pattern matches the family ref; no rule: "coexist".
#   "supersede"  the older ones become historical, their validity closed where the new one's starts
#                (a current one that starts later than the new one sends it to a human instead);
#   "adjudicate" the new one waits for a person, who sees both (engram-memory review show);
#   "coexist"    nothing happens.
# [[family_rules]]
# pattern = "decision:*"
# mode = "supersede"

# Near-duplicates: "review" sends a candidate that is near-identical to a current memory of its workspace
# to a person, with the match shown: Jaccard similarity of their index tokens >= threshold, or, with an
# embedding model installed, cosine of their embeddings >= semantic_threshold (either way the candidate
# needs at least min_terms tokens). Nothing is ever dropped. "accept" (the default) lets it through.
[near_duplicates]
action = "accept"
threshold = 0.9
semantic_threshold = 0.93
min_terms = 4

# The instants a memory's valid_time.t, t_end and primary_event.at may name (epoch milliseconds). A value
# below 10^11 (before March 1973) reads as epoch seconds and is refused unless allow_seconds_range = true.
[times]
earliest = "0001-01-01T00:00:00.000Z"
latest = "9999-12-31T23:59:59.999Z"
allow_seconds_range = false
"""


def parse_policy(raw: bytes, name: str = "policy.toml") -> AdmissionPolicy:
    """Raises PolicyError with a reason the host can act on."""
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise PolicyError(_("{name} is not UTF-8 text").format(name=name)) from exc
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(_("{name} is not valid TOML: {exc}").format(name=name, exc=exc)) from exc
    return policy_from_mapping(data)


def read_policy(path: Path) -> AdmissionPolicy:
    """Raises PolicyError (or OSError) with a reason the host can act on."""
    return parse_policy(path.read_bytes(), path.name)


def _read(path: str) -> bytes:
    """The file's bytes with three system calls and no Python file object: it is read on every call."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(descriptor, 65_536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(descriptor)


class FilePolicySource:
    """Reads the (small) file on every call and re-parses it when its bytes change; thread-safe.

    Comparing content rather than timestamps means no edit can go unnoticed.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._file = os.fspath(path)
        self._lock = threading.Lock()
        self._raw: bytes | None = None
        self._policy: AdmissionPolicy | None = None

    def current(self) -> AdmissionPolicy:
        with self._lock:
            try:
                raw = _read(self._file)
                if raw != self._raw or self._policy is None:
                    self._policy = parse_policy(raw, self._path.name)
                    self._raw = raw
            except (OSError, PolicyError) as exc:
                self._policy, self._raw = None, None
                logger.error("admission policy unavailable: %s", exc)
                raise ContractError(ErrorCode.POLICY_UNAVAILABLE) from exc
            return self._policy
