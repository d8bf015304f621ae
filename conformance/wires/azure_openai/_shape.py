"""What Azure puts around OpenAI's replies: the filter results, its key order, its headers.

Strategy: Azure OpenAI serves OpenAI's own objects, and adds to them. Every Chat reply
carries ``prompt_filter_results`` (what its content filter found in the prompt) and, on
each choice, ``content_filter_results``; a stream opens with a chunk that has no
``choices`` and only the prompt's results, before the role chunk. Its Chat bodies are
re-serialised with **alphabetical keys**, except inside each ``prompt_filter_results``
entry (``prompt_index`` first). A Responses object keeps OpenAI's key order and gains
``content_filters`` (``null`` until the response is done). Its headers are Azure's:
``apim-request-id``, a UUID ``x-request-id``, ``x-ms-region``.

Captures: traceloop/openllmetry ``packages/opentelemetry-instrumentation-openai/tests/
traces/cassettes/test_azure/test_chat_content_filtering.yaml`` (the 2026 interaction: a
whole reply and its headers), vercel/ai ``packages/openai/src/chat/__fixtures__/
azure-model-router.1.chunks.txt`` (a stream, 2025-11), crewAIInc/crewAI
``lib/crewai/tests/cassettes/llms/azure/TestAzureResponsesCall.test_call_delegates_to_responses.yaml``
(a whole Responses object, pretty-printed) and vercel/ai ``packages/azure/src/__fixtures__/
azure-text.1.chunks.txt`` (a Responses stream).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from .._ids import fresh_id, http_date

__all__ = [
    "AZURE_MODEL",
    "azure_headers",
    "chunk_filters",
    "completion_filters",
    "content_filters",
    "prompt_filter_results",
    "sorted_keys",
    "with_filters",
]

#: The model an Azure reply names: the deployment's underlying model, not the deployment.
AZURE_MODEL = "gpt-4.1-mini-2025-04-14"
_HEX = "0123456789abcdef"
_SAFE = {"filtered": False, "severity": "safe"}
#: The category a filtered reply names, as the filter reports it.
_FILTERED = {"filtered": True, "severity": "high"}


def _uuid() -> str:
    """A fresh UUID in its text form, as Azure's request ids are."""
    parts = (fresh_id("", n, _HEX) for n in (8, 4, 4, 4, 12))
    return "-".join(parts)


def azure_headers(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The headers every Azure reply carries: APIM's request id, a UUID request id, the region."""
    headers = {
        "apim-request-id": _uuid(),
        "date": http_date(),
        "x-content-type-options": "nosniff",
        "x-ms-region": "East US 2",
        "x-request-id": _uuid(),
    }
    headers.update(extra or {})
    return headers


def sorted_keys(value: Any) -> Any:
    """``value`` with every object's keys in alphabetical order, as Azure writes Chat bodies."""
    if isinstance(value, dict):
        return {key: sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(item) for item in value]
    return value


def completion_filters(filtered: bool = False) -> Dict[str, Any]:
    """A whole reply's ``content_filter_results``: the four categories and protected material."""
    results: Dict[str, Any] = {
        "hate": dict(_FILTERED if filtered else _SAFE),
        "protected_material_code": {"detected": False, "filtered": False},
        "protected_material_text": {"detected": False, "filtered": False},
        "self_harm": dict(_SAFE),
        "sexual": dict(_SAFE),
        "violence": dict(_SAFE),
    }
    return results


def chunk_filters(filtered: bool = False) -> Dict[str, Any]:
    """A text chunk's ``content_filter_results``: the four categories."""
    return {
        "hate": dict(_FILTERED if filtered else _SAFE),
        "self_harm": dict(_SAFE),
        "sexual": dict(_SAFE),
        "violence": dict(_SAFE),
    }


def prompt_filter_results(jailbreak: Dict[str, bool]) -> List[Dict[str, Any]]:
    """The prompt's results; ``prompt_index`` before ``content_filter_results``, unlike the rest."""
    return [
        {
            "prompt_index": 0,
            "content_filter_results": {
                "hate": dict(_SAFE),
                "jailbreak": jailbreak,
                "self_harm": dict(_SAFE),
                "sexual": dict(_SAFE),
                "violence": dict(_SAFE),
            },
        }
    ]


def content_filters() -> List[Dict[str, Any]]:
    """A finished response's ``content_filters``: the prompt's and the completion's, in Azure's order."""

    def entry(source: str, results: Dict[str, Any], end: int) -> Dict[str, Any]:
        return {
            "blocked": False,
            "source_type": source,
            "content_filter_raw": [],
            "content_filter_results": results,
            "content_filter_offsets": {"start_offset": 0, "end_offset": end, "check_offset": 0},
        }

    categories = {name: dict(_SAFE) for name in ("hate", "sexual", "violence", "self_harm")}
    prompt = {"jailbreak": {"detected": False, "filtered": False}, **categories}
    material = {"detected": False, "filtered": False}
    completion = {"protected_material_code": dict(material), "protected_material_text": dict(material)}
    return [entry("prompt", prompt, 368), entry("completion", {**completion, **categories}, 53)]


def with_filters(response: Dict[str, Any]) -> Dict[str, Any]:
    """``response`` with ``content_filters`` after ``completed_at``: ``null`` while in progress."""
    filters = None if response.get("status") == "in_progress" else content_filters()
    out: Dict[str, Any] = {}
    for key, value in response.items():
        out[key] = value
        if key == "completed_at":
            out["content_filters"] = filters
    return out
