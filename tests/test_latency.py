"""The latency scenarios: the replies held back on every wire, their bounds, and the reference
backends passing them on every wire and transport."""

from __future__ import annotations

import unittest

from conformance._bounds import give_up_within, in_time_silence, latency_bound
from conformance._case import BackendCase, BackendConformanceTarget
from conformance._targets import outcome, reference_targets
from conformance.cases import scenario_reply
from conformance.provider import HangReply, JsonReply, StreamReply
from conformance.reference import REFERENCE_READ_TIMEOUT
from conformance.wires import WIRES
from conformance.wires._latency import PINGED, PINGED_SILENCES, latency_reply

from .test_docs_wire import request_for

READ_TIMEOUT = 0.5


class BoundTests(unittest.TestCase):
    def test_the_silence_the_grace_and_the_bound_grow_in_that_order(self) -> None:
        """A slow first token comes well inside the timeout; a stall's bound lies past its grace."""
        for read_timeout in (0.1, 0.5, 2.0, 30.0):
            with self.subTest(read_timeout=read_timeout):
                self.assertLess(in_time_silence(read_timeout), read_timeout / 2)
                self.assertGreaterEqual(give_up_within(read_timeout) - read_timeout, 0.5)
                self.assertGreater(latency_bound(read_timeout), give_up_within(read_timeout))

    def test_a_stall_case_is_bounded_by_the_read_timeout_not_the_target(self) -> None:
        """The stall case waits its derived bound, the slow first token the target's timeout after
        the silence; every other case the target's timeout."""
        target = BackendConformanceTarget("t", WIRES["openai-chat"], lambda url: None, read_timeout=0.5)
        self.assertEqual(BackendCase(target, "stall", "chat").bound, latency_bound(0.5))
        self.assertEqual(BackendCase(target, "slow-first-token", "chat").bound, 5.0 + in_time_silence(0.5))
        self.assertEqual(BackendCase(target, "text", "chat").bound, 5.0)
        self.assertTrue(BackendCase(target, "stall", "stream").timed)


class InTimeTests(unittest.TestCase):
    def judged(self, silent_for: float) -> list:
        """What in-time finds of a backend that raised on a slow first token, where the provider's
        log shows it silent ``silent_for`` seconds before the client left."""
        from conformance._case import Outcome
        from conformance._checks import Seen
        from conformance._checks.latency import ROWS
        from conformance.contract import LLMError
        from conformance.provider import RecordedRequest

        target = BackendConformanceTarget("t", WIRES["openai-chat"], lambda url: None, read_timeout=0.5)
        case = BackendCase(target, "slow-first-token", "chat")
        request = request_for("openai-chat", "chat")
        left = RecordedRequest(
            "POST", request.path, "", dict(request.headers), request.body, "HTTP/1.1",
            received_at=100.0, closed_at=100.0 + silent_for,
        )  # fmt: skip
        error = LLMError.from_kind("server_error", "timed out")
        outcome = Outcome(error=error, error_at=100.0 + silent_for, ended=True)
        return ROWS["in-time"](Seen(case, outcome, [left], [], WIRES["openai-chat"].variants("text")[0]))

    def test_giving_up_before_the_declared_timeout_fails(self) -> None:
        """A backend that left after 0.125 s of a silence its 0.5 s read timeout should outlast fails."""
        problems = self.judged(0.125)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("gave up sooner than it declared", problems[0])

    def test_a_provider_late_past_the_timeout_excuses_the_give_up(self) -> None:
        """Where the provider's own log shows it silent for the whole declared timeout (a loaded
        machine held its write back), giving up was the backend's right."""
        self.assertEqual(self.judged(0.6), [])


