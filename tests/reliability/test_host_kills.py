"""Crash consistency of the host's own operations (issue 14): SIGKILL `backup`, `restore` and `rotate-keys`.

Each round starts the real command on a home holding a few hundred memories and kills it with
SIGKILL at a random moment of its run: between the end of the interpreter's start-up and the end of
one uninterrupted run of the same command, both measured first. Only kills that landed before the
command ended count. Then:

* backup: the home verifies as before, and the archive is either absent or complete: it restores
  into an empty home with the same records (a killed backup leaves at most its hidden temporary file);
* restore: the target store is either still empty or fully restored and verified; running restore
  again then succeeds, or is refused because the store holds data, and the result verifies and finds
  what the source finds;
* rotate-keys: every body still opens with the keys on disk (`verify` full), and running the command
  again finishes the same rotation.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from engram_memory.engine.verify import verify_store
from engram_memory.host.compose import store_settings
from engram_memory.host.settings import HostPaths
from tests.host.clirun import assert_one_line_failure, clean_env, cli
from tests.reliability.scale import amount, report
from tests.support.homes import bind, engine_for
from tests.support.inprocess import InProcessAgent
from tests.support.postgres import PostgresCluster, owner_url

SEED = 1419
LEXICAL = {"ENGRAM_EMBEDDING_MODEL": "off"}
TOPICS = ("harbour crane", "billing ledger", "osprey route", "release train", "glacier survey", "kiln firing")
QUERIES = ("harbour crane", "osprey route", "kiln firing")


def _fill(paths: HostPaths, count: int) -> dict[str, list[str]]:
    """`count` accepted memories; what each of QUERIES finds."""
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        agent.remember_many(
            [
                f"Note {number} about the {TOPICS[number % len(TOPICS)]}: detail {number * 7919 % 1009}."
                for number in range(count)
            ]
        )
        return {query: agent.found_ids(query) for query in QUERIES}


def _found(paths: HostPaths) -> dict[str, list[str]]:
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        return {query: agent.found_ids(query) for query in QUERIES}


def _verified(paths: HostPaths) -> None:
    with engine_for(paths) as engine:
        problems = verify_store(engine.deps, full=True)
    assert problems.first is None, problems.first


def _records(paths: HostPaths) -> int:
    done = cli("stats", "--home", paths.home, "--json")
    assert done.code == 0, done
    return int(json.loads(done.stdout)["records"]["accepted_current"])


def _empty_home(source: HostPaths, target: Path, request: pytest.FixtureRequest) -> HostPaths:
    """A home with the source's keys folder and policy as they are now, and an empty store."""
    paths = HostPaths(home=target)
    settings = store_settings(source)
    if not settings.is_postgres:
        shutil.copytree(source.home, target)
        shutil.rmtree(paths.store_dir)
        return paths
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    fresh = cluster.new_database()
    request.addfinalizer(lambda: cluster.retire_database(fresh))
    shutil.copytree(source.keys_dir, paths.keys_dir)
    paths.policy.write_bytes(source.policy.read_bytes())
    paths.config.write_text(replace(settings, store=owner_url(cluster, fresh)).to_toml(), encoding="utf-8")
    done = cli("init", "--home", target, "--json")
    assert done.code == 0, done
    return paths


class Command:
    """One host command in a subprocess, killed after `after_s` seconds unless it ended before."""

    def __init__(self, *args: str | Path) -> None:
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "engram_memory", *(str(a) for a in args)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=clean_env(LEXICAL),
        )

    def killed_after(self, after_s: float) -> bool:
        """True when the kill landed before the command ended by itself."""
        try:
            self.process.wait(timeout=after_s)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGKILL)
            self.process.communicate(timeout=60)
            return True
        self.process.communicate(timeout=60)
        return False

    def killed_after_lines(self, lines: int) -> bool:
        """Kills it once it has printed `lines` lines (rotate-keys prints one per batch through a pipe)."""
        assert self.process.stdout is not None
        for _ in range(lines):
            if not self.process.stdout.readline():
                self.process.communicate(timeout=60)
                return False
        self.process.send_signal(signal.SIGKILL)
        self.process.communicate(timeout=60)
        return True

    def finish(self) -> tuple[int, str, str]:
        out, err = self.process.communicate(timeout=300)
        return self.process.returncode, out.decode(), err.decode()


