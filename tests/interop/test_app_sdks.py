"""App mode's acceptance: the official SDKs, their default retries on, reached through the environment alone.

This module is what a project's own test looks like: it imports nothing of the kit but
the entry point, and its application functions build ``openai.OpenAI()`` and
``anthropic.Anthropic()`` with no argument, as production code does, so the clients
find the fake provider through ``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL`` and the
rest. Each SDK keeps its default retry layer (two retries). The provider is scripted
per test; the verdict is read from its request log.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
import unittest
from typing import Any

from conformance.app import AppConformanceTestCase

from ._support import ThirdPartyWarnings

HAVE_OPENAI = importlib.util.find_spec("openai") is not None
HAVE_ANTHROPIC = importlib.util.find_spec("anthropic") is not None

QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]

if HAVE_OPENAI:
    import openai
if HAVE_ANTHROPIC:
    import anthropic


def _installed(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


# google-genai and google-auth warn about pydantic's deprecations and Python 3.9's end of
# life from their own modules (google-genai 1.47, the last release for 3.9, on import), as
# beside the Gemini API's own tests; nothing raised from conformance or these tests is
# ignored.
_SDK_WARNINGS = ThirdPartyWarnings(r"(google|pydantic)(\.|$)")
# boto3's default session warns that Python 3.9 is past its support (its own
# PythonDeprecationWarning, from boto3.compat) when an application calls boto3.client().
_BOTO3_WARNINGS = ThirdPartyWarnings(r"boto3\.compat$", (Warning,))

# Imported here, not in the functions: the first import of an SDK takes seconds on a
# loaded machine, which is no part of a run's bound.
_SDK_WARNINGS.start()
try:
    for _sdk in ("google.genai", "cohere", "httpx", "ollama", "boto3"):
        if _installed(_sdk):
            importlib.import_module(_sdk)
finally:
    _SDK_WARNINGS.stop()


def setUpModule() -> None:
    _SDK_WARNINGS.start()
    _BOTO3_WARNINGS.start()


def tearDownModule() -> None:
    _BOTO3_WARNINGS.stop()
    _SDK_WARNINGS.stop()


# -- the application's own functions ------------------------------------------------------------


def openai_answer() -> str:
    """The application's helper: one answer, the SDK's retries doing the retrying."""
    with openai.OpenAI() as client:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=QUESTION)  # type: ignore[arg-type]
    return reply.choices[0].message.content or ""


def openai_streamed_answer() -> str:
    with openai.OpenAI() as client:
        stream = client.chat.completions.create(model="gpt-4o-mini", messages=QUESTION, stream=True)  # type: ignore[arg-type]
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


def openai_answer_with_a_read_timeout() -> str:
    """A client whose read timeout is short: a stall ends in a timeout, which the SDK retries."""
    with openai.OpenAI(timeout=0.5) as client:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=QUESTION)  # type: ignore[arg-type]
    return reply.choices[0].message.content or ""


def openai_stream_with_a_read_timeout() -> str:
    with openai.OpenAI(timeout=0.5) as client:
        stream = client.chat.completions.create(model="gpt-4o-mini", messages=QUESTION, stream=True)  # type: ignore[arg-type]
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


def azure_answer() -> str:
    """``AzureOpenAI()`` from the environment: endpoint, key and API version."""
    with openai.AzureOpenAI() as client:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=QUESTION)  # type: ignore[arg-type]
    return reply.choices[0].message.content or ""


def openai_asks_until_answered() -> Any:
    """The planted bug: loops on RateLimitError regardless, a quota's too (until its own deadline)."""
    deadline = time.monotonic() + 2.5
    with openai.OpenAI() as client:
        while time.monotonic() < deadline:
            try:
                return client.chat.completions.create(model="gpt-4o-mini", messages=QUESTION)  # type: ignore[arg-type]
            except openai.RateLimitError:
                time.sleep(0.05)
    raise RuntimeError("no answer before the deadline")


async def openai_async_stream() -> str:
    async with openai.AsyncOpenAI() as client:
        stream = await client.chat.completions.create(model="gpt-4o-mini", messages=QUESTION, stream=True)  # type: ignore[arg-type]
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])


def anthropic_answer() -> str:
    with anthropic.Anthropic() as client:
        reply = client.messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=QUESTION)  # type: ignore[arg-type]
    return "".join(getattr(block, "text", "") for block in reply.content)


def anthropic_asks_until_answered() -> Any:
    """The planted bug, on Anthropic: loops on RateLimitError regardless."""
    deadline = time.monotonic() + 2.5
    with anthropic.Anthropic() as client:
        while time.monotonic() < deadline:
            try:
                return client.messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=QUESTION)  # type: ignore[arg-type]
            except anthropic.RateLimitError:
                time.sleep(0.05)
    raise RuntimeError("no answer before the deadline")


# -- the tests ------------------------------------------------------------------------------------


