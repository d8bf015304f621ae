"""The Gemini API wire: its settings, its routes, and the reply to each scenario.

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
from ._replies import (
    Events,
    candidate,
    function_call_part,
    generate_content_response,
    pretty_json,
    prompt_blocked,
    response_headers,
    text_part,
)
from ._request import GENERATE_PATH, MODEL_PATH
from ._variants import (
    ERRORS,
    OVERLOADED_MESSAGE,
    QUOTA_RETRY_DELAY,
    REASONING_VARIANTS,
    VARIANTS,
    error_reply,
    retry_delay,
)

if TYPE_CHECKING:
    from ...provider.replies import RecordedRequest, Reply
    from .._script import History, ScriptedTurn, TurnEvents

__all__ = ["GeminiWire", "gemini_wire"]


class GeminiWire(Wire):
    """The Gemini API (generativelanguage.googleapis.com), whole and streamed."""

    name = "gemini"
    provider = "gemini"
    title = "Gemini API"
    # tool-call sends the functionCall with a thoughtSignature, with an id or without
    # (Gemini 3); tool-call-with-stop sends neither (Gemini 2.x): the backend keeps the id
    # where there is one and makes one up otherwise.
    tool_call_id = None
    variants_table = {**VARIANTS, "reasoning": REASONING_VARIANTS}
    terminal_event = "a candidate with finishReason"
    argument_text_absent = dict.fromkeys(
        ("chat", "stream"),
        "Gemini answers a call it cannot write as a JSON object with finishReason "
        "MALFORMED_FUNCTION_CALL and no functionCall part",
    )
    marks_tool_errors = True
    tool_error_marker = '"response": {"error": ...}'
    call_reasoning = (
        Reasoning(
            ReasoningKind.THOUGHT_SIGNATURE.value,
            signature=signature("gemini/history/signature"),
            provider="gemini",
        ),
    )

    def is_generation(self, request: RecordedRequest) -> bool:
        return request.method == "POST" and GENERATE_PATH.search(request.path) is not None

    def retry_after_for(self, scenario: str) -> Optional[float]:
        # An exhausted daily quota names the time until the day resets in its RetryInfo.
        return QUOTA_RETRY_DELAY if scenario == "quota" else super().retry_after_for(scenario)

    def retry_after_sent(self, reply: Reply) -> Optional[float]:
        """``RetryInfo.retryDelay`` in an error body, then the retry-after headers."""
        encoded = getattr(reply, "encoded", None)
        if getattr(reply, "status", 200) >= 400 and callable(encoded):
            found = retry_delay(encoded())
            if found is not None:
                return found
        return super().retry_after_sent(reply)

    def wants_stream(self, request: RecordedRequest) -> bool:
        return request.path.endswith(":streamGenerateContent")

    def aux_reply(self, request: RecordedRequest) -> Reply:
        from ...provider.replies import JsonReply

        found = MODEL_PATH.search(request.path)
        if found and request.path.endswith(":countTokens") and request.method == "POST":
            # models.count_tokens
            return JsonReply(
                {
                    "totalTokens": FX.usage.input_tokens,
                    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": FX.usage.input_tokens}],
                },
                headers=response_headers(),
            )
        if found and request.method == "GET":
            # models.get: the Model resource
            model = found.group("model")
            return JsonReply(
                {
                    "name": f"models/{model}",
                    "version": "001",
                    "displayName": model,
                    "description": "A model served by the conformance fake provider.",
                    "inputTokenLimit": 1048576,
                    "outputTokenLimit": 65536,
                    "supportedGenerationMethods": ["generateContent", "countTokens"],
                    "temperature": 1,
                    "topP": 0.95,
                    "topK": 64,
                    "maxTemperature": 2,
                    "thinking": True,
                },
                headers=response_headers(),
            )
        return JsonReply(
            {
                "error": {
                    "code": 404,
                    "message": (
                        f"the Gemini fake provider has no route for {request.method} "
                        f"{request.path}; it serves models/{{model}}:generateContent, "
                        ":streamGenerateContent, :countTokens and models/{model}"
                    ),
                    "status": "NOT_FOUND",
                }
            },
            status=404,
            headers=response_headers(),
        )

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        found = GENERATE_PATH.search(request.path)
        model = found.group("model") if found else "conformance-model"
        variant = variant or self.variants(scenario, mode)[0].name
        sse = request.params.get("alt") == "sse"
        if scenario in ERRORS:
            return error_reply(scenario, variant, sse=self.wants_stream(request) and sse)
        if scenario == "stream-cut":
            return self._cut(model, variant, sse if self.wants_stream(request) else None)
        if not self.wants_stream(request):
            return self._whole(scenario, model, variant)
        return self._stream(scenario, model, sse, variant)

    def _cut(self, model: str, variant: str, sse: Optional[bool]) -> Reply:
        """A turn cut short: its body before its end, or its stream before a ``finishReason``.

        ``sse`` is ``None`` for a whole reply. A call comes whole in one part, so the cut
        inside a call falls in the event after it, the one that would have said STOP.
        """
        from ...provider.replies import JsonReply

        in_call = variant in CUT_IN_CALL
        if sse is None:
            part = function_call_part(with_id=True, signature=True) if in_call else text_part(FX.text)
            body = generate_content_response(model, [candidate([part], "STOP")])
            whole = JsonReply(
                pretty_json(body), headers=response_headers(), content_type="application/json; charset=UTF-8"
            )
            return cut_short(whole, next(iter(FX.tool_arguments)) if in_call else FX.text)
        out = Events(model, sse)
        if in_call:
            out.response([function_call_part(with_id=True, signature=True)])
            keep = 1
            out.response([text_part("")], "STOP")
        else:
            out.text(FX.partial_text, pieces=3)
            keep = len(out.bodies)
            out.text(FX.text[len(FX.partial_text) :], pieces=1, finish="STOP")
        return out.reply(f"{self.name}/stream-cut/{variant}", cut=(keep, variant != "between-events"))

    def _whole(self, scenario: str, model: str, variant: str) -> Optional[Reply]:
        from ...provider.replies import HangReply, JsonReply

        if scenario == "text":
            body = generate_content_response(model, [candidate([text_part(FX.text)], "STOP")])
        elif scenario in ("tool-call", "tool-call-with-stop"):
            part = function_call_part(with_id=variant == "id", signature=scenario == "tool-call")
            body = generate_content_response(model, [candidate([part], "STOP")])
        elif scenario == "truncated-tool-call":
            # The call is cut off by maxOutputTokens; Gemini sends calls whole, so what
            # arrives is the text before it and MAX_TOKENS, with no functionCall part.
            body = generate_content_response(model, [candidate([text_part(FX.preamble)], "MAX_TOKENS")])
        elif scenario == "content-filter":
            if variant == "output-blocked":
                body = generate_content_response(model, [candidate(None, "SAFETY")])
            else:
                body = prompt_blocked(model)
        elif scenario in ("abort", "cancel"):
            return HangReply()
        elif scenario == "stream-error":
            # A whole reply cannot fail halfway: the request fails instead.
            return error_reply("overloaded")
        else:
            return None
        return JsonReply(
            pretty_json(body), headers=response_headers(), content_type="application/json; charset=UTF-8"
        )

    def _stream(self, scenario: str, model: str, sse: bool, variant: str) -> Optional[Reply]:
        seed = f"{self.name}/{scenario}"
        out = Events(model, sse)
        if scenario == "text":
            out.text(FX.text, finish="STOP")
        elif scenario == "tool-call":
            # Gemini 3: the call (with its thoughtSignature, with or without an id), then
            # a last event that only closes the turn.
            out.response([function_call_part(with_id=variant == "id", signature=True)])
            out.response([text_part("")], "STOP")
        elif scenario == "tool-call-with-stop":
            # Gemini 2.x: the call without an id, on the event that says STOP.
            out.response([function_call_part(with_id=False)], "STOP")
        elif scenario == "truncated-tool-call":
            out.text(FX.preamble, pieces=2, finish="MAX_TOKENS")
        elif scenario == "content-filter":
            # The output was blocked: a candidate with SAFETY and an empty content.
            out.response(None, "SAFETY")
        elif scenario == "stream-error":
            out.text(FX.partial_text, pieces=3)
            out.error(503, "UNAVAILABLE", OVERLOADED_MESSAGE)
        elif scenario in ("abort", "cancel"):
            out.text(FX.partial_text, pieces=2)
            return out.reply(seed, hang=True)
        else:
            return None
        return out.reply(seed)

    # -- multi-turn ------------------------------------------------------------------

    def turn_whole(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[Reply]:
        from ._turns import turn_response

        return turn_response(turn, request)

    def turn_stream(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[TurnEvents]:
        from ._turns import turn_events

        return turn_events(turn, request)

    def read_history(self, request: RecordedRequest) -> Optional[History]:
        from ._history import read_history

        return read_history(request, self.wants_stream(request))

    def history_error(self, problems: Sequence[str]) -> Reply:
        from ._history import history_error

        return history_error(problems)

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        from ._request import check_request

        return check_request(request, model)


gemini_wire = GeminiWire()
