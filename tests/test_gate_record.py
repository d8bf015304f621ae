"""The recorder: a loopback proxy in front of the fake provider, over HTTP/1.1 and TLS."""

from __future__ import annotations

import http.client
import json
import os
import select
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest
from typing import Dict, List, Optional, Tuple

from conformance.encoders import sse
from conformance.errors import ProviderInputError
from conformance.fixture import conformance_request
from conformance.gate.fixture_format import Fixture, load_folder, schema_hash
from conformance.gate.record import Recorder
from conformance.provider import JsonReply, StreamReply, start_fake_provider
from conformance.wires import anthropic_wire, gemini_wire, openai_chat_wire

TIMEOUT = 10.0
#: Every planted value has this in it, so one search finds any that leaked.
PLANT = "PLANTED-SECRET"
REQUEST_SECRETS = {
    "authorization": f"Bearer sk-{PLANT}-1",
    "x-api-key": f"{PLANT}-2",
    "api-key": f"{PLANT}-3",
    "x-goog-api-key": f"{PLANT}-4",
    "x-amz-security-token": f"{PLANT}-5",
    "x-amz-date": f"20260101T000000Z-{PLANT}-6",
    "x-amz-content-sha256": f"{PLANT}-7",
    "cookie": f"session={PLANT}-8",
    "openai-organization": f"org-{PLANT}-9",
    "openai-project": f"proj_{PLANT}-10",
    "x-gateway-token": f"{PLANT}-11",
}
AWS_AUTHORIZATION = (
    f"AWS4-HMAC-SHA256 Credential=AKIA{PLANT}/20260101/us-east-1/bedrock/aws4_request, "
    f"SignedHeaders=host;x-amz-date, Signature={PLANT}-12"
)
RESPONSE_SECRETS = {
    "set-cookie": f"__cf_bm={PLANT}-13; path=/",
    "openai-organization": f"org-{PLANT}-14",
    "openai-project": f"proj_{PLANT}-15",
    "x-request-id": f"req_{PLANT}-16",
}
STREAM = [
    sse({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"delta": {"content": "Sun"}}]}),
    sse({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"delta": {"content": "ny ☀"}}]}),
    b"data: [DONE]\n\n",
]


def _chunks(data: bytes, cuts: List[int]) -> List[bytes]:
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


class RecorderTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self.provider = start_fake_provider()
        self.addCleanup(self.provider.close)
        self.folder = tempfile.mkdtemp(prefix="fixtures-")
        self.addCleanup(shutil.rmtree, self.folder, True)

    def recorder(self, upstream: str, **kwargs: object) -> Recorder:
        recorder = Recorder(openai_chat_wire, upstream, self.folder, **kwargs)  # type: ignore[arg-type]
        recorder.start()
        self.addCleanup(recorder.close)
        return recorder

    def post(self, recorder: Recorder, path: str, body: bytes, headers: Dict[str, str]) -> Tuple[int, bytes]:
        port = int(recorder.url.rsplit(":", 1)[1])
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        try:
            client.request("POST", path, body=body, headers=headers)
            response = client.getresponse()
            return response.status, response.read()
        finally:
            client.close()

    def raw_chunks(self, recorder: Recorder, path: str, body: bytes) -> List[bytes]:
        """POST through the recorder with a raw socket; the chunked body's chunks as framed."""
        port = int(recorder.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock, sock.makefile("rb") as f:
            sock.sendall(
                f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\n\r\n".encode() + body
            )
            self.assertIn(b" 200 ", f.readline())
            while f.readline() not in (b"\r\n", b""):
                pass
            chunks = []
            while True:
                size = int(f.readline().split(b";")[0], 16)
                if size == 0:
                    return chunks
                chunks.append(f.read(size))
                f.read(2)


class TestRecording(RecorderTestCase):
    def test_stream_is_passed_on_and_written_chunk_for_chunk(self) -> None:
        """The backend gets the upstream's chunks unchanged; the fixture holds the same chunks and events."""
        body = b"".join(STREAM)
        chunks = _chunks(body, [7, 60, 130, 131])  # one cut inside the UTF-8 sun
        self.provider.reply(StreamReply(chunks))
        recorder = self.recorder(self.provider.url + "/")
        request = json.dumps({"model": "gpt-x", "stream": True, "messages": []}).encode()
        self.assertEqual(self.raw_chunks(recorder, "/v1/chat/completions", request), chunks)
        [path] = recorder.wait_written(1)
        fixture = Fixture.load(path)
        self.assertEqual([c for _, _, c in fixture.chunks], chunks)
        self.assertEqual([o for o, _, _ in fixture.chunks], [0, 7, 60, 130, 131])
        self.assertEqual(fixture.body, body)
        self.assertTrue(all(at >= 0 for _, at, _ in fixture.chunks))
        self.assertEqual([e["type"] for e in fixture.events],
                         ["chat.completion.chunk", "chat.completion.chunk", "[DONE]"])
        first_end = len(STREAM[0])
        self.assertEqual([e["chunk"] for e in fixture.events], [2 if first_end > 60 else 1, 4, 4])
        self.assertEqual([e["offset"] for e in fixture.events], [first_end, len(body) - 14, len(body)])
        self.assertEqual((fixture.status, fixture.http_version, fixture.complete), (200, "HTTP/1.1", True))
        self.assertEqual(self.provider.next_request().path, "/v1/chat/completions")

    def test_fixture_is_stamped(self) -> None:
        """Wire, model, base URL without credentials or query, date, schema hash, stream flag, user agent."""
        self.provider.reply(JsonReply({"id": "chatcmpl-2", "object": "chat.completion"}))
        parts = self.provider.url.split("://", 1)
        recorder = self.recorder(f"{parts[0]}://user:pw@{parts[1]}/?token=1", scenario="text")
        request = conformance_request("gpt-x")
        question = {"role": "user", "content": request.messages[0].content}
        tools = [{"type": "function", "function": {"name": "get_weather"}}]
        body = json.dumps({"model": "gpt-x", "messages": [question], "tools": tools}).encode()
        status, _ = self.post(recorder, "/v1/chat/completions", body,
                              {"content-type": "application/json", "user-agent": "OpenAI/Python 1.99"})
        self.assertEqual(status, 200)
        stamp = Fixture.load(recorder.wait_written(1)[0]).stamp
        self.assertEqual(stamp.wire, "openai-chat")
        self.assertEqual(stamp.model, "gpt-x")
        self.assertEqual(stamp.base_url, self.provider.url)
        self.assertEqual(stamp.schema_hash, schema_hash(json.loads(body)))
        self.assertTrue(stamp.schema_hash and stamp.schema_hash.startswith("sha256:"))
        self.assertIs(stamp.stream, False)
        self.assertEqual(stamp.user_agent, "OpenAI/Python 1.99")
        self.assertEqual(stamp.scenario, "text")
        self.assertEqual(stamp.recorded().tzinfo is not None, True)

    def test_model_from_the_path_and_stream_from_the_wire(self) -> None:
        """Gemini names the model in the path and asks for a stream by its path."""
        self.provider.reply(StreamReply([sse({"candidates": []})]))
        recorder = Recorder(gemini_wire, self.provider.url, self.folder).start()
        self.addCleanup(recorder.close)
        self.post(recorder, "/v1beta/models/gemini-9:streamGenerateContent?alt=sse&key=" + PLANT,
                  b'{"contents": []}', {"content-type": "application/json"})
        fixture = Fixture.load(recorder.wait_written(1)[0])
        self.assertEqual((fixture.stamp.model, fixture.stamp.stream, fixture.stamp.schema_hash),
                         ("gemini-9", True, None))
        self.assertEqual(fixture.query, "alt=sse&key=%5Bredacted%5D")
        self.assertEqual(self.provider.next_request().params["key"], PLANT)  # forwarded, not written

    def test_numbering_continues_in_a_folder(self) -> None:
        """A second recorder on the same folder numbers on instead of overwriting."""
        self.provider.reply(JsonReply({"object": "chat.completion"}))
        for _ in range(2):
            recorder = Recorder(anthropic_wire, self.provider.url, self.folder).start()
            try:
                self.post(recorder, "/v1/messages", b"{}", {})
                recorder.wait_written(1)
            finally:
                recorder.close()
        self.assertEqual(sorted(os.listdir(self.folder)),
                         ["0001-post-v1-messages.json", "0002-post-v1-messages.json"])
        self.assertEqual(len(load_folder(self.folder)), 2)

    def test_unreachable_upstream_is_a_502_and_no_fixture(self) -> None:
        """An upstream that refuses gets the backend a 502 that says so, and nothing is written."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        recorder = self.recorder(f"http://127.0.0.1:{port}", timeout=2.0)
        status, body = self.post(recorder, "/v1/chat/completions", b"{}", {})
        self.assertEqual(status, 502)
        self.assertIn("could not reach", json.loads(body)["error"]["message"])
        self.assertEqual(recorder.written, [])

    def test_refuses_remote_bind_and_bad_upstream(self) -> None:
        """The recorder listens on loopback only and needs an http(s) upstream."""
        with self.assertRaises(ProviderInputError):
            Recorder(openai_chat_wire, "http://127.0.0.1:1", self.folder, host="0.0.0.0")
        with self.assertRaises(ProviderInputError):
            Recorder(openai_chat_wire, "ftp://example.invalid", self.folder)


class TestRedaction(RecorderTestCase):
    def test_no_planted_secret_reaches_a_fixture(self) -> None:
        """Every secret form, both ways, is forwarded but never written; the fixture names what it dropped."""
        kept = {"retry-after": "3", "x-ratelimit-remaining": "9"}
        self.provider.reply(JsonReply({"id": "chatcmpl-3", "object": "chat.completion"},
                                      headers={**RESPONSE_SECRETS, **kept}))
        recorder = self.recorder(self.provider.url)
        body = json.dumps({"model": "gpt-x", "messages": [], "api_key": f"{PLANT}-17"}).encode()
        self.post(recorder, f"/v1/chat/completions?key={PLANT}-18&X-Amz-Signature={PLANT}-19", body,
                  {**REQUEST_SECRETS, "content-type": "application/json"})
        self.post(recorder, "/model/m/converse", b"{}", {"authorization": AWS_AUTHORIZATION})
        upstream = self.provider.requests
        self.assertEqual(upstream[0].headers["x-api-key"], f"{PLANT}-2")  # the upstream still got them
        self.assertEqual(upstream[1].headers["authorization"], AWS_AUTHORIZATION)
        written = recorder.wait_written(2)
        self.assertEqual(len(written), 2)
        for name in os.listdir(self.folder):
            with open(os.path.join(self.folder, name), encoding="utf-8") as handle:
                text = handle.read()
            self.assertNotIn(PLANT, text, name)
            self.assertNotIn("AKIA", text, name)
        # Each fixture is written once its response has gone, in whichever order the
        # recorder's threads finish: each is told by its path.
        fixtures = [Fixture.load(path) for path in written]
        first, second = sorted(fixtures, key=lambda fixture: fixture.path != "/v1/chat/completions")
        self.assertEqual(second.path, "/model/m/converse")
        for header in REQUEST_SECRETS:
            self.assertIn(f"request header {header}", first.redacted)
        for header in RESPONSE_SECRETS:
            self.assertIn(f"response header {header}", first.redacted)
        self.assertIn("request query key", first.redacted)
        self.assertIn("request query X-Amz-Signature", first.redacted)
        self.assertIn("request body api_key", first.redacted)
        self.assertEqual(first.response_headers["retry-after"], "3")  # what retry handling reads stays
        self.assertEqual(first.response_headers["x-ratelimit-remaining"], "9")
        self.assertEqual(first.request_headers, {"content-type": "application/json"})
        self.assertIn("request header authorization", second.redacted)


def _make_certificate(folder: str) -> Optional[Tuple[str, str]]:
    """A throwaway self-signed certificate for 127.0.0.1, or None without openssl."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    done = subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        capture_output=True, timeout=60,
    )
    return (cert, key) if done.returncode == 0 else None


