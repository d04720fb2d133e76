"""The SSRF guard: a webhook URL must be http(s) and its host must resolve only to public
addresses, unless ``PARLEY_WEBHOOK_ALLOW_PRIVATE`` says otherwise.

Imports the standard library and httpx (the client that sends: a URL it cannot parse is
refused here, not found out by the deliverer). Checked when an endpoint is registered or
changed, and again before each delivery attempt (the name's addresses may have changed
since). A name that resolves between the check and the connection (DNS rebinding within
seconds) is not covered.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

import httpx

MAX_URL_CHARS = 2048
RESOLVE_SECONDS = 5.0


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
    try:
        parts.hostname.encode("idna")
        _ = httpx.URL(url).host  # what delivers it: stricter IDNA (``xn--`` with nothing after)
    except (UnicodeError, httpx.InvalidURL):
        raise UrlRefused(f"{parts.hostname!r} is not a host name") from None
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
