"""The agent-loop suite through anthropic-python: hand-written loops over the Messages API.

Each class runs every stage and round-trip case, whole and streamed, against one loop
of ``sdk_loops``: the sync and async clients over HTTP/1.1, and over h2c with httpx's
HTTP/2 prior knowledge. Without ``CONFORMANCE_LONG_TESTS=1`` the module runs only its
``QUICK`` subset; name a class to run it whole.
"""

from __future__ import annotations

import unittest
from typing import Any, Optional

from conformance.gate import AgentLoopConformanceTestCase
from conformance.wires.anthropic import anthropic_wire

from ..test_provider_support import AsyncioDebugOff
from ._support import HTTPX_H2_KEEPS_STREAM
from .sdk_loops import (
    HAVE_ANTHROPIC,
    AnthropicLoop,
    AsyncAnthropicLoop,
    quick_suite,
    share,
    warm_up,
)

SKIP_REASON = "anthropic is not installed: pip install anthropic"
#: What runs without CONFORMANCE_LONG_TESTS=1: the sync loop over HTTP/1.1 on every stage
#: besides the faults, a third of those cases (the OpenAI modules run the other two
#: thirds, sdk_loops.share), and a few fault stages, different ones in each module.
QUICK = {
    "AnthropicSyncLoop": [
        *share(2),
        "corrupt-arguments/stream",
        "close-after-last-fragment/stream",
        "unknown-tool/stream",
        "timeout/chat",
        "ambiguous-retry/chat",
        "retry-after/stream",
    ],
}


def load_tests(loader: unittest.TestLoader, tests: unittest.TestSuite, pattern: Optional[str]) -> Any:
    return quick_suite(tests, QUICK)


#: The suites here run without asyncio's debug mode unless CONFORMANCE_LONG_TESTS=1.
_ASYNCIO_DEBUG = AsyncioDebugOff()


def setUpModule() -> None:
    _ASYNCIO_DEBUG.start()
    if HAVE_ANTHROPIC:
        warm_up("anthropic")


def tearDownModule() -> None:
    _ASYNCIO_DEBUG.stop()


@unittest.skipUnless(HAVE_ANTHROPIC, SKIP_REASON)
class AnthropicSyncLoop(AgentLoopConformanceTestCase, unittest.TestCase):
    """``Anthropic().messages`` in a sync loop, over HTTP/1.1."""

    wire = anthropic_wire

    def create_loop(self, url: str) -> AnthropicLoop:
        return AnthropicLoop(url, http2=self.http2)


@unittest.skipUnless(HAVE_ANTHROPIC, SKIP_REASON)
class AnthropicSyncH2CLoop(AnthropicSyncLoop):
    """The sync Messages loop over h2c."""

    http2 = True


@unittest.skipUnless(HAVE_ANTHROPIC, SKIP_REASON)
class AnthropicAsyncLoop(AgentLoopConformanceTestCase, unittest.TestCase):
    """``AsyncAnthropic().messages`` in an async loop, over HTTP/1.1."""

    wire = anthropic_wire

    def create_loop(self, url: str) -> AsyncAnthropicLoop:
        return AsyncAnthropicLoop(url, http2=self.http2)


@unittest.skipUnless(HAVE_ANTHROPIC, SKIP_REASON)
class AnthropicAsyncH2CLoop(AnthropicAsyncLoop):
    """The async Messages loop over h2c."""

    http2 = True
    skip = {"cancel": HTTPX_H2_KEEPS_STREAM}


if __name__ == "__main__":
    unittest.main()
