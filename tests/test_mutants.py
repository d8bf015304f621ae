"""The mutant matrix: every case catches a mutant and every mutant is caught.

A check that cannot fail is a defect. For each wire, every case runs against
every broken backend of ``tests/mutants``; a mutant that passes every case
escaped (its bug is invisible to the suite), and a case that passes every
mutant catches nothing.
"""

from __future__ import annotations

import importlib
import pkgutil
import unittest
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Tuple

from conformance.cases import BackendConformanceTarget, backend_conformance_cases
from conformance.wires import WIRES

from . import mutants as zoo
from .mutants import Mutant

#: A mutant that hangs is failed after this many seconds.
TIMEOUT = 2.0
JOBS = 8


def load_mutants() -> Dict[str, List[Mutant]]:
    by_wire: Dict[str, List[Mutant]] = {}
    for info in pkgutil.iter_modules(zoo.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{zoo.__name__}.{info.name}")
        for mutant in getattr(module, "MUTANTS", ()):
            by_wire.setdefault(mutant.wire, []).append(mutant)
    return by_wire


def _fails(mutant: Mutant, case_name: str, target: BackendConformanceTarget) -> Tuple[str, str, str]:
    for case in backend_conformance_cases(target):
        if case.name != case_name:
            continue
        if case.skip:
            return mutant.name, case_name, "skip"
        try:
            case.run()
        except unittest.SkipTest:
            return mutant.name, case_name, "skip"
        except AssertionError:
            return mutant.name, case_name, "caught"
        return mutant.name, case_name, "passed"
    raise LookupError(case_name)


def run_matrix(wire_name: str, mutants: List[Mutant]) -> Dict[Tuple[str, str], str]:
    wire = WIRES[wire_name]
    jobs = []
    for mutant in mutants:
        target = BackendConformanceTarget(
            name=f"mutant {mutant.name}",
            wire=wire,
            create_backend=lambda url, m=mutant: m.create(url, False),
            headers=dict(mutant.headers),
            model=mutant.model,
            timeout=TIMEOUT,
        )
        for case in backend_conformance_cases(target):
            jobs.append((mutant, case.name, target))
    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        results = list(pool.map(lambda job: _fails(*job), jobs))
    return {(m, c): r for m, c, r in results}


class MutantMatrixTests(unittest.TestCase):
    mutants = load_mutants()

    def test_every_shipped_wire_has_mutants(self) -> None:
        """No wire ships without a zoo of its own."""
        self.assertEqual(sorted(set(WIRES) - set(self.mutants)), [])

    def test_mutants_name_a_known_wire_and_are_unique(self) -> None:
        """Each mutant names a shipped wire and no two share a name on one wire."""
        for wire, mutants in self.mutants.items():
            with self.subTest(wire=wire):
                self.assertIn(wire, WIRES)
                names = [m.name for m in mutants]
                self.assertEqual(len(names), len(set(names)), names)

    def test_no_empty_row_or_column(self) -> None:
        """Per wire, every mutant fails a case and every case fails a mutant."""
        for wire_name, mutants in sorted(self.mutants.items()):
            if wire_name not in WIRES:
                continue
            with self.subTest(wire=wire_name):
                results = run_matrix(wire_name, mutants)
                cases = sorted({c for _, c in results})
                escaped = [
                    m.name for m in mutants if not any(results[(m.name, c)] == "caught" for c in cases)
                ]
                idle = [
                    c
                    for c in cases
                    if not all(results[(m.name, c)] == "skip" for m in mutants)
                    and not any(results[(m.name, c)] == "caught" for m in mutants)
                ]
                self.assertEqual(
                    (escaped, idle),
                    ([], []),
                    f"{wire_name}: mutants no case catches: {escaped}; cases that catch no mutant: {idle}",
                )


if __name__ == "__main__":
    unittest.main()
