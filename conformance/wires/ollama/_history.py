"""Ollama multi-turn, in: the conversation an ``/api/chat`` request carried, read back.

Strategy: Ollama's server decodes the request with Go's JSON decoder and checks
types only: a call's arguments must be an object and every text a string. It matches
results to calls by name and order and checks neither, so nothing else is refused
here; each refusal is the decoder's own sentence (``json: cannot unmarshal ...``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Sequence

from ...contract import Message, Reasoning, ReasoningKind, ToolCall, ToolResult
from ._replies import JSON_TYPE, response_headers

if TYPE_CHECKING:
    from ...provider.replies import JsonReply, RecordedRequest
    from .._script import History

__all__ = ["history_error", "read_history"]


def _kind(value: Any) -> str:
    """A JSON value's kind, in the words of Go's JSON decoder."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _unmarshal(where: str, value: Any, want: str, hint: str = "") -> str:
    """A problem in the form of Ollama's 400 for a body its Go decoder cannot read."""
    return f"json: cannot unmarshal {_kind(value)} into {where} of type {want}{hint}"


def _read_calls(raw: Any, where: str, problems: List[str]) -> List[ToolCall]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.append(_unmarshal(f"{where}.tool_calls", raw, "[]api.ToolCall"))
        return []
    calls = []
    for at, entry in enumerate(raw):
        here = f"{where}.tool_calls[{at}]"
        # Go's decoder leaves a missing or null field at its zero value: only a value
        # of the wrong type is refused.
        if not isinstance(entry, dict):
            problems.append(_unmarshal(here, entry, "api.ToolCall"))
            continue
        function = entry.get("function")
        if function is None:
            function = {}
        if not isinstance(function, dict):
            problems.append(_unmarshal(f"{here}.function", function, "api.ToolCallFunction"))
            continue
        name = function.get("name")
        if name is not None and not isinstance(name, str):
            problems.append(_unmarshal(f"{here}.function.name", name, "string"))
        arguments = function.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            hint = (
                " (Ollama takes the arguments as a JSON object, the way it sent them; a JSON "
                "string is refused)"
                if isinstance(arguments, str)
                else ""
            )
            problems.append(
                _unmarshal(f"{here}.function.arguments", arguments, "api.ToolCallFunctionArguments", hint)
            )
            arguments = {}
        call_id = entry.get("id")
        calls.append(ToolCall(str(call_id or ""), name if isinstance(name, str) else "", arguments))
    return calls


def _read_message(raw: Any, at: int, problems: List[str]) -> Optional[Message]:
    where = f"messages[{at}]"
    if not isinstance(raw, dict):
        problems.append(_unmarshal(where, raw, "api.Message"))
        return None
    strings = {}
    for key in ("role", "content", "thinking", "tool_name", "tool_call_id"):
        value = raw.get(key)
        if value is not None and not isinstance(value, str):
            hint = (
                " (Ollama's content is one string, never a list of parts)"
                if key == "content" and isinstance(value, list)
                else ""
            )
            problems.append(_unmarshal(f"{where}.{key}", value, "string", hint))
            value = None
        strings[key] = value or ""
    role, content = strings["role"], strings["content"]
    calls = _read_calls(raw.get("tool_calls"), where, problems)
    if role == "tool":
        result = ToolResult(strings["tool_call_id"], strings["tool_name"], content=content)
        return Message.tool(result)
    if role == "assistant":
        thinking = strings["thinking"]
        reasoning = (
            (Reasoning(ReasoningKind.THINKING.value, text=thinking, provider="ollama"),) if thinking else ()
        )
        return Message("assistant", content, tool_calls=tuple(calls), reasoning=reasoning)
    # The server takes any role and leaves it to the model's template.
    return Message(role, content)


def read_history(request: RecordedRequest, stream: bool) -> History:
    """The conversation an ``/api/chat`` request carried, and what the server would refuse.

    Ollama checks types only: a call's arguments must be an object and every text a
    string. It matches results to calls by name and order and checks neither, so
    nothing else is refused here.
    """
    from .._script import History

    body = request.json
    if not isinstance(body, dict):
        return History((), (_unmarshal("body", body, "api.ChatRequest"),), stream=stream)
    problems: List[str] = []
    messages: List[Message] = []
    raw_messages = body.get("messages")
    if raw_messages is not None and not isinstance(raw_messages, list):
        problems.append(_unmarshal("messages", raw_messages, "[]api.Message"))
    for at, raw in enumerate(raw_messages if isinstance(raw_messages, list) else ()):
        read = _read_message(raw, at, problems)
        if read is not None:
            messages.append(read)
    tools = body.get("tools")
    names = tuple(
        t["function"]["name"]
        for t in (tools if isinstance(tools, list) else ())
        if isinstance(t, dict)
        and isinstance(t.get("function"), dict)
        and isinstance(t["function"].get("name"), str)
    )
    return History(tuple(messages), tuple(problems), tools=names, tool_choice=None, stream=stream)


def history_error(problems: Sequence[str]) -> JsonReply:
    """Ollama's 400 for a body it cannot decode: ``{"error": "<the decoder's text>"}``."""
    from ...provider.replies import JsonReply
    from .._script import first_problem

    return JsonReply(
        {"error": first_problem(problems)}, status=400, headers=response_headers(), content_type=JSON_TYPE
    )
