"""OpenAI Responses: ``POST {base}/responses``, whole or as SSE with ``event:`` names.

Reference: https://platform.openai.com/docs/api-reference/responses and
https://platform.openai.com/docs/api-reference/responses-streaming. The shapes below
are the ones openai-python 3.x was seen to accept (``openai/types/responses``).

A whole reply is one ``response`` object: ``status`` (``completed``, ``incomplete``,
``failed``), ``incomplete_details.reason`` (``max_output_tokens``, ``content_filter``)
and a list of ``output`` items, each a ``message`` (``output_text`` or ``refusal``
parts) or a ``function_call`` (``call_id``, ``name``, ``arguments`` as a JSON string).
There is no finish reason: a tool turn ends ``completed`` like a text turn.

A streamed reply is SSE events named after their ``type``, each with an increasing
``sequence_number`` and no ``[DONE]``::

    response.created, response.in_progress
    response.output_item.added            (a message or a function_call item)
      response.content_part.added
      response.output_text.delta ...      (or response.refusal.delta ...)
      response.output_text.done           (or response.refusal.done)
      response.content_part.done
      response.function_call_arguments.delta ... / .done
    response.output_item.done
    response.completed | response.incomplete | response.failed

Usage is only in the terminal event's ``response``. A failure after the 200 is an
``error`` event with the fields nested under ``error`` (the shape production traffic
has, not the flat one of the API reference), followed by ``response.failed``; that
is also how a streamed request over the context window fails.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional

from ..encoders import sse
from ..fixture import CONFORMANCE_FIXTURE as FX
from ..provider.replies import HangReply, JsonReply, RecordedRequest, Reply, StreamReply
from ._base import (
    Variant,
    Wire,
    check_json_post,
    dumps,
    fixture_tool_schema,
    fresh_id,
    http_date,
    obfuscation,
    provider_id,
    schema_difference,
    tcp_chunks,
    text_of,
)

__all__ = ["OpenAIResponsesWire", "openai_responses_wire"]

_HEX = "0123456789abcdef"
CREATED_AT = 1764403200  # 2025-11-29T08:00:00Z, seconds as OpenAI sends them
RESPONSE_ID = provider_id("resp_", "openai-responses/response", 50, _HEX)
MESSAGE_ID = provider_id("msg_", "openai-responses/message", 50, _HEX)
FUNCTION_CALL_ID = provider_id("fc_", "openai-responses/function-call", 50, _HEX)
#: The id a tool result must echo (``function_call_output.call_id``): the call's id.
CALL_ID = provider_id("call_", "openai-responses/call")

#: The arguments of the cut-off call: valid up to the cut, then nothing.
TRUNCATED_ARGUMENTS = '{"city": "Par'
REFUSAL = "I'm sorry, but I can't help with that request."

OVERLOADED_MESSAGE = "That model is currently overloaded with other requests. You can retry your request."
CONTEXT_MESSAGE = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)


def _arguments() -> str:
    # OpenAI spaces its argument JSON the way json.dumps does by default.
    return json.dumps(dict(FX.tool_arguments), ensure_ascii=False)


def _usage() -> Dict[str, Any]:
    u = FX.usage
    return {
        "input_tokens": u.input_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.total_tokens,
    }


def _headers(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    headers = {
        "date": http_date(),
        "x-request-id": fresh_id("req_", 32, "0123456789abcdef"),
        "openai-processing-ms": "538",
    }
    headers.update(extra or {})
    return headers


def _pieces(text: str, count: int) -> List[str]:
    step = max(1, -(-len(text) // count))
    return [text[start : start + step] for start in range(0, len(text), step)]


# -- output items ----------------------------------------------------------------------


def output_text(text: str) -> Dict[str, Any]:
    """A message content part of generated text."""
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def refusal(text: str) -> Dict[str, Any]:
    """A message content part saying the model refused."""
    return {"type": "refusal", "refusal": text}


def message(content: List[Dict[str, Any]], status: str = "completed") -> Dict[str, Any]:
    """A ``message`` output item."""
    return {
        "type": "message",
        "id": MESSAGE_ID,
        "status": status,
        "role": "assistant",
        "content": content,
    }


def function_call(arguments: str, status: str = "completed") -> Dict[str, Any]:
    """A ``function_call`` output item: ``id`` is the item's, ``call_id`` the call's."""
    return {
        "type": "function_call",
        "id": FUNCTION_CALL_ID,
        "call_id": CALL_ID,
        "name": FX.tool_name,
        "arguments": arguments,
        "status": status,
    }


def response(
    model: str,
    status: str,
    output: List[Dict[str, Any]],
    *,
    incomplete_reason: Optional[str] = None,
    error: Optional[Dict[str, Any]] = None,
    usage: bool = True,
) -> Dict[str, Any]:
    """A ``response`` object, as a whole reply and inside the lifecycle events."""
    return {
        "id": RESPONSE_ID,
        "object": "response",
        "created_at": CREATED_AT,
        "status": status,
        "background": False,
        "completed_at": CREATED_AT + 2 if status == "completed" else None,
        "error": error,
        "incomplete_details": ({"reason": incomplete_reason} if incomplete_reason is not None else None),
        "instructions": FX.system,
        "max_output_tokens": FX.max_tokens,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": [
            {
                "type": "function",
                "name": FX.tool_name,
                "description": FX.tool_description,
                "parameters": dict(FX.tool_parameters),
                "strict": False,
            }
        ],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": _usage() if usage else None,
        "user": None,
        "metadata": {},
    }


# -- streamed replies: the event:-named lifecycle ----------------------------------------


class _Events:
    """Builds the events of one streamed response, numbering them as OpenAI does."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.events: List[bytes] = []
        self.output: List[Dict[str, Any]] = []

    def emit(self, type_: str, **fields: Any) -> None:
        body = {"type": type_, "sequence_number": len(self.events), **fields}
        self.events.append(sse(dumps(body), event=type_))

    def created(self) -> None:
        self.emit("response.created", response=response(self.model, "in_progress", [], usage=False))
        self.emit("response.in_progress", response=response(self.model, "in_progress", [], usage=False))

    def message(self, text: str, pieces: int = 4, kind: str = "output_text", done: bool = True) -> None:
        index = len(self.output)
        where = {"item_id": MESSAGE_ID, "output_index": index, "content_index": 0}
        empty = output_text("") if kind == "output_text" else refusal("")
        self.emit("response.output_item.added", output_index=index, item=message([], "in_progress"))
        self.emit("response.content_part.added", part=empty, **where)
        for piece in _pieces(text, pieces):
            if kind == "output_text":
                self.emit(
                    "response.output_text.delta",
                    delta=piece,
                    logprobs=[],
                    **where,
                    obfuscation=obfuscation(f"openai-responses/{len(self.events)}"),
                )
            else:
                self.emit("response.refusal.delta", delta=piece, **where)
        if not done:
            return
        part = output_text(text) if kind == "output_text" else refusal(text)
        if kind == "output_text":
            self.emit("response.output_text.done", text=text, logprobs=[], **where)
        else:
            self.emit("response.refusal.done", refusal=text, **where)
        self.emit("response.content_part.done", part=part, **where)
        item = message([part])
        self.emit("response.output_item.done", output_index=index, item=item)
        self.output.append(item)

    def function_call(self, arguments: str, status: str = "completed", pieces: int = 4) -> None:
        index = len(self.output)
        where = {"item_id": FUNCTION_CALL_ID, "output_index": index}
        self.emit("response.output_item.added", output_index=index, item=function_call("", "in_progress"))
        for piece in _pieces(arguments, pieces):
            self.emit(
                "response.function_call_arguments.delta",
                delta=piece,
                **where,
                obfuscation=obfuscation(f"openai-responses/{len(self.events)}"),
            )
        self.emit("response.function_call_arguments.done", arguments=arguments, **where)
        item = function_call(arguments, status)
        self.emit("response.output_item.done", output_index=index, item=item)
        self.output.append(item)

    def completed(self) -> None:
        self.emit("response.completed", response=response(self.model, "completed", self.output))

    def incomplete(self, reason: str) -> None:
        self.emit(
            "response.incomplete",
            response=response(self.model, "incomplete", self.output, incomplete_reason=reason),
        )

    def error(self, type_: str, code: str, message_: str, param: Optional[str] = None) -> None:
        """The in-stream ``error`` event, nested as production sends it, then ``response.failed``.

        ``response.failed`` repeats the error's own code (vercel/ai
        ``packages/openai/src/responses/__fixtures__/openai-error.1.chunks.txt``): a
        client that classifies from it, as Codex does, must see the same kind.
        """
        self.emit("error", error={"type": type_, "code": code, "message": message_, "param": param})
        failed = {"code": code, "message": message_}
        self.emit("response.failed", response=response(self.model, "failed", self.output, error=failed))

    def reply(self, seed: str, hang: bool = False) -> StreamReply:
        return StreamReply(
            tcp_chunks(self.events, seed),
            content_type="text/event-stream; charset=utf-8",
            headers=_headers(),
            hang=hang,
        )


