"""The container's health check: ``python -m app.healthcheck [base URL]``.

Standard library only (it runs in the image's HEALTHCHECK and compose's). Exits 0 when
``/healthz`` and ``/readyz`` both answer 200, else 1 with one line saying which did not.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8000"
TIMEOUT_SECONDS = 3.0


def check(base_url: str) -> str | None:
    """None when healthy and ready, else what is wrong."""
    for path in ("/healthz", "/readyz"):
        try:
            with urllib.request.urlopen(base_url + path, timeout=TIMEOUT_SECONDS):
                pass
        except urllib.error.HTTPError as exc:
            return f"{path}: HTTP {exc.code}"
        except OSError as exc:
            return f"{path}: {exc}"
    return None


def main(argv: list[str]) -> int:
    problem = check((argv[1] if len(argv) > 1 else DEFAULT_URL).rstrip("/"))
    if problem is not None:
        print(f"parley unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
