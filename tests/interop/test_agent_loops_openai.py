"""The agent-loop suite through openai-python: hand-written loops over Chat Completions and Responses.

Each class runs every stage and round-trip case, whole and streamed, against one loop
of ``sdk_loops``: the sync and async clients over HTTP/1.1, and over h2c with httpx's
HTTP/2 prior knowledge. Without ``CONFORMANCE_LONG_TESTS=1`` the module runs only its
``QUICK`` subset; name a class to run it whole.
"""

from __future__ import annotations

import unittest
from typing import Any, Optional

from conformance.gate import AgentLoopConformanceTestCase
from conformance.wires.openai_chat import openai_chat_wire
from conformance.wires.openai_responses import openai_responses_wire

from ..test_provider_support import AsyncioDebugOff
from ._support import HTTPX_H2_KEEPS_STREAM
from .sdk_loops import (
    HAVE_OPENAI,
    AsyncOpenAIChatLoop,
    AsyncOpenAIResponsesLoop,
    OpenAIChatLoop,
    OpenAIResponsesLoop,
    quick_suite,
    share,
    warm_up,
)

SKIP_REASON = "openai is not installed: pip install openai"
#: An async loop over h2c: httpx leaves the HTTP/2 stream open when its reader is cancelled.
ASYNC_H2_SKIPS = {"cancel": HTTPX_H2_KEEPS_STREAM}
#: What runs without CONFORMANCE_LONG_TESTS=1: each sync loop over HTTP/1.1 on every stage
#: besides the faults, a third of those cases each (the Anthropic module runs the last
#: third, sdk_loops.share), and a few fault stages, different ones for each loop.
QUICK = {
    "OpenAIChatSyncLoop": [
        *share(0),
        "corrupt-arguments/stream",
        "reset-after-first-fragment/stream",
        "rate-limited/chat",
        "ambiguous-retry/stream",
    ],
    "OpenAIResponsesSyncLoop": [
        *share(1),
        "corrupt-arguments/stream",
        "close-mid-event/stream",
        "reset-after-execution/stream",
        "retry-after/chat",
    ],
}


def load_tests(loader: unittest.TestLoader, tests: unittest.TestSuite, pattern: Optional[str]) -> Any:
    return quick_suite(tests, QUICK)


#: The suites here run without asyncio's debug mode unless CONFORMANCE_LONG_TESTS=1.
_ASYNCIO_DEBUG = AsyncioDebugOff()


def setUpModule() -> None:
    _ASYNCIO_DEBUG.start()
    if HAVE_OPENAI:
        warm_up("openai-chat")
        warm_up("openai-responses")


def tearDownModule() -> None:
    _ASYNCIO_DEBUG.stop()


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIChatSyncLoop(AgentLoopConformanceTestCase, unittest.TestCase):
    """``OpenAI().chat.completions`` in a sync loop, over HTTP/1.1."""

    wire = openai_chat_wire

    def create_loop(self, url: str) -> OpenAIChatLoop:
        return OpenAIChatLoop(url, http2=self.http2)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIChatSyncH2CLoop(OpenAIChatSyncLoop):
    """The sync Chat Completions loop over h2c."""

    http2 = True


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIChatAsyncLoop(AgentLoopConformanceTestCase, unittest.TestCase):
    """``AsyncOpenAI().chat.completions`` in an async loop, over HTTP/1.1."""

    wire = openai_chat_wire

    def create_loop(self, url: str) -> AsyncOpenAIChatLoop:
        return AsyncOpenAIChatLoop(url, http2=self.http2)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIChatAsyncH2CLoop(OpenAIChatAsyncLoop):
    """The async Chat Completions loop over h2c."""

    http2 = True
    skip = ASYNC_H2_SKIPS


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIResponsesSyncLoop(AgentLoopConformanceTestCase, unittest.TestCase):
    """``OpenAI().responses`` in a sync loop, over HTTP/1.1."""

    wire = openai_responses_wire

    def create_loop(self, url: str) -> OpenAIResponsesLoop:
        return OpenAIResponsesLoop(url, http2=self.http2)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIResponsesSyncH2CLoop(OpenAIResponsesSyncLoop):
    """The sync Responses loop over h2c."""

    http2 = True


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIResponsesAsyncLoop(AgentLoopConformanceTestCase, unittest.TestCase):
    """``AsyncOpenAI().responses`` in an async loop, over HTTP/1.1."""

    wire = openai_responses_wire

    def create_loop(self, url: str) -> AsyncOpenAIResponsesLoop:
        return AsyncOpenAIResponsesLoop(url, http2=self.http2)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIResponsesAsyncH2CLoop(OpenAIResponsesAsyncLoop):
    """The async Responses loop over h2c."""

    http2 = True
    skip = ASYNC_H2_SKIPS


if __name__ == "__main__":
    unittest.main()
