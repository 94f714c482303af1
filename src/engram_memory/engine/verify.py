"""The store's verifier (SPEC §11): walks each scope's chain, heads, tables, bodies and index, and names what is wrong.

`full=False` is the server's start-up check (chain, heads, fold, body presence; nothing decrypted);
`full=True` is `engram-memory verify`, which also opens every live body and checks the lexical index.
Problems carry codes, ids, cursors and states, never memory text, and a damaged row is reported, never raised.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from engram_memory.contract.canonical import CanonicalError, canonical_json
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.states import CandidateState, RecordState
from engram_memory.engine import journal
from engram_memory.engine.deps import Deps
from engram_memory.engine.ports.faults import StoreFault, fault_of
from engram_memory.engine.ports.operations import CandidateStateRow, RawJournalRow
from engram_memory.engine.ports.store import JournalEvent, Scope, StoreTx
from engram_memory.engine.projection import index_fields
from engram_memory.engine.recall.ranking import FIELDS
from engram_memory.engine.recall.reindex import is_stale, scope_tokenizer
from engram_memory.engine.recall.text import tokenizer_id
from engram_memory.engine.sealing.seal import open_sealed

ORPHAN_KEY_AGE_MS = 3_600_000
MAX_SUBJECTS_PER_CHECK = 20
_PENDING = CandidateState.PENDING.value
_CURRENT = RecordState.ACCEPTED_CURRENT.value
_TOMBSTONED = RecordState.TOMBSTONED.value


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong, as a one-line detail that names ids and cursors but never memory text."""

    code: ErrorCode
    scope: Scope | None
    subject: str
    detail: str

    @property
    def line(self) -> str:
        return f"{self.code.value}: {self.detail}"


@dataclass
class VerifyReport:
    full: bool
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    scopes: int = 0
    events: int = 0
    bodies: int = 0
    opened: int = 0
    indexed: int = 0
    embedded: int = 0
    unembedded: int = 0  # accepted_current records still waiting for a vector by the current model

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first(self) -> Problem | None:
        return self.problems[0] if self.problems else None


def verify_store(deps: Deps, *, full: bool) -> VerifyReport:
    """Never raises for what it finds: every fault, a malformed file included, becomes a Problem.

    Each scope is read in one snapshot, so concurrent writers cannot make a healthy scope look broken.
    """
    report = VerifyReport(full=full)
    try:
        with deps.store.read() as tx:
            names = tx.scope_names()
    except ContractError as exc:
        report.problems.append(_unreadable(ErrorCode.JOURNAL_CORRUPT, None, "the list of scopes", exc))
        return report
    with_bodies: set[str] = set()
    for tenant, workspace in names:
        try:
            scope = Scope(tenant=tenant.decode("utf-8"), workspace=workspace.decode("utf-8"))
        except UnicodeDecodeError:
            report.problems.append(
                Problem(ErrorCode.JOURNAL_CORRUPT, None, "scope", "a row names a scope that is not UTF-8 text")
            )
            continue
        report.scopes += 1
        _verify_scope(deps, scope, report, with_bodies)
    if full:
        _verify_index_totals(deps, report)
        _warn_orphaned_keys(deps, with_bodies, report)
    return report


def _name(scope: Scope) -> str:
    return f"{scope.tenant}/{scope.workspace}"


def _unreadable(code: ErrorCode, scope: Scope | None, what: str, exc: ContractError) -> Problem:
    """A read the store could not finish, worded by the fault the store classified. The driver's own message is
    never read or copied: it may quote row text."""
    fault = fault_of(exc)
    if fault is StoreFault.CORRUPT:
        reason = "the database disk image is malformed"
    elif fault is StoreFault.BUSY:  # not damage: the same check passes once the writer is done
        code, reason = ErrorCode.STORE_UNAVAILABLE, "the store is busy; try again"
    else:
        reason = "unreadable"
    where = f" of {_name(scope)}" if scope is not None else ""
    return Problem(code, scope, what, f"{what}{where} cannot be read ({reason})")


