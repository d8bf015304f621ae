"""What a fixture may not keep: credentials, in the request and wherever the response repeats them.

Strategy: deny by default, in three places, and then once more across the whole exchange.

* Headers are kept only from allow lists (:data:`REQUEST_HEADERS`, :data:`RESPONSE_HEADERS`
  and :data:`RESPONSE_HEADER_PREFIXES`); every other one is dropped.
* Query parameters keep their name, but their value only where the name is known to be
  harmless (:data:`SAFE_QUERY`): a credential can travel under any name (Azure's SAS
  ``sig``, APIM's ``subscription-key``, ``token``, ``code``), so anything else is redacted.
* A JSON request body loses the value of every field, at any depth, whose key names a
  credential (:func:`is_secret_key`).

Each credential value found on the way (a dropped header that carries one, a redacted
query value, a redacted body field) is then masked wherever it appears again: in the
kept headers and the body of the request, and in the response's headers and bytes,
status line to last chunk. A provider that echoes a key in an error message ("Incorrect
API key provided: sk-...") or a gateway that reflects a header would otherwise write it
to disk. The mask is ``*`` repeated to the value's own length, so chunk sizes and
offsets stay as the upstream sent them; in an AWS event stream the frame's message CRC
is computed again over the masked bytes, so a replay still passes the checksum check.
Values shorter than :data:`MIN_MASKED` are not searched for (``test`` would mask every
"test" in a reply); they are still removed from where they were sent.
``redacted`` and ``masked`` name what was removed and where, never the value.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Mapping, Sequence, Tuple
from urllib.parse import parse_qsl, unquote, urlencode

__all__ = [
    "MIN_MASKED",
    "REDACTED",
    "REQUEST_HEADERS",
    "RESPONSE_HEADERS",
    "RESPONSE_HEADER_PREFIXES",
    "SAFE_QUERY",
    "Redaction",
    "is_secret_key",
    "mask_body",
]

REDACTED = "[redacted]"
#: Request headers a fixture keeps: what says how the body is to be read and which
#: API version was asked for. Everything else (credentials, cookies, organisation and
#: project, AWS signing, SDK telemetry, host) is dropped and named in ``redacted``.
REQUEST_HEADERS = frozenset(
    {
        "accept",
        "content-type",
        "anthropic-version",
        "anthropic-beta",
        "openai-beta",
        "x-amz-target",
    }
)
#: Response headers a fixture keeps: the body's type and what a backend's retry and
#: error handling read. Request ids, organisation, project, cookies are dropped.
RESPONSE_HEADERS = frozenset(
    {
        "content-type",
        "retry-after",
        "retry-after-ms",
        "x-should-retry",
        "x-amzn-errortype",
    }
)
#: Response header prefixes kept: rate-limit counters.
RESPONSE_HEADER_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
#: Query parameters whose value is kept: the ones the providers' APIs define that carry no
#: credential (Gemini's ``alt=sse``, Azure OpenAI's ``api-version``). Any other keeps its
#: name only.
SAFE_QUERY = frozenset(
    {"alt", "api-version", "api_version", "stream", "beta", "limit", "order", "after", "before"}
)
#: The shortest credential value searched for elsewhere in the exchange.
MIN_MASKED = 8

#: Dropped request headers whose value is a credential (or holds one), beyond the named
#: forms: any whose name says key, token, secret, auth, cookie, session, signature,
#: credential or password.
_CREDENTIAL_HEADER = re.compile(r"key|token|secret|auth|cookie|session|signature|credential|password", re.I)
#: Body keys that name a credential, at any depth: ``api_key``, ``metadata.token``,
#: ``client_secret``, ``password``, ``refresh_token``; and the end user's own identity
#: (``user``, ``safety_identifier``, ``user_id``), which no fixture needs.
_SECRET_KEY = re.compile(
    r"^(?:.*[_-])?(?:api[_-]?key|apikey|secret|password|passwd|token|access[_-]?token|refresh[_-]?token|"
    r"auth[_-]?token|session[_-]?token|private[_-]?key|credentials?|authorization|signature[_-]?key)$"
    r"|^(?:user|user[_-]?id|safety[_-]?identifier)$",
    re.I,
)
#: Keys that end like a credential but are a provider's own, non-secret field.
_NOT_SECRET = frozenset({"signature", "thoughtsignature", "thought_signature", "encrypted_content"})
_AWS_PARTS = re.compile(r"(?:Credential=([A-Z0-9]{16,128})/|Signature=([0-9a-fA-F]{16,}))")
_EVENT_STREAM = "application/vnd.amazon.eventstream"


def is_secret_key(key: str) -> bool:
    """Whether a JSON body field named ``key`` holds a credential (or the end user's identity)."""
    return key.lower() not in _NOT_SECRET and bool(_SECRET_KEY.match(key))


def _header_secrets(name: str, value: str) -> List[str]:
    """The credential values inside a dropped request header's value."""
    if not _CREDENTIAL_HEADER.search(name):
        return []
    if name == "authorization":
        scheme, _, rest = value.partition(" ")
        if scheme.upper().startswith("AWS4-HMAC"):
            return [v for pair in _AWS_PARTS.findall(rest) for v in pair if v]
        return [rest.strip()] if rest.strip() else [value]
    if name == "cookie":
        return [part.partition("=")[2].strip() for part in value.split(";") if "=" in part]
    return [value.strip()]


@dataclass
class Redaction:
    """What one exchange's redaction removed (by name) and the values to mask wherever they recur."""

    redacted: List[str] = field(default_factory=list)
    masked: List[str] = field(default_factory=list)
    #: Each credential value and where it was found, longest first when masking.
    secrets: Dict[str, str] = field(default_factory=dict)

    def _secret(self, value: str, where: str) -> None:
        value = value.strip()
        if len(value) >= MIN_MASKED:
            self.secrets.setdefault(value, where)
            decoded = unquote(value)
            if decoded != value and len(decoded) >= MIN_MASKED:
                self.secrets.setdefault(decoded, where)

    # -- the request -----------------------------------------------------------

    def headers(
        self,
        headers: Mapping[str, str],
        side: str,
        allowed: FrozenSet[str],
        prefixes: Tuple[str, ...] = (),
    ) -> Dict[str, str]:
        """The headers a fixture keeps; the dropped ones named, their credentials noted."""
        kept: Dict[str, str] = {}
        for name, value in headers.items():
            lower = name.lower()
            if lower in allowed or lower.startswith(prefixes):
                kept[lower] = value
                continue
            self.redacted.append(f"{side} header {lower}")
            if side == "request":
                for secret in _header_secrets(lower, value):
                    self._secret(secret, f"request header {lower}")
        return kept

    def query(self, query: str) -> str:
        """The query with every value outside :data:`SAFE_QUERY` redacted."""
        out = []
        for name, value in parse_qsl(query, keep_blank_values=True):
            if name.lower() not in SAFE_QUERY:
                self.redacted.append(f"request query {name}")
                self._secret(value, f"request query {name}")
                value = REDACTED
            out.append((name, value))
        return urlencode(out)

    def body(self, body: bytes) -> bytes:
        """The JSON body with every credential field redacted, at any depth; other bodies unchanged."""
        try:
            parsed = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return body
        found: List[str] = []
        cleaned = self._clean(parsed, "", found)
        if not found:
            return body
        self.redacted.extend(f"request body {path}" for path in found)
        return json.dumps(cleaned, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def _clean(self, value: Any, path: str, found: List[str]) -> Any:
        if isinstance(value, dict):
            out = {}
            for key, inner in value.items():
                where = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and is_secret_key(key) and isinstance(inner, (str, int, float)):
                    found.append(where)
                    self._secret(str(inner), f"request body {where}")
                    out[key] = REDACTED
                else:
                    out[key] = self._clean(inner, where, found)
            return out
        if isinstance(value, list):
            return [self._clean(inner, f"{path}[{i}]", found) for i, inner in enumerate(value)]
        return value

    # -- wherever the values recur --------------------------------------------

    def mask_text(self, text: str, where: str) -> str:
        """``text`` with every credential value masked, each masking named under ``where``."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            count = text.count(secret)
            if count:
                text = text.replace(secret, "*" * len(secret))
                self.masked.append(f"{where}: {count} x the value of {self.secrets[secret]}")
        return text

    def mask_headers(self, headers: Mapping[str, str], where: str) -> Dict[str, str]:
        return {name: self.mask_text(value, f"{where} header {name}") for name, value in headers.items()}

    def mask_chunks(
        self, chunks: Sequence[Tuple[int, float, bytes]], content_type: str
    ) -> List[Tuple[int, float, bytes]]:
        """The response's chunks with every credential value masked, boundaries unchanged."""
        if not self.secrets or not chunks:
            return list(chunks)
        body = b"".join(data for _, _, data in chunks)
        masked = mask_body(body, self.secrets, content_type, self.masked)
        if masked == body:
            return list(chunks)
        out = []
        for offset, at, data in chunks:
            out.append((offset, at, masked[offset : offset + len(data)]))
        return out


def mask_body(body: bytes, secrets: Mapping[str, str], content_type: str, notes: List[str]) -> bytes:
    """``body`` with each of ``secrets`` masked to its own length; an event stream's CRCs made right again.

    A value is found as it was sent, JSON-escaped (``\\/``, ``\\u0053``: a provider may
    escape any character of a string it echoes), and inside base64 (an event stream's
    ``bytes`` payload, a data URL): a base64 run that decodes to bytes holding a value
    is decoded, masked and encoded again, to the same length, so it still decodes.
    ``notes`` gets one line per value masked: where in the body, and whose value it was.
    """
    data = bytearray(body)
    touched: List[Tuple[int, int]] = []
    for secret in sorted(secrets, key=len, reverse=True):
        places = []
        for match in _spellings(secret).finditer(bytes(data)):
            data[match.start() : match.end()] = b"*" * (match.end() - match.start())
            touched.append((match.start(), match.end()))
            places.append(match.start())
        if places:
            shown = ", ".join(str(p) for p in places[:5]) + (" ..." if len(places) > 5 else "")
            notes.append(f"response body at byte {shown}: the value of {secrets[secret]}")
    for match in _BASE64_RUN.finditer(bytes(data)):
        run = match.group()
        if len(run) % 4:
            continue
        try:
            plain = base64.b64decode(run, validate=True)
        except (binascii.Error, ValueError):
            continue
        inner: List[str] = []
        masked = mask_body(plain, secrets, "", inner)
        if masked != plain:
            data[match.start() : match.end()] = base64.b64encode(masked)  # the same length: masks keep it
            touched.append((match.start(), match.end()))
            notes.extend(f"response body, in the base64 at byte {match.start()}: {note}" for note in inner)
    if touched and content_type.split(";")[0].strip().lower() == _EVENT_STREAM:
        _fix_event_stream_crcs(data, touched)
    return bytes(data)


#: A run of base64 long enough to hold a value of :data:`MIN_MASKED` bytes or more.
_BASE64_RUN = re.compile(rb"[A-Za-z0-9+/]{12,}={0,2}")


@functools.lru_cache(maxsize=256)
def _spellings(secret: str) -> re.Pattern[bytes]:
    """A pattern for ``secret`` as sent, or with any of its characters JSON-escaped."""
    parts = []
    for char in secret:
        forms = [re.escape(char.encode("utf-8"))]
        if ord(char) < 0x10000:
            hexed = "".join(f"[{h.lower()}{h.upper()}]" if h.isalpha() else h for h in f"{ord(char):04x}")
            forms.append(b"\\\\u" + hexed.encode("ascii"))
        if char in "/\\\"":
            forms.append(re.escape(b"\\" + char.encode("ascii")))
        parts.append(b"(?:" + b"|".join(forms) + b")")
    return re.compile(b"".join(parts))


_PRELUDE = struct.Struct("!II")


def _fix_event_stream_crcs(data: bytearray, touched: Sequence[Tuple[int, int]]) -> None:
    """Compute again the message CRC of every event-stream frame a masking changed.

    The prelude (total and headers length) and its CRC never change, since a mask keeps
    the length; the message CRC covers every byte before it, so it must follow the mask.
    """
    position = 0
    while position + 12 <= len(data):
        total, _ = _PRELUDE.unpack_from(data, position)
        end = position + total
        if total < 16 or end > len(data):
            return  # a truncated or damaged stream: leave the rest as it came
        if any(a < end and b > position for a, b in touched):
            crc = zlib.crc32(bytes(data[position : end - 4])) & 0xFFFFFFFF  # unsigned on every Python
            struct.pack_into("!I", data, end - 4, crc)
        position = end
