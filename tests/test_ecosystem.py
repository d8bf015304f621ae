"""The conformance table's machinery, fed made-up rows: none of the table's libraries is needed."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
import unittest
from pathlib import Path
from typing import Any, Dict, List, Optional
from unittest import mock

from ecosystem import runner, table

#: A failure message in the shape the kit's cases raise (see conformance._checks.failure_message).
MESSAGE = """openai-chat/stream truncated-tool-call: the backend must report "length" and drop the call
  - [cut-mid-string] the call get_weather was yielded with cut-off arguments [stream-dropped-truncated]
  - finish_reason was 'tool_calls', expected 'length' [finish-reason]
  - finish_reason was 'tool_calls', expected 'length' [finish-reason]
  requests seen: POST /v1/chat/completions
  hint: drop a call whose arguments do not parse when the turn ended on length"""


def row(
    outcome: str = "fail", check: str = "stream-dropped-truncated", library: str = "somelib"
) -> Dict[str, Any]:
    failures = [{"case": "truncated-tool-call/stream", "check": check, "reason": "yielded a cut-off call"}]
    return {
        "adapter": "somelib_adapter",
        "library": library,
        "version": "1.0",
        "kind": "backend",
        "target": "somelib chat",
        "wire": "openai-chat",
        "cases": {"text/chat": "pass", "truncated-tool-call/stream": outcome, "content-filter/chat": "skip"},
        "failures": failures if outcome in ("fail", "error") else [],
    }


def results(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    return table.new_results(rows, generated="2026-01-01", python="3.11.0", kit="0.0", seconds=1.0, jobs=1)


def classification(**changes: Any) -> table.Classification:
    fields = {
        "id": "somelib-keeps-truncated",
        "library": "somelib",
        "case": "truncated-tool-call/stream",
        "check": "stream-dropped-truncated",
        "kind": "library-bug",
        "summary": "yields a call cut off by the token limit",
        "where": "somelib/stream.py:10",
        "severity": "harmful",
        "code_file": "somelib/stream.py",
        "code_text": "yield call",
        "source": "https://platform.openai.com/docs/api-reference/chat/object (finish_reason length)",
    }
    fields.update(changes)
    return table.Classification(**fields)


class _Case:
    """A stand-in for a kit case: a name, and what ``run`` raises."""

    def __init__(self, name: str, raises: BaseException | None) -> None:
        self.name = name
        self.raises = raises

    def run(self) -> None:
        if self.raises is not None:
            raise self.raises


class _Flaky(_Case):
    """A case that fails on its first run only."""

    def run(self) -> None:
        raises, self.raises = self.raises, None
        if raises is not None:
            raise raises


class _Target:
    name = "somelib chat"

    class wire:  # noqa: N801 - stands in for a Wire instance
        name = "openai-chat"


class TableTest(unittest.TestCase):
    def test_problems_in_reads_each_check_once(self) -> None:
        """A case's failure message gives each check id once, with its line's text as the reason."""
        self.assertEqual(
            table.problems_in(MESSAGE),
            [
                (
                    "stream-dropped-truncated",
                    "the call get_weather was yielded with cut-off arguments",
                ),
                ("finish-reason", "finish_reason was 'tool_calls', expected 'length'"),
            ],
        )

    def test_classify_splits_classified_unclassified_and_unused(self) -> None:
        """A failure a pattern matches is classified, another library's is not, an unused entry is named."""
        mine, other = table.failures_of([row(), row(library="otherlib")])
        stale = classification(id="stale", check="never-seen")
        found, unclassified, unused = table.classify([mine, other], [classification(), stale])
        self.assertEqual(found[mine].id, "somelib-keeps-truncated")
        self.assertEqual(unclassified, [other])
        self.assertEqual([c.id for c in unused], ["stale"])

    def test_a_pattern_names_alternatives_split_by_a_bar(self) -> None:
        """One entry matches either of two check ids, and neither a third nor another case."""
        either = classification(check="finish-reason|stream-dropped-*")
        for check in ("finish-reason", "stream-dropped-truncated"):
            with self.subTest(check=check):
                self.assertTrue(either.matches(table.failures_of([row(check=check)])[0]))
        self.assertFalse(either.matches(table.failures_of([row(check="usage")])[0]))
        self.assertFalse(classification(case="text/*|abort/*").matches(table.failures_of([row()])[0]))

    def test_a_variant_keyed_entry_matches_that_shape_alone(self) -> None:
        """An entry keyed to one variant matches a failure on it, not one on another shape or on
        none; an entry with no variant matches all three, and the page names the shape."""
        def on(name: str) -> Dict[str, Any]:
            return {**row(), "failures": [{**row()["failures"][0], "variant": name}]}

        failures = {name: table.failures_of([on(name)])[0] for name in ("cut-mid-string", "cut-mid-key")}
        failures[""] = table.failures_of([row()])[0]
        keyed = classification(variant="cut-mid-string")
        self.assertTrue(keyed.matches(failures["cut-mid-string"]))
        self.assertFalse(keyed.matches(failures["cut-mid-key"]))
        self.assertFalse(keyed.matches(failures[""]))
        self.assertTrue(all(classification().matches(f) for f in failures.values()))
        found, unclassified, _ = table.classify(list(failures.values()), [keyed])
        self.assertEqual(len(found), 1)
        self.assertEqual(len(unclassified), 2)
        both = classification(variant="cut-mid-string|cut-mid-key")
        page = table.render_page(results([on("cut-mid-key")]), [both])
        self.assertIn("On the provider's shapes: `cut-mid-string`, `cut-mid-key`.", page)
        chosen = classification(kind="design-choice", knob="its setting", variant="cut-mid-key")
        page = table.render_page(results([on("cut-mid-key")]), [chosen])
        self.assertIn("Knob: its setting. On the provider's shapes: `cut-mid-key`.", page)

    def test_a_class_without_its_field_is_refused(self) -> None:
        """A library bug that cites no code, or an unknown kind, is refused when the file loads."""
        for entry, problem in (
            ({**classification().__dict__, "where": ""}, "must name its where"),
            ({**classification().__dict__, "kind": "shrug"}, "kind must be one of"),
            ({**classification().__dict__, "kind": "design-choice"}, "must name its knob"),
        ):
            with self.subTest(problem), tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / "classifications.json"
                path.write_text(json.dumps({"classifications": [entry]}), encoding="utf-8")
                with self.assertRaisesRegex(ValueError, problem):
                    table.load_classifications(path)

    def test_changed_verdicts_names_each_change(self) -> None:
        """A pass turned failure, or a failure on another check, is a change; a target not run is not."""
        committed = results([row(outcome="pass"), {**row(), "adapter": "not_run", "target": "other"}])
        self.assertEqual(table.changed_verdicts(committed, results([row(outcome="pass")])), [])
        changed = table.changed_verdicts(committed, results([row()]))
        self.assertEqual(
            changed,
            [
                "somelib chat truncated-tool-call/stream: "
                "committed 'pass', now 'fail stream-dropped-truncated'"
            ],
        )
        other_check = table.changed_verdicts(results([row()]), results([row(check="finish-reason")]))
        self.assertEqual(len(other_check), 1)

    def test_a_flaky_case_is_not_compared(self) -> None:
        """A case a flaky classification names may pass in one run and fail in the next."""
        flaky = classification(flaky=True)
        self.assertEqual(
            table.changed_verdicts(results([row(outcome="pass")]), results([row()]), [flaky]), []
        )
        self.assertEqual(
            len(table.changed_verdicts(results([row(outcome="pass")]), results([row()]), [classification()])),
            1,
        )

    def test_page_lists_the_bug_and_marks_the_unclassified(self) -> None:
        """The page shows each library bug with its code, and flags a failure nothing classifies."""
        page = table.render_page(results([row()]), [classification()])
        self.assertIn("somelib/stream.py:10", page)
        self.assertIn("| somelib | 1.0 | somelib chat | openai-chat | ✓ | ✗ | – |", page)
        self.assertNotIn("Unclassified", page)
        self.assertIn("**unclassified**", table.render_page(results([row()]), []))


