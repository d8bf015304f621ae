"""The release report: python -m conformance gate, its JSON, its schema and its Markdown."""

from __future__ import annotations

import datetime
import importlib.metadata
import io
import json
import os
import tempfile
import unittest
from contextlib import redirect_stderr
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import h2.connection

from conformance import BackendConformanceTarget, backend_conformance_cases, openai_chat_wire
from conformance.__main__ import main
from conformance._targets import reference_targets
from conformance.contract import ToolSpec
from conformance.fixture import CONFORMANCE_FIXTURE
from conformance.gate.loop import AgentLoopTarget, LoopResult, LoopTask
from conformance.gate.reference_loop import ReferenceLoop
from conformance.gate.report import (
    BACKEND_SMOKE,
    GENERIC_BASE_URL,
    LOOP_SMOKE,
    client_version,
    kit_version,
    load_schema,
    run_cases,
    run_gate,
    schema_hash,
    target_of,
)
from conformance.gate.schema import validate
from conformance.gate.tools import tool_specs
from conformance.reference.openai_chat import OpenAIChatBackend
from tests.mutants.openai_chat import MUTANTS

from .test_provider_support import asyncio_debug_off_for_module

#: The suites here run without asyncio's debug mode unless CONFORMANCE_LONG_TESTS=1.
setUpModule, tearDownModule = asyncio_debug_off_for_module()

#: The reference openai-chat backend, with one case skipped by the target for a reason of its own.
SKIP_REASON = "this backend is never cancelled by its callers"
REFERENCE = BackendConformanceTarget(
    "reference openai-chat",
    openai_chat_wire,
    reference_targets(["openai-chat"], ["http/1.1"])[0][1].create_backend,
    skip={"cancel": SKIP_REASON},
)

#: A backend that hands tool arguments back as JSON text: its tool-call cases fail.
UNPARSED = next(m for m in MUTANTS if m.name == "unparsed-arguments")
BROKEN = BackendConformanceTarget(
    "unparsed arguments", openai_chat_wire, lambda url: UNPARSED.create(url, False)
)


@dataclass(frozen=True)
class ClientTarget(BackendConformanceTarget):
    """A target that names its client package, as an agent-loop target does."""

    client: str = "h2"


WITH_CLIENT = ClientTarget("reference with a client", openai_chat_wire, REFERENCE.create_backend)


def _backend_on_h2(url: str) -> Any:
    """A backend factory in a module that imports its client package (h2, here), as a user's does."""
    assert h2.connection.H2Connection is not None
    return REFERENCE.create_backend(url)


#: A target whose own code imports the client package it declares.
USES_ITS_CLIENT = ClientTarget("reference that imports its client", openai_chat_wire, _backend_on_h2)


@dataclass(frozen=True)
class GatewayTarget(BackendConformanceTarget):
    """A target that declares the upstream its gateway forwards to, over h2c."""

    upstream: str = "https://llm-gateway.example/v1"


GATEWAY = GatewayTarget(
    "gateway over h2c",
    openai_chat_wire,
    reference_targets(["openai-chat"], ["h2c"])[0][1].create_backend,
    http2=True,
)

#: The reference agent loop over the reference openai-chat backend.
LOOP = AgentLoopTarget(
    "reference loop on openai-chat",
    openai_chat_wire,
    lambda url: ReferenceLoop(OpenAIChatBackend(f"{url}/v1")),
)



class SilentLoop(ReferenceLoop):
    """The reference loop as a loop written before LoopResult.usage: it sets none."""

    async def run(self, task: Any) -> Any:
        result = await super().run(task)
        return LoopResult(result.text, result.finish_reason, result.stopped)


SILENT_LOOP = AgentLoopTarget(
    "a loop that says nothing of usage",
    openai_chat_wire,
    lambda url: SilentLoop(OpenAIChatBackend(f"{url}/v1")),
)


class Guesser:
    """A loop that answers at once without asking the model: it runs no tool and quotes no result."""

    def run(self, task: LoopTask) -> LoopResult:
        return LoopResult("I believe the answer is 42.", "stop")


