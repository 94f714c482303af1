"""Enforces the advertised schemas on every call, plus what JSON Schema cannot say.

Order: size cap, text well-formedness (UTF-8, NFC), the schema with our `x-` keywords, then the
cross-references of a capture. Every failure is INVALID_SCHEMA, except a digest of the wrong shape in
otherwise valid arguments, which is INVALID_DIGEST; either names where and which rule (schema_faults.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from jsonschema import ValidationError

from engram_memory.contract.canonical import DIGEST_PATTERN
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.schema_faults import describe, reference_fault, schema_faults
from engram_memory.contract.schemas import MAX_ARGUMENT_BYTES
from engram_memory.contract.tools import Tool
from engram_memory.contract.validators import FAST_VALIDATORS, VALIDATORS, serialized_size, string_rule


class _Refused(Exception):
    """Validation failed; the caller words it."""


def _check_text_and_numbers(value: object) -> bool:
    """Every string (keys included) obeys `string_rule`; every number is finite. True when some number
    is a float."""
    floats = False
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if string_rule(item) is not None:
                raise _Refused
        elif isinstance(item, float):
            floats = True
            if not math.isfinite(item):
                raise _Refused
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return floats


def _is_digest_shape_error(error: ValidationError) -> bool:
    return bool(error.validator == "pattern" and error.validator_value == DIGEST_PATTERN)


def validate_arguments(tool: Tool, arguments: object) -> dict[str, Any]:
    """The arguments, unchanged, when they satisfy `tool`'s contract.

    Raises ContractError INVALID_SCHEMA, or INVALID_DIGEST when the only fault is a digest's shape; its
    message names the faults (pointer and rule, never a value).
    """
    if arguments is None:
        arguments = {}
    code = ErrorCode.INVALID_SCHEMA
    try:
        if not isinstance(arguments, dict):
            raise _Refused
        size = serialized_size(arguments)
        if size is None or size > MAX_ARGUMENT_BYTES:
            raise _Refused
        floats = _check_text_and_numbers(arguments)
        if floats or not FAST_VALIDATORS[tool].is_valid(arguments):
            errors = list(VALIDATORS[tool].iter_errors(arguments))
            if errors:
                if all(_is_digest_shape_error(error) for error in errors):
                    code = ErrorCode.INVALID_DIGEST
                raise _Refused
        if tool is Tool.CAPTURE:
            check_capture_references(arguments["payload"], arguments["evidence"])
    except _Refused:
        raise ContractError(code, detail=describe(schema_faults(tool, arguments)) or None) from None
    return arguments


def check_capture_references(payload: Mapping[str, Any], evidence: Mapping[str, Any]) -> None:
    """The cross-references between tool arguments that a schema cannot express; raises INVALID_SCHEMA."""
    fault = reference_fault(payload, evidence)
    if fault is not None:
        raise ContractError(ErrorCode.INVALID_SCHEMA, detail=fault.sentence())