# -- errors ------------------------------------------------------------------------------

#: scenario -> (status, error.type, error.code, error.param, message, extra headers)
ERRORS: Mapping[str, Any] = {
    "rate-limit": (
        429,
        "tokens",
        "rate_limit_exceeded",
        None,
        "Rate limit reached for conformance-model in organization org-conformance on tokens "
        "per min (TPM): Limit 30000, Used 30000, Requested 845. Please try again in 7s.",
        {
            "retry-after": "7",
            "retry-after-ms": "7000",
            "x-ratelimit-limit-tokens": "30000",
            "x-ratelimit-remaining-tokens": "0",
            "x-ratelimit-reset-tokens": "7s",
        },
    ),
    "quota": (
        429,
        "insufficient_quota",
        "insufficient_quota",
        None,
        FX.error_messages["quota"] + " For more information on this error, read the docs: "
        "https://platform.openai.com/docs/guides/error-codes/api-errors.",
        {},
    ),
    "auth": (
        401,
        "invalid_request_error",
        "invalid_api_key",
        None,
        "Incorrect API key provided: sk-test. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        {},
    ),
    "overloaded": (503, "server_error", None, None, OVERLOADED_MESSAGE, {}),
    "server-error": (
        500,
        "server_error",
        None,
        None,
        "The server had an error while processing your request. Sorry about that!",
        {},
    ),
    "context-overflow": (
        400,
        "invalid_request_error",
        "context_length_exceeded",
        "input",
        CONTEXT_MESSAGE,
        {},
    ),
}


