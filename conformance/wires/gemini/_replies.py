"""The Gemini API's replies: the ``GenerateContentResponse`` with its candidates and
parts, and the events (or JSON array elements) of ``:streamGenerateContent``.

Reference: https://ai.google.dev/api/generate-content (``GenerateContentResponse``,
``Candidate``, ``Part``, ``FunctionCall``, ``UsageMetadata``). The builders are named
after Google's own types (``candidate``, ``function_call_part``,
``generate_content_response``), so checking them against the docs is a grep.

Strategy: the same models answer through two front ends, the Gemini API
(generativelanguage.googleapis.com) and Vertex AI (aiplatform.googleapis.com), and
each writes the response its own way: Vertex puts ``role`` before ``parts``, gives a
candidate no ``index``, adds ``createTime`` and ``usageMetadata.trafficType``, and
sends a non-final event only ``{"trafficType": ...}`` for its usage. A
:class:`Dialect` holds those differences; :data:`GEMINI` is the Gemini API's, and
every builder takes one.
"""

from __future__ import annotations

import binascii
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._chunks import cut_events, tcp_chunks
from .._google import pretty_json, response_headers
from .._ids import _digest, provider_id

if TYPE_CHECKING:
    from ...provider.replies import JsonReply, StreamReply

__all__ = [
    "FUNCTION_CALL_ID",
    "GEMINI",
    "RESPONSE_ID",
    "THOUGHT_SIGNATURE",
    "Dialect",
    "Events",
    "candidate",
    "function_call_part",
    "generate_content_response",
    "is_base64",
    "pretty_json",
    "prompt_blocked",
    "response_headers",
    "text_part",
]

RESPONSE_ID = provider_id("", "gemini/response", 23)
#: The id some Gemini 3 replies put on a ``functionCall`` (8 mixed-case alphanumerics,
#: as ``whZntcQw`` in simonw/llm-gemini's cassettes); Gemini 2.x sends none.
FUNCTION_CALL_ID = provider_id("", "gemini/function-call", 8)
#: An opaque ``thoughtSignature`` (base64, as the SDK insists) beside the call. Made
#: with the SHA-256 every wire uses: hashlib's would load OpenSSL with the module.
_THOUGHT_DIGEST = _digest(b"gemini/thought-signature")
THOUGHT_SIGNATURE = binascii.b2a_base64(_THOUGHT_DIGEST * 2, newline=False).decode("ascii")
WHOLE_TYPE = "application/json; charset=UTF-8"


def sse_json(body: Any) -> str:
    """One SSE event's JSON, as Google's front end writes it: a space after each colon, none after commas.

    ``{"candidates": [{"content": {"parts": [{"functionCall": {"name": "x","args": {}}}]...``
    (pydantic-ai's Gemini stream cassettes; opentelemetry-python-contrib's Vertex ones).
    """
    import json

    return json.dumps(body, ensure_ascii=False, separators=(",", ": "))


def is_base64(value: Any) -> bool:
    """Whether ``value`` is base64, standard or URL-safe, padded or not, as proto JSON takes bytes
    (a ``thoughtSignature`` is)."""
    import base64

    if not isinstance(value, str) or not value.isascii():
        return False
    # The same on every Python: 3.9 refuses padding beyond what the length needs.
    bare = value.rstrip("=")
    padded = (bare + "=" * (-len(bare) % 4)).encode("ascii")
    for altchars in (None, b"-_"):
        try:
            base64.b64decode(padded, altchars=altchars, validate=True)
            return True
        except (binascii.Error, ValueError):
            continue
    return False


