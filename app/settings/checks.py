"""Pure checks of settings' values: URLs, host patterns, origins (the standard library only)."""

from __future__ import annotations

from urllib.parse import urlsplit


def names_a_host(url: str) -> bool:
    """Whether ``url`` has a host the SDKs' HTTP client can connect to (``http://`` alone, a
    space, ``[::1`` or port 99999 fail only at the first request, or at start with a traceback)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        return False
    return bool(parts.hostname) and url.isprintable() and " " not in url


def is_host_pattern(text: str) -> bool:
    """Whether ``text`` is ``*``, a host name or address, or ``*.`` and a domain."""
    if text == "*":
        return True
    name = text.removeprefix("*.")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if not name or not name.isprintable() or any(c in name for c in " /*@?#"):
        return False
    return name.count(":") != 1  # one colon is a port; IPv6 has more


def is_origin(text: str) -> bool:
    """Whether ``text`` is a web origin as browsers send it: ``scheme://host[:port]``."""
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        return False
    return bool(
        parts.scheme
        and parts.hostname
        and "@" not in parts.netloc
        and not (parts.path or parts.query or parts.fragment)
        and text.startswith(f"{parts.scheme}://")
    )
