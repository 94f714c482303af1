"""The stdio server's binding: a token given once, or a binding file read again whenever it changes, failing
closed when the file stops giving a usable binding."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram_memory.engine.engine import Engine
from engram_memory.host.compose import verify_token
from engram_memory.host.serve.stdio_binding import StdioBinding
from engram_memory.host.settings import HostPaths
from tests.support.homes import bind, engine_for


@pytest.fixture
def engine(paths: HostPaths) -> Iterator[Engine]:
    with engine_for(paths) as opened:
        yield opened


def _source(paths: HostPaths, engine: Engine, *, token: str | None = None, path: Path | None = None) -> StdioBinding:
    return StdioBinding(lambda given: verify_token(paths, given), engine.binding_unusable, token=token, path=path)


def _replace(path: Path, text: str) -> None:
    fresh = path.with_suffix(".new")
    fresh.write_text(text, encoding="utf-8")
    fresh.replace(path)


def test_a_given_token_is_the_binding_for_good(paths: HostPaths, engine: Engine) -> None:
    issued = bind(paths)
    source = _source(paths, engine, token=issued.token)
    assert source.binding() == issued.binding
    assert source.refusal() is None
    assert source.describe() == (f"serving over stdio; binding {issued.binding.token_id} verified", False)


def test_a_binding_file_is_read_again_when_it_changes(paths: HostPaths, engine: Engine, tmp_path: Path) -> None:
    target = tmp_path / "agent.binding"
    first, second = bind(paths), bind(paths, session="session-2")
    target.write_text(first.token, encoding="utf-8")
    source = _source(paths, engine, path=target)
    assert source.binding() == first.binding
    _replace(target, second.token + "\n")
    assert source.binding() == second.binding
    _replace(target, "garbage")
    assert source.binding() is None
    assert source.refusal() == "the binding token does not verify against this host's key"
    target.unlink()
    assert source.binding() is None
    refusal = source.refusal()
    assert refusal is not None and refusal.startswith(f"cannot read the binding file {target}")
    target.write_text(first.token, encoding="utf-8")
    assert source.binding() == first.binding


def test_an_expired_or_revoked_binding_is_kept_for_its_calls_but_refused_at_connection(
    paths: HostPaths, engine: Engine
) -> None:
    expired = bind(paths, lifetime_s=60, now_s=int(time.time()) - 3600)
    source = _source(paths, engine, token=expired.token)
    assert source.binding() == expired.binding  # its calls answer AUTHORIZATION_EXPIRED
    refusal = source.refusal()
    assert refusal is not None and refusal.startswith(f"binding {expired.binding.token_id} expired at ")
    line, warning = source.describe()
    assert warning and line.endswith(": clients are refused at connection until the host gives a usable binding")
    revoked = bind(paths)
    engine.revoke_token(revoked.binding.token_id, revoked_by="host:test", unlisted=True)
    assert _source(paths, engine, token=revoked.token).refusal() == f"binding {revoked.binding.token_id} is revoked"


def test_no_token_at_all_is_refused_with_where_to_give_one(paths: HostPaths, engine: Engine) -> None:
    source = _source(paths, engine)
    assert source.binding() is None
    assert source.refusal() == "no binding given (--binding, --binding-file or ENGRAM_BINDING)"
