"""Anthropic Messages: ``POST {base}/v1/messages``, whole or as SSE with ``event:`` names.

Reference: https://docs.anthropic.com/en/api/messages,
https://docs.anthropic.com/en/docs/build-with-claude/streaming and
https://docs.anthropic.com/en/api/errors. The shapes below are the ones
anthropic-python 1.x and 2.x were seen to accept (``anthropic/types``).

A whole reply is one ``message`` with ``content`` blocks (``text``, ``tool_use`` whose
``input`` is already an object) and a ``stop_reason``: ``end_turn``, ``tool_use``,
``max_tokens``, ``refusal`` (with ``stop_details``).

A streamed reply is SSE events whose ``event:`` name equals ``data.type`` (the SDK
drops events without the name)::

    message_start            (the message, empty content, usage.input_tokens)
    ping
    content_block_start      (index, a text block or a tool_use block with input {})
      content_block_delta ...  (text_delta.text or input_json_delta.partial_json)
    content_block_stop
    message_delta            (delta.stop_reason, usage.output_tokens)
    message_stop

Usage is split: ``input_tokens`` in ``message_start``, the final ``output_tokens`` in
``message_delta``. A failure after the 200 is ``event: error`` with an
``overloaded_error`` body, the in-stream twin of a 529.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..contract import Message, Reasoning, ReasoningKind, ToolCall, ToolChoice
from ..fixture import CONFORMANCE_FIXTURE as FX
from ._base import (
    CUT_IN_CALL,
    Variant,
    Wire,
    check_json_post,
    check_question,
    cut_events,
    cut_short,
    dumps,
    fresh_id,
    http_date,
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

__all__ = ["AnthropicWire", "anthropic_wire"]

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
MESSAGE_ID = provider_id("msg_01", "anthropic/message", 22, _BASE62)
TOOL_USE_ID = provider_id("toolu_01", "anthropic/tool-use", 22, _BASE62)


def request_id() -> str:
    """A fresh ``req_011C…`` id: Anthropic's header and its error bodies carry the same one."""
    return fresh_id("req_011C", 20, _BASE62)


REFUSAL_EXPLANATION = "This request was declined by the model's safety policies."
OVERLOADED_MESSAGE = "Overloaded"


def _headers(extra: Optional[Mapping[str, str]] = None, rid: Optional[str] = None) -> Dict[str, str]:
    headers = {
        "date": http_date(),
        "request-id": rid or request_id(),
        "anthropic-organization-id": "1f5d2c8e-6a0b-4c1d-9e3f-7a2b4c6d8e0f",
    }
    headers.update(extra or {})
    return headers


def _start_usage() -> Dict[str, Any]:
    # message_start carries the input side; output_tokens is a placeholder there.
    return {
        "input_tokens": FX.usage.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 1,
        "service_tier": "standard",
    }


def _usage() -> Dict[str, Any]:
    return {**_start_usage(), "output_tokens": FX.usage.output_tokens}


