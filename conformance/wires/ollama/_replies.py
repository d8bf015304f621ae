"""Ollama's replies: the ``ChatResponse`` lines of ``/api/chat``, whole or as NDJSON, and
what its model lookups answer (``/api/show``, ``/api/tags``).

Reference: https://github.com/ollama/ollama/blob/main/docs/api.md; the Go types are
``api.ChatResponse`` and ``api.Metrics`` (api/types.go). The builders are named after
Ollama's own fields (``chat_response``, ``created_at``, ``done_reason``), so checking
them against the docs is a grep.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._chunks import cut_events, tcp_chunks
from .._ids import http_date, provider_id

if TYPE_CHECKING:
    from ...provider.replies import StreamReply

__all__ = [
    "JSON_TYPE",
    "NDJSON_TYPE",
    "TOOL_CALL_ID",
    "VERSION",
    "Lines",
    "chat_response",
    "created_at",
    "metrics",
    "response_headers",
    "show",
    "tag",
    "tool_call",
]

_LOWER = "abcdefghijklmnopqrstuvwxyz0123456789"
#: Ollama 0.12+ numbers each call and gives it an id; older servers send neither.
TOOL_CALL_ID = provider_id("call_", "ollama/tool-call", 8, _LOWER)
#: What /api/version says: a release whose wording the defaults use (the runner's
#: "llama-server process has terminated" is 0.30.0 and later; #16645 quotes it on 0.30.6).
VERSION = "0.30.6"
JSON_TYPE = "application/json; charset=utf-8"
NDJSON_TYPE = "application/x-ndjson"

#: 2025-11-29T08:00:00Z in nanoseconds, plus a fraction: the first ``created_at``.
_START_NS = 1764403200 * 10**9 + 123456789
_STEP_NS = 20987651


def created_at(index: int = 0) -> str:
    """The ``created_at`` of line ``index``: Go's ``time.RFC3339Nano`` in UTC.

    Go trims trailing zeros from the fraction (and the dot with them), so the width
    varies from line to line; a client that parses a fixed width is caught.
    """
    ns = _START_NS + index * _STEP_NS
    seconds, fraction = divmod(ns, 10**9)
    days, rest = divmod(seconds, 86400)
    hour, rest = divmod(rest, 3600)
    minute, second = divmod(rest, 60)
    # Only 2025-11-29 and the days right after it are ever reached.
    day = 29 + (days - 20421)
    text = f"2025-11-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"
    digits = f"{fraction:09d}".rstrip("0")
    return f"{text}.{digits}Z" if digits else f"{text}Z"


def metrics() -> Dict[str, Any]:
    """The ``api.Metrics`` of a finished turn: token counts and durations in nanoseconds."""
    return {
        "total_duration": 1287655308,
        "load_duration": 58093416,
        "prompt_eval_count": FX.usage.input_tokens,
        "prompt_eval_duration": 163874291,
        "eval_count": FX.usage.output_tokens,
        "eval_duration": 1061482917,
    }


def tool_call(with_id: bool) -> Dict[str, Any]:
    """One ``message.tool_calls`` entry: the whole call, ``arguments`` an object."""
    function: Dict[str, Any] = {"name": FX.tool_name, "arguments": dict(FX.tool_arguments)}
    if with_id:
        return {"id": TOOL_CALL_ID, "function": {"index": 0, **function}}
    return {"function": function}


def chat_response(
    model: str,
    index: int,
    content: str,
    done_reason: Optional[str] = None,
    tool_calls: Optional[List[Dict[str, Any]]] = None,
) -> Dict[str, Any]:
    """One ``ChatResponse``: a ``done: false`` line, or the final one with ``done_reason``."""
    message: Dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body: Dict[str, Any] = {"model": model, "created_at": created_at(index), "message": message}
    if done_reason is None:
        body["done"] = False
        return body
    # ``api.ChatResponse`` declares Done before DoneReason since Ollama 0.12.0 (commit
    # 8b894933a, "engine: add remote proxy"), and Go writes fields in declaration order;
    # servers before it wrote ``done_reason`` first. A JSON reader sees no difference.
    body["done"] = True
    body["done_reason"] = done_reason
    body.update(metrics())
    return body



# -- streamed replies ----------------------------------------------------------------------


class Lines:
    """Builds the NDJSON lines of one streamed ``/api/chat`` answer."""

    def __init__(self, model: str) -> None:
        # Imported once per reply, not per event, nor with the module.
        from ...encoders import ndjson

        self.ndjson = ndjson
        self.model = model
        self.lines: List[bytes] = []

    def add(self, body: Dict[str, Any]) -> None:
        self.lines.append(self.ndjson(body))

    def text(self, text: str, pieces: int = 4) -> None:
        step = max(1, -(-len(text) // pieces))
        for start in range(0, len(text), step):
            self.add(chat_response(self.model, len(self.lines), text[start : start + step]))

    def tool_calls(self, calls: List[Dict[str, Any]]) -> None:
        self.add(chat_response(self.model, len(self.lines), "", tool_calls=calls))

    def done(self, done_reason: str) -> None:
        self.add(chat_response(self.model, len(self.lines), "", done_reason))

    def error(self, message: str) -> None:
        self.lines.append(self.ndjson({"error": message}))

    def reply(self, seed: str, hang: bool = False, cut: Optional[Tuple[int, bool]] = None) -> StreamReply:
        """The stream; ``cut`` (lines kept, cut inside the next) ends it short of ``"done": true``."""
        from ...provider.replies import StreamReply

        lines = self.lines if cut is None else cut_events(self.lines, *cut)
        return StreamReply(
            tcp_chunks(lines, seed),
            content_type=NDJSON_TYPE,
            headers=response_headers(),
            hang=hang,
            end="complete" if cut is None else "close",
        )


def response_headers() -> Dict[str, str]:
    """The headers every reply carries: the date."""
    return {"date": http_date()}


def show(model: str) -> Dict[str, Any]:
    """``/api/show``: what ollama-python's ``show()`` reads (capabilities included)."""
    return {
        "license": "",
        "modelfile": f"FROM {model}\n",
        "parameters": 'stop                           "<|eot_id|>"',
        "template": "{{ .Prompt }}",
        "details": _details(),
        "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
        "capabilities": ["completion", "tools"],
        "modified_at": created_at(0),
    }


def _details() -> Dict[str, Any]:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": "llama",
        "families": ["llama"],
        "parameter_size": "3.2B",
        "quantization_level": "Q4_K_M",
    }


def tag(model: str) -> Dict[str, Any]:
    """One model of ``/api/tags``."""
    return {
        "name": model,
        "model": model,
        "modified_at": created_at(0),
        "size": 2019393189,
        "digest": provider_id("", "ollama/digest", 64, "0123456789abcdef"),
        "details": _details(),
    }
