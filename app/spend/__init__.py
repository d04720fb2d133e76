"""Spend under control (docs/spend.md): API keys in the database, their limits checked
atomically in SQL, the usage ledger and its cost.

A room between the runs and storage layers: may import storage, the domain, settings and
observability; the runs layer (a run's start and ending) and the API use it.
"""

from app.spend.access import ANONYMOUS, Grant, KeyAccess
from app.spend.errors import (
    BudgetExceeded,
    KeyNotFound,
    KeyRefused,
    LimitExceeded,
    RateLimited,
    SpendError,
    TooManyRuns,
)
from app.spend.keys import KeyRecord, Limits
from app.spend.ledger import Charge, Payer
from app.spend.pricing import PriceTable, load_prices

__all__ = [
    "ANONYMOUS",
    "BudgetExceeded",
    "Charge",
    "Grant",
    "KeyAccess",
    "KeyNotFound",
    "KeyRecord",
    "KeyRefused",
    "LimitExceeded",
    "Limits",
    "Payer",
    "PriceTable",
    "RateLimited",
    "SpendError",
    "TooManyRuns",
    "load_prices",
]
