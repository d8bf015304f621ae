"""The docs: no anchor or id row written twice, and every count they state is the code's."""

from __future__ import annotations

import re
import unittest
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
#: The conformance table's page is generated (ecosystem/table.py): a repeated failure
#: line or a heading per library there is by design, not a bad merge.
HAND_WRITTEN = [page for page in PAGES if page != ROOT / "docs" / "ecosystem.md"]


def slug(heading: str) -> str:
    """A Markdown heading's anchor (GitHub's rule: lower case, punctuation dropped, spaces to dashes)."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> List[str]:
    """Every anchor of a page: its headings' and its explicit ``<a id>``/``<a name>`` ones, in order."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            found.append(slug(line.lstrip("#")))
        found += re.findall(r"<a (?:id|name)=\"([^\"]+)\"", line) if not fenced else []
    return found


#: The first header cell of a table keyed by ids, one row each: the gate's checks,
#: stages and faults. (A wire page's variant table is keyed by scenario, several rows each.)
ID_HEADERS = ("id", "stage", "check")


def id_tables(text: str) -> Iterator[Tuple[int, List[Tuple[int, str]]]]:
    """Each table keyed by ids (ID_HEADERS): its first line and each row's id (`` | `id` | ... ``,
    an anchor before the id allowed)."""
    rows: List[Tuple[int, str]] = []
    start, keyed = 0, False
    for number, line in enumerate([*text.splitlines(), ""], 1):
        if not line.startswith("|"):
            if keyed and rows:
                yield start, rows
            rows, start, keyed = [], 0, False
            continue
        if not start:
            start = number
            keyed = line.strip("| ").split(" |")[0].strip().lower() in ID_HEADERS
        key = re.match(r"\| (?:<a (?:id|name)=\"[^\"]*\"></a>)?`([^`]+)` \|", line)
        if key:
            rows.append((number, key.group(1)))


def duplicates(items: List[str]) -> List[str]:
    seen: Dict[str, int] = {}
    for item in items:
        seen[item] = seen.get(item, 0) + 1
    return sorted(item for item, count in seen.items() if count > 1)


#: Two bullets of one page that open with this many words alike say the same thing twice.
BULLET_WORDS = 8


class DuplicateTests(unittest.TestCase):
    def test_no_page_has_an_anchor_twice(self) -> None:
        """A heading or anchor written twice on a page is a merge gone wrong: links find the first."""
        for page in HAND_WRITTEN:
            with self.subTest(page=str(page.relative_to(ROOT))):
                self.assertEqual(duplicates(anchors(page.read_text(encoding="utf-8"))), [])

    def test_no_table_of_ids_has_an_id_twice(self) -> None:
        """In a table keyed by ids (checks, variants, options), each id has one row."""
        for page in PAGES:
            for start, rows in id_tables(page.read_text(encoding="utf-8")):
                with self.subTest(page=str(page.relative_to(ROOT)), table_line=start):
                    twice = duplicates([key for _, key in rows])
                    lines = {key: [n for n, k in rows if k == key] for key in twice}
                    self.assertEqual(lines, {}, "the same id in several rows (line numbers)")

    def test_a_row_written_twice_by_hand_is_found(self) -> None:
        """The check above sees a gate-stages.md row duplicated, as a bad merge leaves it."""
        text = (ROOT / "docs" / "gate-stages.md").read_text(encoding="utf-8")
        row = next(line for line in text.splitlines() if line.startswith("| `finished` |"))
        broken = text.replace(row, f"{row}\n{row.replace('returned', 'came back with')}", 1)
        found = [duplicates([key for _, key in rows]) for _, rows in id_tables(broken)]
        self.assertEqual([twice for twice in found if twice], [["finished"]])
        self.assertEqual(duplicates(anchors("# A\n\n## B\n\n## B\n")), ["b"])

    def test_a_repeated_list_item_on_a_page_is_found(self) -> None:
        """No two bullets of a page open with the same eight words (gate.md's tutorial had such a pair)."""
        for page in HAND_WRITTEN:
            with self.subTest(page=str(page.relative_to(ROOT))):
                items, repeated = set(), []
                for item in re.findall(r"(?ms)^- (.+?)(?=^- |^\s*$)", page.read_text(encoding="utf-8")):
                    opening = " ".join(item.split()[:BULLET_WORDS])
                    if len(item.split()) >= BULLET_WORDS:
                        if opening in items:
                            repeated.append(opening)
                        items.add(opening)
                self.assertEqual(repeated, [], "bullets that open alike: one was merged in twice")