class TlsFront:
    """A TLS-terminating loopback front for the fake provider: one connection at a time, bounded."""

    def __init__(self, cert: str, key: str, target: int) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)  # so that close() is seen within 50 ms
        self.port = self.listener.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                raw, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            raw.settimeout(TIMEOUT)
            try:
                with self.context.wrap_socket(raw, server_side=True) as tls, \
                        socket.create_connection(("127.0.0.1", self.target), timeout=TIMEOUT) as plain:
                    tls.settimeout(TIMEOUT)
                    self._pipe(tls, plain)
            except OSError:
                raw.close()

    def _pipe(self, tls: ssl.SSLSocket, plain: socket.socket) -> None:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and not self.stop.is_set():
            readable = [tls] if tls.pending() else select.select([tls, plain], [], [], 0.05)[0]
            for sock in readable:
                data = sock.recv(65536)
                if not data:
                    return
                (plain if sock is tls else tls).sendall(data)

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
        self.thread.join(TIMEOUT)


class TestTls(RecorderTestCase):
    def test_records_through_tls_upstream(self) -> None:
        """Over https with a test certificate, chunks reach the backend and the fixture unchanged."""
        os.makedirs(self.folder + "-cert")
        self.addCleanup(shutil.rmtree, self.folder + "-cert", True)
        made = _make_certificate(self.folder + "-cert")
        if made is None:
            self.skipTest("openssl is not on PATH (or failed): no test certificate for the TLS upstream")
        front = TlsFront(made[0], made[1], self.provider.port)
        self.addCleanup(front.close)
        chunks = _chunks(b"".join(STREAM), [20, 90])
        self.provider.reply(StreamReply(chunks))
        context = ssl.create_default_context(cafile=made[0])
        recorder = self.recorder(f"https://127.0.0.1:{front.port}", ssl_context=context)
        self.assertEqual(self.raw_chunks(recorder, "/v1/chat/completions", b'{"stream": true}'), chunks)
        fixture = Fixture.load(recorder.wait_written(1)[0])
        self.assertEqual([c for _, _, c in fixture.chunks], chunks)
        self.assertEqual(fixture.stamp.base_url, f"https://127.0.0.1:{front.port}")

    def test_untrusted_certificate_is_refused(self) -> None:
        """Without the test authority the TLS upstream is refused with a 502, not trusted."""
        os.makedirs(self.folder + "-cert")
        self.addCleanup(shutil.rmtree, self.folder + "-cert", True)
        made = _make_certificate(self.folder + "-cert")
        if made is None:
            self.skipTest("openssl is not on PATH (or failed): no test certificate for the TLS upstream")
        front = TlsFront(made[0], made[1], self.provider.port)
        self.addCleanup(front.close)
        recorder = self.recorder(f"https://127.0.0.1:{front.port}", timeout=5.0)
        status, body = self.post(recorder, "/v1/chat/completions", b"{}", {})
        self.assertEqual(status, 502)
        self.assertIn("CERTIFICATE_VERIFY_FAILED", body.decode())


if __name__ == "__main__":
    unittest.main()
