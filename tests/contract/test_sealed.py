"""The suite is sealed from the network: no provider variable, no connection beyond loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from pytest_socket import SocketConnectBlockedError

from app.settings import Settings


def test_provider_variables_are_gone() -> None:
    leaked = [n for n in os.environ if n.startswith(("OPENAI_", "ANTHROPIC_"))]
    assert leaked == []
    settings = Settings()
    assert settings.openai_api_key is None and settings.anthropic_api_key is None


def test_a_connection_beyond_loopback_is_refused() -> None:
    refused = pytest.raises(SocketConnectBlockedError)
    with socket.socket() as s, pytest.warns(UserWarning, match="192.0.2.1"), refused:
        s.connect(("192.0.2.1", 443))  # TEST-NET-1: never answered, and never tried


def test_loopback_stays_open() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname(), timeout=2):
            pass


def test_a_started_process_inherits_the_sealed_environment() -> None:
    code = "import os; print(sorted(n for n in os.environ if 'OPENAI' in n or 'ANTHROPIC' in n))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
