"""`serve --http` as a load balancer and a metrics scraper see it, through a real HTTP client."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from engram_memory.host.settings import HostPaths
from tests.host.clirun import assert_one_line_failure, cli
from tests.support.homes import bind, engine_for
from tests.support.http_agents import HttpAgent, HttpServer
from tests.support.payloads import PURPOSE

ERROR = "engram-memory: error: "
_METRICS_AT = re.compile(r"serving Prometheus metrics at (http://127\.0\.0\.1:\d+/metrics)")


def _metrics_url(server: HttpServer) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = _METRICS_AT.search(server.stderr())
        if found:
            return found.group(1)
        time.sleep(0.05)
    raise AssertionError(server.stderr())


def test_health_readiness_metrics_and_access_log(paths: HostPaths, tmp_path: Path) -> None:
    issued = bind(paths)
    log = tmp_path / "serve.log"
    with (
        HttpServer(paths.home, log, "--metrics-port", "0", "--access-log") as server,
        httpx2.Client(timeout=30) as client,
    ):
        base = f"http://127.0.0.1:{server.port}"
        alive = client.get(base + "/healthz")
        assert (alive.status_code, alive.json()) == (200, {"status": "alive"})
        ready = client.get(base + "/readyz")
        assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
        with HttpAgent(server.url, issued.token) as agent:
            agent.value("engram_memory_search", {"query": "kestrel", "purpose_ref": PURPOSE})
            assert agent.error_code("engram_memory_get", {"record_id": "mem_nothere", "purpose_ref": PURPOSE})
        scraped = client.get(_metrics_url(server))
        assert scraped.status_code == 200
        families = {family.name: family for family in text_string_to_metric_families(scraped.text)}
        # Prometheus conventions: counters are *_total samples, durations are in seconds, a common prefix.
        assert {"engram_memory_tool_calls", "engram_memory_tool_call_duration_seconds"} <= set(families)
        assert all(name.startswith("engram_memory_") for name in families)
        calls = {
            (sample.labels["tool"], sample.labels["outcome"]): sample.value
            for sample in families["engram_memory_tool_calls"].samples
            if sample.name == "engram_memory_tool_calls_total"
        }
        assert calls[("engram_memory_search", "ok")] == 1
        assert sum(value for (tool, outcome), value in calls.items() if tool == "engram_memory_get") == 1
        assert families["engram_memory_tool_call_duration_seconds"].type == "histogram"
        assert families["engram_memory_vector_queue_depth"].type == "gauge"
        assert families["engram_memory_vector_queue_depth"].samples[0].value >= 0
        statuses = {
            sample.labels["status_class"]: sample.value
            for sample in families["engram_memory_http_responses"].samples
            if sample.name.endswith("_total")
        }
        assert statuses["2xx"] >= 3
    lines = log.read_text(encoding="utf-8").splitlines()
    access = [line for line in lines if " GET /healthz " in line or " POST /mcp " in line]
    assert any(re.search(r"127\.0\.0\.1:\d+ GET /healthz 200 \d+\.\dms$", line) for line in access), lines
    for part in issued.token.split("."):
        assert part not in log.read_text(encoding="utf-8")
    assert "kestrel" not in log.read_text(encoding="utf-8")


def test_without_access_log_a_request_writes_no_line(sqlite_paths: HostPaths, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with HttpServer(sqlite_paths.home, log) as server, httpx2.Client(timeout=30) as client:
        for _ in range(20):
            assert client.get(f"http://127.0.0.1:{server.port}/healthz").status_code == 200
    assert "/healthz" not in log.read_text(encoding="utf-8")


def test_json_log_lines_are_one_object_each(sqlite_paths: HostPaths, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with (
        HttpServer(sqlite_paths.home, log, "--log-format", "json", "--access-log") as server,
        httpx2.Client(timeout=30) as client,
    ):
        client.get(f"http://127.0.0.1:{server.port}/readyz")
    entries = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert entries and all(set(entry) >= {"at", "level", "logger", "message"} for entry in entries)
    assert any(entry["logger"] == "engram_memory.access" and "/readyz 200" in entry["message"] for entry in entries)


def test_log_level_warning_keeps_info_lines_out(sqlite_paths: HostPaths) -> None:
    token = bind(sqlite_paths).token
    said = cli("serve", "--binding", token, "--home", sqlite_paths.home, env={"ENGRAM_EMBEDDING_MODEL": "off"})
    assert said.code == 0 and "INFO serving over stdio" in said.stderr
    quiet = cli(
        "serve", "--binding", token, "--log-level", "warning", "--home", sqlite_paths.home,
        env={"ENGRAM_EMBEDDING_MODEL": "off"},
    )  # fmt: skip
    assert (quiet.code, quiet.stderr) == (0, "")


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("--log-level", "loud"), "--log-level takes one of debug, info, warning, error"),
        (("--log-format", "xml"), "--log-format takes one of text, json"),
        (("--metrics-port", "9100"), "--metrics-port applies only with --http (serve over stdio takes none of them)"),
    ],
)
def test_serve_refuses_bad_observability_options_in_one_line(
    sqlite_paths: HostPaths, args: tuple[str, ...], reason: str
) -> None:
    assert assert_one_line_failure(cli("serve", *args, "--home", sqlite_paths.home)) == ERROR + reason


def test_readiness_is_false_once_the_store_no_longer_answers(paths: HostPaths) -> None:
    with engine_for(paths) as engine:
        assert engine.ready() is True
        engine.deps.store.close()  # what a lost database looks like to the process: a store that cannot answer
        assert engine.ready() is False
