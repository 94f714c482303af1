"""Refuse secrets at capture, because credentials must never reach the memory store.

Conservative by design: a hit silently rejects a memory, so only credential shapes and noise stop it.
"""

from engram_memory.engine.secrets.scanner import (
    CATEGORIES,
    DEFAULT_CATEGORIES,
    SecretFinding,
    scan_text,
    scan_value,
    secret_categories,
)

__all__ = [
    "CATEGORIES",
    "DEFAULT_CATEGORIES",
    "SecretFinding",
    "scan_text",
    "scan_value",
    "secret_categories",
]
