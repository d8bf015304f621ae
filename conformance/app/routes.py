"""Where each official SDK finds the fake provider: the environment it reads, and a path per SDK.

Strategy: one provider serves every SDK at once, each under a base path of its own
(``/openai``, ``/anthropic``, ``/gemini``...), so that a request says by its path
which SDK sent it and which wire answers it, even where two APIs share a path
(Azure's and OpenAI's ``/chat/completions``, Claude's ``/v1/messages`` on three
clouds). :data:`ROUTES` is that table; :data:`SDK_ENVIRONMENT` is the environment
each SDK reads its base URL and credentials from, pointing at those paths, with test
credentials; :data:`CLEARED` the variables that would otherwise take precedence over
them (another credential, another front end). Each name was read in the SDK's own
source, at the versions ``docs/app.md`` states.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Mapping, Optional, Tuple

if TYPE_CHECKING:
    from ..provider import RecordedRequest
    from ..wires import Wire

__all__ = ["CLEARED", "ROUTES", "SDK_ENVIRONMENT", "Route", "environment_for", "route_of", "wire_of"]


@dataclass(frozen=True)
class Route:
    """One SDK's base path on the provider, and the wires that answer under it, in order:
    the first whose generation call the request is answers it."""

    prefix: str
    wires: Tuple[str, ...]


#: Each SDK's base path, the most specific first (``/anthropic-vertex`` before ``/anthropic``).
ROUTES: Tuple[Route, ...] = (
    Route("/anthropic-vertex", ("anthropic-vertex",)),
    Route("/anthropic", ("anthropic",)),
    Route("/azure", ("azure-openai-chat", "azure-openai-responses")),
    Route("/openai", ("openai-chat", "openai-responses")),
    Route("/gemini-vertex", ("gemini-vertex",)),
    Route("/gemini", ("gemini",)),
    Route("/cohere", ("cohere",)),
    Route("/ollama", ("ollama",)),
    Route("/bedrock", ("bedrock-converse", "bedrock-invoke")),
)

#: The environment each official SDK reads, ``{url}`` standing for the provider's URL. The
#: source line each is read at, in the versions the app page names:
#:
#: * openai: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` (``openai/lib/_client_auth.py``);
#:   ``AzureOpenAI``: ``AZURE_OPENAI_ENDPOINT``, ``AZURE_OPENAI_API_KEY``,
#:   ``OPENAI_API_VERSION`` (``openai/lib/azure.py``).
#: * anthropic: ``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY`` (``anthropic/_client.py``);
#:   ``AnthropicVertex``: ``ANTHROPIC_VERTEX_BASE_URL``, ``ANTHROPIC_VERTEX_PROJECT_ID``,
#:   ``CLOUD_ML_REGION`` (``anthropic/lib/vertex/_client.py``).
#: * google-genai: ``GOOGLE_GEMINI_BASE_URL`` and, for Vertex AI, ``GOOGLE_VERTEX_BASE_URL``
#:   (``google/genai/_base_url.py``); ``GEMINI_API_KEY``, ``GOOGLE_CLOUD_PROJECT``,
#:   ``GOOGLE_CLOUD_LOCATION`` (``google/genai/_api_client.py``).
#: * cohere: ``CO_API_URL``, ``CO_API_KEY`` (``cohere/client_v2.py``, ``cohere/client.py``).
#: * ollama: ``OLLAMA_HOST`` (``ollama/_client.py``), which may carry a path.
#: * boto3 / botocore: ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME`` (the service-specific endpoint,
#:   ``botocore/configprovider.py``), ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
#:   ``AWS_REGION``, ``AWS_DEFAULT_REGION``.
SDK_ENVIRONMENT: Mapping[str, str] = {
    "OPENAI_BASE_URL": "{url}/openai/v1",
    "OPENAI_API_KEY": "sk-conformance-test",
    "AZURE_OPENAI_ENDPOINT": "{url}/azure",
    "AZURE_OPENAI_API_KEY": "conformance-test",
    "OPENAI_API_VERSION": "2024-10-21",
    "ANTHROPIC_BASE_URL": "{url}/anthropic",
    "ANTHROPIC_API_KEY": "sk-ant-conformance-test",
    "ANTHROPIC_VERTEX_BASE_URL": "{url}/anthropic-vertex/v1",
    "ANTHROPIC_VERTEX_PROJECT_ID": "conformance-project",
    "CLOUD_ML_REGION": "us-east5",
    "GOOGLE_GEMINI_BASE_URL": "{url}/gemini",
    "GOOGLE_VERTEX_BASE_URL": "{url}/gemini-vertex",
    "GEMINI_API_KEY": "conformance-test",
    "GOOGLE_CLOUD_PROJECT": "conformance-project",
    "GOOGLE_CLOUD_LOCATION": "us-central1",
    "CO_API_URL": "{url}/cohere",
    "CO_API_KEY": "conformance-test",
    "OLLAMA_HOST": "{url}/ollama",
    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": "{url}/bedrock",
    "AWS_ACCESS_KEY_ID": "AKIDCONFORMANCETEST",
    "AWS_SECRET_ACCESS_KEY": "conformance-test-secret",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}

#: What would win over the variables above, removed while the environment is on: another
#: credential the SDK prefers or adds (a real key must never reach even a fake provider's
#: log), and the switches that send a client elsewhere.
CLEARED: Tuple[str, ...] = (
    "OPENAI_ADMIN_KEY",
    "AZURE_OPENAI_AD_TOKEN",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_PROFILE",
    "GOOGLE_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "COHERE_API_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
)


def environment_for(url: str) -> Dict[str, str]:
    """:data:`SDK_ENVIRONMENT` for a provider at ``url``."""
    return {name: value.format(url=url.rstrip("/")) for name, value in SDK_ENVIRONMENT.items()}


def route_of(path: str) -> Optional[Route]:
    """The route a request path falls under, or ``None``."""
    for route in ROUTES:
        if path == route.prefix or path.startswith(route.prefix + "/"):
            return route
    return None


def wire_of(request: RecordedRequest) -> Optional[Wire]:
    """The wire whose generation call ``request`` is, under its route; ``None`` where it is none."""
    from ..wires import WIRES

    route = route_of(request.path)
    if route is None:
        return None
    for name in route.wires:
        if WIRES[name].is_generation(request):
            return WIRES[name]
    return None
