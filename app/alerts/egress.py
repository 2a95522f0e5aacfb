"""The outbound URL policy: where alert deliveries may connect.

An alert URL is typed by a user (a run's ``alerts.urls``) or an admin (``/settings/alerts``), and
the scheduler connects to it from inside the deployment's network. Without a policy that is a
server-side request forgery: ``webhook+http://169.254.169.254/latest/meta-data`` would make the
scheduler read the cloud metadata service, ``json://127.0.0.1:6379`` would talk to Redis.

So a destination must use a remote scheme from an allow-list (no ``file://``, ``windows://``,
``dbus://`` ...), and every address it reaches must be public: loopback, private, link-local,
multicast, unspecified, reserved and cloud-metadata addresses are refused unless the admin lists
the host (or its network) in ``GRPODECK_ALERT_ALLOW_HOSTS``. The check runs twice:

* at save time (``destination_refusal``), for a clear 422 at the field;
* at send time, inside the connection itself (``guard``): while a delivery runs, every name
  any library resolves (the first request, a redirect, an SMTP server) is checked on the very
  addresses the socket is then given, so a name that resolves to a public address when saved
  and to 127.0.0.1 when sent (DNS rebinding), or a redirect to a refused address, is refused.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from fastapi.exceptions import RequestValidationError

from app.core.config import get_settings
from grpodeck.contract.alerts import WEBHOOK_PREFIX, check_url, masked

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_ADDRESSES = frozenset({"169.254.169.254", "fd00:ec2::254", "100.100.100.200"})
METADATA_NAMES = frozenset({"metadata.google.internal", "metadata", "instance-data"})
# Apprise schemes whose host is the person's own server: the host is checked at save time.
HOST_SCHEMES = frozenset({
    "json", "jsons", "xml", "xmls", "form", "forms", "mailto", "mailtos", "ntfy", "ntfys",
    "gotify", "gotifys", "mmost", "mmosts", "matrix", "matrixs", "rocket", "rockets",
    "apprise", "apprises", "ncloud", "nclouds"})
# Apprise schemes of hosted services: the "host" part is a token, Apprise connects to the
# vendor (checked at send time like every other connection).
SERVICE_SCHEMES = frozenset({
    "slack", "discord", "tgram", "msteams", "pover", "pbul", "signal", "signals", "twilio",
    "opsgenie", "pagerduty", "pushed", "ses", "sns", "teams", "zulip", "gchat", "line",
    "ifttt", "join", "kumulos", "mailgun", "sendgrid", "sparkpost", "spush", "techulus",
    "pjet", "pjets", "lametric", "lametrics", "webex", "wxteams", "guilded", "revolt",
    "flock", "ryver", "twist", "bark", "barks", "pushplus", "wecombot", "workflows",
    "workflow", "splunk", "victorops", "mastodon", "toot", "bsky", "bluesky", "threema",
    "simplepush", "notica", "prowl", "psafer", "psafers", "pushy", "reddit", "seven",
    "smseagle", "smseagles", "clicksend", "bulksms", "burstsms", "d7sms", "dapnet", "httpsms",
    "msg91", "nexmo", "vonage", "sinch", "smsmgr", "kavenegar"})
WEBHOOK_SCHEMES = frozenset({"webhook+http", "webhook+https"})


class EgressRefused(OSError):
    """Raised inside a delivery's connection: the libraries report it as a connection error."""