class RunnerTest(unittest.TestCase):
    def test_run_target_records_pass_skip_fail_and_error(self) -> None:
        """Each outcome is kept; a failure's check ids come from its message, a crash as error:<type>."""
        cases = [
            _Case("text/chat", None),
            _Case("content-filter/chat", unittest.SkipTest("no filter")),
            _Case("truncated-tool-call/stream", AssertionError(MESSAGE)),
            _Case("abort/chat", KeyError("get_weather")),
        ]
        with mock.patch.object(runner, "_cases", return_value=cases):
            found = runner.run_target("a", "somelib", "1.0", "backend", _Target())
        self.assertEqual(
            found["cases"],
            {
                "text/chat": "pass",
                "content-filter/chat": "skip",
                "truncated-tool-call/stream": "fail",
                "abort/chat": "error",
            },
        )
        self.assertEqual(
            [(f["case"], f["check"]) for f in found["failures"]],
            [
                ("truncated-tool-call/stream", "stream-dropped-truncated"),
                ("truncated-tool-call/stream", "finish-reason"),
                ("abort/chat", "error:KeyError"),
            ],
        )

    def test_a_reason_reads_the_same_in_every_run(self) -> None:
        """A fixture id's random run id is left out of the reason, its sequence number kept."""
        message = MESSAGE.replace("with cut-off arguments", "with cut-off arguments (fx-1a2b3c4d-0002)")
        with mock.patch.object(runner, "_cases", return_value=[_Case("text/chat", AssertionError(message))]):
            found = runner.run_target("a", "somelib", "1.0", "backend", _Target())
        wanted = "the call get_weather was yielded with cut-off arguments (fx-<run>-0002)"
        self.assertEqual(found["failures"][0]["reason"], wanted)

    def test_a_failure_is_run_again_before_it_is_believed(self) -> None:
        """A case that fails once and then passes is a pass, named as retried."""
        cases = [_Flaky("abort/stream", AssertionError(MESSAGE)), _Case("text/chat", AssertionError(MESSAGE))]
        with mock.patch.object(runner, "_cases", return_value=cases):
            found = runner.run_target("a", "somelib", "1.0", "backend", _Target())
        self.assertEqual(found["cases"], {"abort/stream": "pass", "text/chat": "fail"})
        self.assertEqual(found["retried"], ["abort/stream"])
        self.assertEqual({f["case"] for f in found["failures"]}, {"text/chat"})

    def run_main(self, fresh: List[Dict[str, Any]], entries: List[table.Classification], *args: str) -> int:
        """The command over ``fresh`` rows (as if adapters had run), in a folder of its own: its status."""
        with tempfile.TemporaryDirectory() as folder:
            here = Path(folder)
            (here / "classifications.json").write_text(
                json.dumps({"classifications": [e.__dict__ for e in entries]}), encoding="utf-8"
            )
            (here / "results.json").write_text(json.dumps(results([row(outcome="pass")])), encoding="utf-8")
            patches = [
                mock.patch.object(runner, "CLASSIFICATIONS", here / "classifications.json"),
                mock.patch.object(runner, "RESULTS", here / "results.json"),
                mock.patch.object(runner, "PAGE", here / "ecosystem.md"),
                mock.patch.object(runner, "adapters", return_value=["somelib_adapter"]),
                mock.patch.object(runner, "run_adapter", return_value=fresh),
                mock.patch.object(runner.metadata, "version", return_value="0.0"),
            ]
            with contextlib.ExitStack() as stack, contextlib.redirect_stdout(io.StringIO()) as out:
                for patch in patches:
                    stack.enter_context(patch)
                status = runner.main(list(args))
            self.printed = out.getvalue()
            self.written = json.loads((here / "results.json").read_text(encoding="utf-8"))
            return status

    def test_an_unclassified_failure_fails_the_command(self) -> None:
        """An injected failure no classification matches makes the command exit 1 and name it."""
        self.assertEqual(self.run_main([row()], []), 1)
        self.assertIn(
            "UNCLASSIFIED somelib chat truncated-tool-call/stream [stream-dropped-truncated]", self.printed
        )
        self.assertEqual(self.run_main([row()], [classification()]), 0)
        self.assertEqual(self.written["rows"][0]["cases"]["truncated-tool-call/stream"], "fail")

    def test_check_fails_on_a_changed_verdict(self) -> None:
        """With --check, a classified failure where the committed table had a pass still exits 1."""
        self.assertEqual(self.run_main([row()], [classification()], "--check"), 1)
        self.assertIn("CHANGED somelib chat truncated-tool-call/stream", self.printed)
        self.assertEqual(self.run_main([row(outcome="pass")], [classification()], "--check"), 0)

    def test_a_run_of_some_adapters_counts_its_own_rows(self) -> None:
        """With --only, the summary line counts that run's targets and cases, not the merged table's."""
        other = dict(row(outcome="pass"), adapter="other_adapter", target="other chat")
        with mock.patch.object(runner, "merge", return_value=[other, other, row()]):
            self.assertEqual(self.run_main([row()], [classification()], "--only", "somelib_adapter"), 0)
        self.assertIn("ecosystem: 1 targets, 3 cases, 1 failed, 1 failures classified", self.printed)
        self.assertEqual(len(self.written["rows"]), 3)

    def test_a_library_bug_names_its_cases_and_checks_and_its_code(self) -> None:
        """A library bug with a wildcard case or check, no severity, or no quoted line is refused."""
        good = dict(
            classification().__dict__,
            case="truncated-tool-call/stream",
            severity="harmful",
            code_file="somelib/stream.py",
            code_text="yield call",
        )
        for change, words in (
            ({"case": "truncated-tool-call/*"}, "never a wildcard"),
            ({"check": "stream-*"}, "never a wildcard"),
            ({"severity": "bad"}, "severity must be one of"),
            ({"code_text": ""}, "quotes its code line"),
            ({"source": " "}, "names the capture or provider doc"),
        ):
            with self.subTest(change=change), tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / "classifications.json"
                path.write_text(json.dumps({"classifications": [dict(good, **change)]}), encoding="utf-8")
                with self.assertRaisesRegex(ValueError, words):
                    table.load_classifications(path)

    def test_the_committed_classifications_load(self) -> None:
        """The classifications beside the adapters are well formed, each with its class's field."""
        loaded = table.load_classifications(runner.CLASSIFICATIONS)
        self.assertEqual(len({c.id for c in loaded}), len(loaded))

    def test_a_verdict_on_a_shape_names_where_the_provider_sends_it(self) -> None:
        """Each bug or design choice that classifies a failure on a variant (a shape the provider
        sends) names the capture or doc that shows it, and the page shows it."""
        committed = table.read_results(runner.RESULTS)
        assert committed is not None
        loaded = table.load_classifications(runner.CLASSIFICATIONS)
        found, _, _ = table.classify(table.failures_of(committed["rows"]), loaded)
        shaped = {
            (row["adapter"], row["target"], item["case"], item["check"])
            for row in committed["rows"]
            for item in row["failures"]
            if item.get("variant")
        }
        page = runner.PAGE.read_text(encoding="utf-8")
        for failure, entry in found.items():
            key = (failure.adapter, failure.target, failure.case, failure.check)
            if entry.kind == "kit-bug" or key not in shaped:
                continue
            with self.subTest(entry=entry.id, case=failure.case):
                self.assertTrue(entry.source.strip(), f"{entry.id}: a verdict on a shape names its source")
                self.assertIn(entry.source, page)

    def test_a_variant_is_kept_with_its_failure(self) -> None:
        """The shape a check failed on is recorded beside the failure, for the source it rests on."""
        with mock.patch.object(runner, "_cases", return_value=[_Case("text/chat", AssertionError(MESSAGE))]):
            found = runner.run_target("a", "somelib", "1.0", "backend", _Target())
        self.assertEqual(
            [(f["check"], f.get("variant")) for f in found["failures"]],
            [("stream-dropped-truncated", "cut-mid-string"), ("finish-reason", None)],
        )