GUESSER = AgentLoopTarget("a loop that never asks", openai_chat_wire, lambda url: Guesser())

#: A target that skips everything the smoke set runs.
SKIPS_SMOKE = BackendConformanceTarget(
    "skips the smoke set",
    openai_chat_wire,
    REFERENCE.create_backend,
    skip={"text": "covered elsewhere", "tool-call": "this backend offers no tools"},
)

SMOKE_NAMES = {"text/chat", "text/stream", "tool-call/chat", "tool-call/stream"}


def gate(argv: List[str], folder: str) -> Tuple[int, str, Optional[Dict[str, Any]], str]:
    """Run ``gate`` writing into ``folder``: the status, what it printed, the JSON and the Markdown."""
    json_path, md_path = os.path.join(folder, "report.json"), os.path.join(folder, "report.md")
    out = io.StringIO()
    status = main(["gate", *argv, "--json", json_path, "--markdown", md_path], out=out)
    report = json.loads(Path(json_path).read_text(encoding="utf-8"))
    return status, out.getvalue(), report, Path(md_path).read_text(encoding="utf-8")


def usage_error(argv: List[str]) -> str:
    """Run the command line expecting exit status 2; return what it printed to stderr."""
    err = io.StringIO()
    with redirect_stderr(err):
        try:
            main(argv, out=io.StringIO())
        except SystemExit as exc:
            if exc.code != 2:
                raise AssertionError(f"expected exit status 2, got {exc.code!r}") from None
            return err.getvalue()
    raise AssertionError("expected a usage error, got none")


