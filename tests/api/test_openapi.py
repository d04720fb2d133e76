"""The committed OpenAPI document matches the app (regenerate with `make openapi`)."""

from __future__ import annotations

import json
from pathlib import Path

from app.openapi_export import openapi_document, render

DOCUMENT = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


def test_committed_openapi_matches_the_app() -> None:
    committed = json.loads(DOCUMENT.read_text(encoding="utf-8"))
    assert committed == json.loads(render(openapi_document())), (
        "openapi/openapi.json is out of date: run `make openapi`"
    )


def test_every_route_of_the_design_is_documented() -> None:
    paths = openapi_document()["paths"]
    expected = {
        "/conversations": {"get", "post"},
        "/conversations/{conversation_id}": {"get", "delete"},
        "/conversations/{conversation_id}/deltas": {"post"},
        "/conversations/{conversation_id}/messages": {"get"},
        "/conversations/{conversation_id}/context": {"get"},
        "/conversations/{conversation_id}/clear": {"post"},
        "/conversations/{conversation_id}/stream": {"get", "post"},
        "/conversations/{conversation_id}/cancel": {"post"},
    }
    for path, methods in expected.items():
        assert methods <= set(paths[path]), path
