"""The recorder and the replay under hostile input: bounded memory and time, no loss, no secret kept."""

from __future__ import annotations

import http.client
import json
import os
import random
import shutil
import socket
import tempfile
import threading
import time
import tracemalloc
import unittest
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Tuple

from conformance.encoders import aws_event_stream_message, sse
from conformance.errors import ProviderInputError
from conformance.gate.fixture_format import Fixture, load_folder
from conformance.gate.record import Recorder
from conformance.gate.replay import ReplayWire
from conformance.provider import JsonReply, StreamReply, start_fake_provider
from conformance.wires import bedrock_converse_wire, openai_chat_wire

TIMEOUT = 10.0
MIB = 1024 * 1024


class RawUpstream:
    """A loopback upstream that answers each connection with ``script(sock)``: any bytes, any pace.

    Each connection's script runs in its own thread, bounded by ``TIMEOUT``; ``closed``
    is set when the recorder closed the connection under a script that was still sending.
    """

    def __init__(self, script: Callable[[socket.socket], None]) -> None:
        self.script = script
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.stop = threading.Event()
        self.closed = threading.Event()
        self.threads: List[threading.Thread] = []
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                sock, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        with sock:
            sock.settimeout(TIMEOUT)
            data = b""
            while b"\r\n\r\n" not in data:
                more = sock.recv(65536)
                if not more:
                    return
                data += more
            head, _, rest = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(rest) < length:
                rest += sock.recv(65536)
            try:
                self.script(sock)
            except OSError:
                self.closed.set()

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
        self.acceptor.join(TIMEOUT)
        for thread in self.threads:
            thread.join(TIMEOUT)


def endless_chunks(sock: socket.socket) -> None:
    """A chunked stream that never ends (bounded here by time: the recorder must end it first)."""
    sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    event = b"data: " + b"x" * 65000 + b"\n\n"
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        sock.sendall(b"%x\r\n%s\r\n" % (len(event), event))


def huge_sized_body(sock: socket.socket) -> None:
    """A 1 GiB Content-Length body, sent until the recorder hangs up."""
    sock.sendall(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % (1024 * MIB)
    )
    block = b"7" * 65536
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        sock.sendall(block)


def trickle(sock: socket.socket) -> None:
    """A stream that sends one byte every 0.1 s, for as long as it is let."""
    sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        sock.sendall(b"1\r\n.\r\n")
        time.sleep(0.1)


