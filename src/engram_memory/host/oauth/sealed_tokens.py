"""The team provider's refresh tokens, sealed for the vault: AES-256-GCM, the person they belong to (issuer
and subject) as associated data, so a sealed token copied to another person's grant does not open."""

from __future__ import annotations

import base64
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

NONCE_BYTES = 12


class TokenSeal:
    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    def seal(self, token: str, issuer: str, subject: str) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, token.encode("utf-8"), _context(issuer, subject))
        return base64.urlsafe_b64encode(nonce + sealed).decode("ascii")

    def open(self, sealed: str, issuer: str, subject: str) -> str | None:
        """The token, or None when it does not open (another key, another person, damaged)."""
        try:
            raw = base64.urlsafe_b64decode(sealed.encode("ascii"))
            return self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _context(issuer, subject)).decode("utf-8")
        except (InvalidTag, ValueError, UnicodeError):
            return None


def _context(issuer: str, subject: str) -> bytes:
    return f"engram-memory/upstream-refresh-token\n{issuer}\n{subject}".encode()
