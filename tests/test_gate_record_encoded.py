"""The recorder and the replay, second round: a credential echoed in another encoding, a
compressed upstream, a proxy's absolute-form target, and fixtures a load must refuse by name."""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import os
import shutil
import socket
import tempfile
import time
import unittest
import zlib
from typing import Any, Callable, Optional

from conformance.encoders import aws_event_stream_message
from conformance.errors import ProviderInputError
from conformance.gate.fixture_format import Fixture
from conformance.gate.record import Recorder
from conformance.gate.replay import ReplayWire
from conformance.provider import JsonReply, StreamReply, start_fake_provider
from conformance.wires import bedrock_converse_wire

from .test_gate_record_attacks import CREDENTIALS, PLANT, TIMEOUT, AttackCase, _good_fixture_doc

KEY = CREDENTIALS["x-api-key"]


def compressed(body: bytes, coding: str) -> Callable[[socket.socket], None]:
    """An upstream that answers in ``coding`` whatever the request asked for."""
    packed = {"gzip": gzip.compress, "deflate": zlib.compress}.get(coding, lambda b: b"\x1b\x00garbage")(body)

    def script(sock: socket.socket) -> None:  # the request has been read
        sock.sendall(
            b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\n"
            + f"content-encoding: {coding}\r\ncontent-length: {len(packed)}\r\n\r\n".encode()
            + packed
        )

    return script


class EncodedSecretTests(AttackCase):
    def test_a_key_json_escaped_in_the_echo_is_masked(self) -> None:
        """\\/ and \\u0053-style escapes of the key's characters: masked at their own length."""
        spelt = "".join(f"\\u{ord(c):04X}" if c in "sP" else c for c in KEY).replace("-", "\\u002d")
        body = b'{"error": {"message": "Incorrect API key provided: ' + spelt.encode() + b'"}}'
        with start_fake_provider() as provider:
            provider.reply(JsonReply(body, status=401))
            recorder = self.recorder(provider.url)
            client, response = self.connect(recorder, headers={"x-api-key": KEY})
            self.assertEqual(response.read(), body)  # the client itself gets what came
            client.close()
            [path] = recorder.wait_written(1, timeout=TIMEOUT)
        fixture = Fixture.load(path)
        self.assertEqual(len(fixture.body), len(body))
        self.assertEqual(
            json.loads(fixture.body)["error"]["message"], "Incorrect API key provided: " + "*" * len(spelt)
        )
        self.assertIn("the value of request header x-api-key", " ".join(fixture.masked))

    def test_a_key_in_base64_inside_an_event_stream_frame_is_masked_and_the_crc_kept_right(self) -> None:
        """Bedrock's chunk event carries its payload as base64 in "bytes": decoded, masked, encoded again."""
        from botocore.eventstream import EventStreamBuffer

        token = CREDENTIALS["x-amz-security-token"]
        inner = json.dumps({"message": f"The security token {token} is invalid"}).replace("/", "\\/")
        payload = json.dumps({"bytes": base64.b64encode(inner.encode()).decode()}).encode()
        frame = aws_event_stream_message({":event-type": "chunk", ":message-type": "event"}, payload)
        with start_fake_provider() as provider:
            provider.reply(StreamReply([frame], content_type="application/vnd.amazon.eventstream"))
            recorder = Recorder(bedrock_converse_wire, provider.url, self.folder).start()
            self.addCleanup(recorder.close)
            port = int(recorder.url.rsplit(":", 1)[1])
            client = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
            client.request("POST", "/model/m/invoke-with-response-stream", body=b"{}",
                           headers={"x-amz-security-token": token})  # fmt: skip
            client.getresponse().read()
            client.close()
            [path] = recorder.wait_written(1, timeout=TIMEOUT)
        fixture = Fixture.load(path)
        self.assertEqual(len(fixture.body), len(frame))
        buffer = EventStreamBuffer()
        buffer.add_data(fixture.body)
        [message] = list(buffer)  # raises on a wrong checksum
        decoded = base64.b64decode(json.loads(message.payload)["bytes"]).decode()
        self.assertNotIn(PLANT, decoded)
        self.assertIn("The security token " + "*" * len(token) + " is invalid", decoded)
        self.assertIn("in the base64 at byte", " ".join(fixture.masked))


