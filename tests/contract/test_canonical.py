"""Canonical JSON and digests: the golden vector, and every value that must have no canonical form."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from engram_memory.contract.canonical import (
    PAYLOAD_DOMAIN,
    CanonicalError,
    canonical_json,
    digest,
    is_digest,
)

GOLDEN = Path(__file__).resolve().parent / "data" / "golden-payload.json"  # copied from shared/data
GOLDEN_DIGEST = "sha256:df5abcbf1d1091794c1f37efcd89e5f7bd6b91afa631e29f084178d35c55e913"


def test_digest_reproduces_golden_vector() -> None:
    payload = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert digest(PAYLOAD_DOMAIN, payload) == GOLDEN_DIGEST


def test_digest_changes_with_domain() -> None:
    payload = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert digest("graphify-memory/payload/v3", payload) != GOLDEN_DIGEST


def test_canonical_json_sorts_keys_by_utf16_code_units() -> None:
    # U+1F600 is a surrogate pair (D83D...) and sorts before U+FB01 in UTF-16, after it in code points.
    assert canonical_json({"\ufb01": 1, "\U0001f600": 2}) == '{"\U0001f600":2,"\ufb01":1}'.encode()


def test_canonical_json_prints_numbers_like_ecmascript() -> None:
    assert canonical_json([1.0, 1e21, 0.1, -5]) == b"[1,1e+21,0.1,-5]"


@pytest.mark.parametrize(
    "value",
    [
        {"text": "e\u0301"},
        {"e\u0301": 1},
        [-0.0],
        [float("nan")],
        [float("inf")],
        [2**53],
        [-(2**53)],
        {1: "non-string key"},
        ["\ud800"],
        [b"bytes"],
    ],
    ids=[
        "non-nfc-value",
        "non-nfc-key",
        "negative-zero",
        "nan",
        "infinity",
        "unsafe",
        "unsafe-negative",
        "int-key",
        "surrogate",
        "bytes",
    ],
)
def test_canonical_json_rejects_values_without_canonical_form(value: object) -> None:
    with pytest.raises(CanonicalError):
        canonical_json(value)


def test_canonical_json_accepts_safe_integer_bounds() -> None:
    assert canonical_json([2**53 - 1, -(2**53 - 1)]) == b"[9007199254740991,-9007199254740991]"


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**53 - 1), 2**53 - 1) | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    )
)
def test_canonical_json_is_stable_for_nfc_values(value: object) -> None:
    def nfc(item: object) -> object:
        if isinstance(item, str):
            return unicodedata.normalize("NFC", item.encode("utf-8", "replace").decode("utf-8"))
        if isinstance(item, list):
            return [nfc(x) for x in item]
        if isinstance(item, dict):
            return {nfc(k): nfc(v) for k, v in item.items()}
        return item

    normal = nfc(value)
    once = canonical_json(normal)
    assert canonical_json(json.loads(once)) == once


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sha256:" + "a" * 64, True),
        ("sha256:" + "A" * 64, False),
        ("sha256:" + "a" * 63, False),
        ("sha512:" + "a" * 64, False),
        ("sha256:" + "g" * 64, False),
    ],
)
def test_is_digest_accepts_only_lowercase_sha256_hex(text: str, expected: bool) -> None:
    assert is_digest(text) is expected


_NFC_TEXT = st.text(st.characters(exclude_categories=("Cs",))).map(lambda t: unicodedata.normalize("NFC", t))
_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53 - 1), 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != 0.0 or str(f) == "0.0")
    | _NFC_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_NFC_TEXT, inner, max_size=4),
    max_leaves=20,
)


@given(_JSON_VALUES)
def test_canonical_json_equals_the_reference_library_on_the_fast_path_and_off_it(value: object) -> None:
    assert canonical_json(value) == bytes(rfc8785.dumps(value))


def test_canonical_json_escapes_controls_like_the_reference_library() -> None:
    text = "".join(chr(c) for c in range(0x20)) + '"\\\u007f\u2028\u2029é\U0001f600'
    value = {"k": text, "\u00e9": [text], "z\ue000": 1, "z\U00010000": 2}
    assert canonical_json(value) == bytes(rfc8785.dumps(value))
    assert canonical_json({"k": text}) == bytes(rfc8785.dumps({"k": text}))


@given(st.floats(min_value=-1e17, max_value=1e17, allow_nan=False).filter(lambda f: f != 0.0 or str(f) == "0.0"))
def test_canonical_json_prints_every_float_like_the_reference_library(number: float) -> None:
    derived = [x for x in (number, round(number, 9), number / 7) if x != 0.0 or str(x) == "0.0"]  # no -0
    value = {"score": derived[0], "scores": derived}
    assert canonical_json(value) == bytes(rfc8785.dumps(value))


def test_canonical_json_prints_floats_at_the_plain_notation_bounds_like_the_reference_library() -> None:
    edges = [1e-4, 9.999e-5, 0.00015, 1e15 + 0.5, 9999999999999998.0, 1e16, 1e21, 5.0, 0.1, 123.456, 2.5e-7]
    for number in edges + [-x for x in edges]:
        assert canonical_json([number]) == bytes(rfc8785.dumps([number])), number
