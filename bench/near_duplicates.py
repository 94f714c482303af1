"""The near-duplicate rule on real conversations: how many turns it sends to a person (issue 20).

Every turn of every LoCoMo-format file in DATA_DIR is captured and admitted as bench/locomo.py does (one
workspace per conversation), under a policy with `[near_duplicates] action = "review"` at the given
threshold (default: the documented 0.9, min_terms 4) and mode `auto`. Prints how many turns were
accepted, routed to review (near_duplicate), rejected by another rule, and lost without a decision on
record (must be 0: the rule never drops anything).

    .venv/bin/python bench/near_duplicates.py DATA_DIR [--threshold X] [--min-terms N] [--semantic COSINE] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

from engram_memory.host.compose import init_home, open_engine
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML
from engram_memory.host.settings import HostPaths
from harness import bench_binding, value_of
from locomo import CONTEXT_TURNS, PURPOSE, capture_arguments, load_folder


def run(folder: Path, threshold: float, min_terms: int, semantic: float | None = None) -> dict[str, object]:
    conversations = load_folder(folder)
    statuses: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    turns = 0
    with tempfile.TemporaryDirectory(prefix="engram-near-") as scratch:
        paths = HostPaths(home=Path(scratch) / "home")
        init_home(paths)
        policy = DEFAULT_POLICY_TOML.replace('action = "accept"', 'action = "review"')
        policy = policy.replace("threshold = 0.9", f"threshold = {threshold}")
        policy = policy.replace("min_terms = 4", f"min_terms = {min_terms}")
        if semantic is not None:
            policy = policy.replace("semantic_threshold = 0.93", f"semantic_threshold = {semantic}")
        paths.policy.write_text(policy, encoding="utf-8")
        with open_engine(paths, semantic=semantic is not None) as engine:
            if semantic is not None and engine.deps.semantic is None:
                raise SystemExit("--semantic needs the semantic extra: pip install '.[semantic]'")
            for n, conversation in enumerate(conversations):
                binding = bench_binding(paths, tenant="locomo", workspace=f"conversation-{n + 1}", purpose=PURPOSE)
                for t, turn in enumerate(conversation.turns):
                    before = [e for e in conversation.turns[max(0, t - CONTEXT_TURNS) : t] if e.session == turn.session]
                    arguments = capture_arguments(turn, before, f"near-capture-{n:04d}-{t:06d}")
                    captured = value_of(engine, binding, "engram_memory_capture", arguments)
                    admit = {"candidate_id": captured["candidate_id"], "idempotency_key": f"near-admit-{n:04d}-{t:06d}"}
                    outcome = value_of(engine, binding, "engram_memory_request_admission", admit)["outcome"]
                    statuses[outcome["status"]] += 1
                    turns += 1
            for row in engine.review_queue(limit=100_000):
                reasons.update(row.review_reasons)
    decided = sum(statuses.values())
    routed = statuses["pending_adjudication"]
    return {
        "conversations": len(conversations),
        "turns": turns,
        "threshold": threshold,
        "min_terms": min_terms,
        "semantic_threshold": semantic,
        "accepted": statuses["accepted"],
        "duplicate_exact": statuses["duplicate_exact"],
        "routed_to_review": routed,
        "routed_pct": round(100 * routed / turns, 2) if turns else 0.0,
        "routed_near_duplicate": reasons["near_duplicate"],
        "rejected": statuses["rejected"],
        "dropped": turns - decided,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--min-terms", type=int, default=4)
    parser.add_argument(
        "--semantic",
        type=float,
        metavar="COSINE",
        help="also compare embeddings (the semantic extra) at this cosine (the documented default is 0.93)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.data, args.threshold, args.min_terms, args.semantic)
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
