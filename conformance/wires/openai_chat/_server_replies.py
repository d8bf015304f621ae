"""The bytes of the OpenAI-compatible servers: Mistral's, Groq's, DeepSeek's and llama-server's
own ``chat.completion`` objects and chunks, each as its recording shows it.

Strategy: a turn (text, thinking, calls) is rendered by the server that plays it, in its
key order, with its ids, its usage object and where it puts it; nothing of
api.openai.com's envelope (``service_tier: "default"``, ``obfuscation``, ``x-request-id``)
leaks in. The recordings are vercel/ai's fixtures (``packages/{mistral,groq,deepseek}``),
one JSON object per line, so the ``data:`` framing and ``[DONE]`` are the servers'
documented SSE. llama-server's are ``_llama_cpp``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._chunks import dumps, split_text, tcp_chunks
from .._ids import http_date, provider_id
from .._script import ScriptedCall, ScriptedTurn, TurnEvents
from ._replies import CREATED, fixture_arguments
from ._servers import DEEPSEEK_CALL_ID, DEEPSEEK_THINKING, GROQ_CALL_ID, MISTRAL_CALL_ID

if TYPE_CHECKING:
    from ...provider.replies import RecordedRequest, Reply

__all__ = [
    "DEEPSEEK_OVERFLOW",
    "model_of",
    "server_reply",
    "sse_of",
    "server_turn_events",
    "server_turn_response",
]

_HEX = "0123456789abcdef"
#: The reasoning tokens DeepSeek counts inside ``completion_tokens`` on a turn that thought.
_REASONING_TOKENS = 9
_FINISH = {"stop": "stop", "tool_calls": "tool_calls", "length": "length", "content_filter": "content_filter"}


def _uuid(seed: str) -> str:
    """A version-4 UUID, the same for a seed: Groq's and DeepSeek's completion ids."""
    digits = provider_id("", seed, 32, _HEX)
    digits = digits[:12] + "4" + digits[13:16] + "89ab"[int(digits[16], 16) % 4] + digits[17:]
    return "-".join((digits[:8], digits[8:12], digits[12:16], digits[16:20], digits[20:]))


def sse_of(body: Any) -> bytes:
    """One ``data:`` event: ``body`` as compact JSON, or a string (``[DONE]``) as it is."""
    from ...encoders import sse

    return sse(body if isinstance(body, str) else dumps(body))


def model_of(request: RecordedRequest) -> str:
    """The model the request named, which the reply repeats."""
    body = request.json if isinstance(request.json, dict) else {}
    return str(body.get("model") or "conformance-model")


def _wants_usage(request: RecordedRequest) -> bool:
    from ._replies import wants_usage

    return wants_usage(request)


def _thinking(turn: ScriptedTurn) -> str:
    return "".join(r.text for r in turn.reasoning if r.text)


# -- Mistral ---------------------------------------------------------------------------


def _mistral_usage() -> Dict[str, int]:
    u = FX.usage  # Mistral's own key order
    return {
        "prompt_tokens": u.input_tokens,
        "total_tokens": u.total_tokens,
        "completion_tokens": u.output_tokens,
    }


def _mistral_events(turn: ScriptedTurn, model: str, include_usage: bool) -> TurnEvents:
    """Role, text deltas, then one last chunk: the calls whole (no ``index``, no ``type``) or an
    empty text, with the finish reason and the usage, asked for or not (``include_usage`` changes
    nothing: the recording's request did not ask)."""
    completion = provider_id("", f"openai-chat/mistral/{turn.seed}", 32, _HEX)
    events: List[bytes] = []

    def chunk(delta: Dict[str, Any], finish: Optional[str] = None) -> None:
        body: Dict[str, Any] = {
            "id": completion,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        if finish is not None:
            body["usage"] = _mistral_usage()
        events.append(sse_of(body))

    chunk({"role": "assistant", "content": ""})
    for piece in split_text(turn.text, 4):
        chunk({"content": piece})
    finish = _FINISH.get(turn.finish_reason, "stop")
    if turn.calls:
        calls = [{"id": c.id, "function": {"name": c.name, "arguments": c.arguments}} for c in turn.calls]
        chunk({"content": None, "tool_calls": calls}, finish)
        whole = {index: (len(events) - 1, len(events) - 1) for index in range(len(turn.calls))}
    else:
        chunk({"content": ""}, finish)
        whole = {}
    events.append(sse_of("[DONE]"))
    return TurnEvents(events, "text/event-stream", {"date": http_date()}, whole)


def _mistral_whole(turn: ScriptedTurn, model: str) -> Dict[str, Any]:
    message: Dict[str, Any] = {"role": "assistant"}
    if turn.calls:
        message["tool_calls"] = [
            {"id": c.id, "function": {"name": c.name, "arguments": c.arguments}} for c in turn.calls
        ]
    else:
        message.update({"tool_calls": None, "content": turn.text})
    return {
        "id": provider_id("", f"openai-chat/mistral/{turn.seed}", 32, _HEX),
        "created": CREATED,
        "model": model,
        "usage": _mistral_usage(),
        "object": "chat.completion",
        "choices": [
            {"index": 0, "finish_reason": _FINISH.get(turn.finish_reason, "stop"), "message": message}
        ],
    }


# -- Groq ------------------------------------------------------------------------------


def _groq_usage() -> Dict[str, Any]:
    u = FX.usage  # token counts beside the seconds each stage took
    return {
        "queue_time": 0.041905864,
        "prompt_tokens": u.input_tokens,
        "prompt_time": 0.003940145,
        "completion_tokens": u.output_tokens,
        "completion_time": 0.068002311,
        "total_tokens": u.total_tokens,
        "total_time": 0.071942456,
    }


def _groq_request_id(seed: str) -> str:
    # req_01 and 24 more characters of Crockford's base32, lower case: a ULID.
    return provider_id("req_01", f"openai-chat/groq/{seed}", 24, "0123456789abcdefghjkmnpqrstvwxyz")


_GROQ_FINGERPRINT = "fp_" + provider_id("", "openai-chat/groq/fingerprint", 10, _HEX)
_GROQ_SEED = 1535227698


def _groq_events(turn: ScriptedTurn, model: str, include_usage: bool) -> TurnEvents:
    """``x_groq`` (id, seed) on the role chunk; each call whole in one chunk, ``index`` last;
    the finish chunk with the usage in ``x_groq`` and beside it, asked for or not (the
    recording's request did not ask)."""
    completion = "chatcmpl-" + _uuid(f"openai-chat/groq/{turn.seed}")
    request_id = _groq_request_id(turn.seed)
    events: List[bytes] = []

    def chunk(delta: Dict[str, Any], finish: Optional[str] = None, **extra: Any) -> None:
        body: Dict[str, Any] = {
            "id": completion,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "system_fingerprint": _GROQ_FINGERPRINT,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            **extra,
        }
        events.append(sse_of(body))

    x_groq = {"id": request_id, "seed": _GROQ_SEED}
    chunk({"role": "assistant", "content": "" if turn.text or not turn.calls else None}, x_groq=x_groq)
    for piece in split_text(turn.text, 4):
        chunk({"content": piece})
    spans = {}
    for index, call in enumerate(turn.calls):
        function = {"name": call.name, "arguments": call.arguments}
        chunk({"tool_calls": [{"id": call.id, "type": "function", "function": function, "index": index}]})
        spans[index] = (len(events) - 1, len(events) - 1)
    usage = _groq_usage()
    finish = _FINISH.get(turn.finish_reason, "stop")
    chunk({}, finish, x_groq={"id": request_id, "usage": usage}, usage=usage)
    events.append(sse_of("[DONE]"))
    return TurnEvents(events, "text/event-stream", {"date": http_date()}, spans)


def _groq_whole(turn: ScriptedTurn, model: str) -> Dict[str, Any]:
    message: Dict[str, Any] = {"role": "assistant"}
    if turn.calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in turn.calls
        ]
    else:
        message["content"] = turn.text
    return {
        "id": "chatcmpl-" + _uuid(f"openai-chat/groq/{turn.seed}"),
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _FINISH.get(turn.finish_reason, "stop"),
            }
        ],
        "usage": _groq_usage(),
        "usage_breakdown": None,
        "system_fingerprint": _GROQ_FINGERPRINT,
        "x_groq": {"id": _groq_request_id(turn.seed), "seed": _GROQ_SEED},
        "service_tier": "on_demand",
    }


