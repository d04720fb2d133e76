"""Resident memory of a Parley process while it takes one large upload (issue 27).

Starts uvicorn (one worker, a new migrated SQLite database unless ``--database-url``), uploads
a small file to warm it up, resets the process's peak RSS (``/proc/<pid>/clear_refs``), then
uploads a ``--size-mib`` PDF (default 30) from disk with ``POST /files`` and reads the peak
(``VmHWM``). The growth must stay under twice the file: the upload is spooled to disk by the
form parser and streamed to the store 1 MiB at a time, never held whole.

Run by hand: ``.venv/bin/python bench/upload_memory.py [--size-mib 30] [--database-url URL]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.relay import free_port
from bench.start_cpu import wait_for_port
from bench.stream import PY, ROOT, migrate

MIB = 1 << 20


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def write_pdf(path: Path, size: int) -> None:
    """A PDF of ``size`` bytes: a header, random stream data, a trailer."""
    head = b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog >>\nendobj\nstream\n"
    tail = b"\nendstream\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"
    with path.open("wb") as out:
        out.write(head)
        left = size - len(head) - len(tail)
        while left > 0:
            piece = os.urandom(min(MIB, left)).replace(b"PK", b"pk")
            out.write(piece)
            left -= len(piece)
        out.write(tail)


def upload(url: str, path: Path, name: str) -> dict[str, object]:
    with path.open("rb") as fh:
        response = httpx.post(
            f"{url}/files",
            files={"file": (name, fh, "application/pdf")},
            headers={"Authorization": "Bearer bench"},
            timeout=300,
        )
    response.raise_for_status()
    body: dict[str, object] = response.json()
    return body


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mib", type=float, default=30)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        database_url = args.database_url or f"sqlite+aiosqlite:///{tmp}/parley.db"
        migrate(database_url)
        small, large = Path(tmp, "small.pdf"), Path(tmp, "large.pdf")
        write_pdf(small, 64 * 1024)
        size = int(args.size_mib * MIB)
        write_pdf(large, size)
        port = free_port()
        env = {
            **os.environ,
            "PARLEY_DATABASE_URL": database_url,
            "PARLEY_LOG_LEVEL": "WARNING",
        }
        server = subprocess.Popen(
            [PY, "-m", "uvicorn", "--factory", "app.main:create_app", "--port", str(port)],
            cwd=ROOT,
            env=env,
        )
        try:
            wait_for_port(port)
            url = f"http://127.0.0.1:{port}"
            upload(url, small, "warm-up.pdf")
            time.sleep(0.5)
            before = status_kib(server.pid, "VmRSS")
            Path(f"/proc/{server.pid}/clear_refs").write_text("5")  # resets VmHWM to VmRSS
            started = time.perf_counter()
            body = upload(url, large, "large.pdf")
            seconds = time.perf_counter() - started
            peak = status_kib(server.pid, "VmHWM")
            after = status_kib(server.pid, "VmRSS")
        finally:
            server.terminate()
            server.wait(10)
    growth = (peak - before) * 1024
    print(f"database:           {database_url.split(':')[0]}")
    print(f"file:               {size / MIB:.1f} MiB ({body['size']} bytes stored)")
    print(f"upload:             {seconds:.2f} s")
    print(f"RSS before:         {before / 1024:.1f} MiB")
    print(f"RSS peak (VmHWM):   {peak / 1024:.1f} MiB")
    print(f"RSS after:          {after / 1024:.1f} MiB")
    print(f"peak growth:        {growth / MIB:.1f} MiB = {growth / size:.2f}× the file")
    return 0 if growth < 2 * size else 1


if __name__ == "__main__":
    raise SystemExit(main())
