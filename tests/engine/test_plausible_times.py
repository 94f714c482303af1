"""Instants an agent sends must be plausible epoch milliseconds: seconds and far-off values are refused
with words that say so; old dates stay storable; the host's policy sets the bounds."""

from __future__ import annotations

import pytest

from engram_memory.host.policy_file import DEFAULT_POLICY_TOML
from engram_memory.host.settings import HostPaths
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import capture_args, with_change

CAPTURE = "engram_memory_capture"
SECONDS_NOW = 1_764_547_200  # 2025-12-01 in epoch seconds
MS_1950 = -631_152_000_000


@pytest.mark.parametrize(
    ("path", "pointer"),
    [
        ("payload/valid_time/t", "/payload/valid_time/t"),
        ("payload/primary_event/at", "/payload/primary_event/at"),
    ],
)
def test_seconds_are_refused_naming_milliseconds(agent: InProcessAgent, path: str, pointer: str) -> None:
    envelope = agent.call(CAPTURE, with_change(capture_args("Seconds are not milliseconds."), path, SECONDS_NOW))
    assert envelope["error"]["code"] == "INVALID_SCHEMA"
    message = envelope["error"]["message"]
    assert f"At {pointer}: epoch milliseconds; this value reads as epoch seconds" in message
    assert str(SECONDS_NOW) not in message


def test_an_end_in_seconds_is_refused_too(agent: InProcessAgent) -> None:
    arguments = with_change(capture_args("An end in seconds."), "payload/valid_time", {"t": 1, "t_end": SECONDS_NOW})
    envelope = agent.call(CAPTURE, arguments)
    assert "At /payload/valid_time/t: epoch milliseconds" in envelope["error"]["message"]
    assert "At /payload/valid_time/t_end: epoch milliseconds" in envelope["error"]["message"]


def test_microseconds_lie_beyond_the_default_bounds(agent: InProcessAgent) -> None:
    arguments = capture_args("Microseconds are not milliseconds.", valid_from_ms=1_764_547_200_000_000)
    message = agent.call(CAPTURE, arguments)["error"]["message"]
    assert "from 0001-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z (the host's bounds)" in message


def test_a_fact_dated_1950_is_accepted_and_found(agent: InProcessAgent) -> None:
    record_id = agent.remember("The company was founded in a garage workshop.", valid_from_ms=MS_1950)
    assert agent.value("engram_memory_get", {"record_id": record_id, "purpose_ref": "purpose:tests"})


def test_the_epoch_itself_and_negative_values_are_not_taken_for_seconds(agent: InProcessAgent) -> None:
    assert agent.capture("At the epoch.", valid_from_ms=0)["status"] == "committed_pending"
    assert agent.capture("Just before the epoch.", valid_from_ms=-1_000)["status"] == "committed_pending"


def _policy_times(paths: HostPaths, table: str) -> None:
    paths.policy.write_text(DEFAULT_POLICY_TOML.split("[times]")[0] + "[times]\n" + table, encoding="utf-8")


def test_the_host_narrows_the_bounds_and_may_allow_the_seconds_range(paths: HostPaths, agent: InProcessAgent) -> None:
    _policy_times(paths, 'earliest = "1900-01-01T00:00:00.000Z"\nallow_seconds_range = true\n')
    assert agent.capture("A 1970s fact in milliseconds.", valid_from_ms=SECONDS_NOW)["status"] == "committed_pending"
    too_old = agent.call(CAPTURE, capture_args("Older than the host allows.", valid_from_ms=-2_500_000_000_000))
    assert "from 1900-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z" in too_old["error"]["message"]
