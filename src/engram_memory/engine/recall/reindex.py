"""Moving a store's derived indexes to this version: lexical entries re-tokenized, vectors re-embedded.

The lexical index holds tokens, not text, so a scope indexed by another tokenizer (engine/recall/text.py) would
meet today's query terms on the wrong terms: its searches answer PROJECTION_STALE until this has run.
Vectors carry their model per row; a record without one by this process's model is embedded here, so no
search has to embed a whole scope on its first call. Work goes scope by scope in short transactions:
an interrupted run keeps what it did, and running again only redoes what is still stale.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from engram_memory.contract.errors import ContractError
from engram_memory.contract.states import RecordState
from engram_memory.engine.deps import Deps
from engram_memory.engine.ports.operations import OperationsTx
from engram_memory.engine.ports.store import IndexStats, Scope
from engram_memory.engine.projection import add_index_entry, index_fields
from engram_memory.engine.recall.semantic import VectorCache, embed_record, embedding_texts, index_vector, to_bytes
from engram_memory.engine.recall.text import tokenizer_id
from engram_memory.engine.sealing.bodies import read_payload

__all__ = [
    "LEGACY_TOKENIZER",
    "IndexStatus",
    "ReindexProgress",
    "ReindexReport",
    "index_status",
    "is_stale",
    "reindex",
    "scope_tokenizer",
]

# What built the entries of a scope indexed before stores named their tokenizer (schema 5 / 4).
LEGACY_TOKENIZER = "engram-text-1"
# Records re-tokenized per transaction: each decrypts its bodies, so a batch holds the writer for ~0.1 s.
LEXICAL_BATCH = 500
# Records embedded between writes: the model runs outside any transaction, the writes are short.
SEMANTIC_BATCH = 64
# Model threads of a re-embedding: it runs alone (no admissions share the cores), so one per core.
REEMBED_THREADS = 2
# Bodies opened between two progress reports of a rebuild (a restore's, about 0.1-7 ms each).
REBUILD_PROGRESS_EVERY = 200

_CURRENT = RecordState.ACCEPTED_CURRENT.value
_T = TypeVar("_T")


def scope_tokenizer(stats: IndexStats) -> str | None:
    """The tokenizer that built the scope's entries; None when it has none (any tokenizer will do)."""
    if stats.doc_count <= 0:
        return None
    return stats.tokenizer or LEGACY_TOKENIZER


def is_stale(stats: IndexStats) -> bool:
    built_by = scope_tokenizer(stats)
    return built_by is not None and built_by != tokenizer_id()


@dataclass(frozen=True, slots=True)
class IndexStatus:
    """How far the store is from this version's indexes."""

    tokenizer: str
    stale_scopes: tuple[Scope, ...]  # lexical entries built by another tokenizer
    stale_records: int  # their current records, all to be re-tokenized
    models: tuple[str, ...]  # this process's embedding models (their vector ids), none without one
    unembedded: int  # current records with no vector by these models

    @property
    def current(self) -> bool:
        return not self.stale_scopes and not self.unembedded


@dataclass(frozen=True, slots=True)
class ReindexProgress:
    phase: str  # "lexical" or "semantic"
    done: int
    total: int


@dataclass(frozen=True, slots=True)
class ReindexReport:
    scopes: int  # scopes whose lexical index moved to this tokenizer
    retokenized: int  # entries rewritten (entries whose tokens did not change are left alone)
    embedded: int  # vectors written
    unreadable: int  # current records whose body did not open: left as they were (verify names them)


def _scopes(tx: OperationsTx) -> list[Scope]:
    scopes = []
    for tenant, workspace in tx.scope_names():
        try:
            scopes.append(Scope(tenant=tenant.decode("utf-8"), workspace=workspace.decode("utf-8")))
        except (UnicodeDecodeError, ValueError):
            continue  # a damaged scope name is verify's to report; nothing of it can be indexed
    return scopes


def _current_ids(tx: OperationsTx, scope: Scope) -> list[str]:
    return sorted(record_id for record_id, state in tx.record_states(scope).items() if state == _CURRENT)


def index_status(deps: Deps) -> IndexStatus:
    """Raises ContractError STORE_UNAVAILABLE."""
    models = () if deps.semantic is None else (deps.semantic.vector_id,)
    stale: list[Scope] = []
    stale_records = unembedded = 0
    with deps.store.read() as tx:
        for scope in _scopes(tx):
            stats = tx.index_stats(scope)
            if is_stale(stats):
                stale.append(scope)
                stale_records += stats.doc_count
            if models and stats.doc_count > 0:
                unembedded += len(tx.records_without_vector(scope, models))
    return IndexStatus(tokenizer_id(), tuple(stale), stale_records, models, unembedded)