# -- DeepSeek --------------------------------------------------------------------------

_DEEPSEEK_FINGERPRINT = "fp_eaab8d114b_prod0820_fp8_kvcache"


def _deepseek_usage(thought: bool) -> Dict[str, Any]:
    u = FX.usage  # cache hits and misses split the prompt; reasoning counts inside completion
    usage: Dict[str, Any] = {
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.total_tokens,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    if thought:
        usage["completion_tokens_details"] = {"reasoning_tokens": _REASONING_TOKENS}
    usage.update({"prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": u.input_tokens})
    return usage


def _deepseek_events(turn: ScriptedTurn, model: str, include_usage: bool) -> TurnEvents:
    """The reasoner's ``reasoning_content`` deltas first (``content: null``), then content deltas
    (``reasoning_content: null`` beside each where it thought), the calls by ``index``, and the
    finish chunk with the usage: ``"usage": null`` on every other chunk, when asked for."""
    completion = _uuid(f"openai-chat/deepseek/{turn.seed}")
    thinking = _thinking(turn)
    events: List[bytes] = []

    def chunk(delta: Dict[str, Any], finish: Optional[str] = None) -> None:
        body: Dict[str, Any] = {
            "id": completion,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "system_fingerprint": _DEEPSEEK_FINGERPRINT,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            body["usage"] = _deepseek_usage(bool(thinking)) if finish is not None else None
        events.append(sse_of(body))

    if thinking:
        chunk({"role": "assistant", "content": None, "reasoning_content": ""})
        for piece in split_text(thinking, 4):
            chunk({"content": None, "reasoning_content": piece})
    else:
        chunk({"role": "assistant", "content": ""})
    for piece in split_text(turn.text, 4):
        chunk({"content": piece, "reasoning_content": None} if thinking else {"content": piece})
    spans = {}
    for index, call in enumerate(turn.calls):
        opening = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        chunk({"tool_calls": [opening]})
        first = len(events)
        for piece in call.pieces():
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        spans[index] = (first, len(events) - 1)
    last = {"content": "", "reasoning_content": None} if thinking else {"content": ""}
    chunk(last, _FINISH.get(turn.finish_reason, "stop"))
    events.append(sse_of("[DONE]"))
    return TurnEvents(events, "text/event-stream", {"date": http_date()}, spans)


def _deepseek_whole(turn: ScriptedTurn, model: str) -> Dict[str, Any]:
    thinking = _thinking(turn)
    message: Dict[str, Any] = {"role": "assistant", "content": turn.text}
    if thinking:
        message["reasoning_content"] = thinking
    if turn.calls:
        message["tool_calls"] = [
            {
                "index": i,
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for i, c in enumerate(turn.calls)
        ]
    return {
        "id": _uuid(f"openai-chat/deepseek/{turn.seed}"),
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _FINISH.get(turn.finish_reason, "stop"),
            }
        ],
        "usage": _deepseek_usage(bool(thinking)),
        "system_fingerprint": _DEEPSEEK_FINGERPRINT,
    }


#: server variant -> (its stream of a turn, its whole reply to a turn).
_TURNS: Mapping[
    str, Tuple[Callable[[ScriptedTurn, str, bool], TurnEvents], Callable[[ScriptedTurn, str], Any]]
] = {
    "mistral": (_mistral_events, _mistral_whole),
    "groq": (_groq_events, _groq_whole),
    "deepseek": (_deepseek_events, _deepseek_whole),
}


def server_turn_events(turn: ScriptedTurn, request: RecordedRequest) -> TurnEvents:
    """The chunks the server ``turn.variant`` streams ``turn`` in."""
    return _TURNS[turn.variant][0](turn, model_of(request), _wants_usage(request))


def server_turn_response(turn: ScriptedTurn, request: RecordedRequest) -> Reply:
    """The whole ``chat.completion`` the server ``turn.variant`` answers ``turn`` with."""
    from ...provider.replies import JsonReply

    return JsonReply(_TURNS[turn.variant][1](turn, model_of(request)), headers={"date": http_date()})


# -- a scenario's reply ----------------------------------------------------------------


def _scenario_turn(scenario: str, variant: str) -> Optional[ScriptedTurn]:
    """The turn a server plays for ``scenario``, as its recording shows it."""
    seed = f"{scenario}/{variant}"
    if scenario == "text":
        return ScriptedTurn(text=FX.text, seed=seed, variant=variant)
    if scenario == "tool-call":
        call_id = {"mistral": MISTRAL_CALL_ID, "groq": GROQ_CALL_ID, "deepseek": DEEPSEEK_CALL_ID}[variant]
        call = ScriptedCall(call_id, FX.tool_name, fixture_arguments())
        # DeepSeek's recorded call comes from its reasoner, thinking first.
        reasoning = DEEPSEEK_THINKING if variant == "deepseek" else ()
        return ScriptedTurn(calls=(call,), reasoning=reasoning, seed=seed, variant=variant)
    return None


#: DeepSeek's 400 for a prompt past the window, whole or streamed (NoFxAiOS/nofx#1278): a
#: 131072-token model asked for more, its code the same words as its type.
DEEPSEEK_OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 131072 tokens. However, you requested 141980 "
        "tokens (133980 in the messages, 8000 in the completion). Please reduce the length of the "
        "messages or completion.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_request_error",
    }
}


def server_reply(scenario: str, variant: str, request: RecordedRequest, stream: bool) -> Optional[Reply]:
    """The reply of the server shape ``variant`` to ``scenario``, whole or streamed as asked."""
    from ._server_errors import server_error_reply

    failure = server_error_reply(scenario, variant)
    if failure is not None:
        return failure
    if scenario == "context-overflow" and variant == "deepseek":
        from ...provider.replies import JsonReply

        # Refused before any stream begins, so the same 400 either way.
        return JsonReply(DEEPSEEK_OVERFLOW, status=400, headers={"date": http_date()})
    turn = _scenario_turn(scenario, variant)
    if turn is None:
        return None
    if not stream:
        return server_turn_response(turn, request)
    from ...provider.replies import StreamReply

    played = server_turn_events(turn, request)
    return StreamReply(
        tcp_chunks(played.events, f"openai-chat/{turn.seed}"),
        content_type=played.content_type,
        headers=played.headers,
    )
