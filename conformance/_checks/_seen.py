"""What one variant of a backend case saw, as every family of checks reads it: :class:`Seen`.

Strategy: a check reads what the backend did (its response or its chunks, or the
error it raised, and when), every request the provider saw and every reply it sent,
through :class:`Seen`; it returns sentences, one per problem, which the case turns
into :class:`Problem` rows under the check's id. The small readers more than one
family needs (a finish reason as its string, an exception described with the
contract's fields) live here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, List, Mapping, Optional, Tuple

from ..provider import RecordedRequest, Reply
from ..wires._base import Variant, Wire
from ._rule import REPLY_SCENARIOS, Rule, rule_of

if TYPE_CHECKING:
    from .._case import BackendCase as ConformanceCase
    from .._case import Outcome

__all__ = ["MISSING", "REPLY_SCENARIOS", "Check", "Problem", "Seen", "describe", "value_of"]

#: An attribute the backend's object lacks, told apart from one that is ``None``.
MISSING: Any = object()


@dataclass(frozen=True)
class Problem:
    """One thing a backend got wrong, and the check that saw it."""

    check: str
    text: str

    def __str__(self) -> str:
        return f"{self.text} [{self.check}]"


@dataclass
class Seen:
    """Everything one variant of a case saw: what the backend did, every request, every reply sent."""

    case: ConformanceCase
    outcome: Outcome
    requests: List[RecordedRequest]
    #: The reply the provider sent to each generation request, in order.
    replies: List[Reply]
    #: The shape the provider answered in; what the backend must report that depends
    #: on the shape (a retry delay, a call id, another error kind) is read from it.
    variant: Variant = Variant("")
    #: Why the provider refused a multi-turn history with the real API's 400, if it did.
    refusals: List[str] = field(default_factory=list)
    #: How many failures the provider sent before it relented with the reply, for a
    #: target that retries (``conformance._checks.retries``); 0 where it never relents.
    relent: int = 0
    _scenario: Optional[str] = field(default=None, init=False, repr=False, compare=False)
    _rule: Optional[Rule] = field(default=None, init=False, repr=False, compare=False)

    @property
    def rule(self) -> Rule:
        """What a correct backend does with this shape: the one reading of it every check makes."""
        if self._rule is None:
            self._rule = rule_of(self.wire, self.scenario, self.variant)
        return self._rule

    @property
    def relented(self) -> bool:
        """The backend retried until the provider relented: the reply came after the failures."""
        return bool(self.relent) and len(self.generations()) > self.relent

    @property
    def scenario(self) -> str:
        """The case's scenario; ``text`` where the provider relented, or answered a slow first
        token in time, whose reply is then judged."""
        # Read by nearly every check, and fixed once the variant ran: worked out once.
        if self._scenario is None:
            in_time = self.relented or self.case.scenario == "slow-first-token"
            self._scenario = "text" if in_time else self.case.scenario
        return self._scenario

    @property
    def wire(self) -> Wire:
        return self.case.target.wire

    @property
    def error(self) -> Optional[BaseException]:
        return self.outcome.error

    @property
    def ended(self) -> bool:
        """The backend returned or raised within the bound."""
        return not self.outcome.hung

    @property
    def got_reply(self) -> bool:
        """A turn that should end normally did, and there is a reply to read."""
        if self.scenario not in REPLY_SCENARIOS or not self.ended or self.error is not None:
            return False
        return self.case.mode == "stream" or self.outcome.response is not None

    def collected(self) -> Tuple[Any, Any, List[Any], Any]:
        """Content, finish reason, tool calls and usage, from a response or from chunks."""
        if self.case.mode == "chat":
            r = self.outcome.response
            return (
                getattr(r, "content", None),
                value_of(getattr(r, "finish_reason", None)),
                list(getattr(r, "tool_calls", None) or ()),
                getattr(r, "usage", None),
            )
        content: List[Any] = []
        calls: List[Any] = []
        finish: Any = None
        usage: Any = None
        for chunk in self.outcome.chunks:
            text = getattr(chunk, "content", "")
            if text:
                content.append(text)
            calls.extend(getattr(chunk, "tool_calls", None) or ())
            if getattr(chunk, "finish_reason", None) is not None:
                finish = value_of(chunk.finish_reason)
            if getattr(chunk, "usage", None) is not None:
                usage = chunk.usage
        joined = "".join(content) if all(isinstance(c, str) for c in content) else content
        return joined, finish, calls, usage

    def refused(self) -> List[RecordedRequest]:
        """Requests the provider turned away before any scenario saw them (bad input, h2c only)."""
        return [r for r in self.requests if r.error]

    def generations(self) -> List[RecordedRequest]:
        """The case's own generation requests: after the earlier turn, where the case played one."""
        return [r for r in self.requests[self.outcome.earlier_requests :] if self.wire.is_generation(r)]

    def reply_status(self) -> Optional[int]:
        """The HTTP status of the last reply to the generation call, if one was sent."""
        statuses = [getattr(r, "status", None) for r in self.replies]
        return statuses[-1] if statuses else None

    def reply_headers(self) -> Mapping[str, str]:
        if not self.replies:
            return {}
        return {k.lower(): v for k, v in (getattr(self.replies[-1], "headers", None) or {}).items()}


def value_of(reason: Any) -> Any:
    """A finish reason as its string, whether a str, a str enum or another enum."""
    inner = getattr(reason, "value", reason)
    return inner if isinstance(inner, str) else reason


def describe(exc: BaseException) -> str:
    fields = []
    for name in ("kind", "code", "retryable", "retry_after", "status"):
        if hasattr(exc, name):
            fields.append(f"{name}={getattr(exc, name)!r}")
    extra = f" [{', '.join(fields)}]" if fields else ""
    return f"{type(exc).__name__}({str(exc)!r}){extra}"


#: One check: what a variant of a case saw, to a sentence per problem it finds there.
Check = Callable[[Seen], List[str]]
