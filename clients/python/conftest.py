# The package's pytest fixtures for its own tests, from the checkout (an installed package loads
# them by itself through its pytest11 entry point).
from memd.pytest_plugin import memd_client, memd_server, pytest_configure  # noqa: F401