def _pieces(text: str, count: int) -> List[str]:
    step = max(1, -(-len(text) // count))
    return [text[start : start + step] for start in range(0, len(text), step)]


# -- whole replies: message ----------------------------------------------------------------


def text_block(text: str) -> Dict[str, Any]:
    """A ``text`` content block."""
    return {"type": "text", "text": text}


def tool_use_block(input_: Mapping[str, Any]) -> Dict[str, Any]:
    """A ``tool_use`` content block: ``input`` is an object, not a JSON string."""
    return {"type": "tool_use", "id": TOOL_USE_ID, "name": FX.tool_name, "input": dict(input_)}


def refusal_stop_details() -> Dict[str, Any]:
    """The ``stop_details`` of a ``refusal`` stop."""
    return {"type": "refusal", "category": None, "explanation": REFUSAL_EXPLANATION}


def message(
    model: str,
    content: List[Dict[str, Any]],
    stop_reason: Optional[str],
    usage: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """A ``message`` object, whole or (empty, no stop reason) inside ``message_start``."""
    body: Dict[str, Any] = {
        "id": MESSAGE_ID,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage if usage is not None else _usage(),
    }
    if stop_reason == "refusal":
        body["stop_details"] = refusal_stop_details()
    return body


# -- streamed replies: the event:-named stream -----------------------------------------------


class _Events:
    """Builds the events of one streamed message."""

    def __init__(self, model: str, message_id: str = MESSAGE_ID) -> None:
        # Imported once per reply, not per event, nor with the module.
        from ..encoders import sse

        self.sse = sse
        self.model = model
        self.message_id = message_id
        self.events: List[bytes] = []
        self.request_id = request_id()
        self.index = 0
        self.pinged = False

    def emit(self, type_: str, **fields: Any) -> None:
        self.events.append(self.sse(dumps({"type": type_, **fields}), event=type_))

    def message_start(self) -> None:
        start = message(self.model, [], None, _start_usage())
        self.emit("message_start", message={**start, "id": self.message_id})

    def ping(self) -> None:
        # Real streams ping after the first content_block_start, not after message_start
        # (79 of 79 in pydantic-ai tests/models/cassettes/test_anthropic).
        if not self.pinged:
            self.pinged = True
            self.emit("ping")

    def content_block_start(self, block: Dict[str, Any]) -> None:
        self.emit("content_block_start", index=self.index, content_block=block)
        self.ping()

    def text(self, text: str, pieces: int = 4, stop: bool = True) -> None:
        self.content_block_start(text_block(""))
        for piece in _pieces(text, pieces):
            delta = {"type": "text_delta", "text": piece}
            self.emit("content_block_delta", index=self.index, delta=delta)
        if stop:
            self.content_block_stop()

    def tool_use(self, partial_json: str, pieces: int = 4, stop: bool = True) -> None:
        self.content_block_start(tool_use_block({}))
        # Anthropic opens a tool_use block with an empty fragment before the real ones.
        for piece in ["", *_pieces(partial_json, pieces)]:
            delta = {"type": "input_json_delta", "partial_json": piece}
            self.emit("content_block_delta", index=self.index, delta=delta)
        if stop:
            self.content_block_stop()

    def content_block_stop(self) -> None:
        self.emit("content_block_stop", index=self.index)
        self.index += 1

    def message_delta(self, stop_reason: str, input_tokens: bool = True) -> None:
        delta: Dict[str, Any] = {"stop_reason": stop_reason, "stop_sequence": None}
        if stop_reason == "refusal":
            delta["stop_details"] = refusal_stop_details()
        self.ping()
        # The newer shape (since about Sep 2025) repeats the input side in message_delta;
        # the older one counts only the output there.
        usage: Dict[str, Any] = {"output_tokens": FX.usage.output_tokens}
        if input_tokens:
            usage = {
                "input_tokens": FX.usage.input_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                **usage,
            }
        self.emit("message_delta", delta=delta, usage=usage)
        self.emit("message_stop")

    def error(self, type_: str, message_: str) -> None:
        body = {"type": "error", "error": {"type": type_, "message": message_}}
        self.events.append(self.sse(dumps({**body, "request_id": self.request_id}), event="error"))

    def reply(self, seed: str, hang: bool = False, cut: Optional[Tuple[int, bool]] = None) -> StreamReply:
        """The stream; ``cut`` (events kept, cut inside the next) ends it short of ``message_stop``."""
        from ..provider.replies import StreamReply

        events = self.events if cut is None else cut_events(self.events, *cut)
        return StreamReply(
            tcp_chunks(events, seed),
            content_type="text/event-stream; charset=utf-8",
            headers=_headers({"cache-control": "no-cache"}, self.request_id),
            hang=hang,
            end="complete" if cut is None else "close",
        )


# -- errors ----------------------------------------------------------------------------------

#: scenario -> (status, error.type, message, error.details or None, extra headers)
ERRORS: Mapping[str, Any] = {
    "rate-limit": (
        429,
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests per "
        "minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.",
        None,
        {
            "retry-after": "7",
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": "2025-11-29T08:00:07Z",
        },
    ),
    # A spend limit reached is a 429 too, told apart only by details.error_code; it
    # comes without retry-after because waiting a minute does not help.
    "quota": (
        429,
        "rate_limit_error",
        "You have reached your specified API usage limits. You will regain access on "
        "2026-01-01 at 00:00 UTC.",
        {"error_code": "enforced_spend_limit_reached"},
        {},
    ),
    "auth": (401, "authentication_error", "invalid x-api-key", None, {}),
    "overloaded": (529, "overloaded_error", OVERLOADED_MESSAGE, None, {}),
    "server-error": (500, "api_error", "Internal server error", None, {}),
    "context-overflow": (
        400,
        "invalid_request_error",
        "prompt is too long: 208310 tokens > 200000 maximum",
        None,
        {},
    ),
}


#: (scenario, variant) -> the error that variant answers with, where it is not :data:`ERRORS`'.
VARIANT_ERRORS: Mapping[Any, Any] = {
    # Out of prepaid credit: a 400 invalid_request_error, told apart from a bad request
    # by its message only. The common real quota answer.
    ("quota", "credit-balance-400"): (
        400,
        "invalid_request_error",
        "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing "
        "to upgrade or purchase credits.",
        None,
        {},
    ),
    ("quota", "billing-402"): (
        402,
        "billing_error",
        "Your account has a billing issue. Please go to Plans & Billing to resolve it.",
        None,
        {},
    ),
}

#: What a thinking model returns before its answer: a signed thinking block, and the
#: encrypted form Claude sends for thinking its safety systems flagged.
THINKING = Reasoning(
    ReasoningKind.THINKING.value,
    text=FX.thinking,
    signature=signature("anthropic/reasoning/signature", 180),
    provider="anthropic",
)
REDACTED_THINKING = Reasoning(
    ReasoningKind.REDACTED_THINKING.value,
    data=signature("anthropic/reasoning/redacted", 240),
    provider="anthropic",
)

VARIANTS: Mapping[str, Any] = {
    # A thinking model's answer: its thinking blocks first, then the text.
    "reasoning": (
        Variant(
            "thinking",
            "a thinking block and its signature (streamed as thinking_delta, then signature_delta), "
            "then text",
            "vercel/ai packages/anthropic/src/__fixtures__/anthropic-clear-thinking.1.chunks.txt "
            "(claude-sonnet-4-5); https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking",
            reasoning=(THINKING,),
        ),
        Variant(
            "redacted-thinking",
            "a thinking block, then a redacted_thinking block (its data, whole in content_block_start), "
            "then text",
            "https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#thinking-redaction",
            reasoning=(THINKING, REDACTED_THINKING),
        ),
    ),
    **stream_cut_variants(
        "message_stop",
        "https://docs.anthropic.com/en/docs/build-with-claude/streaming (the event flow)",
        "charmbracelet/fantasy#245 and SamSaffron/term-llm#955 (a stream that reached EOF "
        "without message_stop taken for a finished turn)",
        "https://docs.anthropic.com/en/api/messages",
    ),
    # A tool_use block's input_json_delta fragments that do not join to JSON, on a
    # tool_use turn; a whole reply's input is an object, so only a stream carries them.
    "corrupt-arguments": (
        Variant(
            "unterminated-string",
            "input_json_delta fragments ending inside a string, the object left open",
            "https://docs.claude.com/en/docs/agents-and-tools/tool-use/fine-grained-tool-streaming "
            "(no guarantee the stream completes in a valid JSON string); earendil-works/pi#2419",
        ),
        Variant(
            "trailing-garbage",
            "input_json_delta fragments: a whole object, then a closing brace too many",
            "anthropics/anthropic-sdk-python#1265 (malformed input_json_delta JSON from a real "
            "stream); earendil-works/pi#3175",
        ),
    ),
    # Streams since about Sep 2025 repeat the input tokens and cache counts in
    # message_delta (45 of 79 in pydantic-ai tests/models/cassettes/test_anthropic); the
    # older ones count only the output there (34 of 79).
    "text/stream": (
        Variant(
            "delta-input-tokens",
            "message_delta.usage with input_tokens and cache counts",
            "vercel/ai packages/anthropic/src/__fixtures__/anthropic-message-delta-input-tokens.chunks.txt",
        ),
        Variant(
            "delta-output-only",
            "message_delta.usage with output_tokens only",
            "pydantic/pydantic-ai tests/models/cassettes/test_anthropic (34 of 79 streams)",
        ),
    ),
    "quota": (
        Variant(
            "credit-balance-400",
            "400 credit balance too low",
            "anthropics/claude-code#4684, #4208, #34522, #66314; continuedev/continue#5499",
        ),
        Variant(
            "spend-limit-429",
            "429 rate_limit_error with details.error_code enforced_spend_limit_reached",
            "https://docs.claude.com/en/api/rate-limits (spend limits)",
        ),
        Variant(
            "billing-402",
            "402 billing_error",
            "https://docs.claude.com/en/api/errors (402 billing_error)",
        ),
    ),
}


def error_reply(scenario: str, variant: str = "") -> JsonReply:
    """The error body and headers Anthropic answers ``scenario`` (in ``variant``) with."""
    from ..provider.replies import JsonReply

    status, type_, message_, details, extra = VARIANT_ERRORS.get((scenario, variant)) or ERRORS[scenario]
    error: Dict[str, Any] = {"type": type_, "message": message_}
    if details is not None:
        error["details"] = details
    rid = request_id()
    body = {"type": "error", "error": error, "request_id": rid}
    return JsonReply(body, status=status, headers=_headers(extra, rid))


# -- multi-turn: scripted turns ----------------------------------------------------------------

#: The contract's finish reason -> Anthropic's ``stop_reason``.
TURN_STOP_REASONS: Mapping[str, str] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "refusal": "refusal",
    "content_filter": "refusal",
}


def _turn_input(arguments: str) -> Dict[str, Any]:
    import json

    # A whole reply carries input as an object; arguments scripted corrupt (a cut-off
    # call) have no object form, and arrive as the empty input a cut leaves.
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def reasoning_block(item: Reasoning) -> Dict[str, Any]:
    """A ``thinking`` block (text and signature) or a ``redacted_thinking`` block (data)."""
    if item.kind == ReasoningKind.REDACTED_THINKING:
        return {"type": "redacted_thinking", "data": item.data}
    return {"type": "thinking", "thinking": item.text, "signature": item.signature}


def turn_message(turn: ScriptedTurn, model: str) -> Dict[str, Any]:
    """The whole ``message`` playing ``turn``: thinking blocks, then text, then ``tool_use``."""
    content: List[Dict[str, Any]] = [reasoning_block(r) for r in turn.reasoning]
    if turn.text:
        content.append(text_block(turn.text))
    for call in turn.calls:
        content.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _turn_input(call.arguments)}
        )
    body = message(model, content, TURN_STOP_REASONS.get(turn.finish_reason, "end_turn"))
    body["id"] = turn_message_id(turn)
    return body


