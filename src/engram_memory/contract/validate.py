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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
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


def _string_rule(text: str) -> str | None:
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


def _check_text_and_numbers(value: object) -> bool:
    """Every string (keys included) obeys `_string_rule`; every number is finite. True when some number
    is a float."""
    floats = False
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _string_rule(item) is not None:
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
    if _reference_fault(payload, evidence) is not None:
        raise _invalid()


def _reference_fault(payload: Mapping[str, Any], evidence: Mapping[str, Any]) -> str | None:
    """The JSON pointer of the first broken cross-reference of a schema-valid capture, or None."""
    citation_ids = {citation["citation_id"] for citation in payload["citations"]}
    components = {component["component_id"]: component for component in payload["components"]}
    for n, component in enumerate(payload["components"]):
        for m, citation_id in enumerate(component["citation_ids"]):
            if citation_id not in citation_ids:
                return f"/payload/components/{n}/citation_ids/{m}"
    primary = components.get(payload["primary_component_id"])
    if primary is None:
        return "/payload/primary_component_id"
    event_citation = payload["primary_event"]["citation_id"]
    if event_citation not in citation_ids or event_citation not in primary["citation_ids"]:
        return "/payload/primary_event/citation_id"
    for m, citation_id in enumerate(evidence["citation_ids"]):
        if citation_id not in citation_ids:
            return f"/evidence/citation_ids/{m}"
    valid_time = payload["valid_time"]
    if "t_end" in valid_time and valid_time["t_end"] < valid_time["t"]:
        return "/payload/valid_time/t_end"
    return None


# -- where a refused call went wrong, for the agent ---------------------------------------------------

MAX_POINTER_CHARS = 256


@dataclass(frozen=True)
class SchemaFault:
    """Where arguments broke the contract: an RFC 6901 pointer into them and the rule that failed (a
    JSON Schema keyword such as `required` or `maxLength`, `utf8-bytes`, `nfc`, `no-nul`, `finite`,
    `max-bytes`, or `reference` for a capture's cross-references). The error message stays constant;
    this travels beside the envelope (the MCP result's `_meta`), so an agent can fix the field."""

    pointer: str
    rule: str


def _pointer(path: Iterable[object]) -> str:
    escaped = (str(part).replace("~", "~0").replace("/", "~1") for part in path)
    pointer = "".join("/" + part for part in escaped)
    return pointer if len(pointer) <= MAX_POINTER_CHARS else pointer[: MAX_POINTER_CHARS - 1] + "…"


def _text_or_number_fault(value: object) -> SchemaFault | None:
    stack: list[tuple[tuple[object, ...], object]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            rule = _string_rule(item)
            if rule is not None:
                return SchemaFault(_pointer(path), rule)
        elif isinstance(item, float) and not math.isfinite(item):
            return SchemaFault(_pointer(path), "finite")
        elif isinstance(item, dict):
            for key, child in item.items():
                rule = _string_rule(key) if isinstance(key, str) else None
                if rule is not None:
                    return SchemaFault(_pointer(path), rule)  # the key itself has no pointer of its own
                stack.append(((*path, key), child))
        elif isinstance(item, list):
            stack.extend(((*path, n), child) for n, child in enumerate(item))
    return None


def _keyword_fault(error: ValidationError) -> SchemaFault:
    path = list(error.absolute_path)
    rule = str(error.validator)
    instance, wanted = error.instance, error.validator_value
    if rule == "required" and isinstance(instance, dict) and isinstance(wanted, list):
        path += [name for name in wanted if name not in instance][:1]
    elif rule == "additionalProperties" and isinstance(instance, dict):
        known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        path += [name for name in instance if name not in known][:1]
    return SchemaFault(_pointer(path), rule.removeprefix("x-"))


def schema_fault(tool: Tool, arguments: object) -> SchemaFault | None:
    """Where `arguments` break `tool`'s contract (text and numbers, size, schema, cross-references); None
    when they do not. For answers that are already INVALID_SCHEMA or INVALID_DIGEST: it repeats the
    validation, so it is not for the hot path."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return SchemaFault("", "type")
    fault = _text_or_number_fault(arguments)
    if fault is not None:
        return fault
    size = _serialized_size_or_none(arguments)
    if size is None:
        return SchemaFault("", "type")
    if size > MAX_ARGUMENT_BYTES:
        return SchemaFault("", "max-bytes")
    errors = list(_VALIDATORS[tool].iter_errors(arguments))
    if errors:
        return _keyword_fault(min(errors, key=_earliest))
    pointer = _reference_fault(arguments["payload"], arguments["evidence"]) if tool is Tool.CAPTURE else None
    return None if pointer is None else SchemaFault(pointer, "reference")


def _serialized_size_or_none(arguments: Mapping[str, Any]) -> int | None:
    try:
        return _serialized_size(arguments)
    except ContractError:
        return None


def _earliest(error: ValidationError) -> tuple[int, list[str]]:
    """The error an agent fixes first: the shallowest, then in document order."""
    path = [str(part) for part in error.absolute_path]
    return (len(path), path)