def _site_packages() -> Optional[Path]:
    """The ecosystem environment's site-packages, where the pinned libraries are installed
    (``CONFORMANCE_ECOSYSTEM_VENV``, as dev.py names it, or ``.venv-ecosystem``)."""
    env = Path(os.environ.get("CONFORMANCE_ECOSYSTEM_VENV") or runner.ROOT / ".venv-ecosystem")
    found = sorted((env / "lib").glob("python3*/site-packages"))
    return found[-1] if found else None


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed(site: Path) -> Dict[str, str]:
    """Each distribution installed in ``site``, by canonical name: its version."""
    found = {}
    for info in site.glob("*.dist-info"):
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        found[_canonical(name)] = version
    return found


def _pins() -> Dict[str, str]:
    """Each library ecosystem/requirements.txt pins, by canonical name: its version."""
    pins = {}
    for line in (runner.HERE / "requirements.txt").read_text(encoding="utf-8").splitlines():
        found = re.match(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==(\S+)", line.strip())
        if found:
            pins[_canonical(found.group(1))] = found.group(2)
    return pins


class PublicErrorTest(unittest.TestCase):
    def test_an_exception_is_read_whole_and_a_false_retry_signal_stands(self) -> None:
        """The body and status decide the kind; a class whose retry signal the bytes contradict stands."""
        from conformance import LLMError
        from ecosystem.adapters._kit import public_error

        body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        server = LLMError.from_kind("server_error", "InternalServerError")
        read = public_error("anthropic", status=529, headers={}, body=body, signalled=server)
        self.assertEqual(read.kind if read else None, "overloaded")
        quota = {"error": {"type": "insufficient_quota", "code": "insufficient_quota", "message": "quota"}}
        limited = LLMError.from_kind("rate_limit", "RateLimitError")
        stood = public_error("openai-chat", status=429, headers={}, body=quota, signalled=limited)
        self.assertIs(stood, limited)
        read = public_error("openai-chat", status=500, headers={}, body=None, signalled=limited)
        self.assertIs(read, limited)


def _raised_from(module: str, name: str, *bases: type) -> type:
    """An exception class as ``module`` defines it (the transport rule reads module and name)."""
    return type(name, bases or (Exception,), {"__module__": module})


class TransportRuleTest(unittest.TestCase):
    """One rule for a transport failure: a documented class of the library's own, or its raw transport's
    error where it documents none, is read as the contract's retryable server_error; a leak is not."""

    def test_a_leak_is_read_only_where_the_library_documents_no_class_of_its_own(self) -> None:
        from ecosystem.adapters._kit import transport_error

        httpx_error = _raised_from("httpx._exceptions", "RemoteProtocolError")("cut")
        httpx2_error = _raised_from("httpx2._exceptions", "RemoteProtocolError")("cut")
        for library, exc in (("ollama", httpx_error), ("google-genai", httpx_error), ("cohere", httpx_error)):
            with self.subTest(library=library):
                read = transport_error(exc, "w", library)
                self.assertIsNotNone(read)
                assert read is not None
                self.assertEqual((read.kind, read.retryable, read.status), ("server_error", True, None))
        for library in ("anthropic", "openai", "langchain-anthropic"):
            with self.subTest(library=library):
                self.assertIsNone(transport_error(httpx2_error, "w", library))

    def test_a_documented_class_passes_and_its_subclass_too(self) -> None:
        from ecosystem.adapters._kit import transport_error

        own = _raised_from("anthropic._exceptions", "APIConnectionError")
        wrapped = _raised_from("langchain_anthropic.chat_models", "AnthropicConnectionError", own)
        self.assertIsNotNone(transport_error(own("Connection error."), "anthropic", "anthropic"))
        read = transport_error(wrapped("Connection error."), "anthropic", "langchain-anthropic")
        self.assertIsNotNone(read)
        self.assertIsNotNone(transport_error(ConnectionError("Incomplete stream"), "w", "langchain-aws"))

    def test_only_the_raised_exception_counts(self) -> None:
        """A crash raised while handling a transport error is that crash, not a transport failure."""
        from ecosystem.adapters._kit import transport_error

        try:
            try:
                raise _raised_from("httpx._exceptions", "ReadError")("reset")
            except Exception:
                raise KeyError("done")  # noqa: B904 - raised while handling, as a crashing library does
        except KeyError as exc:
            self.assertIsNone(transport_error(exc, "ollama", "ollama"))
        self.assertIsNone(transport_error(ValueError("not json"), "ollama", "ollama"))

    def test_a_library_without_a_rule_is_refused_by_name(self) -> None:
        from ecosystem.adapters._kit import transport_error

        with self.assertRaisesRegex(ValueError, "no transport rule for 'newlib': add its transports"):
            transport_error(OSError(), "w", "newlib")

    def test_the_page_shows_each_librarys_rule(self) -> None:
        """The page's transport table is rendered from the rule the adapters apply."""
        from ecosystem.adapters._kit import LIBRARY_TRANSPORTS

        page = table.render_page(results([row()]), [classification()])
        for library, rule in LIBRARY_TRANSPORTS.items():
            with self.subTest(library=library):
                self.assertIn(f"| {library} |", page)
                self.assertIn(rule.source, page)


class StreamEndTest(unittest.TestCase):
    """The shared Chat Completions reader never dresses a stream cut short as a finished turn."""

    @staticmethod
    def _stream(*chunks: Any) -> Any:
        async def gen() -> Any:
            for chunk in chunks:
                yield chunk

        return gen()

    @staticmethod
    def _chunk(text: str = "", finish: Optional[str] = None, calls: Any = ()) -> Any:
        from types import SimpleNamespace

        delta = SimpleNamespace(content=text, tool_calls=list(calls))
        return SimpleNamespace(usage=None, choices=[SimpleNamespace(delta=delta, finish_reason=finish)])

    @staticmethod
    def _call(signature: Optional[str]) -> Any:
        from types import SimpleNamespace

        fields = {"thought_signature": signature} if signature else None
        function = SimpleNamespace(name="get_weather", arguments='{"city": "Paris"}')
        return SimpleNamespace(index=0, id="call_1", function=function, provider_specific_fields=fields)

    def _run(self, stream: Any, reading: str) -> List[Any]:
        import asyncio

        from ecosystem.adapters._kit import openai_chunks

        async def collect() -> List[Any]:
            return [c async for c in openai_chunks(stream, reading=reading)]

        return asyncio.run(collect())

    def test_a_stream_without_a_finish_reason_is_a_cut(self) -> None:
        """A careful backend on the SDK raises retryably; a normalizing library's end goes on unfinished."""
        from conformance import LLMError

        with self.assertRaises(LLMError) as raised:
            self._run(self._stream(self._chunk("It is 1")), "backend")
        self.assertTrue(raised.exception.retryable)
        self.assertIsNone(raised.exception.status)
        stream = self._stream(self._chunk("It is 1"), self._chunk(calls=[self._call(None)]))
        got = self._run(stream, "as-given")
        self.assertEqual([c.finish_reason for c in got], [None, None])
        self.assertEqual(got[-1].tool_calls[0].name, "get_weather")

    def test_a_finished_stream_keeps_its_reason_and_each_calls_signature(self) -> None:
        stream = self._stream(self._chunk(calls=[self._call("c2ln")]), self._chunk(finish="tool_calls"))
        got = self._run(stream, "as-given")
        self.assertEqual(got[-1].finish_reason, "tool_calls")
        self.assertEqual([r.signature for r in got[-1].tool_calls[0].reasoning], ["c2ln"])


class ExplainTest(unittest.TestCase):
    """--explain prints what the library raised, its chain and fields, without changing what the case sees."""

    def test_an_exception_is_described_with_its_chain_and_fields(self) -> None:
        """The raised class, the fields a library keeps its provider's answer in, and each cause."""
        from ecosystem.explain import describe_exception

        class APIStatusError(Exception):
            status_code = 529
            body = {"type": "error", "error": {"type": "overloaded_error"}}

        try:
            try:
                raise ConnectionResetError("reset by peer")
            except ConnectionResetError as cause:
                raise APIStatusError("Overloaded") from cause
        except APIStatusError as exc:
            lines = describe_exception(exc)
        text = "\n".join(lines)
        self.assertIn("<locals>.APIStatusError: 'Overloaded'", text)
        self.assertIn(".status_code = 529", text)
        self.assertIn("'overloaded_error'", text)
        self.assertIn("from builtins.ConnectionResetError: 'reset by peer'", text)

    def test_the_witness_keeps_each_methods_kind_and_passes_results_through(self) -> None:
        """An async backend stays async (the driver probes it), and its chunks and errors pass unchanged."""
        import asyncio
        import inspect

        from ecosystem.explain import Witness

        class Backend:
            async def chat(self, request: Any) -> str:
                raise KeyError(request)

            async def chat_stream(self, request: Any) -> Any:
                yield "a"
                yield "b"

        out = io.StringIO()
        witness = Witness(Backend(), out, "run 1 ")
        self.assertTrue(inspect.iscoroutinefunction(witness.chat))
        self.assertTrue(inspect.isasyncgenfunction(witness.chat_stream))

        async def use() -> List[str]:
            with self.assertRaises(KeyError):
                await witness.chat("q")
            return [c async for c in witness.chat_stream("q")]

        self.assertEqual(asyncio.run(use()), ["a", "b"])
        printed = out.getvalue()
        self.assertIn("run 1 call 1 raised:\n  raised builtins.KeyError: \"'q'\"", printed)
        self.assertIn("  chunk 'a'", printed)
        self.assertIn("run 1 call 2 ended normally", printed)

        class Sync:
            def chat(self, request: Any) -> str:
                return "done"

        self.assertFalse(inspect.iscoroutinefunction(Witness(Sync(), out).chat))
        self.assertEqual(Witness(Sync(), out).chat("q"), "done")

    def test_explain_needs_one_adapter(self) -> None:
        """--explain without exactly one --only is refused with what to do."""
        with contextlib.redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit):
            runner.main(["--explain", "text/chat"])
        self.assertIn("name the adapter with one --only", err.getvalue())


