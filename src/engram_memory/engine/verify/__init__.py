"""The store's verifier: walks each scope's chain, heads, tables, bodies and index, and names what is wrong.

`full=False` is the server's start-up check (chain, heads, fold, body presence; nothing decrypted);
`full=True` is `engram-memory verify`, which also opens every live body and checks the lexical index.
Problems carry codes, ids, cursors and states, never memory text, and a damaged row is reported, never raised.
The walk is here; the checks it runs are in chain.py, bodies.py and indexes.py, what they find in report.py.
"""

from __future__ import annotations

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.deps import Deps
from engram_memory.engine.ports.store import Scope
from engram_memory.engine.verify.bodies import check_bodies, confirm_suspects, open_bodies
from engram_memory.engine.verify.chain import check_fold, check_journal
from engram_memory.engine.verify.indexes import check_index, check_tokenizer, check_vectors, verify_index_totals
from engram_memory.engine.verify.report import (
    MAX_SUBJECTS_PER_CHECK,
    Checks,
    Problem,
    VerifyReport,
    problems_json,
    scope_name,
    unreadable,
)

__all__ = ["MAX_SUBJECTS_PER_CHECK", "ORPHAN_KEY_AGE_MS", "Problem", "VerifyReport", "problems_json", "verify_store"]

ORPHAN_KEY_AGE_MS = 3_600_000


def verify_store(deps: Deps, *, full: bool) -> VerifyReport:
    """Never raises for what it finds: every fault, a malformed file included, becomes a Problem.

    Each scope is read in one snapshot, so concurrent writers cannot make a healthy scope look broken.
    """
    report = VerifyReport(full=full)
    try:
        with deps.store.read() as tx:
            names = tx.scope_names()
    except ContractError as exc:
        report.problems.append(unreadable(ErrorCode.JOURNAL_CORRUPT, None, "the list of scopes", exc))
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
        verify_index_totals(deps, report)
        _warn_orphaned_keys(deps, with_bodies, report)
    return report


def _verify_scope(deps: Deps, scope: Scope, report: VerifyReport, with_bodies: set[str]) -> None:
    checks = Checks(scope, report)
    step = (ErrorCode.JOURNAL_CORRUPT, "the journal")
    suspects: list[tuple[str, str]] = []
    try:
        with deps.store.read() as tx:
            folded = check_journal(tx, scope, report)
            step = (ErrorCode.JOURNAL_CORRUPT, "the candidate and record tables")
            candidates = tx.candidate_states(scope)
            records = tx.record_states(scope)
            if folded is not None:
                check_fold(checks, folded, candidates, records)
            step = (ErrorCode.PROJECTION_STALE, "the lexical index")
            stale = check_tokenizer(tx, checks)
            step = (ErrorCode.BLOB_MISSING, "the sealed bodies")
            bodies = tx.body_owners(scope)
            with_bodies.update(bodies)
            live = check_bodies(checks, candidates, records, bodies)
            report.bodies += len(bodies)
            if report.full:
                fields = open_bodies(deps, tx, scope, live, bodies, report, suspects)
                step = (ErrorCode.PROJECTION_STALE, "the lexical index")
                check_index(tx, checks, records, {} if stale else fields, report)
                step = (ErrorCode.PROJECTION_STALE, "the semantic index")
                check_vectors(deps, tx, scope, checks, records, report)
    except ContractError as exc:
        report.problems.append(unreadable(step[0], scope, step[1], exc))
    except Exception as exc:  # a row damaged past what the store's types allow: named, not raised
        detail = f"{step[1]} of {scope_name(scope)} cannot be checked ({type(exc).__name__})"
        report.problems.append(Problem(step[0], scope, step[1], detail))
    if suspects:
        confirm_suspects(deps, scope, checks, suspects)
    checks.close()


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
