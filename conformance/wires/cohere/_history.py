"""Cohere multi-turn, in: the conversation a Chat v2 request's ``messages`` carried, read back.

Strategy: the messages are read into the library's normal form. An assistant turn's
``tool_plan`` and its ``thinking`` content items are its reasoning, a thinking item
each and the plan after them; each ``tool`` message is the result of the call whose
``tool_call_id`` it names, its content a string or ``text`` and ``document`` items.
Every departure Cohere is documented to refuse is noted in the words of its 400s
(https://docs.cohere.com/reference/errors lists them): a tool message without its
call's id, an id no earlier call has, two calls under one id, a call that is not a
function, a system message after the first. A call left without a result is not
noted: no document says Cohere refuses it, so the fake does not either, and a loop
that drops a result is judged by what it sent. ``tool_choice`` has two values,
``REQUIRED`` and ``NONE`` (``V2ChatRequestToolChoice`` in cohere-python); without it the
model decides, which reads back as ``ToolChoice.AUTO``, and ``REQUIRED`` with one tool
offered forces that tool, which reads back as ``ToolChoice.tool(name)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from ...contract import Message, Reasoning, ReasoningKind, ToolCall, ToolChoice, ToolResult
from .._request import text_of
from ._replies import message_id, response_headers

if TYPE_CHECKING:
    from ...provider.replies import JsonReply, RecordedRequest
    from .._script import History

__all__ = ["history_error", "read_history"]

_ROLES = ("system", "user", "assistant", "tool")


def read_history(request: RecordedRequest) -> History:
    """The conversation a Chat v2 request carried, in normal form, with every departure."""
    from .._script import History

    body = request.json if isinstance(request.json, dict) else {}
    problems: List[str] = []
    messages = _Reader(problems).read(body.get("messages"))
    tools = body.get("tools")
    names = tuple(
        str(t["function"].get("name"))
        for t in (tools if isinstance(tools, list) else ())
        if isinstance(t, dict) and isinstance(t.get("function"), dict)
    )
    choice = _tool_choice(body.get("tool_choice"), names, problems)
    return History(
        tuple(messages), tuple(problems), tools=names, tool_choice=choice, stream=body.get("stream") is True
    )


def history_error(problems: Sequence[str]) -> JsonReply:
    """Cohere's 400 for a malformed history: ``{"id", "message"}`` quoting the first problem."""
    from ...provider.replies import JsonReply
    from .._script import first_problem

    body = {"id": message_id("error/history"), "message": first_problem(problems)}
    return JsonReply(body, status=400, headers=response_headers())


def _tool_choice(raw: Any, names: Tuple[str, ...], problems: List[str]) -> Optional[ToolChoice]:
    if raw is None:
        return ToolChoice.AUTO if names else None
    if raw == "NONE":
        return None
    if raw == "REQUIRED":
        return ToolChoice.tool(names[0]) if len(names) == 1 else ToolChoice.REQUIRED
    problems.append(
        f"invalid request: tool_choice must be 'REQUIRED' or 'NONE', got {raw!r} (leave it out to let the "
        "model decide; to force one tool, offer only that tool with REQUIRED)"
    )
    return None