#: The Chat Completions shapes of an overload answer here too (the same API front).
SERVERS_OVERLOADED = "Our servers are currently overloaded. Please try again later."
SERVER_ERROR_MESSAGE = (
    "An error occurred while processing your request. You can retry your request, or contact us "
    "through our help center at help.openai.com if the error persists. Please include the request "
    "ID req_1332ed8a813a4caaa2f0f3c55a6a68cb in your message."
)

#: (scenario, variant) -> the error that variant answers with, where it is not :data:`ERRORS`'.
VARIANT_ERRORS: Mapping[Any, Any] = {
    ("overloaded", "service-unavailable"): (
        503, "service_unavailable_error", "server_is_overloaded", None, SERVERS_OVERLOADED, {}
    ),
    ("rate-limit", "no-retry-after"): (
        429,
        "tokens",
        "rate_limit_exceeded",
        None,
        "Rate limit reached for conformance-model in organization org-conformance on tokens "
        "per min (TPM): Limit 30000, Used 30000, Requested 845. Please try again in 7s. Visit "
        "https://platform.openai.com/account/rate-limits to learn more.",
        {},
    ),
}

VARIANTS: Mapping[str, Any] = {
    "overloaded": (
        Variant(
            "server-error-503",
            "503 server_error, code null, overloaded in the message",
            "AutumnWhj/ChatGPT-wechat-bot#153 (raw 503 body); agi-merge/waggle-dance#53",
        ),
        Variant(
            "service-unavailable",
            "503 service_unavailable_error / server_is_overloaded",
            "openai/codex codex-rs (maps a 503 body with code server_is_overloaded)",
        ),
    ),
    "stream-error": (
        Variant(
            "service-unavailable",
            "in-stream service_unavailable_error / server_is_overloaded, then response.failed",
            "openai/codex codex-rs (response.failed with code server_is_overloaded)",
        ),
        Variant(
            "server-error",
            "in-stream server_error / server_error, then response.failed: a retryable server_error",
            "openai/openai-node#1730 (error event); Wei-Shaw/sub2api#6714 (response.failed)",
            error_kind="server_error",
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
            "openai/openai-node#1477 (raw 429 header dump of a Responses call)",
        ),
    ),
    "quota/stream": (
        Variant(
            "insufficient-quota-429",
            "429 insufficient_quota before the stream",
            "vercel/ai packages/openai/src/responses/__fixtures__/openai-error.1.json",
        ),
        Variant(
            "in-stream",
            "200, then error and response.failed with insufficient_quota",
            "vercel/ai packages/openai/src/responses/__fixtures__/openai-error.1.chunks.txt",
        ),
    ),
}


