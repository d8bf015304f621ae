"""``AgentLoopConformanceTestCase``: the agent-loop suite by inheritance.

Strategy: as for :class:`~conformance.BackendConformanceTestCase`, settings are class
attributes checked in ``__init_subclass__`` (a misdeclared class fails at import),
and every stage and mode becomes a generated ``test_<stage>_<mode>`` method that
builds an :class:`~conformance.gate.AgentLoopTarget` from the class and runs the one
case. Where ``wire`` is a :class:`~conformance.gate.ReplayWire`, each recorded
conversation and mode becomes a ``test_replay_<conversation>_<mode>`` too: the
recordings are read when the wire is made, so their names are known at class creation.
The mixin itself has no tests, so runners collect only subclasses that name a wire.
"""

from __future__ import annotations

import re
from typing import Any, Callable, ClassVar, Mapping, Optional, Tuple

from ..errors import TargetDefinitionError
from ..wires._base import Wire
from .cases import AgentLoopCase
from .loop import AgentLoopTarget, LoopTask
from .stages import LOOP_MODES, STAGES, check_stage_keys

__all__ = ["AgentLoopConformanceTestCase"]

#: The class attributes a subclass may set.
SETTINGS = (
    "wire", "model", "skip", "http2", "timeout", "max_result_chars", "client", "error_results", "stress",
    "abstract",
)


def _make_test(stage: str, mode: str) -> Callable[[Any], None]:
    row = STAGES[stage]

    def test(self: AgentLoopConformanceTestCase) -> None:
        self.run_agent_loop_case(stage, mode)

    test.__name__ = f"test_{stage.replace('-', '_')}_{mode}"
    hint = f"If this fails: {row.hint}. See docs/gate-stages.md#{stage}."
    test.__doc__ = f"{stage}/{mode}: the loop must {row.must}.\n\n{hint}"
    return test


def _make_replay_test(conversation: str, mode: str) -> Callable[[Any], None]:
    def test(self: AgentLoopConformanceTestCase) -> None:
        self.run_replayed_conversation(conversation, mode)

    test.__name__ = f"test_replay_{re.sub(r'[^0-9A-Za-z_]', '_', conversation)}_{mode}"
    test.__doc__ = (
        f"replay/{conversation}/{mode}: the loop must play its recorded conversation again: the "
        "recorded requests, each recorded call executed once and never before its last event, "
        "and a finished result.\n\nIf this fails: a changed request is named with the fields "
        "that differ; record again where the change is meant. See "
        "docs/recording.md#replaying-a-recorded-agent-loop-conversation."
    )
    return test


