"""``python -m app.cli keys create|list|revoke``: API keys in the database from a shell, on the
database ``PARLEY_DATABASE_URL`` names (docs/spend.md).

May import app.settings, app.storage and app.spend. ``create`` prints the token once (the table
keeps its hash); the others print JSON lines. Exit status 2 for a bad argument or setting.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from app.settings import load_settings
from app.spend import KeyNotFound, KeyRecord, Limits
from app.spend.keys import LIMIT_NAMES, create_key, list_keys, revoke_key
from app.storage import Database


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m app.cli", description=__doc__)
    topics = parser.add_subparsers(dest="topic", required=True)
    keys = topics.add_parser("keys", help="API keys in the database")
    actions = keys.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="make a key and print its token (once)")
    create.add_argument("--name", required=True)
    create.add_argument("--budget-usd", type=float, help="US dollars a month")
    create.add_argument("--output-tokens-per-day", type=int)
    create.add_argument("--requests-per-minute", type=int)
    create.add_argument("--max-concurrent-runs", type=int)
    create.add_argument("--expires-in-days", type=float)
    actions.add_parser("list", help="every key, one JSON object a line (never a token)")
    revoke = actions.add_parser("revoke", help="revoke a key by its id")
    revoke.add_argument("key_id")
    return parser


def _key_json(key: KeyRecord) -> str:
    out: dict[str, Any] = {
        "id": key.id,
        "name": key.name,
        "prefix": key.prefix,
        "created_at": key.created_at.isoformat(),
        "last_used_at": key.last_used_at and key.last_used_at.isoformat(),
        "expires_at": key.expires_at and key.expires_at.isoformat(),
        "revoked_at": key.revoked_at and key.revoked_at.isoformat(),
        **{name: getattr(key.limits, name) for name in LIMIT_NAMES},
    }
    return json.dumps(out)


def _limits(args: argparse.Namespace) -> Limits:
    limits = Limits(
        requests_per_minute=args.requests_per_minute,
        max_concurrent_runs=args.max_concurrent_runs,
        output_tokens_per_day=args.output_tokens_per_day,
        budget_usd_per_month=args.budget_usd,
    )
    if any(v is not None and v < (0 if n.startswith("budget") else 1) for n, v in _items(limits)):
        raise SystemExit("parley: a limit must be positive (a budget may be 0)")
    return limits


def _items(limits: Limits) -> list[tuple[str, float | int | None]]:
    return [(name, getattr(limits, name)) for name in LIMIT_NAMES]


async def _run(args: argparse.Namespace) -> int:
    database = Database(load_settings().database_url)
    try:
        async with database.transaction() as session:
            if args.action == "create":
                days = args.expires_in_days
                expires = datetime.now(UTC) + timedelta(days=days) if days else None
                key, token = await create_key(session, args.name, _limits(args), expires)
                print(_key_json(key))
                print(token)
            elif args.action == "list":
                for key in await list_keys(session):
                    print(_key_json(key))
            else:
                print(_key_json(await revoke_key(session, args.key_id)))
    except KeyNotFound as exc:
        print(f"parley: {exc}", file=sys.stderr)
        return 1
    finally:
        await database.dispose()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return asyncio.run(_run(args))


if __name__ == "__main__":
    raise SystemExit(main())