class _Checks:
    """The problems of one scope, at most MAX_SUBJECTS_PER_CHECK per kind of check, then how many more."""

    def __init__(self, scope: Scope, report: VerifyReport) -> None:
        self.scope = scope
        self.report = report
        self._seen: dict[str, tuple[ErrorCode, int]] = {}

    def add(self, check: str, code: ErrorCode, subject: str, detail: str) -> None:
        seen = self._seen.get(check, (code, 0))[1] + 1
        self._seen[check] = (code, seen)
        if seen <= MAX_SUBJECTS_PER_CHECK:
            self.report.problems.append(Problem(code, self.scope, subject, detail))

    def close(self) -> None:
        for check, (code, seen) in self._seen.items():
            if seen > MAX_SUBJECTS_PER_CHECK:
                more = seen - MAX_SUBJECTS_PER_CHECK
                detail = f"{more} more problems of the same kind ({check}) in {_name(self.scope)}"
                self.report.problems.append(Problem(code, self.scope, check, detail))


def _verify_scope(deps: Deps, scope: Scope, report: VerifyReport, with_bodies: set[str]) -> None:
    checks = _Checks(scope, report)
    step = (ErrorCode.JOURNAL_CORRUPT, "the journal")
    suspects: list[tuple[str, str]] = []
    try:
        with deps.store.read() as tx:
            folded = _check_journal(tx, scope, report)
            step = (ErrorCode.JOURNAL_CORRUPT, "the candidate and record tables")
            candidates = tx.candidate_states(scope)
            records = tx.record_states(scope)
            if folded is not None:
                _check_fold(checks, folded, candidates, records)
            step = (ErrorCode.PROJECTION_STALE, "the lexical index")
            stale = _check_tokenizer(tx, checks)
            step = (ErrorCode.BLOB_MISSING, "the sealed bodies")
            bodies = tx.body_owners(scope)
            with_bodies.update(bodies)
            live = _check_bodies(checks, candidates, records, bodies)
            report.bodies += len(bodies)
            if report.full:
                fields = _open_bodies(deps, tx, scope, live, bodies, report, suspects)
                step = (ErrorCode.PROJECTION_STALE, "the lexical index")
                _check_index(tx, checks, records, {} if stale else fields, report)
                step = (ErrorCode.PROJECTION_STALE, "the semantic index")
                _check_vectors(deps, tx, scope, checks, records, report)
    except ContractError as exc:
        report.problems.append(_unreadable(step[0], scope, step[1], exc))
    except Exception as exc:  # a row damaged past what the store's types allow: named, not raised
        detail = f"{step[1]} of {_name(scope)} cannot be checked ({type(exc).__name__})"
        report.problems.append(Problem(step[0], scope, step[1], detail))
    if suspects:
        _confirm_suspects(deps, scope, checks, suspects)
    checks.close()


# -- the journal -----------------------------------------------------------------------------------


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
    }
    if any(body.get(name) != value for name, value in columns.items()) or affects != int(kind in journal.RECORD_EVENTS):
        raise _BadRow(label, "its columns disagree with its body")
    return JournalEvent(
        scope=scope,
        cursor=cursor,
        event_id=event_id,
        kind=kind,
        at_ms=at_ms,
        body=body,
        prev_digest=prev_digest,
        event_digest=event_digest,
        affects_records=bool(affects),
    )


def _walk(scope: Scope, rows: Iterable[RawJournalRow], seen: list[JournalEvent]) -> Iterator[JournalEvent]:
    for row in rows:
        event = _parse(scope, row)
        seen.append(event)
        yield event


