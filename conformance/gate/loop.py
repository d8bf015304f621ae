"""The user's side of the agent-loop suite: the task a loop is given, what it returns, the target.

Strategy: an agent loop is the user's own code (a parser and a tool executor over
whatever client they use), so the suite asks for as little as it can: a factory
``create_loop(url)`` that points a fresh loop at the fake provider, and a
``run(task)`` that carries one conversation to its end and returns a
:class:`LoopResult`. Everything the gate judges is either in that result, in the
requests the provider saw, or in the toolset's execution log: the loop runs every
tool through :meth:`GateToolset.execute` (or ``aexecute``), passing the task's
signal, and so cannot run a tool unseen.

Whether ``run`` is sync or async is decided from what the call is and what it gives
back, as for backends: an ``async def`` runs on the case's event loop; a plain
function runs in a thread of its own, and an awaitable it returns is awaited.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Optional, Protocol, Tuple, Union

from ..contract import AbortSignal, ToolChoice, ToolSpec, Usage
from ..errors import TargetDefinitionError
from ..wires._base import Wire

if TYPE_CHECKING:
    from .tools import GateToolset

__all__ = [
    "ERROR_RESULTS",
    "STOPPED",
    "USAGE_NOT_REPORTED",
    "AgentLoop",
    "AgentLoopTarget",
    "AsyncAgentLoop",
    "LoopResult",
    "LoopTask",
]

#: How a loop may send a failed tool's result back (``AgentLoopTarget.error_results``).
ERROR_RESULTS = ("structured", "text")

#: How a loop may end: ``done`` (the model finished) or ``budget`` (it stopped at its limit).
STOPPED = ("done", "budget")
#: ``LoopResult.usage`` of a loop that says nothing of usage (one written before the
#: field existed): not checked, and the report says "not reported".
USAGE_NOT_REPORTED = "not reported"


@dataclass(frozen=True)
class LoopTask:
    """One conversation for a loop to carry out.

    The loop sends ``prompt`` as the user's message with ``tools`` (and
    ``tool_choice``, where set) to ``model``, in streamed requests when ``stream``;
    executes each complete call through ``toolset`` with ``signal``; sends the
    results back; and ends when the model answers with text. It sends at most
    ``max_requests`` generation requests and stops within ``max_seconds``; past
    either it returns ``LoopResult(..., stopped="budget")``. Once ``signal`` fires it
    raises ``signal.reason`` (the very object), runs no tool, and closes its
    connection.
    """

    prompt: str
    tools: Tuple[ToolSpec, ...]
    tool_choice: Optional[ToolChoice]
    toolset: GateToolset
    signal: AbortSignal
    stream: bool
    model: str
    max_requests: int
    max_seconds: float


@dataclass(frozen=True)
class LoopResult:
    """How a loop ended: the model's final ``text``, its ``finish_reason``, and why it stopped.

    ``stopped`` is ``"done"`` when the model finished, ``"budget"`` when the loop
    stopped at ``max_requests`` or ``max_seconds``.

    ``usage`` is the token usage of the whole conversation: a
    :class:`~conformance.Usage` summed over every turn the provider answered in full,
    or ``None`` to mark it unavailable (no turn reported any). Both are checked against
    what the provider sent (``[usage]``). Left at :data:`USAGE_NOT_REPORTED`, nothing
    is checked and the release report says "not reported".
    """

    text: str
    finish_reason: str
    stopped: str = "done"
    usage: Union[Usage, None, str] = USAGE_NOT_REPORTED

    def __post_init__(self) -> None:
        if self.stopped not in STOPPED:
            raise ValueError(f"LoopResult.stopped must be 'done' or 'budget', got {self.stopped!r}")
        usage = self.usage
        if usage is None or usage == USAGE_NOT_REPORTED:
            return
        if isinstance(usage, str) or not all(
            isinstance(getattr(usage, name, None), int)
            for name in ("input_tokens", "output_tokens", "total_tokens")
        ):
            raise ValueError(
                "LoopResult.usage must be a Usage(input_tokens, output_tokens, total_tokens) summed over "
                f"the conversation, None where no turn reported usage, or left unset; got {usage!r}"
            )


class AgentLoop(Protocol):
    """A sync loop: ``run`` blocks until the conversation is over."""

    def run(self, task: LoopTask) -> LoopResult: ...


class AsyncAgentLoop(Protocol):
    """An async loop: ``async def run``."""

    async def run(self, task: LoopTask) -> LoopResult: ...


#: ``run(loop, task)``: adapts a loop whose surface differs from ``loop.run(task)``.
RunHook = Callable[[Any, LoopTask], Union[LoopResult, Awaitable[LoopResult]]]


@dataclass(frozen=True)
class AgentLoopTarget:
    """An agent loop to hold to the gate's invariants, and how to reach it.

    ``create_loop(url)`` builds a fresh loop for each case, pointed at the fake
    provider's base URL (as ``create_backend`` is for the backend suite). ``skip``
    maps a stage (``"cancel"``) or a stage and mode (``"cancel/stream"``) to the
    reason it is skipped. ``max_result_chars`` declares the loop's limit on a tool
    result it sends back (the ``large-result`` case then expects a prefix of at most
    that many characters; ``None``: results go back whole). ``run(loop, task)``
    adapts a loop whose surface differs from ``loop.run(task)``. ``timeout`` bounds
    each case in seconds. ``client`` names the client package the loop is built on
    (``"openai"``), whose installed version the release report states.
    ``error_results`` says how the loop sends a failed tool's result back:
    ``"structured"`` (the default: the wire's error marker, or JSON whose top level
    carries an ``error``), or ``"text"`` for a framework that sends plain text,
    accepted only on a wire with no error marker (OpenAI Chat and Responses, Ollama);
    the release report names it. ``stress`` names the opt-in stress stages to run
    (``"stress-interleaved-calls"``), which play what a format allows but no provider
    sends; without it they skip, saying so.
    """

    name: str
    wire: Wire
    create_loop: Callable[[str], Any]
    model: str = "conformance-model"
    http2: bool = False
    skip: Mapping[str, str] = field(default_factory=dict)
    max_result_chars: Optional[int] = None
    run: Optional[RunHook] = None
    timeout: float = 5.0
    client: Optional[str] = None
    error_results: str = "structured"
    stress: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        from .stages import check_stage_keys

        where = f"agent-loop target {self.name!r}"
        from ..wires._adapt import as_wire

        object.__setattr__(self, "wire", as_wire(self.wire, where))
        if not callable(self.create_loop):
            raise TargetDefinitionError(
                f"{where}: create_loop must be a callable taking the provider URL, got {self.create_loop!r}"
            )
        if self.run is not None and not callable(self.run):
            raise TargetDefinitionError(f"{where}: run must be a callable run(loop, task), got {self.run!r}")
        if self.max_result_chars is not None and (
            not isinstance(self.max_result_chars, int) or self.max_result_chars < 1
        ):
            raise TargetDefinitionError(
                f"{where}: max_result_chars must be a positive number of characters or None, "
                f"got {self.max_result_chars!r}"
            )
        if not self.timeout > 0:
            raise TargetDefinitionError(f"{where}: timeout must be positive, got {self.timeout!r}")
        if self.error_results not in ERROR_RESULTS:
            raise TargetDefinitionError(
                f"{where}: error_results must be one of {', '.join(map(repr, ERROR_RESULTS))}, "
                f"got {self.error_results!r}"
            )
        from .stages import STRESS_STAGES

        unknown = [name for name in self.stress if name not in STRESS_STAGES]
        if isinstance(self.stress, str) or unknown:
            raise TargetDefinitionError(
                f"{where}: stress must be a tuple of stress stages ({', '.join(STRESS_STAGES)}), "
                f"got {self.stress!r}"
            )
        check_stage_keys(self.skip, where)

    def knobs(self) -> Tuple[str, ...]:
        """The settings that loosen a verdict, as the release report names them."""
        if self.error_results == "text":
            return (
                'error_results="text": a failed tool\'s result may go back as plain text where the '
                "wire has no error marker",
            )
        return ()

    def skip_reason(self, stage: str, mode: str) -> Optional[str]:
        """Why the case is skipped by the target, or ``None``."""
        return self.skip.get(f"{stage}/{mode}") or self.skip.get(stage)
