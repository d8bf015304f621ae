"""OpenAI Chat Completions: ``POST {base}/chat/completions``, whole or as SSE.

Reference: https://platform.openai.com/docs/api-reference/chat and
https://platform.openai.com/docs/api-reference/chat-streaming. The shapes below are
the ones openai-python 3.x was seen to accept (``openai/types/chat``).

A streamed reply is ``data:`` events of ``chat.completion.chunk`` objects, no
``event:`` names, ending with ``data: [DONE]``. Tool-call arguments arrive as string
fragments keyed by ``tool_calls[].index``. Usage comes in one extra chunk with empty
``choices`` right before ``[DONE]``, and only when the request asked for it with
``stream_options.include_usage``. A failure after the 200 is a ``data:`` event
carrying a top-level ``error`` object, with no ``[DONE]`` after it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..contract import Reasoning, ReasoningKind
from ..fixture import CONFORMANCE_FIXTURE as FX
from ._base import (
    CUT_IN_CALL,
    Variant,
    Wire,
    check_function_tool,
    check_json_post,
    check_question,
    cut_events,
    cut_short,
    dumps,
    fresh_id,
    http_date,
    obfuscation,
    provider_id,
    stream_cut_variants,
    tcp_chunks,
    text_of,
)

if TYPE_CHECKING:
    from ..contract import Message, ToolCall, ToolChoice
    from ..provider.replies import JsonReply, RecordedRequest, Reply, StreamReply
    from ._turns import History, ScriptedCall, ScriptedTurn, TurnEvents

__all__ = ["OpenAIChatWire", "openai_chat_wire"]

CREATED = 1764403200  # 2025-11-29T08:00:00Z, seconds as OpenAI sends them
TOOL_CALL_ID = provider_id("call_", "openai-chat/tool-call")
COMPLETION_ID = provider_id("chatcmpl-", "openai-chat/completion", 29)
FINGERPRINT = provider_id("fp_", "openai-chat/fingerprint", 10, "0123456789abcdef")

#: The arguments of the cut-off call: valid up to the cut, then nothing.
TRUNCATED_ARGUMENTS = '{"city": "Par'


def _arguments() -> str:
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


def _tool_call(arguments: str) -> Dict[str, Any]:
    return {
        "id": TOOL_CALL_ID,
        "type": "function",
        "function": {"name": FX.tool_name, "arguments": arguments},
    }


def _headers(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
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
                "message": {"role": "assistant", "refusal": None, "annotations": [], **message},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": _usage(),
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT,
    }


# -- streamed replies: chat.completion.chunk -------------------------------------------


class _Chunks:
    """Builds the ``data:`` events of one streamed completion."""

    def __init__(self, model: str, include_usage: bool) -> None:
        # Imported once per reply, not per event, nor with the module.
        from ..encoders import sse

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
        first: Dict[str, Any] = {"tool_calls": [{"index": 0, **_tool_call("")}]}
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
            self.events.append(
                self.sse(
                    dumps(
                        {
                            "id": COMPLETION_ID,
                            "object": "chat.completion.chunk",
                            "created": CREATED,
                            "model": self.model,
                            "service_tier": "default",
                            "system_fingerprint": FINGERPRINT,
                            "choices": [],
                            "usage": _usage(),
                        }
                    )
                )
            )
        self.events.append(self.sse("[DONE]"))

    def error(self, message: str, type_: str, code: Optional[str]) -> None:
        self.events.append(
            self.sse(dumps({"error": {"message": message, "type": type_, "param": None, "code": code}}))
        )

    def reply(self, seed: str, hang: bool = False, cut: Optional[Tuple[int, bool]] = None) -> StreamReply:
        """The stream; ``cut`` (events kept, cut inside the next) ends it short of ``[DONE]``."""
        from ..provider.replies import StreamReply

        events = self.events if cut is None else cut_events(self.events, *cut)
        return StreamReply(
            tcp_chunks(events, seed),
            content_type="text/event-stream; charset=utf-8",
            headers=_headers(),
            hang=hang,
            end="complete" if cut is None else "close",
        )


# -- errors ------------------------------------------------------------------------------

#: OpenAI's overload text: "overloaded" is in the message only, in the ``server_error``
#: shape whose code is null.
OVERLOADED_MESSAGE = (
    "That model is currently overloaded with other requests. You can retry your request, or "
    "contact us through our help center at help.openai.com if the error persists."
)
#: The newer shape's text, with a type and a code of its own.
SERVERS_OVERLOADED = "Our servers are currently overloaded. Please try again later."

#: scenario -> (status, error.type, error.code, message, extra headers)
ERRORS: Mapping[str, Any] = {
    "rate-limit": (
        429,
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for conformance-model in organization org-conformance on requests "
        "per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 7s.",
        {
            "retry-after": "7",
            "retry-after-ms": "7000",
            "x-ratelimit-limit-requests": "3",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "7s",
        },
    ),
    "quota": (
        429,
        "insufficient_quota",
        "insufficient_quota",
        FX.error_messages["quota"] + " For more information on this error, read the docs: "
        "https://platform.openai.com/docs/guides/error-codes/api-errors.",
        {},
    ),
    "auth": (
        401,
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided: sk-test. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        {},
    ),
    "overloaded": (503, "server_error", None, OVERLOADED_MESSAGE, {}),
    "server-error": (
        500,
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
        {},
    ),
    "context-overflow": (
        400,
        "invalid_request_error",
        "context_length_exceeded",
        "This model's maximum context length is 8192 tokens. However, your messages resulted "
        "in 9000 tokens. Please reduce the length of the messages.",
        {},
    ),
}


#: (scenario, variant) -> the error that variant answers with, where it is not :data:`ERRORS`'.
VARIANT_ERRORS: Mapping[Any, Any] = {
    ("overloaded", "service-unavailable"): (
        503,
        "service_unavailable_error",
        "server_is_overloaded",
        SERVERS_OVERLOADED,
        {},
    ),
    ("rate-limit", "no-retry-after"): (
        429,
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for conformance-model in organization org-conformance on requests "
        "per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 7s. Visit "
        "https://platform.openai.com/account/rate-limits to learn more.",
        {},
    ),
}

#: What a ``server_error`` with a null code may be reported as: its type says a server
#: error, its status (503) or its message an overload, and both are retryable.
OVERLOADED_OR_SERVER_ERROR = ("overloaded", "server_error")

#: The raw 503 bodies quoted in issues (type ``server_error``, code null, "overloaded"
#: only in the message); the client that reads only the code calls them server errors.
SERVER_ERROR_503 = "AutumnWhj/ChatGPT-wechat-bot#153 (raw 503 body); agi-merge/waggle-dance#53"

VARIANTS: Mapping[str, Any] = {
    **stream_cut_variants(
        "data: [DONE]",
        "https://platform.openai.com/docs/api-reference/chat-streaming (a stream ends with data: [DONE])",
        "openai/openai-python#2065 and #2356 (a stream cut short: incomplete chunked read)",
        "https://platform.openai.com/docs/api-reference/chat/create",
    ),
    # A finished call's arguments as the model wrote them, not JSON: OpenAI returns the
    # text unchecked, whole and streamed, with finish_reason "tool_calls".
    "corrupt-arguments": (
        Variant(
            "unterminated-string",
            "arguments ending inside a string, the object left open",
            "https://platform.openai.com/docs/api-reference/chat/object (function.arguments: the "
            "model does not always generate valid JSON); vllm-project/vllm#47761 (a call's "
            "arguments an unterminated string on a turn that ended normally)",
        ),
        Variant(
            "trailing-garbage",
            "a whole object, then a closing brace too many",
            "Chainlit/chainlit#791 (gpt-4 arguments with data after the object, Extra data); "
            "yigit353/langchain-qwq#30 (an extra closing brace); NorthlandPositronics/Cogtrix#2290",
        ),
    ),
    "overloaded": (
        Variant(
            "server-error-503",
            "503 server_error, code null, overloaded in the message",
            SERVER_ERROR_503,
            error_kinds=OVERLOADED_OR_SERVER_ERROR,
        ),
        Variant(
            "service-unavailable",
            "503 service_unavailable_error / server_is_overloaded",
            "openai/codex codex-rs (maps a 503 body with code server_is_overloaded); openai/openai-node#1730",
        ),
    ),
    "stream-error": (
        Variant(
            "service-unavailable",
            "in-stream service_unavailable_error / server_is_overloaded",
            "openai/codex codex-rs (in-stream server_is_overloaded); openai/openai-python#1625",
        ),
        Variant(
            "server-error-overloaded",
            "in-stream server_error, code null, overloaded in the message",
            SERVER_ERROR_503 + "; openai/openai-python#1625 (mid-stream server_error text)",
            error_kinds=OVERLOADED_OR_SERVER_ERROR,
        ),
    ),
    "rate-limit": (
        Variant(
            "retry-after",
            "429 with retry-after and retry-after-ms",
            "openai/openai-python src/openai/_base_client.py (reads retry-after-ms, then retry-after)",
            retry_after=FX.retry_after,
        ),
        Variant(
            "no-retry-after",
            "429 without retry-after headers",
            "openai/openai-node#1477 (raw 429 header dump: no retry-after, no retry-after-ms)",
        ),
    ),
}


def error_reply(scenario: str, variant: str = "") -> JsonReply:
    """The error body and headers OpenAI answers ``scenario`` (in ``variant``) with."""
    from ..provider.replies import JsonReply

    status, type_, code, message, extra = VARIANT_ERRORS.get((scenario, variant)) or ERRORS[scenario]
    param = "messages" if scenario == "context-overflow" else None
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return JsonReply(body, status=status, headers=_headers(extra))


# -- the wire ----------------------------------------------------------------------------


#: The ``reasoning`` shape of an OpenAI-compatible server: DeepSeek's ``reasoning_content``,
#: which vLLM, SGLang and LM Studio send too. api.openai.com itself sends no reasoning.
REASONING_VARIANTS = (
    Variant(
        "reasoning-content",
        "message.reasoning_content before the content (streamed as reasoning_content deltas)",
        "vercel/ai packages/deepseek/src/chat/__fixtures__/deepseek-reasoning.chunks.txt and "
        "deepseek-reasoning.json (deepseek-v4-flash); https://api-docs.deepseek.com/guides/reasoning_model",
        reasoning=(Reasoning(ReasoningKind.THINKING.value, text=FX.thinking, provider="openai"),),
    ),
)
NO_REASONING = (
    "OpenAI Chat Completions has no reasoning case: api.openai.com returns none on this API (its "
    "reasoning models keep it server-side; the Responses API returns it). For an OpenAI-compatible "
    "server that sends reasoning_content (DeepSeek, vLLM, SGLang, LM Studio), use "
    "OpenAIChatWire(reasoning_content=True)"
)


class OpenAIChatWire(Wire):
    """OpenAI Chat Completions, whole and streamed.

    ``reasoning_content=True`` makes it the wire of an OpenAI-compatible server that
    returns its reasoning as ``reasoning_content`` (DeepSeek and the servers that copy
    it), and so gives it the ``reasoning`` case that api.openai.com has no part in.
    """

    name = "openai-chat"
    interleaves_calls = True
    provider = "openai"
    title = "OpenAI Chat Completions"
    tool_call_id = TOOL_CALL_ID
    generation_path = "/chat/completions"
    variants_table = VARIANTS
    unsupported = {"reasoning": NO_REASONING}

    def __init__(self, *, reasoning_content: bool = False) -> None:
        self.reasoning_content = reasoning_content
        if reasoning_content:
            self.variants_table = {**VARIANTS, "reasoning": REASONING_VARIANTS}
            self.unsupported = {}

    def __repr__(self) -> str:
        shown = ", reasoning_content=True" if self.reasoning_content else ""
        return f"<{type(self).__name__} {self.name!r}{shown}>"
    terminal_event = "data: [DONE]"

    def usage_sent(self, scenario: str, request: RecordedRequest) -> bool:
        # A stream reports usage only when the request asked for it.
        if self.wants_stream(request) and not _include_usage(request):
            return False
        return super().usage_sent(scenario, request)

    def aux_reply(self, request: RecordedRequest) -> Reply:
        # openai-python's client.models.retrieve(): GET {base}/models/{model}
        if request.method == "GET" and "/models/" in request.path:
            from ..provider.replies import JsonReply

            model = request.path.rsplit("/models/", 1)[1]
            return JsonReply(
                {"id": model, "object": "model", "created": CREATED, "owned_by": "system"},
                headers=_headers(),
            )
        return super().aux_reply(request)

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        body = request.json if isinstance(request.json, dict) else {}
        model = str(body.get("model") or "conformance-model")
        variant = variant or self.variants(scenario, mode)[0].name
        if scenario in ERRORS:
            return error_reply(scenario, variant)
        if not self.wants_stream(request):
            if scenario == "stream-cut":
                return self._cut_whole(model, variant)
            return self._whole(scenario, model)
        return self._stream(scenario, model, _include_usage(request), variant)

    def _whole(self, scenario: str, model: str) -> Optional[Reply]:
        from ..provider.replies import HangReply, JsonReply

        if scenario == "text":
            body = chat_completion(model, {"content": FX.text}, "stop")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            finish = "tool_calls" if scenario == "tool-call" else "stop"
            message: Dict[str, Any] = {"content": None, "tool_calls": [_tool_call(_arguments())]}
            body = chat_completion(model, message, finish)
        elif scenario == "truncated-tool-call":
            message = {"content": FX.preamble, "tool_calls": [_tool_call(TRUNCATED_ARGUMENTS)]}
            body = chat_completion(model, message, "length")
        elif scenario == "content-filter":
            body = chat_completion(model, {"content": None}, "content_filter")
        elif scenario in ("abort", "cancel"):
            return HangReply()
        elif scenario == "stream-error":
            # A whole reply cannot fail halfway: the provider fails the request instead.
            return error_reply("overloaded")
        else:
            return None
        return JsonReply(body, headers=_headers())

    def _cut_whole(self, model: str, variant: str) -> Reply:
        from ..provider.replies import JsonReply

        if variant in CUT_IN_CALL:
            message: Dict[str, Any] = {"content": None, "tool_calls": [_tool_call(_arguments())]}
            reply = JsonReply(chat_completion(model, message, "tool_calls"), headers=_headers())
            return cut_short(reply, next(iter(FX.tool_arguments)))
        reply = JsonReply(chat_completion(model, {"content": FX.text}, "stop"), headers=_headers())
        return cut_short(reply, FX.text)

    def _stream_cut(self, out: _Chunks, variant: str) -> StreamReply:
        """A turn whose stream stops before ``[DONE]``: after text, or inside a call."""
        if variant in CUT_IN_CALL:
            out.tool_call(_arguments(), role=True)
            keep = 2  # the call's first chunk (id, name) and its first argument fragment
            out.finish("tool_calls")
        else:
            out.role()
            out.text(FX.partial_text, pieces=3)
            keep = len(out.events)
            out.text(FX.text[len(FX.partial_text) :], pieces=1)
            out.finish("stop")
        return out.reply(f"{self.name}/stream-cut/{variant}", cut=(keep, variant != "between-events"))

    def _stream(self, scenario: str, model: str, include_usage: bool, variant: str) -> Optional[Reply]:
        seed = f"{self.name}/{scenario}"
        out = _Chunks(model, include_usage)
        if scenario == "stream-cut":
            return self._stream_cut(out, variant)
        if scenario == "text":
            out.role()
            out.text(FX.text)
            out.finish("stop")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            out.tool_call(_arguments(), role=True)
            out.finish("tool_calls" if scenario == "tool-call" else "stop")
        elif scenario == "truncated-tool-call":
            out.role()
            out.text(FX.preamble, pieces=2)
            out.tool_call(TRUNCATED_ARGUMENTS, pieces=2)
            out.finish("length")
        elif scenario == "content-filter":
            out.role()
            out.finish("content_filter")
        elif scenario == "stream-error":
            out.role()
            out.text(FX.partial_text, pieces=3)
            if variant == "server-error-overloaded":
                out.error(OVERLOADED_MESSAGE, "server_error", None)
            else:
                out.error(SERVERS_OVERLOADED, "service_unavailable_error", "server_is_overloaded")
        elif scenario in ("abort", "cancel"):
            out.role()
            out.text(FX.partial_text, pieces=2)
            return out.reply(seed, hang=True)
        else:
            return None
        return out.reply(seed)

    # -- multi-turn ---------------------------------------------------------------------

    def turn_whole(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[Reply]:
        from ..provider.replies import JsonReply

        message: Dict[str, Any] = {"content": turn.text or None}
        thinking = _thinking(turn)
        if thinking:
            message["reasoning_content"] = thinking
        if turn.calls:
            message["tool_calls"] = [_call_json(call, call.arguments) for call in turn.calls]
        body = chat_completion(_model(request), message, _finish(turn.finish_reason))
        return JsonReply(body, headers=_headers())

    def turn_stream(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[TurnEvents]:
        from ._turns import TurnEvents, split_text

        out = _Chunks(_model(request), _include_usage(request))
        thinking = _thinking(turn)
        if thinking:
            # DeepSeek opens the message with an empty reasoning delta, then streams it.
            out.chunk({"role": "assistant", "content": None, "reasoning_content": ""})
            for piece in split_text(thinking, 4):
                out.chunk({"content": None, "reasoning_content": piece})
        if turn.text or not turn.calls:
            if not thinking:
                out.role()
            out.text(turn.text)
        arguments = _stream_calls(out, turn, role=not out.events)
        out.finish(_finish(turn.finish_reason))
        return TurnEvents(
            out.events, "text/event-stream; charset=utf-8", headers=_headers(), arguments=arguments
        )

    def read_history(self, request: RecordedRequest) -> Optional[History]:
        from ._turns import History

        body = request.json if isinstance(request.json, dict) else {}
        problems: List[str] = []
        messages = _read_messages(body.get("messages"), problems)
        tools = body.get("tools")
        names = tuple(
            str(t["function"].get("name"))
            for t in (tools if isinstance(tools, list) else ())
            if isinstance(t, dict) and isinstance(t.get("function"), dict)
        )
        return History(
            tuple(messages),
            tuple(problems),
            tools=names,
            tool_choice=_read_tool_choice(body.get("tool_choice"), problems),
            stream=body.get("stream") is True,
        )

    def history_error(self, problems: Sequence[str]) -> Reply:
        from ..provider.replies import JsonReply
        from ._script import first_problem

        param, message = _split_problem(first_problem(problems))
        code = None
        if message.startswith("Missing required parameter"):
            code = "missing_required_parameter"
        elif message.startswith("Invalid type"):
            code = "invalid_type"
        body = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
        return JsonReply(body, status=400, headers=_headers())

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        problems, body = check_json_post(request, model, "/v1/chat/completions")
        if not body:
            return problems
        problems.extend(_check_messages(body.get("messages")))
        problems.extend(check_function_tool(body.get("tools")))
        if body.get("stream") is True:
            options = body.get("stream_options")
            if not (isinstance(options, dict) and options.get("include_usage") is True):
                problems.append(
                    "expected stream_options.include_usage true on a streamed request (without "
                    f"it OpenAI reports no usage), got stream_options={options!r}"
                )
        return problems


# -- multi-turn: scripted turns out, histories in ---------------------------------------

#: The contract's finish reasons as Chat Completions spells them.
_FINISH = {"stop": "stop", "tool_calls": "tool_calls", "length": "length", "content_filter": "content_filter"}


def _thinking(turn: ScriptedTurn) -> str:
    """The turn's ``reasoning_content``: its thinking items' text (none on api.openai.com)."""
    return "".join(r.text for r in turn.reasoning if str(r.kind) == ReasoningKind.THINKING.value)


def _finish(reason: str) -> str:
    return _FINISH.get(reason, "stop")


def _include_usage(request: RecordedRequest) -> bool:
    """Whether the request asked for the usage chunk: ``stream_options.include_usage`` true."""
    body = request.json if isinstance(request.json, dict) else {}
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _model(request: RecordedRequest) -> str:
    body = request.json if isinstance(request.json, dict) else {}
    return str(body.get("model") or "conformance-model")


def _call_json(call: ScriptedCall, arguments: str) -> Dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def _stream_calls(out: _Chunks, turn: ScriptedTurn, role: bool) -> Dict[int, Tuple[int, int]]:
    """Emit the calls' chunks; return each call's first and last argument event.

    A call opens with its id, name and empty arguments (the first chunk of the turn
    also carries the role when no text came before), then sends its fragments, each
    keyed by ``index`` alone. Interleaved, the calls take turns fragment by fragment,
    each opening just before its first fragment.
    """
    pieces = [call.pieces() for call in turn.calls]
    first: Dict[int, int] = {}
    last: Dict[int, int] = {}

    def open_call(index: int) -> None:
        nonlocal role
        delta: Dict[str, Any] = {"tool_calls": [{"index": index, **_call_json(turn.calls[index], "")}]}
        if role:
            delta = {"role": "assistant", "content": None, **delta, "refusal": None}
            role = False
        out.chunk(delta)

    def fragment(index: int, text: str) -> None:
        out.chunk({"tool_calls": [{"index": index, "function": {"arguments": text}}]})
        first.setdefault(index, len(out.events) - 1)
        last[index] = len(out.events) - 1

    if turn.interleave:
        for index in range(len(turn.calls)):
            open_call(index)
            if pieces[index]:
                fragment(index, pieces[index][0])
        for step in range(1, max((len(p) for p in pieces), default=0)):
            for index, parts in enumerate(pieces):
                if step < len(parts):
                    fragment(index, parts[step])
    else:
        for index, parts in enumerate(pieces):
            open_call(index)
            for part in parts:
                fragment(index, part)
    return {index: (first.get(index, -1), last.get(index, -1)) for index in range(len(turn.calls))}


def _problem(param: str, message: str) -> str:
    """A history problem: where OpenAI points (its ``param``), then what it says."""
    return f"{param}: {message}"


def _split_problem(problem: str) -> Tuple[Optional[str], str]:
    param, sep, message = problem.partition(": ")
    if sep and param.startswith("messages"):
        return param, message
    return None, problem


def _read_tool_choice(raw: Any, problems: List[str]) -> Optional[ToolChoice]:
    from ..contract import ToolChoice

    if raw is None:
        return None
    if raw in ("auto", "required"):
        return ToolChoice(str(raw))
    if raw == "none":
        return None
    if isinstance(raw, dict) and raw.get("type") == "function":
        function = raw.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str) and function["name"]:
            return ToolChoice.tool(function["name"])
    problems.append(
        _problem(
            "tool_choice",
            "Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or "
            f'{{"type": "function", "function": {{"name": ...}}}}, got {raw!r}.',
        )
    )
    return None


def _read_call(raw: Any, where: str, problems: List[str]) -> Optional[ToolCall]:
    if not isinstance(raw, dict):
        problems.append(
            _problem(where, f"Invalid type for '{where}': expected an object, but got {raw!r} instead.")
        )
        return None
    function: Dict[str, Any] = raw["function"] if isinstance(raw.get("function"), dict) else {}
    call_id, name, arguments = raw.get("id"), function.get("name"), function.get("arguments")
    if not isinstance(call_id, str) or not call_id:
        problems.append(_problem(f"{where}.id", f"Missing required parameter: '{where}.id'."))
    if not isinstance(name, str) or not name:
        problems.append(
            _problem(f"{where}.function.name", f"Missing required parameter: '{where}.function.name'.")
        )
    if not isinstance(arguments, str):
        problems.append(
            _problem(
                f"{where}.function.arguments",
                f"Invalid type for '{where}.function.arguments': expected a string (the arguments as "
                f"JSON text), but got {type(arguments).__name__} instead.",
            )
        )
        return None
    import json

    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        problems.append(
            _problem(
                f"{where}.function.arguments",
                f"Invalid value for '{where}.function.arguments': expected the arguments as JSON text, "
                f"got {arguments[:80]!r}. (The history is what is refused here, not the call's run: "
                "send a call whose arguments did not parse back with arguments \"{}\" (or other valid "
                "JSON), and its error result under its tool_call_id.)",
            )
        )
        # Still a call: its tool message answers it, so no second complaint follows.
        parsed = {}
    if not isinstance(parsed, dict):
        parsed = {"": parsed}
    from ..contract import ToolCall

    return ToolCall(str(call_id or ""), str(name or ""), parsed)


def _read_messages(raw: Any, problems: List[str]) -> List[Message]:
    """The messages in normal form; every departure from what OpenAI accepts noted."""
    from ..contract import Message, ToolResult

    if not isinstance(raw, list) or not raw:
        problems.append(_problem("messages", f"Invalid 'messages': expected a non-empty array, got {raw!r}."))
        return []
    out: List[Message] = []
    #: The ids of the latest assistant turn's calls, and those still unanswered.
    open_calls: Dict[str, str] = {}
    pending: List[str] = []
    pending_at = -1

    def close_pending(at: int) -> None:
        nonlocal pending
        if pending:
            problems.append(
                _problem(
                    f"messages.[{pending_at}].role",
                    "An assistant message with 'tool_calls' must be followed by tool messages responding "
                    "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                    + ", ".join(pending),
                )
            )
        pending = []

    for i, message in enumerate(raw):
        where = f"messages.[{i}]"
        if not isinstance(message, dict):
            problems.append(
                _problem(where, f"Invalid type for '{where}': expected an object, but got {message!r}.")
            )
            continue
        role = message.get("role")
        content = message.get("content")
        text = text_of(content) if content is not None else ""
        if role != "tool":
            close_pending(i)
        if role in ("system", "developer", "user"):
            out.append(Message("system" if role == "developer" else str(role), text or ""))
        elif role == "assistant":
            calls: List[ToolCall] = []
            raw_calls = message.get("tool_calls")
            if raw_calls is not None and not isinstance(raw_calls, list):
                problems.append(
                    _problem(
                        f"{where}.tool_calls", f"Invalid type for '{where}.tool_calls': expected an array."
                    )
                )
                raw_calls = []
            for j, raw_call in enumerate(raw_calls or ()):
                call = _read_call(raw_call, f"{where}.tool_calls.[{j}]", problems)
                if call is not None:
                    calls.append(call)
            open_calls = {c.id: c.name for c in calls}
            pending, pending_at = [c.id for c in calls], i
            out.append(Message("assistant", text or "", tool_calls=tuple(calls)))
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                problems.append(
                    _problem(f"{where}.tool_call_id", f"Missing required parameter: '{where}.tool_call_id'.")
                )
                call_id = ""
            elif call_id not in open_calls:
                problems.append(
                    _problem(
                        f"{where}.role",
                        "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                        f"message with 'tool_calls'. (tool_call_id {call_id!r} answers no call of the "
                        "assistant turn before it)",
                    )
                )
            if call_id in pending:
                pending.remove(call_id)
            result = ToolResult(call_id, open_calls.get(call_id, ""), text or "")
            out.append(Message("tool", result.text, tool_result=result))
        else:
            problems.append(
                _problem(
                    f"{where}.role",
                    f"Invalid value: {role!r}. Supported values are: 'system', 'assistant', 'user', "
                    "'tool', 'function' and 'developer'.",
                )
            )
    close_pending(len(raw))
    return out


def _check_messages(messages: Any) -> List[str]:
    if not isinstance(messages, list) or not messages:
        return [f"expected messages to be a non-empty list, got {messages!r}"]
    return check_question(messages, text_of)


openai_chat_wire = OpenAIChatWire()
