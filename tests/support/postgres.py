"""A throwaway PostgreSQL cluster for the test session: initdb into a temp dir, unix socket only, no TCP.

`initdb` refuses root, and CI runs as root: the cluster then runs as the `postgres` OS user. The
server binaries come from ENGRAM_PG_BIN, `pg_config --bindir`, or /usr/lib/postgresql/*/bin. A
missing server is a failure, never a skip: `make test` installs it (see .ci/system-packages).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import shutil
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

import psycopg
from psycopg import conninfo

from engram_memory.host.settings import HostPaths

SUPERUSER = "postgres"
OWNER_ROLE = "engram_owner"
APP_ROLE = "engram_app"
_databases = itertools.count(1)


def server_bindir() -> Path:
    candidates: list[str] = []
    if os.environ.get("ENGRAM_PG_BIN"):
        candidates.append(os.environ["ENGRAM_PG_BIN"])
    pg_config = shutil.which("pg_config")
    if pg_config:
        done = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        candidates.append(done.stdout.strip())
    candidates.extend(sorted((str(path) for path in Path("/usr/lib/postgresql").glob("*/bin")), reverse=True))
    for folder in candidates:
        if folder and (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    raise RuntimeError(
        "PostgreSQL server binaries (initdb, pg_ctl) are not installed: run .ci/system-packages or install them"
    )


def initdb_command(bindir: Path, data: Path) -> list[str]:
    """A new cluster in `data`: UTF-8, C collation, trusted local connections, nothing synced to disk."""
    return [
        str(bindir / "initdb"),
        "-D",
        str(data),
        "-U",
        SUPERUSER,
        "--auth=trust",
        "--encoding=UTF8",
        "--locale=C.UTF-8",
        "--no-sync",
    ]


class PostgresCluster:
    """One cluster per test session; `new_database()` gives each test its own database."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.data = base / "data"
        self.socket_dir = base / "sock"
        self.bindir = server_bindir()
        self._as_postgres = os.geteuid() == 0
        self._retired: queue.Queue[str | None] = queue.Queue()
        self._reaper = threading.Thread(target=self._reap, name="engram-pg-reaper", daemon=True)
        self._templates: dict[tuple[str | None, bool], HostPaths] = {}
        self._template_base = base / "templates"

    def _run(self, command: Sequence[str]) -> None:
        full = ["runuser", "-u", "postgres", "--", *command] if self._as_postgres else list(command)
        done = subprocess.run(full, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(command[0]).name} failed: {done.stderr.strip() or done.stdout.strip()}")

    def start(self) -> None:
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        if self._as_postgres:
            shutil.chown(self.base, "postgres", "postgres")
            shutil.chown(self.socket_dir, "postgres", "postgres")
        self._run(initdb_command(self.bindir, self.data))
        options = (
            f"-k {self.socket_dir} -c listen_addresses='' -c fsync=off -c synchronous_commit=off"
            " -c full_page_writes=off -c max_connections=200"
        )
        self._run(
            [
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.data),
                "-o",
                options,
                "-l",
                str(self.base / "server.log"),
                "-w",
                "start",
            ]
        )
        with self.connect(SUPERUSER, "postgres") as db:
            db.execute(f"CREATE ROLE {OWNER_ROLE} LOGIN BYPASSRLS")
            db.execute(f"CREATE ROLE {APP_ROLE} LOGIN")
        self._reaper.start()

    def stop(self) -> None:
        if self._reaper.is_alive():
            self._retired.put(None)
            self._reaper.join(timeout=60)
        if (self.data / "postmaster.pid").exists():
            self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"])

    def url(self, role: str, database: str) -> str:
        return f"postgresql://{role}@/{database}?host={self.socket_dir}"

    def connect(self, role: str, database: str) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.url(role, database), autocommit=True)

    def new_database(self, prefix: str = "engram") -> str:
        """A fresh, empty database owned by the owner role; its name.

        FILE_COPY: with fsync off, copying template1's files is several times faster than the default
        WAL_LOG strategy, and a suite that makes a database for almost every test feels it.
        """
        name = f"{prefix}_{os.getpid()}_{next(_databases)}"
        with self.connect(SUPERUSER, "postgres") as db:
            db.execute(f"CREATE DATABASE {name} OWNER {OWNER_ROLE} STRATEGY FILE_COPY")
        return name

    def copy_database(self, template: str, app_role: str | None, prefix: str = "engram") -> str:
        """A fresh database copied from `template` (which nothing may be connected to); its name."""
        name = f"{prefix}_{os.getpid()}_{next(_databases)}"
        with self.connect(SUPERUSER, "postgres") as db:
            db.execute(f"CREATE DATABASE {name} TEMPLATE {template} OWNER {OWNER_ROLE} STRATEGY FILE_COPY")
            if app_role is not None:
                db.execute(f"GRANT CONNECT ON DATABASE {name} TO {app_role}")
        return name

    def template_home(self, *, app_role: str | None, own_vault: bool) -> HostPaths:
        """A home made by `init` once per cluster and kind, whose databases and folder homes are copied from."""
        kind = (app_role, own_vault)
        if kind not in self._templates:
            folder = self._template_base / f"home-{len(self._templates)}"
            self._templates[kind] = init_postgres_home(folder, self, app_role=app_role, own_vault=own_vault)
        return self._templates[kind]

    def drop_database(self, name: str) -> None:
        """Drops a test's database now, ending whatever connection a stopped test left behind."""
        with self.connect(SUPERUSER, "postgres") as db:
            db.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def retire_database(self, name: str) -> None:
        """Drops a finished test's database in the background: a drop waits for the test's closed
        connections to end, which is time the next test need not spend (and the cluster lives in memory)."""
        self._retired.put(name)

    def _reap(self) -> None:
        with self.connect(SUPERUSER, "postgres") as db:
            while (name := self._retired.get()) is not None:
                with contextlib.suppress(psycopg.Error):  # else left for the cluster's removal at the end
                    db.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def owner_url(cluster: PostgresCluster, database: str) -> str:
    return cluster.url(OWNER_ROLE, database)