def turn_message_id(turn: ScriptedTurn) -> str:
    """The ``msg_01…`` id of ``turn``'s message, the same on every run."""
    return provider_id("msg_01", f"anthropic/{turn.seed}", 22, _BASE62)


def turn_events(turn: ScriptedTurn, model: str) -> TurnEvents:
    """The SSE events playing ``turn``, and which events carried each call's first and last fragment.

    A thinking block streams ``thinking_delta`` pieces and then one ``signature_delta``
    just before its ``content_block_stop``; a ``redacted_thinking`` block arrives whole
    in its ``content_block_start``. Each ``tool_use`` block opens with an empty
    ``partial_json``, as every real one does.
    """
    from ._turns import TurnEvents

    out = _Events(model, turn_message_id(turn))
    out.message_start()
    for item in turn.reasoning:
        if item.kind == ReasoningKind.REDACTED_THINKING:
            out.content_block_start(reasoning_block(item))
        else:
            out.content_block_start({"type": "thinking", "thinking": "", "signature": ""})
            for piece in _pieces(item.text, 3) if item.text else []:
                out.emit(
                    "content_block_delta",
                    index=out.index,
                    delta={"type": "thinking_delta", "thinking": piece},
                )
            out.emit(
                "content_block_delta",
                index=out.index,
                delta={"type": "signature_delta", "signature": item.signature},
            )
        out.content_block_stop()
    if turn.text:
        out.text(turn.text)
    arguments: Dict[int, Tuple[int, int]] = {}
    if turn.interleave and len(turn.calls) > 1:
        _interleaved_calls(out, turn, arguments)
    else:
        for position, call in enumerate(turn.calls):
            out.content_block_start({"type": "tool_use", "id": call.id, "name": call.name, "input": {}})
            first = last = len(out.events)
            for number, piece in enumerate(["", *call.pieces()]):
                out.emit(
                    "content_block_delta",
                    index=out.index,
                    delta={"type": "input_json_delta", "partial_json": piece},
                )
                if number == 1:
                    first = len(out.events) - 1
                last = len(out.events) - 1
            arguments[position] = (first if call.pieces() else last, last)
            out.content_block_stop()
    out.message_delta(TURN_STOP_REASONS.get(turn.finish_reason, "end_turn"))
    return TurnEvents(
        out.events,
        "text/event-stream; charset=utf-8",
        _headers({"cache-control": "no-cache"}, out.request_id),
        arguments,
    )


