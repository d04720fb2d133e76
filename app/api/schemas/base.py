"""What the schemas share: limits, the served-model config, small schema helpers.

May import pydantic only.
"""

from __future__ import annotations

from pydantic import ConfigDict, JsonValue

TOOL_NAME = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
MAX_INDEX = 2_147_483_647  # the largest message index or count a request may name


def empty_object_schema() -> dict[str, JsonValue]:
    return {"type": "object", "properties": {}}


# A response model: every field is always served (a default too), so the document marks
# every field required, and a generated client reads it without an "unset" case.
SERVED = ConfigDict(json_schema_serialization_defaults_required=True)
