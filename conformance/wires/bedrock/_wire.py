"""The Bedrock Converse wire: its settings, its routes, and the reply to each scenario.

The replies are built from ``_replies`` and ``_variants``; the multi-turn hooks play
turns with ``_turns`` and read histories with ``_history``, and the request checks
are ``_request``'s, each loaded when a case first needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence

from ...contract import Reasoning, ReasoningKind
from ...fixture import CONFORMANCE_FIXTURE as FX
from .._base import Wire
from .._chunks import CUT_IN_CALL, cut_short
from .._ids import signature
from .._variants import AFTER_FINISH, reasoning_then_call
from ._replies import (
    CORRUPT_FRAME,
    GUARDRAIL_MESSAGE,
    TOOL_USE_ID,
    TRUNCATED_INPUT,
    Events,
    converse_response,
    corrupt,
    input_json,
    response_headers,
    tool_use,
    tool_use_id,
)
from ._request import match_route
from ._variants import ERROR_NAMESPACE, ERRORS, STREAM_OVERLOADED, STREAM_THROTTLED, VARIANTS, error_reply

if TYPE_CHECKING:
    from ...provider.replies import RecordedRequest, Reply
    from .._script import History, ScriptedTurn, TurnEvents

__all__ = ["BedrockConverseWire", "bedrock_converse_wire"]


class BedrockConverseWire(Wire):
    """Amazon Bedrock Converse and ConverseStream, whole and as an AWS event stream."""

    marks_tool_errors = True
    tool_error_marker = '"status": "error"'
    turn_reasoning = (
        Reasoning(
            ReasoningKind.THINKING.value,
            text="The user asks for the weather in Paris; get_weather answers that.",
            signature=signature("bedrock/history/signature"),
            provider="bedrock",
        ),
    )
    # Claude on Converse with thinking on: a reasoningContent block before the toolUse,
    # which must go back with the toolUse on the next turn.
    reasoning_tool_turns = (
        reasoning_then_call(
            "a reasoningContent block (reasoningText and its signature), then a toolUse block, "
            "stopReason tool_use",
            "https://docs.aws.amazon.com/bedrock/latest/userguide/claude-messages-extended-thinking.html"
            "#claude-messages-extended-thinking-tool-use; https://docs.aws.amazon.com/bedrock/latest/"
            "APIReference/API_runtime_ReasoningContentBlock.html",
            turn_reasoning,
            asks="",
        ),
    )

    name = "bedrock-converse"
    interleaves_calls = True
    provider = "bedrock"
    title = "Amazon Bedrock Converse"
    tool_call_id = TOOL_USE_ID
    optional_scenarios = frozenset({CORRUPT_FRAME})
    argument_text_absent = {
        "chat": (
            "a whole Converse reply carries a toolUse block's input as a JSON document; broken "
            "argument text reaches a client only as toolUse input fragments in a stream"
        ),
    }
    #: Bedrock's ThrottlingException carries no retry delay (no ``retry-after``
    #: header, nothing in the body), so a backend must report ``retry_after`` as ``None``.
    rate_limit_retry_after: Optional[float] = None
    variants_table = VARIANTS
    terminal_event = "messageStop and metadata"

    def is_generation(self, request: RecordedRequest) -> bool:
        return request.method == "POST" and match_route(request.path) is not None

    def wants_stream(self, request: RecordedRequest) -> bool:
        route = match_route(request.path)
        return route is not None and route.group("operation") == "converse-stream"

    def scripted_call_id(self, name: str, seed: str) -> str:
        """``tooluse_`` and 22 URL-safe base64 characters, as Bedrock names a ``toolUse``."""
        return tool_use_id(seed)

    def aux_reply(self, request: RecordedRequest) -> Reply:
        from ...provider.replies import JsonReply

        message = (
            f"the {self.title} fake provider has no route for {request.method} {request.path}; "
            "only Converse and ConverseStream are scripted"
        )
        headers = response_headers({"x-amzn-ErrorType": f"UnknownOperationException:{ERROR_NAMESPACE}"})
        return JsonReply({"message": message}, status=404, headers=headers)

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        variant = variant or self.variants(scenario, mode)[0].name
        if scenario in ERRORS:
            return error_reply(scenario)
        if scenario == "stream-cut":
            return self._cut(variant, self.wants_stream(request))
        if not self.wants_stream(request):
            return self._whole(scenario)
        return self._stream(scenario, variant)

    def _cut(self, variant: str, stream: bool) -> Reply:
        """A turn cut short: its body before its end, or its stream before ``messageStop``."""
        from ...provider.replies import JsonReply

        in_call = variant in CUT_IN_CALL
        if not stream:
            if in_call:
                body = converse_response([tool_use(dict(FX.tool_arguments))], "tool_use")
            else:
                body = converse_response([{"text": FX.text}], "end_turn")
            whole = JsonReply(body, headers=response_headers())
            return cut_short(whole, next(iter(FX.tool_arguments)) if in_call else FX.text)
        out = Events()
        out.message_start()
        if variant == AFTER_FINISH:
            # The whole call and messageStop's stopReason, then nothing: no metadata.
            out.tool_use_block(input_json())
            out.message_stop("tool_use")
            return out.reply(f"{self.name}/stream-cut/{variant}", cut=(len(out.events), False))
        if in_call:
            out.tool_use_block(input_json())
            keep = 4  # messageStart, contentBlockStart, the empty fragment, the first real one
            out.finish("tool_use")
        else:
            out.text_block(FX.partial_text, pieces=3, stop=False)
            keep = len(out.events)
            rest = FX.text[len(FX.partial_text) :]
            out.event("contentBlockDelta", {"contentBlockIndex": out.block, "delta": {"text": rest}})
            out.content_block_stop()
            out.finish("end_turn")
        return out.reply(f"{self.name}/stream-cut/{variant}", cut=(keep, variant != "between-events"))

    def _whole(self, scenario: str) -> Optional[Reply]:
        from ...provider.replies import HangReply, JsonReply

        if scenario == "text":
            body = converse_response([{"text": FX.text}], "end_turn")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            stop = "tool_use" if scenario == "tool-call" else "end_turn"
            body = converse_response([tool_use(dict(FX.tool_arguments))], stop)
        elif scenario == "truncated-tool-call":
            # Converse's input is a JSON document, so a cut-off call arrives as what the
            # cut left parseable: only stopReason max_tokens tells it is not a call.
            body = converse_response([{"text": FX.preamble}, tool_use({"city": "Par"})], "max_tokens")
        elif scenario == "content-filter":
            # A guardrail answers with its blocked message as the text.
            body = converse_response([{"text": GUARDRAIL_MESSAGE}], "guardrail_intervened")
        elif scenario in ("abort", "cancel"):
            return HangReply()
        elif scenario == "stream-error":
            # A whole reply cannot fail halfway: the provider fails the request instead.
            return error_reply("overloaded")
        else:
            return None
        return JsonReply(body, headers=response_headers())

    def _stream(self, scenario: str, variant: str) -> Optional[Reply]:
        seed = f"{self.name}/{scenario}"
        out = Events()
        out.message_start()
        if scenario == "text":
            out.text_block(FX.text)
            out.finish("end_turn")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            out.tool_use_block(input_json())
            out.finish("tool_use" if scenario == "tool-call" else "end_turn")
        elif scenario == "truncated-tool-call":
            out.text_block(FX.preamble, pieces=2)
            out.tool_use_block(TRUNCATED_INPUT, pieces=2)
            out.finish("max_tokens")
        elif scenario == "content-filter" and variant == "content-filtered":
            out.finish("content_filtered")
        elif scenario == "content-filter":
            # A guardrail streams its blocked message as a normal text block, then says so.
            out.text_block(GUARDRAIL_MESSAGE, pieces=1)
            out.finish("guardrail_intervened", trace=True)
        elif scenario == "stream-error":
            out.text_block(FX.partial_text, pieces=3, stop=False)
            out.exception(*(STREAM_THROTTLED if variant == "throttling" else STREAM_OVERLOADED))
        elif scenario in ("abort", "cancel"):
            out.text_block(FX.partial_text, pieces=2, stop=False)
            return out.reply(seed, hang=True)
        elif scenario == CORRUPT_FRAME:
            out.text_block(FX.partial_text, pieces=2, stop=False)
            out.events[-1] = corrupt(out.events[-1])
            out.content_block_stop()
            out.finish("end_turn")
        else:
            return None
        return out.reply(seed)

    # -- multi-turn ---------------------------------------------------------------------

    def turn_whole(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[Reply]:
        from ...provider.replies import JsonReply
        from ._turns import turn_response

        return JsonReply(turn_response(turn), headers=response_headers())

    def turn_stream(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[TurnEvents]:
        from ._turns import turn_events

        return turn_events(turn)

    def read_history(self, request: RecordedRequest) -> Optional[History]:
        from ._history import read_history

        return read_history(request, self.wants_stream(request))

    def history_error(self, problems: Sequence[str]) -> Reply:
        from ._history import history_error

        return history_error(problems)

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        from ._request import check_request

        return check_request(request, model)


bedrock_converse_wire = BedrockConverseWire()
