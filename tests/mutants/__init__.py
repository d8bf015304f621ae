"""The mutant zoo: broken backends, one classic bug each.

Each module here defines ``MUTANTS``, a list of :class:`Mutant` for one wire. The
matrix test runs every case of that wire against every mutant and fails if a
mutant escapes every case or a case catches no mutant: a check that cannot fail
is a defect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Mutant:
    """One broken backend: ``create(url, http2)`` builds it."""

    name: str
    bug: str
    wire: str
    create: Callable[[str, bool], Any]
