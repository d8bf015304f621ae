"""The reporting sites the zoos' sabotage works by: found in the source, each one taken out alone."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List

from .reporting_sites import CheckSites, SiteWatch

CHECKS_SOURCE = '''
from typing import Any, List


def _shown(calls: List[Any]) -> List[str]:
    return [f"call {c}" for c in calls]


def _words(seen: Any) -> List[str]:
    if seen == "none":
        return []
    if seen == "first":
        return ["the first branch"]
    problems = []
    problems.append(f"the second branch, of {_shown([seen])}")
    return problems


def _data(seen: Any) -> List[str]:
    return [seen] if seen else []


def _maybe(seen: Any) -> List[str]:
    return [f"the third branch: {seen}"] if seen == "third" else []


ROWS = {"words": _words, "data": _data, "maybe": _maybe}
'''

PROBLEMS_SOURCE = '''
from dataclasses import dataclass
from typing import Any, List


@dataclass(frozen=True)
class Problem:
    check: str
    text: str


def check(seen: Any) -> List[Problem]:
    if seen == "first":
        return [Problem("c", "the first branch")]
    return [
        Problem(
            "c",
            "the second branch",
        )
    ]
'''


def _module(case: unittest.TestCase, name: str, source: str) -> ModuleType:
    """``source`` as the module ``name``, from a file of its own (the sites are read from it)."""
    folder = tempfile.mkdtemp(prefix="sites-")
    case.addCleanup(shutil.rmtree, folder, True)
    case.addCleanup(sys.modules.pop, name, None)
    path = Path(folder) / f"{name}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class CheckSitesTests(unittest.TestCase):
    def setUp(self) -> None:
        self.module = _module(self, "sites_checks_sample", CHECKS_SOURCE)
        self.table: Dict[str, Any] = dict(self.module.ROWS)
        self.sites = CheckSites((self.module,), self.table, helpers=("_shown",))

    def test_each_return_or_append_of_words_is_a_site_and_data_or_helpers_are_not(self) -> None:
        """Words returned or appended are sites, a conditional list too; a helper's and data are not."""
        names = [site.name for site in self.sites.sites]
        self.assertEqual(
            names,
            ["sites_checks_sample._words#1", "sites_checks_sample._words#2", "sites_checks_sample._maybe#1"],
        )

    def test_a_site_taken_out_reports_nothing_and_the_others_report_as_before(self) -> None:
        """Within without(), the site's branch is gone; the table's other entries are untouched."""
        with self.sites.installed():
            words = self.table["words"]
            with self.sites.recording() as seen:
                self.assertEqual(words("first"), ["the first branch"])
                self.assertEqual(words("second"), ["the second branch, of ['call second']"])
            self.assertEqual(seen, {"sites_checks_sample._words#1", "sites_checks_sample._words#2"})
            with self.sites.without("sites_checks_sample._words#1"):
                self.assertEqual(words("first"), [])
                self.assertEqual(len(words("second")), 1)
            with self.sites.without("sites_checks_sample._maybe#1"):
                self.assertEqual(self.table["maybe"]("third"), [])
            self.assertEqual(self.table["maybe"]("third"), ["the third branch: third"])
        self.assertIs(self.table["words"], self.module.ROWS["words"])


class SiteWatchTests(unittest.TestCase):
    def test_a_problem_is_marked_with_the_call_that_built_it_across_lines(self) -> None:
        """Each construction is a site, named by its function and place, a call over lines included."""
        module = _module(self, "sites_problems_sample", PROBLEMS_SOURCE)
        watch = SiteWatch((module,), module.Problem)
        both = ["sites_problems_sample.check#1", "sites_problems_sample.check#2"]
        self.assertEqual([s.name for s in watch.sites], both)
        with watch.installed():
            built: List[Any] = module.check("first") + module.check("second")
        self.assertEqual([p.site for p in built], both)
        with watch.without("sites_problems_sample.check#2"), watch.recording() as seen:
            kept = watch.keep(built)
        self.assertEqual([p.text for p in kept], ["the first branch"])
        self.assertEqual(seen, {"sites_problems_sample.check#1"})


if __name__ == "__main__":
    unittest.main()
