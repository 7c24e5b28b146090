# The package's pytest fixtures for its own tests, from the checkout (an installed package loads
# them by itself through its pytest11 entry point).
import faulthandler

import pytest

from memd.pytest_plugin import memd_client, memd_server, pytest_configure  # noqa: F401

# Every wait in these tests is bounded: a test still running after this many seconds (a stream
# that never yields, a server that never answers) ends the run, with every thread's traceback.
TEST_LIMIT_SECONDS = 240


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    faulthandler.dump_traceback_later(TEST_LIMIT_SECONDS, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
