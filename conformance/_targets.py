"""The targets the command line runs, and the work a worker process does with them.

Apart from ``__main__`` so that a worker process (started fresh, with ``spawn``)
can import what it runs by name: a function defined in ``__main__`` cannot be
found again there.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
import time
import traceback
import unittest
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .cases import BackendConformanceTarget, ConformanceCase, backend_conformance_cases

if TYPE_CHECKING:
    from .gate._case import LoopCase
    from .gate.loop import AgentLoopTarget

#: A target of either suite: a backend's, or an agent loop's.
AnyTarget = Union[BackendConformanceTarget, "AgentLoopTarget"]
AnyCase = Union[ConformanceCase, "LoopCase"]

__all__ = [
    "AnyCase",
    "AnyTarget",
    "TargetSpec",
    "cases_of",
    "is_target",
    "timed_outcome",
    "reference_loop_targets",
    "reference_spec",
    "UsageError",
    "load",
    "outcome",
    "preload",
    "reference_targets",
    "serve_cases",
    "target_from",
    "waits_first",
]


class UsageError(Exception):
    """The command line asked for something that does not exist; exit status 2."""


def cases_of(target: AnyTarget) -> List[AnyCase]:
    """Every case of ``target``, in whichever suite it belongs to."""
    if isinstance(target, BackendConformanceTarget):
        return list(backend_conformance_cases(target))
    from .gate.cases import agent_loop_cases

    return list(agent_loop_cases(target))


#: The size limit the reference loops declare on a result they send back.
REFERENCE_MAX_RESULT_CHARS = 4096


def _reference_loop(create: Callable[[str, bool], Any], url: str, *, http2: bool) -> Any:
    from .gate.reference_loop import ReferenceLoop

    return ReferenceLoop(create(url, http2), max_result_chars=REFERENCE_MAX_RESULT_CHARS)


def _wires(
    wires: Optional[Sequence[str]], settings: Optional[Mapping[str, Mapping[str, Any]]]
) -> List[Tuple[str, Any, str]]:
    """``(name, the wire as configured, how its configuration is written)`` of each wire named
    (every wire where ``wires`` is empty), with ``settings`` from the command line's wire options."""
    from ._wire_options import configured, flags_of
    from .wires import WIRES

    names = list(wires or WIRES)
    unknown = [n for n in names if n not in WIRES]
    if unknown:
        raise UsageError(f"unknown wire {unknown[0]!r}; known: {', '.join(WIRES)}")
    out = []
    for name in names:
        try:
            wire = configured(name, settings or {})
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        shown = " ".join(flags_of(wire))
        out.append((name, wire, f" ({shown})" if shown else ""))
    return out


def reference_loop_targets(
    wires: Optional[Sequence[str]],
    transports: Sequence[str],
    settings: Optional[Mapping[str, Mapping[str, Any]]] = None,
) -> List[Tuple[str, AgentLoopTarget]]:
    """The reference loop over each wire's reference backend, per transport (the agent-loop suite)."""
    from .gate.loop import AgentLoopTarget
    from .gate.stages import STRESS_STAGES
    from .reference import REFERENCE_BACKENDS

    return [
        (
            transport,
            AgentLoopTarget(
                name=f"reference loop {name}{shown} over {transport}",
                wire=wire,
                create_loop=functools.partial(
                    _reference_loop, REFERENCE_BACKENDS[name], http2=transport == "h2c"
                ),
                http2=transport == "h2c",
                max_result_chars=REFERENCE_MAX_RESULT_CHARS,
                stress=STRESS_STAGES,  # the reference loop is held to the stress stages too
            ),
        )
        for name, wire, shown in _wires(wires, settings)
        for transport in transports
    ]


def outcome(case: AnyCase) -> Tuple[str, str]:
    """``("pass" | "FAIL" | "skip" | "ERROR", detail)`` for one case."""
    try:
        case.run()
    except unittest.SkipTest as exc:
        return "skip", str(exc)
    except AssertionError as exc:
        return "FAIL", str(exc)
    except Exception:  # noqa: BLE001 - a crash in a case is reported, not raised
        return "ERROR", traceback.format_exc()
    return "pass", ""


