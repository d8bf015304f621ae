"""The recorded-exchange fixture: one JSON file per request and its response.

Strategy: a fixture is written once, by the recorder, and read by the replay wire;
both go through this module, so the format has one definition. Secrets are removed
here, when the fixture is built, deny by default: a header is kept only if it is on
an allow list (:data:`REQUEST_HEADERS`, :data:`RESPONSE_HEADERS`), a query parameter
named in :data:`SECRET_PARAMS` keeps its name but not its value, and a request body's
JSON keeps everything but the fields in :data:`SECRET_FIELDS`. What was removed is
listed by name in ``redacted``, never by value. The response body is kept byte for
byte, chunk by chunk: its boundaries are what a replay must reproduce.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import ProviderInputError

__all__ = [
    "FORMAT",
    "REQUEST_HEADERS",
    "RESPONSE_HEADERS",
    "RESPONSE_HEADER_PREFIXES",
    "SECRET_FIELDS",
    "SECRET_PARAMS",
    "Fixture",
    "Stamp",
    "model_of",
    "schema_hash",
    "strip_url",
]

#: The ``format`` every fixture carries; a reader refuses one it does not know.
FORMAT = "conformance-fixture/1"

#: Request headers a fixture keeps: what says how the body is to be read and which
#: API version was asked for. Everything else (credentials, cookies, organisation and
#: project, AWS signing, SDK telemetry, host) is dropped and named in ``redacted``.
REQUEST_HEADERS = frozenset({
    "accept", "content-type", "anthropic-version", "anthropic-beta", "openai-beta", "x-amz-target",
})
#: Response headers a fixture keeps: the body's type and what a backend's retry and
#: error handling read. Request ids, organisation, project, cookies are dropped.
RESPONSE_HEADERS = frozenset({
    "content-type", "retry-after", "retry-after-ms", "x-should-retry", "x-amzn-errortype",
})
#: Response header prefixes kept: rate-limit counters.
RESPONSE_HEADER_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
#: Query parameters whose value is a credential (Gemini's ``key``, AWS presigning).
SECRET_PARAMS = frozenset({
    "key", "api_key", "apikey", "access_token", "x-amz-signature", "x-amz-credential",
    "x-amz-security-token",
})
#: Top-level request body fields whose value is a credential.
SECRET_FIELDS = frozenset({"api_key", "apikey", "access_token", "secret", "client_secret", "token"})

REDACTED = "[redacted]"


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


def _read_bytes(obj: Mapping[str, Any], where: str) -> bytes:
    if isinstance(obj.get("text"), str):
        return str(obj["text"]).encode("utf-8")
    if isinstance(obj.get("base64"), str):
        return base64.b64decode(obj["base64"], validate=True)
    raise ProviderInputError(f"{where}: expected a 'text' or 'base64' field, got {sorted(obj)}")


def _kept_headers(
    headers: Mapping[str, str],
    side: str,
    allowed: FrozenSet[str],
    prefixes: Tuple[str, ...],
    redacted: List[str],
) -> Dict[str, str]:
    kept: Dict[str, str] = {}
    for name, value in headers.items():
        lower = name.lower()
        if lower in allowed or lower.startswith(prefixes):
            kept[lower] = value
        else:
            redacted.append(f"{side} header {lower}")
    return kept


def _clean_query(query: str, redacted: List[str]) -> str:
    pairs = parse_qsl(query, keep_blank_values=True)
    out = []
    for name, value in pairs:
        if name.lower() in SECRET_PARAMS:
            redacted.append(f"request query {name}")
            value = REDACTED
        out.append((name, value))
    return urlencode(out)


def _clean_body(body: bytes, redacted: List[str]) -> bytes:
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return body
    if not isinstance(parsed, dict) or not SECRET_FIELDS & {k.lower() for k in parsed}:
        return body
    for key in list(parsed):
        if key.lower() in SECRET_FIELDS:
            redacted.append(f"request body {key}")
            parsed[key] = REDACTED
    return json.dumps(parsed, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


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
    ) -> Fixture:
        """A fixture built from a raw exchange, secrets removed (deny by default)."""
        redacted: List[str] = []
        path, _, query = target.partition("?")
        kept_request = _kept_headers(request_headers, "request", REQUEST_HEADERS, (), redacted)
        kept_response = _kept_headers(
            response_headers, "response", RESPONSE_HEADERS, RESPONSE_HEADER_PREFIXES, redacted
        )
        return cls(
            stamp, method, path, _clean_query(query, redacted), kept_request,
            _clean_body(request_body, redacted), status, http_version, kept_response,
            tuple(chunks), tuple(events), tuple(sorted(set(redacted))), complete, chunked,
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
                "chunks": [
                    {"offset": offset, "at": round(at, 6), **_bytes_field(data)}
                    for offset, at, data in self.chunks
                ],
            },
            "events": [dict(e) for e in self.events],
            "redacted": list(self.redacted),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, indent=1) + "\n"

    @classmethod
    def from_json(cls, doc: Any, source: str = "") -> Fixture:
        """Read a fixture document; a wrong format or a missing field is an error that names it."""
        where = source or "fixture"
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
            raise ProviderInputError(f"{where}: expected format {FORMAT!r}, got {found!r}")
        try:
            stamp = Stamp(**doc["stamp"])
            request, response = doc["request"], doc["response"]
            chunks = []
            offset = 0
            for index, chunk in enumerate(response["chunks"]):
                data = _read_bytes(chunk, f"{where}: response chunk {index}")
                if chunk.get("offset", offset) != offset:
                    raise ProviderInputError(
                        f"{where}: response chunk {index} says offset {chunk.get('offset')}, "
                        f"but the chunks before it hold {offset} bytes"
                    )
                chunks.append((offset, float(chunk.get("at", 0.0)), data))
                offset += len(data)
            return cls(
                stamp, request["method"], request["path"], request.get("query", ""),
                dict(request.get("headers", {})), _read_bytes(request["body"], f"{where}: request body"),
                int(response["status"]), response.get("http_version", "HTTP/1.1"),
                dict(response.get("headers", {})), tuple(chunks), tuple(doc.get("events", ())),
                tuple(doc.get("redacted", ())), bool(response.get("complete", True)),
                bool(response.get("chunked", True)), source,
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ProviderInputError):
                raise
            raise ProviderInputError(f"{where}: not a valid fixture ({type(exc).__name__}: {exc})") from None

    @classmethod
    def load(cls, path: str) -> Fixture:
        with open(path, encoding="utf-8") as handle:
            try:
                doc = json.load(handle)
            except ValueError as exc:
                raise ProviderInputError(f"{path}: not JSON ({exc})") from None
        return cls.from_json(doc, source=path)


def load_folder(folder: str) -> List[Fixture]:
    """Every ``*.json`` fixture in ``folder``, in file-name order (the order they were recorded)."""
    if not os.path.isdir(folder):
        raise ProviderInputError(f"no fixture folder at {folder!r}")
    names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    return [Fixture.load(os.path.join(folder, name)) for name in names]