class ReplyTests(unittest.TestCase):
    def test_every_wire_holds_its_text_reply_back(self) -> None:
        """On every wire, in both forms, each shape is the text case's reply held back or stalled."""
        silence = in_time_silence(READ_TIMEOUT)
        for name, wire in WIRES.items():
            for mode in ("chat", "stream"):
                request = request_for(name, mode)
                text = scenario_reply(wire, "text", mode, request)
                for scenario in ("slow-first-token", "stall"):
                    for variant in wire.variants(scenario, mode):
                        with self.subTest(wire=name, mode=mode, scenario=scenario, variant=variant.name):
                            played = latency_reply(wire, scenario, request, variant.name, READ_TIMEOUT)
                            assert played is not None and text is not None
                            reply, hold = played
                            if scenario == "slow-first-token" and variant.name == PINGED.name:
                                assert isinstance(reply, StreamReply) and isinstance(text, StreamReply)
                                self.assertEqual(len(reply.chunks), PINGED_SILENCES + 1)
                                self.assertEqual(max(reply.pauses.values()), silence)
                                self.assertGreater(sum(reply.pauses.values()), READ_TIMEOUT)
                                pings = b"".join(reply.chunks[1:-1])
                                self.assertEqual(pings, wire.keepalive * (PINGED_SILENCES - 1))
                                self.assertEqual(reply.chunks[0] + reply.chunks[-1], b"".join(text.chunks))
                            elif scenario == "slow-first-token" and isinstance(reply, StreamReply):
                                self.assertEqual((hold, reply.pauses.get(0)), (0.0, silence))
                                self.assertEqual(reply.chunks, text.chunks)  # type: ignore[union-attr]
                            elif scenario == "slow-first-token":
                                # The same body; a header may carry a fresh request id.
                                assert isinstance(reply, JsonReply) and isinstance(text, JsonReply)
                                got = (hold, reply.status, reply.body)
                                self.assertEqual(got, (silence, text.status, text.body))
                            elif isinstance(text, StreamReply):
                                assert isinstance(reply, StreamReply)
                                self.assertTrue(reply.hang)
                                sent = b"".join(reply.chunks)
                                self.assertTrue(b"".join(text.chunks).startswith(sent))
                                self.assertLess(len(sent), len(b"".join(text.chunks)))
                                if variant.name == "before-first-token":
                                    self.assertEqual(sent, b"")
                            else:
                                self.assertIsInstance(reply, HangReply)
                                self.assertIsInstance(text, JsonReply)

    def test_only_a_provider_that_pings_has_the_pinged_shape(self) -> None:
        """Anthropic and Claude on Vertex keep a stream alive with ping; the others send nothing."""
        pinged = sorted(n for n, w in WIRES.items() if PINGED in w.variants("slow-first-token", "stream"))
        self.assertEqual(pinged, ["anthropic", "anthropic-vertex"])
        for name in pinged:
            self.assertEqual(WIRES[name].keepalive, b'event: ping\ndata: {"type": "ping"}\n\n')
            self.assertNotIn(PINGED, WIRES[name].variants("slow-first-token", "chat"))


class ReferenceTests(unittest.TestCase):
    def test_the_reference_backends_pass_both_latency_cases_on_every_wire_and_transport(self) -> None:
        """Each reference backend, declaring its 0.5 s read timeout, passes both scenarios in both
        modes over HTTP/1.1 and h2c."""
        from concurrent.futures import ThreadPoolExecutor

        from conformance._loops import kept_loops
        from conformance.cases import backend_conformance_cases

        cases = [
            case
            for _, target in reference_targets(None, ("h1", "h2c"))
            for case in backend_conformance_cases(target)
            if case.scenario in ("slow-first-token", "stall")
        ]
        self.assertTrue(all(case.target.read_timeout == REFERENCE_READ_TIMEOUT for case in cases))
        with kept_loops(), ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(lambda case: (case, outcome(case)), cases))
        failed = [f"{case!r}: {status}\n{detail}" for case, (status, detail) in results if status != "pass"]
        self.assertEqual(failed, [], "\n".join(failed))
        self.assertEqual(len(results), 12 * 2 * 4)


if __name__ == "__main__":
    unittest.main()
