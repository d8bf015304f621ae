"""The mutant zoo: broken backends, one classic bug each.

Each module here defines ``MUTANTS``, a list of :class:`Mutant` for one wire (a key of
:func:`zoo_wires`). Each
mutant declares the cases it must fail and the checks (ids of
``conformance._checks.CHECKS``) it must be caught by there, no more and no fewer;
``tests/test_mutants.py`` holds it to exactly that, over HTTP/1.1 and h2c, and
proves every check by taking it out and watching the mutant that only it catches
pass. A check that cannot fail is a defect.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Tuple

#: The checks that judge the request rather than the answer; a mutant caught only by
#: these says nothing about the case it fails, so it counts for no case column.
REQUEST_CHECKS = frozenset({"headers", "headers-later", "request", "no-retry"})

#: The zoo of the OpenAI Chat wire that names every OpenAI-compatible server: its key.
SERVERS_ZOO = "openai-chat+servers"


def zoo_wires() -> Dict[str, Any]:
    """The wires the zoos run over, by key: each shipped wire by its name, and the OpenAI
    Chat wire naming every compatible server (:data:`SERVERS_ZOO`), whose shapes no shipped
    wire plays."""
    from conformance.wires import WIRES
    from conformance.wires.openai_chat import OpenAIChatWire

    servers = OpenAIChatWire(reasoning_content=True, servers=OpenAIChatWire.SERVERS)
    return {**WIRES, SERVERS_ZOO: servers}


@dataclass(frozen=True)
class Mutant:
    """One broken backend: ``create(url, http2)`` builds it.

    ``headers`` are what the matrix's target expects on every request for this
    mutant (empty for most; a "forgets a header" mutant is built with some).
    """

    name: str
    bug: str
    wire: str
    create: Callable[[str, bool], Any]
    headers: Mapping[str, str] = field(default_factory=dict)
    #: The model the matrix's target names; some bugs show only with an unusual id.
    model: str = "conformance-model"
    #: The checks that catch it in each of ``cases``: exactly these, no other.
    checks: Tuple[str, ...] = ()
    #: The cases (``tool-call/stream``) it must fail.
    cases: Tuple[str, ...] = ()
    #: The transports it is caught on (``h1``, ``h2``); on the others it passes ``cases``.
    transports: Tuple[str, ...] = ("h1", "h2")
    #: Where not empty, the variants of ``cases`` that catch it, each for ``checks``
    #: (those a case has); every other variant of the case it passes: the shape is the reason.
    variants: Tuple[str, ...] = ()
    #: Whether the matrix's target says the backend retries (``retries = True``): its
    #: retry layer is then judged, and the provider relents after scripted failures.
    retries: bool = False

    @property
    def request_level(self) -> bool:
        """Whether only request checks catch it."""
        return set(self.checks) <= REQUEST_CHECKS
