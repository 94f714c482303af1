"""The index checks of verify: the lexical index and the vectors hold exactly the accepted_current records,
as their bodies say, and their statistics and the full-text engine's own check add up."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.states import RecordState
from engram_memory.engine.deps import Deps
from engram_memory.engine.ports.agent_tx import JournalTx, LexicalIndexTx
from engram_memory.engine.ports.operations import OperationsTx
from engram_memory.engine.ports.store import Scope
from engram_memory.engine.recall.ranking import FIELDS
from engram_memory.engine.recall.reindex import is_stale, scope_tokenizer
from engram_memory.engine.recall.semantic import VectorCache
from engram_memory.engine.recall.text import tokenizer_id
from engram_memory.engine.verify.report import Checks, Problem, VerifyReport, scope_name, unreadable

_CURRENT = RecordState.ACCEPTED_CURRENT.value
_TOMBSTONED = RecordState.TOMBSTONED.value


class IndexCheckTx(JournalTx, LexicalIndexTx, OperationsTx, Protocol):
    """The indexes, against the records and journal they are built from."""


def check_tokenizer(tx: LexicalIndexTx, checks: Checks) -> bool:
    """True when the scope's entries were built by another tokenizer: every entry of a CJK memory would
    then differ from its body, so one problem says why (and the entries are not compared one by one)."""
    stats = tx.index_stats(checks.scope)
    if not is_stale(stats):
        return False
    detail = (
        f"the lexical index of {scope_name(checks.scope)} was built by tokenizer {scope_tokenizer(stats)}; this version"
        f" tokenizes with {tokenizer_id()}: run engram-memory reindex"
    )
    checks.add("tokenizer", ErrorCode.PROJECTION_STALE, "lexical index", detail)
    return True


def check_index(
    tx: IndexCheckTx,
    checks: Checks,
    records: Mapping[str, str],
    fields: Mapping[str, Mapping[str, str]],
    report: VerifyReport,
) -> None:
    """The index holds exactly the scope's accepted_current records, as their bodies say, and its statistics add up."""
    scope, name = checks.scope, scope_name(checks.scope)
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


def check_vectors(
    deps: Deps, tx: IndexCheckTx, scope: Scope, checks: Checks, records: Mapping[str, str], report: VerifyReport
) -> None:
    """Vectors exist only for accepted_current records. A current record without one by this process's
    model is not a fault (the indexer may not have caught up, or the model changed): the next search of
    the scope embeds it, and the report says how many wait."""
    name = scope_name(scope)
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
    models = {deps.semantic.vector_id}
    current = {record_id for record_id, state in records.items() if state == _CURRENT}
    embedded = {entry.record_id for entry in entries if entry.model in models}
    report.unembedded += len(current - embedded)
    check_shared_vectors(deps.semantic, tx, scope, checks, records)


def check_shared_vectors(
    cache: VectorCache, tx: JournalTx, scope: Scope, checks: Checks, records: Mapping[str, str]
) -> None:
    """The scope's shared vector files (engine/recall/shared_index.py), if it has any: written from this
    store's history, and holding no vector of a forgotten record."""
    shared = cache.shared
    base = None if shared is None else shared.current(scope, cache.vector_id, cache.dimension)
    if base is None:
        return
    name = scope_name(scope)
    if not base.stamp.holds(tx, scope):
        detail = f"the shared vector files of {name} were written from another history (unused; safe to delete)"
        checks.add("vectors", ErrorCode.PROJECTION_STALE, "shared vector files", detail)
        return
    for record_id, state in sorted(records.items()):
        if state == _TOMBSTONED and base.still_holds(record_id):
            detail = f"record {record_id} in {name} is forgotten but its vector is still in the shared vector files"
            checks.add("vectors", ErrorCode.PROJECTION_STALE, record_id, detail)


def verify_index_totals(deps: Deps, report: VerifyReport) -> None:
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
        report.problems.append(unreadable(ErrorCode.PROJECTION_STALE, None, "the lexical index", exc))
        return
    if not healthy:
        detail = "the full-text index fails its own integrity check"
        report.problems.append(Problem(ErrorCode.PROJECTION_STALE, None, "lexical index", detail))
