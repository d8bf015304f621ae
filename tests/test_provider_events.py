"""The raw event log: bodies cut into events, and the log a live provider keeps."""

from __future__ import annotations

import importlib.util
import json
import struct
import time
import unittest

from conformance.encoders import aws_event_stream_message, ndjson, sse
from conformance.provider import JsonReply, StreamReply, start_fake_provider
from conformance.provider.events import (
    BodyEvent,
    WireEvent,
    events_around,
    split_events,
    timed_events,
)

from .test_provider_support import H2Client, RawConnection, http1_request

HAVE_H2 = importlib.util.find_spec("h2") is not None

ANTHROPIC = [
    sse({"type": "message_start", "message": {"id": "msg_01A", "usage": {}}}, event="message_start"),
    sse({"type": "content_block_start", "index": 1,
         "content_block": {"type": "tool_use", "id": "toolu_01B", "name": "get_weather"}},
        event="content_block_start"),
    sse({"type": "content_block_delta", "index": 1, "delta": {"partial_json": "{\"ci"}},
        event="content_block_delta"),
    sse({"type": "message_stop"}, event="message_stop"),
]


class TestSplit(unittest.TestCase):
    def test_sse_events_take_the_event_field_and_carry_ids_forward(self) -> None:
        """SSE events are typed by event:, and a delta inherits its block's call id and the response id."""
        events = split_events("text/event-stream; charset=utf-8", b"".join(ANTHROPIC))
        self.assertEqual([e.type for e in events],
                         ["message_start", "content_block_start", "content_block_delta", "message_stop"])
        self.assertEqual([e.response_id for e in events], ["msg_01A"] * 4)
        self.assertEqual([e.call_id for e in events], [None, "toolu_01B", "toolu_01B", None])
        self.assertEqual([e.output_index for e in events], [None, 1, 1, None])
        self.assertEqual(events[-1].end, len(b"".join(ANTHROPIC)))

    def test_sse_without_event_field_uses_type_object_or_done(self) -> None:
        """A data-only SSE event is typed by its JSON object, and [DONE] by name."""
        body = (
            sse({"id": "chatcmpl-1", "object": "chat.completion.chunk",
                 "choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_X"}]}}]})
            + sse({"candidates": []}) + b"data: [DONE]\r\n\r\n"
        )
        events = split_events("text/event-stream", body)
        self.assertEqual([e.type for e in events], ["chat.completion.chunk", "message", "[DONE]"])
        self.assertEqual((events[0].response_id, events[0].output_index, events[0].call_id),
                         ("chatcmpl-1", 0, "call_X"))
        self.assertEqual(events[2].length, len(b"[DONE]"))
        self.assertEqual(events[2].end, len(body))

    def test_sse_unfinished_event_is_not_an_event(self) -> None:
        """Bytes after the last blank line are not an event yet."""
        self.assertEqual(split_events("text/event-stream", b"event: a\ndata: 1\n\nevent: b\ndata: 2\n"),
                         [BodyEvent("a", 1, 18)])

    def test_ndjson_lines_are_message_done_or_error(self) -> None:
        """Each complete NDJSON line is one event, typed done, error or message; a cut tail is not."""
        body = ndjson({"message": {"content": "hi"}, "done": False}) + ndjson({"done": True})
        body += ndjson({"error": "boom"}) + b'{"partial'
        events = split_events("application/x-ndjson", body)
        self.assertEqual([e.type for e in events], ["message", "done", "error"])
        self.assertEqual(events[0].length, len(ndjson({"message": {"content": "hi"}, "done": False})) - 1)

    def test_event_stream_frames_are_cut_by_prelude_and_typed_by_header(self) -> None:
        """Each event-stream frame is one event, typed by :event-type or :exception-type."""
        first = aws_event_stream_message(
            {":event-type": "contentBlockStart", ":message-type": "event"},
            json.dumps({"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "tooluse_1"}}}).encode(),
        )
        second = aws_event_stream_message(
            {":exception-type": "throttlingException", ":message-type": "exception"}, b'{"message":"slow"}'
        )
        events = split_events("application/vnd.amazon.eventstream", first + second + second[:10])
        self.assertEqual([e.type for e in events], ["contentBlockStart", "throttlingException"])
        self.assertEqual((events[0].output_index, events[0].call_id), (0, "tooluse_1"))
        self.assertEqual(events[1].length, len(b'{"message":"slow"}'))
        self.assertEqual([e.end for e in events], [len(first), len(first) + len(second)])

    def test_invoke_model_chunks_are_read_as_the_claude_events_they_carry(self) -> None:
        """A Bedrock InvokeModel chunk frame is typed and read as the Anthropic event in its bytes."""
        from conformance.provider.replies import RecordedRequest
        from conformance.wires.bedrock_invoke import MESSAGE_ID, TOOL_USE_ID, bedrock_invoke_wire

        path = "/model/conformance-model/invoke-with-response-stream"
        request = RecordedRequest("POST", path, "", {"authorization": "Bearer k"}, b"{}", "HTTP/1.1")
        reply = bedrock_invoke_wire.reply("tool-call", "stream", request)
        assert isinstance(reply, StreamReply)
        body = b"".join(reply.chunks)
        events = split_events(reply.content_type, body)
        deltas = len(events) - 5
        self.assertEqual(
            [e.type for e in events],
            ["message_start", "content_block_start", *["content_block_delta"] * deltas,
             "content_block_stop", "message_delta", "message_stop"],
        )
        self.assertEqual({e.response_id for e in events}, {MESSAGE_ID})
        self.assertEqual([e.call_id for e in events[1:-2]], [TOOL_USE_ID] * (deltas + 2))
        self.assertEqual([e.output_index for e in events[1:-2]], [0] * (deltas + 2))
        self.assertIsNone(events[-1].call_id)  # message_stop has no index: no call is carried to it
        # The length is the frame's payload (the base64 and its padding): what went over the wire.
        total, headers_length = struct.unpack_from(">II", body, 0)
        self.assertEqual(events[0].length, total - headers_length - 16)
        self.assertEqual(events[-1].end, len(body))

    def test_a_chunk_frame_that_carries_no_event_stays_a_chunk(self) -> None:
        """A chunk whose bytes are not base64 of a JSON object is logged as the frame it is."""
        import base64

        def frame(payload: object) -> bytes:
            return aws_event_stream_message({":event-type": "chunk"}, json.dumps(payload).encode())

        body = (
            frame({"bytes": "not base64!", "p": "ab"})
            + frame({"bytes": base64.b64encode(b"[1, 2]").decode(), "p": "a"})
            + frame({"p": "abc"})
            + frame({"bytes": base64.b64encode(b'{"type":"ping"}').decode()})
        )
        events = split_events("application/vnd.amazon.eventstream", body)
        self.assertEqual([e.type for e in events], ["chunk", "chunk", "chunk", "ping"])

    def test_whole_reply_is_one_event(self) -> None:
        """A whole JSON reply is one event typed by its object, or error."""
        body = json.dumps({"id": "chatcmpl-9", "object": "chat.completion"}).encode()
        self.assertEqual(split_events("application/json", body),
                         [BodyEvent("chat.completion", len(body), len(body), "chatcmpl-9")])
        self.assertEqual(split_events("application/json", b'{"error": {}}')[0].type, "error")
        self.assertEqual(split_events("application/json", b""), [])

    def test_timed_events_name_the_chunk_of_the_last_byte(self) -> None:
        """An event cut across chunks belongs to the chunk its last byte went out in."""
        body = b"".join(ANTHROPIC)
        chunks = [body[:10], body[10:len(ANTHROPIC[0]) + 3], body[len(ANTHROPIC[0]) + 3:]]
        events = timed_events("text/event-stream", chunks, [1.0, 2.0, 3.0], first_seq=7)
        self.assertEqual([(e.seq, e.chunk, e.flushed_at) for e in events],
                         [(7, 1, 2.0), (8, 2, 3.0), (9, 2, 3.0), (10, 2, 3.0)])
        self.assertEqual(timed_events("text/event-stream", chunks, [1.0]), [])


class TestAround(unittest.TestCase):
    EVENTS = [WireEvent(i, f"t{i}", 10, i, 10 * (i + 1), 1.0 + i / 1000) for i in range(10)]

    def test_marks_the_event_and_counts_the_rest(self) -> None:
        """The quoted window marks the event and says how many came before and after."""
        text = events_around(self.EVENTS, 5, before=1, after=1, since=1.0)
        self.assertEqual(text.splitlines(), [
            "    ... 4 earlier",
            "    #4 t4, 10 B, chunk 4 (to byte 50) @ +4.0 ms",
            "  > #5 t5, 10 B, chunk 5 (to byte 60) @ +5.0 ms",
            "    #6 t6, 10 B, chunk 6 (to byte 70) @ +6.0 ms",
            "    ... 3 later",
        ])

    def test_edges_unknown_and_empty(self) -> None:
        """At the first event nothing is elided before; an unknown number quotes the last few."""
        self.assertTrue(events_around(self.EVENTS, 0).splitlines()[0].startswith("  > #0"))
        unknown = events_around(self.EVENTS, 99).splitlines()
        self.assertIn("no event #99", unknown[0])
        self.assertEqual(unknown[-1].strip()[:2], "#9")
        self.assertEqual(events_around([], 0), "    (no events were sent)")

    def test_ids_are_shown(self) -> None:
        """Response id, index and call id appear where the event has them."""
        event = WireEvent(3, "content_block_delta", 5, 1, 99, 0.0, "msg_1", 2, "toolu_1")
        self.assertEqual(
            str(event),
            "#3 content_block_delta response=msg_1 index=2 call=toolu_1, 5 B, chunk 1 (to byte 99)"
        )


class TestLiveLog(unittest.TestCase):
    def setUp(self) -> None:
        self.provider = start_fake_provider()
        self.addCleanup(self.provider.close)

    def _h1(self, path: str) -> bytes:
        with RawConnection(self.provider.port) as raw:
            raw.send(http1_request("POST", path, b"{}"))
            return raw.read_response().body

    def test_stream_events_follow_the_chunks_sent(self) -> None:
        """Each event names the chunk that carried its last byte, flushed after the request came."""
        body = b"".join(ANTHROPIC)
        cut = len(ANTHROPIC[0]) + 5
        self.provider.reply(StreamReply([body[:cut], b"", body[cut:]]))
        self.assertEqual(self._h1("/v1/messages"), body)
        request = self.provider.next_request()
        events = request.events
        self.assertEqual([e.type for e in events],
                         ["message_start", "content_block_start", "content_block_delta", "message_stop"])
        self.assertEqual([e.chunk for e in events], [0, 1, 1, 1])  # the empty chunk is not sent
        self.assertEqual(events[-1].offset, len(body))
        self.assertTrue(all(request.received_at <= e.flushed_at <= time.monotonic() for e in events))
        self.assertEqual(request.events, events)  # numbers do not move once given

    def test_sequence_is_monotonic_across_responses(self) -> None:
        """Two responses' events are numbered on, in the order they went out."""
        self.provider.reply(JsonReply({"id": "resp_1", "object": "response"}))
        self._h1("/one")
        self.provider.reply(StreamReply(ANTHROPIC))
        self._h1("/two")
        first, second = self.provider.requests
        self.assertEqual([(e.seq, e.type, e.response_id) for e in first.events], [(0, "response", "resp_1")])
        self.assertEqual([e.seq for e in second.events], [1, 2, 3, 4])

    def test_hanging_stream_logs_what_went_out(self) -> None:
        """A stream left open logs the events that went out; a request never answered has none."""
        self.provider.reply(StreamReply([ANTHROPIC[0]], hang=True))
        with RawConnection(self.provider.port) as raw:
            raw.send(http1_request("POST", "/x", b"{}"))
            raw.read_head()
            request = self.provider.next_request()
            deadline = time.monotonic() + 5
            while not request.events and time.monotonic() < deadline:
                time.sleep(0.005)
            self.assertEqual([e.type for e in request.events], ["message_start"])
        from conformance.provider import RecordedRequest

        self.assertEqual(RecordedRequest("GET", "/", "", {}, b"", "HTTP/1.1").events, [])

    @unittest.skipUnless(HAVE_H2, "h2 is not installed")
    def test_h2_stream_and_whole_reply_are_logged(self) -> None:
        """Over h2 each chunk (DATA frame write) and a whole reply are logged alike."""
        self.provider.reply(StreamReply(ANTHROPIC))
        with H2Client(self.provider.port) as client:
            sid = client.request("POST", "/v1/messages", b"{}")
            self.assertEqual(client.response(sid).body, b"".join(ANTHROPIC))
            self.provider.reply(JsonReply({"object": "chat.completion"}))
            sid = client.request("POST", "/v1/chat", b"{}")
            client.response(sid)
        streamed, whole = self.provider.requests
        self.assertEqual([e.chunk for e in streamed.events], [0, 1, 2, 3])
        self.assertEqual([(e.seq, e.type) for e in whole.events], [(4, "chat.completion")])


if __name__ == "__main__":
    unittest.main()