class Dialect:
    """How the Gemini API writes a ``GenerateContentResponse``; a subclass is another front end's."""

    name = "gemini"
    #: Whether a stream signs the answer's last text piece itself, rather than sending the
    #: bare signature in one last event with an empty text part.
    signs_last_text = False
    #: Whether a reply the safety filters blocked (the prompt, or the output) reports its
    #: prompt's tokens alone: nothing was generated, so ``candidatesTokenCount`` is left
    #: out and the total is the prompt's (pydantic-ai
    #: ``tests/models/cassettes/test_google/test_google_model_safety_settings.yaml``).
    blocked_counts_prompt_only = True

    def headers(self, stream: bool = False) -> Dict[str, str]:
        """The headers every reply carries, as Google's front end writes them."""
        return response_headers()

    def content(self, parts: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
        """A ``Content`` of the model: ``parts``, then ``role``."""
        return {"parts": list(parts), "role": "model"}

    def candidate(
        self, parts: Optional[Sequence[Dict[str, Any]]], finish_reason: Optional[str] = None
    ) -> Dict[str, Any]:
        """A ``Candidate``; ``parts=None`` is a blocked output, whose ``content`` is ``{}``.

        The blocked candidate has ``"content": {}``, present and empty, and no ``index``
        (pydantic-ai ``tests/models/cassettes/test_google/test_google_model_safety_settings.yaml``).
        """
        body: Dict[str, Any] = {"content": {} if parts is None else self.content(parts)}
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

    def usage(self, final: bool = True, step: int = 1, thoughts: int = 0) -> Dict[str, Any]:
        """``usageMetadata``: every event carries it, and only the last one's counts are the turn's.

        Events before the last already count the candidate tokens so far (``step``), as
        most real ones do (pydantic-ai ``tests/models/google/cassettes``, simonw/llm-gemini):
        a backend that adds the counts up, or keeps the first, reports the wrong usage.
        ``thoughts`` of the turn's output tokens were thinking (``thoughtsTokenCount``);
        where they are all of it, ``candidatesTokenCount`` is left out, as Gemini does.
        """
        u = FX.usage
        details = [{"modality": "TEXT", "tokenCount": u.input_tokens}]
        if not final:
            return {
                "promptTokenCount": u.input_tokens,
                "candidatesTokenCount": step,
                "totalTokenCount": u.input_tokens + step,
                "promptTokensDetails": details,
            }
        body: Dict[str, Any] = {"promptTokenCount": u.input_tokens}
        if u.output_tokens > thoughts:
            body["candidatesTokenCount"] = u.output_tokens - thoughts
        body.update(totalTokenCount=u.total_tokens, promptTokensDetails=details)
        if thoughts:
            body["thoughtsTokenCount"] = thoughts
        return body

    def blocked_usage(self) -> Dict[str, Any]:
        """The ``usageMetadata`` of a blocked reply: the prompt's tokens, and no output (see above)."""
        if not self.blocked_counts_prompt_only:
            return self.usage()
        u = FX.usage
        return {
            "promptTokenCount": u.input_tokens,
            "totalTokenCount": u.input_tokens,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": u.input_tokens}],
        }

    def response(
        self,
        model: str,
        candidates: Optional[List[Dict[str, Any]]],
        final: bool = True,
        usage: Optional[Dict[str, Any]] = None,
        **extra: Any,
    ) -> Dict[str, Any]:
        """A ``GenerateContentResponse``; ``candidates=None`` is a blocked prompt."""
        body: Dict[str, Any] = {}
        if candidates is not None:
            body["candidates"] = candidates
        body.update(extra)
        body["usageMetadata"] = self.usage(final) if usage is None else usage
        body["modelVersion"] = model
        body["responseId"] = RESPONSE_ID
        return body

    def prompt_blocked(self, model: str) -> Dict[str, Any]:
        """The prompt was refused: ``promptFeedback.blockReason`` and no ``candidates`` at all."""
        feedback = {"blockReason": "PROHIBITED_CONTENT"}
        return self.response(model, None, usage=self.blocked_usage(), promptFeedback=feedback)

    def whole(self, body: Any, status: int = 200) -> JsonReply:
        """A whole reply: ``body`` pretty-printed, with the front end's headers."""
        from ...provider.replies import JsonReply

        return JsonReply(
            body if isinstance(body, bytes) else pretty_json(body),
            status=status,
            headers=self.headers(),
            content_type=WHOLE_TYPE,
        )


#: The Gemini API's front end, generativelanguage.googleapis.com.
GEMINI = Dialect()


# -- parts and candidates ----------------------------------------------------------------


def text_part(text: str) -> Dict[str, Any]:
    """A ``Part`` holding text."""
    return {"text": text}


def function_call_part(
    with_id: bool, signature: Optional[bool] = None, name: str = "", args: Optional[Dict[str, Any]] = None
) -> Dict[str, Any]:
    """A ``Part`` holding the whole ``functionCall``: ``name``, ``args``, then the ``id``.

    Gemini 3 models give the call a ``thoughtSignature`` sibling that the client must
    echo back, with an ``id`` or without one; Gemini 2.x models send neither.
    ``signature`` defaults to ``with_id``. The key order is the real one
    (``{"name": "x","args": {},"id": "96c1su3s"}``, pydantic-ai's Gemini 3 cassettes).
    """
    call: Dict[str, Any] = {
        "name": name or FX.tool_name,
        "args": dict(FX.tool_arguments) if args is None else args,
    }
    if with_id:
        call["id"] = FUNCTION_CALL_ID
    part: Dict[str, Any] = {"functionCall": call}
    if with_id if signature is None else signature:
        part["thoughtSignature"] = THOUGHT_SIGNATURE
    return part


def candidate(
    parts: Optional[Sequence[Dict[str, Any]]], finish_reason: Optional[str] = None, dialect: Dialect = GEMINI
) -> Dict[str, Any]:
    """A ``Candidate`` as ``dialect`` writes it (see :meth:`Dialect.candidate`)."""
    return dialect.candidate(parts, finish_reason)


def generate_content_response(
    model: str,
    candidates: Optional[List[Dict[str, Any]]],
    final: bool = True,
    dialect: Dialect = GEMINI,
    **extra: Any,
) -> Dict[str, Any]:
    """A ``GenerateContentResponse`` as ``dialect`` writes it; ``candidates=None`` is a blocked prompt."""
    return dialect.response(model, candidates, final, **extra)


def prompt_blocked(model: str, dialect: Dialect = GEMINI) -> Dict[str, Any]:
    """The prompt was refused: ``promptFeedback.blockReason`` and no ``candidates`` at all."""
    return dialect.prompt_blocked(model)


# -- streamed replies ----------------------------------------------------------------------


class Events:
    """Builds the events of one ``:streamGenerateContent`` answer."""

    def __init__(self, model: str, sse: bool, dialect: Dialect = GEMINI) -> None:
        self.model = model
        self.sse = sse
        self.dialect = dialect
        self.bodies: List[Dict[str, Any]] = []

    def response(self, parts: Optional[List[Dict[str, Any]]], finish: Optional[str] = None) -> None:
        self.candidate(self.dialect.candidate(parts, finish))

    def candidate(self, one: Dict[str, Any]) -> None:
        """One event holding the candidate ``one``; it is the last where ``one`` has a finishReason."""
        final = "finishReason" in one
        if one.get("finishReason") == "SAFETY":
            usage = self.dialect.blocked_usage()
        else:
            usage = self.dialect.usage(final, step=len(self.bodies) + 1)
        self.bodies.append(self.dialect.response(self.model, [one], final, usage=usage))

    def text(self, text: str, pieces: int = 4, finish: Optional[str] = None) -> None:
        step = max(1, -(-len(text) // pieces))
        starts = list(range(0, len(text), step))
        for start in starts:
            last = start == starts[-1]
            self.response([text_part(text[start : start + step])], finish if last else None)

    def error(self, code: int, status: str, message: str) -> None:
        self.bodies.append({"error": {"code": code, "message": message, "status": status}})

    def encoded(self) -> List[bytes]:
        return encode_events(self.bodies, self.sse)

    def reply(self, seed: str, hang: bool = False, cut: Optional[Tuple[int, bool]] = None) -> StreamReply:
        """The stream; ``cut`` (events kept, cut inside the next) ends it short of its ``finishReason``."""
        from ...provider.replies import StreamReply

        content_type = "text/event-stream" if self.sse else WHOLE_TYPE
        chunks = self.encoded()
        if hang and not self.sse:
            chunks = chunks[:-1]  # the array is still open when the client leaves
        if cut is not None:
            chunks = cut_events(chunks, *cut)
        return StreamReply(
            tcp_chunks(chunks, seed),
            content_type=content_type,
            headers=self.dialect.headers(stream=True),
            hang=hang,
            end="complete" if cut is None else "close",
        )


def encode_events(bodies: Sequence[Any], sse: bool) -> List[bytes]:
    """Each response of a stream as it goes out: an SSE event, or an element of the JSON array.

    Google ends SSE lines with CRLF (the grammar allows CRLF, LF or CR). Without
    ``alt=sse`` the method streams one JSON array, element by element, each element
    pretty and ending in a newline: ``[{…}\\n,\\r\\n{…}\\n]`` (simonw/llm-gemini
    ``tests/cassettes/test_gemini/test_tools_with_gemini_3_thought_signatures.yaml``).
    """
    if sse:
        return [f"data: {sse_json(body)}\r\n\r\n".encode() for body in bodies]
    out = []
    for index, body in enumerate(bodies):
        out.append(("[" if index == 0 else ",\r\n").encode("ascii") + pretty_json(body))
    out.append(b"]" if bodies else b"[]")
    return out
