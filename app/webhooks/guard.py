"""The SSRF guard: a webhook URL must be http(s) and its host must resolve only to public
addresses, unless ``PARLEY_WEBHOOK_ALLOW_PRIVATE`` says otherwise.

Imports the standard library and idna (IDNA 2008, as httpx checks a host name: a name the
client could not send to is refused here, not found out by the deliverer). Checked when an
endpoint is registered or changed, and again before each delivery attempt (the name's
addresses may have changed since). A name that resolves between the check and the connection
(DNS rebinding within seconds) is not covered.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

import idna

MAX_URL_CHARS = 2048
RESOLVE_SECONDS = 5.0


def _host_name(host: str) -> bool:
    """Whether ``host`` is a name IDNA 2008 accepts: its ``xn--`` labels decode (``xn--``
    with nothing after does not), and a name in Unicode encodes (a zero-width space does not)."""
    try:
        host.encode("idna")
        if not host.isascii():
            idna.encode(host.lower())
        for label in host.split("."):
            if label.lower().startswith("xn--"):
                idna.decode(label)
    except (UnicodeError, idna.IDNAError):
        return False
    return True


class UrlRefused(ValueError):
    """The URL may not receive webhooks (the message says why)."""


def parse(url: str) -> tuple[str, int]:
    """The URL's host and port; UrlRefused if it is no absolute http(s) URL."""
    if len(url) > MAX_URL_CHARS:
        raise UrlRefused(f"the URL is longer than {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UrlRefused(f"not a URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise UrlRefused("the URL must start with http:// or https://")
    if not parts.hostname:
        raise UrlRefused("the URL names no host")
    if parts.username is not None or parts.password is not None:
        raise UrlRefused("the URL may not carry credentials")
    if not _host_name(parts.hostname):
        raise UrlRefused(f"{parts.hostname!r} is not a host name")
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def is_public(address: str) -> bool:
    """Whether ``address`` is a public unicast address (not loopback, private, link-local,
    multicast, reserved or unspecified; an IPv4-mapped IPv6 address counts as its IPv4)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def check(url: str, *, allow_private: bool) -> list[str]:
    """UrlRefused unless ``url`` is an http(s) URL whose host resolves to public addresses only
    (any address, with ``allow_private``); the addresses checked (none with ``allow_private``:
    nothing to pin)."""
    host, port = parse(url)
    if allow_private:
        return []
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise UrlRefused(f"the host {host!r} does not resolve ({exc})") from None
    addresses = sorted({str(info[4][0]) for info in infos})
    refused = [a for a in addresses if not is_public(a)]
    if refused or not addresses:
        raise UrlRefused(
            f"the host {host!r} resolves to a loopback, private, link-local, multicast or "
            f"reserved address ({', '.join(refused)}); set PARLEY_WEBHOOK_ALLOW_PRIVATE=true "
            "to allow it"
        )
    return addresses
