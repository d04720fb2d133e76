"""What the schemas share: limits, the served-model config, small schema helpers.

May import pydantic only.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import ConfigDict, GetCoreSchemaHandler, JsonValue
from pydantic_core import PydanticCustomError, core_schema

T = TypeVar("T")

TOOL_NAME = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
MAX_INDEX = 2_147_483_647  # the largest message index or count a request may name


def empty_object_schema() -> dict[str, JsonValue]:
    return {"type": "object", "properties": {}}


# A response model: every field is always served (a default too), so the document marks
# every field required, and a generated client reads it without an "unset" case.
SERVED = ConfigDict(json_schema_serialization_defaults_required=True)


class _NullRefused:
    """Refuse an explicit ``null`` before the value's own validation, which no longer takes
    ``None``: a left-out field keeps its default (defaults are not validated)."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        schema = handler(source)
        if schema["type"] == "nullable":
            schema = schema["schema"]
        return core_schema.no_info_before_validator_function(_not_null, schema)


def _not_null(value: object) -> object:
    if value is None:
        raise PydanticCustomError(
            "null_refused", "Input should not be null: leave the field out to keep its value"
        )
    return value


Omittable = Annotated[T | None, _NullRefused()]
"""A patch's field that may be left out (then None: it stays as it is) but not sent as
``null`` (a 422 naming it, rather than a null silently ignored): the document shows the value's
type alone, not nullable."""
