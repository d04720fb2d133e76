"""The ASGI application factory: ``uvicorn --factory app.main:create_app``.

Builds the services from the settings (nothing reads the environment at import time) and
mounts the routers and the playground (app.api.routes), the problem handlers and the middleware
(app.api.middleware: HEAD for every GET, the body-size limit, the allowed hosts, the Origin check
and CORS, the request ids and metrics). A bad setting ends the process with status 2 and one
line (``load_settings``).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager

from anyio.lowlevel import checkpoint
from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from app.api.contract import document_contract
from app.api.event_stream import OpenStreams
from app.api.middleware.browser import install_browser_support
from app.api.middleware.head import HeadAsGet
from app.api.middleware.hosts import AllowedHosts
from app.api.middleware.limits import BodySizeLimit
from app.api.middleware.observe import RequestObservability
from app.api.middleware.strict_json import StrictJsonBodies
from app.api.problems import install_problem_handlers
from app.api.routes import (
    admin,
    ai_sdk,
    conversations,
    files,
    history,
    operations,
    providers,
    streams,
    usage,
    webhooks,
)
from app.api.routes.playground import mount_playground
from app.observability.logs import configure_logging
from app.observability.metrics import process_exited
from app.runs.services import Services
from app.settings import Settings, load_settings
from app.storage.schema import migrate_to_head

DESCRIPTION = """Parley keeps LLM conversations and runs them over HTTP and Server-Sent Events.

Create a conversation, post delta bundles to it (messages — injected assistant messages
included — and config patches), and stream the model's reply from `…/stream`. Errors are
`application/problem+json`. Send `Authorization: Bearer <token>` to keep your conversations
to yourself: each token sees only its own.
"""


log = logging.getLogger(__name__)
YOUNG_GC_THRESHOLD = 20_000
"""Allocations between two collections of the youngest generation while serving (Python's
default is 700): most of a stream's objects die by reference count before a collection would
scan them, and the collector runs far less often (docs/performance.md, "Garbage collection")."""
# The routes that load a whole conversation get PARLEY_MAX_IMPORT_BYTES, not PARLEY_MAX_BODY_BYTES.
IMPORT_PATHS = ("/conversations", "/conversations/import", "/ai-sdk/chat")
FILES_PATH = "/files"  # uploads: multipart, up to PARLEY_FILE_MAX_*_BYTES (docs/files.md)


def _exit_flag() -> Callable[[], bool]:
    """Whether the server was told to stop (SIGTERM, SIGINT): the flag of the uvicorn server
    whose signal handler is installed (uvicorn installs it before the app starts). Found once
    when there is one: ``signal.getsignal`` makes an enum of the handler at each call, and
    every start asks (4% of a herd of starts' CPU)."""
    found = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)

    def exiting() -> bool:
        server = found or getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
        return bool(getattr(server, "should_exit", False))

    return exiting


class _ServingHeap:
    """While an app serves, the objects start-up made (modules, the SDKs' types, the app) are
    moved out of the cyclic collector's reach (``gc.freeze``), and the youngest generation is
    collected every ``YOUNG_GC_THRESHOLD`` allocations. Without this a full collection walked
    the ~300,000 objects of start-up, 60–170 ms with the event loop stopped, every few seconds
    under load; every stream waited for it. (A collection at that point finds some ten
    unreachable objects: none is made before freezing.)

    Counted: the first app to serve in a process changes the collector, the last to stop puts it
    back, whichever order they stop in (tests run several, some on threads of their own).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._serving = 0
        self._threshold = gc.get_threshold()

    @contextmanager
    def serving(self) -> Iterator[None]:
        with self._lock:
            if self._serving == 0:
                self._threshold = gc.get_threshold()
                gc.freeze()
                gc.set_threshold(YOUNG_GC_THRESHOLD, *self._threshold[1:])
            self._serving += 1
        try:
            yield
        finally:
            with self._lock:
                self._serving -= 1
                if self._serving == 0:
                    gc.set_threshold(*self._threshold)
                    gc.unfreeze()


_heap = _ServingHeap()


async def _drain_on_exit_signal(
    services: Services, streams: OpenStreams, exiting: Callable[[], bool]
) -> None:
    """On SIGTERM, drain the runs while their streams are still open (uvicorn ends the
    lifespan only once every stream has ended), and end the streams still open after the
    drain's time (followers of runs on other processes)."""
    # Flags set by a signal handler: there is nothing to await.
    while not exiting():  # noqa: ASYNC110
        await asyncio.sleep(0.1)
    log.info("shutting down: draining %d runs", len(services.manager.all()))
    grace = services.settings.shutdown_drain_seconds
    await asyncio.gather(services.drain(), streams.close(grace))


