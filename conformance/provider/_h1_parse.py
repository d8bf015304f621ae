"""HTTP/1.1 requests read from a connection's buffer: the head, then the body.

Strategy: a mixin of the connection protocol rather than a parser object of its own,
because the hot path is one request per callback and every attribute hop counts. The
head is found with one ``find(b"\\r\\n\\r\\n")`` and checked with a few whole-line
regular expressions; only a head that fails them is taken apart again, to name the
fault in the 400. A body is read by Content-Length or by the chunked coding, never
both; anything else that could let two parsers disagree on where a request ends
(RFC 9112 11.2, request smuggling) is answered with an error and a close.

A client sends the same head again and again (an SDK on a kept-alive connection, the
cases of one backend, a load test): the last head that parsed cleanly is kept, with
what was read from it, per provider. The same bytes again skip the parse, which is
most of a request's cost here; anything else, and every head that fails, takes the
whole path.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

if TYPE_CHECKING:
    from ._hub import Hub

__all__ = ["RequestParser"]

# States of a connection.
HEAD = 0  # waiting for (the rest of) a request head
BODY = 1  # waiting for a Content-Length body
CHUNKED = 2  # reading a chunked body
BUSY = 3  # a request is being answered (or hangs)
DRAIN = 4  # an error was answered; discarding input until the client leaves
CLOSED = 5
H2 = 6  # handed to the h2 session

_TOKEN_CHARS = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_TOKEN = re.compile(_TOKEN_CHARS + rb"\Z")
_REQUEST_LINE = re.compile(rb"(" + _TOKEN_CHARS + rb") ([^\x00-\x20\x7f]+) (HTTP/[0-9]\.[0-9])\Z")
#: A whole header section, checked in one pass: token, colon, a value without controls.
_HEADER_BLOCK = re.compile(
    rb"(?:" + _TOKEN_CHARS + rb":[^\x00-\x08\x0a-\x1f\x7f]*(?:\r\n|\Z))*\Z"
)
_BAD_TARGET = re.compile(rb"[\x00-\x20\x7f]")
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}\Z")
_BARE_LF = re.compile(rb"(?<!\r)\n")

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
PREFACE_HEAD = b"PRI * HTTP/2.0\r\n\r\n"
_MAX_CHUNK_LINE = 4096
#: Heads up to this size are kept for the next request (see the module's docstring).
_KEPT_HEAD = 4096

H2C_ONLY = (
    "this fake provider was started with http2=True and speaks h2c only "
    "(prior knowledge or Upgrade: h2c); use an HTTP/2 client or start it with http2=False"
)


class RequestParser:
    """The reading half of :class:`._http1.H1Connection`: buffer in, request fields out."""

    hub: Hub
    transport: Any
    buf: bytearray
    state: int
    first: bool
    keep_alive: bool
    head_only: bool
    method: str
    path: str
    query: str
    version: str
    headers: Dict[str, str]
    parts: List[bytes]
    length: int
    size: int
    chunk_left: int
    chunk_phase: int  # 0 size line, 1 data, 2 CRLF after data, 3 trailers
    upgrade: Optional[bytes]
    #: How much of an unfinished head was already searched for a bare LF.
    lf_checked: int = 0

    # What the connection does with what was read.
    def _fail(self, status: int, message: str, parsed: bool) -> bool:
        raise NotImplementedError

    def _complete(self, body: bytes) -> None:
        raise NotImplementedError

    def _start_h2(self, data: bytes) -> None:
        raise NotImplementedError

    body_since: float
    paused: bool

    def _wait_body(self) -> None:
        raise NotImplementedError

    def _process(self) -> None:
        buf = self.buf
        while True:
            state = self.state
            if state == HEAD:
                # While the client reads nothing, answer no more of its pipeline.
                if not buf or self.paused or not self._parse_head():
                    return
            elif state == BODY:
                length = self.length
                if len(buf) < length:
                    if not self.body_since:
                        self._wait_body()
                    return
                body = bytes(buf[:length])
                del buf[:length]
                self._complete(body)
            elif state == CHUNKED:
                if not self._read_chunks():
                    if not self.body_since and self.state == CHUNKED:
                        self._wait_body()
                    return
                self._complete(b"".join(self.parts))
            else:
                return

    def _parse_head(self) -> bool:
        """Parse a head from the buffer; False when more bytes are needed or it failed."""
        buf = self.buf
        while buf.startswith(b"\r\n"):  # RFC 9112 2.2: ignore empty lines before a request
            del buf[:2]
        end = buf.find(b"\r\n\r\n")
        limit = self.hub.max_header_bytes
        if end < 0:
            if len(buf) > limit:
                self._head_too_large()
            elif _BARE_LF.search(buf, self.lf_checked) is not None:
                # Without this the head never ends for us, and the client waits for
                # header_timeout to learn why.
                self._fail(
                    400,
                    "the request head ends a line with a bare LF; HTTP/1.1 lines end with CRLF "
                    "(RFC 9112 2.2): send \\r\\n",
                    False,
                )
            else:
                self.lf_checked = len(buf)
            return False
        self.lf_checked = 0
        if end + 4 > limit:
            self._head_too_large()
            return False
        head = bytes(buf[:end])
        del buf[: end + 4]
        kept = self.hub.h1_head
        if kept is not None and kept[0] == head:
            return self._start_kept(kept[1])
        line_end = head.find(b"\r\n")
        first = head if line_end < 0 else head[:line_end]
        match = _REQUEST_LINE.match(first)
        if match is None:
            return self._bad_request_line(first)
        method, target, version = match.groups()
        if version == b"HTTP/1.1":
            self.version = "HTTP/1.1"
        elif version == b"HTTP/1.0":
            self.version = "HTTP/1.0"
        elif method == b"PRI" and target == b"*" and version == b"HTTP/2.0" and self.first:
            self._start_h2(PREFACE_HEAD + bytes(buf))
            return False
        else:
            return self._fail(505, f"HTTP version {version.decode('ascii')} is not supported", False)
        if target[:1] != b"/":
            if target == b"*":
                pass
            elif target[:7] == b"http://" or target[:8] == b"https://":  # absolute form
                slash = target.find(b"/", target.find(b"//") + 2)
                target = target[slash:] if slash >= 0 else b"/"
            else:
                return self._fail(400, f"malformed request target {target[:80]!r}", False)
        path, _, query = target.decode("utf-8", "replace").partition("?")
        self.method = method.decode("ascii")
        self.path = path
        self.query = query
        self.first = False
        self.head_only = self.method == "HEAD"
        self.parts = []
        headers: Dict[str, str] = {}
        self.headers = headers
        if line_end >= 0:
            block = head[line_end + 2 :]
            if _HEADER_BLOCK.match(block) is None:
                return self._bad_header(block)
            for line in block.decode("latin-1").split("\r\n"):
                name, _, value = line.partition(":")
                name = name.lower()
                value = value.strip(" \t")
                if name in headers:
                    headers[name] = f"{headers[name]}, {value}"
                else:
                    headers[name] = value
        if not self._start_body(headers):
            return False
        if len(head) <= _KEPT_HEAD and self.upgrade is None:
            expect = self.version == "HTTP/1.1" and headers.get("expect", "").lower() == "100-continue"
            self.hub.h1_head = (head, (
                self.method, self.path, self.query, self.version, dict(headers), self.keep_alive,
                self.state, self.length, expect,
            ))
        return True

    def _start_kept(self, kept: Tuple[Any, ...]) -> bool:
        """Take up a head read before: what parsing and :meth:`_start_body` made of it."""
        method, self.path, self.query, self.version, headers, self.keep_alive, state, length, expect = kept
        self.method = method
        self.head_only = method == "HEAD"
        self.headers = dict(headers)  # each request gets a dict of its own
        self.first = False
        self.parts = []
        self.size = 0
        self.upgrade = None
        self.state = state
        if state == CHUNKED:
            self.chunk_phase = 0
            self.chunk_left = 0
            pending = not self.buf
        else:
            self.length = length
            pending = len(self.buf) < length
        if pending and expect:
            self.transport.write(CONTINUE)
        return True

    def _bad_request_line(self, line: bytes) -> bool:
        parts = line.split(b" ")
        if len(parts) == 3:
            if not _TOKEN.match(parts[0]):
                return self._fail(400, f"malformed request method {parts[0][:40]!r}", False)
            if _BAD_TARGET.search(parts[1]) or not parts[1]:
                return self._fail(400, f"malformed request target {parts[1][:80]!r}", False)
        return self._fail(400, f"malformed request line {line[:80]!r}", False)

    def _bad_header(self, block: bytes) -> bool:
        for line in block.split(b"\r\n"):
            colon = line.find(b":")
            if line[:1] in (b" ", b"\t"):
                problem = f"obsolete line folding in header line {line[:80]!r}"
            elif colon < 0:
                problem = f"malformed header line {line[:80]!r} (no colon)"
            elif not _TOKEN.match(line[:colon]):
                problem = f"malformed header name {line[:colon][:80]!r}"
            elif _BAD_VALUE.search(line, colon + 1):
                problem = f"control character in header {line[:colon][:80]!r}"
            else:
                continue
            return self._fail(400, problem, True)
        return self._fail(400, "malformed header section", True)

    def _start_body(self, headers: Dict[str, str]) -> bool:
        hub = self.hub
        http11 = self.version == "HTTP/1.1"
        if http11:  # RFC 9112 3.2: exactly one Host, else 400
            host = headers.get("host")
            if host is None:
                return self._fail(400, "HTTP/1.1 request without a Host header (RFC 9112 3.2)", True)
            if "," in host:
                return self._fail(400, f"more than one Host header: {host[:80]!r}", True)
        connection = headers.get("connection")
        self.keep_alive = http11 and (connection is None or "close" not in connection.lower())
        self.upgrade = None
        upgrade = headers.get("upgrade")
        if upgrade is not None and http11 and "h2c" in upgrade.lower():
            settings = headers.get("http2-settings")
            if settings is not None and hub.h2_available():
                self.upgrade = settings.strip().encode("latin-1")
        if hub.http2_only and self.upgrade is None:
            return self._fail(505, H2C_ONLY, True)
        coding = headers.get("transfer-encoding")
        length = headers.get("content-length")
        self.size = 0
        if coding is not None:
            if length is not None:
                return self._fail(400, "both Content-Length and Transfer-Encoding were sent", True)
            if coding.lower() != "chunked":
                failed = self._check_codings(coding)
                if failed:
                    return False
            self.state = CHUNKED
            self.chunk_phase = 0
            self.chunk_left = 0
            pending = not self.buf
        elif length is not None:
            if length.isdigit() and length.isascii():
                self.length = int(length)
            else:  # a list of equal values is allowed (RFC 9110 8.6)
                values = {v.strip() for v in length.split(",")}
                value = values.pop() if len(values) == 1 else ""
                if not (value.isascii() and value.isdigit()):
                    return self._fail(400, f"malformed Content-Length {length!r}", True)
                self.length = int(value)
            if self.length > hub.max_body_bytes:
                return self._fail(
                    413,
                    f"request body of {self.length} bytes is larger than max_body_bytes="
                    f"{hub.max_body_bytes}",
                    True,
                )
            self.state = BODY
            pending = len(self.buf) < self.length
        else:
            self.length = 0
            self.state = BODY
            pending = False
        if pending and http11 and headers.get("expect", "").lower() == "100-continue":
            self.transport.write(CONTINUE)
        return True

    def _check_codings(self, coding: str) -> bool:
        """Answer a Transfer-Encoding other than plain chunked; True if it was refused.

        RFC 9112 6.3: a request whose final coding is not chunked has no knowable
        length (400); 6.1: a coding the server does not know gets 501, rather than a
        body recorded still encoded; 7: chunked is applied at most once.
        """
        codings = [c.strip().lower() for c in coding.split(",") if c.strip()]
        if codings.count("chunked") > 1:
            return not self._fail(400, f"Transfer-Encoding {coding!r} applies chunked more than once", True)
        if not codings or codings[-1] != "chunked":
            return not self._fail(
                400, f"unsupported Transfer-Encoding {coding!r}: a request's last coding must be chunked",
                True,
            )
        if len(codings) > 1:
            others = ", ".join(codings[:-1])
            return not self._fail(
                501,
                f"Transfer-Encoding {coding!r}: this provider decodes only chunked, not {others}; "
                "send the body with chunked alone (or Content-Length)",
                True,
            )
        return False

    def _read_chunks(self) -> bool:
        """Decode chunked framing from the buffer; True once the last chunk is in."""
        buf = self.buf
        while True:
            phase = self.chunk_phase
            if phase == 1:
                take = min(self.chunk_left, len(buf))
                if not take:
                    return False
                self.parts.append(bytes(buf[:take]))
                del buf[:take]
                self.chunk_left -= take
                if self.chunk_left:
                    return False
                self.chunk_phase = 2
                continue
            if phase == 2:
                if len(buf) < 2:
                    return False
                if buf[:2] != b"\r\n":
                    self._fail(400, "bad chunked encoding: chunk data not followed by CRLF", True)
                    return False
                del buf[:2]
                self.chunk_phase = 0
                continue
            end = buf.find(b"\r\n")
            if end < 0:
                if len(buf) > _MAX_CHUNK_LINE:
                    self._fail(400, "bad chunked encoding: chunk line too long", True)
                return False
            line = bytes(buf[:end])
            del buf[: end + 2]
            if phase == 3:  # trailers, read and dropped; an empty line ends the body
                if not line:
                    return True
                continue
            size_text = line.split(b";", 1)[0].strip(b" \t")
            if not _HEX.match(size_text):
                self._fail(400, f"bad chunked encoding: chunk size {size_text[:40]!r}", True)
                return False
            size = int(size_text, 16)
            if size == 0:
                self.chunk_phase = 3
                continue
            self.size += size
            if self.size > self.hub.max_body_bytes:
                self._fail(
                    413,
                    f"chunked request body is larger than max_body_bytes={self.hub.max_body_bytes}",
                    True,
                )
                return False
            self.chunk_left = size
            self.chunk_phase = 1

    def _head_too_large(self) -> None:
        buf = self.buf
        line_end = buf.find(b"\r\n")
        parsed = False
        if 0 < line_end <= self.hub.max_header_bytes:
            parts = bytes(buf[:line_end]).split(b" ")
            if len(parts) == 3 and _TOKEN.match(parts[0]) and parts[1][:1] == b"/":
                path, _, query = parts[1].decode("utf-8", "replace").partition("?")
                self.method, self.path, self.query = parts[0].decode("ascii"), path, query
                self.version = parts[2].decode("latin-1")
                self.headers = {}
                self.parts = []
                parsed = True
        self._fail(
            431,
            f"request header section is larger than max_header_bytes={self.hub.max_header_bytes}",
            parsed,
        )

