"""The Cohere Chat v2 wire: its settings, and the reply to each scenario.

The replies are built from ``_replies`` and ``_variants``; the multi-turn hooks play
turns with ``_turns`` and read histories with ``_history``, each loaded when a case
first needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._base import Wire
from .._chunks import CUT_IN_CALL, cut_short, split_text
from ._replies import (
    TOOL_CALL_ID,
    TOOL_PLAN,
    Events,
    answer_headers,
    chat_response,
    response_headers,
    text_item,
    tool_call,
)
from ._replies import call_id as named_call_id
from ._variants import PLAN, STREAM_FAILURES, VARIANTS, error_reply

if TYPE_CHECKING:
    from ...provider.replies import RecordedRequest, Reply
    from .._script import History, ScriptedTurn, TurnEvents

__all__ = ["CohereWire", "cohere_wire"]

#: What the truncated-tool-call turn's call had written when the limit cut it.
TRUNCATED_ARGUMENTS = '{"city": "Par'


def _arguments(whole: bool) -> str:
    import json

    # A whole reply's arguments are compact; a stream's are spaced as the model writes them
    # (vercel/ai cohere-tool-call.json and cohere-tool-call.chunks.txt).
    separators = (",", ":") if whole else (", ", ": ")
    return json.dumps(dict(FX.tool_arguments), ensure_ascii=False, separators=separators)


class CohereWire(Wire):
    """Cohere Chat v2, whole and streamed."""

    name = "cohere"
    title = "Cohere Chat v2"
    provider = "cohere"
    tool_call_id = TOOL_CALL_ID
    generation_path = "/v2/chat"
    variants_table = VARIANTS
    terminal_event = "message-end"
    interleaves_calls = True
    # No capture of a Cohere 429's headers shows a delay, and its docs name none.
    rate_limit_retry_after = None
    turn_reasoning = (PLAN,)
    unsupported = {
        "content-filter": (
            "Cohere has no content filter stop: its finish reasons are COMPLETE, STOP_SEQUENCE, "
            "MAX_TOKENS, TOOL_CALL, ERROR and TIMEOUT, as ChatFinishReason in its OpenAPI spec lists them; "
            "its safety modes shape "
            "the answer instead of stopping it"
        ),
        "tool-call-with-stop": (
            "Cohere ends every turn that calls tools with finish_reason TOOL_CALL (every capture: "
            "langchain-ai/langchain-cohere cassettes, vercel/ai fixtures); none says COMPLETE beside a call"
        ),
    }
    #: A Cohere tool turn says what it will do in its tool_plan, its reasoning, not in its
    #: content: the turn cut off by the limit has no text to return.
    texts = {**Wire.texts, "truncated-tool-call": ""}

    def scripted_call_id(self, name: str, seed: str) -> str:
        """The tool's own name, ``_``, twelve lower-case letters and digits: ``echo_json_y46ar19t5gvw``."""
        return named_call_id(name, seed)

    def aux_reply(self, request: RecordedRequest) -> Reply:
        from ...provider.replies import JsonReply

        message = (
            f"the {self.title} fake provider has no route for {request.method} {request.path}; "
            "POST /v2/chat is what is scripted"
        )
        return JsonReply({"message": message}, status=404, headers=response_headers())

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        if scenario in self.unsupported:
            return None
        variant = variant or self.variants(scenario, mode)[0].name
        stream = self.wants_stream(request)
        if scenario == "stream-error" and stream:
            return self._stream_error(variant)
        if scenario == "stream-error":
            # A whole reply cannot fail halfway: the provider fails the request instead.
            return error_reply("server-error")
        if scenario in ("rate-limit", "quota", "auth", "overloaded", "server-error", "context-overflow"):
            return error_reply(scenario, variant)
        if scenario == "stream-cut":
            return self._cut(variant, stream)
        if not stream:
            return self._whole(scenario, variant)
        return self._stream(scenario, variant)

    def _whole(self, scenario: str, variant: str) -> Optional[Reply]:
        from ...provider.replies import HangReply, JsonReply

        if scenario == "text":
            body = chat_response(
                {"content": [text_item(FX.text)]}, "COMPLETE", cached=variant != "billed-and-tokens"
            )
        elif scenario == "tool-call":
            calls = [tool_call(TOOL_CALL_ID, FX.tool_name, _arguments(whole=True))]
            body = chat_response({"tool_plan": TOOL_PLAN, "tool_calls": calls}, "TOOL_CALL")
        elif scenario == "truncated-tool-call":
            # Cut off inside the arguments: the call is there, its arguments are not to be trusted.
            calls = [tool_call(TOOL_CALL_ID, FX.tool_name, TRUNCATED_ARGUMENTS)]
            body = chat_response({"tool_plan": FX.preamble, "tool_calls": calls}, "MAX_TOKENS")
        elif scenario in ("abort", "cancel"):
            return HangReply()
        else:
            return None
        return JsonReply(body, headers=answer_headers())

    def _stream(self, scenario: str, variant: str) -> Optional[Reply]:
        seed = f"{self.name}/{scenario}"
        out = Events()
        out.message_start()
        if scenario == "text":
            out.content(FX.text)
            out.message_end("COMPLETE", cached=variant != "billed-and-tokens")
        elif scenario == "tool-call":
            out.tool_plan(TOOL_PLAN)
            out.tool_call(TOOL_CALL_ID, FX.tool_name, split_text(_arguments(whole=False), 4))
            out.message_end("TOOL_CALL")
        elif scenario == "truncated-tool-call":
            out.tool_plan(FX.preamble, pieces=2)
            out.tool_call(TOOL_CALL_ID, FX.tool_name, split_text(TRUNCATED_ARGUMENTS, 2), end=False)
            out.message_end("MAX_TOKENS")
        elif scenario in ("abort", "cancel"):
            out.content(FX.partial_text, pieces=2, end=False)
            return out.reply(seed, hang=True)
        else:
            return None
        return out.reply(seed)

    def _stream_error(self, variant: str) -> Reply:
        finish_reason, error = STREAM_FAILURES[variant]
        out = Events()
        out.message_start()
        out.content(FX.partial_text, pieces=3, end=False)
        out.message_end(finish_reason, error=error)
        return out.reply(f"{self.name}/stream-error/{variant}")

    def _cut(self, variant: str, stream: bool) -> Reply:
        """A turn cut short: its body before its end, or its stream before ``message-end``."""
        from ...provider.replies import JsonReply

        in_call = variant in CUT_IN_CALL
        if not stream:
            if in_call:
                calls = [tool_call(TOOL_CALL_ID, FX.tool_name, _arguments(whole=True))]
                body = chat_response({"tool_plan": TOOL_PLAN, "tool_calls": calls}, "TOOL_CALL")
                return cut_short(JsonReply(body, headers=answer_headers()), next(iter(FX.tool_arguments)))
            body = chat_response({"content": [text_item(FX.text)]}, "COMPLETE")
            return cut_short(JsonReply(body, headers=answer_headers()), FX.text)
        out = Events()
        out.message_start()
        if in_call:
            out.tool_plan(TOOL_PLAN)
            start = len(out.events)
            out.tool_call(TOOL_CALL_ID, FX.tool_name, split_text(_arguments(whole=False), 4))
            keep = start + 2  # the call's tool-call-start and its first fragment are out
            out.message_end("TOOL_CALL")
        else:
            out.content_start()
            for piece in split_text(FX.partial_text, 3):
                out.content_delta(piece)
            keep = len(out.events)
            out.content_delta(FX.text[len(FX.partial_text) :])
            out.content_end()
            out.message_end("COMPLETE")
        return out.reply(f"{self.name}/stream-cut/{variant}", cut=(keep, variant != "between-events"))

    # -- multi-turn ---------------------------------------------------------------------

    def turn_whole(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[Reply]:
        from ._turns import turn_response

        return turn_response(turn)

    def turn_stream(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[TurnEvents]:
        from ._turns import turn_events

        return turn_events(turn)

    def read_history(self, request: RecordedRequest) -> Optional[History]:
        from ._history import read_history

        return read_history(request)

    def history_error(self, problems: Sequence[str]) -> Reply:
        from ._history import history_error

        return history_error(problems)

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        from ._request import check_request

        return check_request(request, model)


cohere_wire = CohereWire()
