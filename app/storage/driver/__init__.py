"""The fence around the database drivers: the only code in Parley that may touch private names
of SQLAlchemy, of its aiosqlite and asyncpg adapters, or of the drivers themselves.

Imports SQLAlchemy and the standard library only; the rest of app.storage uses what this
package's ``__init__`` exports, never its modules. Written for SQLAlchemy 2.1 (2.1.9 locked),
aiosqlite 0.22 and asyncpg 0.32; pyproject.toml bounds them to those series, and
tests/storage/test_driver_contract.py pins each private name and behaviour relied on here, so an
upgrade that moves one fails there, with its name, rather than on a run's stream.

- ``direct``: hot statements on the driver's cursor (``Connection._handle_dbapi_exception``,
  the asyncpg dialect's schema-cache stamp ``_invalidate_schema_cache_asof``, the compiler's
  ``_collected_params``), on asyncpg awaited on SQLAlchemy's adapted cursor and connection
  (``_prepare_and_execute``, ``_executemany``, ``_execute_mutex``, ``_connection``,
  ``_transaction``, ``_handle_exception``).
- ``savepoints``: the start groups' savepoints, sent as ``direct`` sends its statements.
- ``sqlite_inline``: SQLite on the event loop's thread, impersonating aiosqlite's connection for
  SQLAlchemy's aiosqlite adapter (which reads its ``_connection`` and calls its ``stop``).
- ``ping``: a pooled asyncpg connection pinged through SQLAlchemy's adapter.
"""

from __future__ import annotations

from typing import Any

from app.storage.driver.direct import Direct, Params, Row
from app.storage.driver.savepoints import SavepointChain
from app.storage.driver.sqlite_inline import MANY_ROWS, connector

__all__ = [
    "MANY_ROWS",
    "Direct",
    "Params",
    "Row",
    "SavepointChain",
    "connector",
    "ping",
]


def ping(dbapi_connection: Any) -> None:
    """Ping a pooled connection as SQLAlchemy's asyncpg adapter offers (``ping()``, not part of
    the DBAPI); raises what the driver raises when the connection is dead."""
    dbapi_connection.ping()
