"""How a batch's held rows (deferred.py) are written: one statement per table and tenant, with `unnest` of arrays.

Index rows and postings name their record by id and find its rid in the same statement (the records
are written first), so the client never waits for a rid. The values go in binary (psycopg builds
arrays several times faster so). Rows are grouped by tenant, each group under its own app.tenant, since
row-level security checks every row against it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from engram_memory.contract.canonical import canonical_json
from engram_memory.engine.ports.lexical import FIELDS
from engram_memory.engine.ports.rows import CandidateRow, IdempotencyRow, JournalEvent, RecordRow, Scope
from engram_memory.stores.postgres.deferred import (
    BodyDiscard,
    BodyPut,
    CandidateUpdate,
    IndexEntry,
    Op,
    updated_candidate,
)
from engram_memory.stores.postgres.lexemes import scope_token
from engram_memory.stores.sql.base import StoreInvariantError
from engram_memory.stores.sql.postings import impacts_of
from engram_memory.stores.sql.rows import (
    CANDIDATE_COLUMNS,
    EVENT_COLUMNS,
    IDEMPOTENCY_COLUMNS,
    RECORD_COLUMNS,
    candidate_values,
    idempotency_values,
    record_values,
)

Execute = Callable[[str, Sequence[Any]], Any]

_JOURNAL_TYPES = ("text", "text", "bigint", "text", "text", "bigint", "text", "text", "text", "integer")
_HEAD = (
    "INSERT INTO scopes (tenant, workspace, head_cursor, head_digest, records_cursor)"
    " VALUES (?, ?, ?, ?, COALESCE(?, 0))"
    " ON CONFLICT (tenant, workspace) DO UPDATE SET head_cursor = excluded.head_cursor,"
    " head_digest = excluded.head_digest, records_cursor = COALESCE(?, scopes.records_cursor)"
)


def _unnest_insert(table: str, columns: str, types: Sequence[str]) -> str:
    """`INSERT INTO table (columns) SELECT * FROM unnest(…)`: one array parameter a column, of its type."""
    arrays = ", ".join(f"?::{kind}[]" for kind in types)
    return f"INSERT INTO {table} ({columns}) SELECT * FROM unnest({arrays})"  # noqa: S608


_JOURNAL = _unnest_insert("journal", f"tenant, workspace, {EVENT_COLUMNS}", _JOURNAL_TYPES)
_CANDIDATE_TYPES = ("text",) * 9 + ("bigint",) * 4 + ("integer", "text", "integer", "text", "text", "text")
_CANDIDATES = _unnest_insert("candidates", CANDIDATE_COLUMNS, _CANDIDATE_TYPES)
_CANDIDATE_UPDATE = (
    "UPDATE candidates SET state = ?, adjudication = ?, record_id = ?, review_reasons = ?"
    " WHERE candidate_id = ? AND tenant = ? AND workspace = ?"
)
_RECORD_TYPES = ("text",) * 6 + ("bigint",) * 5 + ("text",) * 3 + ("bigint", "text", "text")
_RECORDS = _unnest_insert("records", RECORD_COLUMNS, _RECORD_TYPES)
_BODIES = _unnest_insert(
    "sealed_bodies", "owner_id, tenant, workspace, nonce, ciphertext", ("text",) * 3 + ("bytea",) * 2
)
_BODY_DELETE = "DELETE FROM sealed_bodies WHERE owner_id = ? AND tenant = ? AND workspace = ?"
_IDEMPOTENCY = _unnest_insert("idempotency", IDEMPOTENCY_COLUMNS, ("text",) * 8 + ("bigint",))
_FIELD_COLUMNS = ", ".join(f"f_{name}" for name in FIELDS)
_INDEX = (
    f"INSERT INTO lexical_index (rid, tenant, workspace, scope_token, {_FIELD_COLUMNS}, tsv)"  # noqa: S608
    " SELECT r.rid, r.tenant, r.workspace, u.scope_token, "
    + ", ".join(f"u.f_{name}" for name in FIELDS)
    + ", u.tsv::tsvector"
    " FROM unnest(?::text[], ?::text[], ?::text[], "
    + ", ".join("?::text[]" for _ in FIELDS)
    + f", ?::text[]) AS u (workspace, record_id, scope_token, {_FIELD_COLUMNS}, tsv)"
    " JOIN records AS r ON r.tenant = ? AND r.workspace = u.workspace AND r.record_id = u.record_id"
)
_POSTINGS = (
    "INSERT INTO lexical_postings (tenant, workspace, term, neg_impact, rid)"
    " SELECT r.tenant, r.workspace, u.term, u.neg_impact, r.rid"
    " FROM unnest(?::text[], ?::text[], ?::text[], ?::integer[]) AS u (workspace, record_id, term, neg_impact)"
    " JOIN records AS r ON r.tenant = ? AND r.workspace = u.workspace AND r.record_id = u.record_id"
)
_TERMS = (
    "INSERT INTO lexical_terms (tenant, workspace, term, docs)"
    " SELECT ?, workspace, term, docs FROM unnest(?::text[], ?::text[], ?::bigint[]) AS u (workspace, term, docs)"
    " ON CONFLICT (tenant, workspace, term) DO UPDATE SET docs = lexical_terms.docs + excluded.docs"
)
_STATS = (
    "UPDATE scopes SET doc_count = doc_count + ?, "  # noqa: S608
    + ", ".join(f"len_{name} = len_{name} + ?" for name in FIELDS)
    + ", tokenizer = CASE WHEN doc_count = 0 THEN COALESCE(?, tokenizer) ELSE tokenizer END"
    " WHERE tenant = ? AND workspace = ?"
)


@dataclass
class _Tenant:
    """One tenant's share of the entries being written (row-level security checks rows against app.tenant)."""

    events: list[JournalEvent]
    candidates: dict[str, CandidateRow]
    updates: list[CandidateUpdate]
    records: list[RecordRow]
    bodies: dict[str, BodyPut]
    discards: list[BodyDiscard]
    keys: list[IdempotencyRow]
    index: list[IndexEntry]


