"""No character of an agent's text reaches the host's terminal as anything but text.

An agent chooses reason refs, ids and component text; the host reads them in `confirmations list`,
`records show` and the review queue, and approves what it reads. Control sequences there could
erase lines or fake the request a person approves.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram_memory.contract.tools import Tool
from engram_memory.host.terminal import inline, json_text, printable
from tests.host.clirun import Done, cli, cli_process
from tests.support.homes import bind, engine_for, make_home
from tests.support.payloads import capture_args, unique_key

UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs"}
# Clear the screen, move up and erase a line, a carriage return, a C1 CSI, a bidi override, a line
# and paragraph separator, a backspace, DEL, and a forged second line of the listing.
HOSTILE = (
    "ticket:OPS-1\x1b[2J\x1b[1A\x1b[2K\rok\x9b31m\u202eevil\u2028\u2029\x08\x7f"
    "\nconf_aaaaaaaaaaaaaaaa  requested  engram_memory_forget mem_fake"
)


def _unsafe_in(text: str, allowed: str = "") -> list[str]:
    return [ch for ch in text if unicodedata.category(ch) in UNSAFE and ch not in allowed]


@given(st.text())
def test_printable_leaves_only_line_breaks_and_tabs(text: str) -> None:
    assert _unsafe_in(printable(text), "\n\t") == []
    assert _unsafe_in(inline(text)) == []


@given(st.text(st.characters(blacklist_categories=["Cs"])))
def test_printable_changes_nothing_that_is_plain_text(text: str) -> None:
    if not _unsafe_in(text, "\n\t"):
        assert printable(text) == text


def test_every_script_and_every_space_stays_as_written() -> None:
    text = "운영팀　데이터베이스 · 資料庫 · データベース · café\u00a0naïve"
    assert printable(text) == inline(text) == text


@given(
    st.recursive(
        st.text() | st.integers() | st.booleans(), lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner)
    )
)
def test_json_text_reads_back_as_the_same_value_and_carries_nothing_unsafe(value: object) -> None:
    text = json_text(value)
    assert json.loads(text) == value
    assert _unsafe_in(text) == []
    assert _unsafe_in(json_text(value, indent=2), "\n") == []


def _assert_safe(done: Done) -> str:
    assert done.code == 0 and "Traceback" not in done.stderr, done
    assert _unsafe_in(done.stdout, "\n") == [], done.stdout
    assert _unsafe_in(done.stderr, "\n") == [], done.stderr
    return done.stdout


@pytest.mark.process
def test_a_hostile_reason_never_reaches_the_terminal_raw(tmp_path: Path) -> None:
    paths = make_home(tmp_path / "home")
    binding = bind(paths).binding
    with engine_for(paths) as engine:
        captured = engine.handle(binding, Tool.CAPTURE, capture_args("Deploys roll back by switching the router."))
        candidate = captured["output"]["value"]["candidate_id"]
        admitted = engine.handle(
            binding, Tool.REQUEST_ADMISSION, {"candidate_id": candidate, "idempotency_key": unique_key("admit")}
        )
        record_id = admitted["output"]["value"]["outcome"]["record_id"]
        forget = {"record_id": record_id, "idempotency_key": unique_key("forget"), "reason_ref": HOSTILE}
        assert engine.handle(binding, Tool.FORGET, forget)["error"]["code"] == "gate_failed"
        [(row, _status)] = engine.confirmations()

    listed = _assert_safe(cli_process("confirmations", "list", "--home", paths.home))
    # One request, four lines: the forged line is shown inside the reason, escaped, not as a request.
    assert len(listed.splitlines()) == 4, listed
    assert "\\x1b[2J" in listed and "\\u202e" in listed and "\\x0aconf_aaaaaaaaaaaaaaaa" in listed
    [item] = json.loads(_assert_safe(cli("confirmations", "list", "--json", "--home", paths.home)))
    assert item["reason_ref"] == HOSTILE

    _assert_safe(cli("confirmations", "approve", row.confirmation_id, "--home", paths.home))
    with engine_for(paths) as engine:
        assert engine.handle(binding, Tool.FORGET, forget)["ok"]
    shown = _assert_safe(cli_process("records", "show", record_id, "--home", paths.home))
    assert "\\x1b[2J" in shown and "mem_fake" in shown
    assert not any(line.startswith("conf_") for line in shown.splitlines())
    history = json.loads(_assert_safe(cli("records", "show", record_id, "--json", "--home", paths.home)))["history"]
    assert HOSTILE in [event["reason_ref"] for event in history]
