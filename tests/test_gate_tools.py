"""The gate's deterministic tools, their sandbox, and the record of every execution."""

from __future__ import annotations

import asyncio
import json
import stat
import threading
import unittest
from typing import Any, List

import conformance.gate
from conformance import AbortController, ToolCall, ToolError, ToolSpec
from conformance.gate import (
    ALWAYS_ERROR,
    BASE_TOOLS,
    SANDBOX_FILES,
    TOOLS,
    ExecutionStatus,
    GateToolset,
    Sandbox,
    strict_problems,
    tool_specs,
    write_key,
)

ECHO_ARGS = {"text": "héllo ☀ 🌤", "count": 3, "tags": ["a", "b"]}


def echo(call_id: str = "call_1") -> ToolCall:
    return ToolCall(call_id, "echo_json", dict(ECHO_ARGS))


def delayed(call_id: str, delay_ms: int) -> ToolCall:
    return ToolCall(call_id, "delayed_value", {"value": "v", "delay_ms": delay_ms})


class GateToolsetTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self.tools = GateToolset(run_id="test")
        self.addCleanup(self.tools.close)


class SpecTests(unittest.TestCase):
    def test_five_tools_with_strict_schemas(self) -> None:
        """Each tool's schema forbids extra properties and requires every property."""
        self.assertEqual(
            list(TOOLS), ["echo_json", "read_fixture", "delayed_value", "always_error", "append_record"]
        )
        for name, tool in TOOLS.items():
            with self.subTest(tool=name):
                self.assertEqual(strict_problems(tool.parameters), ())
                self.assertTrue(tool.description)

    def test_specs_are_contract_tool_specs(self) -> None:
        """tool_specs gives ToolSpec objects, the base four or by name, and refuses an unknown name."""
        specs = tool_specs()
        self.assertEqual([s.name for s in specs], list(BASE_TOOLS))
        with GateToolset() as toolset:
            self.assertEqual([s.name for s in toolset.specs()], list(BASE_TOOLS))
        self.assertEqual(tool_specs("append_record")[0].parameters, TOOLS["append_record"].parameters)
        self.assertTrue(all(isinstance(s, ToolSpec) for s in specs))
        self.assertEqual(tool_specs("always_error")[0].parameters, TOOLS["always_error"].parameters)
        with self.assertRaisesRegex(ValueError, "unknown gate tool.*echo; the tools are echo_json"):
            tool_specs("echo")

    def test_spec_parameters_are_a_copy(self) -> None:
        """Editing a rendered spec leaves the tool's own schema intact."""
        spec = tool_specs("echo_json")[0]
        spec.parameters["properties"]["tags"]["items"]["type"] = "integer"  # type: ignore[index]
        spec.parameters["required"].pop()  # type: ignore[attr-defined]
        spec.parameters["properties"].clear()  # type: ignore[attr-defined]
        own = TOOLS["echo_json"].parameters
        self.assertIn("text", own["properties"])
        self.assertEqual(own["properties"]["tags"]["items"], {"type": "string"})
        self.assertEqual(own["required"], ["text", "count", "tags"])
        self.assertEqual(tool_specs("echo_json")[0].parameters, own)

    def test_gemini_specs_drop_only_additional_properties(self) -> None:
        """Gemini's variant has no additionalProperties and the same properties and required."""
        for strict, gemini in zip(tool_specs(), tool_specs(gemini=True)):
            with self.subTest(tool=strict.name):
                self.assertNotIn("additionalProperties", json.dumps(gemini.parameters))
                self.assertEqual(gemini.parameters["type"], "OBJECT")
                self.assertEqual(gemini.parameters["required"], strict.parameters["required"])
                self.assertEqual(set(gemini.parameters["properties"]), set(strict.parameters["properties"]))
        self.assertEqual(TOOLS["read_fixture"].gemini_spec(upper=False).parameters["type"], "object")

    def test_gate_all_is_sorted_and_resolves(self) -> None:
        """The gate package lists each public name once, in order, and each exists."""
        names = conformance.gate.__all__
        self.assertEqual(names, sorted(set(names)))
        for name in names:
            with self.subTest(name=name):
                self.assertTrue(hasattr(conformance.gate, name))


