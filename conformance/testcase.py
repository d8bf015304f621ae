"""``BackendConformanceTestCase``: the conformance suite by inheritance.

Strategy: settings are class attributes, checked in ``__init_subclass__`` so a
misdeclared class fails at import with a "did you mean"; every scenario and mode
becomes a generated ``test_<scenario>_<mode>`` method that builds a
:class:`~conformance.cases.BackendConformanceTarget` from the class and runs the
one case. The mixin itself has no tests, so ``python -m unittest`` and pytest
collect only the subclasses that name a wire.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, Mapping, Optional

from .errors import TargetDefinitionError
from .scenarios import MODES, SCENARIOS
from .wires._base import Wire

if TYPE_CHECKING:
    from .cases import BackendConformanceTarget
    from .contract import ChatRequest

__all__ = ["BackendConformanceTestCase"]

#: The class attributes a subclass may set.
SETTINGS = (
    "wire",
    "model",
    "headers",
    "skip",
    "http2",
    "timeout",
    "read_timeout",
    "client",
    "retries",
    "abstract",
)


def _make_test(scenario: str, mode: str) -> Callable[[Any], None]:
    row = SCENARIOS[scenario]

    def test(self: BackendConformanceTestCase) -> None:
        self.run_conformance_case(scenario, mode)

    test.__name__ = f"test_{row.method_stem}_{mode}"
    test.__doc__ = (
        f"{scenario}/{mode}: the backend must {row.must}.\n\n"
        f"If this fails: {row.hint}. See docs/troubleshooting.md#{scenario}."
    )
    return test


class BackendConformanceTestCase:
    """Mix into a :class:`unittest.TestCase` to get one test per scenario and mode.

    Set ``wire`` and implement ``create_backend(url)``; optionally ``model``,
    ``headers`` (sent by the backend on every request), ``skip`` (scenario, or
    ``"scenario/mode"``, to a reason), ``http2`` (serve h2c only), ``timeout``
    (seconds per case), ``read_timeout`` (seconds the backend waits for the provider's
    next byte: the latency cases run only where it is declared), ``client`` (the client
    package the backend is built on, whose version the release report states),
    ``retries`` (the backend retries what can come back: the provider relents after
    scripted failures and the retry layer is judged).
    Override ``chat(backend, request)`` or
    ``stream(backend, request)`` when the backend's surface differs from
    ``backend.chat(request)`` and ``backend.chat_stream(request)``. A shared base
    class without a wire sets ``abstract = True``.
    """

    wire: ClassVar[Optional[Wire]] = None
    model: ClassVar[str] = "conformance-model"
    headers: ClassVar[Mapping[str, str]] = {}
    skip: ClassVar[Mapping[str, str]] = {}
    http2: ClassVar[bool] = False
    timeout: ClassVar[float] = 5.0
    read_timeout: ClassVar[Optional[float]] = None
    client: ClassVar[Optional[str]] = None
    retries: ClassVar[bool] = False
    abstract: ClassVar[bool] = False

    @classmethod
    def setUpClass(cls) -> None:
        """Keep the cases' event loops for the next case of the class, and close them with it."""
        # The class's cases run one after another: each takes over the loop the one before
        # left as it found it, instead of starting a thread and a loop (``_loops.kept_loops``).
        from ._loops import kept_loops

        parent = getattr(super(), "setUpClass", None)
        if parent is not None:
            parent()
        cleanup = getattr(cls, "addClassCleanup", None)
        if cleanup is not None:
            keeping = kept_loops()
            keeping.__enter__()
            cleanup(keeping.__exit__, None, None, None)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # A class that mixes this in has imported unittest already; importing it here
        # keeps it out of the cost of importing conformance.
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
        from .wires._adapt import as_wire

        cls.wire = as_wire(cls.wire, where)
        if cls.skip or not isinstance(cls.skip, dict):
            # The case's data (the targets) loads when a case runs, or here where there
            # are skip keys to check: not with every test module.
            from ._case import _check_skip_keys

            _check_skip_keys(cls.skip, where, cls.wire)
        for scenario, row in SCENARIOS.items():
            for mode in MODES:
                if mode not in row.modes:
                    continue
                test = _make_test(scenario, mode)
                if test.__name__ in own:
                    raise TargetDefinitionError(
                        f"{where}: {test.__name__} is generated; to leave it out, put "
                        f"skip = {{{scenario!r}: 'the reason'}} instead of overriding it"
                    )
                reason = cls.skip.get(f"{scenario}/{mode}") or cls.skip.get(scenario)
                reason = reason or cls.wire.absent_in(scenario, mode)
                setattr(cls, test.__name__, unittest.skip(reason)(test) if reason else test)

    def create_backend(self, url: str) -> Any:
        """Build a fresh backend pointed at the fake provider's base ``url``."""
        raise NotImplementedError(
            f"{type(self).__qualname__} must implement create_backend(self, url) to build the "
            "backend under test, pointed at url"
        )

    def chat(self, backend: Any, request: ChatRequest) -> Any:
        """Ask for a whole reply; returns a ChatResponse or an awaitable of one."""
        return backend.chat(request)

    def stream(self, backend: Any, request: ChatRequest) -> Any:
        """Ask for a streamed reply; returns an iterator or async iterator of StreamChunk."""
        return backend.chat_stream(request)

    def conformance_target(self) -> BackendConformanceTarget:
        """This class's settings as a target."""
        from .cases import BackendConformanceTarget

        cls = type(self)
        assert cls.wire is not None
        hooks: Dict[str, Any] = {}
        if cls.chat is not BackendConformanceTestCase.chat:
            hooks["chat"] = self.chat
        if cls.stream is not BackendConformanceTestCase.stream:
            hooks["stream"] = self.stream
        return BackendConformanceTarget(
            name=cls.__qualname__,
            wire=cls.wire,
            create_backend=self.create_backend,
            model=cls.model,
            headers=dict(cls.headers),
            skip=dict(cls.skip),
            http2=cls.http2,
            timeout=cls.timeout,
            read_timeout=cls.read_timeout,
            client=cls.client,
            retries=cls.retries,
            **hooks,
        )

    def run_conformance_case(self, scenario: str, mode: str) -> None:
        """Run one case; a breach fails the test with the case's message."""
        from .cases import ConformanceCase

        ConformanceCase(self.conformance_target(), scenario, mode).run()
