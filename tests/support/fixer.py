"""A deterministic stand-in for an LLM agent repairing a refused call from the answer's text alone.

It reads only the text content of the answer (the envelope's JSON: `error.message`), never `_meta` and
never the schema; what it knows besides is what an agent knows: the text it meant to store, its
purpose_ref, and the shapes the tool descriptions show (a citation, a digest). Each fault the message
names ("At /pointer: words.") is mended by what its words say.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from tests.support.payloads import PURPOSE

_FAULT = re.compile(r"At (the top level|/\S*): (.+?)\.(?= At |$)")
_BYTES = re.compile(r"a string of ([\d,]+) to ([\d,]+) UTF-8 bytes")
_RANGE = re.compile(r"an integer from (-?[\d,]+) to (-?[\d,]+)")
_LIST = re.compile(r"a list of ([\d,]+) to ([\d,]+) items")
_ALLOWED = re.compile(r"allowed are ([\w, ]+);")
_OPTIONS = re.compile(r'"([^"]+)"')
_BOUNDS = re.compile(r"from (\S+Z) to (\S+Z)")
_CONST = re.compile(r"must be (\d+)$")
NOW_MS = 1_764_547_200_000


def faults(answer_text: str) -> list[tuple[list[str], str]]:
    """(pointer parts, words) of each fault the answer's message names."""
    message = json.loads(answer_text)["error"]["message"]
    found = []
    for where, words in _FAULT.findall(message):
        parts = (
            [] if where == "the top level" else [p.replace("~1", "/").replace("~0", "~") for p in where[1:].split("/")]
        )
        found.append((parts, words))
    return found


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


class _At:
    """The value at a pointer of the arguments being mended, with its parent to change it through."""

    def __init__(self, root: Any, parts: list[str]) -> None:
        self.root, self.parts = root, parts

    def parent(self) -> Any:
        node = self.root
        for part in self.parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node

    @property
    def key(self) -> Any:
        return int(self.parts[-1]) if isinstance(self.parent(), list) else self.parts[-1]

    def get(self) -> Any:
        parent = self.parent() if self.parts else None
        if not self.parts:
            return self.root
        try:
            return parent[self.key]
        except (KeyError, IndexError, TypeError):
            return None

    def set(self, value: Any) -> None:
        self.parent()[self.key] = value

    def drop(self) -> None:
        parent = self.parent()
        if isinstance(parent, list):
            parent.pop(self.key)
        else:
            parent.pop(self.key, None)


def _to_bytes(text: str, low: int, high: int) -> str:
    if len(text.encode("utf-8")) > high:
        return text.encode("utf-8")[:high].decode("utf-8", errors="ignore")
    return text + "-" * max(0, low - len(text.encode("utf-8")))


def _ms(value: Any) -> int:
    number = int(value) if isinstance(value, str) and value.strip().lstrip("-").isdigit() else value
    if not isinstance(number, int) or isinstance(number, bool):
        return NOW_MS
    while abs(number) > 253_402_300_799_999:
        number //= 1000
    return number * 1000 if 0 < number < 10**11 else number


