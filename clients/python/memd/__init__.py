"""memd: a Python client for memd, the memory service for AI agents.

    from memd import Memd

    memd = Memd("http://127.0.0.1:8420", key="memd_...")
    memd.store(namespace="acme", entity="user-1", content="I like tea", infer=False)

``Memd`` (sync) and ``AsyncMemd`` (asyncio) cover every endpoint; answers are typed by the
TypedDicts of ``memd.types``; errors are ``MemdError``. ``memd.tools`` gives memory as tools for
an agent (OpenAI function calling); ``memd.testing`` starts a throwaway memd for tests.
"""

from ._async import AsyncEventStream, AsyncMemd
from ._client import EventStream, Memd
from ._common import MemdError, StreamEvent

__version__ = "0.1.0"

__all__ = ["Memd", "AsyncMemd", "MemdError", "StreamEvent", "EventStream", "AsyncEventStream", "__version__"]
