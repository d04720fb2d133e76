"""Write the OpenAPI document: ``python -m app.openapi_export openapi/openapi.json``.

``tests/api/test_openapi.py`` fails when the committed document drifts from the app. It sits
beside ``app.main``, not in ``app.api``: it builds the whole application, which imports the API.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from app.main import create_app
from app.settings import Settings


def openapi_document() -> dict[str, Any]:
    """The app's OpenAPI document, independent of the environment."""
    settings = Settings(database_url="sqlite+aiosqlite:///:memory:")
    return create_app(settings).openapi()


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    target = Path(argv[1] if len(argv) > 1 else "openapi/openapi.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render(openapi_document()), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
