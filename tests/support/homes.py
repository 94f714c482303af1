"""Real host homes for tests: init, key files and signed bindings, exactly as the CLI makes them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from engram_memory.contract.binding import Binding
from engram_memory.contract.tools import ALL_TOOLS
from engram_memory.engine.engine import Engine
from engram_memory.host.bindings import issue_binding
from engram_memory.host.compose import init_home, open_engine
from engram_memory.host.keyfiles import load_signing_key
from engram_memory.host.settings import HostPaths
from tests.support.payloads import PURPOSE

ALL_GRANTS = frozenset(tool.value for tool in ALL_TOOLS)


@dataclass(frozen=True)
class Issued:
    token: str
    binding: Binding


def make_home(folder: Path) -> HostPaths:
    paths = HostPaths(home=folder)
    init_home(paths)
    return paths


def bind(
    paths: HostPaths,
    *,
    tenant: str = "tenant-a",
    workspace: str = "workspace-1",
    principal: str = "alice",
    agent_id: str = "agent-1",
    session: str = "session-1",
    purpose_ref: str = PURPOSE,
    grants: frozenset[str] = ALL_GRANTS,
    confirm_mutations: bool = False,
    lifetime_s: int = 3600,
    now_s: int | None = None,
) -> Issued:
    issued = issue_binding(
        load_signing_key(paths),
        tenant=tenant,
        workspace=workspace,
        principal=principal,
        agent_id=agent_id,
        session=session,
        purpose_ref=purpose_ref,
        grants=grants,
        confirm_mutations=confirm_mutations,
        lifetime_s=lifetime_s,
        now_s=int(time.time()) if now_s is None else now_s,
    )
    return Issued(token=issued.token, binding=issued.binding)


@contextmanager
def engine_for(paths: HostPaths) -> Iterator[Engine]:
    with open_engine(paths) as engine:
        yield engine
