"""Replay: recorded fixtures served chunk for chunk, and what a replay reports."""

from __future__ import annotations

import asyncio
import datetime as dt
import http.client
import importlib.util
import json
import os
import shutil
import tempfile
import unittest
from typing import Any, Dict, List

from conformance import BackendConformanceTarget, backend_conformance_cases
from conformance.encoders import aws_event_stream_message
from conformance.errors import ProviderInputError
from conformance.fixture import conformance_request
from conformance.gate.fixture_format import Fixture
from conformance.gate.record import Recorder
from conformance.gate.replay import ReplayWire
from conformance.provider import JsonReply, RecordedRequest, StreamReply, start_fake_provider
from conformance.reference import REFERENCE_BACKENDS
from conformance.wires import WIRES, bedrock_converse_wire, openai_chat_wire

from .test_provider_support import H2Client, RawConnection, http1_request

HAVE_H2 = importlib.util.find_spec("h2") is not None
BODY = {"model": "gpt-x", "stream": True, "messages": [{"role": "user", "content": "hi"}], "temperature": 0}
#: A stream cut inside events and inside a UTF-8 character, as TCP might deliver it.
CHUNKS = [
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"delta":{"content":"\xe2',
    b'\x98\x80"}}]}\n',
    b"\ndata: [DO",
    b"NE]\n\n",
]


class ReplayTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="fixtures-")
        self.addCleanup(shutil.rmtree, self.folder, True)

    def record(self, reply: Any, body: Dict[str, Any], path: str = "/v1/chat/completions",
               scenario: str = "text", wire: Any = openai_chat_wire) -> Fixture:
        """Record one exchange with the fake provider as the upstream."""
        with start_fake_provider() as upstream, \
                Recorder(wire, upstream.url, self.folder, scenario=scenario) as recorder:
            upstream.reply(reply)
            port = int(recorder.url.rsplit(":", 1)[1])
            client = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                client.request("POST", path, json.dumps(body).encode(), {"content-type": "application/json"})
                client.getresponse().read()
            finally:
                client.close()
            return Fixture.load(recorder.wait_written(1)[-1])

    def serve(self, wire: ReplayWire, http2: bool = False) -> Any:
        provider = start_fake_provider(http2=http2)
        self.addCleanup(provider.close)
        provider.reply(wire.answer)
        return provider


class TestByteIdentity(ReplayTestCase):
    def test_replayed_chunks_are_the_recorded_chunks(self) -> None:
        """A raw client gets the recorded chunks back byte for byte, boundaries included."""
        fixture = self.record(StreamReply(CHUNKS), BODY)
        self.assertEqual([c for _, _, c in fixture.chunks], CHUNKS)
        provider = self.serve(ReplayWire(self.folder))
        with RawConnection(provider.port) as raw:
            raw.send(http1_request("POST", "/v1/chat/completions", json.dumps(BODY).encode(),
                                   {"content-type": "application/json"}))
            response = raw.read_response()
        self.assertEqual(response.status, 200)
        self.assertEqual(response.chunks, CHUNKS)
        self.assertEqual(response.headers["content-type"], "text/event-stream")
        replayed = provider.requests[0].events
        self.assertEqual([(e["type"], e["chunk"], e["offset"]) for e in fixture.events],
                         [(e.type, e.chunk, e.offset) for e in replayed])

    @unittest.skipUnless(HAVE_H2, "h2 is not installed")
    def test_replayed_chunks_are_the_recorded_chunks_over_h2(self) -> None:
        """Over h2c each recorded chunk is one DATA frame, unchanged."""
        self.record(StreamReply(CHUNKS), BODY)
        provider = self.serve(ReplayWire(self.folder))
        with H2Client(provider.port) as client:
            sid = client.request("POST", "/v1/chat/completions", json.dumps(BODY).encode())
            self.assertEqual(client.response(sid).chunks, CHUNKS)

    def test_binary_event_stream_survives_the_round_trip(self) -> None:
        """An event stream recorded as base64 replays to the same bytes."""
        frame = aws_event_stream_message({":event-type": "messageStart", ":message-type": "event"},
                                         b'{"role":"assistant"}')
        chunks = [frame[:5], frame[5:-4], frame[-4:] + b"\xff"]  # a stray byte after the frame
        reply = StreamReply(chunks, content_type="application/vnd.amazon.eventstream")
        fixture = self.record(reply, {"messages": []}, path="/model/m/converse-stream",
                              wire=bedrock_converse_wire)
        with open(fixture.source, encoding="utf-8") as handle:
            stored = json.load(handle)["response"]["chunks"]
        self.assertIn("base64", stored[2])  # not UTF-8: kept as base64, byte for byte
        self.assertEqual([c for _, _, c in fixture.chunks], chunks)
        provider = self.serve(ReplayWire(self.folder))
        with RawConnection(provider.port) as raw:
            raw.send(http1_request("POST", "/model/m/converse-stream", b'{"messages": []}'))
            self.assertEqual(raw.read_response().chunks, chunks)

    def test_whole_reply_keeps_its_bytes_status_and_kept_headers(self) -> None:
        """A sized reply is replayed sized, with its status and the headers a retry reads."""
        self.record(JsonReply({"error": {"type": "rate_limit"}}, status=429, headers={"retry-after": "7"}),
                    {**BODY, "stream": False})
        provider = self.serve(ReplayWire(self.folder))
        with RawConnection(provider.port) as raw:
            body = json.dumps({**BODY, "stream": False}).encode()
            raw.send(http1_request("POST", "/v1/chat/completions", body))
            response = raw.read_response()
        self.assertEqual((response.status, response.chunks), (429, None))
        self.assertEqual(response.headers["retry-after"], "7")
        self.assertEqual(json.loads(response.body), {"error": {"type": "rate_limit"}})