class ExecutionTests(GateToolsetTestCase):
    def test_echo_json_returns_its_arguments_and_fixture_id(self) -> None:
        """echo_json answers with the arguments as given and the execution's fixture id."""
        result = self.tools.execute(echo())
        self.assertEqual((result.call_id, result.name, result.error), ("call_1", "echo_json", None))
        self.assertEqual(json.loads(result.content), {"fixture_id": "fx-test-0001", "echo": ECHO_ARGS})
        self.assertIn("héllo ☀ 🌤", result.content)  # not escaped: the answer can quote it as is

    def test_every_execution_is_recorded(self) -> None:
        """A record has the fixture id, call id, tool, arguments, key, times and result."""
        result = self.tools.execute(echo(), key="turn-1/call_1")
        (record,) = self.tools.log.records()
        self.assertEqual(
            (record.sequence, record.fixture_id, record.call_id, record.tool, record.key, record.status),
            (1, "fx-test-0001", "call_1", "echo_json", "turn-1/call_1", ExecutionStatus.OK),
        )
        self.assertEqual(record.arguments, ECHO_ARGS)
        self.assertLessEqual(record.started, record.ended)
        self.assertIs(record.result, result)
        self.assertTrue(record.ran)
        self.assertIs(self.tools.log.find("fx-test-0001"), record)
        self.assertEqual(self.tools.log.for_call("call_1"), (record,))
        self.assertEqual(self.tools.log.for_tool("echo_json"), (record,))

    def test_key_defaults_to_the_call_id(self) -> None:
        """Without an idempotency key the record is keyed by the call id."""
        self.tools.execute(echo("call_9"))
        self.assertEqual(self.tools.log.records()[0].key, "call_9")

    def test_arguments_are_recorded_as_they_were(self) -> None:
        """Changing the arguments after the call does not change the record."""
        call = echo()
        self.tools.execute(call)
        call.arguments["tags"].append("late")  # type: ignore[index]
        self.assertEqual(self.tools.log.records()[0].arguments["tags"], ["a", "b"])

    def test_double_execution_is_run_and_shown(self) -> None:
        """The toolset never hides a second run of a key: both run, and duplicates() names them."""
        first = self.tools.execute(echo())
        second = self.tools.execute(echo())
        self.assertNotEqual(first.content, second.content)  # each has its own fixture id
        self.assertEqual(list(self.tools.log.duplicates()), ["call_1"])
        self.assertEqual(len(self.tools.log.duplicates()["call_1"]), 2)

    def test_fixture_ids_are_unique_and_follow_the_run_id(self) -> None:
        """Ids differ between executions and toolsets; a fixed run id repeats them."""
        with GateToolset() as a, GateToolset() as b, GateToolset(run_id="test") as c:
            ids = [json.loads(t.execute(echo()).content)["fixture_id"] for t in (a, b, c, self.tools)]
        self.assertEqual(len(set(ids[:2] + ids[3:])), 3)
        self.assertEqual(ids[2], "fx-test-0001")

    def test_always_error_returns_the_same_error_every_time(self) -> None:
        """always_error gives one stable structured error, and records it as an error."""
        calls = [ToolCall(f"c{n}", "always_error", {"reason": str(n)}) for n in range(3)]
        results = [self.tools.execute(call) for call in calls]
        self.assertEqual([r.error for r in results], [ALWAYS_ERROR] * 3)
        self.assertEqual(json.loads(results[0].text)["error"]["code"], "fixture_failure")
        self.assertTrue(all(r.status == ExecutionStatus.ERROR and r.ran for r in self.tools.log))

    def test_refused_calls_are_errors_recorded_as_not_run(self) -> None:
        """An unknown tool or arguments the schema forbids come back as errors, never raised."""
        table = [
            (ToolCall("c", "get_weather", {}), "unknown_tool",
             "no tool 'get_weather'; the tools are echo_json"),
            (ToolCall("c", "echo_json", {"text": "x", "count": 1}), "invalid_arguments",
             "missing required property 'tags'"),
            (ToolCall("c", "echo_json", {**ECHO_ARGS, "extra": 1}), "invalid_arguments",
             "unexpected property 'extra'"),
            (ToolCall("c", "read_fixture", "weather.json"), "invalid_arguments",  # type: ignore[arg-type]
             "expected object, got string"),
            (ToolCall("c", "echo_json", {}, unparsed_arguments='{"text": "x'), "invalid_arguments",
             """the arguments of echo_json are not a JSON object: '{"text": "x'; the call was not run"""),
            (delayed("c", -1), "invalid_arguments", "between 0 and 10000, got -1"),
            (delayed("c", 10_001), "invalid_arguments", "between 0 and 10000, got 10001"),
        ]
        for call, code, message in table:
            with self.subTest(code=code, message=message):
                result = self.tools.execute(call)
                assert result.error is not None
                self.assertEqual(result.error.code, code)
                self.assertIn(message, result.error.message)
                record = self.tools.log.records()[-1]
                self.assertEqual((record.status, record.ran), (ExecutionStatus.ERROR, False))

    def test_concurrent_executions_each_get_their_own_record(self) -> None:
        """Threads executing at once leave one record each, with distinct fixture ids."""
        def work(worker: int) -> None:
            for n in range(25):
                self.tools.execute(echo(f"w{worker}-{n}"))

        threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        records = self.tools.log.records()
        self.assertEqual(len(records), 200)
        self.assertEqual(len({r.fixture_id for r in records}), 200)
        self.assertEqual(sorted(r.sequence for r in records), list(range(1, 201)))
        self.assertEqual(self.tools.log.duplicates(), {})


