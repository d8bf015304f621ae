"""The mutant zoo: broken backends, one classic bug each.

Each module here defines ``MUTANTS``, a list of :class:`Mutant` for one wire. The
matrix test runs every case of that wire against every mutant and fails if a
mutant escapes every case or a case catches no mutant: a check that cannot fail
is a defect.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping


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