def error_reply(scenario: str, variant: str = "") -> JsonReply:
    """The error body and headers OpenAI answers ``scenario`` (in ``variant``) with."""
    status, type_, code, param, message_, extra = VARIANT_ERRORS.get((scenario, variant)) or ERRORS[scenario]
    body = {"error": {"message": message_, "type": type_, "param": param, "code": code}}
    return JsonReply(body, status=status, headers=_headers(extra))


# -- the wire ----------------------------------------------------------------------------


class OpenAIResponsesWire(Wire):
    """OpenAI Responses, whole and streamed."""

    name = "openai-responses"
    provider = "openai"
    title = "OpenAI Responses"
    tool_call_id = CALL_ID
    generation_path = "/responses"
    variants_table = VARIANTS

    def reply(
        self, scenario: str, mode: str, request: RecordedRequest, variant: str = ""
    ) -> Optional[Reply]:
        body = request.json if isinstance(request.json, dict) else {}
        model = str(body.get("model") or "conformance-model")
        stream = self.wants_stream(request)
        variant = variant or self.variants(scenario, mode)[0].name
        if scenario == "quota" and stream and variant == "in-stream":
            # A streamed request past its quota is accepted with a 200 and fails in-stream.
            out = _Events(model)
            out.created()
            quota = ERRORS["quota"]
            out.error(quota[1], quota[2], quota[4])
            return out.reply(f"{self.name}/{scenario}/{variant}")
        if scenario == "context-overflow" and stream:
            # A streamed request over the window is accepted with a 200 and fails in-stream.
            out = _Events(model)
            out.created()
            out.error("invalid_request_error", "context_length_exceeded", CONTEXT_MESSAGE, "input")
            return out.reply(f"{self.name}/{scenario}")
        if scenario in ERRORS:
            return error_reply(scenario, variant)
        if not stream:
            return self._whole(scenario, model)
        return self._stream(scenario, model, variant)

    def _whole(self, scenario: str, model: str) -> Optional[Reply]:
        if scenario == "text":
            body = response(model, "completed", [message([output_text(FX.text)])])
        elif scenario in ("tool-call", "tool-call-with-stop"):
            # Responses has no finish reason: a tool turn is "completed" like any other.
            body = response(model, "completed", [function_call(_arguments())])
        elif scenario == "truncated-tool-call":
            output = [
                message([output_text(FX.preamble)]),
                function_call(TRUNCATED_ARGUMENTS, "incomplete"),
            ]
            body = response(model, "incomplete", output, incomplete_reason="max_output_tokens")
        elif scenario == "content-filter":
            output = [message([refusal(REFUSAL)], "incomplete")]
            body = response(model, "incomplete", output, incomplete_reason="content_filter")
        elif scenario in ("abort", "cancel"):
            return HangReply()
        elif scenario == "stream-error":
            # A whole reply cannot fail halfway: the provider fails the request instead.
            return error_reply("overloaded")
        else:
            return None
        return JsonReply(body, headers=_headers())

    def _stream(self, scenario: str, model: str, variant: str) -> Optional[Reply]:
        seed = f"{self.name}/{scenario}"
        out = _Events(model)
        out.created()
        if scenario == "text":
            out.message(FX.text)
            out.completed()
        elif scenario in ("tool-call", "tool-call-with-stop"):
            out.function_call(_arguments())
            out.completed()
        elif scenario == "truncated-tool-call":
            out.message(FX.preamble, pieces=2)
            out.function_call(TRUNCATED_ARGUMENTS, "incomplete", pieces=2)
            out.incomplete("max_output_tokens")
        elif scenario == "content-filter":
            out.message(REFUSAL, pieces=2, kind="refusal")
            out.incomplete("content_filter")
        elif scenario == "stream-error":
            out.message(FX.partial_text, pieces=3, done=False)
            if variant == "server-error":
                out.error("server_error", "server_error", SERVER_ERROR_MESSAGE)
            else:
                out.error("service_unavailable_error", "server_is_overloaded", SERVERS_OVERLOADED)
        elif scenario in ("abort", "cancel"):
            out.message(FX.partial_text, pieces=2, done=False)
            return out.reply(seed, hang=True)
        else:
            return None
        return out.reply(seed)

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        problems, body = check_json_post(request, model, "/v1/responses")
        if not body:
            return problems
        problems.extend(_check_input(body.get("input")))
        problems.extend(_check_tools(body.get("tools")))
        return problems


