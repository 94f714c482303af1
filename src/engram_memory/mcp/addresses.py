"""Whether an address is this machine's own: what decides DNS-rebinding checks for a listener, and which
plain-HTTP URLs the host accepts for development. Apart from the transport so that reading it loads no SDK."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
