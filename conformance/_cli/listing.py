"""``serve --list``: what each wire plays, scenario by scenario and stage by stage."""

from __future__ import annotations

from typing import Any, Optional, Sequence, TextIO

from .._targets import UsageError
from .._wire_options import extra_variants, flags_of
from ..scenarios import SCENARIOS


def listing(
    out: TextIO, wires: Sequence[Any], scenario: Optional[str] = None, stage: Optional[str] = None
) -> None:
    """``serve --list``: every scenario and mode each wire plays, with each variant and its source;
    then every agent-loop stage and mode it plays (``serve --stage``), or why not.

    ``--scenario`` narrows the list to one scenario, ``--stage`` to one stage.
    """
    from ..gate.stages import LOOP_MODES, STAGES

    if scenario is not None and scenario not in SCENARIOS:
        raise UsageError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    if stage is not None and stage not in STAGES:
        raise UsageError(f"unknown stage {stage!r}; known: {', '.join(STAGES)}")
    for wire in wires:
        shown = " ".join(flags_of(wire))
        out.write(f"{wire.name} ({wire.title}){f', with {shown}' if shown else ''}:\n")
        for name, row in SCENARIOS.items():
            if stage is not None or (scenario is not None and name != scenario):
                continue
            absent = wire.absent(name)
            if absent is not None:
                out.write(f"  {name}: not played ({absent})\n")
                continue
            for mode in row.modes:
                variants = wire.variants(name, mode)
                named = [v for v in variants if v.name]
                if not named:
                    out.write(f"  {name} --mode {mode}{_NOT_JUDGED_NOTE.get(name, '')}\n")
                    continue
                for index, v in enumerate(named):
                    first = " (the default)" if index == 0 else ""
                    source = f"; seen in {v.source}" if v.source else ""
                    out.write(f"  {name} --mode {mode} --variant {v.name}{first}: {v.title}{source}\n")
        if stage is None and not flags_of(wire):
            _list_extra_variants(out, wire, scenario)
        if scenario is not None:
            continue
        for name, stage_row in STAGES.items():
            if stage is not None and name != stage:
                continue
            for mode in LOOP_MODES:
                if mode not in stage_row.modes:
                    continue
                skip = _stage_skip(wire, name, mode)
                played = f": not played ({skip})" if skip else _NOT_JUDGED_NOTE.get(name, "")
                out.write(f"  --stage {name} --mode {mode}{played}\n")
    out.flush()


def _list_extra_variants(out: TextIO, wire: Any, scenario: Optional[str]) -> None:
    """The variants ``wire`` plays only when a wire option configures it, each with the options."""
    extra = [row for row in extra_variants(wire) if scenario is None or row[0] == scenario]
    if not extra:
        return
    out.write(f"  with a configuration of {wire.name} (give its option to serve one):\n")
    for name, mode, place, v, needs in extra:
        first = ", the default" if place == 0 else ""
        source = f"; seen in {v.source}" if v.source else ""
        out.write(f"  {name} --mode {mode} --variant {v.name} (with {needs}{first}): {v.title}{source}\n")


#: What ``serve --list`` adds to a case it serves but cannot judge (``_judge.NOT_JUDGED``).
_NOT_JUDGED_NOTE = {
    "abort": " (served, not judged: the abort fires the caller's signal inside the client)",
    "cancel": " (served, not judged: the cancel needs the caller's own signal or task)",
    "cancel-in-tool": " (served, not judged: the cancel fires the caller's own signal while a tool runs)",
}


def _stage_skip(wire: Any, stage: str, mode: str) -> Optional[str]:
    """Why ``wire`` does not play ``stage`` in ``mode`` (the gate's own skip reason), or ``None``."""
    from .._judge import elsewhere
    from ..gate.cases import AgentLoopCase
    from ..gate.loop import AgentLoopTarget

    return AgentLoopCase(AgentLoopTarget("serve", wire, elsewhere), stage, mode).skip