def _interleaved_calls(out: _Events, turn: ScriptedTurn, arguments: Dict[int, Tuple[int, int]]) -> None:
    """Open every ``tool_use`` block, send their fragments in turn, then close them.

    Every delta names its block by ``index``, and anthropic-python accumulates by it
    (``lib/streaming/_messages.py`` looks the block up as ``content[event.index]``), as
    does the reference backend, so blocks may be open together. Real streams were seen
    closing each block before opening the next (79 of 79 in pydantic-ai's cassettes),
    so this is what the format allows rather than what Claude was seen doing: a client
    that keeps "the current block" instead of the index mixes the calls up.
    """
    base = out.index
    for offset, call in enumerate(turn.calls):
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        out.emit("content_block_start", index=base + offset, content_block=block)
        out.ping()
    for offset, _call in enumerate(turn.calls):
        delta = {"type": "input_json_delta", "partial_json": ""}
        out.emit("content_block_delta", index=base + offset, delta=delta)
        arguments[offset] = (len(out.events) - 1, len(out.events) - 1)
    pieces = [call.pieces() for call in turn.calls]
    seen = set()
    for step in range(max(len(p) for p in pieces)):
        for offset, parts in enumerate(pieces):
            if step >= len(parts):
                continue
            delta = {"type": "input_json_delta", "partial_json": parts[step]}
            out.emit("content_block_delta", index=base + offset, delta=delta)
            first = arguments[offset][0] if offset in seen else len(out.events) - 1
            seen.add(offset)
            arguments[offset] = (first, len(out.events) - 1)
    for offset, _call in enumerate(turn.calls):
        out.emit("content_block_stop", index=base + offset)
    out.index = base + len(turn.calls)


# -- multi-turn: reading a history -------------------------------------------------------------

THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


def _system_text(system: Any) -> Optional[str]:
    if isinstance(system, str):
        return system
    return text_of(system)