class WriteTests(GateToolsetTestCase):
    def write(self, call_id: str, key: str = "k-1") -> ToolCall:
        return ToolCall(call_id, "append_record", {"idempotency_key": key, "record": "ship it"})

    def test_append_record_writes_every_run_to_the_journal(self) -> None:
        """Each run appends an entry, a repeated key included: keeping a write to once is the loop's part."""
        first = self.tools.execute(self.write("call_1"))
        self.tools.execute(self.write("call_2"))
        self.assertEqual(
            json.loads(first.content),
            {"fixture_id": "fx-test-0001", "appended": "ship it", "idempotency_key": "k-1", "entry": 1},
        )
        entries = self.tools.journal.entries()
        self.assertEqual(
            [(e.number, e.key, e.record) for e in entries], [(1, "k-1", "ship it"), (2, "k-1", "ship it")]
        )
        self.assertEqual(len(self.tools.journal.by_key("k-1")), 2)
        self.assertEqual(str(entries[0]), "#1 'k-1': 'ship it'")

    def test_a_refused_write_lands_nothing(self) -> None:
        """A write whose arguments break the schema is refused at the door and leaves no entry."""
        result = self.tools.execute(ToolCall("call_1", "append_record", {"idempotency_key": "k"}))
        self.assertEqual(result.error.code if result.error else None, "invalid_arguments")
        self.assertEqual(self.tools.journal.entries(), ())

    def test_write_key_names_writes_and_not_reads(self) -> None:
        """A tool whose schema has idempotency_key is keyed by tool and key; any other tool is a read."""
        self.assertEqual(write_key(self.write("a"), TOOLS["append_record"].parameters), "append_record:k-1")
        self.assertEqual(write_key(self.write("b"), TOOLS["append_record"].parameters), "append_record:k-1")
        self.assertIsNone(write_key(echo(), TOOLS["echo_json"].parameters))
        bad = ToolCall("c", "append_record", {"idempotency_key": 7, "record": "x"})
        self.assertIsNone(write_key(bad, TOOLS["append_record"].parameters))


