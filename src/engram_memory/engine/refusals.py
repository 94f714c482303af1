"""Why the engine turned down a person's request, as a code and its values, never as a finished sentence.

The host words a refusal in the person's language in one place (host/language/words.py `refusal`), so
the command line and the console say the same thing. A refusal's value is its English wording, which
`str()` of the exception gives; it is also the message the host's catalogues translate.
"""

from __future__ import annotations

from enum import StrEnum


class Refusal(StrEnum):
    NO_SUCH_RECORD = "no such record: {record_id}"
    NO_SUCH_CANDIDATE = "no such candidate: {candidate_id}"
    NO_SUCH_OPERATION = "no such operation: {operation}"
    REASON_REF_INVALID = "INVALID_SCHEMA: a reason ref is an NFC string of 1-512 UTF-8 bytes"
    ARGUMENT_MISSING = "{operation} needs {flag}"
    CHOICE_UNKNOWN = "{flag} takes one of: {choices}"
    RECORD_TERMINAL = "ALREADY_TERMINAL: record {record_id} is {state}; nothing can change it"
    RECORD_NOT_ALLOWED = (
        "ILLEGAL_TRANSITION: {operation} needs a record that is {allowed}; record {record_id} is {state}"
    )
    SUCCESSOR_IS_SELF = "ILLEGAL_TRANSITION: the successor cannot be record {record_id} itself"
    SUCCESSOR_ELSEWHERE = (
        "ILLEGAL_TRANSITION: the successor {other_id} must be a record of {tenant}/{workspace}; it is in another scope"
    )
    SUCCESSOR_MISSING = (
        "ILLEGAL_TRANSITION: the successor {other_id} must be a record of {tenant}/{workspace}; it is in no scope"
    )
    SUCCESSOR_NOT_CURRENT = "ILLEGAL_TRANSITION: the successor {other_id} must be accepted_current; it is {state}"
    REPLACED_IS_SELF = "ILLEGAL_TRANSITION: --replacing cannot be record {record_id} itself"
    REPLACED_ELSEWHERE = (
        "ILLEGAL_TRANSITION: --replacing {other_id} must be a record of {tenant}/{workspace}; it is in another scope"
    )
    REPLACED_MISSING = (
        "ILLEGAL_TRANSITION: --replacing {other_id} must be a record of {tenant}/{workspace}; it is in no scope"
    )
    REPLACED_NOT_CURRENT = "ILLEGAL_TRANSITION: --replacing {other_id} must be accepted_current; it is {state}"
    CANDIDATE_NOT_PENDING = "{code}: candidate {candidate_id} is {state}, not pending"
    CANDIDATE_DECIDED = "candidate {candidate_id} is {state}{reasons}: its body is gone, nothing to show"
    POLICY_REJECTS = "the policy rejects candidate {candidate_id} ({reasons}): reject it instead"
    APPROVAL_TTL = "an approval lives between 1 ms and 300 s"
    NO_SUCH_CONFIRMATION = "no such confirmation request"
    CONFIRMATION_EXPIRED = "the confirmation request has expired; the agent must ask again"
    CONFIRMATION_DECIDED = "the confirmation request is already {status}"


class Refused(Exception):
    """A person's request the engine turned down before writing anything; `values` fill its wording."""

    def __init__(self, refusal: Refusal, **values: str) -> None:
        super().__init__(refusal.value.format(**values))
        self.refusal = refusal
        self.values = values
