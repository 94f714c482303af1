"""Shared fixtures: a real host home on either store, bindings signed by its key, and an in-process engine.

`paths` runs each test that takes it twice, on a SQLite home and on a PostgreSQL home (ids "sqlite"
and "postgres"); `sqlite_paths` and `postgres_paths` are for tests of a mechanism only one store has,
which say so in their names.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram_memory.engine.engine import Engine
from engram_memory.host.settings import HostPaths
from tests.support.homes import STORES, Issued, bind, engine_for, home_on, make_home
from tests.support.postgres import PostgresCluster, owner_url


def _memory_folder() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else None


# Every test's files (pytest's tmp_path, tempfile's folders, the servers' scratch) live in memory where the
# machine has it, as the PostgreSQL cluster does: thousands of SQLite homes commit with fsync, and on a
# disk that cost a sixth of the suite's time. A process SIGKILLed on a tmpfs loses exactly what it loses
# on a disk (the page cache survives it), so the crash tests keep their meaning. Set before pytest
# picks its base folder; an explicit --basetemp, PYTEST_DEBUG_TEMPROOT or TMPDIR still wins.
_MEMORY = _memory_folder()
if _MEMORY is not None and "TMPDIR" not in os.environ:
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", _MEMORY)
    os.environ["TMPDIR"] = _MEMORY
    tempfile.tempdir = None  # tempfile reads TMPDIR again on its next call


@pytest.fixture(params=STORES)
def paths(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HostPaths]:
    with home_on(str(request.param), tmp_path / "home", request) as home:
        yield home


@pytest.fixture
def sqlite_paths(tmp_path: Path) -> HostPaths:
    """A SQLite home, for tests of what only the embedded store has (its files, WAL, FTS5, PRAGMAs)."""
    return make_home(tmp_path / "home")


@pytest.fixture
def postgres_paths(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HostPaths]:
    """A PostgreSQL home, for tests of what only the server store has (roles, VACUUM, snapshots)."""
    with home_on("postgres", tmp_path / "home", request) as home:
        yield home


@pytest.fixture
def engine(paths: HostPaths) -> Iterator[Engine]:
    with engine_for(paths) as running:
        yield running


@pytest.fixture
def alice(paths: HostPaths) -> Issued:
    return bind(paths)


# -- PostgreSQL: one throwaway cluster per session, a fresh database per test ----------------------
# A missing server fails these fixtures (and every test that needs them): it is never a skip.


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    # Not under pytest's own temp folder: the server runs as the postgres OS user when the tests run as root,
    # and that user must be able to reach its data and socket folders. In memory where the machine has it:
    # the suite makes two databases for almost every test, and on a slow disk each costs ten times more.
    base = Path(tempfile.mkdtemp(prefix="engram-pg-", dir=_memory_folder()))
    cluster = PostgresCluster(base)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_url(postgres_cluster: PostgresCluster) -> str:
    """The owner role's URL of a fresh, empty database."""
    return owner_url(postgres_cluster, postgres_cluster.new_database())


# -- order: the long tests first ----------------------------------------------------------------------
# Modules whose tests take seconds each (several server processes, kills, fuzzing, overlong lines, the
# embedding model). Run first, they leave the thousands of short tests to even out the two workers' ends;
# run last (as their names sort), one worker sat out the other's long tail for a minute.
LONG_FIRST = (
    "tests/mcp/test_multiprocess.py",
    "tests/reliability/",
    "tests/mcp/test_stdio_bad_lines.py",
    "tests/mcp/test_stdio_semantic.py",
    "tests/mcp/test_stdio_erasure.py",
    "tests/mcp/test_stdio_revocation.py",
    "tests/mcp/test_stdio_transport.py",
    "tests/mcp/test_stdio_review.py",
    "tests/mcp/test_stdio_concurrent_writes.py",
    "tests/host/serve/",
    "tests/host/keys/test_rotation.py",
    "tests/embeddings/",
)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A stable sort: within each group, pytest's own order (which keeps shared fixtures together) stays."""
    items.sort(key=lambda item: 0 if item.nodeid.startswith(LONG_FIRST) else 1)


