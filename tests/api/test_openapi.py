"""The committed OpenAPI document matches the app (regenerate with `make openapi`)."""

from __future__ import annotations

import json
from pathlib import Path

from app.main import TAGS
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


def test_the_references_sections_are_every_tag_in_their_order() -> None:
    """The routes are included in matching order (streams first, app/main.py); the reference
    lists its sections in ``TAGS``' order, and a router with a new tag must be listed there."""
    document = openapi_document()
    used = {
        tag
        for operations in document["paths"].values()
        for operation in operations.values()
        for tag in operation.get("tags", [])
    }
    listed = [section["name"] for section in document["tags"]]
    assert listed == list(TAGS)
    assert used == set(TAGS)
