"""SPEC §4 (forget) and §11: after a forget, the record's words are gone from every byte of the store.

Each test owns a fresh home and its own server, because it reads the store's files raw while the server
runs and again after the server has stopped.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from engram_memory.engine.recall.text import tokenize
from engram_memory.host.settings import HostPaths
from tests.mcp.helpers import (
    FORGET,
    WITHDRAW,
    HostCli,
    assert_failure,
    capture,
    files_containing,
    forget_args,
    found_ids,
    get,
    ok_value,
    remember,
    withdraw_args,
)
from tests.support.agents import McpAgent, StdioAgent
from tests.support.homes import bind

pytestmark = pytest.mark.stdio


@dataclass
class Site:
    paths: HostPaths
    host: HostCli
    agent: McpAgent


@pytest.fixture
def site(paths: HostPaths) -> Iterator[Site]:
    agent = StdioAgent(paths.home, bind(paths).token)
    try:
        yield Site(paths, HostCli(paths), agent)
    finally:
        agent.close()


def _marker() -> tuple[str, str]:
    tail = secrets.token_hex(8)
    return "zanzibarquux" + tail, tail


def _needles(marker: str, tail: str) -> list[bytes]:
    forms = {marker, marker.upper(), marker.capitalize(), marker + "s", tail}
    for form in list(forms):
        forms.update(tokenize(form))
    return sorted(form.encode("utf-8") for form in forms)


def _texts(marker: str) -> dict[str, str]:
    return {
        "text": f"The {marker} decision names one service; {marker} is its only name.",
        "context": f"Context for {marker}s and the {marker} rollout.",
        "source_ref": f"doc:{marker}",
    }


def test_forget_erases_marker_from_every_store_file(site: Site) -> None:
    marker, tail = _marker()
    texts = _texts(marker)
    _, record_id = remember(site.agent, texts["text"], context=texts["context"], source_ref=texts["source_ref"])
    assert found_ids(site.agent, marker) == [record_id]
    # The probe works: before the forget, the index holds the marker in plain bytes somewhere.
    assert files_containing(site.paths, [marker.encode()]) != []

    arguments = forget_args(record_id)
    assert_failure(site.agent.call(FORGET, arguments), "gate_failed")
    site.host.approve(site.host.only_request(record_id)["id"])
    value = ok_value(site.agent.call(FORGET, arguments))
    assert value["projection_invalidation"] == "complete"

    needles = _needles(marker, tail)
    assert files_containing(site.paths, needles) == [], "marker bytes remain while the server runs"
    assert found_ids(site.agent, marker) == []
    assert_failure(get(site.agent, record_id), "NOT_FOUND")

    site.agent.close()
    assert files_containing(site.paths, needles) == [], "marker bytes remain after the server stopped"


def test_forget_erasure_survives_more_writes_and_restart(site: Site) -> None:
    marker, tail = _marker()
    _, record_id = remember(site.agent, f"The {marker} convention for deploys.", context=f"More on {marker}.")
    for index in range(5):
        remember(site.agent, f"Unrelated fact number {index} {secrets.token_hex(4)} about builds.")
    arguments = forget_args(record_id)
    assert_failure(site.agent.call(FORGET, arguments), "gate_failed")
    site.host.approve(site.host.only_request(record_id)["id"])
    ok_value(site.agent.call(FORGET, arguments))
    for index in range(5):
        remember(site.agent, f"Later fact number {index} {secrets.token_hex(4)} about tests.")
    needles = _needles(marker, tail)
    assert files_containing(site.paths, needles) == []
    site.agent.close()
    assert files_containing(site.paths, needles) == []
    with StdioAgent(site.paths.home, bind(site.paths).token) as again:
        assert found_ids(again, marker) == []
        assert_failure(get(again, record_id), "NOT_FOUND")
    assert files_containing(site.paths, needles) == []


def test_pending_candidate_never_in_plaintext(site: Site) -> None:
    marker, tail = _marker()
    texts = _texts(marker)
    capture(site.agent, texts["text"], context=texts["context"], source_ref=texts["source_ref"])
    needles = _needles(marker, tail)
    assert files_containing(site.paths, needles) == []
    site.agent.close()
    assert files_containing(site.paths, needles) == []


def test_withdrawn_candidate_never_in_plaintext(site: Site) -> None:
    marker, tail = _marker()
    pending = capture(site.agent, f"The {marker} draft is withdrawn.")
    arguments = withdraw_args(pending["candidate_id"])
    assert_failure(site.agent.call(WITHDRAW, arguments), "gate_failed")
    site.host.approve(site.host.only_request(pending["candidate_id"])["id"])
    assert ok_value(site.agent.call(WITHDRAW, arguments))["key_destruction"] == "complete"
    site.agent.close()
    assert files_containing(site.paths, _needles(marker, tail)) == []
