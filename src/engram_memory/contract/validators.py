"""The advertised schemas compiled twice: jsonschema-rs as the fast path, the reference validator for
verdicts and error locations; plus the text rules JSON Schema cannot say (UTF-8, U+0000, NFC)."""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Iterator
from types import MappingProxyType
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator, FormatChecker, ValidationError, validators

from engram_memory.contract.instants import parse_instant
from engram_memory.contract.schemas import SORTED, UNIQUE_BY, UTF8_BYTES, schema_for_validation
from engram_memory.contract.tools import Tool


def _strict_integer(_checker: Any, instance: object) -> bool:
    # jsonschema counts 5.0 as an integer; the contract wants real integers only.
    return isinstance(instance, int) and not isinstance(instance, bool)


def _utf8_bytes(_validator: Any, bounds: list[int], instance: object, _schema: Any) -> Iterator[ValidationError]:
    if not isinstance(instance, str):
        return
    size = len(instance.encode("utf-8", errors="surrogatepass"))
    minimum, maximum = bounds
    if size < minimum or size > maximum:
        yield ValidationError("string length in UTF-8 bytes is out of bounds")


def _unique_by(_validator: Any, key: str, instance: object, _schema: Any) -> Iterator[ValidationError]:
    if not isinstance(instance, list):
        return
    seen: set[object] = set()
    for item in instance:
        if isinstance(item, dict) and isinstance(item.get(key), str):
            if item[key] in seen:
                yield ValidationError(f"duplicate {key}")
                return
            seen.add(item[key])


def _sorted(_validator: Any, wanted: bool, instance: object, _schema: Any) -> Iterator[ValidationError]:
    if not (wanted and isinstance(instance, list)):
        return
    strings = [item for item in instance if isinstance(item, str)]
    if len(strings) == len(instance) and strings != sorted(strings):
        yield ValidationError("items are not sorted")


@functools.cache
def _ecma_pattern(pattern: str) -> re.Pattern[str]:
    """`pattern` with ECMA-262's `$` (JSON Schema's dialect: the end of the text), not Python's, which
    also matches before a final newline ("sha256:…\n" would pass). Our patterns hold `$` only as an
    anchor, never escaped or inside a class."""
    return re.compile(pattern.replace("$", r"\Z"))


def _pattern(_validator: Any, pattern: str, instance: object, _schema: Any) -> Iterator[ValidationError]:
    if isinstance(instance, str) and _ecma_pattern(pattern).search(instance) is None:
        yield ValidationError("string does not match its pattern")


def _is_canonical_instant(instance: object) -> bool:
    return not isinstance(instance, str) or parse_instant(instance) is not None


_FORMATS = FormatChecker(formats=())
_FORMATS.checks("date-time")(_is_canonical_instant)


_ContractValidator = validators.extend(
    Draft202012Validator,
    validators={UTF8_BYTES: _utf8_bytes, UNIQUE_BY: _unique_by, SORTED: _sorted, "pattern": _pattern},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _strict_integer),
)

VALIDATORS = MappingProxyType(
    {tool: _ContractValidator(schema_for_validation(tool), format_checker=_FORMATS) for tool in Tool}
)


# The same schemas compiled by jsonschema-rs, thirty times faster, as a fast path: an instance it calls
# valid is valid, except that JSON Schema counts 5.0 as an integer, so arguments holding any float
# always take the reference validator; an instance it calls invalid gets the reference validator's
# verdict and error classification. Its `x-` keywords are the ones above.
class _RsKeyword:
    check: Any

    def __init__(self, _parent: Any, value: Any, _path: Any) -> None:
        self.value = value

    def validate(self, instance: object) -> None:
        if next(iter(type(self).check(None, self.value, instance, None)), None) is not None:
            raise ValueError("invalid")


class _RsUtf8Bytes(_RsKeyword):
    check = staticmethod(_utf8_bytes)


class _RsUniqueBy(_RsKeyword):
    check = staticmethod(_unique_by)


class _RsSorted(_RsKeyword):
    check = staticmethod(_sorted)


FAST_VALIDATORS = MappingProxyType(
    {
        tool: jsonschema_rs.Draft202012Validator(
            dict(schema_for_validation(tool)),
            formats={"date-time": _is_canonical_instant},
            validate_formats=True,
            keywords={UTF8_BYTES: _RsUtf8Bytes, UNIQUE_BY: _RsUniqueBy, SORTED: _RsSorted},
        )
        for tool in Tool
    }
)


def string_rule(text: str) -> str | None:
    """Which text rule `text` breaks, if any: UTF-8 (a lone surrogate), U+0000 (PostgreSQL's text
    cannot hold it, so every store refuses it alike), NFC."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "utf-8"
    if "\x00" in text:
        return "no-nul"
    if not unicodedata.is_normalized("NFC", text):
        return "nfc"
    return None


def serialized_size(arguments: object) -> int | None:
    """UTF-8 bytes of the arguments as compact JSON (what the 1 MiB cap counts); None when they are not JSON."""
    try:
        return len(json.dumps(arguments, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    except (TypeError, ValueError, UnicodeEncodeError):
        return None
