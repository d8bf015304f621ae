"""The tool-call state machine: its table, its refusals, and execution at most once per key."""

from __future__ import annotations

import asyncio
import threading
import unittest
from typing import List

from conformance import ToolCall
from conformance.gate import (
    TOOLS,
    AlreadyExecuted,
    CallCancelled,
    CallEvent,
    CallState,
    GateToolset,
    ToolCallStateError,
    ToolCallTracker,
)
from conformance.gate.state import TRANSITIONS

S, E = CallState, CallEvent
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
          "additionalProperties": False}

#: How to bring a fresh call "c" to each state.
PATHS = {
    S.START: [],
    S.CALL_OPEN: [E.OPEN],
    S.ARGUMENT_DELTAS: [E.OPEN, E.DELTA],
    S.CALL_DONE: [E.OPEN, E.DELTA, E.DONE],
    S.VALIDATED: [E.OPEN, E.DELTA, E.DONE, E.VALIDATE],
    S.EXECUTED: [E.OPEN, E.DELTA, E.DONE, E.VALIDATE, E.EXECUTE],
    S.CANCELLED: [E.OPEN, E.CANCEL],
}


def apply(tracker: ToolCallTracker, event: CallEvent, call_id: str = "c") -> None:
    """Send one event to the call, as a loop would."""
    if event == E.OPEN:
        tracker.open(call_id, "get_weather")
    elif event == E.DELTA:
        tracker.delta(call_id, '{"city": "Paris"}')
    elif event == E.DONE:
        tracker.done(call_id)
    elif event == E.VALIDATE:
        tracker.validate(call_id, SCHEMA)
    elif event == E.EXECUTE:
        tracker.execute(call_id, lambda: "ok")
    else:
        tracker.cancel(call_id, "test")


def tracker_at(state: CallState) -> ToolCallTracker:
    tracker = ToolCallTracker()
    for event in PATHS[state]:
        apply(tracker, event)
    assert tracker.state("c") == state
    return tracker


class TableTests(unittest.TestCase):
    def test_table_is_the_design(self) -> None:
        """The forward path, and a cancel from every state before EXECUTED, and nothing else."""
        forward = {
            (S.START, E.OPEN): S.CALL_OPEN,
            (S.CALL_OPEN, E.DELTA): S.ARGUMENT_DELTAS,
            (S.ARGUMENT_DELTAS, E.DELTA): S.ARGUMENT_DELTAS,
            (S.CALL_OPEN, E.DONE): S.CALL_DONE,
            (S.ARGUMENT_DELTAS, E.DONE): S.CALL_DONE,
            (S.CALL_DONE, E.VALIDATE): S.VALIDATED,
            (S.VALIDATED, E.EXECUTE): S.EXECUTED,
        }
        cancels = {(s, E.CANCEL): S.CANCELLED for s in CallState if s not in (S.EXECUTED, S.CANCELLED)}
        self.assertEqual(dict(TRANSITIONS), {**forward, **cancels})

    def test_every_allowed_move_lands_where_the_table_says(self) -> None:
        """Each row of the table, applied to a call in its state, gives its next state."""
        for (state, event), target in TRANSITIONS.items():
            with self.subTest(state=state, event=event):
                tracker = tracker_at(state)
                apply(tracker, event)
                self.assertEqual(tracker.state("c"), target)

    def test_every_other_move_is_refused_with_its_data(self) -> None:
        """A move not in the table raises with the state, event and call, and changes nothing."""
        for state in CallState:
            for event in CallEvent:
                if (state, event) in TRANSITIONS or (state == S.START and event != E.OPEN):
                    continue  # a call in START does not exist yet: see the unknown-call test
                with self.subTest(state=state, event=event):
                    tracker = tracker_at(state)
                    with self.assertRaises(ToolCallStateError) as raised:
                        apply(tracker, event)
                    error = raised.exception
                    self.assertEqual((error.state, error.event, error.call_id), (state, event, "c"))
                    if isinstance(error, AlreadyExecuted):
                        self.assertIn("already executed by call 'c' (get_weather)", str(error))
                    else:
                        self.assertIn(f"call 'c' (get_weather): cannot {event} in state {state}", str(error))
                    self.assertEqual(tracker.state("c"), state)
                    self.assertFalse(tracker.history()[-1].accepted)
                    if state == S.CANCELLED:
                        self.assertIsInstance(error, CallCancelled)

    def test_refusal_messages_say_what_was_wrong(self) -> None:
        """The common mistakes get a message naming the mistake."""
        table = [
            (S.CALL_DONE, E.DELTA, "argument fragment came after the call was complete"),
            (S.ARGUMENT_DELTAS, E.VALIDATE, "not complete; validate only after its final argument event"),
            (S.ARGUMENT_DELTAS, E.EXECUTE, "never run on arguments still arriving"),
            (S.CALL_DONE, E.EXECUTE, "were not validated"),
            (S.EXECUTED, E.CANCEL, "a cancel cannot undo it"),
            (S.CANCELLED, E.VALIDATE, "was cancelled"),
            (S.CALL_OPEN, E.OPEN, "opened twice"),
        ]
        for state, event, message in table:
            with self.subTest(state=state, event=event):
                with self.assertRaisesRegex(ToolCallStateError, message):
                    apply(tracker_at(state), event)

    def test_unknown_call_is_refused(self) -> None:
        """A move for a call never opened says which calls there are."""
        tracker = tracker_at(S.CALL_OPEN)
        with self.assertRaisesRegex(ToolCallStateError, r"no call 'x' to delta; open it first \(open calls"):
            tracker.delta("x", "{}")
        with self.assertRaisesRegex(ToolCallStateError, "no call has the idempotency key 'x'"):
            tracker.execute("x", lambda: None)
        with self.assertRaises(KeyError):
            tracker.get("x")
        self.assertEqual(tracker.state("x"), S.START)

    def test_a_call_cancelled_before_it_opens_never_opens(self) -> None:
        """Cancelling an id not yet seen moves it from START to CANCELLED, and it cannot open."""
        tracker = ToolCallTracker()
        tracker.cancel("planned", "not wanted")
        with self.assertRaisesRegex(CallCancelled, "was cancelled"):
            tracker.open("planned", "get_weather")


