"""bench/locomo.py's protocol over every language of a multilingual split, lexical and hybrid, in one run.

Run on demand (not part of `make test`):

    .venv/bin/python bench/multilingual.py DATA_DIR [--english DIR [--mixed]] [--json] [--channels lexical,hybrid]

Every subfolder of DATA_DIR that holds LoCoMo-format files (`*.json`) is one language, named by its
folder; `--english` adds a LoCoMo folder as the row `en`. Cross-script: every folder whose text is
Traditional Chinese (found by reading it: OpenCC's t2s changes a noticeable share of its Han
characters) is run again with its questions converted to Simplified (OpenCC t2s) and its memories
left as they are, as the row `<folder>→simplified-questions`. Nothing about particular files is known
here. `--mixed` adds, for every language, the rows `en beside <folder>` (each English conversation in one
workspace with one of the language's files, asked the English questions) and `<folder> beside en` (the
reverse), to be read against the rows `en` and `<folder>`: what memories in another script cost a
search. Each row is one fresh home per channel setting; columns as bench/locomo.py (R@5, R@10, Hit@10,
search p50/p95 in process, ingest/s including embedding). Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import opencc

from harness import language_table
from locomo import Conversation, Question, load_folder, run_conversations

CHANNELS = ("lexical", "hybrid")
# A folder is Traditional Chinese when its memories are written in Han almost alone (Japanese mixes in
# kana, Korean is Hangul) and t2s changes at least this share of those Han characters: Simplified text
# changes by well under 1 %, Traditional text by 15-35 %.
TRADITIONAL_SHARE = 0.08
HAN_ALONE = 0.9  # Han characters among the memories' Han, Kana and Hangul characters
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KANA_HANGUL = re.compile("[\u3040-\u30ff\u1100-\u11ff\u3130-\u318f\uac00-\ud7a3]")


def language_folders(data_dir: Path) -> list[Path]:
    folders = sorted(path for path in data_dir.iterdir() if path.is_dir() and any(path.glob("*.json")))
    if not folders:
        raise SystemExit(f"no subfolder of {data_dir} holds *.json conversation files")
    return folders


def _simplifier() -> Any:
    return opencc.OpenCC("t2s")


def traditional_share(conversations: list[Conversation]) -> float:
    """The share of Han characters of the memories that t2s changes (0 when there are none, or when the
    memories are not written in Han alone)."""
    converter = _simplifier()
    changed = total = other = 0
    for conversation in conversations:
        for turn in conversation.turns:
            other += len(_KANA_HANGUL.findall(turn.text))
            original = _HAN.findall(turn.text)
            if not original:
                continue
            converted = _HAN.findall(converter.convert(turn.text))
            total += len(original)
            if len(converted) == len(original):
                changed += sum(a != b for a, b in zip(original, converted, strict=True))
            else:
                changed += abs(len(converted) - len(original))
    if not total or total / (total + other) < HAN_ALONE:
        return 0.0
    return changed / total


def simplified_questions(conversations: list[Conversation]) -> list[Conversation]:
    converter = _simplifier()
    return [
        replace(c, questions=[Question(converter.convert(q.text), q.evidence) for q in c.questions])
        for c in conversations
    ]


# A second part's sessions are renumbered past the first part's, so no turn takes the other part's turns
# as its context.
_SESSION_OFFSET = 1_000_000


def _tagged(conversation: Conversation, tag: str, offset: int) -> Conversation:
    """The conversation with every dia_id (and evidence) prefixed by `tag`, its sessions moved by `offset`."""
    return Conversation(
        conversation.name,
        [replace(turn, dia_id=f"{tag}:{turn.dia_id}", session=turn.session + offset) for turn in conversation.turns],
        [Question(q.text, frozenset(f"{tag}:{e}" for e in q.evidence)) for q in conversation.questions],
    )


def _shared(asked: Conversation, beside: Conversation, tags: tuple[str, str]) -> Conversation:
    """One workspace of both conversations' memories, asked `asked`'s questions only."""
    first, second = _tagged(asked, tags[0], 0), _tagged(beside, tags[1], _SESSION_OFFSET)
    return Conversation(f"{asked.name}+{beside.name}", first.turns + second.turns, first.questions)


def mixed(
    name: str, conversations: list[Conversation], english: list[Conversation]
) -> list[tuple[str, list[Conversation]]]:
    """Two rows of one language sharing its workspaces with English ones: each English conversation
    beside one of the language's (in turn), asked the English questions; each of the language's beside an
    English one, asked its own. Compare each with the row of its questions alone."""
    english_asked = [_shared(e, conversations[n % len(conversations)], ("en", name)) for n, e in enumerate(english)]
    other_asked = [_shared(c, english[n % len(english)], (name, "en")) for n, c in enumerate(conversations)]
    return [(f"en beside {name}", english_asked), (f"{name} beside en", other_asked)]


def run(data_dir: Path, english: Path | None, channels: list[str], *, mix: bool = False) -> list[dict[str, Any]]:
    datasets: list[tuple[str, list[Conversation]]] = []
    english_conversations = load_folder(english) if english is not None else []
    for folder in language_folders(data_dir):
        conversations = load_folder(folder)
        datasets.append((folder.name, conversations))
        if traditional_share(conversations) >= TRADITIONAL_SHARE:
            datasets.append((f"{folder.name}→simplified-questions", simplified_questions(conversations)))
        if mix and english_conversations:
            datasets.extend(mixed(folder.name, conversations, english_conversations))
    if english_conversations:
        datasets.append(("en", english_conversations))
    rows = []
    for name, conversations in datasets:
        for channel in channels:
            result = run_conversations(conversations, channel)
            rows.append({"language": name, "channels": channel, **result})
            print(json.dumps(rows[-1], ensure_ascii=False), file=sys.stderr, flush=True)
    return rows


KEYS = ["questions", "memories", "R@5", "R@10", "Hit@10", "search_p50_ms", "search_p95_ms", "ingest_per_s"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("data_dir", type=Path, help="a folder of language folders of LoCoMo-format files")
    parser.add_argument("--english", type=Path, help="a folder of LoCoMo-format files, reported as the row en")
    parser.add_argument("--json", action="store_true", help="print one JSON list instead of a table")
    parser.add_argument("--channels", default=",".join(CHANNELS), help="comma-separated: lexical, hybrid")
    parser.add_argument(
        "--mixed",
        action="store_true",
        help="with --english: also each language sharing its workspaces with English conversations",
    )
    options = parser.parse_args(argv)
    channels = [c for c in options.channels.split(",") if c]
    if not channels or any(c not in CHANNELS for c in channels):
        parser.error(f"--channels takes {', '.join(CHANNELS)}")
    if not options.data_dir.is_dir():
        parser.error(f"{options.data_dir} is not a folder")
    if options.english is not None and not options.english.is_dir():
        parser.error(f"{options.english} is not a folder")
    if options.mixed and options.english is None:
        parser.error("--mixed needs --english")
    rows = run(options.data_dir, options.english, channels, mix=options.mixed)
    print(json.dumps(rows, ensure_ascii=False) if options.json else "\n".join(language_table(rows, KEYS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
