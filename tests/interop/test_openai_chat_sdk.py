"""openai-python's Chat Completions against the OpenAI Chat wire, through the conformance mixin.

The SDK is the judge of the wire: every shape the fake provider sends must parse in
the SDK's own models and surface through its own exceptions, and the adapters in
``openai_chat_adapter`` must then meet every case. openai-python speaks HTTP/1.1
(httpx without ``http2=True``), so these run over HTTP/1.1 only.
"""

from __future__ import annotations

import dataclasses
import unittest
from typing import Mapping

from conformance.scenarios import SCENARIOS
from conformance.testcase import BackendConformanceTestCase
from conformance.wires.openai_chat import OpenAIChatWire, openai_chat_wire
from conformance.wires.openai_chat._servers import SERVER_ROWS

from ..test_provider_support import asyncio_debug_off_for_module
from ._roundtrip import AdapterRoundTrip
from ._support import retries_only
from .openai_chat_adapter import DONE_UNSEEN, HAVE_OPENAI, AsyncOpenAIChatBackend, SyncOpenAIChatBackend

#: The suites here run without asyncio's debug mode unless CONFORMANCE_LONG_TESTS=1.
setUpModule, tearDownModule = asyncio_debug_off_for_module()

SKIP_REASON = "openai is not installed: pip install openai"

#: Cases the sync client cannot meet, with the reason (see the adapter on abort).
SYNC_SKIPS: Mapping[str, str] = DONE_UNSEEN


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIChatSyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``OpenAI().chat.completions.create``, adapted, over HTTP/1.1."""

    wire = openai_chat_wire
    headers = {"x-gateway-key": "test"}
    skip = SYNC_SKIPS
    read_timeout = 0.5  # the SDK's own, per read (httpx.Timeout(10, read=0.5)): the latency cases run

    def create_backend(self, url: str) -> SyncOpenAIChatBackend:
        return SyncOpenAIChatBackend(f"{url}/v1", self.headers, read_timeout=self.read_timeout)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIChatAsyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``AsyncOpenAI().chat.completions.create``, adapted, over HTTP/1.1."""

    wire = openai_chat_wire
    headers = {"x-gateway-key": "test"}
    skip = DONE_UNSEEN
    read_timeout = 0.5

    def create_backend(self, url: str) -> AsyncOpenAIChatBackend:
        return AsyncOpenAIChatBackend(f"{url}/v1", self.headers, read_timeout=self.read_timeout)


#: openai-python retries every 429, an exhausted quota's too (``insufficient_quota``): its
#: default retries fail the quota case, which the test below holds it to.
SDK_RETRIES_QUOTA = "openai-python's default retries send a 429 insufficient_quota again (asserted below)"


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIChatAsyncDefaultRetries(BackendConformanceTestCase, unittest.TestCase):
    """``AsyncOpenAI()`` with its default retries (``max_retries=2``), on a target that says it retries."""

    wire = openai_chat_wire
    headers = {"x-gateway-key": "test"}
    retries = True
    skip = {**retries_only(SDK_RETRIES_QUOTA), **DONE_UNSEEN}

    def create_backend(self, url: str) -> AsyncOpenAIChatBackend:
        return AsyncOpenAIChatBackend(f"{url}/v1", self.headers, max_retries=2)

    def test_its_retries_of_a_quota_are_caught(self) -> None:
        """The SDK's default retries send an exhausted quota's 429 again: retry-permanent names it."""
        from conformance.cases import ConformanceCase

        target = dataclasses.replace(self.conformance_target(), skip={})
        with self.assertRaisesRegex(AssertionError, r"\[retry-permanent\]"):
            ConformanceCase(target, "quota", "chat").run()


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


