"""The Gemini API wire: its settings, its routes, and the reply to each scenario.

The replies are built from ``_replies`` and ``_variants``; the multi-turn hooks play
turns with ``_turns`` and read histories with ``_history``, and the request checks
are ``_request``'s, each loaded when a case first needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...contract import Reasoning, ReasoningKind, Usage
from ...fixture import CONFORMANCE_FIXTURE as FX
from .._base import Wire
from .._chunks import CUT_IN_CALL, cut_short
from .._ids import signature
from .._variants import reasoning_then_call
from ._replies import GEMINI, Dialect, Events, function_call_part, text_part
from ._request import GENERATE_PATH, MODEL_PATH
from ._variants import (
    ERRORS,
    OVERLOADED_MESSAGE,
    QUOTA_RETRY_DELAY,
    REASONING_VARIANTS,
    VARIANT_ERRORS,
    VARIANTS,
    ErrorTable,
    error_body,
    error_reply,
    retry_delay,
)

if TYPE_CHECKING:
    from re import Pattern

    from ...provider.replies import JsonReply, RecordedRequest, Reply
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
    pairs_results_by_name = True
    tool_error_marker = '"response": {"error": ...}'
    call_reasoning = (
        Reasoning(
            ReasoningKind.THOUGHT_SIGNATURE.value,
            signature=signature("gemini/history/signature"),
            provider="gemini",
        ),
    )
    # With includeThoughts a thinking model sends its thought summary before the call, and
    # the signature on the functionCall part: the thought must come out of the backend with
    # the call; the API takes the turn back without the thought, never without the signature.
    reasoning_tool_turns = (
        reasoning_then_call(
            'a thought part ("thought": true), then the functionCall part carrying its thoughtSignature',
            "https://ai.google.dev/gemini-api/docs/thinking#summaries (includeThoughts); "
            "https://ai.google.dev/gemini-api/docs/thought-signatures (function calling: the signature "
            "on the first functionCall part)",
            (
                Reasoning(
                    ReasoningKind.THOUGHT_SIGNATURE.value,
                    text="The user asks for the weather in Paris; get_weather answers that.",
                    provider="gemini",
                ),
            ),
            echoed=False,
        ),
    )
    turn_reasoning_required = False

    #: How this front end writes its replies (see ``_replies``).
    dialect: Dialect = GEMINI
    #: The path of the generation call, with the model in it; a front end of its own has its own.
    generate_path: Pattern[str] = GENERATE_PATH
    #: scenario -> the error this front end answers it with, and the variants' own.
    errors: ErrorTable = ERRORS
    variant_errors: Mapping[Tuple[str, str], Tuple[int, str, str, List[Dict[str, Any]]]] = VARIANT_ERRORS

    def is_generation(self, request: RecordedRequest) -> bool:
        return request.method == "POST" and self.generate_path.search(request.path) is not None

    def model_of(self, request: RecordedRequest) -> str:
        """The model the request's path names."""
        found = self.generate_path.search(request.path)
        return found.group("model") if found else "conformance-model"

    def error_reply(self, scenario: str, variant: str, request: RecordedRequest) -> JsonReply:
        """The error this front end answers ``scenario`` with; a stream asked for with ``alt=sse`` gets
        it under ``Content-Type: text/event-stream``."""
        sse = self.wants_stream(request) and request.params.get("alt") == "sse"
        body = error_body(scenario, variant, self.errors, self.variant_errors)
        return error_reply(scenario, sse=sse, dialect=self.dialect, body=body)

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

    def scripted_call_id(self, name: str, seed: str) -> str:
        """Eight letters and digits, as Gemini 3 names a call (``FUNCTION_CALL_ID``: ``pKtzEAae``)."""
        from .._ids import provider_id

        return provider_id("", seed, 8)

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
                headers=self.dialect.headers(),
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
                headers=self.dialect.headers(),
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
            headers=self.dialect.headers(),
        )

    def request_asks(self, condition: str, request: RecordedRequest) -> bool:
        """Thought summaries come only with ``generationConfig.thinkingConfig.includeThoughts``
        (https://ai.google.dev/gemini-api/docs/thinking#summaries), in either spelling."""
        from ._history import field

        if condition != "thinking":
            return True
        body = request.json if isinstance(request.json, dict) else {}
        config = field(body, "generationConfig", "generation_config")
        thinking = field(config, "thinkingConfig", "thinking_config") if isinstance(config, dict) else None
        return isinstance(thinking, dict) and field(thinking, "includeThoughts", "include_thoughts") is True

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        if scenario in self.unsupported:
            return None
        model = self.model_of(request)
        variant = variant or self.variants(scenario, mode)[0].name
        sse = request.params.get("alt") == "sse"
        if scenario in self.errors:
            return self.error_reply(scenario, variant, request)
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
        dialect = self.dialect
        in_call = variant in CUT_IN_CALL
        if sse is None:
            part = function_call_part(with_id=True, signature=True) if in_call else text_part(FX.text)
            whole = dialect.whole(dialect.response(model, [dialect.candidate([part], "STOP")]))
            return cut_short(whole, next(iter(FX.tool_arguments)) if in_call else FX.text)
        out = Events(model, sse, dialect)
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
        from ...provider.replies import HangReply

        dialect = self.dialect
        if scenario in ("abort", "cancel"):
            return HangReply()
        if scenario == "stream-error":
            # A whole reply cannot fail halfway: the request fails instead.
            body = error_body("overloaded", "", self.errors, self.variant_errors)
            return error_reply("overloaded", dialect=dialect, body=body)
        one = self.whole_candidate(scenario, variant)
        if one is None:
            return None
        if scenario == "content-filter" and not one:
            return dialect.whole(self.prompt_blocked(model))
        return dialect.whole(dialect.response(model, [one], usage=self.whole_usage(scenario, variant)))

    def tied_reasoning(self, scenario: str, variant: str = "") -> Tuple[Tuple[Reasoning, ...], ...]:
        """Gemini 3 signs a turn's first call: the tool-call's ``THOUGHT_SIGNATURE``, and the
        first of the parallel calls with its turn's signature; Gemini 2.x (tool-call-with-stop)
        signs none."""
        from ._replies import THOUGHT_SIGNATURE
        from ._turns import turn_signature

        kind = ReasoningKind.THOUGHT_SIGNATURE.value
        if scenario == "tool-call":
            return ((Reasoning(kind, signature=THOUGHT_SIGNATURE, provider=self.provider),),)
        if scenario == "parallel-tool-calls":
            # The scripted turn's seed, as multi_turn_reply plays it.
            signed = turn_signature(f"{scenario}/{variant or 'default'}")
            return ((Reasoning(kind, signature=signed, provider=self.provider),), ())
        return ()

    def whole_usage(self, scenario: str, variant: str) -> Optional[Dict[str, Any]]:
        """The ``usageMetadata`` of a whole reply, where it is not the plain one: a turn of thoughts
        only, or a blocked output, which generated nothing."""
        if scenario == "content-filter":
            return self.dialect.blocked_usage()
        return self.dialect.usage(thoughts=FX.usage.output_tokens) if variant == "no-parts" else None

    def reported_usage(self, scenario: str, variant: str) -> Usage:
        if scenario == "content-filter" and self.dialect.blocked_counts_prompt_only:
            return Usage(FX.usage.input_tokens, 0, FX.usage.input_tokens)
        return FX.usage

    def whole_candidate(self, scenario: str, variant: str) -> Optional[Dict[str, Any]]:
        """The one candidate of a whole reply to ``scenario``; ``{}`` for a blocked prompt, which has none."""
        dialect = self.dialect
        if scenario == "text":
            return dialect.candidate([text_part(FX.text)], "STOP")
        if scenario in ("tool-call", "tool-call-with-stop"):
            part = function_call_part(with_id=variant == "id", signature=scenario == "tool-call")
            return dialect.candidate([part], "STOP")
        if scenario == "truncated-tool-call":
            if variant == "no-parts":
                # A thinking model spent the budget on thoughts: content is the role alone.
                return {**dialect.candidate([], "MAX_TOKENS"), "content": {"role": "model"}}
            # The call is cut off by maxOutputTokens; Gemini sends calls whole, so what
            # arrives is the text before it and MAX_TOKENS, with no functionCall part.
            return dialect.candidate([text_part(FX.preamble)], "MAX_TOKENS")
        if scenario == "content-filter":
            return self.blocked_output() if variant == "output-blocked" else {}
        return None

    def blocked_output(self) -> Dict[str, Any]:
        """The candidate of an output the safety filters blocked: SAFETY, and an empty content."""
        return self.dialect.candidate(None, "SAFETY")

    def prompt_blocked(self, model: str) -> Dict[str, Any]:
        """The reply to a prompt the front end refused: no candidates."""
        return self.dialect.prompt_blocked(model)

    def _stream(self, scenario: str, model: str, sse: bool, variant: str) -> Optional[Reply]:
        seed = f"{self.name}/{scenario}"
        out = Events(model, sse, self.dialect)
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
            out.candidate(self.blocked_output())
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

        return turn_response(turn, self.model_of(request), self.dialect)

    def turn_stream(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[TurnEvents]:
        from ._turns import turn_events

        return turn_events(turn, self.model_of(request), self.dialect)

    def read_history(self, request: RecordedRequest) -> Optional[History]:
        from ._history import read_history

        return read_history(request, self.wants_stream(request))

    def history_error(self, problems: Sequence[str]) -> Reply:
        from ._history import history_error

        return history_error(problems, self.dialect)

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        from ._request import check_request

        return check_request(request, model)


gemini_wire = GeminiWire()
