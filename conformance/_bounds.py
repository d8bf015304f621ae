"""The time bounds of the abort, cancel and latency cases, and the reason the abort case gives.

Apart from the driver so that importing the cases (and these names) costs no asyncio:
the event loop machinery loads when the first case runs.
"""

from __future__ import annotations

__all__ = [
    "ABORT_CLOSE_WITHIN",
    "ABORT_DELAY",
    "ABORT_RAISE_WITHIN",
    "BUDGET_GRACE",
    "RECLAIM_WITHIN",
    "TOOL_STOP_WITHIN",
    "IN_TIME_SHARE",
    "LATENCY_SCENARIOS",
    "ConformanceAbort",
    "give_up_within",
    "latency_bound",
    "in_time_silence",
]

#: The longest a stream case waits for the backend's first chunk before it aborts or
#: cancels anyway (a backend that yields nothing until the end is aborted all the same).
ABORT_DELAY = 0.25
#: How soon after the abort the backend must raise the reason.
ABORT_RAISE_WITHIN = 0.5
#: How soon after the abort the provider must see the connection (h2: stream) closed.
ABORT_CLOSE_WITHIN = 1.0
#: How soon after the task's signal fires a tool running then must see it: the signal the
#: loop hands the toolset is the task's own (or one it fires from the task's at once), so
#: the tool stops within a wake-up; a signal of the loop's own fired later lets it run on.
TOOL_STOP_WITHIN = 0.1
#: How long a case waits, once the provider has closed, for what the backend left running.
RECLAIM_WITHIN = 1.0
#: How far past ``task.max_seconds`` an agent loop may end before the budget check calls
#: it over: a loop that bounds its requests ends within scheduling noise of its budget
#: even on a loaded machine, while one that ignores it runs on to the case's bound.
BUDGET_GRACE = 1.0


#: The scenarios that hold the provider silent, which only a target that declares its
#: backend's ``read_timeout`` gets: the silence is scaled from it.
LATENCY_SCENARIOS = ("slow-first-token", "stall")
#: How much of the declared read timeout the provider stays silent before a slow first
#: token: under half, so that a backend waiting what it declared has the other half
#: (and more) to spare on a loaded machine, while one waiting less than half of it gives up.
IN_TIME_SHARE = 0.4


def in_time_silence(read_timeout: float) -> float:
    """Seconds the provider is silent before a first token that still comes in time."""
    return read_timeout * IN_TIME_SHARE


def give_up_within(read_timeout: float) -> float:
    """Seconds after the provider fell silent by which a backend must have given up: its read
    timeout and a grace of half of it, at least half a second (a timer firing late, the
    error built and raised, on a busy machine)."""
    return read_timeout + max(0.5, read_timeout / 2)


def latency_bound(read_timeout: float) -> float:
    """The case's own bound for a stall: past :func:`give_up_within` by a second, so a backend
    that gave up late is told apart from one still waiting."""
    return give_up_within(read_timeout) + 1.0


class ConformanceAbort(Exception):
    """The reason the abort case aborts with; the backend must raise this very object."""
