"""Log lines that say which request, conversation and run they belong to; text or JSON.

Imports the standard library only. The request middleware opens a ``LogContext`` per request
(``start_request``); the runs layer adds its ids (``bind``); a filter on Parley's handler copies
them onto every record, uvicorn's included. ``configure_logging`` installs that handler on the
root logger (once: calling it again replaces it) and routes uvicorn's loggers through it.
``uvicorn-logging.json`` (uvicorn's ``--log-config``) does the same for a process that never
builds the app: the parent of ``--workers N``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

LogFormat = Literal["text", "json"]

_UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")
# Loggers whose INFO lines say nothing to an operator: Alembic's plugin set-up, seven lines the
# first time /readyz reads the schema's revision.
_QUIET_LOGGERS = ("alembic.runtime.plugins",)
_CONTEXT_FIELDS = ("request_id", "conversation_id", "run_id")
# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's copy of the message with terminal colours
}


@dataclass
class LogContext:
    """The ids of what is being done; shared (not copied) by the tasks a request starts."""

    request_id: str | None = None
    conversation_id: str | None = None
    run_id: str | None = None
    scope: Mapping[str, Any] | None = None
    """The ASGI scope: its ``path_params`` name the conversation once the route is matched."""

    def ids(self) -> dict[str, str | None]:
        conversation = self.conversation_id
        if conversation is None and self.scope is not None:
            conversation = self.scope.get("path_params", {}).get("conversation_id")
        return {
            "request_id": self.request_id,
            "conversation_id": conversation,
            "run_id": self.run_id,
        }


_current: ContextVar[LogContext | None] = ContextVar("parley_log_context", default=None)


def start_request(
    request_id: str, scope: Mapping[str, Any] | None = None
) -> Token[LogContext | None]:
    """Open the context of one request; pass the token to ``end_request`` when it is done."""
    return _current.set(LogContext(request_id=request_id, scope=scope))


def end_request(token: Token[LogContext | None]) -> None:
    _current.reset(token)


def current_request_id() -> str | None:
    context = _current.get()
    return context.request_id if context is not None else None


def bind(*, conversation_id: str | None = None, run_id: str | None = None) -> None:
    """Name the conversation and run in the current context (opening one outside a request)."""
    context = _current.get()
    if context is None:
        context = LogContext()
        _current.set(context)
    if conversation_id is not None:
        context.conversation_id = conversation_id
    if run_id is not None:
        context.run_id = run_id


class ContextFilter(logging.Filter):
    """Copies the current context's ids onto each record (``None`` outside any)."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _current.get()
        ids = context.ids() if context is not None else dict.fromkeys(_CONTEXT_FIELDS)
        for name, value in ids.items():
            if getattr(record, name, None) is None:
                setattr(record, name, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, the context ids that are known,
    and the fields a call passed with ``extra=`` (provider, status, code, attempt…)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in vars(record).items():
            if name not in _STANDARD and value is not None:
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """``time level [logger] [request id] message``; ``-`` where no request is known."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s [%(name)s] [%(request_id)s] %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, "request_id", None) is None:
            record.request_id = "-"
        return super().format(record)


class _ParleyHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler ``configure_logging`` installs; its class marks it for replacement."""


def _handler(log_format: str, stream: TextIO | None = None) -> _ParleyHandler:
    handler = _ParleyHandler(stream or sys.stderr)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    return handler


def handler_from_environment() -> logging.Handler:
    """The handler ``PARLEY_LOG_FORMAT`` and ``PARLEY_LOG_LEVEL`` describe, for uvicorn's
    ``--log-config app/observability/uvicorn-logging.json``: under ``--workers N`` uvicorn's
    parent process logs (start, signals, a worker that died) but never builds the app, so
    ``configure_logging`` does not reach it. The workers' own lines go through that instead.
    A bad value is left to the workers, which stop on it with one line."""
    handler = _handler(os.environ.get("PARLEY_LOG_FORMAT", "text"))
    level = os.environ.get("PARLEY_LOG_LEVEL", "INFO").upper()
    handler.setLevel(level if level in logging.getLevelNamesMapping() else logging.INFO)
    return handler


def configure_logging(
    log_format: LogFormat = "text", level: str = "INFO", stream: TextIO | None = None
) -> None:
    """Send every log line (uvicorn's too) to ``stream`` (stderr) in ``log_format``."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _ParleyHandler)]:
        root.removeHandler(old)
        old.close()
    handler = _handler(log_format, stream)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in _UVICORN_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
        logger.setLevel(logging.NOTSET)  # PARLEY_LOG_LEVEL, not uvicorn's --log-level, decides
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.captureWarnings(True)  # Python's warnings too, as lines of this format (py.warnings)