def _instant(value: Any) -> str:
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        moment = datetime.fromtimestamp(NOW_MS / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class Fixer:
    def __init__(self, text: str) -> None:
        self.text = text

    def repaired(self, arguments: Any, answer_text: str) -> Any:
        mended = copy.deepcopy(arguments)
        for parts, words in faults(answer_text):
            mended = self._mend(mended, parts, words)
        return mended

    def _shape(self, name: str, words: str, arguments: Any) -> Any:
        """A value of the shape the words describe, for a field the agent must give."""
        bounds = _BYTES.search(words)
        options = _OPTIONS.findall(words)
        shapes: list[tuple[bool, Callable[[], Any]]] = [
            (name == "citations", lambda: self._citations(arguments)),
            (name == "purpose_ref", lambda: PURPOSE),
            ("epoch milliseconds" in words, lambda: NOW_MS),
            ("sha256" in words, lambda: _sha(self.text)),
            (bounds is not None, lambda: self._text_of(name, bounds)),
            (words.startswith("one of") and bool(options), lambda: options[0]),
            ("a list" in words, list),
        ]
        return next((make() for holds, make in shapes if holds), self.text)

    def _citations(self, arguments: Any) -> list[dict[str, Any]]:
        ids = sorted({i for c in arguments["payload"]["components"] for i in c.get("citation_ids", [])})
        return [self._citation(i) for i in ids or ["src"]]

    def _text_of(self, name: str, bounds: Any) -> str:
        return _to_bytes(self.text if name in ("query", "text") else f"{name}:agent", *map(_n, bounds.groups()))

    def _citation(self, citation_id: str) -> dict[str, Any]:
        locator = {"scheme": "document", "value": "source"}
        return {
            "citation_id": citation_id,
            "source_ref": "doc:source",
            "locator": locator,
            "content_digest": _sha(self.text),
        }

    def _mend(self, arguments: Any, parts: list[str], words: str) -> Any:
        at = _At(arguments, parts)
        value = at.get()
        for test, action in self._actions(arguments, at, value, words):
            if test:
                action()
                return arguments
        return arguments

    def _actions(self, arguments: Any, at: _At, value: Any, words: str) -> list[tuple[bool, Callable[[], None]]]:
        name = str(at.parts[-1]) if at.parts else ""
        return [
            ("leave this optional field out" in words, at.drop),
            ("leave out any other" in words, lambda: self._keep_allowed(at, words)),
            (
                words.startswith("required, missing") or "null is not allowed" in words,
                lambda: at.set(self._shape(name, words, arguments)),
            ),
            ("epoch milliseconds" in words, lambda: at.set(_ms(value))),
            ("sha256" in words, lambda: at.set(self._digest(value))),
            ("names no citation_id" in words, lambda: self._drop_reference(arguments, at)),
            ("names no component_id" in words, lambda: at.set(arguments["payload"]["components"][0]["component_id"])),
            ("that the primary component also lists" in words, lambda: at.set(self._primary_citation(arguments))),
            ("must not be before" in words, lambda: at.set(arguments["payload"]["valid_time"]["t"])),
            ("must be after the time of the capture" in words, at.drop),
            ("normalisation form NFC" in words, lambda: at.set(_nfc(value))),
            ("sorted in ascending order" in words, lambda: at.set(sorted(set(value)))),
            ("each item at most once" in words, lambda: at.set(list(dict.fromkeys(value)))),
            ("must be unique within its list" in words, lambda: at.set(f"{value}-2")),
            (words.startswith("one of"), lambda: at.set(_closest(value, _OPTIONS.findall(words)))),
            (_CONST.search(words) is not None, lambda: at.set(int(_CONST.search(words).group(1)))),  # type: ignore[union-attr]
            (_RANGE.search(words) is not None, lambda: at.set(_clamped(value, words))),
            (
                _BYTES.search(words) is not None,
                lambda: at.set(_to_bytes(str(value), *map(_n, _BYTES.search(words).groups()))),
            ),  # type: ignore[union-attr]
            ("an instant" in words, lambda: at.set(_instant(value))),
            ("must be a list" in words, lambda: at.set([value])),
            ("must be an object" in words, lambda: at.set({"scheme": "document", "value": str(value)})),
            ("must be an integer" in words, lambda: at.set(int(value))),
            (_LIST.search(words) is not None and not value, lambda: at.set([self._component()])),
        ]

    def _component(self) -> dict[str, Any]:
        return {"component_id": "main", "kind": "decision", "text": self.text, "citation_ids": ["src"]}

    def _keep_allowed(self, at: _At, words: str) -> None:
        allowed = {name.strip() for name in _ALLOWED.search(words).group(1).split(",")}  # type: ignore[union-attr]
        target = at.get()
        for key in [key for key in target if key not in allowed]:
            del target[key]

    def _digest(self, value: Any) -> str:
        text = str(value)
        lowered = text.lower()
        if re.fullmatch(r"sha256:[0-9a-f]{64}", lowered):
            return lowered
        if re.fullmatch(r"[0-9a-f]{64}", lowered):
            return "sha256:" + lowered
        return _sha(self.text)

    def _drop_reference(self, arguments: Any, at: _At) -> None:
        known = [c["citation_id"] for c in arguments["payload"]["citations"]]
        listed = at.parent()
        at.drop()
        if not listed:
            listed.append(known[0])

    def _primary_citation(self, arguments: Any) -> str:
        payload = arguments["payload"]
        primary = next(c for c in payload["components"] if c["component_id"] == payload["primary_component_id"])
        return str(primary["citation_ids"][0])


def _n(text: str) -> int:
    return int(text.replace(",", ""))


def _nfc(value: Any) -> Any:
    return unicodedata.normalize("NFC", value) if isinstance(value, str) else value


def _closest(value: Any, options: list[str]) -> str:
    lowered = str(value).lower()
    return next((option for option in options if option.lower() == lowered), options[0])


def _clamped(value: Any, words: str) -> int:
    low, high = map(_n, _RANGE.search(words).groups())  # type: ignore[union-attr]
    number = int(value) if isinstance(value, int | str) and str(value).lstrip("-").isdigit() else low
    return min(max(number, low), high)
