"""Where refused arguments broke the contract, in words an agent can act on.

An LLM agent sees only the text of an answer, so a refusal must say where (an RFC 6901 pointer into the
agent's own arguments) and which rule (in plain words). The words are fixed per rule and place: they
quote the schema (bounds, allowed names, enums), never a value the agent sent, so nothing of the
caller's content or the host's state is echoed (an unknown property is placed at its object,
unnamed). Finding faults repeats the validation: error path only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from jsonschema import ValidationError

from engram_memory.contract.canonical import DIGEST_PATTERN, MAX_SAFE_INTEGER
from engram_memory.contract.ids import RECORD_ID_PATTERN
from engram_memory.contract.instants import INSTANT_PATTERN
from engram_memory.contract.schemas import MAX_ARGUMENT_BYTES, UTF8_BYTES, schema_for_validation
from engram_memory.contract.tools import Tool
from engram_memory.contract.validators import VALIDATORS, serialized_size, string_rule

MAX_POINTER_CHARS = 256
# How many faults one answer names: enough to fix a call in one round, few enough to stay short.
MAX_FAULTS = 3

MILLISECONDS = "epoch milliseconds, a safe integer"
TIME_POINTERS = frozenset({"/payload/valid_time/t", "/payload/valid_time/t_end", "/payload/primary_event/at"})
INSTANT_WORDS = "an instant written YYYY-MM-DDTHH:mm:ss.sssZ (UTC, three fraction digits, a real date)"
_PATTERN_WORDS = MappingProxyType(
    {
        DIGEST_PATTERN: "'sha256:' then 64 lowercase hex digits (a SHA-256 of the content)",
        RECORD_ID_PATTERN: "a record_id copied verbatim from a search or get answer ('mem_' then a-z and 2-7)",
        INSTANT_PATTERN: INSTANT_WORDS,
    }
)
_TYPE_WORDS = MappingProxyType(
    {
        "string": "a string",
        "integer": "an integer (not a string, not a fraction)",
        "array": "a list",
        "object": "an object",
        "number": "a number",
        "boolean": "true or false",
    }
)
_TEXT_WORDS = MappingProxyType(
    {
        "utf-8": "text must be valid UTF-8 (no lone surrogates)",
        "no-nul": "text must not contain the character U+0000",
        "nfc": "text must be in Unicode normalisation form NFC: normalise it and send it again",
        "finite": "numbers must be finite",
    }
)


@dataclass(frozen=True)
class SchemaFault:
    """One place where arguments broke the contract: the pointer, the rule (a JSON Schema keyword such as
    `required` or `maxLength`, `utf8-bytes`, `nfc`, `no-nul`, `utf-8`, `finite`, `max-bytes`, `reference`,
    or `time` for an implausible instant) and the rule in plain words for the agent."""

    pointer: str
    rule: str
    words: str = field(default="", compare=False)

    def sentence(self) -> str:
        where = self.pointer or "the top level"
        return f"At {where}: {self.words}."


def describe(faults: Iterable[SchemaFault]) -> str:
    return " ".join(fault.sentence() for fault in faults)


def pointer_of(path: Iterable[object]) -> str:
    escaped = (str(part).replace("~", "~0").replace("/", "~1") for part in path)
    pointer = "".join("/" + part for part in escaped)
    return pointer if len(pointer) <= MAX_POINTER_CHARS else pointer[: MAX_POINTER_CHARS - 1] + "…"


def schema_faults(tool: Tool, arguments: object) -> list[SchemaFault]:
    """Where `arguments` break `tool`'s contract (text and numbers, size, schema, cross-references), the
    first an agent would fix first; empty when they do not."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return [SchemaFault("", "type", "the arguments must be a JSON object")]
    text = _text_or_number_fault(arguments)
    if text is not None:
        return [text]
    errors = sorted(VALIDATORS[tool].iter_errors(arguments), key=_earliest)
    faults = _distinct(_keyword_fault(tool, error) for error in errors)[:MAX_FAULTS]
    if not _fits(arguments):
        faults = [*faults, _too_large()][:MAX_FAULTS]
    if faults:
        return faults
    reference = reference_fault(arguments["payload"], arguments["evidence"]) if tool is Tool.CAPTURE else None
    return [] if reference is None else [reference]


def schema_fault(tool: Tool, arguments: object) -> SchemaFault | None:
    faults = schema_faults(tool, arguments)
    return faults[0] if faults else None


