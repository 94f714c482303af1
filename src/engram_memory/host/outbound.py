"""How this host reaches other servers (identity providers, their key sets, clients' metadata documents):
whose certificates it trusts, and which addresses it accepts."""

from __future__ import annotations

import os
import ssl
from urllib.parse import urlsplit

from engram_memory.mcp.addresses import is_loopback


def tls_context() -> ssl.SSLContext:
    """The system's trust, or the bundle SSL_CERT_FILE names (OpenSSL's convention)."""
    return ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE") or None)


def https_or_loopback(url: str) -> bool:
    """An https URL, or an http one on a loopback address (development and tests)."""
    parts = urlsplit(url)
    loopback = parts.hostname is not None and is_loopback(parts.hostname)
    return parts.scheme == "https" or (parts.scheme == "http" and loopback)


def on_loopback(url: str) -> bool:
    return is_loopback(urlsplit(url).hostname or "")
