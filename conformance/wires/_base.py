"""What every wire is made of: the :class:`Wire` base and the helpers wires share.

Strategy: a wire is data plus small pure functions of ``(scenario, mode, request)``.
It never awaits and never touches a socket; timing and disconnects are data
(``StreamReply(hang=True)``, ``HangReply()``) that the fake provider carries out.
Streams are cut with :func:`tcp_chunks` so that events, JSON strings and multi-byte
UTF-8 characters straddle chunk boundaries the way TCP delivers them, the same way
on every run.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Collection,
    Dict,
    FrozenSet,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
)

from ..fixture import CONFORMANCE_FIXTURE

if TYPE_CHECKING:
    from ..contract import Reasoning
    from ..provider.replies import JsonReply, RecordedRequest, Reply
    from ._schema import schema_difference
    from ._turns import History, ScriptedCall, ScriptedTurn, TurnEvents, split_text

__all__ = [
    "History",
    "ScriptedCall",
    "ScriptedTurn",
    "TurnEvents",
    "check_json_post",
    "split_text",
    "Variant",
    "Wire",
    "check_function_tool",
    "CUT_IN_CALL",
    "cut_events",
    "cut_short",
    "stream_cut_variants",
    "check_question",
    "dumps",
    "event_chunks",
    "fresh_id",
    "header_retry_after",
    "http_date",
    "obfuscation",
    "provider_id",
    "schema_difference",
    "signature",
    "tcp_chunks",
    "text_of",
]

#: Names this module passes on from where they live, loaded when first asked for: the
#: turn and schema helpers serve a case's requests, not the import of a test module.
_REEXPORTS = {
    "History": "_turns",
    "ScriptedCall": "_turns",
    "ScriptedTurn": "_turns",
    "TurnEvents": "_turns",
    "split_text": "_turns",
    "schema_difference": "_schema",
}


def __getattr__(name: str) -> Any:
    module = _REEXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__package__}.{module}"), name)
    globals()[name] = value
    return value


_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def dumps(obj: Any) -> str:
    """JSON as providers send it: compact, UTF-8 left as is."""
    import json  # per reply, not per import: a test module that names a wire sends nothing yet

    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _sha256_constructor() -> Any:
    """CPython's own SHA-256 where it has one, else hashlib's: the digests are the same.

    Every wire makes its ids when it is imported; hashlib would load OpenSSL for them,
    which costs a test module several milliseconds before any case runs.
    """
    for name in ("_sha2", "_sha256"):  # CPython 3.12 and later; 3.9 to 3.11
        try:
            return importlib.import_module(name).sha256
        except ImportError:
            continue
    import hashlib

    return hashlib.sha256


_SHA256 = _sha256_constructor()


def _digest(data: bytes) -> bytes:
    """The SHA-256 digest of ``data``."""
    return bytes(_SHA256(data).digest())


@functools.lru_cache(maxsize=4096)  # a conversation asks for the same ids turn after turn
def provider_id(prefix: str, seed: str, length: int = 24, alphabet: str = _ALNUM) -> str:
    """An id shaped like a provider's own (``call_`` + 24 characters), the same for a seed.

    Real clients reject or mishandle ids like ``call_1``; these look random but are
    derived from ``seed`` so that a failure message is the same on every run.
    """
    digest = _digest(seed.encode("utf-8"))
    while len(digest) < length:
        digest += _digest(digest)
    return prefix + "".join(alphabet[b % len(alphabet)] for b in digest[:length])


@functools.lru_cache(maxsize=1024)
def signature(seed: str, size: int = 72) -> str:
    """An opaque signature as providers send one: ``size`` bytes in standard base64, padded,
    the same for a seed. Real signatures are base64 of binary data, and an SDK that holds
    them as bytes re-encodes them, so they must decode."""
    import binascii

    digest = _digest(seed.encode("utf-8"))
    while len(digest) < size:
        digest += _digest(digest)
    return binascii.b2a_base64(digest[:size], newline=False).decode("ascii")


def fresh_id(prefix: str, length: int, alphabet: str = _ALNUM) -> str:
    """A request id shaped like the provider's, new on every response.

    Real servers never repeat one; a client that logs, traces or deduplicates by it
    must see them differ. Nothing a check compares depends on it.
    """
    # One read of the system's random source per id, not one per character: each read
    # releases the interpreter lock, and a busy run makes thousands of these ids.
    size = len(alphabet)
    usable = 256 - 256 % size  # bytes at or above this would favour the alphabet's start
    picked: List[str] = []
    while len(picked) < length:
        picked += [alphabet[b % size] for b in os.urandom(2 * length) if b < usable]
    return prefix + "".join(picked[:length])


def http_date() -> str:
    """The ``date`` header every real response carries (RFC 9110 IMF-fixdate), now."""
    import email.utils  # per reply, not per import: it loads socket and urllib

    return email.utils.formatdate(usegmt=True)


def obfuscation(seed: str) -> str:
    """The random padding OpenAI puts last in every stream delta since about Aug 2025.

    It hides token lengths from anyone watching the traffic; clients ignore it. Its
    length varies (1 to 16 characters here), derived from ``seed``.
    """
    length = 1 + _digest(seed.encode("utf-8"))[0] % 16
    return provider_id("", f"obfuscation/{seed}", length)


def tcp_chunks(events: Sequence[bytes], seed: str) -> List[bytes]:
    """Cut a stream's bytes the way TCP might deliver them, deterministically.

    The cuts fall at pseudo-random offsets derived from ``seed`` (1 to 48 bytes
    apart), plus two that are always made: one inside the first multi-byte UTF-8
    character and one inside the first JSON string value, so that a backend that
    decodes or parses per chunk is caught.
    """
    data = b"".join(events)
    if not data:
        return []
    cuts = _telling_cuts(data)
    digest = _digest(seed.encode("utf-8"))
    position, counter = 0, 0
    while True:
        if counter >= len(digest):
            digest = _digest(digest)
            counter = 0
        position += 1 + digest[counter] % 48
        counter += 1
        if position >= len(data):
            break
        cuts.add(position)
    return _cut(data, cuts)


def event_chunks(events: Sequence[bytes], seed: str) -> List[bytes]:
    """Cut a stream into each event in two pieces, deterministically: coarser than
    :func:`tcp_chunks`, and far cheaper to send.

    Each event is cut once, at a pseudo-random offset derived from ``seed``, and the
    two cuts :func:`tcp_chunks` always makes are made too (inside the first multi-byte
    UTF-8 character and inside the first JSON string value). So no event arrives whole
    in one read, and a reader that decodes or parses per chunk is still caught; what is
    left out is the many small pieces, which a loop over a tested backend gains nothing
    from and which cost a write each.
    """
    data = b"".join(events)
    if not data:
        return []
    cuts = _telling_cuts(data)
    start = 0
    for index, event in enumerate(events):
        if len(event) > 1:
            digest = _digest(f"{seed}/{index}".encode())
            cuts.add(start + 1 + int.from_bytes(digest[:4], "big") % (len(event) - 1))
        start += len(event)
        cuts.add(start)
    return _cut(data, cuts)


#: The lead byte of a multi-byte UTF-8 character.
_MULTI_BYTE_LEAD = re.compile(rb"[\xc0-\xff]")


def _telling_cuts(data: bytes) -> set[int]:
    """The cuts every stream gets: inside its first multi-byte character and its first string."""
    cuts = set()
    lead = _MULTI_BYTE_LEAD.search(data)
    if lead is not None:
        cuts.add(lead.start() + 1)
    quote = data.find(b'":"')
    if quote != -1 and quote + 5 < len(data):
        cuts.add(quote + 5)
    return cuts


def _cut(data: bytes, cuts: Collection[int]) -> List[bytes]:
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(data)), len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


#: The ``stream-cut`` variants cut inside a tool call, in either mode (a case in one mode
#: whose backend asks for the other form gets the same place to cut).
CUT_IN_CALL = frozenset({"inside-tool-call", "tool-call-body"})


def cut_events(events: Sequence[bytes], keep: int, inside: bool = True) -> List[bytes]:
    """A stream cut short: its first ``keep`` events whole, then, where ``inside``, the first
    half of the next one (the cut falls inside an event rather than between two).

    The provider then ends it without its terminal event (``StreamReply(end="close")``).
    """
    kept = [bytes(e) for e in events[:keep]]
    if inside and keep < len(events):
        following = bytes(events[keep])
        kept.append(following[: max(1, len(following) // 2)])
    return kept


def cut_short(reply: JsonReply, inside: str) -> JsonReply:
    """A whole ``reply`` cut short in the middle of ``inside`` (its first place in the body)
    and closed cleanly: its ``content-length`` still names the whole body."""
    import dataclasses

    body = reply.encoded()
    needle = inside.encode("utf-8")
    at = body.find(needle)
    cut = at + max(1, len(needle) // 2) if at >= 0 else len(body) // 2
    return dataclasses.replace(reply, end="close", cut_at=cut)


def stream_cut_variants(
    terminal: str, docs: str, seen: str, whole: str, call: str = "a call's first argument fragment"
) -> Dict[str, Tuple[Variant, ...]]:
    """The shapes of ``stream-cut`` in each mode, for a provider whose turn ends with ``terminal``.

    ``docs`` is where the provider documents that end, ``seen`` a client's thread about a
    stream cut before it, ``whole`` where it documents the whole reply, ``call`` what of
    a call comes before the cut. A connection that
    dies mid-answer (a proxy's idle timeout, a load balancer draining, a crash) is a
    network failure every provider's clients meet.
    """
    source = f"{docs}; {seen}"
    body = (
        f"{whole}; Azure/azure-sdk-for-python#20888 (a client made to raise when the peer "
        "closes before the whole body: a connection that dies mid-body leaves fewer bytes "
        "than its Content-Length)"
    )
    return {
        "stream-cut/stream": (
            Variant(
                "after-text", f"text, then the stream cut inside an event, before {terminal}", source
            ),
            Variant(
                "inside-tool-call",
                f"{call}, then the stream cut inside an event, before {terminal}",
                source,
            ),
            Variant(
                "between-events", f"text, then the stream cut between two events, before {terminal}", source
            ),
        ),
        "stream-cut/chat": (
            Variant("text-body", "a text reply's body cut short inside the text", body),
            Variant("tool-call-body", "a tool call reply's body cut short inside the arguments", body),
        ),
    }


@dataclass(frozen=True)
class Variant:
    """One real shape a provider answers a scenario with, and where it was seen.

    A case runs every variant of its scenario, each on a fresh provider, because a
    backend that handles one real shape of a failure and not another passes a
    single-shape test and breaks in production. What the backend must report that
    depends on the shape lives here, so the checks read it rather than the wire:
    ``retry_after``, the delay the reply carries (``None`` where it carries none),
    the tool call's ``call_id`` (``None`` where the provider sends none), and an
    ``error_kind`` where the shape means another kind than the scenario's own.

    ``error_kinds`` is the set of kinds a careful client can derive from the shape's
    machine-readable fields (type, code, status, event), where they allow more than
    one: OpenAI's in-stream ``server_error`` whose code is null, which only its
    message calls an overload, is ``("overloaded", "server_error")``. A verdict never
    rests on a message's wording. Empty, the one kind is ``error_kind``, else the
    scenario's own.
    """

    #: Short, for skip keys and failure lines: ``credit-balance-400``. The empty name
    #: is the one shape of a scenario that has only one, and is not shown.
    name: str
    #: What the shape is, in a few words: ``400 credit balance too low``.
    title: str = ""
    #: Where it was seen: a capture, or the provider's own source or docs (repo and path, or URL).
    source: str = ""
    retry_after: Optional[float] = None
    call_id: Optional[str] = None
    error_kind: Optional[str] = None
    #: The reasoning the provider returns with its answer in this shape (a ``reasoning``
    #: variant), which the backend must pass on unaltered.
    reasoning: Tuple[Reasoning, ...] = ()
    error_kinds: Tuple[str, ...] = ()

    def label(self, wire: Wire) -> str:
        """``anthropic: 400 credit balance too low``."""
        return f"{wire.name}: {self.title or self.name}"

    def accepted_kinds(self, scenario_kind: Optional[str]) -> Tuple[str, ...]:
        """The error kinds a backend may report for this shape; empty where it must not fail.

        ``scenario_kind`` is the scenario's own kind (``None`` for a turn that ends normally).
        """
        if self.error_kinds:
            return self.error_kinds
        kind = self.error_kind or scenario_kind
        return (kind,) if kind is not None else ()


class Wire:
    """One provider's wire format, as a fake provider answers it.

    A wire of your own needs only :attr:`name` and :meth:`reply`; ``reply`` answering
    ``None`` skips the case. The rest are hooks with defaults: :attr:`title` is the
    name, the generation call is any ``POST`` (or the one whose path ends with
    :attr:`generation_path`), the stream flag is the JSON body's ``"stream": true``,
    other requests get a clear 404, and the request is not checked until
    :meth:`check_request` says what to look for.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A title set in a class body stands, also for subclasses; otherwise the
        # title follows the name, so that messages never read "one  request".
        if "title" in vars(cls):
            cls._title_from_name = False
        elif cls.name and (not cls.title or cls._title_from_name):
            cls.title = cls.name
            cls._title_from_name = True

    #: Short name used in case names and the command line: ``openai-chat``.
    name: str = ""
    #: What ``LLMError.provider`` is expected to say, informally: ``openai``.
    provider: str = ""
    #: The human title for docs and messages; the name where none is set.
    title: str = ""
    _title_from_name: bool = False
    #: The id the tool call carries on this wire; ``None`` where the provider sends
    #: none and the backend must make one up.
    tool_call_id: Optional[str] = None
    #: Scenarios this provider has no such case for, with the reason; ``reply``
    #: answers ``None`` for them and the case is skipped with the reason.
    unsupported: Mapping[str, str] = {}
    #: Why a call whose argument text is not JSON never reaches a client of this
    #: provider, by form (``chat`` for a whole reply, ``stream``): where it carries a
    #: call's arguments as a JSON object, not as text. The ``corrupt-arguments`` case
    #: is skipped with the reason in that mode.
    argument_text_absent: Mapping[str, str] = {}
    #: Optional scenarios (``Scenario.optional``) this wire has, such as a frame
    #: whose checksum is wrong where the format carries checksums.
    optional_scenarios: FrozenSet[str] = frozenset()
    #: The ``retry_after`` (seconds) a backend reports for ``rate-limit``; ``None``
    #: where the provider sends no delay, and the backend must report none.
    rate_limit_retry_after: Optional[float] = CONFORMANCE_FIXTURE.retry_after
    #: The text each scenario's reply carries, which the backend must return whole:
    #: the answer of ``text``, and what a ``truncated-tool-call`` turn said before the cut.
    texts: Mapping[str, str] = {
        "text": CONFORMANCE_FIXTURE.text,
        "truncated-tool-call": CONFORMANCE_FIXTURE.preamble,
        "tool-result": CONFORMANCE_FIXTURE.tool_result_answer,
        "reasoning": CONFORMANCE_FIXTURE.text,
    }
    #: What ends a streamed turn on this wire, for messages: ``data: [DONE]``. A stream
    #: that stops before it was cut (``stream-cut``).
    terminal_event: str = "the provider's terminal event"
    #: The scenarios whose reply reports usage, which the backend must pass on; on the
    #: others (and where :meth:`usage_sent` says a reply carried none) it must report ``None``.
    reports_usage: FrozenSet[str] = frozenset(
        {
            "text",
            "tool-call",
            "tool-call-with-stop",
            "tool-result",
            "parallel-tool-calls",
            "truncated-tool-call",
            "content-filter",
            "reasoning",
            "corrupt-arguments",
        }
    )

    #: The path the generation call ends with (``/chat/completions``); empty, any
    #: ``POST`` is the generation call. A wire whose call has no one path (the model
    #: is in it) overrides :meth:`is_generation`.
    generation_path: str = ""

    def usage_sent(self, scenario: str, request: RecordedRequest) -> bool:
        """Whether the reply to ``request`` in ``scenario`` reports usage.

        By default whether ``scenario`` is in :attr:`reports_usage`; a wire whose stream
        reports usage only when asked (OpenAI Chat's ``stream_options.include_usage``)
        reads the request too.
        """
        return scenario in self.reports_usage

    def retry_after_for(self, scenario: str) -> Optional[float]:
        """The delay (seconds) the unnamed shape of ``scenario`` carries, ``None`` where it carries none.

        By default :attr:`rate_limit_retry_after` for ``rate-limit`` and none elsewhere;
        a wire whose other failures carry a delay (Gemini's quota ``RetryInfo``) says so.
        """
        return self.rate_limit_retry_after if scenario == "rate-limit" else None

    def retry_after_sent(self, reply: Reply) -> Optional[float]:
        """The delay ``reply`` carries, in seconds, as a client reads it; ``None`` where it carries none.

        By default the ``retry-after-ms`` header, then ``retry-after`` (seconds, or an
        HTTP-date, read against the clock now); a wire whose provider puts the delay in
        the body (Gemini's ``RetryInfo.retryDelay``) reads it there too.
        """
        return header_retry_after(getattr(reply, "headers", None) or {})

    def call_id(self, scenario: str) -> Optional[str]:
        """The id the provider gives the tool call in ``scenario``, or ``None`` where it sends none.

        By default :attr:`tool_call_id` for every scenario; a wire whose provider sends
        an id in some shapes only (Gemini 3 does, Gemini 2.x does not) overrides this.
        """
        return self.tool_call_id

    #: ``scenario`` (or ``scenario/mode``, where only one mode has them) -> its variants,
    #: where the provider answers it in more than one real shape.
    variants_table: Mapping[str, Tuple[Variant, ...]] = {}

    def variants(self, scenario: str, mode: str = "") -> Tuple[Variant, ...]:
        """The shapes ``scenario`` is answered in (in ``mode``): the table's, or one unnamed shape.

        The unnamed shape expects what the wire says for every scenario:
        :meth:`retry_after_for` and :meth:`call_id`.
        """
        listed = self.variants_table.get(f"{scenario}/{mode}") or self.variants_table.get(scenario)
        if listed:
            return listed
        if scenario == "tool-result":
            return self._history_variants()
        if scenario == "corrupt-arguments":
            from ._unparsed import DEFAULT_VARIANTS

            return DEFAULT_VARIANTS
        return (Variant("", retry_after=self.retry_after_for(scenario), call_id=self.call_id(scenario)),)

    def variant(self, scenario: str, mode: str, name: str) -> Variant:
        """The variant of ``scenario`` in ``mode`` called ``name``; :class:`KeyError` if there is none."""
        for variant in self.variants(scenario, mode):
            if variant.name == name:
                return variant
        raise KeyError(f"{self.name} has no variant {name!r} of {scenario}")

    def is_generation(self, request: RecordedRequest) -> bool:
        """Whether ``request`` is the scenario's own call (not a lookup or a count)."""
        return request.method == "POST" and request.path.endswith(self.generation_path)

    def wants_stream(self, request: RecordedRequest) -> bool:
        """Whether the request asked for a streamed answer (flag, path or query).

        By default the JSON body's ``"stream": true``, as OpenAI and Anthropic take it.
        """
        return isinstance(request.json, dict) and request.json.get("stream") is True

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        """The provider's answer to ``request`` in ``scenario``, or ``None`` if it has none.

        The form (whole or streamed) follows the request, as the real provider's would;
        ``mode`` only tells which case is running. ``variant`` names the shape (see
        :meth:`variants`); the empty name is the first, and a case asks for it without
        the argument, so a ``reply()`` of one's own may leave it out. ``None`` skips
        the case with the reason "<name> has no <scenario> case".
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement reply(scenario, mode, request), returning "
            "a JsonReply, a StreamReply, or None where the provider has no such case"
        )

    def aux_reply(self, request: RecordedRequest) -> Reply:
        """The answer to a request that is not the generation call: a clear 404 by default."""
        from ..provider.replies import JsonReply

        return JsonReply(
            {
                "error": {
                    "message": (
                        f"the {self.title or self.name} fake provider has no route for "
                        f"{request.method} {request.path}; the generation call is what is "
                        "scripted"
                    ),
                    "type": "not_found",
                }
            },
            status=404,
        )

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        """Problems with the generation request: method, path, model, question and tool.

        Each problem is one sentence saying what was expected and what came. By
        default nothing is checked: a wire of your own says what its provider expects
        (:func:`check_json_post` does method, path, body and model).
        """
        return []

    # -- multi-turn: scripted turns and histories (see ``_turns``) -----------------

    #: Whether this provider gives every tool call an id the client must send back
    #: with its result; ``False`` where results are matched by name and order (Ollama).
    sends_call_ids: bool = True
    #: Whether the stream format can interleave two calls' argument fragments (each
    #: fragment names its call by index), so the opt-in stress stage
    #: ``stress-interleaved-calls`` can play; no provider was seen sending that order.
    interleaves_calls: bool = False

    def turn_whole(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[Reply]:
        """The provider's whole reply playing ``turn``; ``None`` where this wire scripts no turns."""
        return None

    def turn_stream(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[TurnEvents]:
        """The provider's stream events playing ``turn``; ``None`` where this wire scripts no turns."""
        return None

    def read_history(self, request: RecordedRequest) -> Optional[History]:
        """The conversation ``request`` carried, in normal form, with every departure from
        the provider's format; ``None`` where this wire cannot read one."""
        return None

    def history_error(self, problems: Sequence[str]) -> Reply:
        """What the real API answers a malformed history with: its own 400.

        By default a generic ``{"error": {"message", "type": "invalid_request_error"}}``
        400 quoting the first problem; each shipped wire gives its provider's shape.
        """
        from ..provider.replies import JsonReply
        from ._turns import first_problem

        return JsonReply(
            {"error": {"message": first_problem(problems), "type": "invalid_request_error"}},
            status=400,
        )

    #: Whether a tool result carries an error flag of its own on this wire (Anthropic
    #: ``is_error``, Bedrock ``status: "error"``, Gemini a ``response.error``); where it
    #: does not, a :class:`~conformance.ToolError` goes back as the result's JSON text.
    marks_tool_errors: bool = False
    #: How the flag is spelled, for failure messages: ``"is_error": true``.
    tool_error_marker: str = ""
    #: The reasoning the provider returns with a tool turn, which the ``reasoning``
    #: variant of ``tool-result`` puts in the history for the backend to echo.
    turn_reasoning: Tuple[Reasoning, ...] = ()
    #: The reasoning the provider ties to the call itself (Gemini's ``thoughtSignature``),
    #: which every variant of ``tool-result`` carries, as the provider's calls always do.
    call_reasoning: Tuple[Reasoning, ...] = ()

    def scripted_call_id(self, seed: str) -> str:
        """A call id in this provider's own shape (its prefix), the same for a seed."""
        prefix = "call_"
        if self.tool_call_id and "_" in self.tool_call_id:
            prefix = self.tool_call_id[: self.tool_call_id.rindex("_") + 1]
        return provider_id(prefix, f"{self.name}/{seed}")

    def _history_variants(self) -> Tuple[Variant, ...]:
        error = f" ({self.tool_error_marker})" if self.tool_error_marker else " (its JSON as the result text)"
        rows = [
            Variant("result", "the earlier call and its result", "the provider's API reference"),
            Variant(
                "error", f"the earlier call and its structured error{error}", "the provider's API reference"
            ),
        ]
        if self.turn_reasoning:
            rows.append(
                Variant(
                    "reasoning",
                    "the earlier call with the reasoning tied to it",
                    "the provider's API reference",
                )
            )
        return tuple(rows)

    def scripts_turns(self) -> bool:
        """Whether this wire can play scripted multi-turn conversations."""
        cls = type(self)
        return cls.turn_stream is not Wire.turn_stream and cls.read_history is not Wire.read_history

    def absent(self, scenario: str) -> Optional[str]:
        """Why this wire has no ``scenario`` case, or ``None`` if it has one."""
        from ..scenarios import SCENARIOS

        if scenario in self.unsupported:
            return self.unsupported[scenario]
        scripted = ("tool-result", "parallel-tool-calls", "corrupt-arguments")
        if scenario in scripted and not self.scripts_turns():
            return (
                f"{self.title or self.name} has no {scenario} case (it scripts no multi-turn "
                "conversations: give it turn_stream, turn_whole and read_history)"
            )
        if scenario == "reasoning" and not self.variants_table.get("reasoning"):
            return (
                f"{self.title or self.name} has no reasoning case (its provider returns no reasoning: "
                "give it variants_table['reasoning'], each Variant with the reasoning it returns)"
            )
        if scenario == "reasoning" and not self.scripts_turns():
            return (
                f"{self.title or self.name} has no reasoning case (it scripts no turns: give it "
                "turn_stream, turn_whole and read_history)"
            )
        if scenario == "corrupt-arguments" and {"chat", "stream"} <= set(self.argument_text_absent):
            reasons = dict.fromkeys(self.argument_text_absent[m] for m in ("chat", "stream"))
            return f"{self.title or self.name} has no {scenario} case: {'; '.join(reasons)}"
        if SCENARIOS[scenario].optional and scenario not in self.optional_scenarios:
            return f"{self.title or self.name} has no {scenario} case (its format has nothing to corrupt)"
        return None

    def absent_in(self, scenario: str, mode: str) -> Optional[str]:
        """Why this wire has no ``scenario`` case in ``mode``: :meth:`absent`, or what one mode lacks."""
        reason = self.absent(scenario)
        if reason is None and scenario == "corrupt-arguments" and mode in self.argument_text_absent:
            why = self.argument_text_absent[mode]
            return f"{self.title or self.name} has no {scenario} case in {mode} mode: {why}"
        return reason

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def header_retry_after(headers: Mapping[str, str]) -> Optional[float]:
    """The delay a reply's headers carry, in seconds: ``retry-after-ms``, then ``retry-after``.

    The order openai-python and anthropic-sdk-python read them in; ``retry-after`` is
    seconds or an HTTP-date. ``None`` where neither is there or neither reads.
    """
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    milliseconds = lowered.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return float(milliseconds) / 1000.0
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    import email.utils  # only for a date, which no shipped wire sends
    import time

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def check_json_post(request: RecordedRequest, model: str, path: str) -> Tuple[List[str], Dict[str, Any]]:
    """What every wire whose call is a JSON POST checks first: method, path, body, model.

    Returns the problems found so far and the body (``{}`` where it is not a JSON
    object, and then the model is not looked at).
    """
    problems: List[str] = []
    if request.method != "POST":
        problems.append(f"expected POST, got {request.method}")
    if not request.path.endswith(path):
        problems.append(f"expected a path ending in {path}, got {request.path}")
    body = json_object(request, problems)
    if body and body.get("model") != model:
        problems.append(f"expected model {model!r}, got {body.get('model')!r}")
    return problems, body


def json_object(request: RecordedRequest, problems: List[str]) -> Dict[str, Any]:
    """The request body as a JSON object, or ``{}`` after noting why it is not one."""
    body = request.json
    if isinstance(body, dict):
        return body
    if not request.body:
        problems.append("expected a JSON body, got an empty body")
    else:
        problems.append(f"expected a JSON object body, got {request.body[:80]!r}")
    return {}


def fixture_tool_schema() -> Mapping[str, Any]:
    """The ``get_weather`` parameters schema every wire expects to see sent."""
    return CONFORMANCE_FIXTURE.tool_parameters


# -- request checks more than one wire makes ------------------------------------------


def text_of(content: Any, part_types: Collection[str] = ("text",)) -> Optional[str]:
    """A message's text: the string itself, or its text parts joined.

    ``None`` where it is neither, or where a text part's ``text`` is not a string.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") in part_types]
        strings = [t for t in texts if isinstance(t, str)]
        if strings and len(strings) == len(texts):
            return "".join(strings)
    return None


def check_question(messages: Sequence[Any], text: Callable[[Any], Optional[str]]) -> List[str]:
    """The problem, if any, with the fixture's question: no ``user`` message whose text asks it."""
    question = CONFORMANCE_FIXTURE.question
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if any(text(m.get("content")) == question for m in users):
        return []
    got = [text(m.get("content")) for m in users]
    return [f"expected a user message {question!r}, got user messages {got!r}"]


def check_function_tool(tools: Any, normal: Callable[[Any], Any] = lambda schema: schema) -> List[str]:
    """The problem, if any, with ``get_weather`` in OpenAI's ``{"type": "function", "function": ...}`` shape.

    ``normal`` rewrites the parameters sent before they are compared, for a client
    that spells the same schema differently.
    """
    if not isinstance(tools, list):
        return [f"expected tools to list the get_weather function, got {tools!r}"]
    functions: List[Dict[str, Any]] = [
        t["function"]
        for t in tools
        if isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("function"), dict)
    ]
    named = [f for f in functions if f.get("name") == CONFORMANCE_FIXTURE.tool_name]
    if not named:
        names = [f.get("name") for f in functions]
        return [
            'expected a tool {"type": "function", "function": {"name": "get_weather", ...}}, '
            f"got function names {names!r}"
        ]
    from ._schema import schema_difference

    parameters = named[0].get("parameters")
    expected = dict(fixture_tool_schema())
    difference = schema_difference(expected, normal(parameters))
    if difference:
        return [f"expected get_weather parameters {expected!r}, got {parameters!r} ({difference})"]
    return []
