"""The jsonschema-rs fast path never accepts what the reference validator refuses.

Arguments are valid ones with one part changed at random (a value replaced by any JSON value, a key
removed, a key added), for every tool; whenever the fast validator calls a float-free instance valid,
the reference validator must find no error.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engram_memory.contract.tools import Tool
from engram_memory.contract.validators import FAST_VALIDATORS as _FAST_VALIDATORS
from engram_memory.contract.validators import VALIDATORS as _VALIDATORS
from tests.support.payloads import capture_args

_VALID: dict[Tool, dict[str, Any]] = {
    Tool.CAPTURE: capture_args(
        "The team moved the release to Friday.",
        key="capture-key-0001-padded-to-bounds",
        retention={"derivative_rule": "make-ineligible", "expires_at": "2030-01-01T00:00:00.000Z"},
        reconciliation={"family_refs": ["family:a", "family:b"]},
        attestation="att:one",
        context="Said in the planning call.",
    ),
    Tool.REQUEST_ADMISSION: {
        "candidate_id": "cand_abcdefgh234567",
        "idempotency_key": "admit-key-0001-padded-to-bounds",
    },
    Tool.SEARCH: {"query": "release day", "purpose_ref": "purpose:planning", "limit": 5},
    Tool.GET: {"record_id": "mem_abcdefgh234567", "purpose_ref": "purpose:planning"},
    Tool.WITHDRAW: {
        "candidate_id": "cand_abcdefgh234567",
        "idempotency_key": "withdraw-key-0001-padded-to-bounds",
        "reason_ref": "reason:mistake",
    },
    Tool.FORGET: {
        "record_id": "mem_abcdefgh234567",
        "idempotency_key": "forget-key-0001-padded-to-bounds",
        "reason_ref": "reason:mistake",
    },
}

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.text(max_size=80),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _changed(arguments: dict[str, Any], data: st.DataObject) -> Any:
    changed = copy.deepcopy(arguments)
    path = data.draw(st.sampled_from(_paths(changed)))
    if not path:
        return data.draw(_JSON)
    parent = changed
    for part in path[:-1]:
        parent = parent[part]
    action = data.draw(st.sampled_from(["replace", "remove", "add"]))
    if action == "replace":
        parent[path[-1]] = data.draw(_JSON)
    elif action == "remove":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[data.draw(st.text(max_size=12))] = data.draw(_JSON)
    else:
        parent.append(data.draw(_JSON))
    return changed


def test_every_tool_example_is_valid_on_both_paths() -> None:
    for tool, arguments in _VALID.items():
        assert _FAST_VALIDATORS[tool].is_valid(arguments), tool
        assert not list(_VALIDATORS[tool].iter_errors(arguments)), tool


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(list(_VALID)), st.data())
def test_fast_path_accepts_only_what_the_reference_accepts(tool: Tool, data: st.DataObject) -> None:
    instance = _changed(_VALID[tool], data)
    if _FAST_VALIDATORS[tool].is_valid(instance):
        assert not list(_VALIDATORS[tool].iter_errors(instance))


def test_our_keywords_fail_on_the_fast_path() -> None:
    arguments = _VALID[Tool.CAPTURE]
    twice = copy.deepcopy(arguments)
    twice["payload"]["components"].append(copy.deepcopy(twice["payload"]["components"][0]))
    unsorted = copy.deepcopy(arguments)
    unsorted["payload"]["reconciliation"]["family_refs"] = ["family:b", "family:a"]
    wide = copy.deepcopy(arguments)
    wide["idempotency_key"] = "é" * 200  # within the code-point bound, over the UTF-8 byte bound
    for instance in (twice, unsorted, wide):
        assert list(_VALIDATORS[Tool.CAPTURE].iter_errors(instance))
        assert not _FAST_VALIDATORS[Tool.CAPTURE].is_valid(instance)
