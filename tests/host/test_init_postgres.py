"""`engram-memory init --store postgresql://…`: schema, grants and config, then the six tools as the runtime role.

A real PostgreSQL cluster (tests/support/postgres.py), the real command in a subprocess, and the
in-process engine over the home it made. A missing server fails these tests: it never skips them.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from engram_memory.contract.tools import Tool
from engram_memory.engine.engine import Engine
from engram_memory.host.compose import HomeError, init_home, open_engine
from engram_memory.host.settings import HostPaths
from engram_memory.stores.postgres.migrate import STORE_MIGRATIONS, bundled
from tests.host.clirun import assert_one_line_failure, cli
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import unique_key
from tests.support.postgres import APP_ROLE, OWNER_ROLE, SUPERUSER, PostgresCluster, make_postgres_home, owner_url

ERROR = "engram-memory: error: "


@pytest.fixture
def databases(postgres_cluster: PostgresCluster) -> tuple[str, str]:
    """Owner URLs of a fresh store database and a fresh vault database."""
    return (
        owner_url(postgres_cluster, postgres_cluster.new_database()),
        owner_url(postgres_cluster, postgres_cluster.new_database("engram_keys")),
    )


def _dbname(url: str) -> str:
    return url.split("@/", 1)[1].split("?", 1)[0]


def _privileges(cluster: PostgresCluster, url: str, role: str) -> dict[str, set[str]]:
    """Every table privilege `role` holds in the database, by table."""
    with cluster.connect(SUPERUSER, _dbname(url)) as db:
        rows = db.execute(
            "SELECT table_name, privilege_type FROM information_schema.role_table_grants WHERE grantee = %s",
            (role,),
        ).fetchall()
    found: dict[str, set[str]] = {}
    for table, privilege in rows:
        found.setdefault(str(table), set()).add(str(privilege))
    return found


def _ok(done: Any) -> str:
    assert done.code == 0, done.stderr
    return str(done.stdout)


# -- init --------------------------------------------------------------------------------------------


def test_init_creates_the_schema_the_config_and_exactly_the_runtime_grants(
    tmp_path: Path, postgres_cluster: PostgresCluster, databases: tuple[str, str]
) -> None:
    store, vault = databases
    home = tmp_path / "home"
    report = json.loads(
        _ok(cli("init", "--store", store, "--app-role", APP_ROLE, "--vault", vault, "--home", home, "--json"))
    )
    paths = HostPaths(home=home)
    assert report["store"] == store and report["app_role"] == APP_ROLE and report["vault"] == vault
    assert [Path(p) for p in report["created"]] == [
        paths.config,
        paths.policy,
        paths.kek_file,
        paths.secret_file,
        paths.signing_key_file,
        paths.recovery_file,
    ]
    assert not paths.sqlite_file.exists() and not paths.vault_file.exists()
    assert tomllib.loads(paths.config.read_text(encoding="utf-8")) == {
        "store": store,
        "app_role": APP_ROLE,
        "vault": vault,
        "pool_size": 4,
    }
    with postgres_cluster.connect(OWNER_ROLE, _dbname(store)) as db:
        assert [row[0] for row in db.execute("SELECT version FROM schema_migrations ORDER BY version")] == [
            1,
            2,
            3,
            4,
            5,
            6,
            7,
            8,
            9,
            10,
        ]
        forced = db.execute(
            "SELECT relname FROM pg_class WHERE relrowsecurity AND relforcerowsecurity AND relkind = 'r' ORDER BY 1"
        ).fetchall()
        assert [row[0] for row in forced] == [
            "audit_log",
            "candidates",
            "confirmations",
            "idempotency",
            "journal",
            "lexical_index",
            "lexical_postings",
            "lexical_terms",
            "record_families",
            "record_vectors",
            "records",
            "scopes",
            "sealed_bodies",
            "tombstones",
        ]
    assert _privileges(postgres_cluster, store, APP_ROLE) == {
        "schema_migrations": {"SELECT"},
        "scopes": {"SELECT", "INSERT", "UPDATE"},
        "journal": {"SELECT", "INSERT"},
        "candidates": {"SELECT", "INSERT", "UPDATE"},
        "records": {"SELECT", "INSERT", "UPDATE"},
        "sealed_bodies": {"SELECT", "INSERT", "DELETE"},
        "lexical_index": {"SELECT", "INSERT", "DELETE"},
        "lexical_postings": {"SELECT", "INSERT", "DELETE"},
        "lexical_terms": {"SELECT", "INSERT", "UPDATE", "DELETE"},
        "record_vectors": {"SELECT", "INSERT", "DELETE"},
        "tombstones": {"SELECT", "INSERT"},
        "record_families": {"SELECT", "INSERT", "DELETE"},
        "idempotency": {"SELECT", "INSERT"},
        "confirmations": {"SELECT", "INSERT", "UPDATE"},
        "audit_log": {"INSERT"},
        "erasure_requests": {"INSERT"},
    }
    assert _privileges(postgres_cluster, vault, APP_ROLE) == {
        "schema_migrations": {"SELECT"},
        "data_keys": {"SELECT", "INSERT"},
        "revocations": {"SELECT"},
    }
    with postgres_cluster.connect(OWNER_ROLE, _dbname(vault)) as db:
        assert db.execute("SELECT to_regclass('journal') IS NULL AND to_regclass('data_keys') IS NOT NULL").fetchone()
        assert db.execute(
            "SELECT has_function_privilege(%s, 'engram_destroy_data_keys(text[], bigint)', 'EXECUTE')", (APP_ROLE,)
        ).fetchone() == (True,)


def test_second_init_is_idempotent_and_takes_back_extra_privileges(
    tmp_path: Path, postgres_cluster: PostgresCluster, databases: tuple[str, str]
) -> None:
    store, vault = databases
    home = tmp_path / "home"
    _ok(cli("init", "--store", store, "--app-role", APP_ROLE, "--vault", vault, "--home", home))
    paths = HostPaths(home=home)
    config = paths.config.read_bytes()
    granted = _privileges(postgres_cluster, store, APP_ROLE)
    with postgres_cluster.connect(OWNER_ROLE, _dbname(store)) as db:
        db.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {APP_ROLE}")
    again = json.loads(_ok(cli("init", "--home", home, "--json")))
    assert again["created"] == [] and again["store"] == store
    same = json.loads(_ok(cli("init", "--store", store, "--app-role", APP_ROLE, "--home", home, "--json")))
    assert same["created"] == []
    assert paths.config.read_bytes() == config
    assert _privileges(postgres_cluster, store, APP_ROLE) == granted
    with postgres_cluster.connect(OWNER_ROLE, _dbname(store)) as db:
        assert db.execute("SELECT count(*) FROM schema_migrations").fetchone() == (len(bundled(STORE_MIGRATIONS)),)


def test_init_without_a_vault_keeps_the_keys_in_the_home(tmp_path: Path, pg_url: str) -> None:
    paths = HostPaths(home=tmp_path / "home")
    report = init_home(paths, pg_url, app_role=APP_ROLE)
    assert paths.vault_file in report.created and paths.vault_file.is_file()
    assert "vault" not in tomllib.loads(paths.config.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        (("--store", "postgresql://engram_owner:hunter2@/db?host=/nowhere"), "must not carry a password"),
        (("--store", "mysql://db/engram"), "--store takes 'sqlite' or a postgresql:// URL"),
        (("--store", "sqlite", "--app-role", APP_ROLE), "apply to a PostgreSQL store only"),
    ],
    ids=["password", "other-scheme", "sqlite-with-role"],
)
def test_init_refuses_bad_arguments_in_one_line_and_creates_nothing(
    tmp_path: Path, arguments: tuple[str, ...], reason: str
) -> None:
    home = tmp_path / "home"
    line = assert_one_line_failure(cli("init", *arguments, "--home", home))
    assert line.startswith(ERROR) and reason in line
    assert "hunter2" not in line
    assert not home.exists()


def test_init_refuses_an_unreachable_server_and_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    line = assert_one_line_failure(
        cli("init", "--store", f"postgresql://{OWNER_ROLE}@/engram?host={tmp_path}/no-socket", "--home", home)
    )
    assert line.startswith(ERROR + "the PostgreSQL server could not be reached as the owner")
    assert not home.exists()


def test_init_refuses_a_runtime_role_that_bypasses_row_level_security(tmp_path: Path, pg_url: str) -> None:
    with pytest.raises(HomeError, match="bypasses row-level security"):
        init_home(HostPaths(home=tmp_path / "home"), pg_url, app_role=OWNER_ROLE)
    with pytest.raises(HomeError, match="does not exist"):
        init_home(HostPaths(home=tmp_path / "home"), pg_url, app_role="no_such_role")
    assert not (tmp_path / "home").exists()


def test_init_refuses_the_store_database_as_the_vault(tmp_path: Path, pg_url: str) -> None:
    with pytest.raises(HomeError, match="--vault names the store's own database"):
        init_home(HostPaths(home=tmp_path / "home"), pg_url, app_role=APP_ROLE, vault=pg_url)


def test_init_refuses_an_owner_without_bypassrls(tmp_path: Path, postgres_cluster: PostgresCluster) -> None:
    database = postgres_cluster.new_database()
    with postgres_cluster.connect(SUPERUSER, database) as db:
        db.execute(f"GRANT ALL ON DATABASE {database} TO {APP_ROLE}")
    with pytest.raises(HomeError, match="needs BYPASSRLS"):
        init_home(HostPaths(home=tmp_path / "home"), postgres_cluster.url(APP_ROLE, database))


# -- the six tools as the runtime role ------------------------------------------------------------------


def _approve(paths: HostPaths, target: str) -> None:
    with open_engine(paths) as owner:
        waiting = [row for row, status in owner.confirmations() if row.target == target and status == "requested"]
        assert len(waiting) == 1
        owner.approve_confirmation(waiting[0].confirmation_id, decided_by="host:tests", ttl_ms=60_000)


def _connected_as(engine: Engine) -> str:
    with engine.deps.store.read() as tx:
        return str(tx.connection.execute("SELECT current_user").fetchone()[0])  # type: ignore[attr-defined]


def test_the_six_tools_work_as_the_runtime_role(tmp_path: Path, postgres_cluster: PostgresCluster) -> None:
    paths = make_postgres_home(tmp_path / "home", postgres_cluster)
    binding = bind(paths).binding
    with open_engine(paths, runtime=True) as engine:
        assert _connected_as(engine) == APP_ROLE
        agent = InProcessAgent(engine, binding)
        record_id = agent.remember("Blue-green deployments switch traffic only after the health check passes")
        assert agent.found_ids("health check traffic")[:1] == [record_id]
        assert agent.search("health check")["rank_receipt"]["channels"][0]["index"] == "postgresql-tsvector"
        got = agent.get(record_id)
        assert got["ok"] and got["output"]["value"]["record"]["record_id"] == record_id

        pending = agent.capture("A candidate that will be withdrawn before admission")["candidate_id"]
        withdraw = {"candidate_id": pending, "idempotency_key": unique_key("withdraw"), "reason_ref": "reason:t"}
        assert agent.error_code(Tool.WITHDRAW, withdraw) == "gate_failed"
        _approve(paths, pending)
        withdrawn = agent.value(Tool.WITHDRAW, withdraw)
        assert withdrawn["key_destruction"] == "complete"

        forget = {"record_id": record_id, "idempotency_key": unique_key("forget"), "reason_ref": "reason:t"}
        assert agent.error_code(Tool.FORGET, forget) == "gate_failed"
        _approve(paths, record_id)
        forgotten = agent.value(Tool.FORGET, forget)
        assert forgotten["receipt"]["to_state"] == "tombstoned"
        assert forgotten["projection_invalidation"] == "complete"
        assert agent.value(Tool.FORGET, forget)["replayed"] is True
        assert record_id not in agent.found_ids("health check traffic")
        assert agent.call(Tool.GET, {"record_id": record_id, "purpose_ref": binding.purpose_ref})["error"]["code"] == (
            "NOT_FOUND"
        )
    with open_engine(paths) as owner:
        _assert_host_sees_a_clean_store(owner, record_id, pending)


def _assert_host_sees_a_clean_store(owner: Engine, record_id: str, withdrawn: str) -> None:
    from engram_memory.engine.verify import verify_store

    assert _connected_as(owner) == OWNER_ROLE
    report = verify_store(owner.deps, full=True)
    assert report.ok, report.problems
    assert report.scopes == 1 and report.warnings == []
    assert owner.deps.vault.shredded([record_id, withdrawn]) == {record_id, withdrawn}
    with owner.deps.store.read() as tx:
        assert {row.outcome for row in tx.audit_rows(None, None)} >= {"ok", "gate_failed"}
    # The index rows the runtime role deleted are rewritten out of the table by the next owner process.
    assert owner.deps.store.erase_physically(now=True)


def test_a_runtime_role_added_later_keeps_the_rest_of_the_config(tmp_path: Path, pg_url: str) -> None:
    paths = HostPaths(home=tmp_path / "home")
    init_home(paths, pg_url)
    with paths.config.open("a", encoding="utf-8") as config:
        config.write('\n[elsewhere]\nkept = "yes"\n')
    with pytest.raises(HomeError, match="no runtime role"), open_engine(paths, runtime=True):
        pass
    report = init_home(paths, app_role=APP_ROLE)
    assert report.created == [] and report.app_role == APP_ROLE
    config = tomllib.loads(paths.config.read_text(encoding="utf-8"))
    assert config["app_role"] == APP_ROLE and config["elsewhere"] == {"kept": "yes"}
    with open_engine(paths, runtime=True) as engine:
        assert engine.confirmations() == []  # the runtime role sees no tenant's rows without a call's scope
    with pytest.raises(HomeError, match="runtime role is already"):
        init_home(paths, app_role="someone_else")


def test_a_store_that_cannot_be_reached_is_named_with_its_port_and_the_drivers_reason(
    tmp_path: Path, pg_url: str
) -> None:
    paths = HostPaths(home=tmp_path / "home")
    init_home(paths, pg_url)
    config = paths.config.read_text(encoding="utf-8")
    assert pg_url in config
    paths.config.write_text(config.replace(pg_url, f"postgresql://{OWNER_ROLE}@127.0.0.1:1/engram"), encoding="utf-8")
    line = assert_one_line_failure(cli("stats", "--home", paths.home))
    assert line.startswith(ERROR + "cannot connect to PostgreSQL (database engram on 127.0.0.1 port 1: "), line
    assert "Connection refused" in line


def test_an_upgraded_store_gets_its_postings_and_the_runtime_role_its_new_privileges(
    tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """A store written before schema 5: index rows, no postings tables. The owner's next open (serve's, or
    any host command's) migrates it, derives the postings once and grants the runtime role the new tables."""
    paths = make_postgres_home(tmp_path / "home", postgres_cluster)
    with open_engine(paths, runtime=True) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        ids = [agent.remember(f"The osprey count {n} was taken at the northern ridge.") for n in range(3)]
        other = agent.remember("Quarterly access reviews cover every production role.")
    with postgres_cluster.connect(OWNER_ROLE, _dbname(_store_url(paths))) as db:
        db.execute("DROP TABLE lexical_postings, lexical_terms")
        db.execute("DELETE FROM schema_migrations WHERE version = 5")
    with open_engine(paths) as owner:  # migrates, derives the postings, grants
        assert owner.verify(full=True).first is None
    with open_engine(paths, runtime=True) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        assert sorted(agent.found_ids("osprey northern ridge")[:3]) == sorted(ids)
        assert agent.found_ids("access reviews production")[:1] == [other]
    with postgres_cluster.connect(OWNER_ROLE, _dbname(_store_url(paths))) as db:
        assert db.execute("SELECT count(DISTINCT rid) FROM lexical_postings").fetchone() == (4,)


