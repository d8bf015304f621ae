"""JUnit XML and JSON results: the shapes CI systems read, from any outcome text."""

from __future__ import annotations

import json
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path

from conformance._results import CaseRecord, check_writable, junit_xml, results_json, write_reports

RECORDS = [
    CaseRecord("reference ollama", "text/chat", "pass", "", 0.012, wire="ollama"),
    CaseRecord(
        "reference ollama",
        "quota/chat",
        "FAIL",
        "ollama/chat quota: the backend must fail\n  - expected kind 'quota' [error-kind]",
        0.5,
        wire="ollama",
    ),
    CaseRecord("reference ollama", "abort/chat", "ERROR", "Traceback (most recent call last):\n  boom", 0.1),
    CaseRecord("other", "content-filter/chat", "skip", "ollama has no content filter", 0.0, suite="loop"),
]


class JUnitTests(unittest.TestCase):
    def test_a_suite_per_target_and_a_case_per_record(self) -> None:
        """Each target is a <testsuite> with its own counts; each record a <testcase> under it."""
        root = ET.fromstring(junit_xml(RECORDS, name="run", seconds=1.25))
        self.assertEqual(root.tag, "testsuites")
        self.assertEqual(
            {k: root.get(k) for k in ("tests", "failures", "errors", "skipped", "time")},
            {"tests": "4", "failures": "1", "errors": "1", "skipped": "1", "time": "0.612"},
        )
        suites = root.findall("testsuite")
        self.assertEqual([s.get("name") for s in suites], ["reference ollama", "other"])
        self.assertEqual(suites[0].get("tests"), "3")
        self.assertEqual(suites[0].get("failures"), "1")
        self.assertEqual([s.get("time") for s in suites], ["0.612", "0.000"])
        cases = suites[0].findall("testcase")
        self.assertEqual([c.get("name") for c in cases], ["text/chat", "quota/chat", "abort/chat"])
        self.assertEqual(cases[0].get("classname"), "reference ollama")
        self.assertEqual(list(cases[0]), [])

    def test_the_root_s_time_is_the_sum_of_the_suites_as_each_suite_s_is_of_its_cases(self) -> None:
        """One meaning of time at every level, whatever the run's wall time (cases side by side)."""
        root = ET.fromstring(junit_xml(RECORDS, name="run", seconds=0.2))
        suites = [float(s.get("time") or "") for s in root.findall("testsuite")]
        self.assertAlmostEqual(float(root.get("time") or ""), sum(suites), places=3)

    def test_failure_error_and_skip_carry_the_first_problem_and_the_whole_text(self) -> None:
        """A failure's message is its first problem with its check id, its body the whole text; a skip's
        its reason."""
        root = ET.fromstring(junit_xml(RECORDS, name="run", seconds=1.0))
        failure = root.find("testsuite/testcase[@name='quota/chat']/failure")
        assert failure is not None
        self.assertEqual(failure.get("message"), "expected kind 'quota' [error-kind]")
        self.assertIn("[error-kind]", failure.text or "")
        error = root.find("testsuite/testcase[@name='abort/chat']/error")
        assert error is not None
        self.assertIn("boom", error.text or "")
        skipped = root.find("testsuite/testcase[@name='content-filter/chat']/skipped")
        assert skipped is not None
        self.assertEqual(skipped.get("message"), "ollama has no content filter")

    def test_a_failure_without_a_check_id_keeps_its_first_line(self) -> None:
        """A text that names no check (a crash, a hang) gives its first line as the message."""
        text = "\n  the client exited with status 3\n  - no id here"
        record = CaseRecord("t", "text/chat", "FAIL", text, 0.0)
        root = ET.fromstring(junit_xml([record], name="run", seconds=0.0))
        failure = root.find("testsuite/testcase/failure")
        assert failure is not None
        self.assertEqual(failure.get("message"), "the client exited with status 3")

    def test_a_lone_surrogate_is_written_escaped_in_both_reports(self) -> None:
        """A client may report "\\ud800" (valid JSON): both files are written, and JSON reads it back."""
        record = CaseRecord("t", "text/chat", "FAIL", "got '\ud800' - x [content]", 0.0)
        with tempfile.TemporaryDirectory() as folder:
            paths = Path(folder) / "r.json", Path(folder) / "r.xml"
            write_reports([record], json_path=paths[0], junit_path=paths[1], command="c", seconds=0.0)
            document = json.loads(paths[0].read_text(encoding="utf-8"))
            junit = ET.fromstring(paths[1].read_text(encoding="utf-8"))
        self.assertEqual(document["cases"][0]["detail"], "got '\ud800' - x [content]")
        failure = junit.find("testsuite/testcase/failure")
        assert failure is not None
        self.assertEqual(failure.text, "got '\\ud800' - x [content]")

    def test_text_xml_cannot_hold_is_shown_escaped_not_lost(self) -> None:
        """A control character or colour code in a failure text becomes \\xNN; markup is escaped."""
        record = CaseRecord("t", "text/stream", "FAIL", "got '\x00\x1b[31m' <b>&", 0.0)
        text = junit_xml([record], name="run", seconds=0.0)
        failure = ET.fromstring(text).find("testsuite/testcase/failure")
        assert failure is not None
        self.assertEqual(failure.text, "got '\\x00\\x1b[31m' <b>&")

    def test_an_unknown_outcome_is_refused(self) -> None:
        """A record's outcome is one of the matrix's four words."""
        with self.assertRaisesRegex(ValueError, "outcome must be one of pass, FAIL, ERROR, skip"):
            CaseRecord("t", "c", "passed")


