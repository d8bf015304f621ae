"""What the fake provider does next on one wire, for an application run: :class:`ProviderScript`.

Strategy: a script names what the provider answers a wire's generation calls with,
and nothing of how: the replies are the wire's own (``wire.reply``, the same the
suites play), and the faults are made from them (the plain answer cut after some
chunks, held before its first chunk, stalled). What can come back relents as it does
for a target with ``retries = True`` (``conformance._checks.retries``): a rate limit
twice, an overload, a server error or a cut once, then the plain answer (the ``text``
case's), each asking for the same short delay in the wire's own form. What will not
come back (a quota, a refused key, a context overflow) is sent to every request, as
the provider would. A script's :attr:`~ProviderScript.kind` says which checks judge
the run (``conformance.app._checks``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Optional, Union

from .._checks.retries import PERMANENT, RELENTS, RETRY_ASKED
from ..errors import ProviderInputError
from ..provider.replies import HangReply, JsonReply, StreamReply
from ..wires._base import Wire

if TYPE_CHECKING:
    from ..provider import RecordedRequest, Reply

__all__ = ["FAULTS", "KINDS", "REPLIES", "ProviderScript", "script_for"]

#: The scenarios a script may name whose answer is a reply (every request gets it).
REPLIES = ("text", "tool-call", "tool-call-with-stop", "truncated-tool-call", "content-filter")

#: The faults a script may name beside the scenarios: the plain answer cut after
#: ``after_chunks`` chunks, held ``seconds`` before its first chunk, stalled after
#: ``after_chunks`` chunks, and held open so that the run can cancel the application.
FAULTS = ("cut", "slow-first-token", "stall", "cancel")

#: Each name a script takes, to the kind of run it makes (which checks judge it).
KINDS = {
    **{name: "reply" for name in REPLIES},
    **{name: "relent" for name in RELENTS},
    **{name: "permanent" for name in PERMANENT},
    "stream-cut": "cut",
    "cut": "cut",
    "slow-first-token": "slow",
    "stall": "stall",
    "cancel": "cancel",
}

#: How long a cut stream waits after its last chunk before it breaks, so that the client
#: has read what came before it.
CUT_AFTER = 0.05


def _did_you_mean(name: str) -> str:
    import difflib  # only on the way to an error

    close = difflib.get_close_matches(name, list(KINDS), n=1, cutoff=0.5)
    return f"did you mean {close[0]!r}?" if close else f"known: {', '.join(KINDS)}"


@dataclass(frozen=True)
class ProviderScript:
    """What the provider answers ``wire``'s generation calls with in the next runs.

    ``what`` is a scenario (:data:`REPLIES`, a failure that can come back such as
    ``rate-limit``, one that cannot such as ``quota``) or a fault (:data:`FAULTS`).
    ``variant`` names one of the scenario's shapes (``"tier-cap-429"``). ``times`` is how
    many failures come before the provider relents with the plain answer (a rate limit
    twice, the others once, by default); ``retry_after`` the delay a failure asks for,
    in seconds, in the wire's own form. ``after_chunks`` places a cut or a stall (by
    default halfway through the answer's
    chunks, so that text went out before it);
    ``seconds`` is how long ``slow-first-token`` holds the first chunk, and
    ``read_timeout`` the application's own read timeout, within which a stall must
    close the connection.
    """

    wire: Wire
    what: str = "text"
    variant: str = ""
    times: Optional[int] = None
    retry_after: float = RETRY_ASKED
    after_chunks: Optional[int] = None
    seconds: float = 0.5
    read_timeout: float = 1.0

    def __post_init__(self) -> None:
        if self.what not in KINDS:
            raise ProviderInputError(
                f"a script for {self.wire.name} cannot play {self.what!r}: {_did_you_mean(self.what)}"
            )
        if self.variant and self.kind in ("reply", "relent", "permanent"):
            names = {v.name for mode in ("chat", "stream") for v in self.wire.variants(self.what, mode)}
            if self.variant not in names:
                shown = ", ".join(sorted(n for n in names if n)) or "none"
                raise ProviderInputError(
                    f"{self.wire.name} has no variant {self.variant!r} of {self.what}; its variants: {shown}"
                )
        if self.what in REPLIES or self.what in RELENTS or self.what in PERMANENT:
            if all(self.wire.absent_in(self.what, mode) for mode in ("chat", "stream")):
                raise ProviderInputError(
                    f"{self.wire.name} has no {self.what} case: {self.wire.absent_in(self.what, 'chat')}"
                )
        for name in ("retry_after", "seconds", "read_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 60:
                raise ProviderInputError(f"{name} is seconds, 0 to 60, got {value!r}")
        for name, least in (("times", 1), ("after_chunks", 0)):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
                raise ProviderInputError(f"{name} is a whole number >= {least}, got {value!r}")
        if self.times is not None and self.kind in ("reply", "permanent", "cancel"):
            raise ProviderInputError(
                f"times does not apply to {self.what!r}: the provider sends it to every request "
                "(times counts the failures before a provider relents: rate-limit, cut, stall...)"
            )

    @property
    def kind(self) -> str:
        """``reply``, ``relent``, ``permanent``, ``cut``, ``slow``, ``stall`` or ``cancel``."""
        return KINDS[self.what]

    @property
    def scenario(self) -> str:
        """The suites' scenario this script plays, as the checks name it."""
        return "stream-cut" if self.kind == "cut" else self.what

    @property
    def relent(self) -> int:
        """How many failures come before the plain answer; 0 where the provider never relents."""
        if self.kind in ("relent", "cut", "stall"):
            return self.times if self.times is not None else RELENTS.get(self.scenario, 1)
        return 0

    def label(self) -> str:
        """``openai-chat rate-limit``, with the variant where one is named."""
        shape = f":{self.variant}" if self.variant else ""
        return f"{self.wire.name} {self.what}{shape}"

    def answer(self, index: int, request: RecordedRequest) -> Union[Reply, Awaitable[Reply]]:
        """The reply to the ``index``-th generation request of a run (0 for the first)."""
        wire = self.wire
        mode = "stream" if wire.wants_stream(request) else "chat"
        kind = self.kind
        if kind in ("reply", "permanent"):
            # A reply, or a failure that will not come back: every request gets it.
            return self._or_absent(wire.reply(self.what, mode, request, self.variant), mode)
        if kind == "cancel":
            return self._or_absent(wire.reply("abort", mode, request), mode)
        plain = self._or_absent(wire.reply("text", mode, request), mode)
        if kind == "slow":
            return self._slow(plain) if index == 0 else plain
        if index >= self.relent:
            return plain
        if kind == "relent":
            return self._failure(mode, request)
        if kind == "cut":
            return self._failure(mode, request) if self.what == "stream-cut" else self._cut(plain)
        return self._stall(plain)

    # -- the replies ------------------------------------------------------------------------

    def _or_absent(self, reply: Optional[Reply], mode: str) -> Reply:
        if reply is not None:
            return reply
        reason = self.wire.absent_in(self.what, mode) or f"{self.wire.name} has no {self.what} case in {mode}"
        # The application gets an answer it cannot mistake for the script, and stops.
        return JsonReply({"error": {"message": f"not scripted: {reason}"}}, status=501)

    def _failure(self, mode: str, request: RecordedRequest) -> Reply:
        from ..gate._fault_replies import rate_limit_reply, with_delay

        if self.what == "rate-limit" and not self.variant:
            found = rate_limit_reply(self.wire, request, self.retry_after)
            if found is not None:
                return found
        reply = self._or_absent(self.wire.reply(self.what, mode, request, self.variant), mode)
        return with_delay(reply, self.retry_after) if isinstance(reply, JsonReply) else reply

    def _cut(self, plain: Reply) -> Reply:
        if isinstance(plain, StreamReply):
            head = tuple(plain.chunks[: self._place(plain)])
            return StreamReply(
                head,
                content_type=plain.content_type,
                headers=dict(plain.headers or {}),
                end="close",
                pauses={len(head): CUT_AFTER},
            )
        if isinstance(plain, JsonReply):
            # A whole reply cut halfway through its body, its content-length naming all of it.
            return dataclasses.replace(plain, end="close", cut_at=len(plain.encoded()) // 2)
        return plain

    def _place(self, plain: StreamReply) -> int:
        """How many of the answer's chunks go out before a cut or a stall."""
        return len(plain.chunks) // 2 if self.after_chunks is None else self.after_chunks

    def _stall(self, plain: Reply) -> Reply:
        if isinstance(plain, StreamReply):
            head = tuple(plain.chunks[: self._place(plain)])
            return StreamReply(
                head, content_type=plain.content_type, headers=dict(plain.headers or {}), hang=True
            )
        return HangReply()

    def _slow(self, plain: Reply) -> Union[Reply, Awaitable[Reply]]:
        if isinstance(plain, StreamReply):
            return dataclasses.replace(plain, pauses={0: self.seconds})
        return _later(plain, self.seconds)


async def _later(reply: Reply, seconds: float) -> Reply:
    """``reply``, after ``seconds``: a whole answer whose first byte is slow to come."""
    import asyncio

    await asyncio.sleep(seconds)
    return reply


def script_for(wire: Any, what: str = "text", **options: Any) -> ProviderScript:
    """A :class:`ProviderScript`; ``wire`` is a :class:`~conformance.wires.Wire` or a shipped wire's name."""
    return ProviderScript(_wire(wire), what, **options)


def _wire(wire: Any) -> Wire:
    if isinstance(wire, Wire):
        return wire
    from ..wires import WIRES

    if isinstance(wire, str) and wire in WIRES:
        return WIRES[wire]
    import difflib  # only on the way to an error

    close = difflib.get_close_matches(str(wire), list(WIRES), n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}?" if close else f"the shipped wires: {', '.join(WIRES)}"
    raise ProviderInputError(f"no wire {wire!r} to script: {hint}")
