"""OpenAI Responses' replies: the ``response`` object and its output items, and the
``event:``-named SSE lifecycle of one.

Reference: https://platform.openai.com/docs/api-reference/responses and
https://platform.openai.com/docs/api-reference/responses-streaming. The builders are
named after OpenAI's own objects and events (``output_text``, ``function_call``,
``response.output_item.added``, ``response.completed``), so checking them against the
docs is a grep.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._chunks import cut_events, dumps, split_text, tcp_chunks
from .._ids import fresh_id, http_date, obfuscation, provider_id

if TYPE_CHECKING:
    from ...provider.replies import StreamReply

__all__ = [
    "CALL_ID",
    "CREATED_AT",
    "FUNCTION_CALL_ID",
    "HEX",
    "MESSAGE_ID",
    "REFUSAL",
    "RESPONSE_ID",
    "TRUNCATED_ARGUMENTS",
    "Events",
    "fixture_arguments",
    "function_call",
    "message",
    "output_text",
    "refusal",
    "response",
    "response_headers",
]

HEX = "0123456789abcdef"
CREATED_AT = 1764403200  # 2025-11-29T08:00:00Z, seconds as OpenAI sends them
RESPONSE_ID = provider_id("resp_", "openai-responses/response", 50, HEX)
MESSAGE_ID = provider_id("msg_", "openai-responses/message", 50, HEX)
FUNCTION_CALL_ID = provider_id("fc_", "openai-responses/function-call", 50, HEX)
#: The id a tool result must echo (``function_call_output.call_id``): the call's id.
CALL_ID = provider_id("call_", "openai-responses/call")

#: The arguments of the cut-off call: valid up to the cut, then nothing.
TRUNCATED_ARGUMENTS = '{"city": "Par'
REFUSAL = "I'm sorry, but I can't help with that request."


def fixture_arguments() -> str:
    """The fixture call's arguments as JSON text, as OpenAI writes them."""
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


def response_headers(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The headers every reply carries, with a fresh ``x-request-id``."""
    headers = {
        "date": http_date(),
        "x-request-id": fresh_id("req_", 32, "0123456789abcdef"),
        "openai-processing-ms": "538",
    }
    headers.update(extra or {})
    return headers


# -- output items ----------------------------------------------------------------------


def output_text(text: str) -> Dict[str, Any]:
    """A message content part of generated text, its keys in the provider's order."""
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def refusal(text: str) -> Dict[str, Any]:
    """A message content part saying the model refused."""
    return {"type": "refusal", "refusal": text}


def message(
    content: List[Dict[str, Any]], status: str = "completed", item_id: str = MESSAGE_ID
) -> Dict[str, Any]:
    """A ``message`` output item, its keys in the provider's order."""
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "content": content,
        "role": "assistant",
    }


def function_call(arguments: str, status: str = "completed") -> Dict[str, Any]:
    """A ``function_call`` output item: ``id`` is the item's, ``call_id`` the call's."""
    return {
        "id": FUNCTION_CALL_ID,
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": CALL_ID,
        "name": FX.tool_name,
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
    # The keys and their order as api.openai.com sends them (vercel/ai packages/openai/src/
    # responses/__fixtures__/openai-error.1.chunks.txt and issue-19493-gpt-5.1-tool-call.chunks.txt).
    return {
        "id": response_id,
        "object": "response",
        "created_at": CREATED_AT,
        "status": status,
        "background": False,
        "completed_at": CREATED_AT + 2 if status == "completed" else None,
        "error": error,
        "frequency_penalty": 0.0,
        "incomplete_details": ({"reason": incomplete_reason} if incomplete_reason is not None else None),
        "instructions": FX.system,
        "max_output_tokens": FX.max_tokens,
        "max_tool_calls": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "presence_penalty": 0.0,
        "previous_response_id": None,
        "prompt_cache_key": None,
        "prompt_cache_retention": None,
        "reasoning": {"effort": None, "summary": None},
        "safety_identifier": None,
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
        "top_logprobs": 0,
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": _usage() if usage else None,
        "user": None,
        "metadata": {},
    }


# -- streamed replies: the event:-named lifecycle ----------------------------------------


class Events:
    """Builds the events of one streamed response, numbering them as OpenAI does."""

    def __init__(self, model: str, response_id: str = RESPONSE_ID, tools: Optional[List[Any]] = None) -> None:
        # Imported once per reply, not per event, nor with the module.
        from ...encoders import sse

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
        for piece in split_text(text, pieces):
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
        for piece in split_text(arguments, pieces):
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

    def headers(self) -> Dict[str, str]:
        """The stream's response headers."""
        return response_headers()

    def reply(self, seed: str, hang: bool = False, cut: Optional[Tuple[int, bool]] = None) -> StreamReply:
        """The stream; ``cut`` (events kept, cut inside the next) ends it short of ``response.completed``."""
        from ...provider.replies import StreamReply

        events = self.events if cut is None else cut_events(self.events, *cut)
        return StreamReply(
            tcp_chunks(events, seed),
            content_type="text/event-stream; charset=utf-8",
            headers=self.headers(),
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
            self.emit("response.function_call_arguments.delta", delta=fixture_arguments()[:9], **where)
            keep = len(self.events)
            self.emit("response.function_call_arguments.delta", delta=fixture_arguments()[9:], **where)
            self.emit("response.function_call_arguments.done", arguments=fixture_arguments(), **where)
            self.emit(
                "response.output_item.done", output_index=index, item=function_call(fixture_arguments())
            )
            self.output.append(function_call(fixture_arguments()))
        else:
            where = {"item_id": MESSAGE_ID, "output_index": index, "content_index": 0}
            self.emit("response.output_item.added", output_index=index, item=message([], "in_progress"))
            self.emit("response.content_part.added", part=output_text(""), **where)
            rest = FX.text[len(FX.partial_text) :]
            for number, piece in enumerate([*split_text(FX.partial_text, 3), rest]):
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