def database_of(url: str) -> str:
    """The database a connection URL names."""
    return str(conninfo.conninfo_to_dict(url)["dbname"])


def home_databases(paths: HostPaths) -> list[str]:
    """The databases a PostgreSQL home uses (its store, and its vault when that is a database)."""
    from engram_memory.host.compose import store_settings

    settings = store_settings(paths)
    return [database_of(url) for url in (settings.store, settings.vault) if url is not None and settings.is_postgres]


def make_postgres_home(
    folder: Path, cluster: PostgresCluster, *, app_role: str | None = APP_ROLE, own_vault: bool = True
) -> HostPaths:
    """A real host home on a fresh PostgreSQL database (and a vault database of its own), as `init` makes it.

    The databases are copies of template databases that `init` migrated and granted once per cluster
    (`CREATE DATABASE ... TEMPLATE`), the folder a copy of that template home's; the key files are made
    anew, so no two homes share a key. The one grant a template does not carry, CONNECT on the database
    itself, is given again as init gives it.
    """
    from dataclasses import replace

    from engram_memory.host.compose import store_settings
    from engram_memory.host.keys.files import create_key_files

    template = cluster.template_home(app_role=app_role, own_vault=own_vault)
    settings = store_settings(template)
    store = owner_url(cluster, cluster.copy_database(database_of(settings.store), app_role))
    vault = None
    if settings.vault is not None:
        vault = owner_url(cluster, cluster.copy_database(database_of(settings.vault), app_role, prefix="engram_keys"))
    copied = {
        template.config.name,
        template.kek_file.name,
        template.secret_file.name,
        template.signing_key_file.name,
        template.recovery_file.name,
    }
    shutil.copytree(template.home, folder, ignore=lambda _dir, names: [n for n in names if n in copied])
    paths = HostPaths(home=folder)
    paths.config.write_text(replace(settings, store=store, vault=vault).to_toml(), encoding="utf-8")
    paths.config.chmod(template.config.stat().st_mode & 0o777)
    create_key_files(paths)
    return paths


def init_postgres_home(
    folder: Path, cluster: PostgresCluster, *, app_role: str | None = APP_ROLE, own_vault: bool = True
) -> HostPaths:
    """A home on fresh databases made by `init` itself (migrations and grants run here)."""
    from engram_memory.host.compose import init_home

    paths = HostPaths(home=folder)
    store = owner_url(cluster, cluster.new_database())
    vault = owner_url(cluster, cluster.new_database("engram_keys")) if own_vault else None
    init_home(paths, store, app_role=app_role, vault=vault)
    return paths