def one_big_chunk(size: int) -> Callable[[socket.socket], None]:
    def script(sock: socket.socket) -> None:
        sock.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        sock.sendall(b"%x\r\n" % size)
        block = b"z" * MIB
        for _ in range(size // MIB):
            sock.sendall(block)
        sock.sendall(b"\r\n0\r\n\r\n")

    return script


def open_descriptors() -> Optional[int]:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


class AttackCase(unittest.TestCase):
    def setUp(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="fixtures-")
        self.addCleanup(shutil.rmtree, self.folder, True)

    def upstream(self, script: Callable[[socket.socket], None]) -> RawUpstream:
        upstream = RawUpstream(script)
        self.addCleanup(upstream.close)
        return upstream

    def recorder(self, upstream: str, **kwargs: Any) -> Recorder:
        recorder = Recorder(openai_chat_wire, upstream, self.folder, **kwargs)
        recorder.start()
        self.addCleanup(recorder.close)
        return recorder

    def connect(
        self, recorder: Recorder, path: str = "/v1/chat/completions", headers: Any = None, body: bytes = b"{}"
    ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        port = int(recorder.url.rsplit(":", 1)[1])
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        client.request(
            "POST", path, body=body, headers={"content-type": "application/json", **(headers or {})}
        )
        return client, client.getresponse()


class BoundsTests(AttackCase):
    def test_an_endless_stream_is_cut_at_the_cap_and_kept_in_bounded_memory(self) -> None:
        """An endless upstream is cut at max_response_bytes; memory stays under the cap plus a little."""
        upstream = self.upstream(endless_chunks)
        cap = 4 * MIB
        recorder = self.recorder(upstream.url, max_response_bytes=cap)
        tracemalloc.start()
        self.addCleanup(tracemalloc.stop)
        client, response = self.connect(recorder)
        got = 0
        try:
            while True:
                data = response.read1(65536)
                if not data:
                    break
                got += len(data)
        except (http.client.IncompleteRead, OSError):
            pass
        finally:
            client.close()
        [path] = recorder.wait_written(1, timeout=TIMEOUT)
        grown = tracemalloc.get_traced_memory()[1] / MIB
        tracemalloc.stop()
        fixture = Fixture.load(path)
        self.assertFalse(fixture.complete)
        self.assertIn("max_response_bytes", fixture.truncated)
        self.assertLessEqual(len(fixture.body), cap)
        self.assertGreater(len(fixture.body), cap - 70000)
        self.assertLessEqual(got, cap + 70000)
        self.assertTrue(upstream.closed.wait(TIMEOUT), "the upstream was never hung up on")
        # The fixture and its JSON are built once, at the end: a few times the cap, never the stream.
        self.assertLess(grown, 6 * cap / MIB + 16, f"peak Python memory {grown:.1f} MiB")

    def test_a_huge_sized_body_is_cut_at_the_cap(self) -> None:
        """A 1 GiB Content-Length body is cut at the cap; the fixture says so and holds what was kept."""
        upstream = self.upstream(huge_sized_body)
        recorder = self.recorder(upstream.url, max_response_bytes=2 * MIB)
        client, response = self.connect(recorder)
        try:
            # In pieces: read() of a 1 GiB Content-Length asks the buffered reader for
            # 1 GiB at once, and it allocates that much before the recorder's cut.
            while response.read1(65536):
                pass
        except (http.client.IncompleteRead, OSError):
            pass
        finally:
            client.close()
        [path] = recorder.wait_written(1, timeout=TIMEOUT)
        fixture = Fixture.load(path)
        self.assertEqual(len(fixture.body), 2 * MIB)
        self.assertFalse(fixture.complete)
        self.assertIn("max_response_bytes (2097152)", fixture.truncated)

    def test_a_client_that_gives_up_on_a_trickle_frees_the_upstream_at_once(self) -> None:
        """A client that leaves mid-trickle gets the upstream closed at once, and its descriptors freed."""
        upstream = self.upstream(trickle)
        recorder = self.recorder(upstream.url, timeout=30.0)
        before = open_descriptors()
        client, response = self.connect(recorder)
        response.read1(16)
        response.close()  # the response holds the socket too: both let go, as a client that gives up does
        client.close()
        left = time.monotonic()
        self.assertTrue(upstream.closed.wait(TIMEOUT), "the upstream was never hung up on")
        took = time.monotonic() - left
        [path] = recorder.wait_written(1, timeout=TIMEOUT)
        self.assertLess(took, 5.0)  # a generous bound: the watcher looks every 50 ms; without it, 30 s
        self.assertFalse(Fixture.load(path).complete)
        self.assertEqual(Fixture.load(path).truncated, "")  # the client left: not the recorder's cut
        if before is not None:
            deadline = time.monotonic() + TIMEOUT
            while open_descriptors() != before and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertEqual(open_descriptors(), before)

    def test_an_exchange_is_ended_at_max_seconds(self) -> None:
        """A trickle to a patient client ends at the exchange's own time limit, marked truncated."""
        upstream = self.upstream(trickle)
        recorder = self.recorder(upstream.url, max_seconds=0.5)
        client, response = self.connect(recorder)
        try:
            response.read()
        except (http.client.IncompleteRead, OSError):
            pass
        finally:
            client.close()
        [path] = recorder.wait_written(1, timeout=TIMEOUT)
        fixture = Fixture.load(path)
        self.assertEqual(fixture.truncated, "the exchange passed max_seconds")
        self.assertFalse(fixture.complete)

    def test_one_big_http_chunk_is_passed_on_whole(self) -> None:
        """An 8 MiB HTTP chunk reaches the client and the fixture as one chunk (its parts joined once)."""
        upstream = self.upstream(one_big_chunk(8 * MIB))
        recorder = self.recorder(upstream.url)
        client, response = self.connect(recorder)
        try:
            body = response.read()
        finally:
            client.close()
        self.assertEqual(len(body), 8 * MIB)
        [path] = recorder.wait_written(1, timeout=TIMEOUT)
        fixture = Fixture.load(path)
        self.assertEqual([len(c) for _, _, c in fixture.chunks], [8 * MIB])
        self.assertTrue(fixture.complete)

    def test_bad_bounds_are_refused(self) -> None:
        """A non-positive time limit or cap is refused when the recorder is made."""
        for kwargs in (
            {"max_seconds": 0},
            {"timeout": -1},
            {"max_response_bytes": 0},
            {"max_response_bytes": 1.5},
        ):
            with self.subTest(kwargs=kwargs):
                with self.assertRaises(ProviderInputError):
                    Recorder(openai_chat_wire, "http://127.0.0.1:9", self.folder, **kwargs)


class NoLossTests(AttackCase):
    def test_two_recorders_on_one_folder_keep_every_exchange(self) -> None:
        """Two recorders and many clients at once on one folder: every exchange gets a file of its own."""
        with start_fake_provider() as provider:
            provider.reply(JsonReply({"id": "chatcmpl-1", "object": "chat.completion"}))
            first, second = self.recorder(provider.url), self.recorder(provider.url)

            def post(i: int) -> int:
                client, response = self.connect(
                    first if i % 2 else second, body=json.dumps({"n": i}).encode()
                )
                try:
                    response.read()
                    return response.status
                finally:
                    client.close()

            with ThreadPoolExecutor(max_workers=8) as pool:
                statuses = list(pool.map(post, range(40)))
            self.assertEqual(statuses, [200] * 40)
            first.wait_written(20, timeout=TIMEOUT)
            second.wait_written(20, timeout=TIMEOUT)
        names = sorted(n for n in os.listdir(self.folder) if n.endswith(".json"))
        self.assertEqual(len(names), 40, names)
        self.assertEqual(len({n.split("-")[0] for n in names}), 40)
        bodies = sorted(json.loads(f.request_body)["n"] for f in load_folder(self.folder))
        self.assertEqual(bodies, list(range(40)))
        self.assertEqual([n for n in os.listdir(self.folder) if n.startswith(".")], [])


#: A credential of each form a client sends, planted so one search finds a leak.
PLANT = "PLANTEDSECRET"
CREDENTIALS = {
    "authorization": f"Bearer sk-{PLANT}-bearer0001",
    "x-api-key": f"sk-ant-{PLANT}-xapikey01",
    "x-goog-api-key": f"AIza{PLANT}-googkey01",
    "api-key": f"{PLANT}-azureapikey1",
    "x-amz-security-token": f"IQoJ{PLANT}-ststoken01",
    "cookie": f"session={PLANT}-cookievalue1",
    "ocp-apim-subscription-key": f"{PLANT}-apimkey0001",
}


class SecretTests(AttackCase):
    def test_a_credential_echoed_back_is_masked_in_the_fixture_at_its_own_length(self) -> None:
        """Each credential the provider echoes in an error body or a streamed chunk is masked, sizes kept."""
        with start_fake_provider() as provider:
            recorder = self.recorder(provider.url)
            for header, value in CREDENTIALS.items():
                with self.subTest(header=header):
                    echoed = value.split(" ", 1)[-1].split("=", 1)[-1]
                    events = [sse({"error": {"message": f"Incorrect API key provided: {echoed}"}})]
                    chunks = [events[0][:20], events[0][20:]]  # the key may straddle chunks
                    provider.reply(StreamReply(chunks))
                    client, response = self.connect(recorder, headers={header: value})
                    response.read()
                    client.close()
                    provider.reply(JsonReply({"error": {"message": f"bad key {echoed}"}}, status=401))
                    client, response = self.connect(recorder, headers={header: value})
                    response.read()
                    client.close()
            written = recorder.wait_written(2 * len(CREDENTIALS), timeout=TIMEOUT)
        streamed = []
        for path in written:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            self.assertNotIn(PLANT, text, path)
            fixture = Fixture.load(path)
            self.assertTrue(fixture.masked, path)
            self.assertIn("the value of request header", " ".join(fixture.masked))
            if fixture.status == 200:
                streamed.append(fixture)
        # Each exchange's fixture is written once its response has gone, in whichever order
        # the recorder's threads finish: the streamed ones are told by their status.
        self.assertEqual(len(streamed), len(CREDENTIALS))
        for fixture in streamed:
            self.assertEqual([len(c) for _, _, c in fixture.chunks], [20, len(fixture.body) - 20])
            self.assertIn(b"Incorrect API key provided: ****", fixture.body)

    def test_an_echo_in_an_event_stream_frame_keeps_its_checksum_right(self) -> None:
        """A key echoed inside a Bedrock event-stream frame is masked and the frame's CRC made right again."""
        from botocore.eventstream import EventStreamBuffer

        payload = json.dumps(
            {"message": f"The security token {CREDENTIALS['x-amz-security-token']} is invalid"}
        )
        frame = aws_event_stream_message(
            {":event-type": "throttlingException", ":message-type": "exception"}, payload.encode()
        )
        with start_fake_provider() as provider:
            provider.reply(StreamReply([frame], content_type="application/vnd.amazon.eventstream"))
            recorder = Recorder(bedrock_converse_wire, provider.url, self.folder).start()
            self.addCleanup(recorder.close)
            port = int(recorder.url.rsplit(":", 1)[1])
            client = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
            headers = {"x-amz-security-token": CREDENTIALS["x-amz-security-token"]}
            client.request("POST", "/model/m/converse-stream", body=b"{}", headers=headers)
            client.getresponse().read()
            client.close()
            [path] = recorder.wait_written(1, timeout=TIMEOUT)
        fixture = Fixture.load(path)
        self.assertNotIn(PLANT.encode(), fixture.body)
        self.assertEqual(len(fixture.body), len(frame))
        buffer = EventStreamBuffer()
        buffer.add_data(fixture.body)
        [message] = list(buffer)  # raises on a wrong checksum
        token = CREDENTIALS["x-amz-security-token"]
        self.assertIn(b"The security token " + b"*" * len(token) + b" is invalid", message.payload)

    def test_query_and_body_secrets_outside_any_list_are_redacted(self) -> None:
        """Unknown query parameters keep their name only; credential keys are redacted at any depth."""
        with start_fake_provider() as provider:
            provider.reply(JsonReply({"ok": True}))
            recorder = self.recorder(provider.url)
            query = (
                f"?api-version=2024-10-21&sig={PLANT}sas01&se=2026&subscription-key={PLANT}sub1"
                f"&token={PLANT}tok1&code={PLANT}code1"
            )
            body = {
                "model": "m",
                "messages": [],
                "user": f"{PLANT}-enduser",
                "metadata": {"token": f"{PLANT}-meta", "trace": "kept"},
                "max_tokens": 5,
            }
            client, response = self.connect(
                recorder, path="/v1/chat/completions" + query, body=json.dumps(body).encode()
            )
            response.read()
            client.close()
            [path] = recorder.wait_written(1, timeout=TIMEOUT)
        with open(path, encoding="utf-8") as handle:
            self.assertNotIn(PLANT, handle.read())
        fixture = Fixture.load(path)
        self.assertIn("api-version=2024-10-21", fixture.query)
        for name in ("sig", "se", "subscription-key", "token", "code"):
            self.assertIn(f"request query {name}", fixture.redacted)
        self.assertIn("request body user", fixture.redacted)
        self.assertIn("request body metadata.token", fixture.redacted)
        kept = json.loads(fixture.request_body)
        self.assertEqual((kept["metadata"]["trace"], kept["max_tokens"]), ("kept", 5))


def _good_fixture_doc(folder: str) -> Dict[str, Any]:
    """A real recorded fixture's document, recorded here through the fake provider."""
    with start_fake_provider() as provider:
        provider.reply(StreamReply([b'data: {"a":1}\n\n', b"data: [DONE]\n\n"]))
        with Recorder(openai_chat_wire, provider.url, folder) as recorder:
            port = int(recorder.url.rsplit(":", 1)[1])
            client = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
            client.request(
                "POST",
                "/v1/chat/completions",
                body=b'{"model":"m","stream":true}',
                headers={"content-type": "application/json"},
            )
            client.getresponse().read()
            client.close()
            [path] = recorder.wait_written(1, timeout=TIMEOUT)
    with open(path, encoding="utf-8") as handle:
        doc: Dict[str, Any] = json.load(handle)
    os.remove(path)
    return doc


class FixtureSchemaTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.folder = tempfile.mkdtemp(prefix="fixtures-")
        cls.good = _good_fixture_doc(cls.folder)

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.folder, True)

    def write(self, doc: Any, name: str = "0001-bad.json", raw: Optional[str] = None) -> str:
        """Write a fixture into the otherwise empty folder; it is gone when the caller's check ends."""
        path = os.path.join(self.folder, name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(raw if raw is not None else json.dumps(doc))
        return path

    def refused(self, doc: Any, raw: Optional[str] = None) -> str:
        path = self.write(doc, raw=raw)
        try:
            with self.assertRaises(ProviderInputError) as raised:
                ReplayWire(self.folder)
        finally:
            os.remove(path)
        message = str(raised.exception)
        self.assertIn(path, message)
        return message

    def edited(self, *keys: Any, value: Any) -> Dict[str, Any]:
        doc = json.loads(json.dumps(self.good))
        inner = doc
        for key in keys[:-1]:
            inner = inner[key]
        inner[keys[-1]] = value
        return doc

    def test_malformed_fixtures_are_refused_when_the_folder_opens(self) -> None:
        """Wrong types and shapes are refused as ReplayWire opens the folder, naming the file and field."""
        table = [
            (("response", "chunks"), "garbage", "$.response.chunks: expected a list of chunks"),
            (("request", "method"), 5, "$.request.method: expected a string"),
            (("response", "status"), 99999, "$.response.status: expected a whole number from 100 to 599"),
            (("response", "status"), 200.7, "$.response.status: expected a whole number"),
            (("stamp", "recorded_at"), "yesterday", "$.stamp.recorded_at: expected an ISO 8601 time"),
            (("response", "complete"), "false", "$.response.complete: expected true or false"),
            (("response", "chunked"), "false", "$.response.chunked: expected true or false"),
            (("response", "headers"), [["content-type", "x"]], "$.response.headers: expected an object"),
            (("events",), "garbage", "$.events: expected a list of event objects"),
            (("stamp", "stream"), 1, "$.stamp.stream: expected true or false"),
            (("request", "path"), "v1/x", "$.request.path: expected a path starting with /"),
            (("request", "body"), {"text": "a", "base64": "YQ=="}, 'exactly one of "text" or "base64"'),
        ]
        for keys, value, message in table:
            with self.subTest(field=keys, value=value):
                self.assertIn(message, self.refused(self.edited(*keys, value=value)))

    def test_syntax_errors_and_deep_nesting_name_the_line_or_say_so(self) -> None:
        """Broken JSON names its line and column; nesting too deep is refused, not a RecursionError."""
        message = self.refused(None, raw='{\n "format": "conformance-fixture/1",\n "stamp": }')
        self.assertIn("line 3, column", message)
        self.assertIn("nested too deeply", self.refused(None, raw="[" * 100000 + "]" * 100000))

    def test_a_good_fixture_still_replays(self) -> None:
        """The recorded fixture itself loads and keeps its chunks."""
        self.addCleanup(os.remove, self.write(self.good))
        [fixture] = ReplayWire(self.folder).fixtures
        self.assertEqual([c for _, _, c in fixture.chunks], [b'data: {"a":1}\n\n', b"data: [DONE]\n\n"])

    def test_mutated_fixtures_get_a_clear_error_or_a_faithful_load(self) -> None:
        """Seeded mutations of a real fixture: each is refused naming the file, or loads and round-trips."""
        rng = random.Random(20261202)
        values: List[Any] = [
            None,
            True,
            False,
            0,
            -1,
            200.7,
            "",
            "false",
            "x" * 3,
            [],
            {},
            [1],
            {"a": 1},
            10**20,
        ]
        paths = list(_leaf_paths(self.good))
        for round_ in range(300):
            doc = json.loads(json.dumps(self.good))
            keys = rng.choice(paths)
            inner = doc
            for key in keys[:-1]:
                inner = inner[key]
            if rng.random() < 0.15 and isinstance(inner, dict):
                del inner[keys[-1]]
            else:
                inner[keys[-1]] = rng.choice(values)
            path = self.write(doc, name=f"0001-fuzz-{round_}.json")
            try:
                fixture = Fixture.load(path)
            except ProviderInputError as exc:
                self.assertIn(path, str(exc))
                continue
            finally:
                os.remove(path)
            again = Fixture.from_json(fixture.to_json())
            self.assertEqual(
                again, fixture, f"{keys} = {inner.get(keys[-1]) if isinstance(inner, dict) else '?'}"
            )
            for _, at, data in fixture.chunks:
                self.assertIsInstance(data, bytes)
                self.assertIsInstance(at, float)
            self.assertIsInstance(fixture.status, int)
            self.assertIsInstance(fixture.complete, bool)


def _leaf_paths(value: Any, prefix: Tuple[Any, ...] = ()) -> List[Tuple[Any, ...]]:
    """Every key path in ``value`` (objects and lists), the containers' own paths included."""
    out: List[Tuple[Any, ...]] = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        out.append((*prefix, key))
        out.extend(_leaf_paths(inner, (*prefix, key)))
    return out


if __name__ == "__main__":
    unittest.main()
