"""A replicated PostgreSQL deployment on loopback, built from the installed binaries: a primary, hot
standbys streaming from it (one may replay late, `recovery_min_apply_delay`), and PgBouncer in
transaction mode in front of the primary. Unix sockets only; each server its own folder and port.

As root (CI), the servers run as the `postgres` OS user, as tests/support/postgres.py does.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import psycopg

from engram_memory.host.settings import HostPaths, StoreSettings
from tests.support.postgres import APP_ROLE, OWNER_ROLE, SUPERUSER, initdb_command, server_bindir

_ports = itertools.count(15432 + (os.getpid() % 2000) * 8)


def _as_postgres(command: Sequence[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else list(command)


def _run(command: Sequence[str]) -> None:
    done = subprocess.run(_as_postgres(command), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(command[0]).name} failed: {done.stderr.strip() or done.stdout.strip()}")


def _own(*folders: Path) -> None:
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(folder, "postgres", "postgres")


@dataclass
class Node:
    """One PostgreSQL server of the topology."""

    name: str
    base: Path
    port: int = field(default_factory=lambda: next(_ports))
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def socket_dir(self) -> Path:
        return self.base / "sock"

    def url(self, role: str, database: str) -> str:
        return f"postgresql://{role}@/{database}?host={self.socket_dir}&port={self.port}"

    def connect(self, database: str = "postgres", role: str = SUPERUSER) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.url(role, database), autocommit=True, connect_timeout=5)

    def start(self) -> None:
        options = [f"-k {self.socket_dir}", f"-p {self.port}", "-c listen_addresses=''"]
        options += [f"-c {key}={value}" for key, value in self.settings.items()]
        bindir = server_bindir()
        _run(
            [
                str(bindir / "pg_ctl"),
                "-D",
                str(self.data),
                "-o",
                " ".join(options),
                "-l",
                str(self.base / "server.log"),
                "-w",
                "start",
            ]
        )

    def stop(self, mode: str = "fast") -> None:
        if (self.data / "postmaster.pid").exists():
            _run([str(server_bindir() / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"])

    def crash(self) -> None:
        """The server dies at once, as a machine that lost power would stop serving (its files stay)."""
        self.stop("immediate")

    def promote(self) -> None:
        _run([str(server_bindir() / "pg_ctl"), "-D", str(self.data), "-w", "promote"])

    def cpu_s(self) -> float:
        """CPU seconds the server's processes (the postmaster and its children) have used so far."""
        postmaster = int((self.data / "postmaster.pid").read_text(encoding="utf-8").split()[0])
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(entry.name) == postmaster or int(fields[1]) == postmaster:
                total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / ticks

    def position(self) -> int:
        with self.connect() as db:
            row = db.execute(
                "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()"
                " ELSE pg_current_wal_insert_lsn() END - '0/0'::pg_lsn)::int8"
            ).fetchone()
        return int(row[0]) if row and row[0] is not None else 0


