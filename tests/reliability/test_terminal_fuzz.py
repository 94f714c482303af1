"""Agent text never reaches a host terminal raw (issue 14), fuzzed across every host command that shows it.

Random hostile strings (ESC and OSC sequences, C0 and C1 controls, DEL, carriage returns, bidi
overrides and isolates, zero-width and tag characters, line and paragraph separators, NEL, a forged
listing line) mixed with text in four languages go wherever an agent's words can reach the host:
component text, citation source refs, reason refs of withdraw and forget, and the names of tools
that do not exist (the audit log keeps them). The home reviews every admission, so a person reads
each candidate. Then every command that shows them runs, as text and as JSON: `review list|show`,
`confirmations list`, `records list|show`, `audit export`, `stats`, `verify`. No output may hold a
character that is not plain text (anything in Unicode's Cc, Cf, Zl, Zp, Cs but a line break and a tab).
"""

from __future__ import annotations

import contextlib
import random
import re
import unicodedata
from pathlib import Path

from typer.testing import CliRunner

from engram_memory.contract.errors import ProtocolFault
from engram_memory.host.cli.app import app
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML
from tests.reliability.scale import amount, report
from tests.support.homes import bind, engine_for, make_home
from tests.support.payloads import capture_args, unique_key

SEED = 1421
RECORD_ID = re.compile(r"mem_[a-z2-7]{26}")
UNSAFE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
HOSTILE = [
    "\x1b[2J",
    "\x1b[1A\x1b[2K",
    "\x1b]0;approved\x07",
    "\x1b]8;;http://x\x1b\\",
    "\r",
    "\x08",
    "\x7f",
    "\x85",
    "\x9b31m",
    "\u202e",
    "\u2066",
    "\u200b",
    "\u200d",
    "\ufeff",
    "\U000e0041",
    "\u2028",
    "\u2029",
    "\x0b",
    "\x0c",
    "\n",
    "\t",
    "\nconf_aaaaaaaaaaaaaaaa  requested  engram_memory_forget mem_fake",
]
PLAIN = ["approve", "배포 승인", "部署审批", "部署審批", "デプロイ承認", "ok", " ", "ticket:OPS-7"]


def _hostile(rng: random.Random) -> str:
    parts = [rng.choice(PLAIN)]
    for _ in range(rng.randint(1, 6)):
        parts.append(rng.choice(HOSTILE if rng.random() < 0.6 else PLAIN))
    return "".join(parts)


def _unsafe(text: str) -> list[str]:
    return [ch for ch in text if unicodedata.category(ch) in UNSAFE and ch not in "\n\t"]


def test_no_host_command_shows_an_agent_control_character(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    paths = make_home(tmp_path / "home")
    paths.policy.write_text(DEFAULT_POLICY_TOML.replace('mode = "auto"', 'mode = "review"'), encoding="utf-8")
    binding = bind(paths).binding
    texts = amount(12, 240)
    stored = refused = 0
    reviewed: list[str] = []
    runner = CliRunner()

    def run(*args: str) -> str:
        done = runner.invoke(app, [*args, "--home", str(paths.home)], catch_exceptions=False)
        assert done.exit_code == 0, (args, done.output)
        return done.output

    with engine_for(paths) as engine:
        for number in range(texts):
            text, source, reason = _hostile(rng), _hostile(rng), _hostile(rng)
            captured = engine.handle(binding, "engram_memory_capture", capture_args(text, source_ref=source))
            if not captured["ok"]:
                refused += 1  # the contract refused it (U+0000-free but, say, not NFC): nothing stored
                continue
            stored += 1
            candidate = captured["output"]["value"]["candidate_id"]
            if number % 3 == 0:
                withdraw = {"candidate_id": candidate, "idempotency_key": unique_key("w"), "reason_ref": reason}
                engine.handle(binding, "engram_memory_withdraw", withdraw)  # gated: waits in confirmations
                continue
            admit = {"candidate_id": candidate, "idempotency_key": unique_key("a")}
            assert engine.handle(binding, "engram_memory_request_admission", admit)["ok"]
            reviewed.append(candidate)
            with contextlib.suppress(ProtocolFault):  # an unknown tool: refused, and audited by its name
                engine.handle(binding, _hostile(rng), {"query": text})
        for candidate in reviewed[::2]:
            run("review", "accept", candidate)

    outputs: list[str] = []
    listings = ""
    for json_mode in ([], ["--json"]):
        outputs.append(run("review", "list", "--all", *json_mode))
        outputs += [run("review", "show", candidate, *json_mode) for candidate in reviewed[1::2]]
        outputs.append(run("confirmations", "list", "--all", *json_mode))
        listings += run("records", "list", *json_mode)
        outputs.append(run("stats", *json_mode))
        outputs.append(run("verify", *json_mode))
    outputs.append(listings)
    record_ids = sorted(set(RECORD_ID.findall(listings)))
    for record_id in record_ids:
        outputs += [run("records", "show", record_id), run("records", "show", record_id, "--json")]
    outputs.append(run("audit", "export"))

    reached = [ch for output in outputs for ch in _unsafe(output)]
    assert reached == [], sorted({f"U+{ord(ch):04X}" for ch in reached})
    assert stored > refused and record_ids and reviewed
    shown = sum(output.count("\\x1b") + output.count("\\u001b") for output in outputs)
    assert shown > stored, shown  # the hostile text did reach the outputs, escaped
    report("hostile agent texts stored, then shown by host commands", stored * 3, unit=f"({len(outputs)} outputs)")
    report("control characters of agent text that reached the terminal", len(reached), target="0")
