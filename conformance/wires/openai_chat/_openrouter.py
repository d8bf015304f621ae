"""OpenRouter's own answers on the Chat Completions API: its stream, its failure inside a
stream, and its error envelope.

Strategy: OpenRouter routes a request to one of many upstream providers and speaks the
Chat Completions API in front of them, with shapes of its own that api.openai.com never
sends. Its stream opens with SSE comment lines (``: OPENROUTER PROCESSING``, sent while the
upstream warms up), every chunk carries a ``gen-`` id, the upstream's name in ``provider``
and ``native_finish_reason`` beside ``finish_reason``, every delta repeats ``role``, and
the usage comes, asked for or not, on one more chunk after the finish chunk whose
``finish_reason`` is ``null`` again. Its errors carry ``code`` as the HTTP status, a
number, with ``metadata`` instead of ``type``. A failure after the 200 (the upstream
dropped mid-answer) is a ``data:`` chunk with a top-level ``error`` beside the choices,
the choice's ``finish_reason`` ``"error"``, and the stream ends there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._chunks import split_text, tcp_chunks
from .._ids import http_date, provider_id
from .._script import ScriptedTurn, TurnEvents
from ._replies import CREATED
from ._server_replies import model_of, sse_of

if TYPE_CHECKING:
    from ...provider.replies import RecordedRequest, Reply

__all__ = ["OPENROUTER_COMMENT", "OPENROUTER_ERRORS", "openrouter_reply", "openrouter_turn"]

#: The keep-alive comment OpenRouter sends before the first chunk (openai/openai-go#227 shows two).
OPENROUTER_COMMENT = b": OPENROUTER PROCESSING\n\n"
#: The upstream OpenRouter names in ``provider`` on the played replies.
_UPSTREAM = "OpenAI"
_FINGERPRINT = "fp_" + provider_id("", "openai-chat/openrouter/fingerprint", 10, "0123456789abcdef")
_FINISH = {"stop": "stop", "tool_calls": "tool_calls", "length": "length", "content_filter": "content_filter"}
#: What OpenRouter's user id looks like on an error body (Gitlawb/openclaude#1125).
_USER_ID = provider_id("user_", "openai-chat/openrouter/user", 27)


def generation_id(seed: str) -> str:
    """``gen-`` then the creation time in seconds and 20 letters and digits, as OpenRouter's."""
    return f"gen-{CREATED}-" + provider_id("", f"openai-chat/openrouter/{seed}", 20)


def _usage() -> Dict[str, Any]:
    u = FX.usage  # with what it cost, as OpenRouter counts it
    return {
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.total_tokens,
        "cost": 0.00071,
        "is_byok": False,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "cost_details": {
            "upstream_inference_cost": None,
            "upstream_inference_prompt_cost": 0.00015,
            "upstream_inference_completions_cost": 0.00056,
        },
        "completion_tokens_details": {"reasoning_tokens": 0, "image_tokens": 0},
    }


class _Chunks:
    """The ``data:`` events of one OpenRouter stream, in its key order."""

    def __init__(self, seed: str, model: str) -> None:
        self.id = generation_id(seed)
        self.model = model
        self.events: List[bytes] = [OPENROUTER_COMMENT, OPENROUTER_COMMENT]

    def envelope(self) -> Dict[str, Any]:
        return {
            "id": self.id,
            "provider": _UPSTREAM,
            "model": self.model,
            "object": "chat.completion.chunk",
            "created": CREATED,
        }

    def chunk(self, delta: Mapping[str, Any], finish: Optional[str] = None, **extra: Any) -> None:
        choice = {
            "index": 0,
            # OpenRouter repeats the role on every delta.
            "delta": {"role": "assistant", **delta},
            "finish_reason": finish,
            "native_finish_reason": finish,
            "logprobs": None,
        }
        body = {**self.envelope(), "choices": [choice], "system_fingerprint": _FINGERPRINT, **extra}
        self.events.append(sse_of(body))

    def finish(self, reason: str) -> None:
        self.chunk({"content": ""}, reason)
        # The usage, asked for or not, on a chunk whose finish_reason is null again.
        self.chunk({"content": ""}, None, usage=_usage())
        self.events.append(sse_of("[DONE]"))

    def failure(self, error: Mapping[str, Any], choices: bool) -> None:
        """The chunk of a failure after the 200; nothing follows it."""
        chosen = [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}] if choices else []
        self.events.append(sse_of({**self.envelope(), "error": dict(error), "choices": chosen}))


def openrouter_turn(turn: ScriptedTurn, request: RecordedRequest) -> TurnEvents:
    """The chunks OpenRouter streams a text ``turn`` in: comments, text, the finish, the usage.

    A turn with calls is not played here: no recording of an OpenRouter tool-call stream was
    found, and the wire answers ``tool-call`` in api.openai.com's shape on this host.
    """
    out = _Chunks(turn.seed, model_of(request))
    out.chunk({"content": ""})
    for piece in split_text(turn.text, 4):
        out.chunk({"content": piece})
    out.finish(_FINISH.get(turn.finish_reason, "stop"))
    return TurnEvents(out.events, "text/event-stream", {"date": http_date()}, {})