def cases_of(report: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    return {case["name"]: case for stage in report["stages"] for case in stage["cases"]}


class FullRunTests(unittest.TestCase):
    """One full run of the reference target, read several ways."""

    status: int
    printed: str
    report: Dict[str, Any]
    markdown: str

    @classmethod
    def setUpClass(cls) -> None:
        with tempfile.TemporaryDirectory() as folder:
            cls.status, cls.printed, report, cls.markdown = gate(["tests.test_gate_report:REFERENCE"], folder)
        assert report is not None
        cls.report = report

    def test_the_json_of_a_real_run_validates_against_the_schema(self) -> None:
        """The shipped schema accepts the report a full run wrote, field for field."""
        self.assertEqual(validate(load_schema(), self.report), ())

    def test_the_schema_refuses_a_report_missing_a_field(self) -> None:
        """The schema is not vacuous: a report without its model, or with an unknown verdict, is refused."""
        stamp = {k: v for k, v in self.report["stamp"].items() if k != "model"}
        problems = validate(load_schema(), {**self.report, "stamp": stamp})
        self.assertEqual([str(p) for p in problems], ["$.stamp: missing required property 'model'"])
        case = {**self.report["stages"][0]["cases"][0], "verdict": "maybe"}
        stage = {**self.report["stages"][0], "cases": [case]}
        problems = validate(load_schema(), {**self.report, "stages": [stage]})
        self.assertEqual(len(problems), 1)
        self.assertIn("$.stages[0].cases[0].verdict: expected one of", str(problems[0]))

    def test_a_full_run_covers_every_case_and_exits_zero(self) -> None:
        """The default runs the whole matrix; with no failure the status is 0."""
        self.assertEqual(self.status, 0, self.printed)
        self.assertEqual(set(cases_of(self.report)), {c.name for c in backend_conformance_cases(REFERENCE)})
        self.assertEqual(self.report["stamp"]["selection"], "full")
        self.assertEqual(self.report["verdict"], "pass")

    def test_the_stamp_says_what_ran(self) -> None:
        """Model, wire, transport, base URL, schema hash, stream flags, kit version and a UTC time."""
        stamp = self.report["stamp"]
        self.assertEqual(stamp["model"], "conformance-model")
        self.assertEqual(stamp["wire"], "openai-chat")
        self.assertEqual(stamp["transport"], "http/1.1")
        self.assertEqual(stamp["base_url"], GENERIC_BASE_URL)
        self.assertEqual(stamp["tool_schema_sha256"], schema_hash([CONFORMANCE_FIXTURE.tool]))
        self.assertEqual(stamp["tools"], ["get_weather"])
        self.assertEqual(stamp["stream"], [False, True])
        self.assertEqual(stamp["kit_version"], kit_version())
        self.assertEqual(
            stamp["client"],
            {
                "package": None,
                "version": None,
                "verified": False,
                "evidence": "the target names no client package",
            },
        )
        when = datetime.datetime.strptime(stamp["timestamp"], "%Y-%m-%dT%H:%M:%SZ")
        now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        self.assertLess(abs((now - when).total_seconds()), 300)

    def test_totals_match_the_cases(self) -> None:
        """The totals count the verdicts listed, and every case has a duration."""
        cases = list(cases_of(self.report).values())
        totals = self.report["totals"]
        self.assertEqual(totals["cases"], len(cases))
        for key, verdict in (("passed", "pass"), ("failed", "fail"), ("skipped", "skip")):
            self.assertEqual(totals[key], sum(1 for c in cases if c["verdict"] == verdict), key)
        self.assertTrue(all(c["seconds"] >= 0 for c in cases))
        self.assertGreater(max(c["seconds"] for c in cases), 0)

    def test_the_report_holds_the_results_json_that_run_writes(self) -> None:
        """Every member of run --json is here with the same meaning: one script reads both reports."""
        from conformance._results import results_document

        expected = results_document([], command="", seconds=0.0)
        self.assertLessEqual(set(expected), set(self.report))
        self.assertEqual(self.report["schema"], expected["schema"])
        self.assertEqual(self.report["command"], "gate reference openai-chat (full)")
        rows = {c["case"]: c for c in self.report["cases"]}
        self.assertEqual(set(rows), set(cases_of(self.report)))
        self.assertEqual({c["outcome"] for c in rows.values()}, {"pass", "skip"})
        self.assertEqual(self.report["counts"]["cases"], self.report["totals"]["cases"])
        self.assertEqual(self.report["timestamp"], self.report["stamp"]["timestamp"])

    def test_skip_reasons_are_kept(self) -> None:
        """A case the target skips says why, in the JSON and the Markdown."""
        for mode in ("chat", "stream"):
            case = cases_of(self.report)[f"cancel/{mode}"]
            self.assertEqual((case["verdict"], case["detail"]), ("skip", SKIP_REASON))
        self.assertIn(f"- `cancel/chat`: {SKIP_REASON}", self.markdown)
        self.assertRegex(self.markdown, r"\| cancel \| ⏭️ skip \| ⏭️ skip \|")

    def test_the_markdown_has_the_verdict_the_stamp_and_the_matrix(self) -> None:
        """A header with the verdict, the stamp table, and a row per stage with a mark per mode."""
        lines = self.markdown.splitlines()
        self.assertEqual(lines[0], "## ✅ Conformance gate passed: reference openai-chat")
        self.assertIn(
            f"| tool schema sha256 | `{self.report['stamp']['tool_schema_sha256']}` (get_weather) |", lines
        )
        self.assertIn("| wire | `openai-chat` over http/1.1 |", lines)
        self.assertIn("| stage | chat | stream |", lines)
        self.assertIn("| text | ✅ pass | ✅ pass |", lines)
        self.assertIn("| stream-error | – | ✅ pass |", lines)  # a stream-only scenario
        self.assertNotIn("### Failures", self.markdown)

    def test_the_summary_line_and_the_paths_are_printed(self) -> None:
        """The command prints one summary line and where it wrote the two files."""
        self.assertRegex(
            self.printed,
            r"gate PASS: reference openai-chat \(full\), \d+ cases: "
            r"\d+ passed, 0 failed, \d+ skipped in [\d.]+ s\n"
            r"wrote .*report\.json and .*report\.md\n$",
        )


class GateCommandTests(unittest.TestCase):
    def test_smoke_runs_only_its_set(self) -> None:
        """--smoke runs text and tool-call in both modes, and nothing else."""
        with tempfile.TemporaryDirectory() as folder:
            status, _, report, _ = gate(["tests.test_gate_report:REFERENCE", "--smoke"], folder)
        assert report is not None
        self.assertEqual(status, 0)
        self.assertEqual(set(cases_of(report)), SMOKE_NAMES)
        self.assertEqual(report["stamp"]["selection"], "smoke")
        self.assertEqual({n.split("/")[0] for n in SMOKE_NAMES}, BACKEND_SMOKE)

    def test_a_failing_case_exits_one_with_its_text_in_both_outputs(self) -> None:
        """A failure gives status 1, and its whole text is in the JSON and in a <details> block."""
        with tempfile.TemporaryDirectory() as folder:
            status, printed, report, markdown = gate(["tests.test_gate_report:BROKEN", "--smoke"], folder)
        assert report is not None
        self.assertEqual(status, 1, printed)
        self.assertIn(
            "gate FAIL: unparsed arguments (smoke), 4 cases: 2 passed, 2 failed, 0 skipped", printed
        )
        self.assertEqual(report["verdict"], "fail")
        failed = {n: c for n, c in cases_of(report).items() if c["verdict"] == "fail"}
        self.assertEqual(set(failed), {"tool-call/chat", "tool-call/stream"})
        self.assertTrue(markdown.startswith("## ❌ Conformance gate failed: unparsed arguments\n"))
        self.assertIn("| tool-call | ❌ fail | ❌ fail |", markdown)
        for name, case in failed.items():
            self.assertIn("[tool-arguments]", case["detail"])
            self.assertFalse(case["crashed"])
            self.assertIn(f"<details><summary><code>{name}</code> failed:", markdown)
            self.assertIn(f"```text\n{case['detail'].rstrip()}\n```\n", markdown)

    def test_a_run_where_every_case_skipped_says_nothing_ran(self) -> None:
        """Every case skipped is no failure (status 0), but the summary and the header say nothing ran."""
        with tempfile.TemporaryDirectory() as folder:
            status, printed, report, markdown = gate(
                ["tests.test_gate_report:SKIPS_SMOKE", "--smoke"], folder
            )
        assert report is not None
        self.assertEqual(status, 0)
        self.assertEqual(report["totals"]["skipped"], 4)
        self.assertIn("0 passed, 0 failed, 4 skipped in", printed)
        self.assertIn("; nothing ran: check the skip reasons", printed)
        self.assertTrue(markdown.startswith("## ⚠️ Conformance gate passed without running a case: skips"))

    def test_a_test_case_class_on_a_suite_mixin_is_reported_as_its_target(self) -> None:
        """gate takes a TestCase class built on BackendConformanceTestCase, as run does."""
        with tempfile.TemporaryDirectory() as folder:
            status, printed, report, _ = gate(["tests.test_testcase:HookedConformance", "--smoke"], folder)
        assert report is not None
        self.assertEqual(status, 0, printed)
        self.assertEqual(
            (report["stamp"]["target"], report["stamp"]["suite"]), ("HookedConformance", "backend")
        )

    def test_a_declared_upstream_and_h2c_are_stamped(self) -> None:
        """A target's upstream is the base URL reported, and an http2 target's transport is h2c."""
        with tempfile.TemporaryDirectory() as folder:
            status, printed, report, markdown = gate(["tests.test_gate_report:GATEWAY", "--smoke"], folder)
        assert report is not None
        self.assertEqual(status, 0, printed)
        self.assertEqual(report["stamp"]["base_url"], "https://llm-gateway.example/v1")
        self.assertEqual(report["stamp"]["transport"], "h2c")
        self.assertIn("| wire | `openai-chat` over h2c |", markdown)
        self.assertIn("| base URL | `https://llm-gateway.example/v1` |", markdown)

    def test_the_client_version_is_stated_only_where_the_code_imports_it(self) -> None:
        """A client the target's code imports gets its installed version; one only declared does not."""
        version = importlib.metadata.version("h2")
        with tempfile.TemporaryDirectory() as folder:
            _, _, report, markdown = gate(["tests.test_gate_report:USES_ITS_CLIENT", "--smoke"], folder)
            assert report is not None
            client = report["stamp"]["client"]
            shown = (client["package"], client["version"], client["verified"])
            self.assertEqual(shown, ("h2", version, True))
            self.assertEqual(client["evidence"], "imported by tests.test_gate_report")
            self.assertIn(f"| client | `h2` {version} (imported by tests.test_gate_report) |", markdown)
            # The reference backend's factory lives in the kit, which never imports h2 at module level.
            _, _, report, markdown = gate(["tests.test_gate_report:WITH_CLIENT", "--smoke"], folder)
            assert report is not None
            client = report["stamp"]["client"]
            self.assertEqual(client["version"], "declared, not verified")
            self.assertFalse(client["verified"])
            said = f"h2 {version} is installed, but the target's code (conformance._targets)"
            self.assertIn(said, markdown)
            argv = ["tests.test_gate_report:WITH_CLIENT", "--smoke", "--client", "no-such-client-package"]
            _, _, report, _ = gate(argv, folder)
        assert report is not None
        self.assertEqual(report["stamp"]["client"]["version"], "not installed")
        self.assertFalse(report["stamp"]["client"]["verified"])

    def test_defaults_write_into_the_working_directory(self) -> None:
        """Without --json and --markdown the files are conformance-report.json and .md where it runs."""
        before = os.getcwd()
        with tempfile.TemporaryDirectory() as folder:
            os.chdir(folder)
            try:
                status = main(["gate", "tests.test_gate_report:REFERENCE", "--smoke"], out=io.StringIO())
            finally:
                os.chdir(before)
            self.assertEqual(status, 0)
            self.assertEqual(sorted(os.listdir(folder)), ["conformance-report.json", "conformance-report.md"])

    def test_junit_beside_the_report_with_a_failing_case(self) -> None:
        """--junit writes every case of the gate as JUnit XML, a failure with its text, exit 1 kept."""
        import xml.etree.ElementTree as ET

        with tempfile.TemporaryDirectory() as folder:
            junit = os.path.join(folder, "gate.xml")
            status, out, report, _ = gate(["tests.test_gate_report:SKIPS_SMOKE", "--junit", junit], folder)
            root = ET.parse(junit).getroot()
        self.assertIn(f"JUnit XML to {junit}", out)
        assert report is not None
        self.assertEqual(root.get("tests"), str(report["totals"]["cases"]))
        self.assertEqual(root.get("skipped"), str(report["totals"]["skipped"]))
        self.assertEqual(root.get("failures"), str(report["totals"]["failed"]))
        self.assertEqual(status, 1 if report["totals"]["failed"] else 0)

    def test_options_before_gate_stand(self) -> None:
        """--json and --jobs given before "gate" are the gate's, not undone by its defaults."""
        with tempfile.TemporaryDirectory() as folder:
            path, md = os.path.join(folder, "early.json"), os.path.join(folder, "r.md")
            argv = ["--json", path, "--jobs", "2", "gate", "tests.test_gate_report:REFERENCE", "--smoke"]
            status = main([*argv, "--markdown", md], out=io.StringIO())
            self.assertEqual(status, 0)
            self.assertTrue(os.path.exists(path))

    def test_bad_input_is_a_usage_error_that_says_what_to_fix(self) -> None:
        """An unknown target, an object that is no target, a bad path or --jobs 0 exit 2 with the reason."""
        with tempfile.TemporaryDirectory() as folder:
            missing = os.path.join(folder, "no-such-folder", "report.json")
            table = [
                (["tests.no_such_module:X"], "cannot import 'tests.no_such_module'"),
                (["tests.test_gate_report:NOTHING"], "'tests.test_gate_report' has no attribute 'NOTHING'"),
                (["tests.test_gate_report"], "expected MODULE:NAME"),
                (
                    ["tests.test_gate_report:SMOKE_NAMES"],
                    "is a set; expected an AgentLoopTarget, a BackendConformanceTarget, or a TestCase",
                ),
                (["tests.test_gate_report:REFERENCE", "--json", missing], "does not exist; create it first"),
                (
                    ["tests.test_gate_report:REFERENCE", "--markdown", folder],
                    "is a directory; give a file name",
                ),
                (["tests.test_gate_report:REFERENCE", "--jobs", "0"], "--jobs must be at least 1, got 0"),
            ]
            for argv, message in table:
                with self.subTest(argv=argv):
                    paths = [] if "--json" in argv else ["--json", os.path.join(folder, "r.json")]
                    self.assertIn(message, usage_error(["gate", *argv, *paths]))
            self.assertEqual(os.listdir(folder), [], "a usage error must not leave a report behind")

    def test_help_says_the_defaults_and_when_to_use_smoke(self) -> None:
        """gate --help names both default files and says which run suits which change."""
        from contextlib import redirect_stdout

        shown = io.StringIO()
        with redirect_stdout(shown), self.assertRaises(SystemExit) as done:
            main(["gate", "--help"], out=io.StringIO())
        self.assertEqual(done.exception.code, 0)
        text = " ".join(shown.getvalue().split())
        for phrase in (
            "conformance-report.json in the working directory",
            "conformance-report.md in the working directory",
            "Use --smoke after a configuration change",
            "full matrix after an SDK, schema, gateway or parser change",
            "exit status: 0 all passed (or skipped), 1 a case failed, 2 a usage error",
        ):
            self.assertIn(phrase, text)

    def test_the_same_file_for_both_outputs_is_refused(self) -> None:
        """--json and --markdown naming one file would lose one of them: a usage error."""
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "report")
            message = usage_error(
                ["gate", "tests.test_gate_report:REFERENCE", "--json", path, "--markdown", path]
            )
        self.assertIn("give two different files", message)


