"""OpenAI Responses multi-turn, in: the conversation a request's ``input`` carried, read back.

Strategy: the ``instructions`` and the ``input`` items are read into the library's
normal form: an assistant turn is the run of ``reasoning``, assistant ``message`` and
``function_call`` items between two other items, and each ``function_call_output`` is
one tool message. Every departure from what the API accepts is noted in its own 400
wording (a reasoning item without the item it came with, an output whose ``call_id``
no call has, the Chat Completions shape sent here), and the 400 names the offending
``param``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...contract import Message, Reasoning, ReasoningKind, ToolCall, ToolChoice, ToolResult
from ._replies import response_headers

if TYPE_CHECKING:
    from ...provider.replies import JsonReply, RecordedRequest
    from .._script import History

__all__ = ["history_error", "read_history"]

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
    from .._script import History

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
    from ...provider.replies import JsonReply
    from .._script import first_problem

    message_ = first_problem(problems)
    found = _PARAM.search(message_)
    param = found.group(1) if found else "input"
    body = {"error": {"message": message_, "type": "invalid_request_error", "param": param, "code": None}}
    return JsonReply(body, status=400, headers=response_headers())