class CompressedUpstreamTests(AttackCase):
    def test_a_compressed_answer_is_stored_decoded_and_masked(self) -> None:
        """gzip or deflate sent against accept-encoding: identity: the fixture holds the masked JSON."""
        body = json.dumps({"error": {"message": f"bad key {KEY}"}}).encode()
        for coding in ("gzip", "deflate"):
            with self.subTest(coding=coding):
                upstream = self.upstream(compressed(body, coding))
                recorder = self.recorder(upstream.url)
                client, response = self.connect(recorder, headers={"x-api-key": KEY})
                response.read()
                client.close()
                [path] = recorder.wait_written(1, timeout=TIMEOUT)
                fixture = Fixture.load(path)
                os.remove(path)
                self.assertEqual(json.loads(fixture.body)["error"]["message"], "bad key " + "*" * len(KEY))
                self.assertNotIn("content-encoding", fixture.response_headers)
                self.assertNotIn(PLANT, fixture.dumps())

    def test_a_coding_that_cannot_be_decoded_is_not_recorded_and_says_why(self) -> None:
        """br cannot be searched for the key: nothing is written, and refused names the coding."""
        upstream = self.upstream(compressed(b"{}", "br"))
        recorder = self.recorder(upstream.url)
        client, response = self.connect(recorder, headers={"x-api-key": KEY})
        response.read()
        client.close()
        deadline = time.monotonic() + TIMEOUT
        while not recorder.refused and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(recorder.written, [])
        [line] = recorder.refused
        self.assertIn("content-encoding 'br'", line)
        self.assertEqual([n for n in os.listdir(self.folder) if n.endswith(".json")], [])


class ProxyTargetTests(AttackCase):
    def test_an_absolute_form_target_is_refused_and_nothing_is_written(self) -> None:
        """GET http://evil.example/../../PWNED: a 400 naming the form, no fixture, no file outside."""
        with start_fake_provider() as provider:
            provider.reply(JsonReply({"ok": True}))
            recorder = self.recorder(provider.url)
            port = int(recorder.url.rsplit(":", 1)[1])
            with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
                sock.sendall(b"GET http://evil.example/../../PWNED HTTP/1.1\r\nhost: evil.example\r\n\r\n")
                answer = b""
                while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
                    data = sock.recv(65536)
                    if not data:
                        break
                    answer += data
            self.assertTrue(answer.startswith(b"HTTP/1.1 400"), answer)
            self.assertIn(b"absolute form an HTTP proxy takes", answer)
            self.assertEqual(provider.requests, [])
        self.assertEqual(os.listdir(self.folder), [])


class FixtureLoadTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.folder = tempfile.mkdtemp(prefix="fixtures-")
        cls.good = _good_fixture_doc(cls.folder)

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.folder, True)

    def refused(self, doc: Any, raw: Optional[str] = None) -> str:
        """The error ReplayWire raises on a folder holding this one fixture; it names the file."""
        path = os.path.join(self.folder, "0001-bad.json")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(raw if raw is not None else json.dumps(doc))
        try:
            with self.assertRaises(ProviderInputError) as raised:
                ReplayWire(self.folder)
        finally:
            os.remove(path)
        self.assertIn(path, str(raised.exception))
        return str(raised.exception)

    def test_a_repeated_key_is_refused_naming_the_file_and_the_path(self) -> None:
        """JSON lets the last of two keys win; a fixture load refuses them, saying where."""
        text = json.dumps(self.good, indent=1)
        doubled = text.replace('"status": ', '"status": 500, "status": ', 1)
        message = self.refused(None, raw=doubled)
        self.assertIn("$.response: the key 'status' is given twice", message)

    def test_an_unknown_wire_names_its_file(self) -> None:
        """A stamp naming a wire the kit does not ship: the error names the fixture that says so."""
        doc = json.loads(json.dumps(self.good))
        doc["stamp"]["wire"] = "no-such-wire"
        self.assertIn("the stamp names the wire 'no-such-wire'", self.refused(doc))


if __name__ == "__main__":
    unittest.main()