@dataclass
class Bouncer:
    """PgBouncer in transaction mode in front of one node."""

    base: Path
    target: Node
    port: int = field(default_factory=lambda: next(_ports))
    process: subprocess.Popen[bytes] | None = None

    @property
    def socket_dir(self) -> Path:
        return self.base / "sock"

    def url(self, role: str, database: str) -> str:
        return f"postgresql://{role}@/{database}?host={self.socket_dir}&port={self.port}"

    def start(self) -> None:
        _own(self.base, self.socket_dir)
        users = self.base / "users.txt"
        users.write_text("".join(f'"{role}" ""\n' for role in (SUPERUSER, OWNER_ROLE, APP_ROLE)), encoding="utf-8")
        config = self.base / "pgbouncer.ini"
        config.write_text(
            "[databases]\n"
            f"* = host={self.target.socket_dir} port={self.target.port}\n"
            "[pgbouncer]\n"
            "listen_addr =\n"
            f"listen_port = {self.port}\n"
            f"unix_socket_dir = {self.socket_dir}\n"
            "auth_type = trust\n"
            f"auth_file = {users}\n"
            "pool_mode = transaction\n"
            "max_client_conn = 500\n"
            "default_pool_size = 8\n"
            "server_reset_query =\n"
            "server_round_robin = 1\n"  # FIFO: a client's next transaction on another server connection
            f"logfile = {self.base / 'pgbouncer.log'}\n",
            encoding="utf-8",
        )
        if os.geteuid() == 0:
            shutil.chown(users, "postgres", "postgres")
            shutil.chown(config, "postgres", "postgres")
        binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        self.process = subprocess.Popen(
            _as_postgres([binary, str(config)]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 15
        while not (self.socket_dir / f".s.PGSQL.{self.port}").exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = (self.base / "pgbouncer.log").read_text(encoding="utf-8", errors="replace")[-600:]
                raise RuntimeError(f"pgbouncer did not start: {log}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


@dataclass
class Topology:
    """A primary, its standbys, and (optionally) a pooler in front of the primary."""

    base: Path
    primary: Node
    standbys: list[Node] = field(default_factory=list)
    bouncer: Bouncer | None = None

    @classmethod
    @contextlib.contextmanager
    def built(
        cls,
        *,
        standbys: int = 1,
        delayed_ms: int | None = None,
        synchronous: bool = False,
        pooler: bool = False,
        standby_settings: dict[str, str] | None = None,
    ) -> Iterator[Topology]:
        """`delayed_ms`: the last standby replays that late. `synchronous`: commits wait for the first
        standby to have flushed them (synchronous_standby_names). `standby_settings`: server settings
        every standby gets besides (or instead of) the defaults.

        Not under pytest's temp folder: the servers run as the postgres OS user, who must reach it."""
        base = Path(tempfile.mkdtemp(prefix="engram-topology-"))
        _own(base)
        topology = cls(base, Node("primary", base / "primary"))
        try:
            topology._make_primary(synchronous=synchronous)
            for number in range(1, standbys + 1):
                delay = delayed_ms if delayed_ms is not None and number == standbys else None
                topology._add_standby(f"standby{number}", delay, standby_settings or {})
            if synchronous:  # only now: a commit would wait for a standby that does not exist yet
                with topology.primary.connect() as db:
                    db.execute("ALTER SYSTEM SET synchronous_standby_names = 'standby1'")
                    db.execute("ALTER SYSTEM SET synchronous_commit = 'on'")
                    db.execute("SELECT pg_reload_conf()")
            if pooler:
                topology.bouncer = Bouncer(base / "pgbouncer", topology.primary)
                topology.bouncer.start()
            yield topology
        finally:
            topology.stop()
            shutil.rmtree(base, ignore_errors=True)

    def _make_primary(self, *, synchronous: bool) -> None:
        node = self.primary
        _own(node.base, node.socket_dir)
        _run(initdb_command(server_bindir(), node.data))
        node.settings = {
            "fsync": "off",
            "full_page_writes": "off",
            "max_connections": "200",
            "wal_level": "replica",
            "max_wal_senders": "10",
            "wal_keep_size": "256MB",
        }
        node.start()
        with node.connect() as db:
            db.execute(f"CREATE ROLE {OWNER_ROLE} LOGIN BYPASSRLS")
            db.execute(f"CREATE ROLE {APP_ROLE} LOGIN")

    def _add_standby(self, name: str, delay_ms: int | None, overrides: dict[str, str]) -> None:
        node = Node(name, self.base / name)
        _own(node.base, node.socket_dir)
        primary = self.primary
        _run(
            [
                str(server_bindir() / "pg_basebackup"),
                "-D",
                str(node.data),
                "-d",
                f"host={primary.socket_dir} port={primary.port} user={SUPERUSER} application_name={name}",
                "-X",
                "stream",
                "-R",
                "--no-sync",
                "-c",
                "fast",
            ]
        )
        node.settings = {
            "fsync": "off",
            "max_connections": "200",
            "hot_standby": "on",
            "hot_standby_feedback": "on",
            "wal_receiver_status_interval": "1s",  # how stale the snapshot horizon it reports may be
            "cluster_name": name,
        }
        if delay_ms is not None:
            node.settings["recovery_min_apply_delay"] = f"{delay_ms}ms"
        node.settings.update(overrides)
        node.start()
        self.standbys.append(node)

    def new_database(self, name: str) -> str:
        """An empty database on the primary owned by the owner role (the standbys get it by replay)."""
        with self.primary.connect() as db:
            db.execute(f"CREATE DATABASE {name} OWNER {OWNER_ROLE}")
        return name

    def caught_up(self, timeout_s: float = 30.0, *, delayed_too: bool = False) -> None:
        """Waits until every standby (but one replaying late, unless `delayed_too`) has replayed what the
        primary wrote."""
        target = self.primary.position()
        deadline = time.monotonic() + timeout_s
        for node in self.standbys:
            if "recovery_min_apply_delay" in node.settings and not delayed_too:
                continue
            while node.position() < target:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{node.name} did not catch up")
                time.sleep(0.01)

    def stop(self) -> None:
        if self.bouncer is not None:
            self.bouncer.stop()
        for node in [*self.standbys, self.primary]:
            with contextlib.suppress(RuntimeError):
                node.stop("immediate")


def configure_home(paths: HostPaths, **changes: object) -> StoreSettings:
    """Rewrites the home's config.toml with `changes` (read_urls, direct_url, store, ...); the new settings."""
    from engram_memory.host.settings import store_settings

    settings = replace(store_settings(paths), **changes)  # type: ignore[arg-type]
    paths.config.write_text(settings.to_toml(), encoding="utf-8")
    return settings


def either_node(nodes: Sequence[Node], role: str, database: str) -> str:
    """One URL naming every node: libpq connects to the first that accepts writes."""
    hosts = ",".join(str(node.socket_dir) for node in nodes)
    ports = ",".join(str(node.port) for node in nodes)
    return f"postgresql://{role}@/{database}?host={hosts}&port={ports}&target_session_attrs=read-write"


def failover_home(folder: Path, topology: Topology) -> HostPaths:
    """A home `init` made through a URL naming the primary and its standbys, which follows a promotion."""
    from engram_memory.host.compose import init_home

    nodes = [topology.primary, *topology.standbys]
    store, keys = topology.new_database("failover"), topology.new_database("failover_keys")
    paths = HostPaths(home=folder)
    init_home(
        paths, either_node(nodes, OWNER_ROLE, store), app_role=APP_ROLE, vault=either_node(nodes, OWNER_ROLE, keys)
    )
    return paths
