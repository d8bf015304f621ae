"""The Gemini API's replies: the ``GenerateContentResponse`` with its candidates and
parts, and the events (or JSON array elements) of ``:streamGenerateContent``.

Reference: https://ai.google.dev/api/generate-content (``GenerateContentResponse``,
``Candidate``, ``Part``, ``FunctionCall``, ``UsageMetadata``). The builders are named
after Google's own types (``candidate``, ``function_call_part``,
``generate_content_response``), so checking them against the docs is a grep.
"""

from __future__ import annotations

import binascii
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._chunks import cut_events, dumps, tcp_chunks
from .._google import pretty_json, response_headers
from .._ids import _digest, provider_id

if TYPE_CHECKING:
    from ...provider.replies import StreamReply

__all__ = [
    "FUNCTION_CALL_ID",
    "RESPONSE_ID",
    "THOUGHT_SIGNATURE",
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


class Events:
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
        from ...provider.replies import StreamReply

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