class LatestTest(unittest.TestCase):
    """--latest: the same adapters on the newest releases, and the page's section on what changed."""

    def test_a_changed_verdict_names_the_release_it_was_seen_in(self) -> None:
        """Versions side by side, one line per changed verdict with both verdicts and the new release."""
        pinned = results([row(), {**row(outcome="pass"), "target": "somelib stream"}])
        newer = results(
            [
                {**row(outcome="pass"), "version": "1.4"},
                {**row(outcome="pass"), "target": "somelib stream", "version": "1.4"},
            ]
        )
        lines = "\n".join(table.latest_lines(pinned, newer))
        self.assertIn("| somelib | 1.0 | 1.4 | 1 |", lines)
        self.assertIn(
            "- *somelib chat* `truncated-tool-call/stream`: fail stream-dropped-truncated at the pin "
            "(somelib 1.0), pass in somelib 1.4",
            lines,
        )
        self.assertNotIn("*somelib stream*", lines)
        same = "\n".join(table.latest_lines(pinned, results([{**row(), "version": "1.4"}])))
        self.assertIn("No verdict changed.", same)
        self.assertIn("Not run yet", "\n".join(table.latest_lines(pinned, None)))

    def test_a_latest_run_writes_its_own_results_and_leaves_the_pinned_ones(self) -> None:
        """The newest releases' rows go to results-latest.json; results.json and --check are the pins'."""
        with tempfile.TemporaryDirectory() as folder:
            here = Path(folder)
            (here / "classifications.json").write_text(
                json.dumps({"classifications": [classification().__dict__]}), encoding="utf-8"
            )
            pinned = results([row()])
            (here / "results.json").write_text(json.dumps(pinned), encoding="utf-8")
            patches = [
                mock.patch.object(runner, "CLASSIFICATIONS", here / "classifications.json"),
                mock.patch.object(runner, "RESULTS", here / "results.json"),
                mock.patch.object(runner, "RESULTS_LATEST", here / "results-latest.json"),
                mock.patch.object(runner, "PAGE", here / "ecosystem.md"),
                mock.patch.object(runner, "adapters", return_value=["somelib_adapter"]),
                mock.patch.object(
                    runner, "run_adapter", return_value=[{**row(outcome="pass"), "version": "2.0"}]
                ),
                mock.patch.object(runner.metadata, "version", return_value="0.0"),
            ]
            with contextlib.ExitStack() as stack, contextlib.redirect_stdout(io.StringIO()):
                for patch in patches:
                    stack.enter_context(patch)
                self.assertEqual(runner.main(["--latest"]), 0)
            self.assertEqual(json.loads((here / "results.json").read_text(encoding="utf-8")), pinned)
            latest = json.loads((here / "results-latest.json").read_text(encoding="utf-8"))
            self.assertEqual(latest["rows"][0]["version"], "2.0")
            page = (here / "ecosystem.md").read_text(encoding="utf-8")
            self.assertIn("| somelib | 1.0 | 2.0 | 1 |", page)
            self.assertIn("pass in somelib 2.0", page)


