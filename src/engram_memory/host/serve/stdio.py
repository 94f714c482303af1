"""Serving over stdio with the host's housekeeping beside it: automatic expiry and the key sweep.

Housekeeping runs once at start and then every interval, in a worker thread; a failure is logged
and retried next time, never allowed to stop the server.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import anyio
from mcp.server import Server

from engram_memory.contract.errors import ContractError
from engram_memory.engine.engine import Engine
from engram_memory.mcp.stdio import Refusal, serve_stdio

logger = logging.getLogger(__name__)


def housekeep_once(engine: Engine) -> tuple[int, int]:
    """(records expired, data keys swept); zeros when the store was unavailable this time.

    `engine` must be the owner's: expiry and the sweep span tenants, and on PostgreSQL only the
    owner may finish the physical erasure that an agent's forget asked for.
    """
    try:
        expired, swept = engine.housekeep()
    except ContractError as exc:
        logger.warning("housekeeping skipped: %s", exc.code.value)
        return 0, 0
    if expired or swept:
        logger.info("housekeeping: %d records expired, %d data keys swept", len(expired), swept)
    return len(expired), swept


async def housekeeping_loop(owners: Sequence[Engine], interval_s: float) -> None:
    """`owners`: the owner's engine of every cluster the home's tenants live in (one, most often)."""
    while True:
        for owner in owners:
            await anyio.to_thread.run_sync(housekeep_once, owner)
        await anyio.sleep(interval_s)


async def serve_with_housekeeping(
    server: Server[Any], owners: Sequence[Engine], interval_s: float, refusal: Refusal | None = None
) -> None:
    async with anyio.create_task_group() as group:
        group.start_soon(housekeeping_loop, owners, interval_s)
        await serve_stdio(server, refusal)
        group.cancel_scope.cancel()