class JSONTests(unittest.TestCase):
    def test_totals_verdict_and_every_case(self) -> None:
        """The JSON has the counts, a verdict, the kit version and each case in order."""
        document = json.loads(results_json(RECORDS, command="python -m conformance", seconds=2.0))
        self.assertEqual(document["schema"], 1)
        self.assertEqual(document["verdict"], "fail")
        self.assertEqual(
            document["counts"], {"cases": 4, "passed": 1, "failed": 1, "errors": 1, "skipped": 1}
        )
        self.assertEqual([c["outcome"] for c in document["cases"]], ["pass", "fail", "error", "skip"])
        self.assertEqual(document["cases"][3]["suite"], "loop")
        self.assertRegex(document["kit_version"], r"^\d+\.\d+")

    def test_only_passes_and_skips_is_a_pass(self) -> None:
        """No failure and no error make the verdict pass."""
        document = json.loads(results_json([RECORDS[0], RECORDS[3]], command="c", seconds=0.0))
        self.assertEqual(document["verdict"], "pass")


class PathTests(unittest.TestCase):
    def test_bad_paths_are_named_before_any_case_runs(self) -> None:
        """A folder, a missing folder, or one file for both reports is refused with the option's name."""
        with tempfile.TemporaryDirectory() as folder:
            with self.assertRaisesRegex(ValueError, "--json .* is a folder"):
                check_writable({"--json": folder})
            with self.assertRaisesRegex(ValueError, "--junit .*does not exist; create it first"):
                check_writable({"--junit": str(Path(folder, "no", "r.xml"))})
            same = str(Path(folder, "r"))
            with self.assertRaisesRegex(ValueError, "--json and --junit both name"):
                check_writable({"--json": same, "--junit": same})
            self.assertEqual(check_writable({"--json": None}), {})

    def test_both_files_are_written(self) -> None:
        """write_reports writes each file asked for and says which."""
        with tempfile.TemporaryDirectory() as folder:
            paths = check_writable(
                {"--json": str(Path(folder, "r.json")), "--junit": str(Path(folder, "r.xml"))}
            )
            written = write_reports(
                RECORDS, json_path=paths["--json"], junit_path=paths["--junit"], command="c", seconds=0.1
            )
            self.assertEqual([kind for kind, _ in written], ["JSON", "JUnit XML"])
            ET.parse(paths["--junit"])
            json.loads(paths["--json"].read_text(encoding="utf-8"))


if __name__ == "__main__":
    unittest.main()
