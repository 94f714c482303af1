"""The live writers of bench/live_writes.py, as a process of their own, so the writes' client never shares
the searching process's interpreter: `python bench/live_writer.py SPEC.json`.

SPEC names the `serve --http` URLs, the bearer token, the pairs a second (all writers together) and the
capture arguments to send, in order. Each URL gets one writer pacing its pairs evenly; the process writes
until SIGTERM, then prints one JSON object: the pairs written and the seconds it wrote for.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from raw_mcp import RawToolClient


async def _writer(n: int, spec: dict[str, Any], stop: asyncio.Event, counts: list[int]) -> None:
    urls = spec["urls"]
    client = RawToolClient(urls[n], spec["token"])
    interval = len(urls) / spec["rate"]
    due = time.perf_counter() + n * interval / len(urls)
    mine = spec["captures"][n :: len(urls)]
    try:
        for arguments in mine:
            pause = due - time.perf_counter()
            if pause > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=pause)
            if stop.is_set():
                return
            captured = await client.call_tool("engram_memory_capture", arguments)
            if not captured.get("ok"):
                raise SystemExit(f"a live write failed: {captured}")
            admission = {
                "candidate_id": captured["output"]["value"]["candidate_id"],
                "idempotency_key": arguments["idempotency_key"].replace("capture", "admit"),
            }
            admitted = await client.call_tool("engram_memory_request_admission", admission)
            if not admitted.get("ok"):
                raise SystemExit(f"a live admission failed: {admitted}")
            counts[n] += 1
            due += interval
    finally:
        await client.close()


async def main(spec: dict[str, Any]) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    counts = [0] * len(spec["urls"])
    started = time.perf_counter()
    await asyncio.gather(*(_writer(n, spec, stop, counts) for n in range(len(spec["urls"]))))
    print(json.dumps({"pairs": sum(counts), "seconds": time.perf_counter() - started}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))))
