"""openai-python's Chat Completions against the OpenAI Chat wire, through the conformance mixin.

The SDK is the judge of the wire: every shape the fake provider sends must parse in
the SDK's own models and surface through its own exceptions, and the adapters in
``openai_chat_adapter`` must then meet every case. openai-python speaks HTTP/1.1
(httpx without ``http2=True``), so these run over HTTP/1.1 only.
"""

from __future__ import annotations

import unittest
from typing import Mapping

from conformance.scenarios import SCENARIOS
from conformance.testcase import BackendConformanceTestCase
from conformance.wires.openai_chat import OpenAIChatWire, openai_chat_wire

from ..test_provider_support import asyncio_debug_off_for_module
from ._roundtrip import AdapterRoundTrip
from .openai_chat_adapter import HAVE_OPENAI, AsyncOpenAIChatBackend, SyncOpenAIChatBackend

#: The suites here run without asyncio's debug mode unless CONFORMANCE_LONG_TESTS=1.
setUpModule, tearDownModule = asyncio_debug_off_for_module()

SKIP_REASON = "openai is not installed: pip install openai"

#: Cases the sync client cannot meet, with the reason (none: see the adapter on abort).
SYNC_SKIPS: Mapping[str, str] = {}


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIChatSyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``OpenAI().chat.completions.create``, adapted, over HTTP/1.1."""

    wire = openai_chat_wire
    headers = {"x-gateway-key": "test"}
    skip = SYNC_SKIPS

    def create_backend(self, url: str) -> SyncOpenAIChatBackend:
        return SyncOpenAIChatBackend(f"{url}/v1", self.headers)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIChatAsyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``AsyncOpenAI().chat.completions.create``, adapted, over HTTP/1.1."""

    wire = openai_chat_wire
    headers = {"x-gateway-key": "test"}

    def create_backend(self, url: str) -> AsyncOpenAIChatBackend:
        return AsyncOpenAIChatBackend(f"{url}/v1", self.headers)


#: An OpenAI-compatible server that returns reasoning_content (DeepSeek's shape): the
#: reasoning case alone, the others being the official wire's, run above.
COMPATIBLE_WIRE = OpenAIChatWire(reasoning_content=True)
ONLY_REASONING: Mapping[str, str] = {
    name: "run against api.openai.com's wire by the suites above" for name in SCENARIOS if name != "reasoning"
}


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIChatSyncCompatibleConformance(BackendConformanceTestCase, unittest.TestCase):
    """``OpenAI().chat.completions.create`` against a server that sends ``reasoning_content``."""

    wire = COMPATIBLE_WIRE
    headers = {"x-gateway-key": "test"}
    skip = ONLY_REASONING

    def create_backend(self, url: str) -> SyncOpenAIChatBackend:
        return SyncOpenAIChatBackend(f"{url}/v1", self.headers)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIChatAsyncCompatibleConformance(BackendConformanceTestCase, unittest.TestCase):
    """``AsyncOpenAI().chat.completions.create`` against a server that sends ``reasoning_content``."""

    wire = COMPATIBLE_WIRE
    headers = {"x-gateway-key": "test"}
    skip = ONLY_REASONING

    def create_backend(self, url: str) -> AsyncOpenAIChatBackend:
        return AsyncOpenAIChatBackend(f"{url}/v1", self.headers)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIChatRoundTrip(AdapterRoundTrip, unittest.TestCase):
    """The tool choice through ``chat.completions.create``; Chat Completions returns no reasoning."""

    wire = openai_chat_wire

    def create_backend(self, url: str) -> SyncOpenAIChatBackend:
        return SyncOpenAIChatBackend(f"{url}/v1")


if __name__ == "__main__":
    unittest.main()
