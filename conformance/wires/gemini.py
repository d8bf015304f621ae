"""Gemini API: ``POST /v1beta/models/{model}:generateContent``, whole or as SSE.

Reference: https://ai.google.dev/api/generate-content (``GenerateContentResponse``,
``Candidate``, ``Part``, ``FunctionCall``, ``UsageMetadata``) and
https://ai.google.dev/gemini-api/docs/troubleshooting (the error statuses). The shapes
below are the ones google-genai 3.x was seen to accept (``google/genai/types.py``).
Both ``/v1/`` and ``/v1beta/`` are served: google-genai 3.x defaults to ``v1``, older
releases and most REST clients to ``v1beta``.

The model is named in the path, not in the body. The API key comes in the
``x-goog-api-key`` header or the ``?key=`` query parameter.

A streamed reply is ``:streamGenerateContent?alt=sse``: ``data:`` events, each one a
whole ``GenerateContentResponse`` with the next text delta, no ``event:`` names and no
``[DONE]``; the stream simply ends. Events end with CRLF CRLF, as Google's front end
writes them. ``usageMetadata`` rides on every event and the last one counts; only the
last candidate carries ``finishReason``. Function calls are never split: one part holds
the whole ``functionCall`` with its ``args`` object. A tool turn finishes with
``finishReason: "STOP"``, never with a tool-specific reason. A failure after the 200 is
a ``data:`` event whose object is ``{"error": {"code", "message", "status"}}`` (a
``google.rpc.Status``), and the stream ends there.

Without ``alt=sse`` the streaming method answers one JSON array, written element by
element; the wire serves that form too, since a backend that forgot the query meets it.
"""

from __future__ import annotations

import binascii
import re
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..contract import Reasoning, ReasoningKind
from ..fixture import CONFORMANCE_FIXTURE as FX
from ._base import (
    CUT_IN_CALL,
    Variant,
    Wire,
    cut_events,
    cut_short,
    dumps,
    provider_id,
    signature,
    stream_cut_variants,
    tcp_chunks,
)
from ._gemini_errors import (
    ERRORS,
    OVERLOADED_MESSAGE,
    QUOTA_RETRY_DELAY,
    RATE_LIMIT_VARIANTS,
    error_reply,
    pretty_json,
    response_headers,
    retry_delay,
)
from ._ids import _digest
from ._request import fixture_tool_schema, json_object

if TYPE_CHECKING:
    from ..provider.replies import RecordedRequest, Reply, StreamReply
    from ._turns import History, ScriptedTurn, TurnEvents

__all__ = ["GeminiWire", "gemini_wire"]

#: ``/{version}/models/{model}:{method}``, after whatever base path a gateway adds.
GENERATE_PATH = re.compile(
    r"/(?P<version>v1|v1beta)/models/(?P<model>[^/:]+):"
    r"(?P<method>generateContent|streamGenerateContent)$"
)
MODEL_PATH = re.compile(r"/(?P<version>v1|v1beta)/models/(?P<model>[^/:]+)(?::countTokens)?$")

RESPONSE_ID = provider_id("", "gemini/response", 23)
#: The id some Gemini 3 replies put on a ``functionCall`` (8 mixed-case alphanumerics,
#: as ``whZntcQw`` in simonw/llm-gemini's cassettes); Gemini 2.x sends none.
FUNCTION_CALL_ID = provider_id("", "gemini/function-call", 8)
#: An opaque ``thoughtSignature`` (base64, as the SDK insists) beside the call. Made
#: with the SHA-256 every wire uses: hashlib's would load OpenSSL with the module.
_THOUGHT_DIGEST = _digest(b"gemini/thought-signature")
THOUGHT_SIGNATURE = binascii.b2a_base64(_THOUGHT_DIGEST * 2, newline=False).decode("ascii")


def _usage(final: bool = True) -> Dict[str, Any]:
    """``usageMetadata``: every event carries it, and only the last one's counts are the turn's.

    Events before the last already count some candidate tokens, as most real ones do
    (pydantic-ai ``tests/models/google/cassettes``, simonw/llm-gemini): a backend that
    adds the counts up, or keeps the first, reports the wrong usage.
    """
    u = FX.usage
    if not final:
        return {
            "promptTokenCount": u.input_tokens,
            "candidatesTokenCount": 1,
            "totalTokenCount": u.input_tokens + 1,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": u.input_tokens}],
        }
    return {
        "promptTokenCount": u.input_tokens,
        "candidatesTokenCount": u.output_tokens,
        "totalTokenCount": u.total_tokens,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": u.input_tokens}],
    }


# -- parts and candidates ----------------------------------------------------------------


