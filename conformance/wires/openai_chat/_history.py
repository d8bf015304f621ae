"""OpenAI Chat Completions multi-turn, in: the conversation a request's ``messages`` carried,
read back.

Strategy: the messages are read into the library's normal form (a ``developer``
message as the system prompt, each ``tool`` message as the result of the call whose
``tool_call_id`` it names), and every departure from what the API accepts is noted
where OpenAI points (its ``param``) and in its own 400 wording: an assistant turn's
calls left unanswered, a result for no call of the turn before it, arguments that
are not a string. Argument text that does not parse is taken as it came, as
api.openai.com takes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from .._request import text_of
from ._replies import response_headers

if TYPE_CHECKING:
    from ...contract import Message, ToolCall, ToolChoice
    from ...provider.replies import JsonReply, RecordedRequest
    from .._script import History

__all__ = ["history_error", "read_history"]


def read_history(request: RecordedRequest) -> History:
    """The conversation a Chat Completions request carried, in normal form, with every departure."""
    from .._script import History

    body = request.json if isinstance(request.json, dict) else {}
    problems: List[str] = []
    messages = _read_messages(body.get("messages"), problems)
    tools = body.get("tools")
    names = tuple(
        str(t["function"].get("name"))
        for t in (tools if isinstance(tools, list) else ())
        if isinstance(t, dict) and isinstance(t.get("function"), dict)
    )
    # Read before the problems are frozen: a bad tool_choice is one of them.
    tool_choice = _read_tool_choice(body.get("tool_choice"), problems)
    return History(
        tuple(messages),
        tuple(problems),
        tools=names,
        tool_choice=tool_choice,
        stream=body.get("stream") is True,
    )


def history_error(problems: Sequence[str]) -> JsonReply:
    """OpenAI's 400 for a malformed history: ``invalid_request_error``, its ``param`` and ``code``."""
    from ...provider.replies import JsonReply
    from .._script import first_problem

    param, message = _split_problem(first_problem(problems))
    code = None
    if message.startswith("Missing required parameter"):
        code = "missing_required_parameter"
    elif message.startswith("Invalid type"):
        code = "invalid_type"
    body = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
    return JsonReply(body, status=400, headers=response_headers())


def _problem(param: str, message: str) -> str:
    """A history problem: where OpenAI points (its ``param``), then what it says."""
    return f"{param}: {message}"


def _split_problem(problem: str) -> Tuple[Optional[str], str]:
    param, sep, message = problem.partition(": ")
    if sep and param.startswith("messages"):
        return param, message
    return None, problem


def _read_tool_choice(raw: Any, problems: List[str]) -> Optional[ToolChoice]:
    from ...contract import ToolChoice

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
        # Still a call: its tool message answers it, so no second complaint follows.
        arguments = ""
    import json

    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        # api.openai.com takes the model's own text back as it came: nothing shows it
        # refusing a history whose arguments do not parse (openai/openai-agents-python
        # sends them verbatim, and #2061 breaks on Anthropic through LiteLLM only; the
        # 400s reported for it are vLLM's, llama.cpp's and SGLang's, vllm-project/vllm#43995).
        parsed = {}
    if not isinstance(parsed, dict):
        parsed = {"": parsed}
    from ...contract import ToolCall

    return ToolCall(str(call_id or ""), str(name or ""), parsed)


def _read_messages(raw: Any, problems: List[str]) -> List[Message]:
    """The messages in normal form; every departure from what OpenAI accepts noted."""
    from ...contract import Message, ToolResult

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
