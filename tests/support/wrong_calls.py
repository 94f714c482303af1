# ruff: noqa: RUF001 - Chinese and Japanese text carries full-width punctuation on purpose
"""A corpus of realistic wrong tool calls, as LLM agents make them: each a valid call with one mistake.

Built from valid calls in four languages by mistakes agents are seen to make (a digest of the wrong length
or case, a missing or dangling citation, seconds for milliseconds, null or invented fields, a wrong enum,
unsorted family refs, oversized or non-NFC text, a short key, a time as a string, a search bound). Each
entry says what the agent meant, so a fixer knows what an agent would know (its text and purpose), never
what was wrong.
"""

from __future__ import annotations

import copy
import hashlib
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tests.support.payloads import PURPOSE, VALID_FROM_MS, capture_args, unique_key, with_change

CAPTURE = "engram_memory_capture"
SEARCH = "engram_memory_search"
ADMIT = "engram_memory_request_admission"
WITHDRAW = "engram_memory_withdraw"

TEXTS = {
    "en": "The billing service retries failed webhooks three times with exponential backoff.",
    "ko": "결제 서비스는 실패한 웹훅을 지수 백오프로 세 번 재시도한다.",
    "zh": "计费服务会以指数退避的方式重试失败的网络钩子三次。",
    "ja": "課金サービスは失敗したウェブフックを指数バックオフで三回再試行する。",
}
# Decomposed forms an editor or a copy from a PDF leaves: Hangul jamo, a combining accent.
NOT_NFC = {
    "en": "The café’s deploy window closes at noon.".replace("é", "e\u0301"),
    "ko": unicodedata.normalize("NFD", "배포 창은 정오에 닫힌다."),
    "zh": "发布窗口在中午关闭，见 Cafe\u0301 频道。",
    "ja": unicodedata.normalize("NFD", "デプロイの窓口は正午に閉じる。"),
}


@dataclass(frozen=True)
class WrongCall:
    kind: str
    tool: str
    arguments: Any
    text: str  # what the agent meant to remember (or search for)


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _two_citations(text: str, key: str) -> dict[str, Any]:
    arguments = capture_args(text, key=key, context="Agreed in the weekly operations review.")
    second = copy.deepcopy(arguments["payload"]["citations"][0])
    second.update(citation_id="ops", source_ref="doc:ops-review", content_digest=_sha("ops:" + text))
    arguments["payload"]["citations"].append(second)
    arguments["payload"]["components"][1]["citation_ids"] = ["ops"]
    return arguments


Mistake = Callable[[dict[str, Any]], Any]