def text_part(text: str) -> Dict[str, Any]:
    """A ``Part`` holding text."""
    return {"text": text}


def function_call_part(with_id: bool, signature: Optional[bool] = None) -> Dict[str, Any]:
    """A ``Part`` holding the whole ``functionCall``.

    Gemini 3 models give the call a ``thoughtSignature`` sibling that the client must
    echo back, with an ``id`` or without one; Gemini 2.x models send neither.
    ``signature`` defaults to ``with_id``.
    """
    call: Dict[str, Any] = {"name": FX.tool_name, "args": dict(FX.tool_arguments)}
    if with_id:
        call = {"id": FUNCTION_CALL_ID, **call}
    part: Dict[str, Any] = {"functionCall": call}
    if with_id if signature is None else signature:
        part["thoughtSignature"] = THOUGHT_SIGNATURE
    return part


def candidate(
    parts: Optional[Sequence[Dict[str, Any]]], finish_reason: Optional[str] = None
) -> Dict[str, Any]:
    """A ``Candidate``; ``parts=None`` is a blocked output, whose ``content`` is ``{}``.

    The blocked candidate has ``"content": {}``, present and empty, and no ``index``
    (pydantic-ai ``tests/models/cassettes/test_google/test_google_model_safety_settings.yaml``).
    """
    body: Dict[str, Any] = {}
    if parts is None:
        body["content"] = {}
    else:
        body["content"] = {"parts": list(parts), "role": "model"}
    if finish_reason is not None:
        body["finishReason"] = finish_reason
    if finish_reason == "SAFETY":
        body["safetyRatings"] = [
            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True},
            {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
        ]
    if parts is not None:
        body["index"] = 0
    return body


def generate_content_response(
    model: str, candidates: Optional[List[Dict[str, Any]]], final: bool = True, **extra: Any
) -> Dict[str, Any]:
    """A ``GenerateContentResponse``; ``candidates=None`` is a blocked prompt."""
    body: Dict[str, Any] = {}
    if candidates is not None:
        body["candidates"] = candidates
    body.update(extra)
    body["usageMetadata"] = _usage(final)
    body["modelVersion"] = model
    body["responseId"] = RESPONSE_ID
    return body


def prompt_blocked(model: str) -> Dict[str, Any]:
    """The prompt was refused: ``promptFeedback.blockReason`` and no ``candidates`` at all."""
    return generate_content_response(model, None, promptFeedback={"blockReason": "PROHIBITED_CONTENT"})


# -- streamed replies ----------------------------------------------------------------------