#: The wire naming every OpenAI-compatible server: the cases its servers' shapes play, each
#: server's variant alone (api.openai.com's shapes are run by the suites above).
SERVERS_WIRE = OpenAIChatWire(servers=OpenAIChatWire.SERVERS)
SERVER_SCENARIOS = {key.split("/")[0] for key in SERVER_ROWS}
ONLY_SERVER_SHAPES: Mapping[str, str] = {
    **{name: "no server shape of its own" for name in SCENARIOS if name not in SERVER_SCENARIOS},
    **{
        f"{key}:{variant.name}": "api.openai.com's shape, run by the suites above"
        for key, variants in SERVERS_WIRE.variants_table.items()
        if key.split("/")[0] in SERVER_SCENARIOS
        for variant in variants
        if variant.name in {v.name for v in openai_chat_wire.variants(key.split("/")[0])} | {"openai"}
    },
}


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIChatSyncServersConformance(BackendConformanceTestCase, unittest.TestCase):
    """``OpenAI().chat.completions.create`` against Mistral's, Groq's, DeepSeek's and llama-server's shapes.

    The SDK validates leniently here, as it does by default: strict validation refuses
    Groq's ``service_tier`` and Mistral's calls (see ``OpenAIChatStrictValidation``).
    """

    wire = SERVERS_WIRE
    headers = {"x-gateway-key": "test"}
    skip = ONLY_SERVER_SHAPES

    def create_backend(self, url: str) -> SyncOpenAIChatBackend:
        return SyncOpenAIChatBackend(f"{url}/v1", self.headers, strict=False)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIChatAsyncServersConformance(BackendConformanceTestCase, unittest.TestCase):
    """``AsyncOpenAI().chat.completions.create`` against the compatible servers' shapes, leniently."""

    wire = SERVERS_WIRE
    headers = {"x-gateway-key": "test"}
    skip = ONLY_SERVER_SHAPES

    def create_backend(self, url: str) -> AsyncOpenAIChatBackend:
        return AsyncOpenAIChatBackend(f"{url}/v1", self.headers, strict=False)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIChatStrictValidation(unittest.TestCase):
    """What openai-python's strict validation (``_strict_response_validation=True``) refuses."""

    def refused(self, scenario: str, mode: str, server: str) -> str:
        """The case's failure for the one ``server`` variant, through the strict sync adapter."""
        from conformance.cases import BackendConformanceTarget, ConformanceCase

        skip = {f"{scenario}:{v.name}": "another shape" for v in SERVERS_WIRE.variants(scenario, mode)}
        del skip[f"{scenario}:{server}"]
        target = BackendConformanceTarget(
            "strict", SERVERS_WIRE, lambda url: SyncOpenAIChatBackend(f"{url}/v1"), skip=skip
        )
        with self.assertRaises(AssertionError) as failed:
            ConformanceCase(target, scenario, mode).run()
        return str(failed.exception)

    def test_groqs_service_tier_fails_strict_validation(self) -> None:
        """Groq's whole reply says service_tier "on_demand", outside the SDK's Literal: refused."""
        self.assertIn(
            "[groq] expected a reply, got APIResponseValidationError", self.refused("text", "chat", "groq")
        )

    def test_mistrals_calls_fail_strict_validation(self) -> None:
        """Mistral's calls have no type, and streamed no index, which the SDK's models require."""
        self.assertIn(
            "[mistral] expected a reply, got APIResponseValidationError",
            self.refused("tool-call", "chat", "mistral"),
        )
        self.assertIn(
            "Data returned by API invalid for expected schema", self.refused("tool-call", "stream", "mistral")
        )


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenRouterThroughTheSDK(unittest.TestCase):
    """What openai-python itself does with OpenRouter's own stream shapes."""

    def stream(self, scenario: str, variant: str) -> tuple[str, BaseException | None]:
        """The text the SDK hands out for ``variant``'s stream, and what it raised, if anything."""
        import openai

        from conformance.cases import scenario_reply
        from conformance.provider import start_fake_provider

        from ..test_wire_openai_chat import good_body, request

        reply = scenario_reply(SERVERS_WIRE, scenario, "stream", request(good_body(True)), variant)
        text, raised = [], None
        with start_fake_provider() as provider:
            provider.reply(reply)
            client = openai.OpenAI(base_url=f"{provider.url}/v1", api_key="test", max_retries=0)
            try:
                messages = [{"role": "user", "content": "q"}]
                for chunk in client.chat.completions.create(model="m", messages=messages, stream=True):
                    text.extend(c.delta.content or "" for c in chunk.choices)
            except openai.APIError as error:
                raised = error
            finally:
                client.close()
        return "".join(text), raised

    def test_comment_lines_are_dropped_and_strict_validation_holds(self) -> None:
        """The SDK's SSE reader drops OpenRouter's comment lines; its chunks pass strict validation."""
        from conformance.cases import BackendConformanceTarget, ConformanceCase

        text, raised = self.stream("text", "openrouter")
        self.assertIsNone(raised)
        self.assertTrue(text)
        skip = {f"text:{v.name}": "another shape" for v in SERVERS_WIRE.variants("text", "stream")}
        del skip["text:openrouter"]
        target = BackendConformanceTarget(
            "strict", SERVERS_WIRE, lambda url: SyncOpenAIChatBackend(f"{url}/v1"), skip=skip
        )
        ConformanceCase(target, "text", "stream").run()

    def test_the_in_band_error_chunk_raises_api_error_without_a_status(self) -> None:
        """A data: chunk carrying error raises openai.APIError, choices or none, after the text before it."""
        import openai

        for variant, code in (("openrouter", "server_error"), ("openrouter-no-choices", "502")):
            with self.subTest(variant=variant):
                text, raised = self.stream("stream-error", variant)
                self.assertIsInstance(raised, openai.APIError)
                self.assertNotIsInstance(raised, openai.APIStatusError)
                assert isinstance(raised, openai.APIError)
                # openai-python 3.x makes a numeric code a string, 2.48 (the lock's for Python
                # 3.9) keeps the number; the type is None (OpenRouter sends none).
                self.assertEqual((str(raised.code), raised.type), (code, None))
                self.assertTrue(text)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIChatRoundTrip(AdapterRoundTrip, unittest.TestCase):
    """The tool choice through ``chat.completions.create``; Chat Completions returns no reasoning."""

    wire = openai_chat_wire

    def create_backend(self, url: str) -> SyncOpenAIChatBackend:
        return SyncOpenAIChatBackend(f"{url}/v1")


if __name__ == "__main__":
    unittest.main()
