"""A fork server for the uvicorn processes the tests start: Python, the app's modules and
uvicorn's imported once, each server forked from it.

A uvicorn process spent 1.0 s of its 1.4 s of CPU from start to stop importing modules, and the
suite starts about a hundred. This process imports them once (per pytest worker) and forks a
child per server, which runs uvicorn's own command line (``uvicorn.main``) with the server's
arguments, environment and log file: the same uvicorn, serving the same app, answering signals
as a process started with ``python -m uvicorn`` does. No thread runs here when it forks.

The protocol, one JSON document a line: the worker writes ``{"id", "argv", "env", "cwd",
"log"}``; this process answers ``{"id", "pid"}`` once it forked, and ``{"pid", "code"}`` when a
child ended (``code`` as ``Popen.returncode`` has it: negative for a signal). It ends when its
input does.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import sys
from typing import Any


def _serve(request: dict[str, Any]) -> None:
    """In the child: become the server the request describes, and exit as it exits. Its
    signals are as a new Python process has them (this one never changes them): SIGPIPE
    ignored, as Python starts, so that a write to a gone client fails rather than kills it."""
    log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.closerange(3, 1024)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    code = 0
    try:
        import uvicorn.main

        sys.argv = ["uvicorn", *request["argv"]]
        uvicorn.main.main(args=request["argv"], prog_name="uvicorn")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _reap(out: Any) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        out.write(json.dumps({"pid": pid, "code": os.waitstatus_to_exitcode(status)}) + "\n")
        out.flush()


PRELOADED = ("uvicorn.main", "uvicorn.loops.asyncio", "app.main", "app.server")
"""What each server would import, imported once, here."""


def main() -> None:
    for module in PRELOADED:
        importlib.import_module(module)
    inbox, out = sys.stdin.buffer, sys.stdout
    pending = b""
    while True:
        readable, _, _ = select.select([inbox], [], [], 0.02)
        _reap(out)
        if not readable:
            continue
        chunk = os.read(inbox.fileno(), 65536)
        if not chunk:
            return
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            request = json.loads(line)
            out.flush()
            pid = os.fork()
            if pid == 0:
                _serve(request)
            out.write(json.dumps({"id": request["id"], "pid": pid}) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