class TestMatching(ReplayTestCase):
    def ask(self, wire: ReplayWire, body: Dict[str, Any]) -> RecordedRequest:
        encoded = json.dumps(body).encode()
        request = RecordedRequest("POST", "/v1/chat/completions", "", {}, encoded, "HTTP/1.1")
        self.reply = wire.answer(request, "text")
        return request

    def test_ignored_fields_and_key_order_do_not_matter(self) -> None:
        """Sampling settings and key order are not part of the match."""
        self.record(StreamReply(CHUNKS), BODY)
        wire = ReplayWire(self.folder)
        reordered = {"temperature": 1.5, "messages": BODY["messages"], "stream": True, "model": "gpt-x"}
        request = self.ask(wire, reordered)
        self.assertIsInstance(self.reply, StreamReply)
        self.assertEqual(wire.check_request(request, "gpt-x"),
                         openai_chat_wire.check_request(request, "gpt-x"))
        self.assertEqual(wire.unused(), [])
        wire.verify()

    def test_a_changed_request_fails_with_the_closest_and_the_difference(self) -> None:
        """An unmatched request gets a 500 and a problem naming the closest recording and the field."""
        fixture = self.record(StreamReply(CHUNKS), BODY)
        wire = ReplayWire(self.folder)
        request = self.ask(wire, {**BODY, "messages": [{"role": "user", "content": "bye"}]})
        self.assertIsInstance(self.reply, JsonReply)
        self.assertEqual(self.reply.status, 500)
        [problem] = [p for p in wire.check_request(request, "gpt-x") if "matches no recording" in p]
        self.assertIn(fixture.source, problem)
        self.assertIn('messages: recorded [{"content":"hi"', problem)
        self.assertIn('got [{"content":"bye"', problem)
        with self.assertRaisesRegex(AssertionError, "matches no recording"):
            wire.verify()

    def test_stream_flag_is_matched(self) -> None:
        """A whole-reply request does not get a streamed recording."""
        self.record(StreamReply(CHUNKS), BODY)
        wire = ReplayWire(self.folder)
        request = self.ask(wire, {**BODY, "stream": False})
        problems = wire.check_request(request, "m")
        self.assertTrue(any("stream flag: recorded True, got False" in p for p in problems))

    def test_unused_recording_is_reported(self) -> None:
        """A recording nothing asked for fails verify() and is listed by unused()."""
        fixture = self.record(StreamReply(CHUNKS), BODY)
        wire = ReplayWire(self.folder)
        self.assertEqual([f.source for f in wire.unused()], [fixture.source])
        self.assertEqual(wire.problems(scenarios=["tool-call"]), [])
        with self.assertRaisesRegex(AssertionError, "was never used"):
            wire.verify()

    def test_stale_recording_fails_the_case_that_uses_it(self) -> None:
        """A recording older than max_age still answers, but its request check and verify() fail."""
        self.record(StreamReply(CHUNKS), BODY)
        later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=10)
        wire = ReplayWire(self.folder, max_age=dt.timedelta(days=7), now=later)
        request = self.ask(wire, BODY)
        self.assertIsInstance(self.reply, StreamReply)
        self.assertTrue(any("older than max_age" in p for p in wire.check_request(request, "gpt-x")))
        with self.assertRaisesRegex(AssertionError, "older than max_age"):
            wire.verify()
        fresh = ReplayWire(self.folder, max_age=3600)
        self.ask(fresh, BODY)
        fresh.verify()

    def test_recordings_are_used_in_order_then_the_last_repeats(self) -> None:
        """Two recordings of the same request answer in recorded order; then the last answers again."""
        self.record(StreamReply([b"data: 1\n\n"]), BODY)
        self.record(StreamReply([b"data: 2\n\n"]), BODY)
        wire = ReplayWire(self.folder)
        answers = []
        for _ in range(3):
            self.ask(wire, BODY)
            answers.append(list(self.reply.chunks))  # type: ignore[union-attr]
        self.assertEqual(answers, [[b"data: 1\n\n"], [b"data: 2\n\n"], [b"data: 2\n\n"]])

    def test_bad_folders_are_refused(self) -> None:
        """An empty folder, a foreign format or a wire mismatch is an error that says so."""
        with self.assertRaisesRegex(ProviderInputError, "no fixtures"):
            ReplayWire(self.folder)
        with open(os.path.join(self.folder, "0001-x.json"), "w", encoding="utf-8") as handle:
            json.dump({"format": "cassette/9"}, handle)
        format_error = r"\$.format: expected .conformance-fixture/1., got .cassette/9."
        with self.assertRaisesRegex(ProviderInputError, format_error):
            ReplayWire(self.folder)
        os.remove(os.path.join(self.folder, "0001-x.json"))
        self.record(StreamReply(CHUNKS), BODY)
        with self.assertRaisesRegex(ProviderInputError, "not 'anthropic'"):
            ReplayWire(self.folder, base=WIRES["anthropic"])


