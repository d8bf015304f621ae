"""Gemini multi-turn, in: a loop's ``contents`` read back, and the 400 a malformed one gets.

Strategy: a request's ``contents`` are read back against the rules the Gemini API
enforces, each refusal quoting the API's own wording where it is known:

- The results of a turn's calls go back in the next user turn, one
  ``functionResponse`` part each (as many as there were calls: "Please ensure that
  the number of function response parts is equal to the number of function call
  parts of the function call turn."), matched to the calls by ``name`` and ``id``;
  ``response`` is an object under keys of the caller's choice (``{"output": ...}``,
  ``{"result": ...}``), or ``{"error": ...}``; a result without an id answers the
  calls to its function in order.
- In the current turn (everything after the last user content that is not only
  function responses) the first ``functionCall`` of each model step must carry its
  ``thoughtSignature``, or Gemini 3 answers 400 "Function call is missing a
  thought_signature in functionCall parts."; earlier turns are not checked, as the
  API does not check them. A signature must be base64.
- Field names are accepted in both spellings the API's JSON parser takes:
  ``functionCall`` and ``function_call``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Sequence, Tuple

from ...contract import Message, Reasoning, ReasoningKind, ToolCall, ToolChoice, ToolError, ToolResult
from .._request import json_object
from .._script import History, first_problem
from ._replies import GEMINI, Dialect, is_base64

if TYPE_CHECKING:
    from ...provider.replies import JsonReply, RecordedRequest

__all__ = ["history_error", "read_contents", "read_history", "read_tool_choice", "read_tools"]

_MODES = frozenset({"MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED"})
_SIGNATURE_DOC = "Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."


def field(mapping: Mapping[str, Any], camel: str, snake: str) -> Any:
    """A field in either spelling the API's JSON parser accepts (``functionCall``, ``function_call``)."""
    return mapping[camel] if camel in mapping else mapping.get(snake)