def _calibrated(*args: str | Path) -> float:
    """Seconds one uninterrupted run of the command takes (it must succeed)."""
    command = Command(*args)
    code, out, err = command.finish()
    assert code == 0, (out, err)
    return time.monotonic() - command.started


def test_sigkill_during_backup_restore_and_rotation_leaves_every_home_consistent(
    paths: HostPaths, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    rng = random.Random(SEED)
    store = "PostgreSQL" if store_settings(paths).is_postgres else "SQLite"
    count = amount(30, 240)
    expected = _fill(paths, count)
    rounds = amount(1, 6)
    homes = iter(range(10_000))
    killed: dict[str, int] = {"backup": 0, "restore": 0, "rotate-keys": 0}
    resumed = 0

    def moment(run_s: float) -> float:
        return rng.uniform(min(startup_s, run_s / 2), run_s)

    good = tmp_path / "good.backup"
    startup_s = _calibrated("backup", "--help")
    backup_s = _calibrated("backup", good, "--home", paths.home)
    scratch = _empty_home(paths, tmp_path / f"h{next(homes)}", request)
    restore_s = _calibrated("restore", good, "--home", scratch.home)
    rotate_s = _calibrated("rotate-keys", "--batch-size", "1", "--home", paths.home)

    def backup(number: int) -> bool:
        """The source is untouched; the archive is absent or whole."""
        archive = tmp_path / f"kill-{number}.backup"
        landed = Command("backup", archive, "--home", paths.home).killed_after(moment(backup_s))
        leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(f".{archive.name}.")]
        assert all(name.endswith(".tmp") for name in leftovers), leftovers
        _verified(paths)
        if landed and archive.exists():
            target = _empty_home(paths, tmp_path / f"h{next(homes)}", request)
            assert cli("restore", archive, "--home", target.home, env=LEXICAL).code == 0
            assert _records(target) == count
        return landed

    def restore(_number: int) -> bool:
        """The target is empty or whole, and a second run settles it."""
        target = _empty_home(paths, tmp_path / f"h{next(homes)}", request)
        landed = Command("restore", good, "--home", target.home).killed_after(moment(restore_s))
        again = cli("restore", good, "--home", target.home, env=LEXICAL)
        if again.code != 0:
            assert "RESTORE_REFUSED" in assert_one_line_failure(again)
        _verified(target)
        assert _records(target) == count and _found(target) == expected
        return landed

    def rotate(number: int) -> bool:
        """Every body opens after the kill; a second run finishes the rotation. Every other kill lands
        after a random number of batches, inside the re-wrapping itself."""
        nonlocal resumed
        rotation = Command("rotate-keys", "--batch-size", "1", "--home", paths.home)
        if number % 2:
            landed = rotation.killed_after_lines(rng.randint(1, count))
        else:
            landed = rotation.killed_after(moment(rotate_s))
        _verified(paths)
        finished = cli("rotate-keys", "--home", paths.home, "--json", env=LEXICAL)
        assert finished.code == 0, finished
        resumed += json.loads(finished.stdout)["resumed"]
        _verified(paths)
        assert _found(paths) == expected
        return landed

    operations = {"backup": backup, "restore": restore, "rotate-keys": rotate}
    for number in range(10 * rounds):  # until each was killed `rounds` times before it ended by itself
        for name, operation in operations.items():
            if killed[name] < rounds:
                killed[name] += operation(number)

    assert _records(paths) == count
    assert min(killed.values()) >= rounds, killed
    for name, kills in killed.items():
        detail = f"({resumed} left a rotation half done, finished by the next run)" if name == "rotate-keys" else ""
        report(f"SIGKILLs during {name} ({store})", kills, target="every home verifies", unit=detail)