def timed_outcome(case: AnyCase) -> Tuple[str, str, float]:
    """:func:`outcome`, and how long the case took in seconds."""
    started = time.perf_counter()
    status, detail = outcome(case)
    return status, detail, time.perf_counter() - started


def _reference(create: Callable[[str, bool], Any], url: str, *, http2: bool) -> Any:
    from .reference import REFERENCE_READ_TIMEOUT

    backend = create(url, http2)
    backend.timeout = REFERENCE_READ_TIMEOUT  # what its target declares
    return backend


def _retrying_reference(create: Callable[[str, bool], Any], url: str, *, http2: bool) -> Any:
    from .reference.retrying import RetryingBackend

    return RetryingBackend(_reference(create, url, http2=http2))


def reference_targets(
    wires: Optional[Sequence[str]],
    transports: Sequence[str],
    settings: Optional[Mapping[str, Mapping[str, Any]]] = None,
    *,
    retries: bool = False,
) -> List[Tuple[str, BackendConformanceTarget]]:
    """Each wire's reference backend, per transport (the backend suite); ``settings`` configure a
    shipped wire as the command line's wire options do (``{"openai-chat": {"servers": [...]}}``);
    ``retries``, each inside the reference retry layer, on a target that says it retries."""
    from .reference import REFERENCE_BACKENDS, REFERENCE_READ_TIMEOUT

    build = _retrying_reference if retries else _reference
    label = " with retries" if retries else ""
    targets = []
    for name, wire, shown in _wires(wires, settings):
        for transport in transports:
            http2 = transport == "h2c"
            targets.append(
                (
                    transport,
                    BackendConformanceTarget(
                        name=f"reference {name}{shown}{label} over {transport}",
                        wire=wire,
                        create_backend=functools.partial(build, REFERENCE_BACKENDS[name], http2=http2),
                        http2=http2,
                        retries=retries,
                        read_timeout=REFERENCE_READ_TIMEOUT,
                    ),
                )
            )
    return targets


#: What a worker process rebuilds a target from: ("reference", wire, transport) (or
#: "reference-retries", the reference inside the retry layer), with the
#: wire's settings as JSON after them where the command line configured it, or ("load", "MODULE:NAME").
TargetSpec = Tuple[str, ...]


def reference_spec(kind: str, wire: str, transport: str, settings: Mapping[str, Any]) -> TargetSpec:
    """The spec a worker process rebuilds a reference target (``kind``) of ``wire`` from."""
    keywords = settings.get(wire)
    if not keywords:
        return (kind, wire, transport)
    import json

    return (kind, wire, transport, json.dumps({wire: dict(keywords)}))


def target_from(spec: TargetSpec) -> AnyTarget:
    if spec[0] in ("reference", "reference-retries", "reference-loop"):
        import json

        settings = json.loads(spec[3]) if len(spec) > 3 else None
        if spec[0] == "reference-loop":
            return reference_loop_targets([spec[1]], [spec[2]], settings)[0][1]
        return reference_targets([spec[1]], [spec[2]], settings, retries=spec[0] == "reference-retries")[0][1]
    obj = load(spec[1])
    if not is_target(obj):
        raise UsageError(f"{spec[1]} is not a BackendConformanceTarget or an AgentLoopTarget")
    return obj  # type: ignore[no-any-return]


def is_target(obj: Any) -> bool:
    """Whether ``obj`` is a target of either suite (the gate's is looked for only once loaded)."""
    if isinstance(obj, BackendConformanceTarget):
        return True
    gate = sys.modules.get(f"{__package__}.gate.loop")
    return gate is not None and isinstance(obj, gate.AgentLoopTarget)


#: What a case loads when it first runs, by suite: the machinery, the provider's server,
#: and the modules the wires and loops reach for on their first reply.
_RUNS_ON = {
    "backend": (
        "_driver", "_checks", "_host", "_multiturn", "provider._server", "provider._http1",
        "provider._h1_parse", "provider._h1_reply", "provider.events", "wires._schema", "wires._unparsed",
    ),
    "loop": (
        "gate._loop_driver", "gate._invariants", "gate._conversation", "gate._fault_replies", "gate._usage",
        "gate.reference_loop", "gate.sandbox", "gate.tools", "wires._tool_results",
    ),
    "h2c": ("provider._http2", "provider._h2_reply", "reference._h2c"),
}