def _choice(raw: Any) -> Optional[ToolChoice]:
    type_ = raw.get("type") if isinstance(raw, dict) else None
    if type_ == "auto":
        return ToolChoice.AUTO
    if type_ == "any":
        return ToolChoice.REQUIRED
    if type_ == "tool" and isinstance(raw.get("name"), str) and raw["name"]:
        return ToolChoice.tool(raw["name"])
    return None


def _result_text(content: Any) -> Optional[str]:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return text_of(content)


def _blocks(content: Any) -> Optional[List[Any]]:
    """A message's content as a list of blocks, or ``None`` where it is neither a string nor a list."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else None


def _merge_consecutive(raw: List[Any]) -> List[Tuple[int, Any]]:
    """The messages with consecutive turns of one role combined, each at its first index.

    The Messages API documents that consecutive ``user`` or ``assistant`` turns are
    combined into a single turn (the ``messages`` parameter of
    https://docs.anthropic.com/en/api/messages), so results sent one ``tool_result``
    per user message answer the turn before as one user turn would. A message that
    cannot be combined (not an object, no content, another role) stays as it is.
    """
    out: List[Tuple[int, Any]] = []
    for index, item in enumerate(raw):
        role = item.get("role") if isinstance(item, dict) else None
        blocks = _blocks(item.get("content")) if isinstance(item, dict) else None
        if out and role in ("user", "assistant") and blocks:
            at, before = out[-1]
            earlier = _blocks(before.get("content")) if isinstance(before, dict) else None
            if isinstance(before, dict) and before.get("role") == role and earlier:
                out[-1] = (at, {**before, "content": [*earlier, *blocks]})
                continue
        out.append((index, item))
    return out


class _HistoryReader:
    """Reads a Messages request body into the normal form, noting each departure."""

    def __init__(self, body: Mapping[str, Any]) -> None:
        self.body = body
        self.messages: List[Message] = []
        self.problems: List[str] = []
        #: id -> name of every tool_use seen, for the results' names.
        self.names: Dict[str, str] = {}
        self.thinking = isinstance(body.get("thinking"), dict) and body["thinking"].get("type") in (
            "enabled",
            "adaptive",
        )

    def read(self) -> None:
        system = self.body.get("system")
        if system is not None:
            text = _system_text(system)
            if text is None:
                self.problems.append(f"system: expected a string or a list of text blocks, got {system!r}")
            else:
                self.messages.append(Message("system", text))
        raw = self.body.get("messages")
        if not isinstance(raw, list) or not raw:
            self.problems.append(f"messages: expected a non-empty list of messages, got {raw!r}")
            return
        pending: List[str] = []  # tool_use ids of the previous assistant turn
        pending_at = -1
        merged = _merge_consecutive(raw)
        for position, (index, item) in enumerate(merged):
            if not isinstance(item, dict):
                self.problems.append(f"messages.{index}: expected a message object, got {item!r}")
                continue
            role = item.get("role")
            if role == "system":
                self.problems.append(
                    'messages: Unexpected role "system". The Messages API accepts a top-level `system` '
                    'parameter, not "system" as an input message role.'
                )
                continue
            if role not in ("user", "assistant"):
                self.problems.append(
                    f"messages.{index}.role: Input should be 'user' or 'assistant' (got {role!r})"
                )
                continue
            content = item.get("content")
            if content == [] or content == "":
                if position != len(merged) - 1 or role != "assistant":
                    self.problems.append(
                        f"messages.{index}: all messages must have non-empty content except for the "
                        "optional final assistant message"
                    )
                    continue
            if role == "user":
                answered = self.user(index, content, pending, pending_at)
                pending = []
                if not answered:
                    continue
            else:
                if pending:
                    self.unanswered(pending_at, pending)
                final = not any(
                    isinstance(m, dict) and m.get("role") == "assistant" for _, m in merged[position + 1 :]
                )
                pending = self.assistant(index, content, final)
                pending_at = index

    def unanswered(self, index: int, ids: Sequence[str]) -> None:
        self.problems.append(
            f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: "
            f"{', '.join(ids)}. Each `tool_use` block must have a corresponding `tool_result` block in the "
            "next message."
        )

    def user(self, index: int, content: Any, pending: Sequence[str], pending_at: int) -> bool:
        from ._tool_results import flagged_result

        if isinstance(content, str):
            if pending:
                self.unanswered(pending_at, pending)
            self.messages.append(Message("user", content))
            return True
        if not isinstance(content, list):
            self.problems.append(
                f"messages.{index}.content: expected a string or a list of blocks, got {content!r}"
            )
            return False
        answered: List[str] = []
        texts: List[str] = []
        text_first = False
        for number, block in enumerate(content):
            where = f"messages.{index}.content.{number}"
            type_ = block.get("type") if isinstance(block, dict) else None
            if type_ == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
                continue
            if type_ != "tool_result":
                self.problems.append(
                    f"{where}: expected a text or tool_result block in a user message, got {block!r}"
                )
                continue
            if texts:
                text_first = True
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str) or not call_id:
                self.problems.append(f"{where}.tool_result.tool_use_id: Field required")
                continue
            if call_id not in pending:
                self.problems.append(
                    f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {call_id}. Each "
                    "`tool_result` block must have a corresponding `tool_use` block in the previous message."
                )
            answered.append(call_id)
            text = _result_text(block.get("content"))
            if text is None:
                self.problems.append(
                    f"{where}.tool_result.content: expected a string or a list of text blocks, got "
                    f"{block.get('content')!r}"
                )
                text = ""
            is_error = block.get("is_error")
            if is_error is not None and not isinstance(is_error, bool):
                self.problems.append(
                    f"{where}.tool_result.is_error: Input should be a valid boolean, got {is_error!r}"
                )
            result = flagged_result(call_id, self.names.get(call_id, ""), text, is_error is True)
            self.messages.append(Message.tool(result))
        missing = [i for i in pending if i not in answered]
        if missing or (pending and text_first):
            # Results must come first in the user turn: text before them counts as no result.
            self.unanswered(pending_at, missing or pending)
        if texts:
            self.messages.append(Message("user", "".join(texts)))
        return True

    def assistant(self, index: int, content: Any, final: bool) -> List[str]:
        """Read an assistant turn; ``final`` where no assistant turn follows (the one the
        API holds to ``thinking``: earlier turns' thinking blocks it ignores)."""
        if isinstance(content, str):
            self.messages.append(Message("assistant", content))
            return []
        if not isinstance(content, list):
            self.problems.append(
                f"messages.{index}.content: expected a string or a list of blocks, got {content!r}"
            )
            return []
        texts: List[str] = []
        calls: List[ToolCall] = []
        reasoning: List[Reasoning] = []
        for number, block in enumerate(content):
            where = f"messages.{index}.content.{number}"
            type_ = block.get("type") if isinstance(block, dict) else None
            if type_ == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif type_ == "thinking":
                reasoning.extend(self.thinking_block(where, block))
            elif type_ == "redacted_thinking":
                data = block.get("data")
                if not isinstance(data, str) or not data:
                    self.problems.append(f"{where}.redacted_thinking.data: Field required")
                else:
                    reasoning.append(
                        Reasoning(ReasoningKind.REDACTED_THINKING.value, data=data, provider="anthropic")
                    )
            elif type_ == "tool_use":
                call = self.tool_use(where, block)
                if call is not None:
                    if call.id in self.names:
                        self.problems.append(f"{where}: `tool_use` ids must be unique (repeated: {call.id})")
                    self.names[call.id] = call.name
                    calls.append(call)
            else:
                self.problems.append(
                    f"{where}: expected a text, thinking or tool_use block in an assistant message, "
                    f"got {block!r}"
                )
        if self.thinking and final and calls and content:
            head = content[0].get("type") if isinstance(content[0], dict) else None
            if head not in ("thinking", "redacted_thinking"):
                self.problems.append(
                    f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                    f"`{head}`. When `thinking` is enabled, a final `assistant` message must start with a "
                    f"thinking block; include the thinking blocks of the turn as they came ({THINKING_DOCS})"
                )
        self.messages.append(Message("assistant", "".join(texts), tuple(calls), reasoning=tuple(reasoning)))
        return [c.id for c in calls]

    def thinking_block(self, where: str, block: Mapping[str, Any]) -> List[Reasoning]:
        text, signature = block.get("thinking"), block.get("signature")
        if not isinstance(text, str):
            self.problems.append(f"{where}.thinking.thinking: Field required")
            return []
        if signature is None:
            self.problems.append(
                f"{where}.thinking.signature: Field required (send the thinking block back with its "
                "signature, unaltered)"
            )
            return []
        if not isinstance(signature, str) or not signature:
            self.problems.append(f"{where}.thinking: Invalid `signature` in `thinking` block")
            return []
        return [Reasoning(ReasoningKind.THINKING.value, text=text, signature=signature, provider="anthropic")]

    def tool_use(self, where: str, block: Mapping[str, Any]) -> Optional[ToolCall]:
        call_id, name, input_ = block.get("id"), block.get("name"), block.get("input")
        if not isinstance(call_id, str) or not call_id:
            self.problems.append(f"{where}.tool_use.id: Field required")
            return None
        if not isinstance(name, str) or not name:
            self.problems.append(f"{where}.tool_use.name: Field required")
            return None
        if not isinstance(input_, dict):
            hint = " (send the parsed arguments, not their JSON text)" if isinstance(input_, str) else ""
            self.problems.append(f"{where}.tool_use.input: Input should be a valid dictionary{hint}")
            return None
        return ToolCall(call_id, name, input_)


def read_history(request: RecordedRequest) -> History:
    """The conversation a Messages request carried, in normal form, with every departure."""
    from ._turns import History

    body = request.json if isinstance(request.json, dict) else {}
    reader = _HistoryReader(body)
    if not body:
        reader.problems.append("expected a JSON object body with messages, got none")
    else:
        reader.read()
    tools = body.get("tools")
    names = (
        tuple(str(t["name"]) for t in tools if isinstance(t, dict) and "name" in t)
        if isinstance(tools, list)
        else ()
    )
    return History(
        tuple(reader.messages),
        tuple(reader.problems),
        names,
        _choice(body.get("tool_choice")),
        body.get("stream") is True,
    )


def history_error(problems: Sequence[str]) -> JsonReply:
    """Anthropic's 400 ``invalid_request_error`` for a malformed history, quoting the first problem."""
    from ..provider.replies import JsonReply
    from ._script import first_problem

    rid = request_id()
    body = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": first_problem(problems)},
        "request_id": rid,
    }
    return JsonReply(body, status=400, headers=_headers(rid=rid))


# -- the wire ----------------------------------------------------------------------------------


class AnthropicWire(Wire):
    """Anthropic Messages, whole and streamed."""

    marks_tool_errors = True
    tool_error_marker = '"is_error": true'
    turn_reasoning = (
        Reasoning(
            ReasoningKind.THINKING.value,
            text="The user asks for the weather in Paris; get_weather answers that.",
            signature=signature("anthropic/history/signature"),
            provider="anthropic",
        ),
    )

    name = "anthropic"
    interleaves_calls = True
    provider = "anthropic"
    title = "Anthropic Messages"
    tool_call_id = TOOL_USE_ID
    generation_path = "/v1/messages"
    variants_table = VARIANTS
    terminal_event = "message_stop"
    argument_text_absent = {
        "chat": (
            "a whole Messages reply carries a tool_use block's input as a JSON object; broken "
            "argument text reaches a client only as input_json_delta fragments in a stream"
        ),
    }

    def aux_reply(self, request: RecordedRequest) -> Reply:
        from ..provider.replies import JsonReply

        # client.messages.count_tokens(): POST /v1/messages/count_tokens
        if request.method == "POST" and request.path.endswith("/v1/messages/count_tokens"):
            return JsonReply({"input_tokens": FX.usage.input_tokens}, headers=_headers())
        rid = request_id()
        return JsonReply(
            {
                "type": "error",
                "error": {
                    "type": "not_found_error",
                    "message": (
                        f"the {self.title} fake provider has no route for {request.method} "
                        f"{request.path}; POST /v1/messages is what is scripted"
                    ),
                },
                "request_id": rid,
            },
            status=404,
            headers=_headers(rid=rid),
        )

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        body = request.json if isinstance(request.json, dict) else {}
        model = str(body.get("model") or "conformance-model")
        variant = variant or self.variants(scenario, mode)[0].name
        if scenario in ERRORS:
            return error_reply(scenario, variant)
        if scenario == "stream-cut":
            return self._cut(model, variant, self.wants_stream(request))
        if not self.wants_stream(request):
            return self._whole(scenario, model)
        return self._stream(scenario, model, variant)

    def _cut(self, model: str, variant: str, stream: bool) -> Reply:
        """A turn cut short: its body before its end, or its stream before ``message_stop``."""
        import json

        from ..provider.replies import JsonReply

        in_call = variant in CUT_IN_CALL
        if not stream:
            if in_call:
                body = message(model, [tool_use_block(FX.tool_arguments)], "tool_use")
                return cut_short(JsonReply(body, headers=_headers()), next(iter(FX.tool_arguments)))
            body = message(model, [text_block(FX.text)], "end_turn")
            return cut_short(JsonReply(body, headers=_headers()), FX.text)
        out = _Events(model)
        out.message_start()
        if in_call:
            pieces = _pieces(json.dumps(dict(FX.tool_arguments), ensure_ascii=False), 4)
            out.content_block_start(tool_use_block({}))
            for number, piece in enumerate(["", *pieces]):
                delta = {"type": "input_json_delta", "partial_json": piece}
                out.emit("content_block_delta", index=out.index, delta=delta)
                if number == 1:
                    keep = len(out.events)  # the call's first real argument fragment is out
            out.content_block_stop()
            out.message_delta("tool_use")
        else:
            out.content_block_start(text_block(""))
            for piece in _pieces(FX.partial_text, 3):
                out.emit("content_block_delta", index=out.index, delta={"type": "text_delta", "text": piece})
            keep = len(out.events)
            rest = FX.text[len(FX.partial_text) :]
            out.emit("content_block_delta", index=out.index, delta={"type": "text_delta", "text": rest})
            out.content_block_stop()
            out.message_delta("end_turn")
        return out.reply(f"{self.name}/stream-cut/{variant}", cut=(keep, variant != "between-events"))

    def _whole(self, scenario: str, model: str) -> Optional[Reply]:
        from ..provider.replies import HangReply, JsonReply

        if scenario == "text":
            body = message(model, [text_block(FX.text)], "end_turn")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            stop = "tool_use" if scenario == "tool-call" else "end_turn"
            body = message(model, [tool_use_block(FX.tool_arguments)], stop)
        elif scenario == "truncated-tool-call":
            # Cut off inside the arguments: the block is there, its input is not to be trusted.
            content = [text_block(FX.preamble), tool_use_block({})]
            body = message(model, content, "max_tokens")
        elif scenario == "content-filter":
            body = message(model, [], "refusal")
        elif scenario in ("abort", "cancel"):
            return HangReply()
        elif scenario == "stream-error":
            # A whole reply cannot fail halfway: the provider fails the request instead.
            return error_reply("overloaded")
        else:
            return None
        return JsonReply(body, headers=_headers())

    def _stream(self, scenario: str, model: str, variant: str) -> Optional[Reply]:
        import json

        seed = f"{self.name}/{scenario}"
        out = _Events(model)
        out.message_start()
        if scenario == "text":
            out.text(FX.text)
            out.message_delta("end_turn", input_tokens=variant != "delta-output-only")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            out.tool_use(json.dumps(dict(FX.tool_arguments), ensure_ascii=False))
            out.message_delta("tool_use" if scenario == "tool-call" else "end_turn")
        elif scenario == "truncated-tool-call":
            out.text(FX.preamble, pieces=2)
            out.tool_use('{"city": "Par', pieces=2)
            out.message_delta("max_tokens")
        elif scenario == "content-filter":
            out.message_delta("refusal")
        elif scenario == "stream-error":
            out.text(FX.partial_text, pieces=3, stop=False)
            out.error("overloaded_error", OVERLOADED_MESSAGE)
        elif scenario in ("abort", "cancel"):
            out.text(FX.partial_text, pieces=2, stop=False)
            return out.reply(seed, hang=True)
        else:
            return None
        return out.reply(seed)

    # -- multi-turn ---------------------------------------------------------------------

    def turn_whole(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[Reply]:
        from ..provider.replies import JsonReply

        return JsonReply(turn_message(turn, _model(request)), headers=_headers())

    def turn_stream(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[TurnEvents]:
        return turn_events(turn, _model(request))

    def read_history(self, request: RecordedRequest) -> Optional[History]:
        return read_history(request)

    def history_error(self, problems: Sequence[str]) -> Reply:
        return history_error(problems)

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        problems, body = check_json_post(request, model, "/v1/messages")
        problems.extend(_check_headers(request.headers))
        if not body:
            return problems
        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            problems.append(f"expected max_tokens, a positive integer Anthropic requires, got {max_tokens!r}")
        problems.extend(_check_messages(body.get("messages")))
        problems.extend(_check_tools(body.get("tools")))
        return problems


def _model(request: RecordedRequest) -> str:
    body = request.json if isinstance(request.json, dict) else {}
    return str(body.get("model") or "conformance-model")


def _check_headers(headers: Mapping[str, str]) -> List[str]:
    problems: List[str] = []
    if not headers.get("anthropic-version"):
        problems.append("expected an anthropic-version header (any version, e.g. 2023-06-01), got none")
    bearer = headers.get("authorization", "").lower().startswith("bearer ")
    if not headers.get("x-api-key") and not bearer:
        problems.append(
            "expected an x-api-key header or Authorization: Bearer, got neither "
            f"(authorization={headers.get('authorization')!r})"
        )
    return problems


def _check_messages(messages: Any) -> List[str]:
    if not isinstance(messages, list) or not messages:
        return [f"expected messages to be a non-empty list, got {messages!r}"]
    problems: List[str] = []
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    if "system" in roles:
        problems.append(
            'expected the system prompt in the top-level "system" field, got a message with '
            'role "system" (Anthropic rejects it with a 400)'
        )
    problems.extend(check_question(messages, text_of))
    return problems


def _check_tools(tools: Any) -> List[str]:
    from ._schema import schema_difference

    if not isinstance(tools, list):
        return [f"expected tools to list get_weather, got {tools!r}"]
    named = [t for t in tools if isinstance(t, dict) and t.get("name") == FX.tool_name]
    if not named:
        names = [t.get("name") if isinstance(t, dict) else t for t in tools]
        return [
            f'expected a tool {{"name": "get_weather", "input_schema": {{...}}}}, got tool names {names!r}'
        ]
    schema = named[0].get("input_schema")
    difference = schema_difference(fixture_tool_schema(), schema)
    if difference:
        hint = " (Anthropic names it input_schema, not parameters)" if schema is None else f" ({difference})"
        return [f"expected get_weather input_schema {dict(fixture_tool_schema())!r}, got {schema!r}{hint}"]
    return []


anthropic_wire = AnthropicWire()
