"""openai-python's ``AzureOpenAI`` and ``AsyncAzureOpenAI`` against the Azure OpenAI wires.

The SDK is the judge of the wires: the adapters are the OpenAI ones
(``openai_chat_adapter`` for Chat Completions, ``test_openai_responses_sdk``'s for
Responses), with the client an Azure user builds in their place:
``AzureOpenAI(azure_endpoint=..., api_key=..., api_version=...)``, which sends Chat to
``/openai/deployments/{model}/chat/completions?api-version=...`` and Responses to
``/openai/responses?api-version=...``, with the key in an ``api-key`` header.

The clients keep the SDK's default validation. Under openai-python's private
``_strict_response_validation=True`` every Azure stream fails
(``APIResponseValidationError``): its first chunk, which carries only the prompt's
filter results, has ``"object": ""`` where the SDK's model says
``"chat.completion.chunk"``. Without it the SDK hands that chunk over with no choices,
and an annotation chunk of the Asynchronous Filter with a choice whose ``delta`` is
``None``; the Chat adapter skips both.
"""

from __future__ import annotations

import unittest
from typing import Mapping, Optional

from conformance.testcase import BackendConformanceTestCase
from conformance.wires.azure_openai import azure_openai_chat_wire, azure_openai_responses_wire

from ..test_provider_support import asyncio_debug_off_for_module
from ._roundtrip import AdapterRoundTrip
from ._support import HTTPX_H2_SKIPS, TracedSockets
from .openai_chat_adapter import DONE_UNSEEN, HAVE_OPENAI, AsyncOpenAIChatBackend, SyncOpenAIChatBackend
from .test_openai_responses_sdk import (
    AsyncOpenAIResponsesBackend,
    SyncOpenAIResponsesBackend,
    _async_http_client,
    _sync_http_client,
)
from .test_openai_responses_sdk import _Sockets as _PoolSockets

if HAVE_OPENAI:
    import openai

#: The suites here run without asyncio's debug mode unless CONFORMANCE_LONG_TESTS=1.
setUpModule, tearDownModule = asyncio_debug_off_for_module()

SKIP_REASON = "openai is not installed: pip install openai"
HEADERS = {"x-gateway-key": "test"}
API_VERSION = "2024-10-21"


def _azure(endpoint: str, headers: Optional[Mapping[str, str]], **kwargs: object) -> openai.AzureOpenAI:
    return openai.AzureOpenAI(
        azure_endpoint=endpoint,
        api_key="test",
        api_version=API_VERSION,
        max_retries=0,
        timeout=10.0,
        default_headers=dict(headers or {}),
        **kwargs,  # type: ignore[arg-type]
    )


def _async_azure(
    endpoint: str, headers: Optional[Mapping[str, str]], **kwargs: object
) -> openai.AsyncAzureOpenAI:
    return openai.AsyncAzureOpenAI(
        azure_endpoint=endpoint,
        api_key="test",
        api_version=API_VERSION,
        max_retries=0,
        timeout=10.0,
        default_headers=dict(headers or {}),
        **kwargs,  # type: ignore[arg-type]
    )


class SyncAzureChatBackend(SyncOpenAIChatBackend):
    """``AzureOpenAI().chat.completions``, read as the OpenAI adapter reads it."""

    def __init__(self, endpoint: str, headers: Optional[Mapping[str, str]] = None) -> None:
        self.sockets = TracedSockets()
        http_client = openai.DefaultHttpxClient(event_hooks={"request": [self.sockets.on_request]})
        self.client = _azure(endpoint, headers, http_client=http_client)


class AsyncAzureChatBackend(AsyncOpenAIChatBackend):
    """``AsyncAzureOpenAI().chat.completions``, read as the OpenAI adapter reads it."""

    def __init__(self, endpoint: str, headers: Optional[Mapping[str, str]] = None) -> None:
        self.client = _async_azure(endpoint, headers)


class SyncAzureResponsesBackend(SyncOpenAIResponsesBackend):
    """``AzureOpenAI().responses``, read as the OpenAI adapter reads it."""

    def __init__(self, endpoint: str, headers: Mapping[str, str], http2: bool = False) -> None:
        self.sockets = _PoolSockets()  # type: ignore[assignment]
        self.client = _azure(endpoint, headers, http_client=_sync_http_client(self.sockets, http2))


class AsyncAzureResponsesBackend(AsyncOpenAIResponsesBackend):
    """``AsyncAzureOpenAI().responses``, read as the OpenAI adapter reads it."""

    def __init__(self, endpoint: str, headers: Mapping[str, str], http2: bool = False) -> None:
        self.client = _async_azure(endpoint, headers, http_client=_async_http_client(http2))


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class AzureChatSyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``AzureOpenAI().chat.completions.create``, adapted, over HTTP/1.1."""

    wire = azure_openai_chat_wire
    headers = HEADERS
    skip = DONE_UNSEEN

    def create_backend(self, url: str) -> SyncAzureChatBackend:
        return SyncAzureChatBackend(url, self.headers)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class AzureChatAsyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``AsyncAzureOpenAI().chat.completions.create``, adapted, over HTTP/1.1."""

    wire = azure_openai_chat_wire
    headers = HEADERS
    skip = DONE_UNSEEN

    def create_backend(self, url: str) -> AsyncAzureChatBackend:
        return AsyncAzureChatBackend(url, self.headers)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class AzureResponsesSyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``AzureOpenAI().responses.create`` over HTTP/1.1."""

    wire = azure_openai_responses_wire
    headers = HEADERS

    def create_backend(self, url: str) -> SyncAzureResponsesBackend:
        return SyncAzureResponsesBackend(url, self.headers, http2=self.http2)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class AzureResponsesAsyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``AsyncAzureOpenAI().responses.create`` over HTTP/1.1."""

    wire = azure_openai_responses_wire
    headers = HEADERS

    def create_backend(self, url: str) -> AsyncAzureResponsesBackend:
        return AsyncAzureResponsesBackend(url, self.headers, http2=self.http2)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class AzureResponsesAsyncH2CConformance(AzureResponsesAsyncConformance):
    """``AsyncAzureOpenAI().responses.create`` over h2c (httpx with HTTP/2 prior knowledge)."""

    http2 = True
    skip = HTTPX_H2_SKIPS


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class AzureChatRoundTrip(AdapterRoundTrip, unittest.TestCase):
    """The tool choice through ``AzureOpenAI().chat.completions.create``."""

    wire = azure_openai_chat_wire

    def create_backend(self, url: str) -> SyncAzureChatBackend:
        return SyncAzureChatBackend(url)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class AzureResponsesRoundTrip(AdapterRoundTrip, unittest.TestCase):
    """Tool choice and reasoning items read back, through ``AzureOpenAI().responses.create``."""

    wire = azure_openai_responses_wire
    reply_reasoning = azure_openai_responses_wire.turn_reasoning

    def create_backend(self, url: str) -> SyncAzureResponsesBackend:
        return SyncAzureResponsesBackend(url, HEADERS)


if __name__ == "__main__":
    unittest.main()
