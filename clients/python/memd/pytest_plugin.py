"""pytest fixtures for tests against a real memd: ``memd_server`` (and ``memd_client``).

Loaded by itself when the package is installed (the ``pytest11`` entry point); from a checkout,
add ``-p memd.pytest_plugin`` or ``pytest_plugins = ["memd.pytest_plugin"]`` in a conftest.py.

    def test_remembers(memd_client):
        memd_client.store(namespace="app", entity="u1", content="likes tea", infer=False)

    @pytest.mark.memd(model=[{"operations": [{"fact": "User likes tea", "decision": "ADD"}]}])
    def test_smart_store(memd_server):
        memd_server.client.store(namespace="app", entity="u1", content="I like tea")
        assert len(memd_server.model_requests) == 1

The marker's keyword arguments go to ``memd.testing.start_memd`` (``model``, ``args``, ``env``,
``bin``). Each test gets its own server, stopped and removed after it.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from ._client import Memd
from .testing import MemdServer, start_memd


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "memd(**options): options of start_memd for the memd_server fixture")


@pytest.fixture
def memd_server(request: pytest.FixtureRequest) -> Iterator[MemdServer]:
    """A throwaway memd for one test (see ``memd.testing.start_memd``)."""
    marker = request.node.get_closest_marker("memd")
    server = start_memd(**(marker.kwargs if marker else {}))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def memd_client(memd_server: MemdServer) -> Memd:
    """A ``Memd`` client with the root key of ``memd_server``."""
    return memd_server.client
