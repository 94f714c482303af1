"""What the tombstone guard remembers of forgotten content, and how it knows that content again.

A forgotten record must not come back quietly. Comparing whole-payload digests caught only a
byte-identical capture: the same text with another valid time, another source ref, a trailing space
or a Traditional character for a Simplified one passed as new. So the guard compares what a person
would call the same content, each component's text as the tokenizer sees it (folded: width, case,
accents, Traditional/Simplified; words only, so spacing and punctuation do not count; invisible
format characters such as zero-width spaces and soft hyphens dropped, so they cannot split a word
the guard would know), and remembers
it only as a keyed fingerprint: HMAC-SHA256 under a key derived from the host's MAC secret, so the
tombstones table holds nothing a reader could test guesses of the forgotten text against.

A forgotten record leaves the fingerprints of its primary text and of every other component that is
not mere context (context lines are usually other memories), plus one of its payload digest (all a
record whose body can no longer be opened leaves). A candidate is held for a human when any of its
components' texts, or its payload digest, matches.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import unicodedata
from collections.abc import Mapping
from typing import Any

from engram_memory.engine.recall.text import words

__all__ = ["candidate_fingerprints", "forgotten_fingerprints", "guard_key", "normalised_text"]

_KEY_DOMAIN = b"engram-memory/tombstone-guard/v1"
_TEXT = "text:"
_PAYLOAD = "payload:"


@functools.cache
def guard_key(mac_secret: bytes) -> bytes:
    """The guard's own key, derived from the host's MAC secret (never the secret itself)."""
    return hmac.new(mac_secret, _KEY_DOMAIN, hashlib.sha256).digest()


def _fingerprint(key: bytes, kind: str, value: str) -> str:
    mac = hmac.new(key, (kind + value).encode("utf-8", errors="surrogatepass"), hashlib.sha256)
    return "fp1:" + mac.hexdigest()


def _visible(text: str) -> str:
    if text.isascii():
        return text
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


def normalised_text(text: str) -> str:
    """A text as a person would compare it: folded words only, invisible format characters dropped."""
    return " ".join(words(_visible(text)))


def _text_fingerprint(key: bytes, text: str) -> str | None:
    normalised = normalised_text(text)
    return _fingerprint(key, _TEXT, normalised) if normalised else None


def forgotten_fingerprints(key: bytes, payload_digest: str, payload: Mapping[str, Any] | None) -> list[str]:
    """What a tombstone keeps of a record (`payload` None when its body can no longer be opened)."""
    found = [_fingerprint(key, _PAYLOAD, payload_digest)]
    if payload is not None:
        primary = payload.get("primary_component_id")
        for component in payload.get("components", []):
            if component.get("component_id") == primary or component.get("kind") != "context":
                fingerprint = _text_fingerprint(key, str(component.get("text", "")))
                if fingerprint is not None:
                    found.append(fingerprint)
    return sorted(set(found))


def candidate_fingerprints(key: bytes, payload_digest: str, payload: Mapping[str, Any]) -> list[str]:
    """What a candidate is looked up by: its payload digest (also in the plain form that tombstones
    written before this guard hold) and every component's text."""
    found = {payload_digest, _fingerprint(key, _PAYLOAD, payload_digest)}
    for component in payload.get("components", []):
        text = str(component.get("text", ""))
        # Tombstones written before format characters were dropped hold the unfiltered form; the set
        # has one form only when nothing was dropped, so the text is tokenised once.
        for form in {_visible(text), text}:
            normalised = " ".join(words(form))
            if normalised:
                found.add(_fingerprint(key, _TEXT, normalised))
    return sorted(found)