def _chunks(items: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def reindex(
    deps: Deps, progress: Callable[[ReindexProgress], None] | None = None, *, embed: bool = True
) -> ReindexReport:
    """Re-tokenizes every stale scope, then (unless `embed` is False) embeds every current record the
    model has no vector of.

    Safe beside serving processes: each batch re-reads the records it rewrites, a record admitted
    meanwhile is indexed by the current tokenizer already, and a vector is only written for a record
    still current when it lands. Raises ContractError STORE_UNAVAILABLE, MUTATION_OUTCOME_UNKNOWN.
    """
    report = progress or (lambda _progress: None)
    status = index_status(deps)
    scopes = retokenized = embedded = unreadable = 0
    total, done = status.stale_records, 0
    for scope in status.stale_scopes:
        with deps.store.read() as tx:
            ids = _current_ids(tx, scope)
        for batch in _chunks(ids, LEXICAL_BATCH):
            with deps.store.write() as tx:
                for record_id in batch:
                    record = tx.get_record(scope, record_id)
                    if record is None or record.state != _CURRENT:
                        continue
                    try:
                        payload = read_payload(deps, tx, scope, record_id, "record")
                    except ContractError:
                        unreadable += 1
                        continue
                    retokenized += tx.reindex_record(scope, record_id, index_fields(payload))
            done += len(batch)
            report(ReindexProgress("lexical", min(done, total), max(total, done)))
        with deps.store.write() as tx:
            tx.set_index_tokenizer(scope, tokenizer_id())
        scopes += 1
    if embed and deps.semantic is not None:
        embedded, failed = _embed_missing(deps, deps.semantic, report)
        unreadable += failed
    return ReindexReport(scopes, retokenized, embedded, unreadable)


def _embed_missing(deps: Deps, cache: VectorCache, report: Callable[[ReindexProgress], None]) -> tuple[int, int]:
    models = (cache.vector_id,)
    with deps.store.read() as tx:
        work = [(scope, row.record_id) for scope in _scopes(tx) for row in tx.records_without_vector(scope, models)]
    total, done, written, unreadable = len(work), 0, 0, 0
    with ThreadPoolExecutor(max_workers=REEMBED_THREADS, thread_name_prefix="engram-reindex") as pool:
        for batch in _chunks(work, SEMANTIC_BATCH):
            batch_written, batch_unreadable = _embed_batch(deps, cache, pool, batch)
            written += batch_written
            unreadable += batch_unreadable
            done += len(batch)
            report(ReindexProgress("semantic", done, total))
    return written, unreadable


def _texts(payload: Mapping[str, Any]) -> list[str]:
    primary, lines = embedding_texts(payload)
    return [primary, *lines]


def _embed_batch(
    deps: Deps, cache: VectorCache, pool: ThreadPoolExecutor, batch: Sequence[tuple[Scope, str]]
) -> tuple[int, int]:
    """(vectors written, bodies that did not open) for one batch of records."""
    payloads: list[tuple[Scope, str, Mapping[str, Any]]] = []
    unreadable = 0
    with deps.store.read() as tx:
        for scope, record_id in batch:
            try:
                payloads.append((scope, record_id, read_payload(deps, tx, scope, record_id, "record")))
            except ContractError:
                unreadable += 1
    # Each distinct text once, one per model thread, then the vectors from the cache.
    texts = {(scope, text): None for scope, _, payload in payloads for text in _texts(payload)}
    list(pool.map(lambda item: cache.embed_texts(item[0], [item[1]]), texts))
    ready = [(scope, embed_record(cache, scope, record_id, payload)) for scope, record_id, payload in payloads]
    written = 0
    # Derived data, as in engine/recall/indexer.py: a power cut may lose it, and the next run embeds it again.
    with deps.store.write(synced=False) as tx:
        for scope, item in ready:
            written += tx.put_vector(scope, item.record_id, item.vector_id, to_bytes(item.vector), item.subject)
    return written, unreadable


@dataclass(frozen=True, slots=True)
class RebuildReport:
    indexed: int
    unopened: int


def rebuild_from_bodies(deps: Deps, progress: Callable[[int, int], None] | None = None) -> RebuildReport:
    """The derived indexes of a store that carries none (a restore's working copy), from its bodies.

    Every body must open: one that does not is counted, so the caller can refuse the whole store rather
    than serve one whose index silently lacks a memory. Vectors are embedded when the model is installed.
    `progress(done, total)` is told every REBUILD_PROGRESS_EVERY bodies and at the end.
    """
    with deps.store.read() as tx:
        owners = tx.sealed_owners()
    indexed = unopened = 0
    with deps.store.write() as tx:
        for done, owner in enumerate(owners, start=1):
            if progress is not None and (done % REBUILD_PROGRESS_EVERY == 0 or done == len(owners)):
                progress(done, len(owners))
            if owner.kind == "none":
                unopened += 1
                continue
            try:
                payload = read_payload(deps, tx, owner.scope, owner.owner_id, owner.kind)
            except ContractError:
                unopened += 1
                continue
            if owner.kind == "record" and owner.state == RecordState.ACCEPTED_CURRENT.value:
                add_index_entry(tx, owner.scope, owner.owner_id, payload)
                index_vector(deps.semantic, tx, owner.scope, owner.owner_id, payload)
                indexed += 1
    return RebuildReport(indexed, unopened)