async def _drive(backend: Any, mode: str) -> None:
    request = conformance_request("conformance-model")
    try:
        if mode == "chat":
            await backend.chat(request)
        else:
            async for _ in backend.chat_stream(request):
                pass
    finally:
        await backend.aclose()


class TestInTheSuite(ReplayTestCase):
    def record_reference(self, wire_name: str, scenario: str) -> None:
        """Record the reference backend's exchanges, both modes, with the fake provider answering."""
        wire = WIRES[wire_name]
        for mode in ("chat", "stream"):
            with start_fake_provider() as upstream, \
                    Recorder(wire, upstream.url, self.folder, scenario=scenario) as recorder:
                upstream.reply(lambda request, mode=mode: wire.reply(scenario, mode, request))
                asyncio.run(_drive(REFERENCE_BACKENDS[wire_name](recorder.url, False), mode))
                recorder.wait_written(1)

    def test_recorded_fixtures_are_a_target_wire(self) -> None:
        """The conformance cases pass over a replay of what the reference backend recorded; the rest skip."""
        self.record_reference("openai-chat", "tool-call")
        wire = ReplayWire(self.folder)
        target = BackendConformanceTarget(
            "replayed reference", wire, lambda url: REFERENCE_BACKENDS["openai-chat"](url, False)
        )
        outcomes: Dict[str, List[str]] = {"pass": [], "skip": []}
        for case in backend_conformance_cases(target):
            try:
                case.run()
            except unittest.SkipTest:
                outcomes["skip"].append(case.name)
            else:
                outcomes["pass"].append(case.name)
        self.assertEqual(outcomes["pass"], ["tool-call/chat", "tool-call/stream"])
        wire.verify()

    def test_a_backend_that_changed_its_request_fails_the_case(self) -> None:
        """A backend sending another model than recorded fails with the replay's difference."""
        self.record_reference("openai-chat", "text")
        wire = ReplayWire(self.folder)
        target = BackendConformanceTarget(
            "renamed", wire, lambda url: REFERENCE_BACKENDS["openai-chat"](url, False), model="other-model"
        )
        case = next(c for c in backend_conformance_cases(target) if c.name == "text/chat")
        with self.assertRaises(AssertionError) as caught:
            case.run()
        self.assertIn('model: recorded "conformance-model", got "other-model"', str(caught.exception))
        self.assertIn("[request]", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