@unittest.skipUnless(HAVE_OPENAI, "the openai package is not installed (pip install openai)")
class OpenAIApplication(AppConformanceTestCase, unittest.TestCase):
    """openai-python's defaults (max_retries=2), pointed at the provider by the environment."""

    app_timeout = 15.0
    app_summary = False

    def test_a_rate_limit_then_the_answer(self) -> None:
        """Two 429s, then the answer: the SDK backs off (OpenAI's 429 names no delay) and returns it."""
        self.script("openai-chat", "rate-limit")
        run = self.assertAppConforms(openai_answer)
        self.assertEqual(len(run.requests), 3)
        self.assertIn("sunny", run.result)

    def test_an_overload_then_the_streamed_answer(self) -> None:
        """A 503, then the streamed answer, whole."""
        self.script("openai-chat", "overloaded")
        run = self.assertAppConforms(openai_streamed_answer)
        self.assertEqual(len(run.requests), 2)

    def test_a_429_with_retry_after_on_azure(self) -> None:
        """AzureOpenAI() from the environment waits the retry-after Azure's 429 asks for."""
        self.script("azure-openai-chat", "rate-limit", retry_after=0.3)
        run = self.assertAppConforms(azure_answer)
        gaps = [b.received_at - a.received_at for a, b in zip(run.requests, run.requests[1:])]
        self.assertTrue(all(gap >= 0.28 for gap in gaps), gaps)

    def test_a_stall_is_timed_out_and_retried(self) -> None:
        """An answer that never comes is closed by the client's read timeout, and the SDK's retry gets it."""
        self.script("openai-chat", "stall", read_timeout=0.5)
        run = self.assertAppConforms(openai_answer_with_a_read_timeout)
        self.assertEqual(len(run.requests), 2)
        self.assertIn("sunny", run.result)

    def test_a_stalled_stream_is_timed_out(self) -> None:
        """A stream stalled halfway is closed by the read timeout, and the SDK raises the timeout."""
        self.script("openai-chat", "stall", read_timeout=0.5)
        run = self.assertAppConforms(openai_stream_with_a_read_timeout)
        # openai-python 3.x raises its APITimeoutError; 2.48, the lock's for Python 3.9, lets
        # httpx's own ReadTimeout out of a stream's iteration.
        import httpx

        self.assertIsInstance(run.error, (openai.APITimeoutError, httpx.ReadTimeout))
        self.assertEqual(len(run.requests), 1)

    def test_a_cancel_closes_the_connection(self) -> None:
        """Cancelling the application's task closes the stream's connection at once."""
        self.script("openai-chat", "cancel")
        run = self.assertAppConforms(openai_async_stream)
        self.assertIsInstance(run.error, asyncio.CancelledError)

    def test_retrying_a_quota_forever_is_caught_with_the_request_times(self) -> None:
        """The planted loop on RateLimitError meets a spent quota: retry-permanent names the times."""
        self.script("openai-chat", "quota")
        run = self.run_app(openai_asks_until_answered)
        self.assertIn("retry-permanent", run.checks, run.report())
        text = next(p.text for _, p in run.problems if p.check == "retry-permanent")
        self.assertRegex(text, r"got (\d{2,}|[4-9]) \(requests at \+0 ms, \+\d+ ms, \+\d+ ms, \+\d+ ms")

    def test_the_sdks_own_retries_of_a_quota_are_named(self) -> None:
        """openai-python retries every 429, a spent quota's too: the correct helper still shows 3 requests."""
        self.script("openai-chat", "quota")
        run = self.run_app(openai_answer)
        self.assertIsInstance(run.error, openai.RateLimitError)
        self.assertEqual(run.checks, ["retry-permanent"], run.report())
        self.assertIn("got 3 (requests at +0 ms", run.report())


@unittest.skipUnless(HAVE_ANTHROPIC, "the anthropic package is not installed (pip install anthropic)")
class AnthropicApplication(AppConformanceTestCase, unittest.TestCase):
    """anthropic-sdk-python's defaults (max_retries=2), pointed at the provider by the environment."""

    app_timeout = 15.0
    app_summary = False

    def test_a_rate_limit_then_the_answer(self) -> None:
        """Two 429s asking for 200 ms each, then the answer: the SDK waits what they ask."""
        self.script("anthropic", "rate-limit")
        run = self.assertAppConforms(anthropic_answer)
        self.assertEqual(len(run.requests), 3)

    def test_an_overload_then_the_answer(self) -> None:
        """A 529 overloaded_error, then the answer."""
        self.script("anthropic", "overloaded")
        self.assertAppConforms(anthropic_answer)

    def test_a_credit_balance_is_not_retried(self) -> None:
        """A 400 naming an exhausted credit balance: one request, the error raised to the application."""
        self.script("anthropic", "quota", variant="credit-balance-400")
        run = self.assertAppConforms(anthropic_answer)
        self.assertIsInstance(run.error, anthropic.BadRequestError)

    def test_retrying_a_spend_cap_forever_is_caught(self) -> None:
        """The planted loop on RateLimitError meets a spend cap's 429: retry-permanent names the times."""
        self.script("anthropic", "quota", variant="tier-cap-429")
        run = self.run_app(anthropic_asks_until_answered)
        self.assertIn("retry-permanent", run.checks, run.report())
        self.assertRegex(run.report(), r"\(requests at \+0 ms, \+\d+ ms, \+\d+ ms, \+\d+ ms")