# -- `long`: what `make test` leaves to `make test-slow` -------------------------------------------------
# Tests that take seconds each because they start several real processes, drive Chromium or the Node tools,
# or feed a large input; `make test-slow` (and so CI) runs them, `make test` stays within five minutes.
# What they show in the large is shown in the small by the in-process suite (the contract through the
# SDK's in-memory client, the CLI's entry point in process), and a few real processes per transport stay in
# `make test`: tests/mcp/test_stdio_transport.py and the handshake over stdio, the `process` tests of the
# CLI, tests/mcp/test_http.py's servers, one console process.
LONG = (
    # make reliability runs these at full size
    "tests/reliability/",
    "tests/mcp/test_multiprocess.py",
    # Chromium
    "tests/host/console/test_browser.py",
    "tests/host/console/test_browser_languages.py",
    "tests/host/oauth/test_sign_in_provider.py",
    # the Node tools: the official conformance suites, the Inspector, Claude Code, the o200k tokenizer
    "tests/host/oauth/test_claude_code.py",
    "tests/host/oauth/test_conformance_authorization.py",
    "tests/mcp/test_conformance_suite.py",
    "tests/mcp/test_inspector_cli.py",
    "tests/mcp/test_token_budget.py",
    "tests/test_readme_clients.py",
    # several server processes, or one per case
    "tests/mcp/test_stdio_semantic.py",
    "tests/mcp/test_http_semantic.py",
    "tests/mcp/test_stdio_erasure.py",
    "tests/mcp/test_stdio_concurrent_writes.py",
    "tests/mcp/test_stdio_revocation.py",
    "tests/mcp/test_stdio_review.py",
    "tests/mcp/test_stdio_bad_lines.py",
    "tests/mcp/test_stdio_handshake.py::test_a_handshake_without_a_usable_binding_is_refused_naming_why",
    "tests/mcp/test_stdio_handshake.py::test_a_usable_binding_completes_the_handshake[files]",
    "tests/mcp/test_stdio_transport.py::test_an_overlong_line_does_not_end_the_session",
    "tests/mcp/test_stdio_transport.py::test_a_regular_file_as_stdout_takes_the_sdk_transport",
    "tests/mcp/test_stdio_transport.py::test_the_null_device_as_stdin_takes_the_sdk_transport_and_ends",
    "tests/mcp/test_stdio_context.py::test_connecting_without_a_usable_binding_is_refused_with_the_reason",
    "tests/mcp/test_http.py::test_serve_http_",
    "tests/client/test_memory_client.py",
    "tests/host/serve/test_http_guard.py",
    "tests/host/serve/test_observability.py",
    "tests/host/serve/test_stdio.py::test_serve_expires_due_records_when_it_starts",
    "tests/host/oauth/test_sign_in_https.py",
    "tests/host/oauth/test_sign_in_flow.py",
    "tests/host/cli/test_app.py::test_demo_",
    "tests/host/cli/test_app.py::test_serve_",
    "tests/host/cli/test_app.py::test_host_command_fails_with_one_line_when_home_is_missing",
    "tests/host/cli/test_bindings.py::test_a_server_without_a_usable_binding_refuses_the_connection_and_says_why",
    "tests/host/cli/test_bindings.py::test_serve_reads_its_binding_from_a_file",
    "tests/host/cli/test_bindings.py::test_a_renewed_binding_file_takes_effect_without_a_restart",
    "tests/host/cli/test_bindings.py::test_an_expired_or_revoked_binding_is_refused_at_connection_with_its_id",
    "tests/host/cli/test_bindings.py::test_a_grantless_binding_connects_and_lists_no_tools",
    "tests/host/cli/test_client_config.py::test_each_stdio_snippet_launches_a_server_that_serves_the_binding",
    "tests/host/cli/test_client_config.py::test_each_http_snippet_reaches_a_running_server_with_its_header",
    "tests/host/cli/test_operations.py::test_serve_",
    "tests/host/cli/test_records.py::test_failures_are_one_line_and_change_nothing",
    "tests/host/cli/test_first_hour.py::test_a_port_in_use_is_named_with_what_to_do",
    "tests/host/cli/test_languages.py::test_what_a_client_reads_stays_in_english_whatever_the_hosts_locale",
    "tests/host/console/test_console_process.py::test_a_session_shows_memory_text_but_the_process_logs_none",
    "tests/host/console/test_console_process.py::test_garbage_bytes_and_idle_connections_do_not_take_the_console",
    "tests/host/recovery/test_disaster_recovery.py::test_archive_and_recovery_key_rebuild_a_deleted_home",
    "tests/host/keys/test_rotation.py::test_rotation_killed_midway_resumes",
    "tests/engine/recall/test_graph_build.py::test_a_server_stopped_during_a_build_exits_cleanly",
    "tests/engine/recall/test_shared_index.py",  # a builder process per base
    "tests/host/oauth/test_step_up.py",  # a sign-in server of its own
    "tests/host/oauth/test_resource_server.py",  # a sign-in server and an issuer of its own
    "tests/embeddings/test_e5.py",  # the model against its reference engines
    "tests/host/test_terminal.py::test_a_hostile_reason_never_reaches_the_terminal_raw",  # the real command
    "tests/engine/test_errors_that_teach.py::test_a_fixer_reading_only_the_text_repairs",  # hundreds of calls
    "tests/host/recovery/test_backup.py::test_restore_at_a_terminal_shows_a_progress_bar",  # a re-index
    "tests/host/recovery/test_backup.py::test_restore_reports_its_progress_through_every_body",  # a re-index
    "tests/mcp/test_http.py::test_a_five_megabyte_capture_is_told_the_limit_and_where[sqlite-legacy]",
    # large inputs
    "tests/engine/test_verify.py::test_verify_reads_a_long_journal_as_it_streams",
    "tests/engine/test_secrets.py::test_adversarial_megabyte_scans_quickly",
    "tests/engine/test_languages.py::test_an_8_kib_query_",
    "tests/engine/recall/test_text.py::test_tokens_survive_fts5_unicode61_when_any_code_point_is_inside_a_word",
    "tests/embeddings/test_loader.py::test_the_shipped_centroids_are_the_calibration_sentences_means",
    "tests/embeddings/test_quantize.py::test_the_integer_graph_stays_close_to_the_float_one",
    "tests/embeddings/test_e5.py::test_a_text_longer_than_the_model_is_read_in_windows",
)


