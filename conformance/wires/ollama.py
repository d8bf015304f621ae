"""Ollama: ``POST /api/chat``, whole or as NDJSON.

Reference: https://github.com/ollama/ollama/blob/main/docs/api.md ("Generate a chat
completion"), docs/api/errors.mdx and docs/api/streaming.mdx; the Go types are
``api.ChatResponse`` and ``api.Metrics`` (api/types.go). The shapes below are the ones
ollama-python 0.6 was seen to accept (``ollama/_types.py``).

``stream`` defaults to true on the server: a request without it gets NDJSON. A streamed
reply is ``application/x-ndjson``, one ``ChatResponse`` object per line: ``done: false``
lines with the next text in ``message.content``, then one ``done: true`` line with
``done_reason`` (``stop`` or ``length``), the token counts ``prompt_eval_count`` and
``eval_count`` and the durations in nanoseconds. Tool calls never arrive in fragments:
the server buffers the model's output until a call parses, then sends it whole in
``message.tool_calls`` with ``function.arguments`` as a JSON object. A tool turn ends
with ``done_reason: "stop"``; Ollama has no tool-specific reason. ``created_at`` is Go's
RFC 3339 with nanoseconds, trailing zeros trimmed.

Errors are ``{"error": "<message>"}`` with the HTTP status. After the first line has
gone out the status can no longer change: a failure is one last line
``{"error": "..."}``, and the stream ends.

Scripted turns send ``message.thinking`` first, then the text, then each call whole on
a line of its own; a history is refused only where the server's JSON decoder refuses
it, a value of the wrong type (see ``read_history``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..contract import Message, Reasoning, ReasoningKind, ToolCall, ToolResult
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
    http_date,
    provider_id,
    stream_cut_variants,
    tcp_chunks,
)

if TYPE_CHECKING:
    from ..provider.replies import JsonReply, RecordedRequest, Reply, StreamReply
    from ._turns import History, ScriptedTurn, TurnEvents

__all__ = ["OllamaWire", "ollama_wire"]

_LOWER = "abcdefghijklmnopqrstuvwxyz0123456789"
#: Ollama 0.12+ numbers each call and gives it an id; older servers send neither.
TOOL_CALL_ID = provider_id("call_", "ollama/tool-call", 8, _LOWER)
VERSION = "0.13.0"
JSON_TYPE = "application/json; charset=utf-8"
NDJSON_TYPE = "application/x-ndjson"

#: 2025-11-29T08:00:00Z in nanoseconds, plus a fraction: the first ``created_at``.
_START_NS = 1764403200 * 10**9 + 123456789
_STEP_NS = 20987651


def created_at(index: int = 0) -> str:
    """The ``created_at`` of line ``index``: Go's ``time.RFC3339Nano`` in UTC.

    Go trims trailing zeros from the fraction (and the dot with them), so the width
    varies from line to line; a client that parses a fixed width is caught.
    """
    ns = _START_NS + index * _STEP_NS
    seconds, fraction = divmod(ns, 10**9)
    days, rest = divmod(seconds, 86400)
    hour, rest = divmod(rest, 3600)
    minute, second = divmod(rest, 60)
    # Only 2025-11-29 and the days right after it are ever reached.
    day = 29 + (days - 20421)
    text = f"2025-11-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"
    digits = f"{fraction:09d}".rstrip("0")
    return f"{text}.{digits}Z" if digits else f"{text}Z"


def metrics() -> Dict[str, Any]:
    """The ``api.Metrics`` of a finished turn: token counts and durations in nanoseconds."""
    return {
        "total_duration": 1287655308,
        "load_duration": 58093416,
        "prompt_eval_count": FX.usage.input_tokens,
        "prompt_eval_duration": 163874291,
        "eval_count": FX.usage.output_tokens,
        "eval_duration": 1061482917,
    }


def tool_call(with_id: bool) -> Dict[str, Any]:
    """One ``message.tool_calls`` entry: the whole call, ``arguments`` an object."""
    function: Dict[str, Any] = {"name": FX.tool_name, "arguments": dict(FX.tool_arguments)}
    if with_id:
        return {"id": TOOL_CALL_ID, "function": {"index": 0, **function}}
    return {"function": function}


def chat_response(
    model: str,
    index: int,
    content: str,
    done_reason: Optional[str] = None,
    tool_calls: Optional[List[Dict[str, Any]]] = None,
) -> Dict[str, Any]:
    """One ``ChatResponse``: a ``done: false`` line, or the final one with ``done_reason``."""
    message: Dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body: Dict[str, Any] = {"model": model, "created_at": created_at(index), "message": message}
    if done_reason is None:
        body["done"] = False
        return body
    body["done_reason"] = done_reason
    body["done"] = True
    body.update(metrics())
    return body


# -- streamed replies ----------------------------------------------------------------------


class _Lines:
    """Builds the NDJSON lines of one streamed ``/api/chat`` answer."""

    def __init__(self, model: str) -> None:
        # Imported once per reply, not per event, nor with the module.
        from ..encoders import ndjson

        self.ndjson = ndjson
        self.model = model
        self.lines: List[bytes] = []

    def add(self, body: Dict[str, Any]) -> None:
        self.lines.append(self.ndjson(body))

    def text(self, text: str, pieces: int = 4) -> None:
        step = max(1, -(-len(text) // pieces))
        for start in range(0, len(text), step):
            self.add(chat_response(self.model, len(self.lines), text[start : start + step]))

    def tool_calls(self, calls: List[Dict[str, Any]]) -> None:
        self.add(chat_response(self.model, len(self.lines), "", tool_calls=calls))

    def done(self, done_reason: str) -> None:
        self.add(chat_response(self.model, len(self.lines), "", done_reason))

    def error(self, message: str) -> None:
        self.lines.append(self.ndjson({"error": message}))

    def reply(self, seed: str, hang: bool = False, cut: Optional[Tuple[int, bool]] = None) -> StreamReply:
        """The stream; ``cut`` (lines kept, cut inside the next) ends it short of ``"done": true``."""
        from ..provider.replies import StreamReply

        lines = self.lines if cut is None else cut_events(self.lines, *cut)
        return StreamReply(
            tcp_chunks(lines, seed),
            content_type=NDJSON_TYPE,
            headers=_headers(),
            hang=hang,
            end="complete" if cut is None else "close",
        )


def _headers() -> Dict[str, str]:
    return {"date": http_date()}


# -- errors ------------------------------------------------------------------------------

#: The message of Ollama's ``ErrMaxQueue``: the queue of pending requests is full.
SERVER_BUSY = "server busy, please try again.  maximum pending requests exceeded"

#: scenario -> (status, body). Only what an Ollama server (or ollama.com behind it) says.
ERRORS: Mapping[str, Tuple[int, Dict[str, Any]]] = {
    # Ollama's cloud models answer 429 only for a used-up session, hourly or weekly
    # usage limit, with no retry-after header: that is a quota, not a rate limit.
    "quota": (
        429,
        {
            "error": "you (conformance) have reached your weekly usage limit, upgrade for higher "
            "limits: https://ollama.com/upgrade"
        },
    ),
    # A cloud model without sign-in (or ollama.com with a wrong key).
    "auth": (
        401,
        {
            "error": "unauthorized",
            "signin_url": "https://ollama.com/connect?name=conformance&key="
            + provider_id("", "ollama/signin", 64),
        },
    ),
    "overloaded": (503, {"error": SERVER_BUSY}),
    "server-error": (
        500,
        {"error": "llama runner process has terminated: exit status 2"},
    ),
    # Only when input truncation is off; by default Ollama drops the oldest messages.
    # ollama/ollama llm/llama_server.go (the whole text, with its advice).
    "context-overflow": (
        400,
        {
            "error": "the prompt is longer than the context length currently available to the model; "
            "shorten the prompt, adjust the context length in settings, or use a model with a "
            "longer context length"
        },
    ),
}

#: (scenario, variant) -> the error that variant answers with, where it is not :data:`ERRORS`'.
VARIANT_ERRORS: Mapping[Tuple[str, str], Tuple[int, Dict[str, Any]]] = {
    # The hourly limit asks to wait, which a backend must not take for a rate limit.
    ("quota", "hourly-usage-limit"): (
        429,
        {"error": "you've reached your hourly usage limit, please wait or upgrade to continue"},
    ),
    # A cloud model the local server cannot reach: the proxy's own error text as is.
    ("server-error", "cloud-unreachable-502"): (
        502,
        {"error": 'Post "https://ollama.com:443/api/chat": dial tcp: lookup ollama.com: no such host'},
    ),
}

#: What a runner that fails after the 200 says: a server error, not an overload (the
#: queue is only full before the first line, and that is a 503).
RUNNER_ERROR = "an error was encountered while running the model: unexpected EOF"

#: What a 429 from ollama.com may be reported as: Ollama's errors are a message and a
#: status only, and only the message says the limit is a usage quota, not a rate.
QUOTA_OR_RATE_LIMIT = ("quota", "rate_limit")

VARIANTS: Mapping[str, Tuple[Variant, ...]] = {
    "reasoning": (
        Variant(
            "thinking",
            "message.thinking before message.content (streamed: thinking lines, then content lines)",
            "ollama/ollama docs/api.md (the thinking field of a chat message); "
            "https://docs.ollama.com/capabilities/thinking",
            reasoning=(Reasoning(ReasoningKind.THINKING.value, text=FX.thinking, provider="ollama"),),
        ),
    ),
    **stream_cut_variants(
        'the "done": true line',
        "https://github.com/ollama/ollama/blob/main/docs/api.md (the final response of a stream)",
        "Growth-Circle/cadis#2950 (an Ollama stream that ended before done:true reported as complete)",
        "https://github.com/ollama/ollama/blob/main/docs/api.md (a reply with \"stream\": false)",
        call="the whole call on its line (Ollama never splits one)",
    ),
    "quota": (
        Variant(
            "weekly-usage-limit",
            "429 weekly usage limit, upgrade for higher limits",
            "HomericIntelligence/Scylla#346; continuedev/continue#11444 (the session limit, same form)",
            error_kinds=QUOTA_OR_RATE_LIMIT,
        ),
        Variant(
            "hourly-usage-limit",
            "429 hourly usage limit, please wait or upgrade to continue",
            "continuedev/continue#9233; continuedev/continue#10579 (the session limit, same form)",
            error_kinds=QUOTA_OR_RATE_LIMIT,
        ),
    ),
    "server-error": (
        Variant(
            "runner-terminated-500",
            "500 llama runner process has terminated",
            "ollama/ollama server/routes.go (the runner's error, passed on as a 500)",
        ),
        Variant(
            "cloud-unreachable-502",
            "502 from the cloud proxy when ollama.com cannot be reached",
            "ollama/ollama server/cloud_proxy.go; docs/api/errors.mdx (502)",
        ),
    ),
    "stream-error": (
        Variant(
            "runner-error",
            'a mid-stream {"error"} line: an error was encountered while running the model '
            "(a retryable server_error)",
            "ollama/ollama docs/api/errors.mdx; llm/llama_server.go",
            error_kind="server_error",
        ),
    ),
}


def error_reply(scenario: str, variant: str = "") -> JsonReply:
    """The ``{"error": ...}`` body and status Ollama answers ``scenario`` (in ``variant``) with."""
    from ..provider.replies import JsonReply

    status, body = VARIANT_ERRORS.get((scenario, variant)) or ERRORS[scenario]
    return JsonReply(body, status=status, headers=_headers(), content_type=JSON_TYPE)


# -- scripted turns and histories ------------------------------------------------------------


def _turn_parts(turn: ScriptedTurn) -> Tuple[str, str, List[Optional[Dict[str, Any]]]]:
    """The turn's thinking, its text, and each call's ``tool_calls`` entry.

    A call whose arguments are not a JSON object has no entry (``None``): Ollama's
    tool parser emits a call only once it parses, and passes text it cannot parse on
    as content (ollama/ollama-python#279 saw calls arrive as text).
    """
    import json

    thinking = "".join(r.text for r in turn.reasoning if str(r.kind) == ReasoningKind.THINKING.value)
    entries: List[Optional[Dict[str, Any]]] = []
    for call in turn.calls:
        try:
            arguments = json.loads(call.arguments)
        except ValueError:
            arguments = None
        if isinstance(arguments, dict):
            entries.append({"function": {"name": call.name, "arguments": arguments}})
        else:
            entries.append(None)
    return thinking, turn.text, entries


def _turn_line(
    model: str,
    index: int,
    content: str = "",
    thinking: str = "",
    tool_calls: Optional[List[Dict[str, Any]]] = None,
    done_reason: Optional[str] = None,
) -> Dict[str, Any]:
    body = chat_response(model, index, content, done_reason, tool_calls)
    if thinking:
        body["message"]["thinking"] = thinking
    return body


def _done_reason(turn: ScriptedTurn) -> str:
    # Ollama says stop for a tool turn too; only num_predict running out is length.
    return "length" if turn.finish_reason == "length" else "stop"


def _model(request: RecordedRequest) -> str:
    body = request.json if isinstance(request.json, dict) else {}
    return str(body.get("model") or "conformance-model")


def _word_pieces(text: str, pieces: int) -> List[str]:
    """``text`` in up to ``pieces`` runs of whole words, each but the first led by the
    whitespace before it, as a model's tokens stream (``" weather"``, ``"\n\nOne"``)."""
    import re

    from ._turns import split_text

    words = re.findall(r"\s*\S+\s*$|\s*\S+", text)
    if "".join(words) != text:  # only whitespace: no words to keep whole
        return list(split_text(text, pieces))
    step = max(1, -(-len(words) // max(1, pieces)))
    return ["".join(words[start : start + step]) for start in range(0, len(words), step)]


def _stream_turn(turn: ScriptedTurn, request: RecordedRequest) -> TurnEvents:
    """The NDJSON lines of ``turn``: thinking, then text, then one line per whole call."""
    from ..encoders import ndjson
    from ._turns import TurnEvents, split_text

    model = _model(request)
    thinking, text, entries = _turn_parts(turn)
    lines: List[bytes] = []
    spans: Dict[int, Tuple[int, int]] = {}
    for piece in _word_pieces(thinking, 3):
        lines.append(ndjson(_turn_line(model, len(lines), thinking=piece)))
    for piece in split_text(text, 4):
        lines.append(ndjson(_turn_line(model, len(lines), content=piece)))
    # The calls come whole, one line each as the server's parser completes them: they
    # cannot interleave, whatever ``turn.interleave`` asks.
    for n, entry in enumerate(entries):
        spans[n] = (len(lines), len(lines))
        if entry is None:
            lines.append(ndjson(_turn_line(model, len(lines), content=turn.calls[n].arguments)))
        else:
            lines.append(ndjson(_turn_line(model, len(lines), tool_calls=[entry])))
    lines.append(ndjson(_turn_line(model, len(lines), done_reason=_done_reason(turn))))
    return TurnEvents(lines, NDJSON_TYPE, _headers(), spans)


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
    from ._turns import History

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


# -- the wire ----------------------------------------------------------------------------


class OllamaWire(Wire):
    """Ollama's native chat API, whole and streamed."""

    turn_reasoning = (
        Reasoning(
            ReasoningKind.THINKING.value,
            text="The user wants the weather in Paris, so I call get_weather.",
            provider="ollama",
        ),
    )

    name = "ollama"
    provider = "ollama"
    title = "Ollama"
    # tool-call sends the call with an id (Ollama 0.12+), tool-call-with-stop without
    # (older servers): the backend keeps an id where there is one and makes one up
    # otherwise. ollama-python 0.6 drops the id either way.
    tool_call_id = None
    unsupported = {
        "content-filter": (
            "Ollama has no safety layer: no done_reason or error says the output was filtered"
        ),
        "rate-limit": (
            "Ollama documents a 429 for a rate limit (docs/api/errors.mdx) but no body or header "
            "of one has been seen: a local server queues or answers 503, and every recorded 429 "
            "from ollama.com is a usage limit without retry-after (the quota case)"
        ),
    }
    argument_text_absent = dict.fromkeys(
        ("chat", "stream"),
        "Ollama's tool parser makes a call only once its arguments parse, and passes "
        "unparsable text on as message content",
    )
    variants_table = VARIANTS
    terminal_event = 'the "done": true line'

    def is_generation(self, request: RecordedRequest) -> bool:
        return request.method == "POST" and request.path.endswith("/api/chat")

    def wants_stream(self, request: RecordedRequest) -> bool:
        # The server streams unless told "stream": false.
        return not (isinstance(request.json, dict) and request.json.get("stream") is False)

    def aux_reply(self, request: RecordedRequest) -> Reply:
        from ..provider.replies import JsonReply

        path = request.path
        if path in ("/", "") and request.method in ("GET", "HEAD"):
            return JsonReply(b"Ollama is running", content_type="text/plain; charset=utf-8")
        if path.endswith("/api/version"):
            return JsonReply({"version": VERSION}, content_type=JSON_TYPE)
        body = request.json if isinstance(request.json, dict) else {}
        model = str(body.get("model") or body.get("name") or "conformance-model")
        if path.endswith("/api/show") and request.method == "POST":
            return JsonReply(_show(model), content_type=JSON_TYPE)
        if path.endswith("/api/tags") and request.method == "GET":
            return JsonReply({"models": [_tag(model)]}, content_type=JSON_TYPE)
        if path.endswith("/api/ps") and request.method == "GET":
            return JsonReply({"models": []}, content_type=JSON_TYPE)
        return JsonReply(
            {
                "error": f"the Ollama fake provider has no route for {request.method} {path}; "
                "it serves /api/chat, /api/show, /api/tags, /api/ps and /api/version"
            },
            status=404,
            content_type=JSON_TYPE,
        )

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        if scenario in self.unsupported:
            return None
        body = request.json if isinstance(request.json, dict) else {}
        model = str(body.get("model") or "conformance-model")
        variant = variant or self.variants(scenario, mode)[0].name
        if scenario in ERRORS:
            return error_reply(scenario, variant)
        if scenario == "stream-cut":
            return self._cut(model, variant, self.wants_stream(request))
        if not self.wants_stream(request):
            return self._whole(scenario, model)
        return self._stream(scenario, model)

    def _cut(self, model: str, variant: str, stream: bool) -> Reply:
        """A turn cut short: its body before its end, or its stream before ``"done": true``.

        A call comes whole on one line, so the cut inside a call falls in the line after
        it, the one that would have said ``done``.
        """
        from ..provider.replies import JsonReply

        in_call = variant in CUT_IN_CALL
        if not stream:
            if in_call:
                body = chat_response(model, 0, "", "stop", tool_calls=[tool_call(with_id=True)])
            else:
                body = chat_response(model, 0, FX.text, "stop")
            whole = JsonReply(body, headers=_headers(), content_type=JSON_TYPE)
            return cut_short(whole, next(iter(FX.tool_arguments)) if in_call else FX.text)
        out = _Lines(model)
        if in_call:
            out.tool_calls([tool_call(with_id=True)])
        else:
            out.text(FX.partial_text, pieces=3)
        keep = len(out.lines)
        if not in_call:
            out.text(FX.text[len(FX.partial_text) :], pieces=1)
        out.done("stop")
        return out.reply(f"{self.name}/stream-cut/{variant}", cut=(keep, variant != "between-events"))

    def _whole(self, scenario: str, model: str) -> Optional[Reply]:
        from ..provider.replies import HangReply, JsonReply

        if scenario == "text":
            body = chat_response(model, 0, FX.text, "stop")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            calls = [tool_call(with_id=scenario == "tool-call")]
            body = chat_response(model, 0, "", "stop", tool_calls=calls)
        elif scenario == "truncated-tool-call":
            # num_predict ran out inside the call: the parser never completed it, so the
            # turn holds only the text before it, and done_reason "length".
            body = chat_response(model, 0, FX.preamble, "length")
        elif scenario in ("abort", "cancel"):
            return HangReply()
        elif scenario == "stream-error":
            # A whole reply cannot fail halfway: the runner's failure comes as a 500.
            return error_reply("server-error")
        else:
            return None
        return JsonReply(body, headers=_headers(), content_type=JSON_TYPE)

    def _stream(self, scenario: str, model: str) -> Optional[Reply]:
        seed = f"{self.name}/{scenario}"
        out = _Lines(model)
        if scenario == "text":
            out.text(FX.text)
            out.done("stop")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            out.tool_calls([tool_call(with_id=scenario == "tool-call")])
            out.done("stop")
        elif scenario == "truncated-tool-call":
            out.text(FX.preamble, pieces=2)
            out.done("length")
        elif scenario == "stream-error":
            out.text(FX.partial_text, pieces=3)
            # The status is already 200: the failure is one last {"error": ...} line.
            out.error(RUNNER_ERROR)
        elif scenario in ("abort", "cancel"):
            out.text(FX.partial_text, pieces=2)
            return out.reply(seed, hang=True)
        else:
            return None
        return out.reply(seed)

    # -- multi-turn --------------------------------------------------------------------

    #: Ollama gives no call an id a result must echo (0.12+ servers send one, which
    #: ollama-python drops): results are matched by ``tool_name`` and order.
    sends_call_ids = False

    def turn_whole(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[Reply]:
        """One ``ChatResponse``: ``thinking``, ``content``, the calls whole, ``done_reason``."""
        from ..provider.replies import JsonReply

        thinking, text, entries = _turn_parts(turn)
        # A call the parser could not read stays in the text, as the server passes it on.
        text += "".join(turn.calls[n].arguments for n, entry in enumerate(entries) if entry is None)
        calls = [entry for entry in entries if entry is not None]
        body = _turn_line(_model(request), 0, text, thinking, calls, _done_reason(turn))
        return JsonReply(body, headers=_headers(), content_type=JSON_TYPE)

    def turn_stream(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[TurnEvents]:
        return _stream_turn(turn, request)

    def read_history(self, request: RecordedRequest) -> Optional[History]:
        return read_history(request, self.wants_stream(request))

    def history_error(self, problems: Sequence[str]) -> Reply:
        """Ollama's 400 for a body it cannot decode: ``{"error": "<the decoder's text>"}``."""
        from ..provider.replies import JsonReply
        from ._script import first_problem

        return JsonReply(
            {"error": first_problem(problems)}, status=400, headers=_headers(), content_type=JSON_TYPE
        )

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        problems, body = check_json_post(request, model, "/api/chat")
        if not body:
            return problems
        problems.extend(_check_messages(body.get("messages")))
        problems.extend(check_function_tool(body.get("tools"), _without_none))
        return problems


def _show(model: str) -> Dict[str, Any]:
    """``/api/show``: what ollama-python's ``show()`` reads (capabilities included)."""
    return {
        "license": "",
        "modelfile": f"FROM {model}\n",
        "parameters": 'stop                           "<|eot_id|>"',
        "template": "{{ .Prompt }}",
        "details": _details(),
        "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
        "capabilities": ["completion", "tools"],
        "modified_at": created_at(0),
    }


def _details() -> Dict[str, Any]:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": "llama",
        "families": ["llama"],
        "parameter_size": "3.2B",
        "quantization_level": "Q4_K_M",
    }


def _tag(model: str) -> Dict[str, Any]:
    return {
        "name": model,
        "model": model,
        "modified_at": created_at(0),
        "size": 2019393189,
        "digest": provider_id("", "ollama/digest", 64, "0123456789abcdef"),
        "details": _details(),
    }


def _check_messages(messages: Any) -> List[str]:
    if not isinstance(messages, list) or not messages:
        return [f"expected messages to be a non-empty list, got {messages!r}"]
    # Ollama's content is a string, never a list of parts.
    return check_question(messages, lambda content: content)


def _without_none(value: Any) -> Any:
    # ollama-python's Tool model sends unset schema fields as null (e.g. "items": null).
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


ollama_wire = OllamaWire()
