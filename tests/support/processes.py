"""Ending a test's subprocess without leaving its pipes to the garbage collector (a ResourceWarning)."""

from __future__ import annotations

import subprocess
from contextlib import suppress


def reap(process: subprocess.Popen[bytes]) -> None:
    """Kills the process if it still runs, waits for it, and closes every pipe the test opened to it."""
    if process.poll() is None:
        process.kill()
        process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            with suppress(OSError, ValueError):
                stream.close()
