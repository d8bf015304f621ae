"""The recorded-exchange fixture: one JSON file per request and its response.

Strategy: a fixture is written once, by the recorder, and read by the replay wire;
both go through this module, so the format has one definition. Secrets are removed
when the fixture is built (:mod:`.redact`: deny by default, and every credential value
masked wherever the exchange repeats it); what was removed is listed by name in
``redacted`` and ``masked``, never by value. The response body is kept byte for byte
otherwise, chunk by chunk: its boundaries are what a replay must reproduce. Reading
checks every field's type and range when the folder is opened (never coercing
``"false"`` to false or ``200.7`` to 200), and each error names the file, the JSON path
of the field and, for a syntax error, the line.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import hashlib
import json
import os
import re
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple
from urllib.parse import urlsplit, urlunsplit

from ..errors import ProviderInputError
from .redact import REQUEST_HEADERS, RESPONSE_HEADER_PREFIXES, RESPONSE_HEADERS, Redaction

__all__ = [
    "FORMAT",
    "REQUEST_HEADERS",
    "RESPONSE_HEADERS",
    "RESPONSE_HEADER_PREFIXES",
    "Fixture",
    "Stamp",
    "model_of",
    "schema_hash",
    "strip_url",
]

#: The ``format`` every fixture carries; a reader refuses one it does not know.
FORMAT = "conformance-fixture/1"
#: The HTTP versions a recorded response can have been answered in.
HTTP_VERSIONS = ("HTTP/1.0", "HTTP/1.1", "HTTP/2")


def strip_url(url: str) -> str:
    """``scheme://host[:port]/path`` of a URL: credentials, query and fragment removed."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


_PATH_MODEL = re.compile(r"/models/([^/:]+)|/model/([^/]+)/")


def model_of(path: str, body: Any) -> Optional[str]:
    """The model a request names: its body's ``model``, else the one in its path."""
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        return str(body["model"])
    found = _PATH_MODEL.search(path)
    if found:
        from urllib.parse import unquote

        return unquote(found.group(1) or found.group(2))
    return None


def tool_schemas(body: Any) -> Any:
    """The tools a request declares, as sent (``tools``, or Bedrock's ``toolConfig.tools``)."""
    if not isinstance(body, dict):
        return None
    if "tools" in body:
        return body["tools"]
    config = body.get("toolConfig")
    return config.get("tools") if isinstance(config, dict) else None