def _check_journal(tx: StoreTx, scope: Scope, report: VerifyReport) -> journal.FoldedState | None:
    """The folded state when the chain and the head hold; otherwise reports the first break and returns None."""
    name = _name(scope)
    seen: list[JournalEvent] = []
    try:
        chain_head = journal.verify_chain(scope, _walk(scope, tx.journal_rows(scope), seen))
    except _BadRow as bad:
        report.events += len(seen)
        detail = f"the journal of {name} fails at cursor {bad.cursor} ({bad.reason})"
        report.problems.append(Problem(ErrorCode.JOURNAL_CORRUPT, scope, f"cursor {bad.cursor}", detail))
        return None
    except ContractError as exc:
        report.events += len(seen)
        failed = seen[-1].cursor if seen else 0
        if exc.code is ErrorCode.CURSOR_GAP:
            before = seen[-2].cursor if len(seen) > 1 else 0
            detail = f"the journal of {name} has a gap: cursor {failed} follows cursor {before}"
        else:
            detail = f"the journal of {name} fails at cursor {failed} (the hash chain breaks here)"
        report.problems.append(Problem(exc.code, scope, f"cursor {failed}", detail))
        return None
    report.events += len(seen)
    head = tx.head(scope)
    if head is None:
        if seen:
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
    try:
        return journal.fold(seen)
    except (ContractError, KeyError, TypeError):
        detail = f"the journal of {name} holds an event that cannot be replayed"
        report.problems.append(Problem(ErrorCode.JOURNAL_CORRUPT, scope, "fold", detail))
        return None


def _check_fold(
    checks: _Checks, folded: journal.FoldedState, candidates: list[CandidateStateRow], records: Mapping[str, str]
) -> None:
    """Replaying the journal must give exactly the candidate and record tables (SPEC §5)."""
    _compare(checks, "candidate", folded.candidates, {row.candidate_id: row.state for row in candidates})
    _compare(checks, "record", folded.records, records)
    waiting = {row.candidate_id for row in candidates if row.adjudication}
    for candidate_id in sorted(waiting ^ folded.adjudication):
        where = "the table" if candidate_id in waiting else "the journal"
        detail = f"candidate {candidate_id} waits for review only in {where} of {_name(checks.scope)}"
        checks.add("fold", ErrorCode.JOURNAL_CORRUPT, candidate_id, detail)


def _compare(checks: _Checks, kind: str, replayed: Mapping[str, str], stored: Mapping[str, str]) -> None:
    name = _name(checks.scope)
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


# -- bodies ----------------------------------------------------------------------------------------


def _check_bodies(
    checks: _Checks, candidates: list[CandidateStateRow], records: Mapping[str, str], bodies: set[str]
) -> dict[str, str]:
    """Every live owner has its body and no ended one keeps one. Returns live owners -> body kind."""
    live: dict[str, str] = {row.candidate_id: "candidate" for row in candidates if row.state == _PENDING}
    live.update((record_id, "record") for record_id, state in records.items() if state != _TOMBSTONED)
    ended = {row.candidate_id: f"{row.state} candidate" for row in candidates if row.state != _PENDING}
    ended.update((record_id, "tombstoned record") for record_id, state in records.items() if state == _TOMBSTONED)
    name = _name(checks.scope)
    for owner in sorted(set(live) - bodies):
        checks.add("bodies", ErrorCode.BLOB_MISSING, owner, f"the body of {live[owner]} {owner} in {name} is missing")
    for owner in sorted(bodies - set(live)):
        what = ended.get(owner)
        if what is None:
            detail = f"a body is left for {owner}, which no candidate or record of {name} names"
        else:
            detail = f"a body is left for the {what} {owner} in {name}"
        checks.add("leftover", ErrorCode.JOURNAL_CORRUPT, owner, detail)
    return live