class ReadFixtureTests(GateToolsetTestCase):
    def test_every_sandbox_file_round_trips(self) -> None:
        """Each file comes back whole: JSON, multi-byte text, empty, and 64 KiB."""
        self.assertEqual(len(SANDBOX_FILES["large.txt"].encode()), 64 * 1024)
        for path, text in SANDBOX_FILES.items():
            with self.subTest(path=path):
                result = self.tools.execute(ToolCall("c", "read_fixture", {"path": path}))
                body = json.loads(result.content)
                self.assertEqual((body["path"], body["content"]), (path, text))

    def test_paths_outside_or_missing_are_structured_errors(self) -> None:
        """Escapes, absolute paths, odd and missing names are refused with a code, never raised."""
        table = [
            ("../secret", "outside_sandbox"),
            ("notes/../../secret", "outside_sandbox"),
            ("/etc/passwd", "outside_sandbox"),
            ("C:\\Windows\\win.ini", "outside_sandbox"),
            ("\\\\server\\share", "outside_sandbox"),
            ("", "invalid_path"),
            ("weather\x00.json", "invalid_path"),
            ("missing.txt", "not_found"),
            ("notes", "not_found"),
        ]
        for path, code in table:
            with self.subTest(path=path):
                result = self.tools.execute(ToolCall("c", "read_fixture", {"path": path}))
                assert result.error is not None
                self.assertEqual(result.error.code, code)
                self.assertEqual(result.error.details["path"], path)
        missing = self.tools.execute(ToolCall("c", "read_fixture", {"path": "missing.txt"}))
        assert missing.error is not None
        self.assertIn("weather.json", missing.error.message)

    def test_sandbox_is_read_only_and_removed_on_close(self) -> None:
        """No write bit is left on the sandbox; close removes it and later reads say so."""
        sandbox = Sandbox({"a.txt": "x", "d/b.txt": "y"})
        root = sandbox.root
        writable = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
        for path in (root, root / "a.txt", root / "d", root / "d" / "b.txt"):
            with self.subTest(path=path.name):
                self.assertEqual(path.stat().st_mode & writable, 0)
        self.assertEqual(sandbox.read("d/b.txt"), "y")
        sandbox.close()
        sandbox.close()
        self.assertFalse(root.exists())
        closed = sandbox.read("a.txt")
        self.assertIsInstance(closed, ToolError)
        assert isinstance(closed, ToolError)
        self.assertEqual(closed.code, "sandbox_closed")

    def test_sandbox_refuses_a_file_outside_itself(self) -> None:
        """A files table that would write outside the sandbox is refused, and nothing is left."""
        with self.assertRaisesRegex(ValueError, "outside the sandbox"):
            Sandbox({"../escape.txt": "x"})


class SharedSandboxTests(unittest.TestCase):
    def test_a_sandbox_passed_in_outlives_the_toolsets_that_use_it(self) -> None:
        """Toolsets over one sandbox read its files; closing them leaves it for its owner."""
        sandbox = Sandbox()
        self.addCleanup(sandbox.close)
        for run_id in ("a", "b"):
            with GateToolset(run_id=run_id, sandbox=sandbox) as tools:
                result = tools.execute(ToolCall(f"call_{run_id}", "read_fixture", {"path": "weather.json"}))
                self.assertEqual(json.loads(result.content)["content"], SANDBOX_FILES["weather.json"])
        self.assertFalse(sandbox.closed)
        self.assertTrue(sandbox.root.exists())

    def test_files_and_a_sandbox_together_are_refused(self) -> None:
        """A shared sandbox already holds its files: giving both is a mistake, named as such."""
        sandbox = Sandbox()
        self.addCleanup(sandbox.close)
        with self.assertRaisesRegex(ValueError, "give files or a sandbox, not both"):
            GateToolset(files={"a.txt": "x"}, sandbox=sandbox)

    def test_the_cases_share_one_sandbox_per_process(self) -> None:
        """The same sandbox each time; another process id gets its own and leaves the first alone."""
        import os
        import shutil
        from unittest import mock

        from conformance.gate.cases import shared_sandbox

        first = shared_sandbox()
        self.assertIs(shared_sandbox(), first)
        self.assertFalse(first.closed)
        with mock.patch("os.getpid", return_value=os.getpid() + 100000):
            child = shared_sandbox()
        self.addCleanup(child.close)
        self.assertIsNot(child, first)
        # The first process's directory is not the child's to remove: closing (or dropping)
        # the first sandbox from the child leaves it in place.
        first.close()
        self.assertTrue(first.root.exists())
        for directory, _dirs, _files in os.walk(first.root):
            os.chmod(directory, stat.S_IRWXU)
        shutil.rmtree(first.root)


