"""Azure OpenAI's Chat Completions: OpenAI's wire, with Azure's body, stream and failures.

Strategy: :class:`AzureOpenAIChatWire` is the OpenAI Chat wire with its reply-shape hooks
replaced (``chunks`` makes :class:`AzureChunks`, ``completion_reply`` runs
:func:`azure_completion`), Azure's own failures answered from ``_variants``, and its
routes checked by ``_request``. Every scenario, scripted turn and history is OpenAI's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._chunks import dumps
from .._ids import obfuscation
from ..openai_chat import OpenAIChatWire
from ..openai_chat._replies import COMPLETION_ID, CREATED, FINGERPRINT, Chunks, wants_usage
from ..openai_chat._variants import VARIANTS
from ._shape import (
    AZURE_MODEL,
    azure_headers,
    chunk_filters,
    completion_filters,
    prompt_filter_results,
    sorted_keys,
)
from ._variants import CHAT_OWN, NO_QUOTA, NO_REASONING, azure_error, in_stream_overload

if TYPE_CHECKING:
    from ...provider.replies import JsonReply, RecordedRequest, Reply
    from .._variants import Variant

__all__ = ["AzureChunks", "AzureOpenAIChatWire", "azure_completion", "azure_openai_chat_wire"]

#: Azure's Chat table: api.openai.com's shapes where Azure serves them unchanged, its own elsewhere.
VARIANTS_AZURE: Mapping[str, Tuple[Variant, ...]] = {
    **{key: value for key, value in VARIANTS.items() if key == "corrupt-arguments" or "cut" in key},
    **CHAT_OWN,
}

#: The failures Azure answers itself (or with the model's body and Azure's headers).
_AZURE_FAILURES = ("auth", "rate-limit", "overloaded", "server-error", "context-overflow")


#: The filtered whole reply whose choice carries no ``content_filter_results`` at all.
UNPOPULATED = "unpopulated-results"


def azure_completion(body: Mapping[str, Any], filtered_shape: str = "") -> Dict[str, Any]:
    """OpenAI's ``chat.completion`` as Azure sends it.

    A choice the output filter stopped (``finish_reason: "content_filter"``) keeps a
    ``message`` with its role and no ``content`` (langchain-ai/langchain#3861, ``KeyError:
    'content'``), and either names the filtered category in ``content_filter_results``
    or, with ``filtered_shape`` :data:`UNPOPULATED`, carries none (microsoft/semantic-kernel#5240:
    Azure "doesn't always populate" them; zhayujie/CowAgent#1539, a raw reply without them).
    """
    whole = {key: value for key, value in body.items() if key != "service_tier"}
    whole["model"] = AZURE_MODEL
    choice = dict(whole["choices"][0])
    filtered = choice.get("finish_reason") == "content_filter"
    if filtered:
        choice["message"] = {"role": "assistant"}
    calls = bool(choice["message"].get("tool_calls"))
    if not (filtered and filtered_shape == UNPOPULATED):
        choice["content_filter_results"] = {} if calls else completion_filters(filtered)
    whole["choices"] = [choice]
    shaped: Dict[str, Any] = sorted_keys(whole)
    shaped["prompt_filter_results"] = prompt_filter_results({"detected": False, "filtered": False})
    return {key: shaped[key] for key in sorted(shaped)}


class AzureChunks(Chunks):
    """The ``chat.completion.chunk`` events of an Azure stream.

    With ``async_filter`` the deployment's content filter runs beside the stream, as
    Azure's Asynchronous Filter does: text chunks carry no filter results, and an
    annotation chunk with no ``delta`` (``content_filter_offsets`` and the results) comes
    before the end (openai/openai-python#1677; aallam/openai-kotlin#340, raw).
    """

    def __init__(self, model: str, include_usage: bool, async_filter: bool = False) -> None:
        super().__init__(model, include_usage)
        self.async_filter = async_filter
        self.sent = 0
        first = {
            "choices": [],
            "created": 0,
            "id": "",
            "model": "",
            "object": "",
            "prompt_filter_results": prompt_filter_results({"filtered": False, "detected": False}),
        }
        self.events.append(self.sse(dumps(first)))

    def _body(self, choices: List[Dict[str, Any]]) -> Dict[str, Any]:
        body: Dict[str, Any] = {
            "choices": choices,
            "created": CREATED,
            "id": COMPLETION_ID,
            "model": AZURE_MODEL,
            "obfuscation": obfuscation(f"azure-openai-chat/{len(self.events)}"),
            "object": "chat.completion.chunk",
            "system_fingerprint": FINGERPRINT,
        }
        if self.include_usage:
            body["usage"] = None
        return body

    def chunk(self, delta: Dict[str, Any], finish_reason: Optional[str] = None) -> None:
        text = delta.get("content")
        self.sent += len(text) if isinstance(text, str) else 0
        choice: Dict[str, Any] = {
            "delta": delta,
            "finish_reason": finish_reason,
            "index": 0,
            "logprobs": None,
        }
        if finish_reason == "content_filter":
            choice["content_filter_results"] = chunk_filters(filtered=True)
        elif not self.async_filter:
            # The categories on text; an empty object on the role, call and finish chunks.
            choice["content_filter_results"] = chunk_filters() if text else {}
        self.events.append(self.sse(dumps(sorted_keys(self._body([choice])))))

    def annotation(self) -> None:
        """The Asynchronous Filter's verdict on the text so far: a choice with no ``delta``."""
        choice = {
            # In the order Azure writes them, not alphabetical (aallam/openai-kotlin#340).
            "content_filter_offsets": {"check_offset": 0, "start_offset": 0, "end_offset": self.sent},
            "content_filter_results": chunk_filters(),
            "finish_reason": None,
            "index": 0,
        }
        self.events.append(
            self.sse(dumps({"choices": [choice], "created": 0, "id": "", "model": "", "object": ""}))
        )

    def finish(self, finish_reason: str) -> None:
        if self.async_filter:
            self.annotation()
        super().finish(finish_reason)

    def usage_chunk(self) -> Dict[str, Any]:
        body = self._body([])
        body["usage"] = super().usage_chunk()["usage"]
        shaped: Dict[str, Any] = sorted_keys(body)
        return shaped

    def headers(self) -> Dict[str, str]:
        return azure_headers()


class AzureOpenAIChatWire(OpenAIChatWire):
    """Azure OpenAI's Chat Completions, whole and streamed."""

    name = "azure-openai-chat"
    title = "Azure OpenAI Chat Completions"
    variants_table = VARIANTS_AZURE
    unsupported = {"reasoning": NO_REASONING, "quota": NO_QUOTA}
    #: Azure's Chat 429 carries retry-after (its first rate-limit variant).
    rate_limit_retry_after = FX.retry_after

    def chunks(self, model: str, include_usage: bool) -> AzureChunks:
        return AzureChunks(model, include_usage)

    def completion_reply(self, body: Dict[str, Any]) -> JsonReply:
        from ...provider.replies import JsonReply

        # Azure's body is compact and ends in a newline (openllmetry's 2026 capture).
        return JsonReply((dumps(azure_completion(body)) + "\n").encode("utf-8"), headers=azure_headers())

    def aux_reply(self, request: RecordedRequest) -> Reply:
        # Azure has no GET {base}/models/{model} under a deployment: the base 404.
        return super(OpenAIChatWire, self).aux_reply(request)

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        if scenario in self.unsupported:
            return None
        from ...provider.replies import JsonReply

        variant = variant or self.variants(scenario, mode)[0].name
        stream = self.wants_stream(request)
        if scenario in _AZURE_FAILURES:
            return azure_error(scenario, variant)
        if scenario == "stream-error":
            if not stream:
                return azure_error("overloaded")  # a whole reply cannot fail halfway
            out = self.chunks(_model(request), wants_usage(request))
            out.role()
            out.text(FX.partial_text, pieces=3)
            error = in_stream_overload()["error"]
            out.error(error["message"], error["type"], error["code"])
            return out.reply(f"{self.name}/{scenario}")
        if scenario == "content-filter" and variant == "prompt-filtered-400":
            return azure_error(scenario, variant)  # refused before any stream begins
        if scenario == "content-filter" and not stream:
            from ..openai_chat._replies import chat_completion

            filtered = chat_completion(_model(request), {"content": None}, "content_filter")
            body = azure_completion(filtered, variant)
            return JsonReply((dumps(body) + "\n").encode("utf-8"), headers=azure_headers())
        if scenario == "text" and stream and variant == "async-filter":
            out = AzureChunks(_model(request), wants_usage(request), async_filter=True)
            out.role()
            out.text(FX.text)
            out.finish("stop")
            return out.reply(f"{self.name}/{scenario}/{variant}")
        return super().reply(scenario, mode, request, variant)

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        from ._request import check_chat

        return check_chat(request, model)


def _model(request: RecordedRequest) -> str:
    body = request.json if isinstance(request.json, dict) else {}
    return str(body.get("model") or "conformance-model")


azure_openai_chat_wire = AzureOpenAIChatWire()
