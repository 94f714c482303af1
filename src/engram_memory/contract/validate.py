"""Enforces the advertised schemas on every call, plus what JSON Schema cannot say.

Order: size cap, text well-formedness (UTF-8, NFC), the schema with our `x-` keywords, then the
cross-references of a capture. Every failure is INVALID_SCHEMA, except a digest of the wrong shape in
otherwise valid arguments, which is INVALID_DIGEST.
"""

from __future__ import annotations

import functools
import json
import math
import re
import unicodedata
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator, FormatChecker, ValidationError, validators

from engram_memory.contract.canonical import DIGEST_PATTERN
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.instants import parse_instant
from engram_memory.contract.schemas import (
    MAX_ARGUMENT_BYTES,
    SORTED,
    UNIQUE_BY,
    UTF8_BYTES,
    schema_for_validation,
)
from engram_memory.contract.tools import Tool


def _strict_integer(_checker: Any, instance: object) -> bool:
    # jsonschema counts 5.0 as an integer; the contract wants real integers only.
    return isinstance(instance, int) and not isinstance(instance, bool)


def _utf8_bytes(
    _validator: Any, bounds: Mapping[str, int], instance: object, _schema: Any
) -> Iterator[ValidationError]:
    if not isinstance(instance, str):
        return
    size = len(instance.encode("utf-8", errors="surrogatepass"))
    if size < bounds.get("minimum", 0) or size > bounds.get("maximum", size):
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

_VALIDATORS = {tool: _ContractValidator(schema_for_validation(tool), format_checker=_FORMATS) for tool in Tool}


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


_FAST_VALIDATORS = {
    tool: jsonschema_rs.Draft202012Validator(
        dict(schema_for_validation(tool)),
        formats={"date-time": _is_canonical_instant},
        validate_formats=True,
        keywords={UTF8_BYTES: _RsUtf8Bytes, UNIQUE_BY: _RsUniqueBy, SORTED: _RsSorted},
    )
    for tool in Tool
}


def _invalid() -> ContractError:
    return ContractError(ErrorCode.INVALID_SCHEMA)


def _check_text_and_numbers(value: object) -> bool:
    """Every string must be valid UTF-8 in NFC without U+0000 (PostgreSQL's text cannot hold it, so
    every store refuses it alike); every number finite. Keys included. True when some number is a float."""
    floats = False
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise _invalid() from exc
            if "\x00" in item or not unicodedata.is_normalized("NFC", item):
                raise _invalid()
        elif isinstance(item, float):
            floats = True
            if not math.isfinite(item):
                raise _invalid()
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return floats


def _serialized_size(arguments: Mapping[str, Any]) -> int:
    try:
        return len(json.dumps(arguments, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise _invalid() from exc


def _is_digest_shape_error(error: ValidationError) -> bool:
    return bool(error.validator == "pattern" and error.validator_value == DIGEST_PATTERN)


def validate_arguments(tool: Tool, arguments: object) -> dict[str, Any]:
    """The arguments, unchanged, when they satisfy `tool`'s contract.

    Raises ContractError INVALID_SCHEMA, or INVALID_DIGEST when the only fault is a digest's shape.
    """
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise _invalid()
    if _serialized_size(arguments) > MAX_ARGUMENT_BYTES:
        raise _invalid()
    floats = _check_text_and_numbers(arguments)
    errors = (
        []
        if not floats and _FAST_VALIDATORS[tool].is_valid(arguments)
        else list(_VALIDATORS[tool].iter_errors(arguments))
    )
    if errors:
        if all(_is_digest_shape_error(error) for error in errors):
            raise ContractError(ErrorCode.INVALID_DIGEST)
        raise _invalid()
    if tool is Tool.CAPTURE:
        check_capture_references(arguments["payload"], arguments["evidence"])
    return arguments


def check_capture_references(payload: Mapping[str, Any], evidence: Mapping[str, Any]) -> None:
    """The cross-references between tool arguments that a schema cannot express; raises INVALID_SCHEMA."""
    citation_ids = {citation["citation_id"] for citation in payload["citations"]}
    components = {component["component_id"]: component for component in payload["components"]}
    for component in payload["components"]:
        if not set(component["citation_ids"]) <= citation_ids:
            raise _invalid()
    primary = components.get(payload["primary_component_id"])
    if primary is None:
        raise _invalid()
    event_citation = payload["primary_event"]["citation_id"]
    if event_citation not in citation_ids or event_citation not in primary["citation_ids"]:
        raise _invalid()
    if not set(evidence["citation_ids"]) <= citation_ids:
        raise _invalid()
    valid_time = payload["valid_time"]
    if "t_end" in valid_time and valid_time["t_end"] < valid_time["t"]:
        raise _invalid()
