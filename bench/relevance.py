"""Relevance, not just rank: off-topic searches answered with no records, beside R@10 on on-topic ones.

Run on demand (not part of `make test`):

    .venv/bin/python bench/relevance.py --workspaces LANG=DIR ... --off-topic DIR [--json] [--channels hybrid]

Each `--workspaces LANG=DIR` names a folder of LoCoMo-format files written in one language (e.g.
`en=shared/data/locomo-dev`, `ko=shared/data/multilingual-dev/ko`): each file is one workspace, built by
bench/locomo.py's protocol, asked its own questions (R@10, Hit@10 as bench/locomo.py scores them). The
off-topic searches are the questions of the files in `--off-topic` (another data set) written in the
row's language (as engine/recall/languages.py reads the question's script), dealt round-robin over the
row's workspaces, each asked once: a workspace knows nothing about them, so the right answer is no
records. `off_topic_empty` is the share of them answered with an empty list; `other_languages_empty` the
same for up to 60 off-topic questions in each of the other rows' languages (an unrelated question in
another language than the workspace's). Nothing about particular files is known here. Results:
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from engram_memory.engine.recall.languages import language_of
from engram_memory.host.compose import init_home, open_engine
from engram_memory.host.settings import HostPaths
from harness import bench_binding, language_table, value_of
from locomo import PURPOSE, Conversation, ingest, load_conversation, load_folder

K = 10


def off_topic_questions(folder: Path, language: str) -> list[str]:
    """Every question of the folder's files written in `language`, in file order (categories ignored:
    every question is off-topic for another data set's workspace)."""
    found = []
    for path in sorted(folder.glob("*.json")):
        for qa in json.loads(path.read_text(encoding="utf-8")).get("qa", []):
            text = str(qa.get("question", "")).strip()
            if text and language_of(text) == language:
                found.append(text)
    return found


OTHER_LANGUAGE_QUESTIONS = 60


def run_language(
    language: str, conversations: list[Conversation], off_topic: list[str], channels: str, elsewhere: list[str]
) -> dict[str, Any]:
    recall: list[float] = []
    hits: list[float] = []
    empty: list[float] = []
    returned: list[int] = []
    across: list[float] = []
    with tempfile.TemporaryDirectory(prefix="engram-relevance-") as scratch:
        paths = HostPaths(home=Path(scratch) / "home")
        init_home(paths)
        with open_engine(paths, semantic=channels == "hybrid") as engine:
            if channels == "hybrid" and engine.deps.semantic is None:
                raise SystemExit("--channels hybrid needs the semantic extra: pip install '.[semantic]'")
            for n, conversation in enumerate(conversations):
                binding = bench_binding(paths, tenant="relevance", workspace=f"{language}-{n + 1}", purpose=PURPOSE)
                dia_of = ingest(engine, binding, conversation, n)

                def ask(query: str, binding: Any = binding) -> list[dict[str, Any]]:
                    arguments = {"query": query, "purpose_ref": PURPOSE, "limit": K}
                    records: list[dict[str, Any]] = value_of(engine, binding, "engram_memory_search", arguments)[
                        "records"
                    ]
                    return records

                for question in conversation.questions:
                    found = {
                        dia for packet in ask(question.text) for dia in dia_of.get(packet["record"]["record_id"], [])
                    }
                    recall.append(len(question.evidence & found) / len(question.evidence))
                    hits.append(1.0 if question.evidence & found else 0.0)
                for query in off_topic[n :: len(conversations)]:
                    records = ask(query)
                    empty.append(0.0 if records else 1.0)
                    returned.append(len(records))
                for query in elsewhere[n :: len(conversations)]:
                    across.append(0.0 if ask(query) else 1.0)
    return {
        "language": language,
        "channels": channels,
        "workspaces": len(conversations),
        "questions": len(recall),
        f"R@{K}": round(100 * statistics.fmean(recall), 1) if recall else 0.0,
        f"Hit@{K}": round(100 * statistics.fmean(hits), 1) if hits else 0.0,
        "off_topic": len(empty),
        "off_topic_empty": round(100 * statistics.fmean(empty), 1) if empty else 0.0,
        "off_topic_mean_records": round(statistics.fmean(returned), 2) if returned else 0.0,
        "other_languages": len(across),
        "other_languages_empty": round(100 * statistics.fmean(across), 1) if across else 0.0,
    }


def _workspaces(value: str) -> tuple[str, Path]:
    language, _, folder = value.partition("=")
    if not language or not folder:
        raise argparse.ArgumentTypeError("--workspaces takes LANG=DIR")
    return language, Path(folder)


KEYS = [
    "workspaces",
    "questions",
    f"R@{K}",
    f"Hit@{K}",
    "off_topic",
    "off_topic_empty",
    "off_topic_mean_records",
    "other_languages",
    "other_languages_empty",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workspaces", type=_workspaces, action="append", required=True, help="LANG=DIR, repeatable")
    parser.add_argument("--off-topic", type=Path, required=True, help="a folder of another data set's files")
    parser.add_argument("--channels", default="hybrid", choices=("lexical", "hybrid"))
    parser.add_argument("--json", action="store_true", help="print one JSON list instead of a table")
    options = parser.parse_args(argv)
    rows = []
    languages = [language for language, _ in options.workspaces]
    for language, folder in options.workspaces:
        conversations = load_folder(folder) if folder.is_dir() else [load_conversation(folder)]
        questions = off_topic_questions(options.off_topic, language)
        elsewhere = [
            question
            for other in languages
            if other != language
            for question in off_topic_questions(options.off_topic, other)[:OTHER_LANGUAGE_QUESTIONS]
        ]
        rows.append(run_language(language, conversations, questions, options.channels, elsewhere))
        print(json.dumps(rows[-1], ensure_ascii=False), file=sys.stderr, flush=True)
    print(json.dumps(rows, ensure_ascii=False) if options.json else "\n".join(language_table(rows, KEYS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