class AgentLoopConformanceTestCase:
    """Mix into a :class:`unittest.TestCase` to get one test per stage and mode.

    Set ``wire`` and implement ``create_loop(url)``; optionally ``model``, ``skip``
    (stage, or ``"stage/mode"``, to a reason), ``http2`` (serve h2c only), ``timeout``
    (seconds per case), ``max_result_chars`` (the loop's limit on a result it sends
    back) and ``error_results`` (``"text"`` where the loop sends a failed tool's result
    as plain text, on a wire with no error marker) and ``stress`` (the opt-in stress
    stages to run). Override ``run_loop(loop, task)`` when the loop's surface differs from
    ``loop.run(task)`` (the name ``run`` belongs to :class:`unittest.TestCase`). A
    shared base class without a wire sets ``abstract = True``.
    """

    wire: ClassVar[Optional[Wire]] = None
    model: ClassVar[str] = "conformance-model"
    skip: ClassVar[Mapping[str, str]] = {}
    http2: ClassVar[bool] = False
    timeout: ClassVar[float] = 5.0
    client: ClassVar[Optional[str]] = None
    max_result_chars: ClassVar[Optional[int]] = None
    error_results: ClassVar[str] = "structured"
    stress: ClassVar[Tuple[str, ...]] = ()
    abstract: ClassVar[bool] = False

    @classmethod
    def setUpClass(cls) -> None:
        """Keep the cases' event loops for the next case of the class, and close them with it."""
        # The class's cases run one after another: each takes over the loop the one before
        # left as it found it, instead of starting a thread and a loop (``_loops.kept_loops``).
        from .._loops import kept_loops

        parent = getattr(super(), "setUpClass", None)
        if parent is not None:
            parent()
        cleanup = getattr(cls, "addClassCleanup", None)
        if cleanup is not None:
            keeping = kept_loops()
            keeping.__enter__()
            cleanup(keeping.__exit__, None, None, None)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        import unittest

        super().__init_subclass__(**kwargs)
        where = cls.__qualname__
        own = vars(cls)
        for name in own:
            if name.startswith("_") or name in SETTINGS or name.startswith("test"):
                continue
            import difflib

            close = difflib.get_close_matches(name, SETTINGS, n=1, cutoff=0.8)
            if close and not callable(own[name]):
                raise TargetDefinitionError(f"{where}: unknown setting {name!r}; did you mean {close[0]!r}?")
        if own.get("abstract", False):
            return
        if cls.wire is None:
            if issubclass(cls, unittest.TestCase):
                raise TargetDefinitionError(
                    f"{where}: set wire = one of conformance's wires (openai_chat_wire, ...), "
                    "or abstract = True on a shared base class"
                )
            return
        from ..wires._adapt import as_wire

        cls.wire = as_wire(cls.wire, where)
        check_stage_keys(cls.skip, where)
        for stage, row in STAGES.items():
            for mode in LOOP_MODES:
                if mode not in row.modes:
                    continue
                _install(cls, own, where, _make_test(stage, mode), stage)
        _add_replay_tests(cls, own, where)

    def create_loop(self, url: str) -> Any:
        """Build a fresh agent loop pointed at the fake provider's base ``url``."""
        raise NotImplementedError(
            f"{type(self).__qualname__} must implement create_loop(self, url) to build the agent loop "
            "under test, pointed at url"
        )

    def run_loop(self, loop: Any, task: LoopTask) -> Any:
        """Carry out one task; returns a LoopResult or an awaitable of one."""
        return loop.run(task)

    def agent_loop_target(self) -> AgentLoopTarget:
        """This class's settings as a target."""
        cls = type(self)
        assert cls.wire is not None
        hook = self.run_loop if cls.run_loop is not AgentLoopConformanceTestCase.run_loop else None
        return AgentLoopTarget(
            name=cls.__qualname__,
            wire=cls.wire,
            create_loop=self.create_loop,
            model=cls.model,
            http2=cls.http2,
            skip=dict(cls.skip),
            max_result_chars=cls.max_result_chars,
            run=hook,
            timeout=cls.timeout,
            client=cls.client,
            error_results=cls.error_results,
            stress=tuple(cls.stress),
        )

    def run_agent_loop_case(self, stage: str, mode: str) -> None:
        """Run one case; a breach fails the test with the case's message, a skip skips it."""
        AgentLoopCase(self.agent_loop_target(), stage, mode).run()

    def run_replayed_conversation(self, conversation: str, mode: str) -> None:
        """Replay one recorded conversation (``wire`` is a ReplayWire) in ``mode`` to the loop."""
        from .replay_cases import ReplayLoopCase

        ReplayLoopCase(self.agent_loop_target(), conversation, mode).run()


def _install(cls: type, own: Mapping[str, Any], where: str, test: Callable[[Any], None], key: str) -> None:
    """Set a generated test on ``cls``; one the class defines itself (``own``) is refused,
    with the ``skip`` key that leaves the case out instead."""
    if test.__name__ in own:
        raise TargetDefinitionError(
            f"{where}: {test.__name__} is generated; to leave it out, put "
            f"skip = {{{key!r}: 'the reason'}} instead of overriding it"
        )
    setattr(cls, test.__name__, test)


def _add_replay_tests(cls: type, own: Mapping[str, Any], where: str) -> None:
    """Where ``wire`` is a :class:`~conformance.gate.ReplayWire`: a ``test_replay_<conversation>_<mode>``
    per recorded conversation and mode, named after the scenario it is stamped with."""
    from .replay import ReplayWire

    wire = getattr(cls, "wire", None)
    if not isinstance(wire, ReplayWire):
        return
    made: dict[str, str] = {}
    for conversation, mode in sorted(wire.conversations()):
        test = _make_replay_test(conversation, mode)
        name = test.__name__
        if name in made:
            raise TargetDefinitionError(
                f"{where}: the recorded conversations {made[name]!r} and {conversation!r} would both "
                f"be {name}; stamp one with another scenario when you record it"
            )
        made[name] = conversation
        _install(cls, own, where, test, f"replay/{conversation}")
