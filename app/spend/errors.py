"""The refusals of a key's limits (app/runs/codes.py gives their codes, app/api/problems.py
their 429 with ``Retry-After``).

Imports nothing of the app.
"""

from __future__ import annotations

import math


class SpendError(Exception):
    """A refusal of app/spend (app/api/problems.py answers each as problem+json)."""


class LimitExceeded(SpendError):
    """A key's limit refuses the request; ``retry_after`` seconds until it may pass."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = max(1, math.ceil(retry_after))


class RateLimited(LimitExceeded):
    """The key made its requests of this minute."""


class TooManyRuns(LimitExceeded):
    """The key has as many runs going as it may."""


class BudgetExceeded(LimitExceeded):
    """The key spent its output tokens of the day or its dollars of the month."""


class KeyNotFound(SpendError):
    """No API key with this id."""

    def __init__(self, key_id: str) -> None:
        super().__init__(f"no key {key_id!r}")
        self.key_id = key_id


class KeyRefused(SpendError):
    """No valid key: none given where one is required, an unknown one, revoked or expired."""