def _envelope(code: int, message: str, metadata: Optional[Mapping[str, Any]], user: bool) -> Dict[str, Any]:
    error: Dict[str, Any] = {"message": message, "code": code}
    if metadata is not None:
        error["metadata"] = dict(metadata)
    body: Dict[str, Any] = {"error": error}
    if user:
        body["user_id"] = _USER_ID
    return body


#: (scenario, variant) -> the status and body OpenRouter fails the request with, before any
#: stream: ``code`` the status as a number, ``metadata`` where the source shows it.
OPENROUTER_ERRORS: Mapping[Tuple[str, str], Tuple[int, Dict[str, Any]]] = {
    # Musistudio/claude-code-router#227: the whole body of a 401 from openrouter.ai.
    ("auth", "openrouter"): (401, _envelope(401, "No auth credentials found", None, False)),
    # Gitlawb/openclaude#1125 and babikov/doka-site#7: the credits ran out; user_id beside error.
    ("quota", "openrouter"): (
        402,
        _envelope(
            402,
            "This request requires more credits, or fewer max_tokens. You requested up to 32000 tokens, "
            "but can only afford 27342. To increase, visit https://openrouter.ai/settings/credits and "
            "upgrade to a paid account",
            {"provider_name": None},
            True,
        ),
    ),
    # Open-webui/computer#293: an upstream's shared pool rate-limited, its own words in raw.
    ("rate-limit", "openrouter"): (
        429,
        _envelope(
            429,
            "Provider returned error",
            {
                "raw": "conformance-model is temporarily rate-limited upstream. Please retry shortly, or add "
                "your own key to accumulate your rate limits: https://openrouter.ai/settings/integrations",
                "provider_name": _UPSTREAM,
                "limit_source": "upstream_provider_shared_pool",
                "remedy_hint": "Retry shortly, add your own provider key, or route to another provider",
            },
            False,
        ),
    ),
    # Aider-AI/aider#3721: only the message says the prompt is too long.
    ("context-overflow", "openrouter"): (
        400,
        _envelope(
            400,
            "This endpoint's maximum context length is 131072 tokens. However, you requested about 141607 "
            "tokens (10535 of text input, 131072 in the output). Please reduce the length of either one, "
            'or use the "middle-out" transform to compress your prompt automatically.',
            {"provider_name": _UPSTREAM},
            False,
        ),
    ),
}

#: The failure inside a stream, by variant: (its error object, whether the chunk keeps a choice).
_STREAM_FAILURES: Mapping[str, Tuple[Dict[str, Any], bool]] = {
    # OpenRouter's errors page: code a string here, choices[0].finish_reason "error".
    "openrouter": ({"code": "server_error", "message": "Provider disconnected unexpectedly"}, True),
    # DiegoSouzapw/OmniRoute#8210: choices empty, the error at the top level, code the status.
    "openrouter-no-choices": (
        {
            "code": 502,
            "message": "Provider returned error",
            "metadata": {
                "raw": "Worker local total request limit reached (33/32)",
                "provider_name": _UPSTREAM,
            },
        },
        False,
    ),
}


def openrouter_reply(scenario: str, variant: str, request: RecordedRequest, stream: bool) -> Optional[Reply]:
    """OpenRouter's answer to ``scenario`` in the shape ``variant`` names, whole or streamed as asked."""
    from ...provider.replies import JsonReply, StreamReply

    failure = OPENROUTER_ERRORS.get((scenario, variant))
    if failure is not None:
        # Refused before any stream begins: the same status and body either way.
        status, body = failure
        return JsonReply(body, status=status, headers={"date": http_date()})
    seed = f"{scenario}/{variant}"
    if scenario == "stream-error" and variant in _STREAM_FAILURES:
        error, choices = _STREAM_FAILURES[variant]
        if not stream:
            # A whole request fails before its answer, with the status its code names.
            status = error["code"] if isinstance(error["code"], int) else 502
            return JsonReply(_envelope(status, error["message"], None, False), status=status)
        out = _Chunks(seed, model_of(request))
        out.chunk({"content": ""})
        for piece in split_text(FX.partial_text, 3):
            out.chunk({"content": piece})
        out.failure(error, choices)
        return StreamReply(
            tcp_chunks(out.events, f"openai-chat/{seed}"),
            content_type="text/event-stream",
            headers={"date": http_date()},
        )
    if scenario != "text" or not stream:
        return None
    turn = ScriptedTurn(text=FX.text, seed=seed, variant=variant)
    played = openrouter_turn(turn, request)
    return StreamReply(
        tcp_chunks(played.events, f"openai-chat/{seed}"),
        content_type=played.content_type,
        headers=played.headers,
    )
