"""The journal checks of verify: every stored row parses back into the event it hashes, the chain and the head
hold, and replaying it gives exactly the candidate and record tables."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Protocol

from engram_memory.contract.canonical import CanonicalError, canonical_json
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine import journal
from engram_memory.engine.ports.agent_tx import JournalTx
from engram_memory.engine.ports.operations import CandidateStateRow, OperationsTx, RawJournalRow
from engram_memory.engine.ports.store import JournalEvent, Scope
from engram_memory.engine.verify.report import Checks, Problem, VerifyReport, scope_name


class ChainTx(JournalTx, OperationsTx, Protocol):
    """The journal, as the engine reads it and as its raw rows are stored."""


class _BadRow(Exception):
    def __init__(self, cursor: str, reason: str) -> None:
        super().__init__(reason)
        self.cursor = cursor
        self.reason = reason


def _text(value: bytes | None) -> str:
    if value is None:
        raise _BadRow("?", "a column is empty")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _BadRow("?", "a column is not UTF-8 text") from exc


def _parse(scope: Scope, row: RawJournalRow) -> JournalEvent:
    """The event a stored row holds, or _BadRow: every column must agree with the hashed body."""
    cursor = row.cursor
    if not isinstance(cursor, int) or isinstance(cursor, bool):
        raise _BadRow("?", "its cursor is not a number")
    label = str(cursor)
    try:
        event_id, kind = _text(row.event_id), _text(row.kind)
        prev_digest, event_digest, raw_body = _text(row.prev_digest), _text(row.event_digest), _text(row.body)
    except _BadRow as bad:
        raise _BadRow(label, bad.reason) from None
    try:
        body = json.loads(raw_body)
    except ValueError:
        raise _BadRow(label, "its body is not JSON") from None
    if not isinstance(body, dict):
        raise _BadRow(label, "its body is not a JSON object")
    try:
        canonical = canonical_json(body).decode("utf-8") == raw_body
    except CanonicalError:
        canonical = False
    if not canonical:
        raise _BadRow(label, "its body is not in canonical form")
    at_ms, affects = row.at_ms, row.affects_records
    if not isinstance(at_ms, int) or not isinstance(affects, int):
        raise _BadRow(label, "a number column holds something else")
    columns = {
        "tenant": scope.tenant,
        "workspace": scope.workspace,
        "cursor": cursor,
        "event_id": event_id,
        "kind": kind,
        "at": at_ms,
        "prev": prev_digest,
    }
    if any(
        type(body.get(name)) is not type(value) or body.get(name) != value for name, value in columns.items()
    ) or affects != int(kind in journal.RECORD_EVENTS):
        raise _BadRow(label, "its columns disagree with its body")
    return journal.event_of(scope, body, event_digest=event_digest)


def _drain(rows: Iterator[RawJournalRow]) -> None:
    """Reads what is left of a journal the check stopped in: a server store's stream holds its
    connection until it ends, and cancelling it would abort the transaction the other checks read in."""
    try:
        for _ in rows:
            pass
    except ContractError:
        pass  # the store failed under the read: the problem already reported is the one to see


class _Walk:
    """Parses and folds a journal as it streams by, keeping only what a report needs of the events
    seen: a scope's whole journal held in memory cost the verifier (and `serve`'s start) gigabytes at
    a million memories."""

    def __init__(self) -> None:
        self.count = 0
        self.last = 0  # the cursor of the last event read (the one that failed, when one fails)
        self.before = 0  # the cursor of the event before it
        self.state = journal.FoldedState()
        self.unfoldable = False

    def events(self, scope: Scope, rows: Iterable[RawJournalRow]) -> Iterator[JournalEvent]:
        for row in rows:
            event = _parse(scope, row)
            self.count += 1
            self.before, self.last = self.last, event.cursor
            if not self.unfoldable:
                try:
                    journal.apply_event(self.state, event)
                except (ContractError, KeyError, TypeError):
                    self.unfoldable = True  # reported only if the chain itself holds
            yield event


def check_journal(tx: ChainTx, scope: Scope, report: VerifyReport) -> journal.FoldedState | None:
    """The folded state when the chain and the head hold; otherwise reports the first break and returns None."""
    name = scope_name(scope)
    walk = _Walk()
    rows = iter(tx.journal_rows(scope))
    try:
        chain_head = journal.verify_chain(scope, walk.events(scope, rows))
    except _BadRow as bad:
        _drain(rows)
        report.events += walk.count
        detail = f"the journal of {name} fails at cursor {bad.cursor} ({bad.reason})"
        report.problems.append(Problem(ErrorCode.JOURNAL_CORRUPT, scope, f"cursor {bad.cursor}", detail))
        return None
    except ContractError as exc:
        _drain(rows)
        report.events += walk.count
        failed = walk.last
        if exc.code is ErrorCode.CURSOR_GAP:
            before = walk.before
            detail = f"the journal of {name} has a gap: cursor {failed} follows cursor {before}"
        else:
            detail = f"the journal of {name} fails at cursor {failed} (the hash chain breaks here)"
        report.problems.append(Problem(exc.code, scope, f"cursor {failed}", detail))
        return None
    report.events += walk.count
    head = tx.head(scope)
    if head is None:
        if walk.count:
            detail = f"the journal of {name} has no head row (it ends at cursor {chain_head.cursor})"
            report.problems.append(Problem(ErrorCode.JOURNAL_CORRUPT, scope, "head", detail))
            return None
    elif head != chain_head:
        if head.cursor > chain_head.cursor:
            code = ErrorCode.CURSOR_GAP
            detail = f"the journal of {name} ends at cursor {chain_head.cursor} but its head says {head.cursor}"
        elif head.cursor < chain_head.cursor:
            code = ErrorCode.JOURNAL_CORRUPT
            detail = f"the head row of {name} says cursor {head.cursor} but its journal runs to {chain_head.cursor}"
        else:
            code = ErrorCode.JOURNAL_CORRUPT
            detail = f"the head row of {name} does not match the last event of its journal (cursor {head.cursor})"
        report.problems.append(Problem(code, scope, "head", detail))
        return None
    if walk.unfoldable:
        detail = f"the journal of {name} holds an event that cannot be replayed"
        report.problems.append(Problem(ErrorCode.JOURNAL_CORRUPT, scope, "fold", detail))
        return None
    return walk.state


def check_fold(
    checks: Checks, folded: journal.FoldedState, candidates: list[CandidateStateRow], records: Mapping[str, str]
) -> None:
    """Replaying the journal must give exactly the candidate and record tables."""
    _compare(checks, "candidate", folded.candidates, {row.candidate_id: row.state for row in candidates})
    _compare(checks, "record", folded.records, records)
    waiting = {row.candidate_id for row in candidates if row.adjudication}
    for candidate_id in sorted(waiting ^ folded.adjudication):
        where = "the table" if candidate_id in waiting else "the journal"
        detail = f"candidate {candidate_id} waits for review only in {where} of {scope_name(checks.scope)}"
        checks.add("fold", ErrorCode.JOURNAL_CORRUPT, candidate_id, detail)


def _compare(checks: Checks, kind: str, replayed: Mapping[str, str], stored: Mapping[str, str]) -> None:
    name = scope_name(checks.scope)
    for owner in sorted(set(replayed) | set(stored)):
        in_journal, in_table = replayed.get(owner), stored.get(owner)
        if in_journal == in_table:
            continue
        if in_table is None:
            detail = f"{kind} {owner} is in the journal of {name} but not in its table"
        elif in_journal is None:
            detail = f"{kind} {owner} is in the table of {name} but not in its journal"
        else:
            detail = f"{kind} {owner} is {in_table} in the table of {name} but {in_journal} in its journal"
        checks.add("fold", ErrorCode.JOURNAL_CORRUPT, owner, detail)