#: The content parts whose text a user input message is read from.
RESPONSES_TEXT_PARTS = ("input_text", "text")


def _check_input(input_: Any) -> List[str]:
    if input_ == FX.question:
        return []
    if not isinstance(input_, list) or not input_:
        return [f"expected input to be the question or a list of input items, got {input_!r}"]
    users = [
        item
        for item in input_
        if isinstance(item, dict) and item.get("role") == "user" and item.get("type", "message") == "message"
    ]
    if not any(text_of(item.get("content"), RESPONSES_TEXT_PARTS) == FX.question for item in users):
        got = [text_of(item.get("content"), RESPONSES_TEXT_PARTS) for item in users]
        return [f"expected a user input message {FX.question!r}, got user messages {got!r}"]
    return []


def _check_tools(tools: Any) -> List[str]:
    if not isinstance(tools, list):
        return [f"expected tools to list the get_weather function, got {tools!r}"]
    functions = [t for t in tools if isinstance(t, dict) and t.get("type") == "function"]
    named = [f for f in functions if f.get("name") == FX.tool_name]
    if not named:
        nested = [f for f in functions if isinstance(f.get("function"), dict)]
        hint = (
            " (that is the Chat Completions shape; Responses puts name and parameters on the tool itself)"
            if nested
            else ""
        )
        names = [f.get("name") for f in functions]
        return [
            'expected a tool {"type": "function", "name": "get_weather", "parameters": {...}}, '
            f"got function names {names!r}{hint}"
        ]
    parameters = named[0].get("parameters")
    difference = schema_difference(fixture_tool_schema(), parameters)
    if difference:
        expected = dict(fixture_tool_schema())
        return [f"expected get_weather parameters {expected!r}, got {parameters!r} ({difference})"]
    return []


openai_responses_wire = OpenAIResponsesWire()