class AgentLoopReportTests(unittest.TestCase):
    def test_an_agent_loop_target_runs_the_agent_loop_suite(self) -> None:
        """An AgentLoopTarget is reported on its stages, stamped with the gate's four tools."""
        with tempfile.TemporaryDirectory() as folder:
            status, printed, report, markdown = gate(["tests.test_gate_report:LOOP"], folder)
        assert report is not None
        self.assertEqual(status, 0, printed)
        self.assertEqual(validate(load_schema(), report), ())
        self.assertEqual(report["stamp"]["suite"], "agent-loop")
        self.assertEqual(report["stamp"]["tool_schema_sha256"], schema_hash(tool_specs()))
        self.assertEqual(report["stamp"]["tools"], sorted(t.name for t in tool_specs()))
        stages = [stage["stage"] for stage in report["stages"]]
        self.assertEqual(stages[:4], ["text", "forced-tool", "fragmented-arguments", "parallel-calls"])
        self.assertIn("| forced-tool | ✅ pass | ✅ pass |", markdown)

    def test_smoke_runs_stages_a_and_b_in_both_modes(self) -> None:
        """--smoke on an agent loop runs text and forced-tool, chat and stream, and nothing else."""
        with tempfile.TemporaryDirectory() as folder:
            status, _, report, _ = gate(["tests.test_gate_report:LOOP", "--smoke"], folder)
        assert report is not None
        self.assertEqual(status, 0)
        expected = {f"{stage}/{mode}" for stage in LOOP_SMOKE for mode in ("chat", "stream")}
        self.assertEqual(set(cases_of(report)), expected)

    def test_each_case_keeps_its_requests_and_usage_as_evidence(self) -> None:
        """Each agent-loop case reports each request's status and request id, and its usage, in both files."""
        with tempfile.TemporaryDirectory() as folder:
            status, printed, report, markdown = gate(["tests.test_gate_report:LOOP", "--smoke"], folder)
        assert report is not None
        self.assertEqual(status, 0, printed)
        case = cases_of(report)["forced-tool/chat"]
        self.assertEqual([r["status"] for r in case["requests"]], [200, 200])
        self.assertEqual([r["sequence"] for r in case["requests"]], [1, 2])
        for request in case["requests"]:
            self.assertRegex(request["request_id"], r"^req_[0-9a-f]{32}$")
            self.assertEqual(request["target"], "/v1/chat/completions")
            self.assertIn(f"200 `{request['request_id']}`", markdown)
        twice = {"input_tokens": 62, "output_tokens": 34, "total_tokens": 96}
        self.assertEqual(case["usage"], {"reported": twice, "sent": twice})
        self.assertIn("usage 62 in, 34 out, 96 total (the provider's: 62 in, 34 out, 96 total)", markdown)

    def test_a_loop_that_reports_no_usage_passes_and_is_reported_so(self) -> None:
        """A loop that leaves LoopResult.usage unset passes; the report says "not reported"."""
        with tempfile.TemporaryDirectory() as folder:
            argv = ["tests.test_gate_report:SILENT_LOOP", "--smoke"]
            status, printed, report, markdown = gate(argv, folder)
        assert report is not None
        self.assertEqual(status, 0, printed)
        self.assertEqual(validate(load_schema(), report), ())
        for case in cases_of(report).values():
            self.assertEqual(case["usage"]["reported"], "not reported")
            self.assertEqual(case["usage"]["sent"]["input_tokens"] % 31, 0)
        self.assertIn("usage not reported (the provider's: 31 in, 17 out, 48 total)", markdown)

    def test_the_backend_suite_keeps_no_request_evidence(self) -> None:
        """A backend case reports no requests and no usage evidence: its own checks hold usage per reply."""
        result = run_cases([DuckTypedCase("text/chat")], jobs=1)[0]
        self.assertEqual(result.as_dict()["requests"], [])
        self.assertIsNone(result.as_dict()["usage"])

    def test_a_broken_loop_fails_with_the_invariants_it_broke(self) -> None:
        """A loop that never asks the model exits 1; each failure names its invariant in both outputs."""
        with tempfile.TemporaryDirectory() as folder:
            status, printed, report, markdown = gate(["tests.test_gate_report:GUESSER", "--smoke"], folder)
        assert report is not None
        self.assertEqual(status, 1, printed)
        failed = {n: c for n, c in cases_of(report).items() if c["verdict"] == "fail"}
        self.assertEqual(set(failed), {"text/chat", "text/stream", "forced-tool/chat", "forced-tool/stream"})
        for name, case in failed.items():
            self.assertRegex(case["detail"], r"\[[a-z-]+\]")
            self.assertIn(f"<details><summary><code>{name}</code> failed:", markdown)
            self.assertIn(case["detail"].rstrip(), markdown)


