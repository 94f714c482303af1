"""LoCoMo retrieval through the real engine: capture + admission of every turn, then one search per question.

Run on demand (not part of `make test`):

    .venv/bin/python bench/locomo.py DATA_DIR [--json] [--channels lexical|hybrid]

DATA_DIR is any folder of LoCoMo-format conversation files (`*.json`); nothing about particular files
is known here. The protocol is the model-free one of the data set's README: each conversation is its
own workspace; each turn is one memory whose primary component is "speaker: text" (with the image
caption when the turn shared one) and whose context component is the two turns before it in its
session, citing the turn's dia_id; each question of categories 1-4 is one search in its conversation's
workspace. R@k is the mean over questions of the share of evidence turns in the top k; Hit@k the
share of questions with at least one evidence turn in the top k. Latency is the engine's `handle`
call for the search, in process (query embedding included); ingest counts capture + admission until the
last vector is written (the indexer embeds beside the admissions; its time is in).
`ENGRAM_EMBEDDING_MODEL` picks the model for `--channels hybrid`. Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
import sys
import tempfile
import time
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engram_memory.host.compose import init_home, open_engine
from engram_memory.host.settings import HostPaths
from harness import bench_binding, value_of

PURPOSE = "purpose:conversation-memory"
SCORED_CATEGORIES = frozenset({1, 2, 3, 4})  # 5 is adversarial: left out of retrieval scores
KS = (5, 10)
CONTEXT_TURNS = 2  # turns before a turn, in its session, kept as its context component
_SESSION = re.compile(r"^session_(\d+)$")


@dataclass(frozen=True)
class Turn:
    session: int
    dia_id: str
    speaker: str
    text: str
    at_ms: int


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[str]


@dataclass(frozen=True)
class Conversation:
    name: str
    turns: list[Turn]
    questions: list[Question]


def _session_ms(raw: str | None, fallback: int) -> int:
    """The session's date ('1:56 pm on 8 May, 2023'), or the previous session's when it cannot be read."""
    if raw:
        for pattern in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"):
            try:
                return int(datetime.strptime(raw.strip(), pattern).replace(tzinfo=UTC).timestamp() * 1000)
            except ValueError:
                continue
    return fallback


def _nfc(value: object) -> str:
    """The contract takes NFC text only; the data set's files are not all NFC."""
    return unicodedata.normalize("NFC", str(value)).strip()


def load_conversation(path: Path) -> Conversation:
    data = json.loads(path.read_text(encoding="utf-8"))
    sessions = sorted((int(m.group(1)), key) for key in data if (m := _SESSION.match(key)))
    turns: list[Turn] = []
    at_ms = 1_600_000_000_000
    for number, key in sessions:
        at_ms = _session_ms(data.get(f"{key}_date_time"), at_ms)
        for n, turn in enumerate(data[key] or []):
            text = _nfc(turn.get("text", ""))
            caption = _nfc(turn.get("blip_caption") or "")
            if caption:
                text = f"{text} [shared an image: {caption}]" if text else f"[shared an image: {caption}]"
            if text:
                turns.append(Turn(number, str(turn["dia_id"]), _nfc(turn["speaker"]), text, at_ms + n * 1_000))
    questions = [
        Question(_nfc(qa["question"]), frozenset(str(e) for e in qa.get("evidence") or []))
        for qa in data.get("qa", [])
        if qa.get("category") in SCORED_CATEGORIES and qa.get("evidence")
    ]
    return Conversation(path.stem, turns, questions)


def load_folder(folder: Path) -> list[Conversation]:
    files = sorted(folder.glob("*.json"))
    if not files:
        raise SystemExit(f"no *.json conversation files in {folder}")
    return [load_conversation(path) for path in files]


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def capture_arguments(turn: Turn, before: list[Turn], key: str) -> dict[str, Any]:
    """The turn as a memory; the turns before it in its session (oldest first) as its context."""
    primary = f"{turn.speaker}: {turn.text}"
    components = [{"component_id": "turn", "kind": "evidence", "text": primary, "citation_ids": ["src"]}]
    if before:
        context = "\n".join(f"{earlier.speaker}: {earlier.text}" for earlier in before)
        components.append({"component_id": "before", "kind": "context", "text": context, "citation_ids": ["src"]})
    payload = {
        "schema_version": 2,
        "purpose_ref": PURPOSE,
        "valid_time": {"t": turn.at_ms},
        "components": components,
        "primary_component_id": "turn",
        "primary_event": {"at": turn.at_ms, "type_ref": "event:said", "citation_id": "src"},
        "citations": [
            {
                "citation_id": "src",
                "source_ref": "conversation:turn",
                "locator": {"scheme": "dialogue", "value": turn.dia_id},
                "content_digest": _sha(primary),
            }
        ],
    }
    evidence = {"evidence_ref": "evidence:transcript", "evidence_digest": _sha(primary), "citation_ids": ["src"]}
    return {"idempotency_key": key, "payload": payload, "evidence": evidence}


