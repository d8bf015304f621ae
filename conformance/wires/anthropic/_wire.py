"""The Anthropic Messages wire: its settings, and the reply to each scenario.

The replies are built from ``_replies`` and ``_variants``; the multi-turn hooks play
turns with ``_turns`` and read histories with ``_history``, each loaded when a case
first needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from ...contract import Reasoning, ReasoningKind, Usage
from ...fixture import CONFORMANCE_FIXTURE as FX
from .._base import Wire
from .._chunks import CUT_IN_CALL, cut_short, split_text
from .._ids import signature
from .._variants import AFTER_FINISH, reasoning_then_call
from ._replies import (
    INFERENCE_GEO_NOT_AVAILABLE,
    MESSAGE_ID,
    OVERLOADED_MESSAGE,
    REFUSAL_OUTPUT_TOKENS,
    TOOL_USE_ID,
    Events,
    message,
    ratelimit_headers,
    refusal_stop_details,
    refusal_usage,
    request_id,
    response_headers,
    text_block,
    tool_use_block,
    tool_use_id,
)
from ._variants import ERRORS, REFUSED_TEXT, SONNET_4_5_STREAM, VARIANTS, error_reply

if TYPE_CHECKING:
    from ...provider.replies import JsonReply, RecordedRequest, Reply
    from .._script import History, ScriptedTurn, TurnEvents

__all__ = ["AnthropicWire", "anthropic_wire"]

#: The ``type`` prefixes of the tools Anthropic runs on its own side, in its own sampling
#: loop, which may pause a turn (https://docs.claude.com/en/docs/agents-and-tools/tool-use/
#: server-tools: web search, web fetch, code execution).
SERVER_TOOL_TYPES = ("web_search_", "web_fetch_", "code_execution_")


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
    # With thinking on, Claude thinks before a tool call, and refuses the tool_use sent back
    # without that thinking block first.
    reasoning_tool_turns = (
        reasoning_then_call(
            "a thinking block and its signature, then a tool_use block, stop_reason tool_use",
            "https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#extended-thinking-with-"
            "tool-use (and #preserving-thinking-blocks: the thinking blocks go back with the tool_use)",
            turn_reasoning,
        ),
    )

    #: Anthropic's keep-alive event: "Event streams may also include any number of ping
    #: events" (https://docs.anthropic.com/en/docs/build-with-claude/streaming#event-types),
    #: written with the space the real streams carry.
    keepalive = b'event: ping\ndata: {"type": "ping"}\n\n'
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

    def scripted_call_id(self, name: str, seed: str) -> str:
        """``toolu_01`` and 22 base-62 characters, as Anthropic names a ``tool_use`` block."""
        return tool_use_id(seed)

    def aux_reply(self, request: RecordedRequest) -> Reply:
        from ...provider.replies import JsonReply

        # client.messages.count_tokens(): POST /v1/messages/count_tokens
        if request.method == "POST" and request.path.endswith("/v1/messages/count_tokens"):
            return JsonReply({"input_tokens": FX.usage.input_tokens}, headers=response_headers())
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
            headers=response_headers(rid=rid),
        )

    def request_asks(self, condition: str, request: RecordedRequest) -> bool:
        """A server tool is a tool whose ``type`` names one (``web_search_20250305``); fine-grained
        tool streaming is ``eager_input_streaming`` on a tool, or its beta in the
        ``anthropic-beta`` header or (Bedrock) the body's ``anthropic_beta``; thinking is the
        body's ``thinking`` with type ``enabled`` or ``adaptive``."""
        body = request.json if isinstance(request.json, dict) else {}
        tools = [t for t in body.get("tools") or () if isinstance(t, dict)]
        if condition == "server-tool":
            return any(str(t.get("type") or "").startswith(SERVER_TOOL_TYPES) for t in tools)
        if condition == "fine-grained-tool-streaming":
            betas = [request.headers.get("anthropic-beta", "")]
            listed = body.get("anthropic_beta")
            betas += [str(b) for b in listed] if isinstance(listed, list) else []
            return any(t.get("eager_input_streaming") is True for t in tools) or any(
                "fine-grained-tool-streaming" in b for b in betas
            )
        if condition == "thinking":
            thinking = body.get("thinking")
            return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
        return True

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        model = self.model_of(request)
        variant = variant or self.variants(scenario, mode)[0].name
        if scenario in ERRORS:
            return error_reply(scenario, variant)
        if scenario == "stream-cut":
            return self._cut(model, variant, self.wants_stream(request))
        if not self.wants_stream(request):
            return self._whole(scenario, model, variant)
        return self._stream(scenario, model, variant)

    # -- what a host of the Messages API changes ----------------------------------------

    def events(self, model: str, message_id: str = MESSAGE_ID, variant: str = "") -> Events:
        """The builder of one streamed message (in ``variant``): Anthropic's SSE events, by default.

        ``delta-input-tokens`` is played as its capture shows it, claude-sonnet-4-5's stream of
        2026-03: ``inference_geo: "not_available"`` and no ``stop_details`` at all; ``pause-turn``
        as claude-sonnet-4-5's of 2026-07, ``not_available`` with ``stop_details: null``.
        """
        events = Events(model, message_id)
        if variant in (SONNET_4_5_STREAM, "pause-turn"):
            # Both captures are claude-sonnet-4-5's; the pause's (2026-07) says stop_details.
            events.inference_geo = INFERENCE_GEO_NOT_AVAILABLE
            events.null_stop_details = variant != SONNET_4_5_STREAM
        return events

    def reported_usage(self, scenario: str, variant: str) -> Usage:
        # A refusal counts the tokens of the text it stopped after, not the whole answer's.
        if scenario == "content-filter":
            u = FX.usage
            return Usage(u.input_tokens, REFUSAL_OUTPUT_TOKENS, u.input_tokens + REFUSAL_OUTPUT_TOKENS)
        return super().reported_usage(scenario, variant)

    def whole_reply(self, body: Dict[str, Any]) -> JsonReply:
        """A whole ``message`` as the response that carries it."""
        from ...provider.replies import JsonReply

        return JsonReply(body, headers=response_headers(ratelimit_headers()))

    def _cut(self, model: str, variant: str, stream: bool) -> Reply:
        """A turn cut short: its body before its end, or its stream before ``message_stop``."""
        import json

        in_call = variant in CUT_IN_CALL
        if not stream:
            if in_call:
                body = message(model, [tool_use_block(FX.tool_arguments)], "tool_use")
                return cut_short(self.whole_reply(body), next(iter(FX.tool_arguments)))
            body = message(model, [text_block(FX.text)], "end_turn")
            return cut_short(self.whole_reply(body), FX.text)
        out = self.events(model, variant=variant)
        out.message_start()
        if variant == AFTER_FINISH:
            # The whole call and message_delta's stop_reason, then nothing: no message_stop.
            out.tool_use(json.dumps(dict(FX.tool_arguments), ensure_ascii=False))
            out.message_delta("tool_use")
            return out.reply(f"{self.name}/stream-cut/{variant}", cut=(len(out.events) - 1, False))
        if in_call:
            pieces = split_text(json.dumps(dict(FX.tool_arguments), ensure_ascii=False), 4)
            out.content_block_start(tool_use_block({}, out.tool_use_id))
            for number, piece in enumerate(["", *pieces]):
                delta = {"type": "input_json_delta", "partial_json": piece}
                out.emit("content_block_delta", index=out.index, delta=delta)
                if number == 1:
                    keep = len(out.events)  # the call's first real argument fragment is out
            out.content_block_stop()
            out.message_delta("tool_use")
        else:
            out.content_block_start(text_block(""))
            for piece in split_text(FX.partial_text, 3):
                out.emit("content_block_delta", index=out.index, delta={"type": "text_delta", "text": piece})
            keep = len(out.events)
            rest = FX.text[len(FX.partial_text) :]
            out.emit("content_block_delta", index=out.index, delta={"type": "text_delta", "text": rest})
            out.content_block_stop()
            out.message_delta("end_turn")
        return out.reply(f"{self.name}/stream-cut/{variant}", cut=(keep, variant != "between-events"))

    def _whole(self, scenario: str, model: str, variant: str = "") -> Optional[Reply]:
        from ...provider.replies import HangReply

        if scenario == "text" and variant == "pause-turn":
            from ._pause import pause_turn_message

            body = pause_turn_message(model)
        elif scenario == "text":
            body = message(model, [text_block(FX.text)], "end_turn")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            stop = "tool_use" if scenario == "tool-call" else "end_turn"
            body = message(model, [tool_use_block(FX.tool_arguments)], stop)
        elif scenario == "truncated-tool-call":
            # Cut off inside the arguments: the block is there, its input is not to be trusted.
            content = [text_block(FX.preamble), tool_use_block({})]
            body = message(model, content, "max_tokens")
        elif scenario == "content-filter":
            named = variant != "uncategorized"
            content = [text_block(REFUSED_TEXT)]
            details = refusal_stop_details(named)
            body = message(model, content, "refusal", usage=refusal_usage(), stop_details=details)
        elif scenario in ("abort", "cancel"):
            return HangReply()
        elif scenario == "stream-error":
            # A whole reply cannot fail halfway: the provider fails the request instead.
            return error_reply("overloaded")
        else:
            return None
        return self.whole_reply(body)

    def _stream(self, scenario: str, model: str, variant: str) -> Optional[Reply]:
        import json

        seed = f"{self.name}/{scenario}"
        out = self.events(model, variant=variant)
        out.message_start()
        if scenario == "text" and variant == "pause-turn":
            from ._pause import pause_turn_events

            pause_turn_events(out)
        elif scenario == "text":
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
            out.text(REFUSED_TEXT, pieces=2)
            out.output_tokens = REFUSAL_OUTPUT_TOKENS
            out.message_delta("refusal", stop_details=refusal_stop_details(variant != "uncategorized"))
        elif scenario == "stream-error":
            out.text(FX.partial_text, pieces=3, stop=False)
            out.api_error("overloaded_error", OVERLOADED_MESSAGE)
        elif scenario in ("abort", "cancel"):
            out.text(FX.partial_text, pieces=2, stop=False)
            return out.reply(seed, hang=True)
        else:
            return None
        return out.reply(seed)

    # -- multi-turn ---------------------------------------------------------------------

    def turn_whole(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[Reply]:
        from ._turns import turn_message

        return self.whole_reply(turn_message(turn, self.model_of(request)))

    def turn_stream(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[TurnEvents]:
        from ._turns import turn_events, turn_message_id

        model = self.model_of(request)
        return turn_events(turn, model, self.events(model, turn_message_id(turn)))

    def read_history(self, request: RecordedRequest) -> Optional[History]:
        from ._history import read_history

        return read_history(request)

    def history_error(self, problems: Sequence[str]) -> Reply:
        from ._history import history_error

        return history_error(problems)

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        from ._request import check_request

        return check_request(request, model)

    def model_of(self, request: RecordedRequest) -> str:
        """The model a request names: the body's ``model`` (a host names it in the path)."""
        body = request.json if isinstance(request.json, dict) else {}
        return str(body.get("model") or "conformance-model")


anthropic_wire = AnthropicWire()