def _by_tenant(ops: Iterable[Op]) -> dict[str, _Tenant]:
    tenants: dict[str, _Tenant] = {}

    def of(scope: Scope) -> _Tenant:
        found = tenants.get(scope.tenant)
        if found is None:
            found = tenants[scope.tenant] = _Tenant([], {}, [], [], {}, [], [], [])
        return found

    for op in ops:
        if isinstance(op, JournalEvent):
            of(op.scope).events.append(op)
        elif isinstance(op, CandidateRow):
            of(op.scope).candidates[op.candidate_id] = op
        elif isinstance(op, CandidateUpdate):
            mine = of(op.scope)
            held = mine.candidates.get(op.candidate_id)
            if held is None:
                mine.updates.append(op)  # inserted by an earlier write of the batch, already written
            else:
                mine.candidates[op.candidate_id] = updated_candidate(held, op)
        elif isinstance(op, RecordRow):
            of(op.scope).records.append(op)
        elif isinstance(op, BodyPut):
            of(op.scope).bodies[op.owner_id] = op
        elif isinstance(op, BodyDiscard):
            mine = of(op.scope)
            if mine.bodies.pop(op.owner_id, None) is None:
                mine.discards.append(op)  # a body already in the database
        elif isinstance(op, IdempotencyRow):
            of(op.scope).keys.append(op)
        else:
            of(op.scope).index.append(op)
    return tenants