def gemini_answer() -> str:
    from google import genai

    client = genai.Client()
    try:
        reply = client.models.generate_content(model="gemini-2.5-flash", contents="What is the weather?")
        return reply.text or ""
    finally:
        client.close()


def cohere_answer() -> str:
    import os

    import cohere
    import httpx

    # cohere reads CO_API_URL as a default argument, once, when it is imported: an
    # application that imports it before the environment is set must pass it on.
    with httpx.Client(timeout=10.0) as http:
        client = cohere.ClientV2(base_url=os.environ["CO_API_URL"], httpx_client=http)
        question = [{"role": "user", "content": "What is the weather?"}]
        reply = client.chat(model="command-a-03-2025", messages=question)  # type: ignore[arg-type]
    return reply.message.content[0].text  # type: ignore[index, union-attr]


def ollama_answer() -> str:
    import ollama

    client = ollama.Client()
    try:
        reply = client.chat(model="llama3.2", messages=[{"role": "user", "content": "hi"}], stream=False)
    finally:
        client.close()
    return reply.message.content or ""


def bedrock_answer() -> str:
    import boto3

    client = boto3.client("bedrock-runtime")
    question = [{"role": "user", "content": [{"text": "hi"}]}]
    try:
        reply = client.converse(modelId="anthropic.claude-3-haiku", messages=question)
    finally:
        # Its pool's sockets closed now, not when the collector frees the client: a botocore
        # client sits in reference cycles, and a pooled socket freed there may warn unclosed.
        client.close()
    return str(reply["output"]["message"]["content"][0]["text"])


class EverySDKFindsTheProvider(AppConformanceTestCase, unittest.TestCase):
    """Each official SDK, built with no base URL and no key, reaches the provider through the environment."""

    app_timeout = 30.0
    app_summary = False

    def _answers(self, wire: str, app: Any, route: str) -> None:
        self.provider_environment.reset()  # type: ignore[union-attr]
        self.script(wire, "text")
        run = self.assertAppConforms(app)
        self.assertIn("sunny", run.result)
        self.assertTrue(all(r.path.startswith(route) for r in run.requests), [str(r) for r in run.requests])

    @unittest.skipUnless(_installed("openai"), "the openai package is not installed")
    def test_openai_and_azure(self) -> None:
        """OPENAI_BASE_URL, OPENAI_API_KEY; AZURE_OPENAI_ENDPOINT and _API_KEY, OPENAI_API_VERSION."""
        self._answers("openai-chat", openai_answer, "/openai/v1/chat/completions")
        self._answers("azure-openai-chat", azure_answer, "/azure/openai/deployments/")

    @unittest.skipUnless(_installed("anthropic"), "the anthropic package is not installed")
    def test_anthropic(self) -> None:
        """ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY."""
        self._answers("anthropic", anthropic_answer, "/anthropic/v1/messages")

    @unittest.skipUnless(_installed("google.genai"), "the google-genai package is not installed")
    def test_gemini(self) -> None:
        """GOOGLE_GEMINI_BASE_URL and GEMINI_API_KEY."""
        self._answers("gemini", gemini_answer, "/gemini/")

    @unittest.skipUnless(_installed("cohere"), "the cohere package is not installed")
    def test_cohere(self) -> None:
        """CO_API_URL (read at import: passed on here) and CO_API_KEY."""
        self._answers("cohere", cohere_answer, "/cohere/v2/chat")

    @unittest.skipUnless(_installed("ollama"), "the ollama package is not installed")
    def test_ollama(self) -> None:
        """OLLAMA_HOST, with the route's path in it."""
        self._answers("ollama", ollama_answer, "/ollama/api/chat")

    @unittest.skipUnless(_installed("google.genai", "ollama"), "google-genai or ollama is missing")
    def test_the_sdks_without_default_retries_leave_a_retry_to_the_application(self) -> None:
        """google-genai and ollama retry nothing by default: leaving it to them fails retry-relent."""
        plays = (("gemini", "rate-limit", gemini_answer), ("ollama", "server-error", ollama_answer))
        for wire, what, app in plays:
            with self.subTest(wire=wire):
                self.provider_environment.reset()  # type: ignore[union-attr]
                self.script(wire, what)
                run = self.run_app(app)
                self.assertEqual(run.checks, ["retry-relent"], run.report())
                self.assertEqual(len(run.requests), 1)

    @unittest.skipUnless(_installed("boto3"), "boto3 is not installed")
    def test_bedrock(self) -> None:
        """AWS_ENDPOINT_URL_BEDROCK_RUNTIME, the AWS test credentials and region."""
        self._answers("bedrock-converse", bedrock_answer, "/bedrock/model/")


if __name__ == "__main__":
    unittest.main()