def ingest(engine: Any, binding: Any, conversation: Conversation, n: int) -> dict[str, list[str]]:
    """Captures and admits every turn of the conversation as the protocol says; record id -> the dia_ids it
    holds (a turn whose text a memory holds already is that memory: `duplicate_exact`). Ends when the last
    vector is written."""
    dia_of: dict[str, list[str]] = {}
    for t, turn in enumerate(conversation.turns):
        before = [
            earlier for earlier in conversation.turns[max(0, t - CONTEXT_TURNS) : t] if earlier.session == turn.session
        ]
        arguments = capture_arguments(turn, before, f"locomo-capture-{n:04d}-{t:06d}")
        captured = value_of(engine, binding, "engram_memory_capture", arguments)
        admit = {"candidate_id": captured["candidate_id"], "idempotency_key": f"locomo-admit-{n:04d}-{t:06d}"}
        outcome = value_of(engine, binding, "engram_memory_request_admission", admit)["outcome"]
        if outcome["status"] in ("accepted", "duplicate_exact"):
            dia_of.setdefault(outcome["record_id"], []).append(turn.dia_id)
    if engine.deps.indexer is not None:
        engine.deps.indexer.settle()
    return dia_of


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def run(folder: Path, channels: str) -> dict[str, Any]:
    return run_conversations(load_folder(folder), channels)


def run_conversations(
    conversations: list[Conversation], channels: str, per_question: list[dict[str, float]] | None = None
) -> dict[str, Any]:
    """The protocol over conversations already loaded (bench/multilingual.py converts some first);
    `per_question`, when given, receives each scored question's R@k and Hit@k in the order asked."""
    recall = {k: [] for k in KS}  # type: dict[int, list[float]]
    hits = {k: [] for k in KS}  # type: dict[int, list[float]]
    latencies: list[float] = []
    memories = 0
    ingest_s = 0.0
    with tempfile.TemporaryDirectory(prefix="engram-locomo-") as scratch:
        paths = HostPaths(home=Path(scratch) / "home")
        init_home(paths)
        with open_engine(paths, semantic=channels == "hybrid") as engine:
            if channels == "hybrid" and engine.deps.semantic is None:
                raise SystemExit("--channels hybrid needs the semantic extra: pip install '.[semantic]'")
            if engine.deps.semantic is not None:
                engine.deps.semantic.warm()  # loading the models is not ingest
            for n, conversation in enumerate(conversations):
                binding = bench_binding(paths, tenant="locomo", workspace=f"conversation-{n + 1}", purpose=PURPOSE)
                started = time.perf_counter()
                dia_of = ingest(engine, binding, conversation, n)
                ingest_s += time.perf_counter() - started
                memories += len(dia_of)
                for question in conversation.questions:
                    arguments = {"query": question.text, "purpose_ref": PURPOSE, "limit": max(KS)}
                    began = time.perf_counter()
                    value = value_of(engine, binding, "engram_memory_search", arguments)
                    latencies.append((time.perf_counter() - began) * 1000)
                    found = [dia_of.get(packet["record"]["record_id"], []) for packet in value["records"]]
                    for k in KS:
                        top = {dia for dias in found[:k] for dia in dias}
                        recall[k].append(len(question.evidence & top) / len(question.evidence))
                        hits[k].append(1.0 if question.evidence & top else 0.0)
                    if per_question is not None:
                        per_question.append(
                            {f"{name}@{k}": got[k][-1] for name, got in (("R", recall), ("Hit", hits)) for k in KS}
                        )
    questions = len(latencies)
    result: dict[str, Any] = {"questions": questions, "memories": memories}
    for k in KS:
        result[f"R@{k}"] = round(100 * statistics.fmean(recall[k]), 1) if questions else 0.0
    for k in KS:
        result[f"Hit@{k}"] = round(100 * statistics.fmean(hits[k]), 1) if questions else 0.0
    result["search_p50_ms"] = round(_percentile(latencies, 0.50), 2) if latencies else 0.0
    result["search_p95_ms"] = round(_percentile(latencies, 0.95), 2) if latencies else 0.0
    result["ingest_per_s"] = round(memories / ingest_s, 1) if ingest_s else 0.0
    return result


def _table(results: dict[str, dict[str, Any]]) -> list[str]:
    keys = ["questions", "memories", "R@5", "R@10", "Hit@5", "Hit@10", "search_p50_ms", "search_p95_ms", "ingest_per_s"]
    lines = ["| channels | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for channels, result in results.items():
        lines.append(f"| {channels} | " + " | ".join(str(result[key]) for key in keys) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--channels", choices=["lexical", "hybrid"], default="hybrid")
    options = parser.parse_args(argv)
    if not options.data_dir.is_dir():
        parser.error(f"{options.data_dir} is not a folder")
    result = run(options.data_dir, options.channels)
    if options.json:
        print(json.dumps(result))
    else:
        print("\n".join(_table({options.channels: result})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
