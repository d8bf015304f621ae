"""OpenAI Chat Completions' replies: the ``chat.completion`` object, and the ``data:``
events of ``chat.completion.chunk`` objects that stream one.

Reference: https://platform.openai.com/docs/api-reference/chat and
https://platform.openai.com/docs/api-reference/chat-streaming. The builders are named
after OpenAI's own objects (``chat_completion``, a chunk's ``delta``, ``finish_reason``),
so checking them against the docs is a grep.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._chunks import cut_events, dumps, tcp_chunks
from .._ids import fresh_id, http_date, obfuscation, provider_id

if TYPE_CHECKING:
    from ...provider.replies import RecordedRequest, StreamReply

__all__ = [
    "COMPLETION_ID",
    "CREATED",
    "FINGERPRINT",
    "TOOL_CALL_ID",
    "TRUNCATED_ARGUMENTS",
    "Chunks",
    "chat_completion",
    "fixture_arguments",
    "response_headers",
    "fixture_tool_call",
    "wants_usage",
]

CREATED = 1764403200  # 2025-11-29T08:00:00Z, seconds as OpenAI sends them
TOOL_CALL_ID = provider_id("call_", "openai-chat/tool-call")
COMPLETION_ID = provider_id("chatcmpl-", "openai-chat/completion", 29)
FINGERPRINT = provider_id("fp_", "openai-chat/fingerprint", 10, "0123456789abcdef")

#: The arguments of the cut-off call: valid up to the cut, then nothing.
TRUNCATED_ARGUMENTS = '{"city": "Par'


def fixture_arguments() -> str:
    """The fixture call's arguments as JSON text, as OpenAI writes them."""
    import json  # per reply, not per import: json loads at a case's first request

    # OpenAI spaces its argument JSON the way json.dumps does by default.
    return json.dumps(dict(FX.tool_arguments), ensure_ascii=False)


def _usage() -> Dict[str, Any]:
    u = FX.usage
    return {
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.total_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def fixture_tool_call(arguments: str) -> Dict[str, Any]:
    """The fixture's ``tool_calls`` entry, with ``arguments`` as the JSON text given."""
    return {
        "id": TOOL_CALL_ID,
        "type": "function",
        "function": {"name": FX.tool_name, "arguments": arguments},
    }


def response_headers(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The headers every reply carries, with a fresh ``x-request-id``."""
    # A fresh x-request-id on every response, as OpenAI's own: req_ + 32 hex.
    headers = {
        "date": http_date(),
        "x-request-id": fresh_id("req_", 32, "0123456789abcdef"),
        "openai-processing-ms": "412",
    }
    headers.update(extra or {})
    return headers


# -- whole replies: chat.completion ----------------------------------------------------


def chat_completion(model: str, message: Dict[str, Any], finish_reason: str) -> Dict[str, Any]:
    """A ``chat.completion`` object with one choice."""
    return {
        "id": COMPLETION_ID,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                # In api.openai.com's order: role, content (and the calls), refusal,
                # annotations (vercel/ai packages/openai/src/chat/__fixtures__/openai-text.json).
                "message": {"role": "assistant", **message, "refusal": None, "annotations": []},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": _usage(),
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT,
    }


# -- streamed replies: chat.completion.chunk -------------------------------------------


class Chunks:
    """Builds the ``data:`` events of one streamed completion."""

    def __init__(self, model: str, include_usage: bool) -> None:
        # Imported once per reply, not per event, nor with the module.
        from ...encoders import sse

        self.sse = sse
        self.model = model
        self.include_usage = include_usage
        self.events: List[bytes] = []

    def chunk(self, delta: Dict[str, Any], finish_reason: Optional[str] = None) -> None:
        body: Dict[str, Any] = {
            "id": COMPLETION_ID,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.model,
            "service_tier": "default",
            "system_fingerprint": FINGERPRINT,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if self.include_usage:
            body["usage"] = None
        # Real chunks end with random padding (vercel/ai
        # packages/openai/src/chat/__fixtures__/openai-text.chunks.txt).
        body["obfuscation"] = obfuscation(f"openai-chat/{len(self.events)}")
        self.events.append(self.sse(dumps(body)))

    def role(self, content: Optional[str] = "") -> None:
        self.chunk({"role": "assistant", "content": content, "refusal": None})

    def text(self, text: str, pieces: int = 4) -> None:
        step = max(1, -(-len(text) // pieces))
        for start in range(0, len(text), step):
            self.chunk({"content": text[start : start + step]})

    def tool_call(self, arguments: str, pieces: int = 4, role: bool = False) -> None:
        """The call's first chunk (id, name, empty arguments), then its argument fragments.

        With ``role`` the first chunk also opens the message, as 36 of 52 recorded
        tool-call streams do (crewAI ``test_handle_streaming_tool_calls.yaml``): no
        separate role chunk comes before it.
        """
        first: Dict[str, Any] = {"tool_calls": [{"index": 0, **fixture_tool_call("")}]}
        if role:
            first = {"role": "assistant", "content": None, **first, "refusal": None}
        self.chunk(first)
        step = max(1, -(-len(arguments) // pieces))
        for start in range(0, len(arguments), step):
            fragment = arguments[start : start + step]
            self.chunk({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]})

    def finish(self, finish_reason: str) -> None:
        self.chunk({}, finish_reason)
        if self.include_usage:
            self.events.append(self.sse(dumps(self.usage_chunk())))
        self.events.append(self.sse("[DONE]"))

    def usage_chunk(self) -> Dict[str, Any]:
        """The extra chunk with empty ``choices`` that carries the turn's usage."""
        return {
            "id": COMPLETION_ID,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.model,
            "service_tier": "default",
            "system_fingerprint": FINGERPRINT,
            "choices": [],
            "usage": _usage(),
            # Padded like every other chunk (vercel/ai packages/openai/src/chat/__fixtures__/
            # openai-text.chunks.txt, its last line).
            "obfuscation": obfuscation(f"openai-chat/{len(self.events)}"),
        }

    def headers(self) -> Dict[str, str]:
        """The stream's response headers."""
        return response_headers()

    def error(self, message: str, type_: str, code: Optional[str]) -> None:
        self.events.append(
            self.sse(dumps({"error": {"message": message, "type": type_, "param": None, "code": code}}))
        )

    def reply(self, seed: str, hang: bool = False, cut: Optional[Tuple[int, bool]] = None) -> StreamReply:
        """The stream; ``cut`` (events kept, cut inside the next) ends it short of ``[DONE]``."""
        from ...provider.replies import StreamReply

        events = self.events if cut is None else cut_events(self.events, *cut)
        return StreamReply(
            tcp_chunks(events, seed),
            content_type="text/event-stream; charset=utf-8",
            headers=self.headers(),
            hang=hang,
            end="complete" if cut is None else "close",
        )


def wants_usage(request: RecordedRequest) -> bool:
    """Whether the request asked for the usage chunk: ``stream_options.include_usage`` true."""
    body = request.json if isinstance(request.json, dict) else {}
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True
