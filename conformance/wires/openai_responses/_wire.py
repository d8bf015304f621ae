"""The OpenAI Responses wire: its settings, and the reply to each scenario.

The replies are built from ``_replies`` and ``_variants``; the multi-turn hooks play
turns with ``_turns`` and read histories with ``_history``, and the request checks
are ``_request``'s, each loaded when a case first needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from ...contract import Reasoning, ReasoningKind
from ...fixture import CONFORMANCE_FIXTURE as FX
from .._base import Wire
from .._chunks import CUT_IN_CALL, cut_short
from .._ids import provider_id, signature
from .._variants import reasoning_then_call
from ._replies import (
    CALL_ID,
    REFUSAL,
    RESPONSE_ID,
    TRUNCATED_ARGUMENTS,
    Events,
    fixture_arguments,
    function_call,
    message,
    output_text,
    refusal,
    response,
    response_headers,
)
from ._variants import (
    CONTEXT_MESSAGE,
    ERRORS,
    SERVER_ERROR_MESSAGE,
    SERVERS_OVERLOADED,
    VARIANTS,
    error_reply,
)

if TYPE_CHECKING:
    from ...provider.replies import JsonReply, RecordedRequest, Reply
    from .._script import History, ScriptedTurn, TurnEvents

__all__ = ["OpenAIResponsesWire", "openai_responses_wire"]


class OpenAIResponsesWire(Wire):
    """OpenAI Responses, whole and streamed."""

    turn_reasoning = (
        Reasoning(
            ReasoningKind.REASONING_ITEM.value,
            id=provider_id("rs_", "openai-responses/history/reasoning", 48, "0123456789abcdef"),
            summary=("The user wants the Paris weather; get_weather gives it.",),
            data=signature("openai-responses/history/encrypted", 180),
            provider="openai",
        ),
    )
    # A reasoning model's function call comes after its reasoning item, which goes back
    # with the function_call output on the next turn.
    reasoning_tool_turns = (
        reasoning_then_call(
            "a reasoning item (its summary and encrypted_content), then a function_call item",
            "https://platform.openai.com/docs/guides/reasoning#keeping-reasoning-items-in-context "
            "(function calling: pass the reasoning items back with the function_call_output); "
            "https://platform.openai.com/docs/guides/function-calling",
            turn_reasoning,
            asks="",
        ),
    )

    name = "openai-responses"
    interleaves_calls = True
    provider = "openai"
    title = "OpenAI Responses"
    tool_call_id = CALL_ID
    generation_path = "/responses"
    variants_table = VARIANTS
    terminal_event = "response.completed"
    #: api.openai.com's 429 carries no retry-after (openai/openai-node#1477).
    rate_limit_retry_after: Optional[float] = None

    # -- the shape of a reply: hooks a wire in front of the same API (Azure's) replaces --

    def events(self, model: str, response_id: str = RESPONSE_ID, tools: Optional[List[Any]] = None) -> Events:
        """A new stream of ``response.*`` events."""
        return Events(model, response_id, tools)

    def response_reply(self, body: Dict[str, Any]) -> JsonReply:
        """A whole ``response`` object as the reply carrying it."""
        from ...provider.replies import JsonReply

        return JsonReply(body, headers=response_headers())

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        body = request.json if isinstance(request.json, dict) else {}
        model = str(body.get("model") or "conformance-model")
        stream = self.wants_stream(request)
        variant = variant or self.variants(scenario, mode)[0].name
        if scenario == "quota" and stream and variant == "in-stream":
            # A streamed request past its quota is accepted with a 200 and fails in-stream.
            out = self.events(model)
            out.created()
            quota = ERRORS["quota"]
            out.error(quota[1], quota[2], quota[4])
            return out.reply(f"{self.name}/{scenario}/{variant}")
        if scenario == "context-overflow" and stream:
            # A streamed request over the window is accepted with a 200 and fails in-stream.
            out = self.events(model)
            out.created()
            out.error("invalid_request_error", "context_length_exceeded", CONTEXT_MESSAGE, "input")
            return out.reply(f"{self.name}/{scenario}")
        if scenario in ERRORS:
            return error_reply(scenario, variant)
        if scenario == "stream-cut":
            return self._cut(model, variant, stream)
        if not stream:
            return self._whole(scenario, model)
        return self._stream(scenario, model, variant)

    def _cut(self, model: str, variant: str, stream: bool) -> Reply:
        """A turn cut short: its body before its end, or its stream before ``response.completed``."""
        in_call = variant in CUT_IN_CALL
        if not stream:
            output = [function_call(fixture_arguments())] if in_call else [message([output_text(FX.text)])]
            whole = self.response_reply(response(model, "completed", output))
            return cut_short(whole, next(iter(FX.tool_arguments)) if in_call else FX.text)
        out = self.events(model)
        out.created()
        keep = out.cut_turn(in_call)
        return out.reply(f"{self.name}/stream-cut/{variant}", cut=(keep, variant != "between-events"))

    def _whole(self, scenario: str, model: str) -> Optional[Reply]:
        from ...provider.replies import HangReply

        if scenario == "text":
            body = response(model, "completed", [message([output_text(FX.text)])])
        elif scenario in ("tool-call", "tool-call-with-stop"):
            # Responses has no finish reason: a tool turn is "completed" like any other.
            body = response(model, "completed", [function_call(fixture_arguments())])
        elif scenario == "truncated-tool-call":
            output = [
                message([output_text(FX.preamble)]),
                function_call(TRUNCATED_ARGUMENTS, "incomplete"),
            ]
            body = response(model, "incomplete", output, incomplete_reason="max_output_tokens")
        elif scenario == "content-filter":
            output = [message([refusal(REFUSAL)], "incomplete")]
            body = response(model, "incomplete", output, incomplete_reason="content_filter")
        elif scenario in ("abort", "cancel"):
            return HangReply()
        elif scenario == "stream-error":
            # A whole reply cannot fail halfway: the provider fails the request instead.
            return error_reply("overloaded")
        else:
            return None
        return self.response_reply(body)

    def _stream(self, scenario: str, model: str, variant: str) -> Optional[Reply]:
        seed = f"{self.name}/{scenario}"
        out = self.events(model)
        out.created()
        if scenario == "text":
            out.message(FX.text)
            out.completed()
        elif scenario in ("tool-call", "tool-call-with-stop"):
            out.function_call(fixture_arguments())
            out.completed()
        elif scenario == "truncated-tool-call":
            out.message(FX.preamble, pieces=2)
            out.function_call(TRUNCATED_ARGUMENTS, "incomplete", pieces=2)
            out.incomplete("max_output_tokens")
        elif scenario == "content-filter":
            out.message(REFUSAL, pieces=2, kind="refusal")
            out.incomplete("content_filter")
        elif scenario == "stream-error":
            out.message(FX.partial_text, pieces=3, done=False)
            if variant == "server-error":
                out.error("server_error", "server_error", SERVER_ERROR_MESSAGE)
            else:
                out.error("service_unavailable_error", "server_is_overloaded", SERVERS_OVERLOADED)
        elif scenario in ("abort", "cancel"):
            out.message(FX.partial_text, pieces=2, done=False)
            return out.reply(seed, hang=True)
        else:
            return None
        return out.reply(seed)

    # -- multi-turn --------------------------------------------------------------------

    def turn_whole(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[Reply]:
        from ._turns import turn_response

        return turn_response(self, turn, request)

    def turn_stream(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[TurnEvents]:
        from ._turns import turn_events

        return turn_events(self, turn, request)

    def read_history(self, request: RecordedRequest) -> Optional[History]:
        from ._history import read_history

        return read_history(request)

    def history_error(self, problems: Sequence[str]) -> Reply:
        from ._history import history_error

        return history_error(problems)

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        from ._request import check_request

        return check_request(request, model)


openai_responses_wire = OpenAIResponsesWire()