async def _warm_up() -> None:
    """Do at start-up what the first request would otherwise do: anyio loads its event-loop
    backend on first use (the first stream of a new process took 20-30 ms more for it, and its
    provider's client tens more: ``Services.start``). The routes need none: each was built
    when its module was imported (``_include_routes``)."""
    await checkpoint()  # loads anyio's backend


def _lifespan(
    settings: Settings, services: Services
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start-up and shutdown: migrate (if asked), start the services, warm up, drain on SIGTERM."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.migrate_on_start:
            await migrate_to_head(settings.database_url)
        await services.start()
        exiting = _exit_flag()
        services.manager.exit_requested = exiting  # a run asked for after SIGTERM: 503 at once
        await _warm_up()
        watcher = asyncio.create_task(
            _drain_on_exit_signal(services, app.state.streams, exiting), name="parley-sigterm"
        )
        try:
            with _heap.serving():
                yield
        finally:
            watcher.cancel()
            await services.stop()
            process_exited()

    return lifespan


TAGS = (
    "conversations",
    "history",
    "runs",
    "operations",
    "providers",
    "ai-sdk",
    "files",
    "usage",
    "admin",
    "webhooks",
)
"""The API reference's sections, in this order (the routes' order is the matching's)."""


def _include_routes(app: FastAPI) -> None:
    # The routers' routes are put in the app's own list, not included: FastAPI builds an
    # included router's routes (their parameters and validators) again for each app that
    # includes it, on the first request that walks them, and asks every included router on
    # every request whether its routes changed. Each route of a module's router is built once,
    # when the module is imported, and every app serves that same route. The stream routes
    # first: the routes are tried in turn, and a herd's starts are the requests whose every
    # microsecond counts (docs/performance.md).
    for module in (
        streams,
        conversations,
        history,
        operations,
        providers,
        ai_sdk,
        files,
        usage,
        admin,
        webhooks,
    ):
        app.router.routes.extend(module.router.routes)
    mount_playground(app)


def _add_middleware(app: FastAPI, settings: Settings) -> None:
    """The pure-ASGI layers, innermost first (each ``add_middleware`` wraps the ones before)."""
    app.add_middleware(HeadAsGet)  # innermost: every other layer sees the HEAD as sent
    # inside the size limit: it reads counted bodies (an upload's form it leaves to the route)
    app.add_middleware(StrictJsonBodies, form_paths=(FILES_PATH,))
    limits = {path: settings.max_import_bytes for path in IMPORT_PATHS}
    limits[FILES_PATH] = settings.file_upload_limit()
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes, per_path=limits)
    install_browser_support(app, settings)  # the Origin check, CORS, the docs pages' policy
    # before the Origin check, which takes Host for Parley's own origin
    app.add_middleware(AllowedHosts, hosts=settings.allowed_host_list())
    # outermost: request ids, metrics and the 500 for every answer, the refusals' included
    app.add_middleware(RequestObservability)


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the application from ``settings`` (default: read from the environment)."""
    settings = settings or load_settings()
    configure_logging(settings.log_format, settings.log_level)
    services = Services.from_settings(settings)
    # Swagger UI and ReDoc with their assets served by Parley itself: /docs works offline.
    app = FastAPIOffline(
        title="Parley",
        version="0.1.0",
        description=DESCRIPTION,
        openapi_tags=[{"name": tag} for tag in TAGS],
        lifespan=_lifespan(settings, services),
        # FastAPI's OpenTelemetry hooks, asked on every request whether a provider is set:
        # Parley's metrics and request ids are its own (app/observability).
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.settings = settings
    app.state.services = services
    app.state.streams = OpenStreams(settings.sse_ping_seconds, settings.sse_send_timeout_seconds)
    install_problem_handlers(app)
    _include_routes(app)
    _add_middleware(app, settings)
    # last: it documents every route included above
    document_contract(
        app,
        max_text_chars=settings.max_text_chars,
        max_bundle_messages=settings.max_bundle_messages,
        server_tools=sorted(services.configs.server_tools),
    )
    return app
