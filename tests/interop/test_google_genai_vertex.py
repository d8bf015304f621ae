"""google-genai with ``vertexai=True`` against the Gemini-on-Vertex wire, through the conformance mixin.

The adapters are the Gemini API's (``test_google_genai_sdk``), their client built for
Vertex AI: ``genai.Client(vertexai=True, ...)`` with ``HttpOptions(base_url=...,
api_version="v1beta1")``, under a project and a location with
``google.oauth2.credentials.Credentials(token=...)`` (a token with no expiry, sent as a
bearer and never refreshed), or in express mode with an API key. Neither reaches the
network: google-genai asks ``google.auth.default()`` only when given no credentials.
"""

from __future__ import annotations

import unittest
from typing import Any, Optional

from conformance.testcase import BackendConformanceTestCase
from conformance.wires.gemini_vertex import gemini_vertex_wire

from ..test_provider_support import AsyncioDebugOff
from ._support import HTTPX_H2_SKIPS, ThirdPartyWarnings, shared_between
from .test_google_genai_sdk import (
    HAVE_GENAI,
    HAVE_H2,
    SKIP,
    SYNC_ABORT,
    GenAIAsyncBackend,
    GenAISyncBackend,
)

# As beside the Gemini API: google-genai's and google-auth's own deprecation warnings.
_SDK_WARNINGS = ThirdPartyWarnings(r"(google|pydantic)(\.|$)")
# google-genai 1.47 (the last for Python 3.9) has no FinishReason.MODEL_ARMOR: its enum
# warns "MODEL_ARMOR is not a valid FinishReason" (google/genai/_common.py,
# CaseInSensitiveEnum._missing_) and keeps the value as it came, which the adapter reads.
_UNKNOWN_ENUMS = ThirdPartyWarnings(r"google\.genai\._common$", (UserWarning,))
_ASYNCIO_DEBUG = AsyncioDebugOff()  # unless CONFORMANCE_LONG_TESTS=1


def setUpModule() -> None:
    _SDK_WARNINGS.start()
    _UNKNOWN_ENUMS.start()
    _ASYNCIO_DEBUG.start()


def tearDownModule() -> None:
    _ASYNCIO_DEBUG.stop()
    _UNKNOWN_ENUMS.stop()
    _SDK_WARNINGS.stop()


@unittest.skipUnless(HAVE_GENAI, "google-genai is not installed: pip install google-genai")
class GoogleGenAIVertexSyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """google-genai's sync client on Vertex AI, under a project with an OAuth token, over HTTP/1.1."""

    wire = gemini_vertex_wire
    headers = {"x-gateway-key": "test"}
    skip = {"abort": SYNC_ABORT, **SKIP}

    def create_backend(self, url: str) -> GenAISyncBackend:
        return GenAISyncBackend(url, self.headers, vertex="project")


@unittest.skipUnless(HAVE_GENAI, "google-genai is not installed: pip install google-genai")
class GoogleGenAIVertexExpressConformance(BackendConformanceTestCase, unittest.TestCase):
    """google-genai's async client on Vertex AI in express mode (an API key), over HTTP/1.1."""

    wire = gemini_vertex_wire
    headers = {"x-gateway-key": "test"}
    skip = {**SKIP}

    def create_backend(self, url: str) -> GenAIAsyncBackend:
        return GenAIAsyncBackend(url, self.headers, vertex="express")


@unittest.skipUnless(HAVE_GENAI, "google-genai is not installed: pip install google-genai")
@unittest.skipUnless(HAVE_H2, "h2 is not installed: pip install h2")
class GoogleGenAIVertexAsyncH2CConformance(BackendConformanceTestCase, unittest.TestCase):
    """google-genai's async client on Vertex AI, under a project, over h2c."""

    wire = gemini_vertex_wire
    headers = {"x-gateway-key": "test"}
    skip = {**SKIP, **HTTPX_H2_SKIPS}
    http2 = True

    def create_backend(self, url: str) -> GenAIAsyncBackend:
        return GenAIAsyncBackend(url, self.headers, http2=True, vertex="project")


@unittest.skipUnless(HAVE_GENAI, "google-genai is not installed: pip install google-genai")
class GoogleGenAIVertexRequests(unittest.TestCase):
    """What google-genai sends Vertex, each way it is built, is what the wire takes."""

    def test_each_construction_reaches_its_route_with_its_credential(self) -> None:
        """Project mode sends a bearer under projects/…/locations/…; express mode a key without them."""
        from conformance.fixture import conformance_request
        from conformance.provider import start_fake_provider

        routes = {
            "project": (
                "/v1beta1/projects/conformance-project/locations/us-central1/publishers/google/models/"
                "conformance-model:generateContent",
                "authorization",
                "Bearer test",
            ),
            "express": (
                "/v1beta1/publishers/google/models/conformance-model:generateContent",
                "x-goog-api-key",
                "test",
            ),
        }
        for vertex, (path, header, value) in routes.items():
            with self.subTest(vertex=vertex):
                with start_fake_provider() as provider:
                    provider.reply(lambda request: gemini_vertex_wire.reply("text", "chat", request))
                    backend = GenAISyncBackend(provider.url, {}, vertex=vertex)
                    try:
                        response = backend.chat(conformance_request("conformance-model"))
                    finally:
                        backend.close()
                    (sent,) = provider.requests
                self.assertEqual(sent.path, path)
                self.assertEqual(sent.headers.get(header), value)
                self.assertEqual(gemini_vertex_wire.check_request(sent, "conformance-model"), [])
                self.assertEqual(response.finish_reason, "stop")


if __name__ == "__main__":
    unittest.main()


def load_tests(loader: unittest.TestLoader, tests: unittest.TestSuite, pattern: Optional[str]) -> Any:
    # By default each case runs through the async adapter once, express over HTTP/1.1 or h2c in turn.
    shared = ["GoogleGenAIVertexExpressConformance", "GoogleGenAIVertexAsyncH2CConformance"]
    return shared_between(tests, shared)