def _result_text(content: Any) -> Optional[str]:
    """A tool message's text: the string, or its ``text`` items and ``document`` data joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    import json

    parts: List[str] = []
    for item in content:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "text" and isinstance(item.get("text"), str):
            parts.append(item["text"])
        elif kind == "document" and isinstance(item.get("document"), dict):
            data = item["document"].get("data")
            parts.append(data if isinstance(data, str) else json.dumps(data, ensure_ascii=False))
        else:
            return None
    return "".join(parts)


class _Reader:
    """Reads ``messages`` in order, noting each departure in ``problems``."""

    def __init__(self, problems: List[str]) -> None:
        self.problems = problems
        #: Every call so far, by id, with its tool's name: a result may answer any earlier call.
        self.calls: Dict[str, str] = {}

    def read(self, raw: Any) -> List[Message]:
        if not isinstance(raw, list) or not raw:
            self.problems.append(f"invalid request: messages must be a non-empty list, got {raw!r}")
            return []
        out: List[Message] = []
        for index, item in enumerate(raw):
            where = f"messages[{index}]"
            role = item.get("role") if isinstance(item, dict) else None
            if role not in _ROLES:
                self.problems.append(
                    f"invalid request: {where}: role must be one of 'system', 'user', 'assistant' or "
                    f"'tool', got {role!r}"
                )
                continue
            assert isinstance(item, dict)
            if role == "system" and index > 0:
                self.problems.append(f"system turn must be the first in the list ({where} is a system turn)")
            if role in ("system", "user"):
                text = text_of(item.get("content"))
                if text is None:
                    self.problems.append(
                        f"invalid request: {where}.content must be a string or a list of text items, got "
                        f"{item.get('content')!r}"
                    )
                out.append(Message(str(role), text or ""))
            elif role == "assistant":
                out.append(self.assistant(where, item))
            else:
                out.append(Message.tool(self.result(where, item)))
        return out

    def assistant(self, where: str, item: Dict[str, Any]) -> Message:
        texts: List[str] = []
        reasoning: List[Reasoning] = []
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for number, part in enumerate(content):
                kind = part.get("type") if isinstance(part, dict) else None
                if kind == "text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif kind == "thinking" and isinstance(part.get("thinking"), str):
                    reasoning.append(
                        Reasoning(ReasoningKind.THINKING.value, text=part["thinking"], provider="cohere")
                    )
                else:
                    self.problems.append(
                        f"invalid request: {where}.content[{number}] must be a text or thinking item, "
                        f"got {part!r}"
                    )
        elif content is not None:
            self.problems.append(
                f"invalid request: {where}.content must be a string or a list, got {content!r}"
            )
        plan = item.get("tool_plan")
        if isinstance(plan, str) and plan:
            reasoning.append(Reasoning(ReasoningKind.THINKING.value, text=plan, provider="cohere"))
        calls: List[ToolCall] = []
        raw_calls = item.get("tool_calls")
        for number, raw in enumerate(raw_calls if isinstance(raw_calls, list) else ()):
            call = self.call(f"{where}.tool_calls[{number}]", raw)
            if call is None:
                continue
            if call.id in self.calls or any(c.id == call.id for c in calls):
                self.problems.append(f"cannot have duplicate tool ids ({call.id!r} at {where})")
            calls.append(call)
        for call in calls:
            self.calls[call.id] = call.name
        return Message("assistant", "".join(texts), tool_calls=tuple(calls), reasoning=tuple(reasoning))

    def call(self, where: str, raw: Any) -> Optional[ToolCall]:
        if not isinstance(raw, dict):
            self.problems.append(f"invalid request: {where} must be an object, got {raw!r}")
            return None
        if raw.get("type") != "function":
            self.problems.append(f"tool call must be of type function ({where}.type is {raw.get('type')!r})")
        function: Dict[str, Any] = raw["function"] if isinstance(raw.get("function"), dict) else {}
        call_id, name, arguments = raw.get("id"), function.get("name"), function.get("arguments")
        if not isinstance(call_id, str) or not call_id:
            self.problems.append(f"invalid request: {where}.id is required: send the call's id as it came")
            return None
        if not isinstance(name, str) or not name:
            self.problems.append(f"invalid request: {where}.function.name is required")
            return None
        if not isinstance(arguments, str):
            self.problems.append(
                f"invalid request: {where}.function.arguments must be a string (the arguments as JSON "
                f"text), got {type(arguments).__name__}"
            )
            return ToolCall(call_id, name, {})
        import json

        try:
            parsed = json.loads(arguments) if arguments else {}
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return ToolCall(call_id, name, parsed)
        # Text the model wrote that is no object: sent back as it came, which no document refuses.
        return ToolCall(call_id, name, {}, unparsed_arguments=arguments)

    def result(self, where: str, item: Dict[str, Any]) -> ToolResult:
        call_id = item.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            self.problems.append(f"tool call id must be provided with tool message ({where})")
            call_id = ""
        elif call_id not in self.calls:
            self.problems.append(
                f"tool call id not found in previous tool calls ({where}.tool_call_id {call_id!r})"
            )
        text = _result_text(item.get("content"))
        if text is None:
            self.problems.append(
                f"invalid request: {where}.content must be a string or a list of text or document items, got "
                f"{item.get('content')!r}"
            )
            text = ""
        return ToolResult(call_id, self.calls.get(call_id, ""), text)