def write(
    execute: Execute, ops: Sequence[Op], *, tenant_now: str | None, enter: Callable[[str], None]
) -> Callable[[], None]:
    """Writes the entries with the connection's `execute` (pipelined: nothing waits), each tenant's under
    its own app.tenant (`enter`), then puts back `tenant_now`. Returns the check to run once every
    statement has run: every indexed scope had its statistics row (raises StoreInvariantError)."""
    stats_rows: list[Any] = []
    tenants = _by_tenant(ops)
    for tenant, mine in tenants.items():
        enter(tenant)
        _write_journal(execute, mine.events)
        if mine.candidates:
            execute(_CANDIDATES, _columns([candidate_values(row) for row in mine.candidates.values()]))
        for update in mine.updates:
            scope = update.scope
            execute(
                _CANDIDATE_UPDATE,
                (
                    update.state,
                    int(update.adjudication),
                    update.record_id,
                    json.dumps(list(update.review_reasons)),
                    update.candidate_id,
                    scope.tenant,
                    scope.workspace,
                ),
            )
        if mine.records:
            execute(_RECORDS, _columns([record_values(row) for row in mine.records]))
        if mine.bodies:
            puts = list(mine.bodies.values())
            execute(
                _BODIES,
                (
                    [put.owner_id for put in puts],
                    [put.scope.tenant for put in puts],
                    [put.scope.workspace for put in puts],
                    [put.body.nonce for put in puts],
                    [put.body.ciphertext for put in puts],
                ),
            )
        for discard in mine.discards:
            execute(_BODY_DELETE, (discard.owner_id, discard.scope.tenant, discard.scope.workspace))
        if mine.keys:
            execute(_IDEMPOTENCY, _columns([idempotency_values(row) for row in mine.keys]))
        stats_rows += _write_index(execute, tenant, mine.index)
    if tenant_now is not None and tenants and tenant_now != list(tenants)[-1]:
        enter(tenant_now)

    def check() -> None:
        if any(cursor.rowcount != 1 for cursor in stats_rows):
            raise StoreInvariantError("index statistics of a scope with no journal")

    return check


def _columns(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    return [list(column) for column in zip(*rows, strict=True)]


def _write_journal(execute: Execute, events: Sequence[JournalEvent]) -> None:
    if not events:
        return
    rows = [
        (
            e.scope.tenant,
            e.scope.workspace,
            e.cursor,
            e.event_id,
            e.kind,
            e.at_ms,
            (e.body_json or canonical_json(dict(e.body))).decode("utf-8"),
            e.prev_digest,
            e.event_digest,
            int(e.affects_records),
        )
        for e in events
    ]
    execute(_JOURNAL, _columns(rows))
    heads: dict[Scope, tuple[JournalEvent, int | None]] = {}
    for e in events:  # in order: the last event of a scope is its head
        _, records_cursor = heads.get(e.scope, (e, None))
        heads[e.scope] = (e, e.cursor if e.affects_records else records_cursor)
    for scope, (last, records_cursor) in heads.items():
        execute(
            _HEAD,
            (scope.tenant, scope.workspace, last.cursor, last.event_digest, records_cursor, records_cursor),
        )


def _write_index(execute: Execute, tenant: str, entries: Sequence[IndexEntry]) -> list[Any]:
    if not entries:
        return []
    execute(
        _INDEX,
        [
            [e.scope.workspace for e in entries],
            [e.record_id for e in entries],
            [scope_token(e.scope) for e in entries],
            *([e.values[n] for e in entries] for n in range(len(FIELDS))),
            [e.tsv for e in entries],
            tenant,
        ],
    )
    postings: list[tuple[str, str, str, int]] = []
    docs: Counter[tuple[str, str]] = Counter()
    lengths: dict[Scope, list[int]] = {}
    tokenizers: dict[Scope, str] = {}
    for e in entries:
        impacts, rows = impacts_of(dict(zip(FIELDS, e.values, strict=True)))
        postings += [(e.scope.workspace, e.record_id, term, neg) for term, neg in rows]
        docs.update((e.scope.workspace, term) for term in impacts)
        totals = lengths.setdefault(e.scope, [0] * (len(FIELDS) + 1))
        totals[0] += 1
        for n, value in enumerate(e.values, start=1):
            totals[n] += len(value.split())
        tokenizers.setdefault(e.scope, e.tokenizer)
    if postings:
        execute(_POSTINGS, [*_columns(postings), tenant])
    ordered = sorted(docs.items())  # one order for every writer of the scope's terms
    if ordered:
        execute(
            _TERMS,
            (tenant, [w for (w, _), _ in ordered], [t for (_, t), _ in ordered], [n for _, n in ordered]),
        )
    return [
        execute(_STATS, (*totals, tokenizers[scope], scope.tenant, scope.workspace))
        for scope, totals in lengths.items()
    ]
