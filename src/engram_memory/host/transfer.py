"""Export a workspace's current memories, and import memories, through the agents' own tools.

Export reads each current record with `get` under a host read binding (host/reads.py), so it shows
exactly what an agent of the scope would and every read is audited. Import sends each memory through
`capture` and `request_admission` (Engine.import_memories, a commit per batch) under a host binding for
its purpose: the admission policy decides each one as it would an agent's, so nothing skips review.
Idempotency keys are digests of each memory's content, so importing the same file again changes nothing
and answers what the first run did.

The export line format (`engram-memory-export/1`) is one JSON object a line: the record id and scope it
came from, the memory as a capture payload, its trust class and provenance. Markdown notes (a folder of
`*.md` files) import as one memory each: the note's text is the memory, the file its citation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engram_memory.contract.payloads import Citation, one_source_payload
from engram_memory.contract.states import RecordState
from engram_memory.contract.tools import Tool
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.maintenance import RecordFilter
from engram_memory.host.language.catalogue import _
from engram_memory.host.reads import host_binding, read_record

EXPORT_FORMAT = "engram-memory-export/1"
IMPORT_AGENT = "engram-memory-import"
IMPORT_TOKEN_ID = "host-import"  # noqa: S105 - an id in the audit log, not a secret
IMPORT_BATCH = 250  # memories per shared commit
MAX_NOTE_BYTES = 32_000  # a note's text as one component; the contract caps a component's text
_PAYLOAD_FIELDS = (
    "purpose_ref",
    "valid_time",
    "components",
    "primary_component_id",
    "primary_event",
    "citations",
    "retention",
    "reconciliation",
)


class TransferError(Exception):
    """A line or note that cannot be imported, or a scope that cannot be exported: a one-line reason."""


# -- export ------------------------------------------------------------------------------------------


def export_lines(engine: Engine, tenant: str, workspace: str, *, read_by: str) -> Iterator[dict[str, Any]]:
    """Every current record of the scope, oldest first, as an export line."""
    rows = engine.records(
        RecordFilter(tenant=tenant, workspace=workspace, state=RecordState.ACCEPTED_CURRENT.value, limit=10**9)
    )
    for row in rows:
        record = read_record(engine, tenant, workspace, row.record_id, read_by=read_by)
        memory = {"schema_version": 2, **{name: record[name] for name in _PAYLOAD_FIELDS if name in record}}
        yield {
            "format": EXPORT_FORMAT,
            "record_id": record["record_id"],
            "tenant": tenant,
            "workspace": workspace,
            "memory": memory,
            "trust_class": record.get("trust_class"),
            "provenance": record.get("provenance"),
        }


def markdown_of(line: dict[str, Any]) -> str:
    """One record as a Markdown section: its components, then its citations."""
    memory = line["memory"]
    parts = [f"## {line['record_id']}", ""]
    for component in memory["components"]:
        parts.append(component["text"] if component["kind"] != "context" else f"> {component['text']}")
        parts.append("")
    for citation in memory["citations"]:
        locator = citation.get("locator") or {}
        parts.append(
            f"- {citation['citation_id']}: {citation['source_ref']} ({locator.get('scheme')}: {locator.get('value')})"
        )
    provenance = line.get("provenance") or {}
    parts.append(f"- captured by {provenance.get('principal', '?')} at {provenance.get('captured_at', '?')}")
    return "\n".join(parts) + "\n"


# -- import ------------------------------------------------------------------------------------------


@dataclass
class ImportReport:
    accepted: int = 0
    already: int = 0  # the same memory is current already (this import ran before, or an agent wrote it)
    pending: int = 0  # waiting for a human in the review queue
    rejected: int = 0
    refused: dict[str, int] = field(default_factory=dict)  # error code -> memories

    @property
    def total(self) -> int:
        return self.accepted + self.already + self.pending + self.rejected + sum(self.refused.values())


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def capture_of(memory: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Capture arguments for a memory, and its admission key: both digests of the memory itself."""
    if not isinstance(memory, dict) or not isinstance(memory.get("citations"), list) or not memory["citations"]:
        raise TransferError(_("a memory needs its payload with at least one citation"))
    content = json.dumps(memory, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
    digest = hashlib.sha256(content).hexdigest()
    citation_ids = [str(citation.get("citation_id")) for citation in memory["citations"] if isinstance(citation, dict)]
    evidence = {"evidence_ref": "evidence:import", "evidence_digest": "sha256:" + digest, "citation_ids": citation_ids}
    arguments = {"idempotency_key": f"import-capture-{digest[:48]}", "payload": memory, "evidence": evidence}
    return arguments, f"import-admit-{digest[:48]}"


def memories_of_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The memories of an export file (or of any file of capture payloads, one JSON object a line)."""
    with path.open(encoding="utf-8") as lines:
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError as exc:
                raise TransferError(_("line {number} of {path} is not JSON").format(number=number, path=path)) from exc
            memory = line.get("memory", line) if isinstance(line, dict) else None
            if not isinstance(memory, dict):
                raise TransferError(_("line {number} of {path} is not a memory").format(number=number, path=path))
            yield memory


def memories_of_notes(folder: Path, purpose: str) -> Iterator[dict[str, Any]]:
    """Each `*.md` note under the folder (sorted by path) as one memory citing its file."""
    for note in sorted(folder.rglob("*.md")):
        data = note.read_bytes()
        text = data.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        if len(text.encode()) > MAX_NOTE_BYTES:
            raise TransferError(
                _("{note} is over {max_note_bytes} bytes: split it into smaller notes").format(
                    note=note, max_note_bytes=MAX_NOTE_BYTES
                )
            )
        at_ms = int(note.stat().st_mtime * 1000)
        relative = note.relative_to(folder).as_posix()
        source = Citation("file", f"file:{relative}"[:512], "path", relative[:4096], _sha(data))
        yield one_source_payload(purpose, text, at_ms, source)


def import_memories(
    engine: Engine,
    tenant: str,
    workspace: str,
    memories: Sequence[dict[str, Any]],
    *,
    imported_by: str,
    progress: Callable[[int], None] = lambda _n: None,
) -> ImportReport:
    """Captures and asks admission for each memory, a shared commit per batch. Raises ContractError
    MUTATION_OUTCOME_UNKNOWN when a batch's commit fails (running the import again is safe)."""
    report = ImportReport()
    for start in range(0, len(memories), IMPORT_BATCH):
        batch = memories[start : start + IMPORT_BATCH]
        by_purpose: dict[str, list[tuple[dict[str, Any], str]]] = {}
        for memory in batch:
            by_purpose.setdefault(str(memory.get("purpose_ref", "")), []).append(capture_of(memory))
        for purpose, items in by_purpose.items():
            binding = host_binding(
                tenant,
                workspace,
                principal=imported_by,
                tools=frozenset({Tool.CAPTURE, Tool.REQUEST_ADMISSION}),
                purpose_ref=purpose or "purpose:import",
                token_id=IMPORT_TOKEN_ID,
                agent_id=IMPORT_AGENT,
                lifetime_ms=86_400_000,
            )
            for outcome in engine.import_memories(binding, items):
                _count(report, outcome.captured, outcome.admitted)
        progress(len(batch))
    engine.refresh_statistics()  # the searches after a large import are planned for its size
    return report


def _count(report: ImportReport, captured: dict[str, Any], admitted: dict[str, Any] | None) -> None:
    answer = admitted if admitted is not None else captured
    if not answer["ok"]:
        code = str(answer["error"]["code"])
        report.refused[code] = report.refused.get(code, 0) + 1
        return
    status = str(answer["output"]["value"].get("outcome", {}).get("status", "")) if admitted is not None else ""
    if status == "accepted":
        report.accepted += 1
    elif status == "duplicate_exact":
        report.already += 1
    elif status == "rejected":
        report.rejected += 1
    else:
        report.pending += 1