class GateStagesTests(unittest.TestCase):
    def test_every_invariant_has_one_row_and_every_row_an_invariant(self) -> None:
        """docs/gate-stages.md's id rows are exactly the gate's INVARIANTS, each once."""
        from conformance.gate._invariants import INVARIANTS

        text = (ROOT / "docs" / "gate-stages.md").read_text(encoding="utf-8")
        section = text[text.index("## Invariants") : text.index("## The zoo of broken loops")]
        keys = [key for _, rows in id_tables(section) for _, key in rows]
        self.assertEqual(duplicates(keys), [])
        self.assertEqual(sorted(set(keys) & set(INVARIANTS)), sorted(INVARIANTS), "ids with no row")


class CountTests(unittest.TestCase):
    """Each number of cases a page states, against what the code generates."""

    @staticmethod
    def counts() -> Dict[str, int]:
        from conformance._targets import reference_loop_targets, reference_targets
        from conformance.cases import backend_conformance_cases
        from conformance.gate import agent_loop_cases

        (_, backend), = reference_targets(["openai-chat"], ["http/1.1"])
        (_, loop), = reference_loop_targets(["openai-chat"], ["http/1.1"])
        return {
            "backend": len(list(backend_conformance_cases(backend))),
            "agent-loop": len(list(agent_loop_cases(loop))),
        }

    def test_gate_report_states_the_suites_case_counts(self) -> None:
        """docs/gate-report.md's "(backend suite, N cases)" and "(agent-loop suite, N cases)" are today's."""
        text = (ROOT / "docs" / "gate-report.md").read_text(encoding="utf-8")
        counts = self.counts()
        stated = re.findall(r"\((backend|agent-loop) suite, (\d+) cases\)", text)
        self.assertTrue(stated, "the page states no count: the pattern no longer matches it")
        for suite, number in stated:
            with self.subTest(suite=suite):
                self.assertEqual(int(number), counts[suite])

    def test_the_example_summary_adds_up_to_the_suite(self) -> None:
        """The sample `gate` summary line counts the agent-loop suite's cases, and its parts add up."""
        text = (ROOT / "docs" / "gate-report.md").read_text(encoding="utf-8")
        found = re.search(r"\(full\), (\d+) cases: (\d+) passed, (\d+) failed, (\d+) skipped", text)
        assert found is not None, "the sample summary line is gone: update this test with the page"
        total, passed, failed, skipped = map(int, found.groups())
        self.assertEqual(total, self.counts()["agent-loop"])
        self.assertEqual(passed + failed + skipped, total)


class ReadmeTests(unittest.TestCase):
    def test_the_readme_names_the_extras_the_tests_install(self) -> None:
        """The README's account of what `dev.py test` installs names each extra dev.py installs."""
        import importlib.util

        spec = importlib.util.spec_from_file_location("conformance_dev_script", ROOT / "dev.py")
        assert spec is not None and spec.loader is not None
        dev = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(dev)
        readme = (ROOT / "README.md").read_text(encoding="utf-8")
        for extra in dev.EXTRAS["test"]:
            with self.subTest(extra=extra):
                self.assertIn(f"`{extra}`", readme)


if __name__ == "__main__":
    unittest.main()