def _too_large() -> SchemaFault:
    return SchemaFault(
        "",
        "max-bytes",
        f"the whole arguments object is at most {MAX_ARGUMENT_BYTES:,} UTF-8 bytes: store less text per call",
    )


def _fits(arguments: Mapping[str, Any]) -> bool:
    size = serialized_size(arguments)
    return size is None or size <= MAX_ARGUMENT_BYTES  # not JSON at all: the type and text rules name it


def _distinct(faults: Iterable[SchemaFault]) -> list[SchemaFault]:
    seen: set[str] = set()
    kept = []
    for fault in faults:
        if fault.pointer not in seen:
            seen.add(fault.pointer)
            kept.append(fault)
    return kept


_REFERENCE_WORDS = MappingProxyType(
    {
        "component": "names no citation_id of /payload/citations",
        "primary": "names no component_id of /payload/components",
        "event": "must be a citation_id of /payload/citations that the primary component also lists",
        "evidence": "names no citation_id of /payload/citations",
        "t_end": "must not be before /payload/valid_time/t",
    }
)


def reference_fault(payload: Mapping[str, Any], evidence: Mapping[str, Any]) -> SchemaFault | None:
    """The first broken cross-reference of a schema-valid capture, or None."""
    citation_ids = {citation["citation_id"] for citation in payload["citations"]}
    components = {component["component_id"]: component for component in payload["components"]}
    for n, component in enumerate(payload["components"]):
        for m, citation_id in enumerate(component["citation_ids"]):
            if citation_id not in citation_ids:
                return _reference(f"/payload/components/{n}/citation_ids/{m}", "component")
    primary = components.get(payload["primary_component_id"])
    if primary is None:
        return _reference("/payload/primary_component_id", "primary")
    event_citation = payload["primary_event"]["citation_id"]
    if event_citation not in citation_ids or event_citation not in primary["citation_ids"]:
        return _reference("/payload/primary_event/citation_id", "event")
    for m, citation_id in enumerate(evidence["citation_ids"]):
        if citation_id not in citation_ids:
            return _reference(f"/evidence/citation_ids/{m}", "evidence")
    valid_time = payload["valid_time"]
    if "t_end" in valid_time and valid_time["t_end"] < valid_time["t"]:
        return _reference("/payload/valid_time/t_end", "t_end")
    return None


def _reference(pointer: str, kind: str) -> SchemaFault:
    return SchemaFault(pointer, "reference", _REFERENCE_WORDS[kind])