def _text_of(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _signature(signature: str) -> Tuple[Reasoning, ...]:
    return (Reasoning(ReasoningKind.THOUGHT_SIGNATURE.value, signature=signature, provider="gemini"),)


def _thought(text: str, signature: str) -> Reasoning:
    return Reasoning(ReasoningKind.THOUGHT_SIGNATURE.value, text=text, signature=signature, provider="gemini")


def _result(call_id: str, name: str, response: Mapping[str, Any]) -> ToolResult:
    """A ``functionResponse.response`` as a result: ``{"error": ...}`` is a ToolError."""
    if "error" in response:
        error = response["error"]
        if isinstance(error, dict):
            details = error.get("details")
            tool_error = ToolError(
                str(error.get("code") or "error"),
                str(error.get("message") or ""),
                bool(error.get("retryable", False)),
                dict(details) if isinstance(details, dict) else {},
            )
        else:
            tool_error = ToolError("error", error if isinstance(error, str) else json.dumps(error))
        return ToolResult(call_id, name, error=tool_error)
    return ToolResult(call_id, name, _content(response))


def _content(response: Mapping[str, Any]) -> str:
    """The result's content: the value of the object's one key, whatever its name, else the whole object.

    The API reference leaves the keys to the caller ("you can use any keys of your
    choice", e.g. ``output``, ``result``): google-genai's automatic function calling
    wraps a return value as ``{"result": ...}``, pydantic-ai as ``{"return_value": ...}``.
    So the one value of a one-key object is what the model reads as the result, and
    ``output`` is that value where others ride beside it; any other object is read whole.
    """
    if len(response) == 1:
        (value,) = response.values()
    elif "output" in response:
        value = response["output"]
    else:
        return json.dumps(response, ensure_ascii=False)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class _Reader:
    """Reads ``contents`` into messages, noting each departure from what Gemini accepts."""

    def __init__(self) -> None:
        self.messages: List[Message] = []
        self.problems: List[str] = []

    def model(
        self, where: str, parts: List[Tuple[str, Any]], current: bool, after: Optional[str]
    ) -> List[ToolCall]:
        text: List[str] = []
        reasoning: List[Reasoning] = []
        calls: List[ToolCall] = []
        first_call_signed: Optional[bool] = None
        thought: List[str] = []
        for here, part in parts:
            if not isinstance(part, dict):
                self.problems.append(f"{here} must be a Part object, got {part!r:.80}")
                continue
            signature = field(part, "thoughtSignature", "thought_signature")
            if signature is not None and not is_base64(signature):
                self.problems.append(
                    f"Invalid value at '{here}.thought_signature' (TYPE_BYTES), Base64 decoding failed for "
                    f"{signature!r:.60}: a thoughtSignature goes back exactly as Gemini sent it"
                )
                signature = None
            if field(part, "functionResponse", "function_response") is not None:
                self.problems.append(
                    f"{here} is a functionResponse in a model turn; results go back in the next user turn"
                )
                continue
            call = field(part, "functionCall", "function_call")
            if call is not None:
                found = self.call(here, call, signature)
                if found is not None:
                    calls.append(found)
                if first_call_signed is None:
                    first_call_signed = bool(signature)
                continue
            if part.get("thought") is True:
                # A thought cut over several parts (a streamed one kept chunk by chunk) is one
                # item, ended by its signature.
                thought.append(str(part.get("text") or ""))
                if signature:
                    reasoning.append(_thought("".join(thought), signature))
                    thought = []
                continue
            if thought:
                reasoning.append(_thought("".join(thought), ""))
                thought = []
            if signature:
                reasoning.extend(_signature(signature))
            if isinstance(part.get("text"), str):
                text.append(part["text"])
        if thought:
            reasoning.append(_thought("".join(thought), ""))
        if calls and after not in ("user",):
            self.problems.append(
                "Please ensure that function call turn comes immediately after a user turn or after a "
                f"function response turn: {where} calls {[c.name for c in calls]} after "
                f"{'nothing' if after is None else 'a model turn'}"
            )
        if current and calls and first_call_signed is False and calls[0].id:
            self.problems.append(
                "Function call is missing a thought_signature in functionCall parts: the first functionCall "
                f"of {where} ({calls[0].name}) has none; Gemini 3 signs the first call of every step and "
                f"needs that thoughtSignature back on that same part. {_SIGNATURE_DOC}"
            )
        self.messages.append(Message("assistant", "".join(text), tuple(calls), reasoning=tuple(reasoning)))
        return calls

    def call(self, here: str, call: Any, signature: Optional[str]) -> Optional[ToolCall]:
        if not isinstance(call, dict):
            self.problems.append(f"{here}.functionCall must be an object, got {call!r:.80}")
            return None
        name = call.get("name")
        if not isinstance(name, str) or not name:
            self.problems.append(f"{here}.function_call.name: Name cannot be empty.")
            name = ""
        args = call.get("args", {})
        if not isinstance(args, dict):
            self.problems.append(
                f"Invalid value at '{here}.function_call.args' (type.googleapis.com/google.protobuf.Struct), "
                f"{args!r:.80}: args is a JSON object, not {type(args).__name__} "
                "(send back the object Gemini sent)"
            )
            parsed: Any = None
            if isinstance(args, str):
                try:
                    parsed = json.loads(args)
                except ValueError:
                    parsed = None
            args = parsed if isinstance(parsed, dict) else {}
        call_id = call.get("id")
        return ToolCall(
            str(call_id) if call_id else "", name, args, _signature(signature) if signature else ()
        )

    def user(
        self, where: str, parts: List[Tuple[str, Any]], calls: Optional[Tuple[str, List[ToolCall]]]
    ) -> None:
        results: List[ToolResult] = []
        text: List[str] = []
        for here, part in parts:
            if not isinstance(part, dict):
                self.problems.append(f"{here} must be a Part object, got {part!r:.80}")
                continue
            if field(part, "functionCall", "function_call") is not None:
                self.problems.append(
                    f"{here} is a functionCall in a user turn; only the model calls functions"
                )
                continue
            response = field(part, "functionResponse", "function_response")
            if response is not None:
                result = self.response(here, response)
                if result is not None:
                    results.append(result)
            elif isinstance(part.get("text"), str):
                text.append(part["text"])
        if calls is not None:
            results = self.pair(where, calls, results, text)
        elif results:
            self.problems.append(
                f"{where} sends {len(results)} functionResponse part(s) with no function call turn "
                "right before it; a functionResponse answers the functionCall parts of the model turn "
                "it follows"
            )
        self.messages.extend(Message.tool(r) for r in results)
        if text or not results:
            self.messages.append(Message("user", "".join(text)))

    def response(self, here: str, response: Any) -> Optional[ToolResult]:
        if not isinstance(response, dict):
            self.problems.append(f"{here}.functionResponse must be an object, got {response!r:.80}")
            return None
        name = response.get("name")
        if not isinstance(name, str) or not name:
            self.problems.append(f"{here}.function_response.name: Name cannot be empty.")
            name = ""
        body = response.get("response", {})
        if not isinstance(body, dict):
            self.problems.append(
                f"Invalid value at '{here}.function_response.response' "
                f"(type.googleapis.com/google.protobuf.Struct), {body!r:.80}: the response is a JSON object, "
                '{"output": ...} or {"error": ...}'
            )
            body = {"output": body}
        call_id = response.get("id")
        return _result(str(call_id) if call_id else "", name, body)

    def pair(
        self, where: str, calls: Tuple[str, List[ToolCall]], results: List[ToolResult], text: List[str]
    ) -> List[ToolResult]:
        """Each result against the calls of the turn before: count, name and id.

        Return the results as the API matches them: those sent without an id answer the
        calls of the turn to their function that no result answered by id, in order, as
        Gemini takes them (google-genai's automatic function calling sends no id, also for
        two calls to one function), and are read with that call's id.
        """
        origin, made = calls
        if len(results) != len(made):
            if results:
                answered = f"answers {len(results)}"
            elif text:
                answered = f"answers none: it is plain text {''.join(text)!r:.60}, not functionResponse parts"
            else:
                answered = "answers none"
            self.problems.append(
                "Please ensure that the number of function response parts is equal to the number of "
                f"function call parts of the function call turn: {origin} made {len(made)} call(s) "
                f"({', '.join(c.name for c in made)}) and {where} {answered}"
            )
        ids = [c.id for c in made if c.id]
        names = [c.name for c in made]
        seen: List[str] = []
        for result in results:
            if result.call_id:
                matching = [c for c in made if c.id == result.call_id]
                if not matching:
                    self.problems.append(
                        f"a functionResponse in {where} has id {result.call_id!r}, which matches no "
                        f"functionCall id of {origin} ({ids!r}); send back each call's own id"
                    )
                elif matching[0].name != result.name:
                    self.problems.append(
                        f"the functionResponse for call {result.call_id!r} in {where} names "
                        f"{result.name!r}, but that call was to {matching[0].name!r}"
                    )
                if result.call_id in seen:
                    self.problems.append(f"{where} answers call {result.call_id!r} more than once")
                seen.append(result.call_id)
            elif result.name not in names:
                self.problems.append(
                    f"a functionResponse in {where} answers {result.name!r}, but {origin} called {names!r}; "
                    "a functionResponse names the function it answers"
                )
        by_id = {r.call_id for r in results if r.call_id}
        open_calls = [c for c in made if not c.id or c.id not in by_id]
        out = []
        for result in results:
            if not result.call_id:
                call = next((c for c in open_calls if c.name == result.name), None)
                if call is not None:
                    open_calls.remove(call)
                    if call.id:
                        result = ToolResult(call.id, result.name, result.content, result.error)
            out.append(result)
        return out


def _current_start(contents: Sequence[Any]) -> int:
    """Where the current turn starts: after the last user content that is more than function responses."""
    for index in range(len(contents) - 1, -1, -1):
        content = contents[index]
        if not isinstance(content, dict) or content.get("role") == "model":
            continue
        parts = content.get("parts")
        if isinstance(parts, list) and any(
            isinstance(p, dict) and field(p, "functionResponse", "function_response") is None for p in parts
        ):
            return index + 1
    return 0


def _grouped_turns(contents: List[Any], problems: List[str]) -> List[Tuple[int, str, List[Tuple[str, Any]]]]:
    """The turns: consecutive contents of one role as one turn (index of its first, role, labelled parts).

    The API takes a turn cut over several contents of the same role, and
    google-genai's chat sends one: it keeps each streamed chunk's content as one
    history entry, so a streamed model turn goes back as a run of ``model`` contents.
    """
    turns: List[Tuple[int, str, List[Tuple[str, Any]]]] = []
    for index, content in enumerate(contents):
        where = f"contents[{index}]"
        if not isinstance(content, dict):
            problems.append(f"{where} must be a Content object, got {content!r:.80}")
            continue
        role = str(content.get("role") or "user")
        parts = content.get("parts")
        if not isinstance(parts, list) or not parts:
            problems.append(f"{where}.parts: contents.parts must not be empty.")
            parts = []
        labelled = [(f"{where}.parts[{number}]", part) for number, part in enumerate(parts)]
        if turns and turns[-1][1] == role:
            turns[-1][2].extend(labelled)
        else:
            turns.append((index, role, labelled))
    return turns


def read_contents(body: Mapping[str, Any], problems: List[str]) -> List[Message]:
    """``systemInstruction`` and ``contents`` as messages in normal form; departures go to ``problems``."""
    reader = _Reader()
    system = field(body, "systemInstruction", "system_instruction")
    if isinstance(system, dict):
        reader.messages.append(Message("system", _text_of(system.get("parts"))))
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        problems.append(
            f"contents is not specified: expected a non-empty list of contents, got {contents!r:.80}"
        )
        return reader.messages
    current = _current_start(contents)
    pending: Optional[Tuple[str, List[ToolCall]]] = None
    previous: Optional[str] = None
    for first, role, parts in _grouped_turns(contents, reader.problems):
        where = f"contents[{first}]"
        if role == "model":
            calls = reader.model(where, parts, first >= current, previous)
            pending = (where, calls) if calls else None
        elif role in ("user", "function"):
            reader.user(where, parts, pending)
            pending = None
        else:
            reader.problems.append(
                f"Please use a valid role: user, model. {where} has role {role!r} (a system prompt goes in "
                "systemInstruction, tool results in user turns of functionResponse parts)"
            )
            pending = None
        previous = "model" if role == "model" else "user"
    if pending is not None:
        origin, made = pending
        reader.problems.append(
            f"{origin} made {len(made)} function call(s) ({', '.join(c.name for c in made)}) and no "
            "user turn of functionResponse parts follows it; send every call's result before asking "
            "the model again"
        )
    problems.extend(reader.problems)
    return reader.messages


def read_tools(body: Mapping[str, Any], problems: List[str]) -> Tuple[str, ...]:
    """The function names declared; ``additionalProperties`` in ``parameters`` is refused."""
    names: List[str] = []
    tools = body.get("tools")
    if tools is None:
        return ()
    if not isinstance(tools, list):
        problems.append(f'tools must be a list of {{"functionDeclarations": [...]}}, got {tools!r:.80}')
        return ()
    for number, tool in enumerate(tools):
        declarations = (
            field(tool, "functionDeclarations", "function_declarations") if isinstance(tool, dict) else None
        )
        for index, declaration in enumerate(declarations if isinstance(declarations, list) else ()):
            if not isinstance(declaration, dict):
                continue
            if isinstance(declaration.get("name"), str):
                names.append(declaration["name"])
            where = f"tools[{number}].function_declarations[{index}].parameters"
            found = _unknown_schema_key(declaration.get("parameters"), "$")
            if found:
                problems.append(
                    f"Invalid JSON payload received. Unknown name \"additionalProperties\" at '{where}': "
                    f"Cannot find field (at {found}). Gemini's parameters schema has no "
                    "additionalProperties: drop it, or send the JSON Schema as parametersJsonSchema"
                )
    return tuple(names)


def _unknown_schema_key(schema: Any, path: str) -> str:
    if not isinstance(schema, dict):
        return ""
    if "additionalProperties" in schema or "additional_properties" in schema:
        return path
    for key, sub in (
        (schema.get("properties") or {}).items() if isinstance(schema.get("properties"), dict) else ()
    ):
        found = _unknown_schema_key(sub, f"{path}.properties.{key}")
        if found:
            return found
    return _unknown_schema_key(schema.get("items"), f"{path}.items")


def read_tool_choice(body: Mapping[str, Any], problems: List[str]) -> Optional[ToolChoice]:
    """``toolConfig.functionCallingConfig`` as a ToolChoice: AUTO, ANY, ANY of one name."""
    config = field(body, "toolConfig", "tool_config")
    if not isinstance(config, dict):
        return None
    calling = field(config, "functionCallingConfig", "function_calling_config")
    if not isinstance(calling, dict):
        return None
    mode = calling.get("mode", "MODE_UNSPECIFIED")
    names = field(calling, "allowedFunctionNames", "allowed_function_names") or []
    if mode not in _MODES:
        problems.append(
            "Invalid value at 'tool_config.function_calling_config.mode' (type.googleapis.com/"
            f"google.ai.generativelanguage.v1beta.FunctionCallingConfig.Mode), {mode!r}: "
            "use AUTO, ANY, NONE or VALIDATED, upper case"
        )
        return None
    if mode == "ANY":
        if isinstance(names, list) and len(names) == 1 and isinstance(names[0], str):
            return ToolChoice.tool(names[0])
        return ToolChoice.REQUIRED
    if mode == "NONE":
        return None
    return ToolChoice.AUTO


def read_history(request: RecordedRequest, stream: bool) -> History:
    """The conversation of a ``GenerateContentRequest``, read as Gemini 3 reads it."""
    problems: List[str] = []
    body = json_object(request, problems)
    messages = read_contents(body, problems)
    tools = read_tools(body, problems)
    choice = read_tool_choice(body, problems)
    return History(tuple(messages), tuple(problems), tools, choice, stream)


def history_error(problems: Sequence[str], dialect: Dialect = GEMINI) -> JsonReply:
    """Gemini's 400 ``INVALID_ARGUMENT``, a ``google.rpc.Status`` quoting the first problem."""
    body = {"error": {"code": 400, "message": first_problem(problems), "status": "INVALID_ARGUMENT"}}
    return dialect.whole(body, status=400)
