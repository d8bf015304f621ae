"""What the LangChain chat-model adapters share: the messages, the turn, the stream.

A LangChain chat model is used the way its documentation shows: ``bind_tools`` with
the tool's JSON schema, ``ainvoke`` for a whole turn, ``astream`` for a stream whose
chunks are added up into one message. The turn is then read from LangChain's own
fields: ``text``, ``tool_calls`` (and ``invalid_tool_calls``), ``usage_metadata``,
and the finish reason in ``response_metadata`` (each integration names it its own
way). Errors are the provider SDK's own exceptions, which LangChain lets through.
"""

from __future__ import annotations

from contextlib import aclosing
from dataclasses import replace
from typing import Any, AsyncIterator, Callable, Dict, List, Optional

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from conformance import ChatRequest, ChatResponse, Reasoning, StreamChunk

from ._kit import AsyncAdapter, openai_tools, response, usage

__all__ = ["LangChainChat", "lc_messages"]

#: The finish reasons of the integrations' ``response_metadata``, as the contract's.
FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "refusal",
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "content_filtered": "content_filter",
    "guardrail_intervened": "content_filter",
    "completed": "stop",
}
_FINISH_KEYS = ("finish_reason", "stop_reason", "stopReason")


def lc_messages(
    request: ChatRequest,
    reasoning_blocks: Callable[[Any], List[Dict[str, Any]]],
    extra: Optional[Callable[[Any], Dict[str, Any]]] = None,
) -> List[Any]:
    """The conversation as LangChain messages; ``extra`` gives an assistant turn's ``additional_kwargs``
    (where an integration keeps what it sends back beside the calls)."""
    out: List[Any] = []
    for message in request.messages:
        if message.role == "system":
            out.append(SystemMessage(message.content))
        elif message.role == "user":
            out.append(HumanMessage(message.content))
        elif message.role == "tool" and message.tool_result is not None:
            result = message.tool_result
            out.append(
                ToolMessage(
                    result.text,
                    tool_call_id=result.call_id,
                    name=result.name,
                    status="error" if result.error is not None else "success",
                )
            )
        else:
            calls = [
                {"name": c.name, "args": dict(c.arguments), "id": c.id, "type": "tool_call"}
                for c in message.tool_calls
            ]
            blocks = reasoning_blocks(message)
            if blocks:
                content: Any = [
                    *blocks,
                    *([{"type": "text", "text": message.content}] if message.content else []),
                ]
            else:
                content = message.content
            kept = extra(message) if extra is not None else {}
            out.append(AIMessage(content=content, tool_calls=calls, additional_kwargs=kept))
    return out


def finish_of(message: Any) -> str:
    """The provider's finish reason as the contract's; ``"stop"`` where the message names none."""
    return said_finish(message) or "stop"


def said_finish(message: Any) -> Optional[str]:
    """The provider's finish reason as the contract's, or ``None`` where the message names none
    (a stream that ended short of the event carrying it)."""
    meta = message.response_metadata or {}
    if meta.get("status") == "incomplete":
        reason = (meta.get("incomplete_details") or {}).get("reason")
        return (
            "length"
            if reason == "max_output_tokens"
            else "content_filter"
            if reason == "content_filter"
            else "stop"
        )
    for key in _FINISH_KEYS:
        value = meta.get(key)
        if value:
            return FINISH.get(str(value).split(".")[-1], "stop")
    if meta.get("status") in FINISH:  # the Responses API's response.status
        return FINISH[str(meta["status"])]
    return None


def turn_of(message: Any, read_reasoning: Callable[[Any], List[Reasoning]]) -> ChatResponse:
    """The summed-up message as the contract's turn.

    Where the provider's finish reason never came (a stream that ended short of it), none
    is derived: the turn goes on as LangChain handed it, with no finish reason, so a cut
    is not dressed up as a finished turn.
    """
    said = said_finish(message)
    finish = said or "stop"
    calls: List[Any] = [(c["id"], c["name"], c["args"]) for c in message.tool_calls]
    # A call LangChain could not parse keeps its raw text: the contract's unparsed call. On a
    # turn cut off by the limit LangChain's own invalid_tool_calls already keeps it apart from
    # the calls its user runs, which is what the contract asks.
    if finish != "length":
        calls += [
            (c.get("id") or "", c.get("name") or "", c.get("args") or "") for c in message.invalid_tool_calls
        ]
    meta = message.usage_metadata
    used = meta and usage(meta.get("input_tokens"), meta.get("output_tokens"), meta.get("total_tokens"))
    # LangChain has no normalized finish reason: the adapter maps the provider's, and derives
    # the tool turn from the calls; the calls go on as LangChain handed them.
    if said is None:
        whole = response(message.text, finish, calls, used, read_reasoning(message), reading="as-given")
        return replace(whole, finish_reason=None)  # type: ignore[arg-type]
    return response(message.text, finish, calls, used, read_reasoning(message), reading="finish-derived")


class LangChainChat(AsyncAdapter):
    """A LangChain chat model, built by ``build(url)``, read as above."""

    wire = ""

    def __init__(self, url: str) -> None:
        self.model = self.build(url)

    def build(self, url: str) -> Any:
        raise NotImplementedError

    def reasoning_blocks(self, message: Any) -> List[Dict[str, Any]]:
        """The content blocks that carry a turn's reasoning back (none by default)."""
        return []

    def read_reasoning(self, message: Any) -> List[Reasoning]:
        return []

    def call_reasoning(self, turn: ChatResponse, message: Any) -> ChatResponse:
        """``turn`` with the reasoning the integration tied to each call (none by default)."""
        return turn

    def extra_kwargs(self, message: Any) -> Dict[str, Any]:
        """An assistant turn's ``additional_kwargs``, as the integration reads them back (none by default)."""
        return {}

    def messages(self, request: ChatRequest) -> List[Any]:
        return lc_messages(request, self.reasoning_blocks, self.extra_kwargs)

    #: The model's settings that ask for reasoning, where the request asks for it.
    thinking: Dict[str, Any] = {}

    def bound(self, request: ChatRequest) -> Any:
        model = self.model
        if request.max_tokens is not None:
            model = model.bind(max_tokens=request.max_tokens)
        if request.thinking and self.thinking:
            model = model.bind(**self.thinking)
        return model.bind_tools(openai_tools(request)) if request.tools else model

    async def complete(self, request: ChatRequest) -> ChatResponse:
        message = await self.bound(request).ainvoke(self.messages(request))
        return self.call_reasoning(turn_of(message, self.read_reasoning), message)

    async def events(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        total: Optional[Any] = None
        # Closed whichever way this ends, so the HTTP response under it is closed at once.
        async with aclosing(
            self.bound(request).astream(self.messages(request))
        ) as stream:
            async for chunk in stream:
                total = chunk if total is None else total + chunk
                if chunk.text:
                    yield StreamChunk(chunk.text)
        if total is None:
            raise RuntimeError("the stream gave no chunk")
        turn = self.call_reasoning(turn_of(total, self.read_reasoning), total)
        yield StreamChunk("", turn.tool_calls, turn.finish_reason, turn.usage, turn.reasoning)