def _open_bodies(
    deps: Deps,
    tx: StoreTx,
    scope: Scope,
    live: Mapping[str, str],
    bodies: set[str],
    report: VerifyReport,
    suspects: list[tuple[str, str]],
) -> dict[str, dict[str, str]]:
    """Opens every live body; returns the index fields of each record that opened. Failures become suspects."""
    fields: dict[str, dict[str, str]] = {}
    for owner in sorted(set(live) & bodies):
        kind = live[owner]
        sealed = tx.get_body(scope, owner)
        if sealed is None:
            continue
        if deps.vault.get(scope, owner) is None:
            suspects.append((owner, f"the data key of {kind} {owner} in {_name(scope)} is missing from the vault"))
            continue
        try:
            plaintext = open_sealed(deps.keyring, deps.vault, scope, owner, kind, sealed)
        except ContractError:
            suspects.append((owner, f"the body of {kind} {owner} in {_name(scope)} does not open with its data key"))
            continue
        report.opened += 1
        if kind == "record":
            try:
                fields[owner] = index_fields(json.loads(plaintext)["payload"])
            except (ValueError, KeyError, TypeError):
                suspects.append((owner, f"the body of record {owner} in {_name(scope)} holds no stored payload"))
    return fields


def _confirm_suspects(deps: Deps, scope: Scope, checks: _Checks, suspects: list[tuple[str, str]]) -> None:
    """A body read in the snapshot may have ended since, its key destroyed after that commit: not a problem."""
    try:
        with deps.store.read() as tx:
            still = tx.body_owners(scope)
    except ContractError:
        still = {owner for owner, _ in suspects}
    for owner, detail in suspects:
        if owner in still:
            checks.add("keys", ErrorCode.BLOB_MISSING, owner, detail)


# -- the lexical index -----------------------------------------------------------------------------


def _check_tokenizer(tx: StoreTx, checks: _Checks) -> bool:
    """True when the scope's entries were built by another tokenizer: every entry of a CJK memory would
    then differ from its body, so one problem says why (and the entries are not compared one by one)."""
    stats = tx.index_stats(checks.scope)
    if not is_stale(stats):
        return False
    detail = (
        f"the lexical index of {_name(checks.scope)} was built by tokenizer {scope_tokenizer(stats)}; this version"
        f" tokenizes with {tokenizer_id()}: run engram-memory reindex"
    )
    checks.add("tokenizer", ErrorCode.PROJECTION_STALE, "lexical index", detail)
    return True


def _check_index(
    tx: StoreTx,
    checks: _Checks,
    records: Mapping[str, str],
    fields: Mapping[str, Mapping[str, str]],
    report: VerifyReport,
) -> None:
    """The index holds exactly the scope's accepted_current records, as their bodies say, and its statistics add up."""
    scope, name = checks.scope, _name(checks.scope)
    entries = tx.index_entries(scope)
    report.indexed += len(entries)
    indexed: set[str] = set()
    for entry in entries:
        if entry.record_id is None:
            detail = f"index row {entry.rowid} of {name} points at no record"
        elif entry.record_scope != scope:
            detail = f"index row {entry.rowid} of {name} points at a record of another scope"
        elif records.get(entry.record_id) != _CURRENT:
            detail = f"record {entry.record_id} in {name} is indexed but {records.get(entry.record_id)}"
        elif entry.record_id in fields and dict(entry.fields) != dict(fields[entry.record_id]):
            detail = f"the index entry of record {entry.record_id} in {name} does not match its body"
        else:
            indexed.add(entry.record_id)
            continue
        checks.add("index", ErrorCode.PROJECTION_STALE, entry.record_id or f"row {entry.rowid}", detail)
    current = {record_id for record_id, state in records.items() if state == _CURRENT}
    for record_id in sorted(current - indexed - {e.record_id for e in entries}):
        checks.add("index", ErrorCode.PROJECTION_STALE, record_id, f"record {record_id} in {name} is not indexed")
    stats = tx.index_stats(scope)
    # Token totals are counted as the store counts them when it indexes: whitespace-separated tokens.
    totals = {f: sum(len(entry.fields.get(f, "").split()) for entry in entries) for f in FIELDS}
    kept = {f: stats.field_token_totals.get(f, 0) for f in FIELDS}
    if stats.doc_count != len(entries) or kept != totals:
        fields_off = ", ".join(f for f in FIELDS if kept[f] != totals[f]) or "none"
        detail = (
            f"the index statistics of {name} are off ({stats.doc_count} documents counted, {len(entries)} indexed;"
            f" token totals off in: {fields_off})"
        )
        checks.add("index", ErrorCode.PROJECTION_STALE, "index statistics", detail)