class DelayedValueTests(GateToolsetTestCase):
    def test_returns_the_value_after_the_delay(self) -> None:
        """delayed_value answers with its value once the wait is over, sync and async."""
        result = self.tools.execute(delayed("c1", 5))
        self.assertEqual(json.loads(result.content)["value"], "v")
        result = asyncio.run(self.tools.aexecute(delayed("c2", 5)))
        self.assertEqual(json.loads(result.content), {"fixture_id": "fx-test-0002", "value": "v",
                                                      "delay_ms": 5})

    def test_sync_abort_stops_the_wait_and_raises_the_reason(self) -> None:
        """An abort from another thread ends the wait; the very reason is raised and recorded."""
        controller, reason = AbortController(), ConnectionAbortedError("stop")
        # The abort comes once the tool is in its wait, not after a fixed time: on a loaded
        # machine a timer may fire before the tool has begun, which refuses it at the door.
        waiting = threading.Event()
        wait_sync = controller.signal.wait_sync

        def noted(timeout: float) -> bool:
            waiting.set()
            return wait_sync(timeout)

        controller.signal.wait_sync = noted  # type: ignore[method-assign]
        aborter = threading.Thread(target=lambda: waiting.wait(10) and controller.abort(reason))
        aborter.start()
        with self.assertRaises(ConnectionAbortedError) as raised:
            self.tools.execute(delayed("c1", 10_000), signal=controller.signal)
        aborter.join()
        self.assertIs(raised.exception, reason)
        (record,) = self.tools.log.records()
        self.assertEqual((record.status, record.ran), (ExecutionStatus.ABORTED, True))
        assert record.error is not None
        self.assertEqual(record.error.code, "aborted")

    def test_async_abort_stops_the_wait_and_raises_the_reason(self) -> None:
        """The async form ends its wait on abort and raises the same reason."""
        controller, reason = AbortController(), ConnectionAbortedError("stop")

        async def main() -> None:
            asyncio.get_running_loop().call_later(0.02, controller.abort, reason)
            await self.tools.aexecute(delayed("c1", 10_000), signal=controller.signal)

        with self.assertRaises(ConnectionAbortedError) as raised:
            asyncio.run(main())
        self.assertIs(raised.exception, reason)
        self.assertEqual(self.tools.log.records()[0].status, ExecutionStatus.ABORTED)

    def test_a_signal_fired_as_the_wait_runs_out_is_seen(self) -> None:
        """A signal that fired just as the wait ran out, its wake-up not yet run, still stops the tool."""
        for form in ("sync", "async"):
            controller, reason = AbortController(), ConnectionAbortedError(form)
            signal = controller.signal

            # The abort lands, but the wait is not woken: as when another thread fires the
            # signal a moment before the delay ends and this loop has not yet run its wake-up.
            def fires_unheard(timeout: float, fire: Any = controller.abort, why: Any = reason) -> bool:
                fire(why)
                return False

            async def fires_unheard_async(fire: Any = controller.abort, why: Any = reason) -> BaseException:
                fire(why)
                await asyncio.Event().wait()
                raise AssertionError("never woken")

            with self.subTest(form=form), self.assertRaises(ConnectionAbortedError) as raised:
                if form == "sync":
                    signal.wait_sync = fires_unheard  # type: ignore[method-assign]
                    self.tools.execute(delayed(f"c-{form}", 20), signal=signal)
                else:
                    signal.wait = fires_unheard_async  # type: ignore[method-assign]
                    asyncio.run(self.tools.aexecute(delayed(f"c-{form}", 20), signal=signal))
            self.assertIs(raised.exception, reason)
        self.assertEqual(
            [(r.status, r.ran) for r in self.tools.log.records()], [(ExecutionStatus.ABORTED, True)] * 2
        )

    def test_a_cancel_placed_in_a_tool_fires_from_its_own_wait(self) -> None:
        """The planned cancel fires once, from the named tool's wait, and that wait then stops."""
        for form in ("sync", "async"):
            controller, reason = AbortController(), ConnectionAbortedError(form)
            fired: List[str] = []

            def fire(
                controller: AbortController = controller,
                why: BaseException = reason,
                fired: List[str] = fired,
            ) -> None:
                fired.append(threading.current_thread().name)
                controller.abort(why)

            self.tools._abort_during("delayed_value", 0.01, fire)
            signal = controller.signal
            # Another tool runs unplanned; the plan waits for the tool it names.
            self.tools.execute(echo(f"e-{form}"), signal=signal)
            self.assertEqual(fired, [])
            with self.subTest(form=form), self.assertRaises(ConnectionAbortedError) as raised:
                if form == "sync":
                    self.tools.execute(delayed(f"d-{form}", 10_000), signal=signal)
                else:
                    asyncio.run(self.tools.aexecute(delayed(f"d-{form}", 10_000), signal=signal))
            self.assertIs(raised.exception, reason)
            self.assertEqual(fired, [threading.current_thread().name], "from the tool's own thread, once")
            # Spent: the next run of the tool waits its whole delay, unfired.
            self.tools.execute(delayed(f"again-{form}", 1), signal=AbortController().signal)
            self.assertEqual(len(fired), 1)
        statuses = [(r.tool, r.status) for r in self.tools.log.records() if r.tool == "delayed_value"]
        ok, aborted = ExecutionStatus.OK, ExecutionStatus.ABORTED
        self.assertEqual(statuses, [("delayed_value", s) for s in (aborted, ok, aborted, ok)])

    def test_a_fired_signal_refuses_every_tool_at_the_door(self) -> None:
        """After an abort no tool runs; the attempt is recorded as aborted and not run."""
        controller, reason = AbortController(), KeyError("late")
        controller.abort(reason)
        for run in (lambda: self.tools.execute(echo(), signal=controller.signal),
                    lambda: asyncio.run(self.tools.aexecute(echo(), signal=controller.signal))):
            with self.assertRaises(KeyError) as raised:
                run()
            self.assertIs(raised.exception, reason)
        self.assertEqual([(r.status, r.ran) for r in self.tools.log], [(ExecutionStatus.ABORTED, False)] * 2)
        self.assertEqual(self.tools.log.duplicates(), {})

    def test_async_cancel_is_recorded_and_propagates(self) -> None:
        """Cancelling the awaiting task records a cancelled run and leaves CancelledError as is."""
        async def main() -> None:
            task = asyncio.ensure_future(self.tools.aexecute(delayed("c1", 10_000)))
            while not self.tools.log.in_flight():
                await asyncio.sleep(0.001)
            self.assertEqual(self.tools.log.in_flight()[0].call_id, "c1")
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        self.assertEqual(self.tools.log.in_flight(), ())
        self.assertEqual(self.tools.log.records()[0].status, ExecutionStatus.CANCELLED)

    def test_in_flight_and_started_after_show_a_late_execution(self) -> None:
        """A run still going shows in in_flight(); one begun after a moment shows in started_after()."""
        controller = AbortController()
        worker = threading.Thread(
            target=lambda: self.assertRaises(
                KeyError, self.tools.execute, delayed("late", 10_000), signal=controller.signal
            )
        )
        moment = self.tools.clock()
        worker.start()
        try:
            while not self.tools.log.in_flight():
                controller.signal.wait_sync(0.001)
            self.assertEqual([e.call_id for e in self.tools.log.in_flight()], ["late"])
        finally:
            controller.abort(KeyError("cancel"))
            worker.join(10)
        self.assertEqual([r.call_id for r in self.tools.log.started_after(moment)], ["late"])


if __name__ == "__main__":
    unittest.main()
