"""llama-server's (llama.cpp's) own answers: its failures before and inside a stream, by the
builds that send each, and the chunks it streams before a failure.

Strategy: llama-server's stream errors changed shape twice, and a variant plays each, as
the builds of its time send it: before PR #16109 (2025-09-19) an ``error:`` line, a field
SSE readers drop, then ``data: [DONE]``, all under HTTP 200; until PR #16486 (2025-10-09)
a ``data: {"error": ...}`` line under HTTP 200; since then an oversized prompt gets a 400
before the stream, and only a failure after the first chunk (the context filled while
generating) comes in the stream, as one ``data:`` line with no ``[DONE]`` after it. The
error object is llama-server's: ``code`` is the HTTP status as a number, ``type`` its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._chunks import dumps, split_text, tcp_chunks
from .._ids import http_date, provider_id
from ._replies import CREATED
from ._server_replies import model_of, sse_of

if TYPE_CHECKING:
    from ...provider.replies import RecordedRequest, Reply

__all__ = ["llama_cpp_reply"]

#: What llama-server sends in its ``Server`` header on every reply.
_LLAMA_HEADERS = {"server": "llama.cpp"}
#: Its message for a prompt longer than the context, before PR #18174 made it count both.
_EXCEEDS = (
    "the request exceeds the available context size. try increasing the context size or enable context shift"
)


def _exceeds(tokens: int = 9000, context: int = 8192) -> Dict[str, Any]:
    """The ``exceed_context_size_error`` object of llama-server since PR #18174 (2025-12-18)."""
    return {
        "code": 400,
        "message": f"request ({tokens} tokens) exceeds the available context size ({context} tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": tokens,
        "n_ctx": context,
    }


def _llama_reply(status: int, error: Mapping[str, Any]) -> Reply:
    from ...provider.replies import JsonReply

    headers = {**_LLAMA_HEADERS, "date": http_date()}
    return JsonReply(
        {"error": dict(error)}, status=status, headers=headers, content_type="application/json; charset=utf-8"
    )


def _llama_stream(events: List[bytes], seed: str) -> Reply:
    from ...provider.replies import StreamReply

    headers = {**_LLAMA_HEADERS, "date": http_date()}
    return StreamReply(tcp_chunks(events, seed), content_type="text/event-stream", headers=headers)


def _llama_chunks(model: str, seed: str) -> List[bytes]:
    """The role chunk and the partial text, in llama-server's key order with its ``timings``."""
    completion = provider_id("chatcmpl-", f"openai-chat/llama.cpp/{seed}", 32)
    events = []
    pieces = split_text(FX.partial_text, 3)
    for count, delta in enumerate(
        [{"role": "assistant", "content": None}] + [{"content": p} for p in pieces]
    ):
        timings = {
            "cache_n": 0,
            "prompt_n": FX.usage.input_tokens,
            "prompt_ms": 251.51,
            "prompt_per_token_ms": 8.113225806451613,
            "prompt_per_second": 123.25553656912251,
            "predicted_n": count + 1,
            "predicted_ms": 15.5 * (count + 1),
            "predicted_per_token_ms": 15.5,
            "predicted_per_second": 64.51612903225806,
        }
        body = {
            "choices": [{"finish_reason": None, "index": 0, "delta": delta}],
            "created": CREATED,
            "id": completion,
            "model": model,
            "system_fingerprint": "b9554-d403f00ec",
            "object": "chat.completion.chunk",
            "timings": timings,
        }
        events.append(sse_of(body))
    return events


def llama_cpp_reply(scenario: str, variant: str, request: RecordedRequest, stream: bool) -> Optional[Reply]:
    """llama-server's answer in the shape ``variant`` names, whole or streamed as asked.

    A whole request gets what the same builds answered it with: the error as a status.
    """
    seed = f"openai-chat/{scenario}/{variant}"
    if scenario == "stream-error":
        failure = {"code": 500, "message": "Context size has been exceeded.", "type": "server_error"}
        if not stream:
            return _llama_reply(500, failure)
        # An error after the first chunk is one data: line, and the stream ends there.
        return _llama_stream(_llama_chunks(model_of(request), seed) + [sse_of({"error": failure})], seed)
    if scenario != "context-overflow":
        return None
    if variant == "llama-cpp-error-field":
        # Builds before PR #15780 typed it as a plain invalid request; non-stream, as a 400.
        error = {"code": 400, "message": _EXCEEDS, "type": "invalid_request_error"}
        if not stream:
            return _llama_reply(400, error)
        return _llama_stream([b"error: " + dumps(error).encode("utf-8") + b"\n\n", sse_of("[DONE]")], seed)
    if variant == "llama-cpp-in-stream":
        error = {
            "code": 400,
            "message": _EXCEEDS,
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 9000,
            "n_ctx": 8192,
        }
        if not stream:
            return _llama_reply(400, error)
        return _llama_stream([sse_of({"error": error}), sse_of("[DONE]")], seed)
    return _llama_reply(400, _exceeds())