def _text_or_number_fault(value: object) -> SchemaFault | None:
    stack: list[tuple[tuple[object, ...], object]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            rule = string_rule(item)
            if rule is not None:
                return SchemaFault(pointer_of(path), rule, _TEXT_WORDS[rule])
        elif isinstance(item, float) and not math.isfinite(item):
            return SchemaFault(pointer_of(path), "finite", _TEXT_WORDS["finite"])
        elif isinstance(item, dict):
            for key, child in item.items():
                rule = string_rule(key) if isinstance(key, str) else None
                if rule is not None:  # the key itself has no pointer of its own
                    return SchemaFault(pointer_of(path), rule, "a property name breaks the rule: " + _TEXT_WORDS[rule])
                stack.append(((*path, key), child))
        elif isinstance(item, list):
            stack.extend(((*path, n), child) for n, child in enumerate(item))
    return None


def _keyword_fault(tool: Tool, error: ValidationError) -> SchemaFault:
    path = list(error.absolute_path)
    rule = str(error.validator).removeprefix("x-")
    instance, wanted = error.instance, error.validator_value
    schema = error.schema if isinstance(error.schema, dict) else {}
    if rule == "required" and isinstance(instance, dict) and isinstance(wanted, list):
        path += [name for name in wanted if name not in instance][:1]
    elif rule == "unique-by" and isinstance(instance, list):
        path += _first_repeat(instance, str(wanted))
    pointer = pointer_of(path)
    optional = rule == "type" and instance is None and _optional(tool, path)
    return SchemaFault(pointer, rule, _words(rule, _Broken(pointer, instance, wanted, schema, optional)))


def _first_repeat(items: list[Any], key: str) -> list[object]:
    seen: set[object] = set()
    for n, item in enumerate(items):
        if isinstance(item, dict) and isinstance(item.get(key), str):
            if item[key] in seen:
                return [n, key]
            seen.add(item[key])
    return []


@dataclass(frozen=True)
class _Broken:
    """One failed keyword as the words need it: where, what was there, what the schema wanted."""

    pointer: str
    instance: Any
    wanted: Any
    schema: Mapping[str, Any]
    optional: bool

    @property
    def name(self) -> str:
        return self.pointer.rsplit("/", 1)[-1]


def _required(broken: _Broken) -> str:
    missing = broken.schema.get("properties", {}).get(broken.name, {})
    shape = MILLISECONDS if broken.pointer in TIME_POINTERS else _shape_words(missing)
    return "required, missing" + (": " + shape if shape else "")


def _integer_range(broken: _Broken) -> str:
    low, high = broken.schema.get("minimum"), broken.schema.get("maximum")
    if low == -MAX_SAFE_INTEGER and high == MAX_SAFE_INTEGER:
        return "a safe integer (at most 2^53 - 1 either side of zero)"
    return f"an integer from {low:,} to {high:,}"


def _type_words(broken: _Broken) -> str:
    expected = _TYPE_WORDS.get(str(broken.wanted), str(broken.wanted))
    if broken.instance is not None:
        return "must be " + expected
    return "null is not allowed: " + ("leave this optional field out" if broken.optional else "give " + expected)


def _list_bounds(node: Mapping[str, Any]) -> str:
    return f"a list of {node.get('minItems', 0):,} to {node.get('maxItems', 0):,} items"


def _byte_bounds(bounds: list[int]) -> str:
    return f"a string of {bounds[0]:,} to {bounds[1]:,} UTF-8 bytes"


def _options(options: list[Any]) -> str:
    return "one of " + ", ".join(json.dumps(option) for option in options)


_SPLIT = MappingProxyType({"text": " (split longer text into several components or memories)"})
_RULE_WORDS: Mapping[str, Callable[[_Broken], str]] = MappingProxyType(
    {
        "required": _required,
        "additionalProperties": lambda b: (
            f"holds a property it does not have: allowed are {', '.join(b.schema.get('properties', {}))}; "
            "leave out any other"
        ),
        "type": _type_words,
        "const": lambda b: "must be " + json.dumps(b.wanted),
        "enum": lambda b: _options(b.wanted),
        "pattern": lambda b: _PATTERN_WORDS.get(b.wanted, "does not match its pattern"),
        "format": lambda b: INSTANT_WORDS,
        "minimum": _integer_range,
        "maximum": _integer_range,
        "minItems": lambda b: _list_bounds(b.schema),
        "maxItems": lambda b: _list_bounds(b.schema),
        "uniqueItems": lambda b: "each item at most once",
        "utf8-bytes": lambda b: _byte_bounds(b.wanted) + _SPLIT.get(b.name, ""),
        "unique-by": lambda b: f"each {b.wanted} must be unique within its list",
        "sorted": lambda b: "sorted in ascending order (by code point), each item once",
        "maxLength": lambda b: f"at most {b.wanted} characters",
    }
)


def _words(rule: str, broken: _Broken) -> str:
    if broken.pointer in TIME_POINTERS and rule in ("type", "minimum", "maximum"):
        why = "null is not allowed" if broken.instance is None else "not seconds, not a string"
        return f"{MILLISECONDS} ({why})"
    words = _RULE_WORDS.get(rule)
    return f"breaks the schema's '{rule}' rule" if words is None else words(broken)


def _shape_words(node: Mapping[str, Any]) -> str:
    """What a value of the schema `node` looks like, from its type and bounds."""
    kind = node.get("type")
    shapes: tuple[tuple[bool, Callable[[], str]], ...] = (
        (UTF8_BYTES in node, lambda: _byte_bounds(node[UTF8_BYTES])),
        ("pattern" in node, lambda: _PATTERN_WORDS.get(node["pattern"], "a string")),
        (kind == "array", lambda: _list_bounds(node)),
        (kind == "object", lambda: "an object with " + ", ".join(node.get("required", []))),
        ("const" in node, lambda: json.dumps(node["const"])),
        ("enum" in node, lambda: _options(node["enum"])),
    )
    return next((shape() for holds, shape in shapes if holds), _TYPE_WORDS.get(str(kind), ""))


def _optional(tool: Tool, path: list[object]) -> bool:
    """Whether the property at `path` may be left out (its object's schema does not require it)."""
    if not path or not isinstance(path[-1], str):
        return False
    node: Any = schema_for_validation(tool)
    for part in path[:-1]:
        node = node.get("items", {}) if isinstance(part, int) else node.get("properties", {}).get(part, {})
    return path[-1] not in node.get("required", [])


def _earliest(error: ValidationError) -> tuple[int, list[str]]:
    """The error an agent fixes first: the shallowest, then in document order."""
    path = [str(part) for part in error.absolute_path]
    return (len(path), path)
