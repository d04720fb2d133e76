"""A real HTTP server that receives webhooks in a thread of its own, and misbehaves on request.

Each POST takes the next step of its ``plan`` (then ``ok``): ``fail`` answers 500, ``timeout``
answers 200 only after ``slow_seconds`` (past the sender's time limit), ``redirect`` answers 307
to a path of its own that would accept (a sender that followed it would be "delivered"), ``ok``
answers 204 (after ``delay_seconds``). Every request is recorded with its headers, body, what it
was answered and the sender's port; ``in_flight`` holds the ports of requests not yet answered.
``holding()`` keeps every request unanswered while a test looks at ``in_flight`` and acts on it
(kill -9 of a sender): a request seen there is then certainly not answered before the act.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    step: str
    at: float
    port: int

    @property
    def message_id(self) -> str:
        return self.headers["webhook-id"]

    def json(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.body)
        return document


class Receiver:
    """The server: ``url`` to register, ``plan`` to misbehave, ``received`` to check."""

    def __init__(
        self, plan: list[str] | None = None, slow_seconds: float = 1.5, delay_seconds: float = 0
    ) -> None:
        self.plan = list(plan or [])
        self.slow_seconds = slow_seconds
        self.delay_seconds = delay_seconds
        self.received: list[Received] = []
        self.in_flight: dict[int, str] = {}
        self._lock = threading.Condition()
        self._held = False
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hooks"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next_step(self) -> str:
        with self._lock:
            return self.plan.pop(0) if self.plan else "ok"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                step = "ok" if self.path.endswith("/moved") else receiver._next_step()
                headers = {k.lower(): v for k, v in self.headers.items()}
                port = int(self.client_address[1])
                with receiver._lock:
                    receiver.received.append(
                        Received(self.path, headers, body, step, time.monotonic(), port)
                    )
                    receiver.in_flight[port] = headers.get("webhook-id", "")
                try:
                    self._answer(step, port)
                finally:
                    with receiver._lock:
                        receiver.in_flight.pop(port, None)

            def _answer(self, step: str, port: int) -> None:
                if step == "timeout":
                    time.sleep(receiver.slow_seconds)
                elif step == "ok":
                    time.sleep(receiver.delay_seconds)
                with receiver._lock:  # answered from here on: out of in_flight, unless held
                    receiver._lock.wait_for(lambda: not receiver._held)
                    receiver.in_flight.pop(port, None)
                if step == "fail":
                    self.send_response(500)
                elif step == "redirect":
                    self.send_response(307)
                    self.send_header("Location", "/hooks/moved")
                else:
                    self.send_response(200 if step == "timeout" else 204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    @contextmanager
    def holding(self) -> Iterator[dict[int, str]]:
        """``in_flight`` as it stands, with no request answered until the block ends."""
        with self._lock:
            self._held = True
            flying = dict(self.in_flight)
        try:
            yield flying
        finally:
            with self._lock:
                self._held = False
                self._lock.notify_all()

    # --- what the tests read --------------------------------------------------------------------

    def accepted(self) -> list[Received]:
        """The requests answered 2xx in time (``ok``; not a redirect, failure or timeout)."""
        with self._lock:
            return [r for r in self.received if r.step == "ok" and not r.path.endswith("/moved")]

    def verified(self, secret: str) -> Iterator[dict[str, Any]]:
        """The accepted bodies, each verified with the Standard Webhooks library."""
        for request in self.accepted():
            yield Webhook(secret).verify(request.body, request.headers)
