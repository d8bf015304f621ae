"""anthropic-python's ``AnthropicVertex`` against the Claude on Vertex AI wire, through the conformance mixin.

The adapters are the Anthropic ones (``test_anthropic_sdk``): the messages, the stream
and its reading are the same, and only the client changes, ``AnthropicVertex`` and
``AsyncAnthropicVertex`` with ``base_url`` ending in ``/v1``, a region, a project, and a
fake access token (``access_token=``, which the client sends as ``Authorization:
Bearer`` and never refreshes: nothing leaves the loopback). A failure is read with the
library's :func:`~conformance.provider_error`, since Vertex fails in two shapes: Google's
``google.rpc.Status`` (bare, or in a JSON array to ``streamRawPredict``), which the SDK
hands over in ``APIStatusError.body`` as it parsed it, and Claude's own.

anthropic 2.x yields Vertex's own ``vertex_event`` to a caller of
``messages.create(stream=True)`` (``anthropic/_streaming.py`` skips only ``ping``); the
adapters skip what they do not know, as they must.
"""

from __future__ import annotations

import importlib.util
import unittest
from typing import Any, Dict, Optional

from conformance import provider_error
from conformance.contract import LLMError
from conformance.testcase import BackendConformanceTestCase
from conformance.wires.anthropic_vertex import anthropic_vertex_wire

from ..test_provider_support import asyncio_debug_off_for_module
from ._support import HTTPX_H2_SKIPS, shared_between

HAVE_VERTEX = (
    importlib.util.find_spec("anthropic") is not None and importlib.util.find_spec("google.auth") is not None
)
SKIP_REASON = "anthropic's Vertex client needs anthropic and google-auth: pip install 'anthropic[vertex]'"
if HAVE_VERTEX:
    import anthropic

    from .test_anthropic_sdk import AsyncAnthropicBackend, SyncAnthropicBackend

    #: The suites here run without asyncio's debug mode unless CONFORMANCE_LONG_TESTS=1.
    setUpModule, tearDownModule = asyncio_debug_off_for_module()
else:  # the adapters need the SDK to be defined at all
    SyncAnthropicBackend = AsyncAnthropicBackend = object  # type: ignore[misc, assignment]

HEADERS = {"x-gateway-key": "test"}
#: What AnthropicVertex needs to build a URL and authenticate, without the network.
CLIENT = {"region": "us-east5", "project_id": "conformance-project", "access_token": "ya29.conformance"}


def vertex_error(exc: Any) -> LLMError:
    """The contract's error for an ``APIStatusError`` (status 200 for ``event: error`` mid-stream)."""
    if exc.status_code == 200:
        return provider_error("anthropic-vertex", exc.body)
    return provider_error("anthropic-vertex", exc.body, status=exc.status_code, headers=exc.response.headers)


class SyncVertexBackend(SyncAnthropicBackend):  # type: ignore[misc, valid-type]
    """A sync backend over ``AnthropicVertex().messages``."""

    error = staticmethod(vertex_error)

    def client_for(self, base_url: str, headers: Dict[str, str], http_client: Any) -> Any:
        return anthropic.AnthropicVertex(
            **CLIENT,
            base_url=f"{base_url}/v1",
            max_retries=0,
            default_headers=headers,
            http_client=http_client,
        )


class AsyncVertexBackend(AsyncAnthropicBackend):  # type: ignore[misc, valid-type]
    """An async backend over ``AsyncAnthropicVertex().messages``."""

    error = staticmethod(vertex_error)

    def client_for(self, base_url: str, headers: Dict[str, str], http_client: Any) -> Any:
        return anthropic.AsyncAnthropicVertex(
            **CLIENT,
            base_url=f"{base_url}/v1",
            max_retries=0,
            default_headers=headers,
            http_client=http_client,
        )


@unittest.skipUnless(HAVE_VERTEX, SKIP_REASON)
class VertexSyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``AnthropicVertex().messages.create`` over HTTP/1.1."""

    wire = anthropic_vertex_wire
    headers = HEADERS

    def create_backend(self, url: str) -> Any:
        return SyncVertexBackend(url, self.headers, http2=self.http2)


@unittest.skipUnless(HAVE_VERTEX, SKIP_REASON)
class VertexAsyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``AsyncAnthropicVertex().messages.create`` over HTTP/1.1."""

    wire = anthropic_vertex_wire
    headers = HEADERS

    def create_backend(self, url: str) -> Any:
        return AsyncVertexBackend(url, self.headers, http2=self.http2)


@unittest.skipUnless(HAVE_VERTEX, SKIP_REASON)
class VertexAsyncH2CConformance(VertexAsyncConformance):
    """``AsyncAnthropicVertex().messages.create`` over h2c (httpx with HTTP/2 prior knowledge)."""

    http2 = True
    skip = HTTPX_H2_SKIPS


def load_tests(loader: unittest.TestLoader, tests: unittest.TestSuite, pattern: Optional[str]) -> Any:
    # By default each case runs through the async adapter once, over HTTP/1.1 or h2c in turn.
    if not HAVE_VERTEX:
        return tests
    return shared_between(tests, ["VertexAsyncConformance", "VertexAsyncH2CConformance"])


if __name__ == "__main__":
    unittest.main()
