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

Scripted turns add ``reasoning`` items (summary deltas, then the item whole with its
``encrypted_content``) before the message and the calls; a history is read from the
``input`` items and refused with the API's own 400 wording (see ``read_history``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..contract import Message, Reasoning, ReasoningKind, ToolCall, ToolChoice, ToolResult
from ..fixture import CONFORMANCE_FIXTURE as FX
from ._base import (
    CUT_IN_CALL,
    Variant,
    Wire,
    check_json_post,
    cut_events,
    cut_short,
    dumps,
    fresh_id,
    http_date,
    obfuscation,
    provider_id,
    signature,
    stream_cut_variants,
    tcp_chunks,
    text_of,
)
from ._request import fixture_tool_schema

if TYPE_CHECKING:
    from ..provider.replies import JsonReply, RecordedRequest, Reply, StreamReply
    from ._turns import History, ScriptedTurn, TurnEvents

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
    import json

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


def message(
    content: List[Dict[str, Any]], status: str = "completed", item_id: str = MESSAGE_ID
) -> Dict[str, Any]:
    """A ``message`` output item."""
    return {
        "type": "message",
        "id": item_id,
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
    response_id: str = RESPONSE_ID,
    tools: Optional[List[Any]] = None,
) -> Dict[str, Any]:
    """A ``response`` object, as a whole reply and inside the lifecycle events.

    ``tools`` defaults to the fixture's one function; a scripted turn echoes the
    request's own.
    """
    return {
        "id": response_id,
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
        "tools": tools
        if tools is not None
        else [
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

    def __init__(self, model: str, response_id: str = RESPONSE_ID, tools: Optional[List[Any]] = None) -> None:
        # Imported once per reply, not per event, nor with the module.
        from ..encoders import sse

        self.sse = sse
        self.model = model
        self.response_id = response_id
        self.tools = tools
        self.events: List[bytes] = []
        self.output: List[Dict[str, Any]] = []
        #: call position -> the indexes of the events carrying its argument fragments.
        self.argument_events: Dict[int, List[int]] = {}

    def response(self, status: str, output: List[Dict[str, Any]], **fields: Any) -> Dict[str, Any]:
        return response(self.model, status, output, response_id=self.response_id, tools=self.tools, **fields)

    def emit(self, type_: str, **fields: Any) -> None:
        body = {"type": type_, "sequence_number": len(self.events), **fields}
        self.events.append(self.sse(dumps(body), event=type_))

    def created(self) -> None:
        self.emit("response.created", response=self.response("in_progress", [], usage=False))
        self.emit("response.in_progress", response=self.response("in_progress", [], usage=False))

    def message(
        self,
        text: str,
        pieces: int = 4,
        kind: str = "output_text",
        done: bool = True,
        item_id: str = MESSAGE_ID,
    ) -> None:
        index = len(self.output)
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        empty = output_text("") if kind == "output_text" else refusal("")
        self.emit("response.output_item.added", output_index=index, item=message([], "in_progress", item_id))
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
        item = message([part], item_id=item_id)
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
        self.emit("response.completed", response=self.response("completed", self.output))

    def incomplete(self, reason: str) -> None:
        self.emit(
            "response.incomplete",
            response=self.response("incomplete", self.output, incomplete_reason=reason),
        )

    def error(self, type_: str, code: str, message_: str, param: Optional[str] = None) -> None:
        """The in-stream ``error`` event, nested as production sends it, then ``response.failed``.

        ``response.failed`` repeats the error's own code (vercel/ai
        ``packages/openai/src/responses/__fixtures__/openai-error.1.chunks.txt``): a
        client that classifies from it, as Codex does, must see the same kind.
        """
        self.emit("error", error={"type": type_, "code": code, "message": message_, "param": param})
        failed = {"code": code, "message": message_}
        self.emit("response.failed", response=self.response("failed", self.output, error=failed))

    def reply(self, seed: str, hang: bool = False, cut: Optional[Tuple[int, bool]] = None) -> StreamReply:
        """The stream; ``cut`` (events kept, cut inside the next) ends it short of ``response.completed``."""
        from ..provider.replies import StreamReply

        events = self.events if cut is None else cut_events(self.events, *cut)
        return StreamReply(
            tcp_chunks(events, seed),
            content_type="text/event-stream; charset=utf-8",
            headers=_headers(),
            hang=hang,
            end="complete" if cut is None else "close",
        )

    def cut_turn(self, in_call: bool) -> int:
        """A text or a call turn, complete; the number of its events a cut keeps.

        A cut keeps the call's first argument fragment, or the text's first deltas.
        """
        index = len(self.output)
        if in_call:
            where = {"item_id": FUNCTION_CALL_ID, "output_index": index}
            self.emit("response.output_item.added", output_index=index, item=function_call("", "in_progress"))
            self.emit("response.function_call_arguments.delta", delta=_arguments()[:9], **where)
            keep = len(self.events)
            self.emit("response.function_call_arguments.delta", delta=_arguments()[9:], **where)
            self.emit("response.function_call_arguments.done", arguments=_arguments(), **where)
            self.emit("response.output_item.done", output_index=index, item=function_call(_arguments()))
            self.output.append(function_call(_arguments()))
        else:
            where = {"item_id": MESSAGE_ID, "output_index": index, "content_index": 0}
            self.emit("response.output_item.added", output_index=index, item=message([], "in_progress"))
            self.emit("response.content_part.added", part=output_text(""), **where)
            rest = FX.text[len(FX.partial_text) :]
            for number, piece in enumerate([*_pieces(FX.partial_text, 3), rest]):
                if number == 3:
                    keep = len(self.events)
                self.emit("response.output_text.delta", delta=piece, logprobs=[], **where)
            self.emit("response.output_text.done", text=FX.text, logprobs=[], **where)
            self.emit("response.content_part.done", part=output_text(FX.text), **where)
            item = message([output_text(FX.text)])
            self.emit("response.output_item.done", output_index=index, item=item)
            self.output.append(item)
        self.completed()
        return keep


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
#: What a 503 ``server_error`` with a null code may be reported as: its type says a server
#: error, its status (or its message) an overload, and both are retryable.
OVERLOADED_OR_SERVER_ERROR = ("overloaded", "server_error")
SERVER_ERROR_MESSAGE = (
    "An error occurred while processing your request. You can retry your request, or contact us "
    "through our help center at help.openai.com if the error persists. Please include the request "
    "ID req_1332ed8a813a4caaa2f0f3c55a6a68cb in your message."
)

#: (scenario, variant) -> the error that variant answers with, where it is not :data:`ERRORS`'.
VARIANT_ERRORS: Mapping[Any, Any] = {
    ("overloaded", "service-unavailable"): (
        503,
        "service_unavailable_error",
        "server_is_overloaded",
        None,
        SERVERS_OVERLOADED,
        {},
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

def _reasoning_item(seed: str, summary: Tuple[str, ...]) -> Reasoning:
    """A ``reasoning`` output item as a reasoning model returns it with its encrypted content."""
    return Reasoning(
        ReasoningKind.REASONING_ITEM.value,
        id=provider_id("rs_", f"openai-responses/reasoning/{seed}", 48, _HEX),
        summary=summary,
        data=signature(f"openai-responses/reasoning/{seed}/encrypted", 240),
        provider="openai",
    )


_FIRST, _, _SECOND = FX.thinking.partition("\n\n")

VARIANTS: Mapping[str, Any] = {
    "reasoning": (
        Variant(
            "summary",
            "a reasoning item with a summary text and its encrypted_content, then the message",
            "vercel/ai packages/openai/src/responses/__fixtures__/openai-reasoning-encrypted-content.1."
            "chunks.txt; https://platform.openai.com/docs/guides/reasoning#encrypted-reasoning-items",
            reasoning=(_reasoning_item("summary", (FX.thinking,)),),
        ),
        Variant(
            "multi-summary",
            "a reasoning item with two summary parts and its encrypted_content, then the message",
            "vercel/ai packages/openai/src/responses/__fixtures__/"
            "azure-gpt5-reasoning-multi-summary-with-encryption.chunks.txt",
            reasoning=(_reasoning_item("multi-summary", (_FIRST, _SECOND)),),
        ),
        Variant(
            "encrypted-only",
            "a reasoning item with an empty summary and its encrypted_content (no summary asked for)",
            "https://platform.openai.com/docs/api-reference/responses/object (reasoning.summary is "
            "empty unless a summary is requested)",
            reasoning=(_reasoning_item("encrypted-only", ()),),
        ),
    ),
    **stream_cut_variants(
        "response.completed",
        "https://platform.openai.com/docs/api-reference/responses-streaming (a stream ends with "
        "response.completed, .incomplete or .failed)",
        "ollama/ollama#17118 (a Responses stream closed without a terminal event); "
        "DevDock-AI/claude-unlimited#1 (a close accepted only after response.completed)",
        "https://platform.openai.com/docs/api-reference/responses/create",
    ),
    # A completed function_call item whose arguments are not JSON: Responses returns the
    # text unchecked, in response.output and in response.function_call_arguments.done.
    "corrupt-arguments": (
        Variant(
            "unterminated-string",
            "arguments ending inside a string, the object left open",
            "vllm-project/vllm#47761 (a Responses function_call, status completed, its arguments "
            "an unterminated string, 297 output tokens: no max_output_tokens cut)",
        ),
        Variant(
            "trailing-garbage",
            "a whole object, then a closing brace too many",
            "https://platform.openai.com/docs/api-reference/responses/object (function_call.arguments: "
            "a JSON string as the model wrote it); NousResearch/hermes-agent#81765 (data after the "
            "first object, Extra data)",
        ),
    ),
    "overloaded": (
        Variant(
            "server-error-503",
            "503 server_error, code null, overloaded in the message",
            "AutumnWhj/ChatGPT-wechat-bot#153 (raw 503 body); agi-merge/waggle-dance#53",
            error_kinds=OVERLOADED_OR_SERVER_ERROR,
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
    from ..provider.replies import JsonReply

    status, type_, code, param, message_, extra = VARIANT_ERRORS.get((scenario, variant)) or ERRORS[scenario]
    body = {"error": {"message": message_, "type": type_, "param": param, "code": code}}
    return JsonReply(body, status=status, headers=_headers(extra))


# -- scripted turns ------------------------------------------------------------------------

#: The item types a Responses ``input`` list may hold (``openai/types/responses/
#: response_input_item_param.py``); a loop that sends another is refused.
INPUT_ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "item_reference",
        "file_search_call",
        "computer_call",
        "computer_call_output",
        "web_search_call",
        "image_generation_call",
        "code_interpreter_call",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "mcp_call",
        "custom_tool_call",
        "custom_tool_call_output",
        "compaction",
    }
)
MESSAGE_ROLES = ("user", "assistant", "system", "developer")
#: The content part types whose text a message or a tool output is read from.
TEXT_PARTS = ("input_text", "output_text")


#: The contract's finish reason -> ``incomplete_details.reason`` of a turn that ends ``incomplete``.
_INCOMPLETE: Mapping[str, str] = {"length": "max_output_tokens", "content_filter": "content_filter"}


class _Turn:
    """The ids and items of one scripted turn, derived from its seed."""

    def __init__(self, wire: str, turn: ScriptedTurn) -> None:
        self.turn = turn
        seed = f"{wire}/{turn.seed}"
        self.response_id = provider_id("resp_", f"{seed}/response", 50, _HEX)
        self.message_id = provider_id("msg_", f"{seed}/message", 50, _HEX)
        self.reasoning = [r for r in turn.reasoning if str(r.kind) == ReasoningKind.REASONING_ITEM.value]
        self.reasoning_ids = [
            r.id or provider_id("rs_", f"{seed}/reasoning/{n}", 50, _HEX)
            for n, r in enumerate(self.reasoning)
        ]
        self.call_item_ids = [
            provider_id("fc_", f"{seed}/call/{n}", 50, _HEX) for n in range(len(turn.calls))
        ]

    @property
    def incomplete(self) -> bool:
        return self.turn.finish_reason == "length"

    @property
    def incomplete_reason(self) -> Optional[str]:
        """Why the response ends ``incomplete``: the output limit, or the content filter."""
        return _INCOMPLETE.get(self.turn.finish_reason)

    def reasoning_item(self, n: int, done: bool = True) -> Dict[str, Any]:
        """The ``reasoning`` output item; its ``encrypted_content`` only once it is done."""
        r = self.reasoning[n]
        item: Dict[str, Any] = {
            "id": self.reasoning_ids[n],
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": text} for text in r.summary] if done else [],
        }
        if done and r.data:
            item["encrypted_content"] = r.data
        return item

    def call_item(self, n: int, done: bool = True) -> Dict[str, Any]:
        call = self.turn.calls[n]
        # A turn cut off by max_output_tokens leaves its last call incomplete.
        last_cut = self.incomplete and n == len(self.turn.calls) - 1
        return {
            "type": "function_call",
            "id": self.call_item_ids[n],
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments if done else "",
            "status": ("incomplete" if last_cut else "completed") if done else "in_progress",
        }

    def output(self) -> List[Dict[str, Any]]:
        """The finished output items, in the provider's order: reasoning, message, calls."""
        items = [self.reasoning_item(n) for n in range(len(self.reasoning))]
        if self.turn.text:
            items.append(message([output_text(self.turn.text)], item_id=self.message_id))
        items.extend(self.call_item(n) for n in range(len(self.turn.calls)))
        return items


def _request_tools(request: RecordedRequest) -> Optional[List[Any]]:
    body = request.json if isinstance(request.json, dict) else {}
    tools = body.get("tools")
    return list(tools) if isinstance(tools, list) else []


def _model(request: RecordedRequest) -> str:
    body = request.json if isinstance(request.json, dict) else {}
    return str(body.get("model") or "conformance-model")


def _stream_turn(wire: str, turn: ScriptedTurn, request: RecordedRequest) -> TurnEvents:
    from ._turns import TurnEvents

    t = _Turn(wire, turn)
    out = _Events(_model(request), t.response_id, _request_tools(request))
    out.created()
    for n in range(len(t.reasoning)):
        _stream_reasoning(out, t, n)
    if turn.text:
        out.message(turn.text, item_id=t.message_id)
    first = len(out.output)
    for n in range(len(turn.calls)):
        out.emit("response.output_item.added", output_index=first + n, item=t.call_item(n, done=False))
        if not turn.interleave:
            _stream_arguments(out, t, first, [n])
            _finish_call(out, t, first, n)
    if turn.interleave:
        # Every argument delta names its item by output_index and item_id, so the calls'
        # fragments may alternate once all of them are added; openai-python's stream
        # state (lib/streaming/responses/_responses.py) appends each delta to the item
        # at its output_index, and the Agents SDK keys its call state the same way.
        _stream_arguments(out, t, first, list(range(len(turn.calls))))
        for n in range(len(turn.calls)):
            _finish_call(out, t, first, n)
    if t.incomplete_reason is not None:
        out.incomplete(t.incomplete_reason)
    else:
        out.completed()
    spans = {n: (min(at), max(at)) for n, at in out.argument_events.items()}
    return TurnEvents(out.events, "text/event-stream; charset=utf-8", _headers(), spans)


def _stream_reasoning(out: _Events, t: _Turn, n: int) -> None:
    """A reasoning item as streamed: its summary parts, then the item with its encrypted content."""
    from ._turns import split_text

    index = len(out.output)
    where = {"item_id": t.reasoning_ids[n], "output_index": index}
    out.emit("response.output_item.added", output_index=index, item=t.reasoning_item(n, done=False))
    for at, text in enumerate(t.reasoning[n].summary):
        empty = {"type": "summary_text", "text": ""}
        out.emit("response.reasoning_summary_part.added", summary_index=at, part=empty, **where)
        for piece in split_text(text, 3):
            out.emit(
                "response.reasoning_summary_text.delta",
                summary_index=at,
                delta=piece,
                **where,
                obfuscation=obfuscation(f"openai-responses/{len(out.events)}"),
            )
        out.emit("response.reasoning_summary_text.done", summary_index=at, text=text, **where)
        part = {"type": "summary_text", "text": text}
        out.emit("response.reasoning_summary_part.done", summary_index=at, part=part, **where)
    item = t.reasoning_item(n)
    out.emit("response.output_item.done", output_index=index, item=item)
    out.output.append(item)


def _stream_arguments(out: _Events, t: _Turn, first: int, calls: List[int]) -> None:
    """The argument deltas of ``calls``, taking one fragment of each in turn."""
    pieces = {n: list(t.turn.calls[n].pieces()) for n in calls}
    for step in range(max((len(p) for p in pieces.values()), default=0)):
        for n in calls:
            if step >= len(pieces[n]):
                continue
            out.argument_events.setdefault(n, []).append(len(out.events))
            out.emit(
                "response.function_call_arguments.delta",
                delta=pieces[n][step],
                item_id=t.call_item_ids[n],
                output_index=first + n,
                obfuscation=obfuscation(f"openai-responses/{len(out.events)}"),
            )


def _finish_call(out: _Events, t: _Turn, first: int, n: int) -> None:
    call = t.turn.calls[n]
    where = {"item_id": t.call_item_ids[n], "output_index": first + n}
    # A call whose arguments are empty has no delta: its one argument event is .done.
    out.argument_events.setdefault(n, [len(out.events)])
    out.emit("response.function_call_arguments.done", arguments=call.arguments, **where)
    item = t.call_item(n)
    out.emit("response.output_item.done", output_index=first + n, item=item)
    out.output.append(item)


# -- histories -----------------------------------------------------------------------------


def _kind(value: Any) -> str:
    """What a JSON value is, in the words OpenAI's type errors use."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "null"


def _part_text(content: Any) -> Optional[str]:
    """A message's or output's text: the string, or its text parts joined; ``None`` if neither."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        return "".join(str(p.get("text") or "") for p in content if p.get("type") in TEXT_PARTS)
    return None


class _HistoryReader:
    """Reads a Responses ``input`` list into the normal form, noting what the API refuses.

    An assistant turn is the run of ``reasoning``, assistant ``message`` and
    ``function_call`` items between two other items; each ``function_call_output``
    becomes one tool message. The problem sentences begin with the API's own words.
    """

    def __init__(self, store: bool) -> None:
        self.store = store
        self.messages: List[Message] = []
        self.problems: List[str] = []
        self.calls: Dict[str, str] = {}
        self.unanswered: List[str] = []
        self.waiting_reasoning: List[str] = []
        self.text: List[str] = []
        self.turn_calls: List[ToolCall] = []
        self.turn_reasoning: List[Reasoning] = []
        self.after_output = False

    def read(self, input_: List[Any]) -> None:
        for at, item in enumerate(input_):
            where = f"input[{at}]"
            if not isinstance(item, dict):
                self.problems.append(
                    f"Invalid type for '{where}': expected an input item object, "
                    f"but got {_kind(item)} instead."
                )
                continue
            type_ = item.get("type")
            if type_ is None and "role" in item:
                type_ = "message"
            if type_ == "message":
                self.message(item, where)
            elif type_ == "reasoning":
                self.reasoning(item, where)
            elif type_ == "function_call":
                self.function_call(item, where)
            elif type_ == "function_call_output":
                self.function_call_output(item, where)
            elif type_ not in INPUT_ITEM_TYPES:
                self.problems.append(
                    f"Invalid value: {type_!r} at '{where}.type' (a Responses input item is a message, "
                    "reasoning, function_call or function_call_output; a tool result is a "
                    "function_call_output with the call's call_id)."
                )
        self.end_turn()
        self.unanswered_calls("at the end of the input")

    # -- one item each ---------------------------------------------------------------

    def message(self, item: Mapping[str, Any], where: str) -> None:
        role = item.get("role")
        if role not in MESSAGE_ROLES:
            hint = (
                " (Responses has no tool role: send the result as a function_call_output item "
                "with the call's call_id)"
                if role == "tool"
                else ""
            )
            self.problems.append(
                f"Invalid value: {role!r} at '{where}.role'. Supported values are: 'assistant', "
                f"'system', 'developer', and 'user'{hint}."
            )
            return
        for chat_field in ("tool_calls", "tool_call_id"):
            if chat_field in item:
                self.problems.append(
                    f"Unknown parameter: '{where}.{chat_field}' (that is the Chat Completions shape; "
                    "Responses sends each call as a function_call item and each result as a "
                    "function_call_output item)."
                )
        text = _part_text(item.get("content"))
        if text is None:
            self.problems.append(
                f"Invalid type for '{where}.content': expected one of a string or an array of content "
                f"parts, but got {_kind(item.get('content'))} instead."
            )
            text = ""
        if role == "assistant":
            self.start_assistant_item(where)
            self.satisfy_reasoning()
            self.text.append(text)
            return
        self.end_turn()
        self.after_output = False
        self.unanswered_calls(f"before the {role} message at {where}")
        self.messages.append(Message("system" if role == "developer" else str(role), text))

    def reasoning(self, item: Mapping[str, Any], where: str) -> None:
        rid = item.get("id")
        summary = item.get("summary")
        data = item.get("encrypted_content")
        if not isinstance(rid, str) or not rid:
            self.problems.append(
                f"Missing required parameter: '{where}.id' (a reasoning item goes back with its id)."
            )
        if not isinstance(summary, list):
            self.problems.append(
                f"Missing required parameter: '{where}.summary' (send the summary list as it came, "
                "[] when it was empty)."
            )
            summary = []
        if not self.store and not data:
            self.problems.append(
                f"Item with id {rid!r} not found. Items are not persisted when `store` is set to false "
                f"(at {where}: with store false, a reasoning item must go back with its "
                "encrypted_content, as it came)."
            )
        self.start_assistant_item(where)
        texts = tuple(str(p.get("text") or "") for p in summary if isinstance(p, dict))
        self.turn_reasoning.append(
            Reasoning(
                ReasoningKind.REASONING_ITEM.value,
                id=str(rid or ""),
                summary=texts,
                data=str(data or ""),
                provider="openai",
            )
        )
        self.waiting_reasoning.append(str(rid or where))

    def function_call(self, item: Mapping[str, Any], where: str) -> None:
        import json

        self.start_assistant_item(where)
        self.satisfy_reasoning()
        call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments")
        for key, value in (("call_id", call_id), ("name", name), ("arguments", arguments)):
            if value is None:
                self.problems.append(f"Missing required parameter: '{where}.{key}'.")
            elif not isinstance(value, str):
                hint = " (the arguments go as JSON text, as the call came)" if key == "arguments" else ""
                self.problems.append(
                    f"Invalid type for '{where}.{key}': expected a string, "
                    f"but got {_kind(value)} instead{hint}."
                )
        parsed: Any = {}
        if isinstance(arguments, str):
            try:
                parsed = json.loads(arguments)
            except ValueError:
                parsed = {}
        call_id = str(call_id or "")
        self.calls[call_id] = str(name or "")
        self.unanswered.append(call_id)
        self.turn_calls.append(ToolCall(call_id, str(name or ""), parsed if isinstance(parsed, dict) else {}))

    def function_call_output(self, item: Mapping[str, Any], where: str) -> None:
        self.end_turn()
        self.after_output = True
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            self.problems.append(
                f"Missing required parameter: '{where}.call_id' (a function_call_output names the "
                "call it answers by its call_id)."
            )
            call_id = ""
        elif call_id not in self.calls:
            self.problems.append(
                f"No tool call found for function call output with call_id {call_id} (at {where}: no "
                "function_call item before it has that call_id)."
            )
        output = item.get("output")
        text = _part_text(output)
        if text is None:
            self.problems.append(
                f"Invalid type for '{where}.output': expected one of a string or an array of input "
                f"content, but got {_kind(output)} instead."
            )
            text = ""
        if call_id in self.unanswered:
            self.unanswered.remove(call_id)
        name = self.calls.get(call_id, "")
        self.messages.append(Message.tool(ToolResult(call_id, name, content=text)))

    # -- turn boundaries ---------------------------------------------------------------

    def start_assistant_item(self, where: str) -> None:
        """An assistant item after tool outputs opens the next turn: the last one's calls are due."""
        if self.after_output:
            self.unanswered_calls(f"before the next assistant turn at {where}")
            self.after_output = False

    def satisfy_reasoning(self) -> None:
        self.waiting_reasoning.clear()

    def end_turn(self) -> None:
        """Close the assistant turn being read, if any."""
        for rid in self.waiting_reasoning:
            self.problems.append(
                f"Item {rid!r} of type 'reasoning' was provided without its required following item "
                "(send the reasoning item followed by the message or function_call it came with)."
            )
        self.waiting_reasoning.clear()
        if self.text or self.turn_calls or self.turn_reasoning:
            self.messages.append(
                Message(
                    "assistant",
                    "".join(self.text),
                    tool_calls=tuple(self.turn_calls),
                    reasoning=tuple(self.turn_reasoning),
                )
            )
        self.text, self.turn_calls, self.turn_reasoning = [], [], []

    def unanswered_calls(self, when: str) -> None:
        for call_id in self.unanswered:
            self.problems.append(
                f"No tool output found for function call {call_id} (no function_call_output with that "
                f"call_id {when})."
            )
        self.unanswered.clear()


def _tool_choice(value: Any, problems: List[str]) -> Optional[ToolChoice]:
    if value is None or value == "none":
        return None
    if value == "auto":
        return ToolChoice.AUTO
    if value == "required":
        return ToolChoice.REQUIRED
    if isinstance(value, dict) and value.get("type") == "function":
        name = value.get("name")
        if isinstance(name, str) and name:
            return ToolChoice.tool(name)
        hint = (
            " (that is the Chat Completions shape; Responses puts name beside type)"
            if "function" in value
            else ""
        )
        problems.append(f"Missing required parameter: 'tool_choice.name'{hint}.")
        return None
    if isinstance(value, dict):
        return None  # a built-in tool's choice ("file_search", ...): nothing the contract names
    problems.append(
        f"Invalid value: {value!r} at 'tool_choice'. Supported values are: 'none', 'auto', and 'required'."
    )
    return None


def _tool_names(tools: Any, problems: List[str]) -> Tuple[str, ...]:
    if tools is None:
        return ()
    if not isinstance(tools, list):
        problems.append(
            f"Invalid type for 'tools': expected an array of tools, but got {_kind(tools)} instead."
        )
        return ()
    names = []
    for at, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            continue
        name = tool.get("name")
        if isinstance(name, str) and name:
            names.append(name)
        else:
            hint = (
                " (that is the Chat Completions shape; Responses puts name and parameters on the tool itself)"
                if isinstance(tool.get("function"), dict)
                else ""
            )
            problems.append(f"Missing required parameter: 'tools[{at}].name'{hint}.")
    return tuple(names)


def read_history(request: RecordedRequest) -> History:
    """The conversation a Responses request carried, and what the API would refuse in it."""
    from ._turns import History

    body = request.json
    if not isinstance(body, dict):
        return History((), ("We could not parse the JSON body of your request: send one JSON object.",))
    problems: List[str] = []
    reader = _HistoryReader(store=body.get("store") is not False)
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        reader.messages.append(Message("system", instructions))
    input_ = body.get("input")
    if isinstance(input_, str):
        reader.messages.append(Message("user", input_))
    elif isinstance(input_, list):
        reader.read(input_)
    else:
        problems.append(
            f"Invalid type for 'input': expected one of a string or an array of input items, but got "
            f"{_kind(input_)} instead."
        )
    tools = _tool_names(body.get("tools"), problems)
    choice = _tool_choice(body.get("tool_choice"), problems)
    return History(
        tuple(reader.messages),
        tuple(reader.problems + problems),
        tools=tools,
        tool_choice=choice,
        stream=body.get("stream") is True,
    )


_PARAM = re.compile(r"'((?:input|tools|tool_choice)[^']*)'")


def history_error(problems: Sequence[str]) -> JsonReply:
    """OpenAI's 400 for a malformed input: ``invalid_request_error``, the offending ``param``."""
    from ..provider.replies import JsonReply
    from ._script import first_problem

    message_ = first_problem(problems)
    found = _PARAM.search(message_)
    param = found.group(1) if found else "input"
    body = {"error": {"message": message_, "type": "invalid_request_error", "param": param, "code": None}}
    return JsonReply(body, status=400, headers=_headers())


# -- the wire ----------------------------------------------------------------------------


class OpenAIResponsesWire(Wire):
    """OpenAI Responses, whole and streamed."""

    turn_reasoning = (
        Reasoning(
            ReasoningKind.REASONING_ITEM.value,
            id=provider_id("rs_", "openai-responses/history/reasoning", 48, "0123456789abcdef"),
            summary=("The user wants the Paris weather; get_weather gives it.",),
            data=signature("openai-responses/history/encrypted", 180),
            provider="openai",
        ),
    )

    name = "openai-responses"
    interleaves_calls = True
    provider = "openai"
    title = "OpenAI Responses"
    tool_call_id = CALL_ID
    generation_path = "/responses"
    variants_table = VARIANTS
    terminal_event = "response.completed"

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
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
        if scenario == "stream-cut":
            return self._cut(model, variant, stream)
        if not stream:
            return self._whole(scenario, model)
        return self._stream(scenario, model, variant)

    def _cut(self, model: str, variant: str, stream: bool) -> Reply:
        """A turn cut short: its body before its end, or its stream before ``response.completed``."""
        from ..provider.replies import JsonReply

        in_call = variant in CUT_IN_CALL
        if not stream:
            output = [function_call(_arguments())] if in_call else [message([output_text(FX.text)])]
            whole = JsonReply(response(model, "completed", output), headers=_headers())
            return cut_short(whole, next(iter(FX.tool_arguments)) if in_call else FX.text)
        out = _Events(model)
        out.created()
        keep = out.cut_turn(in_call)
        return out.reply(f"{self.name}/stream-cut/{variant}", cut=(keep, variant != "between-events"))

    def _whole(self, scenario: str, model: str) -> Optional[Reply]:
        from ..provider.replies import HangReply, JsonReply

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

    # -- multi-turn --------------------------------------------------------------------

    def turn_whole(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[Reply]:
        """The ``response`` playing ``turn``: reasoning items, the message, the calls.

        Responses has no finish reason: a turn with calls ends ``completed`` like one
        without, and only a ``length`` or ``content_filter`` finish shows, as ``incomplete``
        with ``max_output_tokens`` or ``content_filter``.
        """
        from ..provider.replies import JsonReply

        t = _Turn(self.name, turn)
        reason = t.incomplete_reason
        body = response(
            _model(request),
            "incomplete" if reason is not None else "completed",
            t.output(),
            incomplete_reason=reason,
            response_id=t.response_id,
            tools=_request_tools(request),
        )
        return JsonReply(body, headers=_headers())

    def turn_stream(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[TurnEvents]:
        return _stream_turn(self.name, turn, request)

    def read_history(self, request: RecordedRequest) -> Optional[History]:
        return read_history(request)

    def history_error(self, problems: Sequence[str]) -> Reply:
        return history_error(problems)

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
    from ._schema import schema_difference

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
