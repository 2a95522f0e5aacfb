"""Is this a loopback address? Decides development mode (login skipped) and whether
``grpodeck serve`` may start without accounts."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    host = host.strip().lower().removeprefix("[").removesuffix("]").rstrip(".")
    if host in LOCAL_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_of(host_header: str) -> str:
    """The host part of a Host header: ``127.0.0.1:8000`` -> ``127.0.0.1``, ``[::1]:80`` -> ``::1``."""
    if host_header.startswith("["):
        return host_header[1:].partition("]")[0]
    return host_header.rpartition(":")[0] if host_header.count(":") == 1 else host_header


def is_local_request(scope: Mapping[str, Any]) -> bool:
    """The request reached a socket bound to loopback AND names a loopback host.

    The socket alone is not enough: a reverse proxy on the same machine forwards the public
    internet to 127.0.0.1, and a DNS-rebinding page reaches it from a browser; both send a
    Host header that is not a loopback name.
    """
    server = scope.get("server")
    if not server or not is_loopback(str(server[0])):
        return False
    hosts = [v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"]
    return len(hosts) == 1 and is_loopback(host_of(hosts[0]))