def schema_hash(body: Any) -> Optional[str]:
    """``sha256:`` of the canonical JSON of the request's tools, or ``None`` without tools."""
    tools = tool_schemas(body)
    if tools is None:
        return None
    canonical = json.dumps(tools, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _bytes_field(data: bytes) -> Dict[str, str]:
    """Bytes as JSON: ``{"text": ...}`` where they are UTF-8, else ``{"base64": ...}``."""
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


@dataclass(frozen=True)
class Stamp:
    """What a fixture was recorded against, so a replay can tell when it no longer fits."""

    wire: str
    model: Optional[str]
    base_url: str
    recorded_at: str
    schema_hash: Optional[str]
    stream: bool
    user_agent: Optional[str]
    #: The conformance scenario this exchange stands for, when the recording was made for one.
    scenario: Optional[str] = None
    #: The ``GateToolset`` run id the recorded agent loop ran its tools with: every tool
    #: result it sent back names fixture ids made from it, and a replay must repeat them.
    run_id: Optional[str] = None

    def recorded(self) -> _dt.datetime:
        """:attr:`recorded_at` as an aware UTC datetime."""
        text = self.recorded_at[:-1] + "+00:00" if self.recorded_at.endswith("Z") else self.recorded_at
        when = _dt.datetime.fromisoformat(text)
        return when if when.tzinfo else when.replace(tzinfo=_dt.timezone.utc)


@dataclass(frozen=True)
class Fixture:
    """One recorded exchange: the request, the response chunk by chunk, and its events."""

    stamp: Stamp
    method: str
    path: str
    query: str
    request_headers: Mapping[str, str]
    request_body: bytes
    status: int
    http_version: str
    response_headers: Mapping[str, str]
    #: The response body as it came: ``(offset, seconds after the request went, bytes)``.
    chunks: Sequence[Tuple[int, float, bytes]]
    #: The raw event log of the response (``WireEvent.as_dict()`` entries).
    events: Sequence[Mapping[str, Any]] = ()
    #: What was removed when the fixture was written, by name.
    redacted: Sequence[str] = ()
    #: Whether the response ended normally (``False``: the client or upstream left mid-way).
    complete: bool = True
    #: Whether the body came in HTTP chunked encoding (a stream), not as one sized body.
    chunked: bool = True
    #: Where each credential value was masked in what was kept (by where, never the value).
    masked: Sequence[str] = ()
    #: Why the recorder stopped reading before the response's end (its size cap, its time
    #: limit), or ``""``; a truncated fixture is also not ``complete``.
    truncated: str = ""
    #: Where it was read from, if it was.
    source: str = field(default="", compare=False)

    @property
    def body(self) -> bytes:
        return b"".join(chunk for _, _, chunk in self.chunks)

    @property
    def content_type(self) -> str:
        return str(self.response_headers.get("content-type", "application/octet-stream"))

    @property
    def json(self) -> Any:
        try:
            return json.loads(self.request_body)
        except (ValueError, UnicodeDecodeError):
            return None

    @classmethod
    def redacted_from(
        cls,
        stamp: Stamp,
        method: str,
        target: str,
        request_headers: Mapping[str, str],
        request_body: bytes,
        status: int,
        http_version: str,
        response_headers: Mapping[str, str],
        chunks: Sequence[Tuple[int, float, bytes]],
        events: Sequence[Mapping[str, Any]] = (),
        complete: bool = True,
        chunked: bool = True,
        truncated: str = "",
    ) -> Fixture:
        """A fixture built from a raw exchange, secrets removed (deny by default, see :mod:`.redact`)."""
        redaction = Redaction()
        path, _, query = target.partition("?")
        kept_request = redaction.headers(request_headers, "request", REQUEST_HEADERS)
        kept_response = redaction.headers(
            response_headers, "response", RESPONSE_HEADERS, RESPONSE_HEADER_PREFIXES
        )
        cleaned_query = redaction.query(query)
        cleaned_body = redaction.body(request_body)
        # Every credential found above, wherever else the exchange repeats it.
        if redaction.secrets:
            kept_request = redaction.mask_headers(kept_request, "request")
            cleaned_body = redaction.mask_text(
                cleaned_body.decode("utf-8", "surrogateescape"), "request body"
            ).encode("utf-8", "surrogateescape")
            path = redaction.mask_text(path, "request path")
            kept_response = redaction.mask_headers(kept_response, "response")
            content_type = str(kept_response.get("content-type", ""))
            chunks = redaction.mask_chunks(chunks, content_type)
            events = [_masked_event(e, redaction) for e in events]
        return cls(
            stamp,
            method,
            path,
            cleaned_query,
            kept_request,
            cleaned_body,
            status,
            http_version,
            kept_response,
            tuple(chunks),
            tuple(events),
            tuple(sorted(set(redaction.redacted))),
            complete,
            chunked,
            tuple(redaction.masked),
            truncated,
        )

    def to_json(self) -> Dict[str, Any]:
        """The fixture as the JSON document the recorder writes."""
        return {
            "format": FORMAT,
            "stamp": dict(self.stamp.__dict__),
            "request": {
                "method": self.method,
                "path": self.path,
                "query": self.query,
                "headers": dict(self.request_headers),
                "body": _bytes_field(self.request_body),
            },
            "response": {
                "status": self.status,
                "http_version": self.http_version,
                "headers": dict(self.response_headers),
                "complete": self.complete,
                "chunked": self.chunked,
                "truncated": self.truncated,
                "chunks": [
                    {"offset": offset, "at": round(at, 6), **_bytes_field(data)}
                    for offset, at, data in self.chunks
                ],
            },
            "events": [dict(e) for e in self.events],
            "redacted": list(self.redacted),
            "masked": list(self.masked),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, indent=1) + "\n"

    @classmethod
    def from_json(cls, doc: Any, source: str = "") -> Fixture:
        """Read a fixture document, every field checked; an error names the file and the field's path."""
        return _Reader(source or "fixture").fixture(doc, source)

    @classmethod
    def load(cls, path: str) -> Fixture:
        """Read and check the fixture at ``path``; a syntax error names its line and column."""
        try:
            with open(path, "rb") as handle:
                raw = handle.read()
        except OSError as exc:
            raise ProviderInputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        duplicates: List[Tuple[Dict[str, Any], str]] = []
        try:
            doc = json.loads(raw.decode("utf-8"), object_pairs_hook=lambda pairs: _object(pairs, duplicates))
        except UnicodeDecodeError as exc:
            raise ProviderInputError(f"{path}: not UTF-8 at byte {exc.start}") from None
        except json.JSONDecodeError as exc:
            raise ProviderInputError(
                f"{path}: line {exc.lineno}, column {exc.colno}: not JSON ({exc.msg})"
            ) from None
        except RecursionError:
            raise ProviderInputError(f"{path}: nested too deeply to be a fixture") from None
        if duplicates:
            # JSON leaves a repeated key to the reader (the last one wins in Python): a
            # fixture that says two things in one place says neither.
            try:
                where = _path_of(doc, duplicates[0][0]) or "$"
            except RecursionError:
                where = "$"
            key = duplicates[0][1]
            raise ProviderInputError(f"{path}: {where}: the key {key!r} is given twice; keep one")
        return cls.from_json(doc, source=path)


def _object(pairs: List[Tuple[str, Any]], duplicates: List[Tuple[Dict[str, Any], str]]) -> Dict[str, Any]:
    """A JSON object as ``json`` builds it, each repeated key noted with its object."""
    built = dict(pairs)
    if len(built) != len(pairs):
        seen: Set[str] = set()
        for key, _ in pairs:
            if key in seen:
                duplicates.append((built, key))
                break
            seen.add(key)
    return built


def _path_of(doc: Any, target: Dict[str, Any], path: str = "$") -> Optional[str]:
    """The JSON path of the object ``target`` (by identity) within ``doc``."""
    if doc is target:
        return path
    inner = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in inner:
        found = _path_of(value, target, f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}")
        if found:
            return found
    return None


def _masked_event(event: Mapping[str, Any], redaction: Redaction) -> Mapping[str, Any]:
    """An event log entry with any credential in its text fields masked too."""
    out: Dict[str, Any] = {}
    for key, value in event.items():
        out[key] = redaction.mask_text(value, f"event {key}") if isinstance(value, str) else value
    return out


_STAMP_FIELDS = {f.name for f in fields(Stamp)}
_STAMP_REQUIRED = ("wire", "model", "base_url", "recorded_at", "schema_hash", "stream", "user_agent")
_OPTIONAL_STR = ("model", "schema_hash", "user_agent", "scenario", "run_id")
_TOP = frozenset({"format", "stamp", "request", "response", "events", "redacted", "masked"})
_REQUEST = frozenset({"method", "path", "query", "headers", "body"})
_RESPONSE = frozenset({"status", "http_version", "headers", "complete", "chunked", "truncated", "chunks"})
_METHOD = re.compile(r"^[A-Z][A-Z-]{0,19}$")


class _Reader:
    """Checks a fixture document field by field, naming the file and the JSON path of what is wrong."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, path: str, expected: str, got: Any) -> ProviderInputError:
        shown = repr(got)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        return ProviderInputError(f"{self.where}: {path}: expected {expected}, got {shown}")

    def object(self, value: Any, path: str, known: Optional[frozenset] = None) -> Dict[str, Any]:  # type: ignore[type-arg]
        if not isinstance(value, dict):
            raise self.fail(path, "an object", value)
        if known is not None:
            unknown = sorted(set(value) - known)
            if unknown:
                raise self.fail(
                    f"{path}.{unknown[0]}",
                    f"one of the known fields ({', '.join(sorted(known))})",
                    unknown[0],
                )
        return value

    def string(self, value: Any, path: str, *, optional: bool = False) -> Any:
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise self.fail(path, "a string or null" if optional else "a string", value)
        return value

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, "true or false (a JSON boolean, not a string)", value)
        return value

    def integer(self, value: Any, path: str, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.fail(path, f"a whole number from {low} to {high}", value)
        return value

    def number(self, value: Any, path: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
            raise self.fail(path, "a number of seconds, 0 or more", value)
        return float(value)

    def headers(self, value: Any, path: str) -> Dict[str, str]:
        headers = self.object(value, path)
        for name, text in headers.items():
            self.string(text, f"{path}.{name}")
        return dict(headers)

    def strings(self, value: Any, path: str) -> Tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(path, "a list of strings", value)
        return tuple(self.string(item, f"{path}[{i}]") for i, item in enumerate(value))

    def data(self, value: Any, path: str) -> bytes:
        shape = self.object(value, path)
        keys = sorted(set(shape) & {"text", "base64"})
        if len(keys) != 1:
            raise self.fail(path, 'exactly one of "text" or "base64"', sorted(shape))
        text = self.string(shape[keys[0]], f"{path}.{keys[0]}")
        if keys[0] == "text":
            return bytes(text.encode("utf-8", "surrogatepass"))
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise self.fail(f"{path}.base64", "standard base64", text) from None

    def stamp(self, value: Any) -> Stamp:
        doc = self.object(value, "$.stamp", frozenset(_STAMP_FIELDS))
        for name in _STAMP_REQUIRED:
            if name not in doc:
                raise self.fail(f"$.stamp.{name}", "a field every stamp has", "nothing")
        for name in ("wire", "base_url", "recorded_at"):
            self.string(doc[name], f"$.stamp.{name}")
        for name in _OPTIONAL_STR:
            self.string(doc.get(name), f"$.stamp.{name}", optional=True)
        self.boolean(doc["stream"], "$.stamp.stream")
        stamp = Stamp(**doc)
        try:
            stamp.recorded()
        except ValueError:
            raise self.fail(
                "$.stamp.recorded_at", "an ISO 8601 time such as 2026-11-30T10:41:07Z", doc["recorded_at"]
            ) from None
        return stamp

    def fixture(self, doc: Any, source: str) -> Fixture:
        top = self.object(doc, "$")
        if top.get("format") != FORMAT:
            raise self.fail("$.format", repr(FORMAT), top.get("format"))
        self.object(top, "$", _TOP)
        for name in ("stamp", "request", "response"):
            if name not in top:
                raise self.fail(f"$.{name}", "a field every fixture has", "nothing")
        stamp = self.stamp(top["stamp"])
        request = self.object(top["request"], "$.request", _REQUEST)
        response = self.object(top["response"], "$.response", _RESPONSE)
        method = self.string(request.get("method"), "$.request.method")
        if not _METHOD.match(method):
            raise self.fail("$.request.method", "an HTTP method such as POST", method)
        path = self.string(request.get("path"), "$.request.path")
        if not path.startswith("/"):
            raise self.fail("$.request.path", "a path starting with /", path)
        query = self.string(request.get("query", ""), "$.request.query")
        if "body" not in request:
            raise self.fail("$.request.body", "the request body", "nothing")
        status = self.integer(response.get("status"), "$.response.status", 100, 599)
        version = self.string(response.get("http_version", "HTTP/1.1"), "$.response.http_version")
        if version not in HTTP_VERSIONS:
            raise self.fail("$.response.http_version", f"one of {', '.join(HTTP_VERSIONS)}", version)
        raw_chunks = response.get("chunks")
        if not isinstance(raw_chunks, list):
            raise self.fail("$.response.chunks", "a list of chunks", raw_chunks)
        chunks = []
        offset = 0
        for index, chunk in enumerate(raw_chunks):
            where = f"$.response.chunks[{index}]"
            self.object(chunk, where, frozenset({"offset", "at", "text", "base64"}))
            data = self.data({k: v for k, v in chunk.items() if k in ("text", "base64")}, where)
            if "offset" in chunk and self.integer(chunk["offset"], f"{where}.offset", 0, 2**62) != offset:
                raise ProviderInputError(
                    f"{self.where}: {where}.offset: says {chunk['offset']}, but the chunks before it hold "
                    f"{offset} bytes"
                )
            chunks.append((offset, self.number(chunk.get("at", 0.0), f"{where}.at"), data))
            offset += len(data)
        events = top.get("events", [])
        if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
            raise self.fail("$.events", "a list of event objects", events)
        return Fixture(
            stamp,
            method,
            path,
            query,
            self.headers(request.get("headers", {}), "$.request.headers"),
            self.data(request["body"], "$.request.body"),
            status,
            version,
            self.headers(response.get("headers", {}), "$.response.headers"),
            tuple(chunks),
            tuple(events),
            self.strings(top.get("redacted", []), "$.redacted"),
            self.boolean(response.get("complete", True), "$.response.complete"),
            self.boolean(response.get("chunked", True), "$.response.chunked"),
            self.strings(top.get("masked", []), "$.masked"),
            self.string(response.get("truncated", ""), "$.response.truncated"),
            source,
        )


def load_folder(folder: str) -> List[Fixture]:
    """Every ``*.json`` fixture in ``folder``, in file-name order (the order they were recorded)."""
    if not os.path.isdir(folder):
        raise ProviderInputError(f"no fixture folder at {folder!r}")
    names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    return [Fixture.load(os.path.join(folder, name)) for name in names]