def preload(targets: Sequence[Tuple[str, AnyTarget]]) -> None:
    """Import what the cases of ``targets`` load on their first run.

    Called before worker processes are forked: each then starts with it loaded, instead
    of every one of them importing it again (about 60 ms of CPU a worker). Imports only:
    no thread is started, so forking stays safe.
    """
    kinds = {"backend" if isinstance(target, BackendConformanceTarget) else "loop" for _, target in targets}
    if any(target.http2 or column == "h2c" for column, target in targets):
        kinds.add("h2c")
    for kind in sorted(kinds):
        for name in _RUNS_ON[kind]:
            importlib.import_module(f"{__package__}.{name}")
    # A shipped wire's package loads its turns, history reader and request checks on first
    # use (naming a wire stays cheap); a case uses them all, so they come here too.
    packages = {_wire_package(getattr(target, "wire", None)) for _, target in targets}
    for package in sorted(p for p in packages if p is not None):
        for name in _WIRE_PARTS:
            if importlib.util.find_spec(f"{package}.{name}") is not None:
                importlib.import_module(f"{package}.{name}")


#: The modules of a shipped wire's package that it loads on first use.
_WIRE_PARTS = ("_turns", "_history", "_request")


def _wire_package(wire: object) -> Optional[str]:
    """The package of a wire that ships with the kit (``conformance.wires.gemini``), else ``None``."""
    module = type(wire).__module__
    prefix = f"{__package__}.wires."
    if not module.startswith(prefix):
        return None
    return prefix + module[len(prefix):].split(".", 1)[0]


def waits_first(case: AnyCase) -> int:
    """Where a case goes in the order cases are handed out: those that wait on purpose first.

    A gate stage with a budget of its own, a cancel or a fault waits (a timeout, a
    retry delay, a hold, a grace); handed out first, the waiting overlaps the other
    cases' work instead of trailing after it. Then the other gate cases, which send
    several requests each, then the backend cases.
    """
    if isinstance(case, ConformanceCase):
        return 2
    stage = getattr(case, "stage", None)
    if stage is not None and (stage.max_seconds is not None or stage.cancel or stage.fault):
        return 0
    return 1


def serve_cases(specs: Sequence[TargetSpec], tasks: Any, results: Any, jobs: int) -> None:
    """In a worker process: run cases handed out on ``tasks``, ``jobs`` at a time, until told to stop.

    Each task is ``(target index, case name)``, the target rebuilt from ``specs`` on its
    first case; ``None`` stops one of the ``jobs`` threads. Each result goes back on
    ``results`` as it comes: ``(target index, case name, outcome, seconds)``. Handing
    out cases one by one keeps every process busy to the end, whatever each case costs.
    """
    import threading

    built: Dict[int, Dict[str, AnyCase]] = {}
    lock = threading.Lock()

    def case_of(index: int, name: str) -> AnyCase:
        with lock:
            if index not in built:
                built[index] = {case.name: case for case in cases_of(target_from(specs[index]))}
            return built[index][name]

    def work() -> None:
        while True:
            task = tasks.get()
            if task is None:
                return
            index, name = task
            try:
                status, detail, seconds = timed_outcome(case_of(index, name))
            except Exception:  # noqa: BLE001 - the target could not be rebuilt here
                status, detail, seconds = "ERROR", traceback.format_exc(), 0.0
            results.put((index, name, (status, detail), seconds))

    from ._loops import kept_loops

    threads = [threading.Thread(target=work, name=f"conformance cases {n}") for n in range(max(1, jobs))]
    with kept_loops():  # the cases of a worker process run one after another on kept loops
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def load(spec: str) -> Any:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise UsageError(f"expected MODULE:NAME, e.g. tests.test_gateway:GatewayConformance, got {spec!r}")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"cannot import {module_name!r}: {exc}") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise UsageError(f"{module_name!r} has no attribute {attribute!r}") from None