class DuckTypedCase:
    """The least a case needs for the report: a name and run()."""

    def __init__(self, name: str, outcome: Optional[BaseException] = None) -> None:
        self.name = name
        self.outcome = outcome

    def run(self) -> None:
        if self.outcome is not None:
            raise self.outcome


class ReportPartsTests(unittest.TestCase):
    def test_any_case_with_a_name_and_run_is_reported(self) -> None:
        """Stage and mode come from the name; a pass, a failure, a skip and a crash each keep their text."""
        results = run_cases(
            [
                DuckTypedCase("forced-tool/stream"),
                DuckTypedCase(
                    "fragmented-arguments/chat", AssertionError("executed before call_1 was complete")
                ),
                DuckTypedCase("cancel/stream", unittest.SkipTest("the wire cannot pause")),
                DuckTypedCase("text/chat", RuntimeError("the loop fell over")),
            ],
            jobs=2,
        )
        got = [(r.name, r.stage, r.mode, r.verdict, r.crashed) for r in results]
        self.assertEqual(
            got,
            [
                ("forced-tool/stream", "forced-tool", "stream", "pass", False),
                ("fragmented-arguments/chat", "fragmented-arguments", "chat", "fail", False),
                ("cancel/stream", "cancel", "stream", "skip", False),
                ("text/chat", "text", "chat", "fail", True),
            ],
        )
        self.assertEqual(results[1].detail, "executed before call_1 was complete")
        self.assertEqual(results[2].detail, "the wire cannot pause")
        self.assertIn("RuntimeError: the loop fell over", results[3].detail)

    def test_backticks_in_a_failure_cannot_break_out_of_its_block(self) -> None:
        """A failure quoting a fenced block is fenced with more backticks than it holds."""
        from conformance.gate import report as module

        fenced = module._fence("the body was:\n```json\n{}\n```")
        self.assertTrue(fenced.startswith("````text\n") and fenced.endswith("\n````"))
        self.assertEqual(module._code("a `b` c"), "``a `b` c``")
        self.assertEqual(module._cell("x | y\nz"), "x \\| y z")

    def test_a_collapsed_failure_shows_its_first_problem(self) -> None:
        """The summary line is the first problem, cut at a word when long; else the first line."""
        from conformance.gate import report as module

        detail = (
            "wire/chat stage: the loop must do it\n"
            "  - call_1 echo_json: executed 2 times [executions]\n"
            "  hint: x"
        )
        self.assertEqual(module._headline(detail), "call_1 echo_json: executed 2 times [executions]")
        self.assertEqual(module._headline("one line only"), "one line only")
        self.assertEqual(module._headline(""), "no message")
        self.assertEqual(module._headline("- " + "word " * 50, limit=20), "word word word …")
        self.assertEqual(module._headline("x" * 30, limit=10), "x" * 9 + " …")

    def test_the_schema_hash_is_canonical(self) -> None:
        """Tool order and key order do not change the hash; a changed description does."""
        a = ToolSpec("a", "first", {"type": "object", "properties": {"x": {"type": "string"}}})
        b = ToolSpec("b", "second", {"properties": {"y": {"type": "integer"}}, "type": "object"})
        b_reordered = ToolSpec("b", "second", {"type": "object", "properties": {"y": {"type": "integer"}}})
        self.assertEqual(schema_hash([a, b]), schema_hash([b_reordered, a]))
        self.assertNotEqual(schema_hash([a, b]), schema_hash([a, ToolSpec("b", "other", b.parameters)]))
        self.assertRegex(schema_hash([a]), r"^[0-9a-f]{64}$")
        import types

        proxied = ToolSpec(
            "a", "first", types.MappingProxyType({"type": "object", "properties": {"x": {"type": "string"}}})
        )
        self.assertEqual(schema_hash([proxied]), schema_hash([a]))

    def test_client_version_reads_installed_packages_only(self) -> None:
        """An installed package gives its version, a missing one 'not installed', none gives None."""
        self.assertEqual(client_version("h2"), importlib.metadata.version("h2"))
        self.assertEqual(client_version("no-such-client-package"), "not installed")
        self.assertIsNone(client_version(None))

    def test_the_docs_describe_every_field_of_the_schema(self) -> None:
        """docs/gate-report.md names each field the schema has, so neither drifts from the other."""
        docs = (Path(__file__).resolve().parent.parent / "docs" / "gate-report.md").read_text(
            encoding="utf-8"
        )
        schema = load_schema()
        case = schema["properties"]["stages"]["items"]["properties"]["cases"]["items"]
        for part in (schema, schema["properties"]["stamp"], schema["properties"]["totals"], case):
            for name in part["properties"]:
                with self.subTest(field=name):
                    self.assertIn(f"`{name}`", docs)

    def test_an_agent_loop_test_case_class_stands_for_its_target(self) -> None:
        """A loop's TestCase class gives its settings as a target; a class with no wire is refused."""
        from conformance._targets import UsageError
        from conformance.gate import AgentLoopConformanceTestCase

        class Loop(AgentLoopConformanceTestCase, unittest.TestCase):
            wire = openai_chat_wire
            skip = {"cancel": "not cancellable"}

            def create_loop(self, url: str) -> Any:
                return ReferenceLoop(OpenAIChatBackend(f"{url}/v1"))

        target = target_of(Loop)
        self.assertIsInstance(target, AgentLoopTarget)
        self.assertEqual((target.wire, dict(target.skip)), (openai_chat_wire, {"cancel": "not cancellable"}))
        self.assertIs(target_of(REFERENCE), REFERENCE)

        class NoWire(AgentLoopConformanceTestCase, unittest.TestCase):
            abstract = True

        with self.assertRaisesRegex(UsageError, "sets no wire"):
            target_of(NoWire)

    def test_run_gate_refuses_what_is_not_a_target(self) -> None:
        """Handing run_gate anything but a target says which targets it takes."""
        with self.assertRaisesRegex(TypeError, "expected a BackendConformanceTarget or an AgentLoopTarget"):
            run_gate(object())


if __name__ == "__main__":
    unittest.main()