_CAPTURE_MISTAKES: list[tuple[str, Mistake]] = [
    (
        "digest-63-hex",
        lambda a: with_change(
            a, "payload/citations/0/content_digest", a["payload"]["citations"][0]["content_digest"][:-1]
        ),
    ),
    (
        "digest-65-hex",
        lambda a: with_change(
            a, "payload/citations/0/content_digest", a["payload"]["citations"][0]["content_digest"] + "0"
        ),
    ),
    (
        "digest-upper",
        lambda a: with_change(
            a, "payload/citations/0/content_digest", a["payload"]["citations"][0]["content_digest"].upper()
        ),
    ),
    ("digest-no-prefix", lambda a: with_change(a, "evidence/evidence_digest", a["evidence"]["evidence_digest"][7:])),
    ("digest-md5", lambda a: with_change(a, "evidence/evidence_digest", "md5:" + hashlib.md5(b"x").hexdigest())),
    ("citations-missing", lambda a: with_change(a, "payload/citations", ...)),
    ("citation-dangling", lambda a: with_change(a, "payload/components/0/citation_ids", ["src", "source-1"])),
    ("citation-renamed", lambda a: with_change(a, "payload/components/0/citation_ids", ["source"])),
    ("event-citation-dangling", lambda a: with_change(a, "payload/primary_event/citation_id", "c1")),
    ("evidence-citation-dangling", lambda a: with_change(a, "evidence/citation_ids", ["s1"])),
    ("primary-dangling", lambda a: with_change(a, "payload/primary_component_id", "c1")),
    ("seconds-t", lambda a: with_change(a, "payload/valid_time/t", VALID_FROM_MS // 1000)),
    ("seconds-at", lambda a: with_change(a, "payload/primary_event/at", VALID_FROM_MS // 1000)),
    (
        "seconds-both",
        lambda a: with_change(
            with_change(a, "payload/valid_time/t", 1_764_547_200), "payload/primary_event/at", 1_764_547_200
        ),
    ),
    ("seconds-t-end", lambda a: with_change(a, "payload/valid_time", {"t": VALID_FROM_MS, "t_end": 1_893_456_000})),
    ("microseconds-t", lambda a: with_change(a, "payload/valid_time/t", VALID_FROM_MS * 1000)),
    ("t-as-string", lambda a: with_change(a, "payload/valid_time/t", str(VALID_FROM_MS))),
    (
        "t-end-before-t",
        lambda a: with_change(a, "payload/valid_time", {"t": VALID_FROM_MS, "t_end": VALID_FROM_MS - 86_400_000}),
    ),
    ("null-retention", lambda a: with_change(a, "payload/retention", None)),
    ("null-reconciliation", lambda a: with_change(a, "payload/reconciliation", None)),
    ("null-observed-at", lambda a: with_change(a, "payload/citations/0/observed_at", None)),
    ("null-attestation", lambda a: with_change(a, "evidence/attestation", None)),
    ("null-t-end", lambda a: with_change(a, "payload/valid_time/t_end", None)),
    ("null-source-ref", lambda a: with_change(a, "payload/citations/0/source_ref", None)),
    ("extra-confirmed", lambda a: {**a, "confirmed": True}),
    ("extra-tenant", lambda a: with_change(a, "payload/tenant", "acme")),
    ("extra-scope-ref", lambda a: with_change(a, "payload/scope_ref", "tenant/workspace")),
    ("extra-component-title", lambda a: with_change(a, "payload/components/0/title", "Webhooks")),
    ("extra-citation-url", lambda a: with_change(a, "payload/citations/0/url", "https://wiki.example/ops")),
    ("kind-note", lambda a: with_change(a, "payload/components/0/kind", "note")),
    ("kind-capitalised", lambda a: with_change(a, "payload/components/0/kind", "Decision")),
    ("retention-keep", lambda a: with_change(a, "payload/retention", {"derivative_rule": "keep"})),
    (
        "families-unsorted",
        lambda a: with_change(a, "payload/reconciliation", {"family_refs": ["fact:webhooks", "fact:billing"]}),
    ),
    (
        "families-repeated",
        lambda a: with_change(a, "payload/reconciliation", {"family_refs": ["fact:billing", "fact:billing"]}),
    ),
    (
        "text-oversized",
        lambda a: with_change(a, "payload/components/0/text", a["payload"]["components"][0]["text"] * 900),
    ),
    ("key-short", lambda a: with_change(a, "idempotency_key", "cap-1")),
    ("schema-version-1", lambda a: with_change(a, "payload/schema_version", 1)),
    ("citation-ids-string", lambda a: with_change(a, "payload/components/0/citation_ids", "src")),
    ("observed-at-no-millis", lambda a: with_change(a, "payload/citations/0/observed_at", "2025-12-01T09:30:00Z")),
    (
        "observed-at-offset",
        lambda a: with_change(a, "payload/citations/0/observed_at", "2025-12-01T09:30:00.000+09:00"),
    ),
    (
        "expires-at-past",
        lambda a: with_change(
            a, "payload/retention", {"derivative_rule": "make-ineligible", "expires_at": "2020-01-01T00:00:00.000Z"}
        ),
    ),
    ("locator-string", lambda a: with_change(a, "payload/citations/0/locator", "handbook#section")),
    ("components-empty", lambda a: with_change(a, "payload/components", [])),
]

_SECOND_CITATION_MISTAKES: list[tuple[str, Mistake]] = [
    ("second-digest-short", lambda a: with_change(a, "payload/citations/1/content_digest", "sha256:abc123")),
    ("second-citation-dangling", lambda a: with_change(a, "payload/components/1/citation_ids", ["ops-review"])),
    ("second-citation-repeated", lambda a: with_change(a, "payload/citations/1/citation_id", "src")),
    ("context-kind-wrong", lambda a: with_change(a, "payload/components/1/kind", "background")),
]

_OTHER_MISTAKES: list[tuple[str, str, Any]] = [
    ("search-limit-0", SEARCH, {"query": "{text}", "purpose_ref": PURPOSE, "limit": 0}),
    ("search-limit-100", SEARCH, {"query": "{text}", "purpose_ref": PURPOSE, "limit": 100}),
    ("search-limit-string", SEARCH, {"query": "{text}", "purpose_ref": PURPOSE, "limit": "10"}),
    ("search-budget-small", SEARCH, {"query": "{text}", "purpose_ref": PURPOSE, "max_packet_bytes": 1000}),
    (
        "search-channels-semantic",
        SEARCH,
        {"query": "{text}", "purpose_ref": PURPOSE, "capability_policy": {"minimum_channels": "semantic"}},
    ),
    ("search-extra-tenant", SEARCH, {"query": "{text}", "purpose_ref": PURPOSE, "tenant": "acme"}),
    ("search-null-cursor", SEARCH, {"query": "{text}", "purpose_ref": PURPOSE, "page_cursor": None}),
    ("search-query-missing", SEARCH, {"purpose_ref": PURPOSE, "q": "{text}"}),
    ("admit-key-short", ADMIT, {"candidate_id": "cand_abcdefghij234567", "idempotency_key": "admit-1"}),
    (
        "admit-extra-decision",
        ADMIT,
        {"candidate_id": "cand_abcdefghij234567", "idempotency_key": "admit-key-0000000001", "decision": "accept"},
    ),
    (
        "withdraw-reason-missing",
        WITHDRAW,
        {"candidate_id": "cand_abcdefghij234567", "idempotency_key": "withdraw-key-00000001"},
    ),
    (
        "withdraw-null-reason",
        WITHDRAW,
        {"candidate_id": "cand_abcdefghij234567", "idempotency_key": "withdraw-key-00000001", "reason_ref": None},
    ),
]


def _filled(value: Any, text: str) -> Any:
    if isinstance(value, str):
        return value.replace("{text}", text)
    if isinstance(value, dict):
        return {key: _filled(item, text) for key, item in value.items()}
    return value


def wrong_calls() -> Iterator[WrongCall]:
    """Every mistake in every language: 4 x (43 + 4 + 12 + 1) = 240 calls."""
    for language, text in TEXTS.items():
        for kind, mistake in _CAPTURE_MISTAKES:
            yield WrongCall(f"{kind}/{language}", CAPTURE, mistake(capture_args(text)), text)
        for kind, mistake in _SECOND_CITATION_MISTAKES:
            yield WrongCall(f"{kind}/{language}", CAPTURE, mistake(_two_citations(text, unique_key("two"))), text)
        for kind, tool, arguments in _OTHER_MISTAKES:
            yield WrongCall(f"{kind}/{language}", tool, _filled(copy.deepcopy(arguments), text), text)
        yield WrongCall(f"text-not-nfc/{language}", CAPTURE, capture_args(NOT_NFC[language]), NOT_NFC[language])
