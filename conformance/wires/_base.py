"""What every wire is made of: the :class:`Wire` base, and the helpers wires share passed on.

Strategy: a wire is data plus small pure functions of ``(scenario, mode, request)``.
It never awaits and never touches a socket; timing and disconnects are data
(``StreamReply(hang=True)``, ``HangReply()``) that the fake provider carries out.

The helpers live a floor down, each with its own concern, and are passed on from here
so that a wire of one's own imports them from one place: the ids and signatures a
provider makes up (``_ids``), a reply's bytes and how a stream is cut (``_chunks``),
a scenario's shapes (``_variants``), the request checks several wires make
(``_request``), and the data of a scripted conversation (``_script``, loaded when first
asked for).
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, Any, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from ..fixture import CONFORMANCE_FIXTURE
from ._chunks import CUT_IN_CALL, cut_events, cut_short, dumps, event_chunks, split_text, tcp_chunks
from ._ids import fresh_id, http_date, obfuscation, provider_id, signature
from ._request import check_function_tool, check_json_post, check_question, text_of
from ._variants import UNPARSED_VARIANTS, Variant, stream_cut_variants

if TYPE_CHECKING:
    from ..contract import Reasoning, Usage
    from ..provider.replies import RecordedRequest, Reply
    from ._schema import schema_difference
    from ._script import History, ScriptedCall, ScriptedTurn, TurnEvents

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
    "History": "_script",
    "ScriptedCall": "_script",
    "ScriptedTurn": "_script",
    "TurnEvents": "_script",
    "schema_difference": "_schema",
}


def __getattr__(name: str) -> Any:
    module = _REEXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__package__}.{module}"), name)
    globals()[name] = value
    return value


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
        # The call id hook has two names, and a wire written before they were one defines
        # either: ``loop_call_id(name, seed)``, or ``scripted_call_id(seed)`` from when the
        # backend suite's calls were all get_weather. A class that defines one gets the
        # other, so each suite, and a super() call under either name, finds the same method.
        own = vars(cls)
        hook = own.get("scripted_call_id", own.get("loop_call_id"))
        if hook is not None:
            hook = _with_tool_name(hook)
            names = ("scripted_call_id",) if "loop_call_id" in own else ("scripted_call_id", "loop_call_id")
            for alias in names:
                setattr(cls, alias, hook)

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
    #: The event a provider sends in a stream while it thinks, to keep it alive
    #: (Anthropic's ``ping``), as bytes; empty where it documents none. Where it has one,
    #: ``slow-first-token`` has a ``pinged`` shape: the silence filled with it.
    keepalive: bytes = b""
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

    def request_asks(self, condition: str, request: RecordedRequest) -> bool:
        """Whether ``request`` carries ``condition`` (one of
        :data:`~conformance.wires._variants.REQUEST_CONDITIONS`), so the provider may send a
        shape that needs it. A wire that knows no way to ask for it plays the shape to every
        request: ``True`` by default."""
        return True

    def unasked(self, variant: Variant, request: RecordedRequest) -> str:
        """Why the provider would never send ``variant`` to ``request``; empty where it may."""
        from ._variants import REQUEST_CONDITIONS

        if not variant.asks or self.request_asks(variant.asks, request):
            return ""
        return f"the request did not ask for {REQUEST_CONDITIONS[variant.asks]}"

    def reported_usage(self, scenario: str, variant: str) -> Usage:
        """The counts the reply to ``scenario`` (in shape ``variant``) reports, where it reports usage.

        By default the fixture's; a wire whose provider counts a blocked reply's prompt
        alone (Gemini: nothing was generated) says so, and the backend is held to that.
        """
        return CONFORMANCE_FIXTURE.usage

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

    def tied_reasoning(self, scenario: str, variant: str = "") -> Tuple[Tuple[Reasoning, ...], ...]:
        """The reasoning the provider ties to each call of its reply to ``scenario``, call by
        call in the order it sends them (Gemini 3's ``thoughtSignature`` on a
        ``functionCall`` part); empty where it ties none to any call.

        A backend must pass each call's on unaltered (``ToolCall.reasoning``): the provider
        refuses the call sent back without it. By default none.
        """
        return ()

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
            return UNPARSED_VARIANTS
        if scenario in ("slow-first-token", "stall"):
            from ._latency import latency_variants

            return latency_variants(self, scenario, mode or "stream")
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
    #: Whether a result sent back without an id answers the calls to its function in
    #: order, as the provider matches it (Gemini), where the provider sends ids; the
    #: gate's invariants then pair such results the same way as the history reader.
    pairs_results_by_name: bool = False
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
        from ._script import first_problem

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
    #: The shapes of a tool turn the provider sends with its reasoning before the call (a
    #: thinking block, then ``tool_use``), each a variant of ``tool-result`` named
    #: :data:`REASONING_THEN_CALL`, its ``reasoning`` what the turn carries. The case plays
    #: that turn first, and builds the next from what the backend returned: the reasoning
    #: must come out of the backend with the call, and go back with it unaltered.
    reasoning_tool_turns: Tuple[Variant, ...] = ()
    #: Whether the provider needs a tool turn's reasoning back with its calls (Anthropic
    #: refuses a thinking turn's ``tool_use`` sent back without its thinking); ``False``
    #: where it takes the turn back without it (Gemini needs only the call's signature).
    turn_reasoning_required: bool = True

    def tool_turn_reasoning(self, variant: str) -> Tuple[Reasoning, ...]:
        """The reasoning the tool turn of the ``tool-result`` variant ``variant`` carries
        before its call; empty where that variant's turn carries none."""
        for shape in self.reasoning_tool_turns:
            if shape.name == variant:
                return tuple(shape.reasoning)
        return ()

    def scripted_call_id(self, name: str, seed: str) -> str:
        """The id of a scripted call to the tool ``name``, shaped like this provider's own and
        the same for a seed.

        Both suites take their calls' ids from here: the backend suite's ``get_weather``
        calls of ``tool-result``, ``parallel-tool-calls`` and ``corrupt-arguments`` (the
        seed names the wire, the case and the call) and the agent-loop suite's (one per
        stage, request and call position). By default the prefix of :attr:`tool_call_id`
        (its words and underscores, and the ``01`` after them where there is one:
        ``call_``, ``toolu_01``, ``toolu_vrtx_01``; ``call_`` where it is ``None``) and 24
        letters and digits. A wire whose provider shapes ids otherwise (another length or
        alphabet, the tool's name in it) says how here: real clients may mishandle an id
        not shaped like their provider's. :meth:`loop_call_id` is the same method.
        """
        import re

        found = re.match(r"(?:[A-Za-z]+_)+(?:01)?", self.tool_call_id or "call_")
        return provider_id(found.group(0) if found else "call_", seed)

    #: The same hook under the name the agent-loop suite first gave it; a wire that
    #: defines either name has both (see ``__init_subclass__``).
    loop_call_id = scripted_call_id

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
        rows.extend(self.reasoning_tool_turns)
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


def _with_tool_name(method: Any) -> Any:
    """``method`` as ``scripted_call_id(name, seed)``; one that takes the seed alone (its
    first form, every call a ``get_weather``) is called without the name."""
    code = getattr(method, "__code__", None)
    takes_varargs = 0x04  # CO_VARARGS: a *args method takes the name already
    if code is None or code.co_argcount != 2 or code.co_flags & takes_varargs:
        return method

    @functools.wraps(method)
    def scripted_call_id(self: Wire, name: str, seed: str) -> str:
        return str(method(self, seed))

    return scripted_call_id


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