class CodeLineTest(unittest.TestCase):
    def test_each_bugs_quoted_line_is_in_the_installed_library(self) -> None:
        """Each library bug's quoted code is found in the pinned version's installed file."""
        site = _site_packages()
        if site is None:
            self.skipTest("no .venv-ecosystem here: run python3 dev.py ecosystem --help to build it")
        installed, pins = _installed(site), _pins()
        for bug in table.load_classifications(runner.CLASSIFICATIONS):
            if bug.kind != "library-bug":
                continue
            with self.subTest(bug=bug.id):
                library = _canonical(bug.library)
                if library not in installed:
                    # `dev.py ecosystem --only` (CI's check) installs only its adapters' libraries.
                    self.skipTest(f"{bug.library} is not in this ecosystem environment")
                self.assertEqual(installed[library], pins.get(library, installed[library]),
                                 f"{bug.library}: the environment holds another release than the pin")
                path = site / bug.code_file
                self.assertTrue(path.is_file(), f"{bug.id}: {bug.code_file} is not installed")
                text = path.read_text(encoding="utf-8")
                self.assertIn(bug.code_text, text, f"{bug.id}: the quoted line is not in {bug.code_file}")
                self.assertIn(bug.code_file.split("/")[0], bug.where, f"{bug.id}: where names another file")

    def test_each_bug_has_a_report_to_file(self) -> None:
        """Each library bug has its ready-to-file text in ecosystem/reports: the pinned version, the code
        line, what the provider sends (its source), and a reproduction on `serve` with what it printed."""
        pins = _pins()
        for bug in table.load_classifications(runner.CLASSIFICATIONS):
            if bug.kind == "library-bug":
                with self.subTest(bug=bug.id):
                    report = table.REPORTS / f"{bug.id}.md"
                    self.assertTrue(report.is_file(), f"{bug.id}: no {report.name}")
                    text = report.read_text(encoding="utf-8")
                    pinned = f"{bug.library} {pins[_canonical(bug.library)]}"
                    self.assertIn(pinned, text, "the pinned version")
                    self.assertIn(bug.code_file, text)
                    self.assertIn(bug.code_text.strip(), text, "the quoted code line")
                    self.assertIn(bug.source, text, "what the provider sends, and where that is shown")
                    self.assertRegex(text, r"```\npython -m conformance serve --wire \S+ --(scenario|stage) ")
                    self.assertRegex(text, r"(?s)## Reproduce.*```python\n.+```")
                    self.assertRegex(text, r"(?s)It prints.*```\n.+```")


if __name__ == "__main__":
    unittest.main()