def scheme_of(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


@lru_cache(maxsize=8)
def _parse_allow(text: str) -> tuple[frozenset[str], tuple[Network, ...]]:
    names: set[str] = set()
    networks: list[Network] = []
    for entry in text.replace(",", " ").split():
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            names.add(entry.lower().rstrip("."))
    return frozenset(names), tuple(networks)


def allow_list() -> tuple[frozenset[str], tuple[Network, ...]]:
    """``GRPODECK_ALERT_ALLOW_HOSTS``: host names, addresses or networks (CIDR) the admin trusts."""
    return _parse_allow(get_settings().alert_allow_hosts or "")


def _address(text: str) -> Address | None:
    try:
        found = ipaddress.ip_address(text.split("%", 1)[0].strip("[]"))
    except ValueError:
        return None
    if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
        return found.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    return found


def address_refusal(address: Address) -> str | None:
    """Why connecting to this address is refused, or None for a public address."""
    if str(address) in METADATA_ADDRESSES:
        return "a cloud metadata address"
    for kind, hit in (("loopback", address.is_loopback), ("link-local", address.is_link_local),
                      ("multicast", address.is_multicast), ("unspecified", address.is_unspecified),
                      ("reserved", address.is_reserved), ("private", address.is_private)):
        if hit:
            return f"a {kind} address"
    return None if address.is_global else "not a public address"


def host_refusal(host: str, addresses: list[str]) -> str | None:
    """Why ``host`` (resolved to ``addresses``) may not be reached; None when it may."""
    names, networks = allow_list()
    name = host.lower().rstrip(".").strip("[]")
    if name in names:
        return None
    if name in METADATA_NAMES:
        return f"{host} is a cloud metadata host"
    for text in addresses:
        address = _address(text)
        if address is None or any(address in net for net in networks):
            continue
        if (why := address_refusal(address)) is not None:
            return (f"{host} is {why} ({address})" if str(address) != name
                    else f"{address} is {why}")
    return None


_real_getaddrinfo = socket.getaddrinfo
# A context variable, not a thread-local: Apprise sends from its own worker threads, which it
# starts in a copy of the caller's context, so the guard goes along with the delivery.
_active: ContextVar[bool] = ContextVar("grpodeck_egress_guard", default=False)


def resolve(host: str) -> list[str]:
    """Every address ``host`` resolves to now (the unguarded resolver)."""
    return sorted({info[4][0] for info in _real_getaddrinfo(host, None)})


def _guarded_getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    """``socket.getaddrinfo`` that, inside ``guard()``, refuses names resolving to refused
    addresses: the socket then connects to exactly the addresses checked here."""
    infos = _real_getaddrinfo(host, port, *args, **kwargs)
    if _active.get() and host is not None:
        name = host.decode() if isinstance(host, bytes) else str(host)
        why = host_refusal(name, [info[4][0] for info in infos])
        if why is not None:
            raise EgressRefused(f"refused by the outbound URL policy: {why} "
                                "(an admin may allow it in GRPODECK_ALERT_ALLOW_HOSTS)")
    return infos


_install_lock = threading.Lock()


def _install() -> None:
    with _install_lock:
        if socket.getaddrinfo is not _guarded_getaddrinfo:
            socket.getaddrinfo = _guarded_getaddrinfo


@contextmanager
def guard() -> Iterator[None]:
    """Within this block (this context only: the delivery's thread and the threads Apprise
    starts for it), every connection is checked by the policy."""
    _install()
    token = _active.set(True)
    try:
        yield
    finally:
        _active.reset(token)


def hosts_of(url: str) -> list[str]:
    """The host names a destination connects to, as far as its URL says (save-time check)."""
    scheme = scheme_of(url)
    if scheme in WEBHOOK_SCHEMES:
        host = urlsplit(url[len(WEBHOOK_PREFIX):]).hostname
        return [host] if host else []
    if scheme not in HOST_SCHEMES:
        return []
    import apprise

    notifier = apprise.Apprise()
    if not notifier.add(url):
        return []
    plugin = notifier[0]
    found = [getattr(plugin, "host", None), getattr(plugin, "smtp_host", None)]
    return [h for h in dict.fromkeys(found) if isinstance(h, str) and h]


def scheme_refusal(url: str) -> str | None:
    scheme = scheme_of(url)
    if scheme in WEBHOOK_SCHEMES or scheme in HOST_SCHEMES or scheme in SERVICE_SCHEMES:
        return None
    shown = scheme[:30] or "(none)"
    return (f"scheme {shown!r} is not allowed for alerts: use webhook+https://, json://, "
            "mailto://, slack://, ntfy:// or another remote notification service")


def refusals(urls: list[str]) -> dict[int, str]:
    """Index -> why, for each destination of a list the policy refuses."""
    return {i: why for i, url in enumerate(urls) if (why := destination_refusal(url))}


def destination_refusal(url: str) -> str | None:
    """None when ``url`` passes the policy now, else why not (names that do not resolve pass
    here: they cannot be reached either, and the send-time guard checks them again)."""
    if (why := scheme_refusal(url) or check_url(url)) is not None:
        return why
    for host in hosts_of(url):
        try:
            addresses = resolve(host) if _address(host) is None else [host]
        except (OSError, UnicodeError):
            addresses = []
        if (why := host_refusal(host, addresses)) is not None:
            return (f"refused by the outbound URL policy: {why} (an admin may allow it in "
                    "GRPODECK_ALERT_ALLOW_HOSTS)")
    return None


def check_destinations(urls: list[str]) -> None:
    """Alert destinations must pass the outbound URL policy: else the same 422 as a field error
    of the spec (``body.alerts.urls.N``), so nothing is stored. Shared by launched and external
    runs."""
    refused = refusals(urls)
    if refused:
        raise RequestValidationError([
            {"type": "value_error", "loc": ("body", "alerts", "urls", i), "msg": why,
             "input": masked(urls[i])} for i, why in refused.items()])
