"""Every way one field of a correct backend's output can change fails some case, unless the
contract allows it; and every change it allows passes every case.

A seeded share runs by default (one wire, some of the perturbations, each allowed one
too); CONFORMANCE_LONG_TESTS=1 runs every perturbation on every wire, as CI's long mode
does. CONFORMANCE_MUTATOR_SEED picks another share. The perturbations that passed where
they must fail are printed, and fail the test.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import random
import unittest
from typing import Dict, List, Optional, Tuple

from conformance.cases import BackendConformanceTarget, ConformanceCase, backend_conformance_cases
from conformance.wires import WIRES

from . import mutants as zoo_package
from .mutants._common import Zoo
from .output_mutator import ALLOWED, PERTURBATIONS, Perturbation, allowed, perturbing
from .test_provider_support import LONG_TESTS

#: How many perturbations (beside the allowed ones) the default run tries.
SHARE = 10
#: Scenarios that judge timing, which a gathered stream changes: left out.
TIMED = ("abort", "cancel")


def zoos() -> Dict[str, Zoo]:
    """Each shipped wire's zoo: its reference backend's class and base path."""
    found: Dict[str, Zoo] = {}
    for info in pkgutil.iter_modules(zoo_package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{zoo_package.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Zoo) and value.wire in WIRES:
                found.setdefault(value.wire, value)
    return found


def case_names(wire: str) -> List[str]:
    target = BackendConformanceTarget("names", WIRES[wire], lambda url: None)
    return [c.name for c in backend_conformance_cases(target) if not c.skip and c.scenario not in TIMED]


def run(zoo: Zoo, perturbation: Perturbation, case_name: str) -> Tuple[bool, Optional[str]]:
    """Whether the perturbation changed anything in the case, and the failure (or ``None``)."""
    cls = perturbing(perturbation, zoo.backend)

    def create(url: str) -> object:
        return cls(f"{url}{zoo.path}", http2=False)

    target = BackendConformanceTarget(f"perturbed {perturbation.name}", WIRES[zoo.wire], create, timeout=3.0)
    case: ConformanceCase = next(c for c in backend_conformance_cases(target) if c.name == case_name)
    try:
        case.run()
    except unittest.SkipTest:
        return False, None
    except AssertionError as failed:
        return bool(getattr(cls, "changed", False)), str(failed)
    return bool(getattr(cls, "changed", False)), None


def judge(zoo: Zoo, perturbation: Perturbation) -> Tuple[str, List[str]]:
    """``caught``, ``passed`` (changed something, failed nothing), ``unchanged`` (nothing to
    change on this wire), or for an allowed one ``allowed`` / ``refused``; with the cases."""
    changed_in: List[str] = []
    refused: List[str] = []
    equivalent = allowed(WIRES[zoo.wire], perturbation.name)
    for name in case_names(zoo.wire):
        changed, failure = run(zoo, perturbation, name)
        if not changed:
            continue
        changed_in.append(name)
        if failure is not None:
            if not equivalent:
                return "caught", [name]
            refused.append(f"{name}: {failure.splitlines()[1] if len(failure.splitlines()) > 1 else failure}")
    if equivalent:
        return ("refused", refused) if refused else ("allowed", changed_in)
    return ("passed", changed_in) if changed_in else ("unchanged", [])


class OutputMutatorTests(unittest.TestCase):
    def test_every_perturbation_fails_some_case_unless_allowed(self) -> None:
        """Each perturbation that changes a wire's output fails a case there; each allowed one fails none."""
        seed = int(os.environ.get("CONFORMANCE_MUTATOR_SEED", "20261207"))
        chooser = random.Random(seed)
        found = zoos()
        if LONG_TESTS:
            wires, chosen = sorted(found), list(PERTURBATIONS)
        else:
            wires = [chooser.choice(sorted(found))]
            others = [p for p in PERTURBATIONS if p.name not in ALLOWED]
            chosen = chooser.sample(others, min(SHARE, len(others)))
            chosen += [p for p in PERTURBATIONS if p.name in ALLOWED]
        escaped, refused = [], []
        for wire in wires:
            for perturbation in chosen:
                verdict, cases = judge(found[wire], perturbation)
                if verdict == "passed":
                    escaped.append(f"{wire} {perturbation.name} ({perturbation.what}): passed {cases}")
                elif verdict == "refused":
                    refused.append(f"{wire} {perturbation.name} ({perturbation.what}): failed {cases}")
        if escaped or refused:
            print("\n".join(["perturbations that passed:", *escaped, "allowed ones refused:", *refused]))
        self.assertEqual(escaped, [], f"seed {seed}: perturbations no case caught")
        self.assertEqual(refused, [], f"seed {seed}: allowed perturbations a case failed")

    def test_the_catalogue_names_each_perturbation_once_and_every_allowed_one(self) -> None:
        """Names are unique, and each allowed equivalence is a perturbation of the catalogue."""
        names = [p.name for p in PERTURBATIONS]
        self.assertEqual(len(names), len(set(names)))
        self.assertLessEqual(set(ALLOWED), set(names))


if __name__ == "__main__":
    unittest.main()