class ArgumentsTests(unittest.TestCase):
    def test_fragments_join_into_the_arguments(self) -> None:
        """Fragments cut anywhere, multi-byte characters included, parse once the call is done."""
        tracker = ToolCallTracker()
        tracker.open("c", "get_weather")
        for piece in ['{"ci', 'ty": "Pa', 'ris ☀', '"}']:
            tracker.delta("c", piece)
        tracker.done("c")
        self.assertEqual(tracker.validate("c", SCHEMA), ())
        self.assertEqual(tracker.get("c").tool_call(), ToolCall("c", "get_weather", {"city": "Paris ☀"}))

    def test_empty_arguments_are_an_empty_object(self) -> None:
        """A call with no fragments at all has {} as its arguments."""
        tracker = ToolCallTracker()
        tracker.open("c", "always_error")
        tracker.done("c")
        self.assertEqual(tracker.get("c").arguments, {})

    def test_bad_arguments_leave_the_call_done_with_violations(self) -> None:
        """Corrupt JSON or a schema violation is reported, and the call can then be cancelled."""
        table = [
            (['{"city": '], "the arguments are not JSON"),
            (['{"city": 1}'], "$.city: expected string, got integer"),
            (['{"town": "x"}'], "missing required property 'city'"),
            (['[1]'], "expected object, got array"),
        ]
        for fragments, message in table:
            with self.subTest(fragments=fragments):
                tracker = ToolCallTracker()
                tracker.open("c", "get_weather")
                for piece in fragments:
                    tracker.delta("c", piece)
                tracker.done("c")
                violations = tracker.validate("c", SCHEMA)
                self.assertIn(message, "; ".join(map(str, violations)))
                self.assertEqual(tracker.state("c"), S.CALL_DONE)
                with self.assertRaisesRegex(ToolCallStateError, "not validated"):
                    tracker.execute("c", lambda: self.fail("ran"))
                tracker.cancel("c", "invalid arguments")
                self.assertEqual(tracker.get("c").cancel_reason, "invalid arguments")

    def test_a_whole_call_completes_in_one_step(self) -> None:
        """complete() takes a non-streamed call straight to CALL_DONE with its arguments."""
        tracker = ToolCallTracker()
        tracker.complete(ToolCall("c", "get_weather", {"city": "Paris"}))
        self.assertEqual(tracker.state("c"), S.CALL_DONE)
        self.assertEqual([t.event for t in tracker.history()], [E.OPEN, E.DONE])

    def test_a_whole_call_with_unparsed_arguments_never_validates(self) -> None:
        """complete() reads unparsed_arguments as the text it is, so validate() reports it, schema or not."""
        for text, message in (('{"city": "Par', "the arguments are not JSON"), ("[1]", "expected object")):
            for schema in (SCHEMA, None):
                with self.subTest(text=text, schema=schema is not None):
                    tracker = ToolCallTracker()
                    tracker.complete(ToolCall("c", "get_weather", {}, unparsed_arguments=text))
                    violations = tracker.validate("c", schema)
                    self.assertIn(message, "; ".join(map(str, violations)))
                    self.assertEqual(tracker.state("c"), S.CALL_DONE)
                    self.assertEqual(tracker.get("c").fragments, (text,))


