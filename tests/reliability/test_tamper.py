"""Tamper (issue 14): a flipped byte in a body, the journal, the key-encryption key or a backup archive
is a named error, never a wrong answer.

Each trial flips one random byte of one random target on a SQLite home holding a few memories, asks
what an agent or the host would ask, checks the answer, and puts the byte back.

* a sealed body: `get` answers `BLOB_MISSING` (the text never comes back altered);
* a journal row: `verify` names the journal (`JOURNAL_CORRUPT` or a chain fault), never passes;
* the key-encryption key file: the engine refuses to open, or every body answers `BLOB_MISSING`;
* a backup archive: `restore` refuses it (`BACKUP_INVALID`) and the home stays empty.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

from engram_memory.engine.verify import verify_store
from engram_memory.host.compose import HomeError
from engram_memory.host.keys.files import KeyFileError
from engram_memory.host.recovery.backup import backup_home
from engram_memory.host.recovery.manifest import BackupRefused
from engram_memory.host.recovery.restore import restore_home
from engram_memory.host.settings import HostPaths
from tests.reliability.scale import amount, report
from tests.support.homes import bind, engine_for, make_home
from tests.support.inprocess import InProcessAgent
from tests.support.raw import raw_store

SEED = 1416
TEXTS = [
    "The osprey cluster keeps its quorum across three zones.",
    "운영팀은 데이터베이스를 매일 밤 클라우드에 백업한다.",
    "維運團隊每天晚上把資料庫備份到雲端儲存。",
]


def _flip(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data))
    return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1 :]


def _home(folder: Path) -> tuple[HostPaths, InProcessAgent, list[str]]:
    paths = make_home(folder)
    issued = bind(paths)
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, issued.binding)
        ids = [agent.remember(text) for text in TEXTS]
    return paths, agent, ids


def _get_codes(paths: HostPaths, agent: InProcessAgent, ids: list[str]) -> list[str]:
    """Each record's answer: 'ok:<its original text>' or the error code."""
    answers = []
    with engine_for(paths) as engine:
        live = InProcessAgent(engine, agent.binding)
        for record_id, text in zip(ids, TEXTS, strict=True):
            envelope = live.get(record_id)
            if envelope["ok"]:
                shown = envelope["output"]["value"]["record"]["components"][0]["text"]
                answers.append("ok" if shown == text else "WRONG ANSWER")
            else:
                answers.append(str(envelope["error"]["code"]))
    return answers


def test_flipped_bytes_are_named_errors_never_wrong_answers(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    paths, agent, ids = _home(tmp_path / "home")
    archive = tmp_path / "good.backup"
    backup_home(paths, archive)
    good_archive = archive.read_bytes()
    trials = amount(12, 200)
    counts = {"body": 0, "journal": 0, "kek": 0, "archive": 0}
    journal_open = False
    wrong = 0  # every trial asserts it stays 0; counted so the table reports what was checked
    for trial in range(trials):
        target = ("body", "journal", "kek", "archive")[trial % 4]
        counts[target] += 1
        if target == "body":
            owner = rng.choice(ids)
            with raw_store(paths) as db:
                original = db.value("SELECT ciphertext FROM sealed_bodies WHERE owner_id = ?", (owner,))
                db.execute("UPDATE sealed_bodies SET ciphertext = ? WHERE owner_id = ?", (_flip(original, rng), owner))
            answers = _get_codes(paths, agent, ids)
            assert answers[ids.index(owner)] == "BLOB_MISSING", answers
            assert "WRONG ANSWER" not in answers
            with raw_store(paths) as db:
                db.execute("UPDATE sealed_bodies SET ciphertext = ? WHERE owner_id = ?", (original, owner))
        elif target == "journal":
            with raw_store(paths) as db:
                cursor, body = rng.choice(db.rows("SELECT cursor, body FROM journal"))
                raw = body.encode() if isinstance(body, str) else bytes(body)
                flipped = _flip(raw, rng)
                stored = flipped.decode("utf-8", errors="replace") if isinstance(body, str) else flipped
                if not journal_open:  # as an attacker with the owner's rights could, once
                    db.allow_journal_edits()
                    journal_open = True
                db.execute("UPDATE journal SET body = ? WHERE cursor = ? AND body = ?", (stored, cursor, body))
            with engine_for(paths) as engine:
                problem = verify_store(engine.deps, full=True).first
            assert problem is not None, "a flipped journal byte passed verify"
            with raw_store(paths) as db:
                db.execute("UPDATE journal SET body = ? WHERE cursor = ? AND body = ?", (body, cursor, stored))
        elif target == "kek":
            original = paths.kek_file.read_bytes()
            paths.kek_file.write_bytes(_flip(original, rng))
            try:
                answers = _get_codes(paths, agent, ids)
            except (KeyFileError, HomeError):
                answers = ["refused"]
            finally:
                paths.kek_file.write_bytes(original)
            assert "WRONG ANSWER" not in answers and set(answers) <= {"refused", "BLOB_MISSING", "ok"}, answers
        else:
            fresh = make_home(tmp_path / f"restore-{trial}")
            shutil.copytree(paths.home / "keys", fresh.home / "keys", dirs_exist_ok=True)
            tampered = tmp_path / f"tampered-{trial}.backup"
            tampered.write_bytes(_flip(good_archive, rng))
            try:
                restore_home(fresh, tampered, decided_by="host:tamper")
            except (BackupRefused, KeyFileError, HomeError) as refused:
                assert (
                    "BACKUP_INVALID" in str(refused)
                    or "RESTORE_REFUSED" in str(refused)
                    or isinstance(refused, KeyFileError | HomeError)
                ), refused
            else:
                raise AssertionError("a tampered archive was restored")
            with raw_store(fresh) as db:
                assert db.count("records") == 0
        assert _get_codes(paths, agent, ids) == ["ok"] * len(ids)  # every byte back: all is well again
    report(
        "tamper trials (body, journal, key, archive)",
        trials,
        unit=f"({', '.join(f'{k} {v}' for k, v in counts.items())})",
    )
    report("tampered bytes answered wrongly", wrong, target="0")