def _store_url(paths: HostPaths) -> str:
    from engram_memory.host.compose import store_settings

    return store_settings(paths).store


def test_init_records_standbys_and_a_direct_url_keeping_the_rest_of_the_config(tmp_path: Path, pg_url: str) -> None:
    paths = HostPaths(home=tmp_path / "home")
    init_home(paths, pg_url, app_role=APP_ROLE)
    with paths.config.open("a", encoding="utf-8") as config:
        config.write('\n[elsewhere]\nkept = "yes"\n')
    standby = pg_url.replace("engram_owner@", "engram_owner@standby-") if "@" in pg_url else pg_url
    done = cli("init", "--read-url", standby, "--read-url", pg_url, "--direct-url", pg_url, "--home", paths.home)
    assert done.code == 0, done.stderr
    config = tomllib.loads(paths.config.read_text(encoding="utf-8"))
    assert config["read_urls"] == [standby, pg_url] and config["direct_url"] == pg_url
    assert config["elsewhere"] == {"kept": "yes"} and config["app_role"] == APP_ROLE
    assert cli("init", "--read-url", pg_url, "--home", paths.home).code == 0  # replaces the list
    assert tomllib.loads(paths.config.read_text(encoding="utf-8"))["read_urls"] == [pg_url]
    line = assert_one_line_failure(cli("init", "--read-url", "mysql://db/x", "--home", paths.home))
    assert "--read-url takes a postgresql:// URL" in line


def test_init_refuses_standbys_for_an_embedded_store(tmp_path: Path) -> None:
    line = assert_one_line_failure(cli("init", "--read-url", "postgresql://o@h/db", "--home", tmp_path / "home"))
    assert "apply to a PostgreSQL store only" in line