# The edges (the host's commands, console and sign-in, the MCP transports) never branch on the store
# (tests/test_architecture_doc.py and the layers hold them to it): in `make test` they run on SQLite, and
# on PostgreSQL too in `make test-slow`. The engine's and the stores' tests run on both stores in both.
EDGES = ("tests/host/", "tests/mcp/", "tests/client/")


def _edge_on_postgres(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    return item.nodeid.startswith(EDGES) and callspec is not None and "postgres" in callspec.params.values()


# The one case of a long group that stays in `make test`: stdio's refusal of a connection without a binding.
KEPT = (
    "tests/mcp/test_stdio_handshake.py::test_a_handshake_without_a_usable_binding_is_refused_naming_why[none-pipes]",
)


DEFAULT_SELECTION = "not slow and not long"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With the default selection, a module that is long as a whole is not even imported."""
    if config.getoption("markexpr") != DEFAULT_SELECTION or collection_path.suffix != ".py":
        return None
    relative = collection_path.relative_to(config.rootpath).as_posix()
    whole = relative in LONG or relative.startswith(tuple(entry for entry in LONG if entry.endswith("/")))
    return True if whole else None


@pytest.hookimpl(tryfirst=True)
def pytest_itemcollected(item: pytest.Item) -> None:
    if item.nodeid in KEPT:
        return
    if item.nodeid.startswith(LONG) or _edge_on_postgres(item):
        item.add_marker(pytest.mark.long)