def _check_vectors(
    deps: Deps, tx: StoreTx, scope: Scope, checks: _Checks, records: Mapping[str, str], report: VerifyReport
) -> None:
    """Vectors exist only for accepted_current records. A current record without one by this process's
    model is not a fault (the indexer may not have caught up, or the model changed): the next search of
    the scope embeds it, and the report says how many wait."""
    name = _name(scope)
    entries = tx.vector_entries(scope)
    report.embedded += len(entries)
    for entry in entries:
        if entry.record_id is None:
            detail = f"a vector in {name} belongs to no record of the scope"
        elif entry.state != _CURRENT:
            detail = f"record {entry.record_id} in {name} has a vector but is {entry.state}"
        else:
            continue
        checks.add("vectors", ErrorCode.PROJECTION_STALE, entry.record_id or "vector", detail)
    if deps.semantic is None:
        return
    model = deps.semantic.embedder.model_id
    current = {record_id for record_id, state in records.items() if state == _CURRENT}
    embedded = {entry.record_id for entry in entries if entry.model == model}
    report.unembedded += len(current - embedded)


def _verify_index_totals(deps: Deps, report: VerifyReport) -> None:
    """Rows under no scope's token are invisible per scope: the totals of one snapshot catch them."""
    try:
        with deps.store.read() as tx:
            rows = tx.index_row_count()
            current = sum(c.count for c in tx.record_state_counts() if c.state == _CURRENT)
        if rows != current:
            detail = f"the lexical index holds {rows} rows for {current} accepted_current records"
            report.problems.append(Problem(ErrorCode.PROJECTION_STALE, None, "lexical index", detail))
        # The full-text engine's own check is a write statement; it changes nothing but needs the write lock.
        with deps.store.write() as wtx:
            healthy = wtx.index_integrity_ok()
    except ContractError as exc:
        report.problems.append(_unreadable(ErrorCode.PROJECTION_STALE, None, "the lexical index", exc))
        return
    if not healthy:
        detail = "the full-text index fails its own integrity check"
        report.problems.append(Problem(ErrorCode.PROJECTION_STALE, None, "lexical index", detail))


def _warn_orphaned_keys(deps: Deps, with_bodies: set[str], report: VerifyReport) -> None:
    """Keys are put before their body commits and destroyed after it ends: an old key with no body is litter."""
    try:
        old = deps.vault.owners_created_before(deps.clock.now_ms() - ORPHAN_KEY_AGE_MS)
    except ContractError:
        report.warnings.append("the key vault could not be read for orphaned data keys")
        return
    orphans = [owner for owner in old if owner not in with_bodies]
    if orphans:
        report.warnings.append(
            f"{len(orphans)} orphaned data keys (older than an hour, no body in the store); they open nothing"
        )


def problems_json(report: VerifyReport) -> dict[str, Any]:
    """The report as the `verify --json` output: codes, scopes, subjects and details."""
    return {
        "ok": report.ok,
        "mode": "full" if report.full else "quick",
        "scopes": report.scopes,
        "events": report.events,
        "bodies": report.bodies,
        "opened": report.opened,
        "indexed": report.indexed,
        "embedded": report.embedded,
        "unembedded": report.unembedded,
        "problems": [
            {
                "code": problem.code.value,
                "tenant": None if problem.scope is None else problem.scope.tenant,
                "workspace": None if problem.scope is None else problem.scope.workspace,
                "subject": problem.subject,
                "detail": problem.detail,
            }
            for problem in report.problems
        ],
        "warnings": list(report.warnings),
    }
