"""A standby promoted while agents write: nothing acknowledged is lost, nothing is done twice.

The primary waits for its synchronous standby before acknowledging a commit; the home names both
nodes in one libpq URL with target_session_attrs=read-write, so the store's pools reconnect to
whichever node accepts writes (tests/support/failover.py drives the writers).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engram_memory.host.compose import open_engine
from tests.host.clirun import cli
from tests.mcp.helpers import db_count
from tests.support.failover import failover_drill
from tests.support.homes import bind
from tests.support.topology import Topology, failover_home

pytestmark = pytest.mark.slow


def test_promoting_the_synchronous_standby_loses_no_acknowledged_mutation(tmp_path: Path) -> None:
    with Topology.built(standbys=1, synchronous=True) as topology:
        paths = failover_home(tmp_path / "home", topology)
        issued = bind(paths)
        with topology.primary.connect() as db:
            assert db.execute("SELECT sync_state FROM pg_stat_replication").fetchall() == [("sync",)]
        with open_engine(paths, runtime=True, semantic=False) as engine:
            drill = failover_drill(engine, issued.binding, topology, writers=4, each_side=40)
        assert len(drill.acknowledged) >= drill.before_crash + 40, "writes did not resume on the promoted standby"
        assert drill.retried, "the writers never saw the failover"
        assert drill.lost == []
        assert len(set(drill.acknowledged)) == len(drill.acknowledged)
        # At most once: one candidate and one record per note, though calls were retried.
        assert db_count(paths, "candidates") == len(drill.acknowledged)
        assert db_count(paths, "records") == len(drill.acknowledged)
        verified = cli("verify", "--home", str(paths.home), timeout=120)
        assert verified.code == 0, verified.stdout + verified.stderr
