"""The API tests' fixtures (tests/api/conftest.py), for the files' tests too."""

from tests.api.conftest import client, live_server, settings

__all__ = ["client", "live_server", "settings"]