class _Events:
    """Builds the events of one ``:streamGenerateContent`` answer."""

    def __init__(self, model: str, sse: bool) -> None:
        self.model = model
        self.sse = sse
        self.bodies: List[Dict[str, Any]] = []

    def response(self, parts: Optional[List[Dict[str, Any]]], finish: Optional[str] = None) -> None:
        final = finish is not None
        self.bodies.append(generate_content_response(self.model, [candidate(parts, finish)], final=final))

    def text(self, text: str, pieces: int = 4, finish: Optional[str] = None) -> None:
        step = max(1, -(-len(text) // pieces))
        starts = list(range(0, len(text), step))
        for start in starts:
            last = start == starts[-1]
            self.response([text_part(text[start : start + step])], finish if last else None)

    def error(self, code: int, status: str, message: str) -> None:
        self.bodies.append({"error": {"code": code, "message": message, "status": status}})

    def encoded(self) -> List[bytes]:
        if self.sse:
            # Google writes CRLF line ends; the SSE grammar allows CRLF, LF or CR.
            return [f"data: {dumps(body)}\r\n\r\n".encode() for body in self.bodies]
        # Without alt=sse the method streams one JSON array, element by element.
        out = []
        for index, body in enumerate(self.bodies):
            out.append(("[" if index == 0 else ",\r\n").encode("ascii") + pretty_json(body))
        out.append(b"]" if self.bodies else b"[]")
        return out

    def reply(self, seed: str, hang: bool = False, cut: Optional[Tuple[int, bool]] = None) -> StreamReply:
        """The stream; ``cut`` (events kept, cut inside the next) ends it short of its ``finishReason``."""
        from ..provider.replies import StreamReply

        content_type = "text/event-stream" if self.sse else "application/json; charset=UTF-8"
        chunks = self.encoded()
        if hang and not self.sse:
            chunks = chunks[:-1]  # the array is still open when the client leaves
        if cut is not None:
            chunks = cut_events(chunks, *cut)
        return StreamReply(
            tcp_chunks(chunks, seed),
            content_type=content_type,
            headers=response_headers(),
            hang=hang,
            end="complete" if cut is None else "close",
        )


#: The shapes that differ by model generation or by what was blocked.
VARIANTS: Mapping[str, Tuple[Variant, ...]] = {
    **stream_cut_variants(
        "the event whose candidate carries finishReason",
        "https://ai.google.dev/api/generate-content#v1beta.Candidate (finishReason: "
        "the reason the model stopped; unset while it is generating)",
        "SamSaffron/term-llm#954 and tashfeenahmed/freellmapi#1288 (a Gemini stream that "
        "reached EOF without a finishReason taken for a finished turn)",
        "https://ai.google.dev/api/generate-content#method:-models.generatecontent",
        call="the whole functionCall part (Gemini never splits one)",
    ),
    "rate-limit": RATE_LIMIT_VARIANTS,
    "tool-call": (
        Variant(
            "id",
            "functionCall with an id and a thoughtSignature",
            "simonw/llm-gemini tests/cassettes/test_gemini/test_tools_with_nested_pydantic_models.yaml",
            call_id=FUNCTION_CALL_ID,
        ),
        Variant(
            "signature-without-id",
            "functionCall without an id, with a thoughtSignature",
            "simonw/llm-gemini tests/cassettes/test_gemini/test_tools_with_gemini_3_thought_signatures.yaml",
        ),
    ),
    "content-filter/chat": (
        Variant(
            "prompt-blocked",
            "promptFeedback.blockReason and no candidates",
            "https://ai.google.dev/api/generate-content#PromptFeedback (a Vertex MODEL_ARMOR capture)",
        ),
        Variant(
            "output-blocked",
            "a SAFETY candidate whose content is {}",
            "pydantic/pydantic-ai tests/models/cassettes/test_google/test_google_model_safety_settings.yaml",
        ),
    ),
}


def _signature_last(turn: ScriptedTurn) -> Tuple[Tuple[Reasoning, ...], Tuple[Reasoning, ...]]:
    """The turn's reasoning that comes before its text, and the bare signatures that come after.

    Gemini 3 signs a text answer (no calls) on its last part: a whole reply puts the
    ``thoughtSignature`` on the text part itself, a stream sends it in one last event
    with an empty text part (vercel/ai packages/google/src/__fixtures__/
    google-reasoning-gemini3.json and google-reasoning-gemini3.chunks.txt). Thoughts,
    and every signature of a turn with calls, come first.
    """
    if turn.calls or not turn.text:
        return tuple(turn.reasoning), ()
    bare = tuple(r for r in turn.reasoning if r.signature and not r.text)
    return tuple(r for r in turn.reasoning if r not in bare), bare


#: The reasoning a Gemini thinking model returns with an answer: the bare signature
#: Gemini 3 always sends, and a thought summary (``includeThoughts``) with its signature.
SIGNATURE_ONLY = Reasoning(
    ReasoningKind.THOUGHT_SIGNATURE.value,
    signature=signature("gemini/reasoning/signature", 180),
    provider="gemini",
)
THOUGHT_SUMMARY = Reasoning(
    ReasoningKind.THOUGHT_SIGNATURE.value,
    text=FX.thinking,
    signature=signature("gemini/reasoning/thought", 180),
    provider="gemini",
)
REASONING_VARIANTS = (
    Variant(
        "signature",
        "the answer, its last part signed with a thoughtSignature (a stream: one last empty text part)",
        "vercel/ai packages/google/src/__fixtures__/google-reasoning-gemini3.chunks.txt and "
        "google-reasoning-gemini3.json (gemini-3-pro-preview); issue-18073-empty-text-thought-signature."
        "chunks.txt (gemini-3-flash-preview)",
        reasoning=(SIGNATURE_ONLY,),
    ),
    Variant(
        "thought-summary",
        'thought parts ("thought": true) with a thoughtSignature on the last, then the answer',
        "https://ai.google.dev/gemini-api/docs/thinking#summaries (includeThoughts); "
        "https://ai.google.dev/gemini-api/docs/thought-signatures",
        reasoning=(THOUGHT_SUMMARY,),
    ),
)


# -- the wire ----------------------------------------------------------------------------


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
        from ..provider.replies import JsonReply

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
        from ..provider.replies import JsonReply

        in_call = variant in CUT_IN_CALL
        if sse is None:
            part = function_call_part(with_id=True, signature=True) if in_call else text_part(FX.text)
            body = generate_content_response(model, [candidate([part], "STOP")])
            whole = JsonReply(
                pretty_json(body), headers=response_headers(), content_type="application/json; charset=UTF-8"
            )
            return cut_short(whole, next(iter(FX.tool_arguments)) if in_call else FX.text)
        out = _Events(model, sse)
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
        from ..provider.replies import HangReply, JsonReply

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
        out = _Events(model, sse)
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
        """The whole ``GenerateContentResponse`` for ``turn``: thoughts, text, then the calls.

        The arguments go out as scripted (see ``_gemini_turns.splice_arguments``);
        a call whose arguments are not a JSON object makes the turn
        ``MALFORMED_FUNCTION_CALL``, as Gemini answers one.
        """
        from ..provider.replies import JsonReply
        from ._gemini_turns import (
            MALFORMED_CALL,
            call_parts,
            malformed_message,
            reasoning_parts,
            splice_arguments,
        )

        model = self._model(request)
        calls = call_parts(turn)
        if calls is None:
            body = self._turn_body(model, turn, candidate(None, MALFORMED_CALL), True)
            body["candidates"][0]["finishMessage"] = malformed_message(turn)
        else:
            leading, trailing = _signature_last(turn)
            parts = [p for item in reasoning_parts(leading) for p in item]
            if turn.text:
                parts.append(text_part(turn.text))
            for number, item in enumerate(trailing):
                if number == 0:
                    parts[-1]["thoughtSignature"] = item.signature
                else:
                    parts.extend(reasoning_parts((item,))[0])
            parts.extend(calls)
            body = self._turn_body(model, turn, candidate(parts, _turn_finish(turn)), True)
        text = splice_arguments(pretty_json(body).decode("utf-8"), turn)
        return JsonReply(
            text.encode("utf-8"), headers=response_headers(), content_type="application/json; charset=UTF-8"
        )

    def turn_stream(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[TurnEvents]:
        """``turn`` as ``alt=sse`` events: thought pieces, text pieces, one event per call, then the finish.

        Gemini sends every call whole, one ``functionCall`` part with its ``args``
        object (research notes: "Function calls arrive whole"; ``partialArgs`` is
        Vertex only), so the calls cannot interleave and each one's first and last
        argument event is the same event. The thought signature of a thought rides
        its last piece; a call's rides the call's own part.
        """
        from ._gemini_turns import (
            MALFORMED_CALL,
            call_parts,
            malformed_message,
            reasoning_parts,
            splice_arguments,
        )
        from ._turns import TurnEvents, split_text

        model = self._model(request)
        bodies: List[Dict[str, Any]] = []
        arguments: Dict[int, Tuple[int, int]] = {}

        def event(parts: Optional[List[Dict[str, Any]]], finish: Optional[str] = None) -> None:
            bodies.append(self._turn_body(model, turn, candidate(parts, finish), finish is not None))

        leading, trailing = _signature_last(turn)
        for item in reasoning_parts(leading, pieces=2):
            for part in item:
                event([part])
        texts = split_text(turn.text, 4)
        calls = call_parts(turn)
        if calls is None:
            for piece in texts:
                event([text_part(piece)])
            event(None, MALFORMED_CALL)
            bodies[-1]["candidates"][0]["finishMessage"] = malformed_message(turn)
            arguments = {position: (len(bodies) - 1, len(bodies) - 1) for position in range(len(turn.calls))}
        else:
            finish = _turn_finish(turn)
            for number, piece in enumerate(texts):
                last = number == len(texts) - 1 and not calls and not trailing
                event([text_part(piece)], finish if last else None)
            for number, item in enumerate(reasoning_parts(trailing)):
                # Gemini 3 signs a text answer in one last event, an empty text part
                # that carries the signature and the finish.
                event(item, finish if number == len(trailing) - 1 else None)
            for position, part in enumerate(calls):
                arguments[position] = (len(bodies), len(bodies))
                event([part])
            if calls or not texts:
                # Gemini 3 closes a tool turn with an event that only says STOP.
                event([text_part("")], finish)
        events = [f"data: {splice_arguments(dumps(body), turn)}\r\n\r\n".encode() for body in bodies]
        return TurnEvents(events, "text/event-stream", response_headers(), arguments)

    def read_history(self, request: RecordedRequest) -> Optional[History]:
        """The conversation of a ``GenerateContentRequest``, read as Gemini 3 reads it (``_gemini_turns``)."""
        from ._gemini_turns import read_history

        problems: List[str] = []
        body = json_object(request, problems)
        return read_history(body, self.wants_stream(request), problems)

    def history_error(self, problems: Sequence[str]) -> Reply:
        """Gemini's 400 ``INVALID_ARGUMENT``, a ``google.rpc.Status`` quoting the first problem."""
        from ..provider.replies import JsonReply
        from ._gemini_turns import history_error_body

        return JsonReply(
            pretty_json(history_error_body(problems)),
            status=400,
            headers=response_headers(),
            content_type="application/json; charset=UTF-8",
        )

    @staticmethod
    def _model(request: RecordedRequest) -> str:
        found = GENERATE_PATH.search(request.path)
        return found.group("model") if found else "conformance-model"

    @staticmethod
    def _turn_body(model: str, turn: ScriptedTurn, one: Dict[str, Any], final: bool) -> Dict[str, Any]:
        body = generate_content_response(model, [one], final=final)
        body["responseId"] = provider_id("", f"gemini/response/{turn.seed}", 23)
        return body

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        problems: List[str] = []
        if request.method != "POST":
            problems.append(f"expected POST, got {request.method}")
        found = GENERATE_PATH.search(request.path)
        if found is None:
            problems.append(
                "expected a path ending in /v1beta/models/{model}:generateContent or "
                f":streamGenerateContent (or /v1/...), got {request.path}"
            )
        else:
            if found.group("model") != model:
                problems.append(f"expected model {model!r} in the path, got {found.group('model')!r}")
            if found.group("method") == "streamGenerateContent":
                if request.params.get("alt") != "sse":
                    problems.append(
                        "expected ?alt=sse on :streamGenerateContent (without it Gemini streams "
                        f"one JSON array, not server-sent events), got query {request.query!r}"
                    )
        problems.extend(_check_key(request))
        body = json_object(request, problems)
        if not body:
            return problems
        problems.extend(_check_contents(body.get("contents")))
        problems.extend(_check_tools(body.get("tools")))
        return problems


def _turn_finish(turn: ScriptedTurn) -> str:
    from ._gemini_turns import TURN_FINISH

    reason = turn.finish_reason
    if reason not in TURN_FINISH:
        raise ValueError(f"a Gemini turn cannot finish {reason!r}; script one of {sorted(TURN_FINISH)!r}")
    return TURN_FINISH[reason]


def _check_key(request: RecordedRequest) -> List[str]:
    if request.headers.get("x-goog-api-key") or request.params.get("key"):
        return []
    if request.headers.get("authorization", "").lower().startswith("bearer "):
        return []
    return [
        "expected the API key in the x-goog-api-key header or the ?key= query parameter, got "
        "neither (Gemini answers 403 PERMISSION_DENIED without one)"
    ]


def _check_contents(contents: Any) -> List[str]:
    if not isinstance(contents, list) or not contents:
        return [f"expected contents to be a non-empty list, got {contents!r}"]
    problems = []
    roles = [c.get("role") for c in contents if isinstance(c, dict)]
    bad = [r for r in roles if r not in (None, "user", "model")]
    if bad:
        problems.append(
            f"expected content roles user or model (the system prompt goes in systemInstruction), got {bad!r}"
        )
    texts = []
    for content in contents:
        if isinstance(content, dict) and content.get("role") in (None, "user"):
            parts = content.get("parts")
            if isinstance(parts, list):
                texts.append(
                    "".join(
                        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
                    )
                )
    if FX.question not in texts:
        problems.append(f"expected a user content with the text {FX.question!r}, got {texts!r}")
    return problems


def _check_tools(tools: Any) -> List[str]:
    from ._schema import schema_difference

    if not isinstance(tools, list):
        return [
            'expected tools to be [{"functionDeclarations": [{"name": "get_weather", ...}]}], '
            f"got {tools!r}"
        ]
    declarations: List[Dict[str, Any]] = []
    for tool in tools:
        if isinstance(tool, dict):
            found = tool.get("functionDeclarations", tool.get("function_declarations"))
            if isinstance(found, list):
                declarations.extend(d for d in found if isinstance(d, dict))
    named = [d for d in declarations if d.get("name") == FX.tool_name]
    if not named:
        names = [d.get("name") for d in declarations]
        return [
            'expected a tool {"functionDeclarations": [{"name": "get_weather", ...}]}, got '
            f"function declaration names {names!r}"
        ]
    declaration = named[0]
    for key in ("parametersJsonSchema", "parameters_json_schema", "parameters"):
        if key in declaration:
            schema = declaration[key]
            break
    else:
        return [
            "expected get_weather to declare its parameters (parameters or "
            f"parametersJsonSchema), got keys {sorted(declaration)!r}"
        ]
    expected = dict(fixture_tool_schema())
    difference = schema_difference(expected, schema)
    if difference:
        return [f"expected get_weather parameters {expected!r}, got {schema!r} ({difference})"]
    return []


gemini_wire = GeminiWire()