class ExecuteTests(unittest.TestCase):
    def validated(self, tracker: ToolCallTracker, call_id: str, key: str = "") -> None:
        tracker.complete(ToolCall(call_id, "get_weather", {"city": "Paris"}), key=key or None)
        self.assertEqual(tracker.validate(call_id, SCHEMA), ())

    def test_executes_once_and_refuses_the_second_with_the_first_result(self) -> None:
        """The first execute runs the tool; the second raises AlreadyExecuted with its result."""
        tracker, runs = ToolCallTracker(), []
        self.validated(tracker, "c")
        self.assertEqual(tracker.execute("c", lambda: runs.append(1) or "result"), "result")
        with self.assertRaises(AlreadyExecuted) as raised:
            tracker.execute("c", lambda: runs.append(2))
        self.assertEqual((raised.exception.result, raised.exception.call_id), ("result", "c"))
        self.assertEqual(runs, [1])
        self.assertEqual(tracker.state("c"), S.EXECUTED)
        self.assertEqual(tracker.get("c").result, "result")

    def test_a_retried_call_with_the_same_key_runs_once(self) -> None:
        """A call cut off and retried under a new id, with one key, runs once in all."""
        tracker, runs = ToolCallTracker(), []
        tracker.open("first", "get_weather", key="weather:Paris")
        tracker.delta("first", '{"ci')
        tracker.cancel("first", "stream cut")
        self.validated(tracker, "retry", key="weather:Paris")
        tracker.execute("weather:Paris", lambda: runs.append("retry"))
        self.validated(tracker, "again", key="weather:Paris")
        with self.assertRaisesRegex(AlreadyExecuted, "already executed by call 'retry'"):
            tracker.execute("weather:Paris", lambda: runs.append("again"))
        self.assertEqual(runs, ["retry"])

    def test_key_can_be_given_when_the_call_is_done(self) -> None:
        """A loop that derives the key from the arguments sets it at done()."""
        tracker = ToolCallTracker()
        tracker.open("c", "get_weather")
        tracker.done("c", {"city": "Paris"}, key="get_weather:Paris")
        tracker.validate("c", SCHEMA)
        self.assertEqual(tracker.execute("get_weather:Paris", lambda: 1), 1)

    def test_a_cancelled_call_never_runs(self) -> None:
        """Execute after a cancel raises CallCancelled with the reason, and the tool is not called."""
        tracker = ToolCallTracker()
        self.validated(tracker, "c")
        tracker.cancel("c", "user pressed stop")
        with self.assertRaises(CallCancelled) as raised:
            tracker.execute("c", lambda: self.fail("ran after cancel"))
        self.assertEqual(raised.exception.reason, "user pressed stop")

    def test_a_cancel_overtaking_a_run_withholds_its_result(self) -> None:
        """A cancel during the run wins: the result comes back inside CallCancelled."""
        tracker = ToolCallTracker()
        self.validated(tracker, "c")

        def tool() -> str:
            tracker.cancel("c", "abort")  # as another thread would, while the tool runs
            return "late result"

        with self.assertRaises(CallCancelled) as raised:
            tracker.execute("c", tool)
        self.assertEqual(raised.exception.result, "late result")
        self.assertEqual(tracker.state("c"), S.CANCELLED)
        with self.assertRaises(AlreadyExecuted):
            tracker.execute("c", lambda: self.fail("ran twice"))

    def test_a_tool_that_raised_counts_as_executed(self) -> None:
        """At most once: a run that raised is not run again, and its exception is kept."""
        tracker = ToolCallTracker()
        self.validated(tracker, "c")
        boom = RuntimeError("boom")

        def tool() -> None:
            raise boom

        with self.assertRaises(RuntimeError):
            tracker.execute("c", tool)
        self.assertEqual(tracker.state("c"), S.EXECUTED)
        with self.assertRaises(AlreadyExecuted) as raised:
            tracker.execute("c", lambda: None)
        self.assertIs(raised.exception.exception, boom)

    def test_concurrent_executes_of_one_key_run_it_once(self) -> None:
        """Eight threads racing on one key: one runs the tool, seven are refused."""
        tracker, runs, refused = ToolCallTracker(), [], []
        self.validated(tracker, "c")
        barrier = threading.Barrier(8)
        release = threading.Event()

        def tool() -> str:
            runs.append(1)
            release.wait(5)
            return "once"

        def race() -> None:
            barrier.wait(5)
            try:
                tracker.execute("c", tool)
            except AlreadyExecuted:
                refused.append(1)
                release.set()

        threads = [threading.Thread(target=race) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        self.assertEqual((len(runs), len(refused)), (1, 7))
        self.assertEqual(tracker.get("c").result, "once")

    def test_aexecute_runs_an_async_tool_once(self) -> None:
        """The async form awaits the tool and keeps the same once-only rule."""
        tracker = ToolCallTracker()
        self.validated(tracker, "c")

        async def tool() -> str:
            await asyncio.sleep(0)
            return "async result"

        async def main() -> None:
            self.assertEqual(await tracker.aexecute("c", tool), "async result")
            with self.assertRaises(AlreadyExecuted):
                await tracker.aexecute("c", tool)

        asyncio.run(main())

    def test_cancel_all_cancels_only_what_can_be(self) -> None:
        """cancel_all cancels calls not executed yet and leaves executed ones as they are."""
        tracker = ToolCallTracker()
        self.validated(tracker, "done")
        tracker.execute("done", lambda: 1)
        tracker.open("streaming", "get_weather")
        self.validated(tracker, "ready")
        self.assertEqual(tracker.cancel_all("abort"), ("streaming", "ready"))
        self.assertEqual([c.state for c in tracker.calls()], [S.EXECUTED, S.CANCELLED, S.CANCELLED])

    def test_history_is_the_evidence(self) -> None:
        """Every move asked is kept in order, refused ones marked, with its call and key."""
        tracker = tracker_at(S.CALL_DONE)
        with self.assertRaises(ToolCallStateError):
            tracker.execute("c", lambda: None)
        rows = [(t.state, t.event, t.next_state, t.accepted) for t in tracker.history()]
        self.assertEqual(rows, [
            (S.START, E.OPEN, S.CALL_OPEN, True),
            (S.CALL_OPEN, E.DELTA, S.ARGUMENT_DELTAS, True),
            (S.ARGUMENT_DELTAS, E.DONE, S.CALL_DONE, True),
            (S.CALL_DONE, E.EXECUTE, None, False),
        ])
        times = [t.at for t in tracker.history()]
        self.assertEqual(times, sorted(times))

    def test_drives_the_gate_toolset(self) -> None:
        """A loop that uses the tracker leaves one execution record per key in the toolset's log."""
        tracker = ToolCallTracker()
        results: List[str] = []
        with GateToolset(run_id="state") as tools:
            call = ToolCall("call_1", "echo_json", {"text": "x", "count": 1, "tags": []})
            tracker.complete(call)
            tracker.validate("call_1", TOOLS["echo_json"].parameters)
            result = tracker.execute("call_1", lambda: tools.execute(call))
            results.append(result.content)
            with self.assertRaises(AlreadyExecuted):
                tracker.execute("call_1", lambda: tools.execute(call))
            self.assertEqual(len(tools.log), 1)
            self.assertIn("fx-state-0001", results[0])


if __name__ == "__main__":
    unittest.main()
