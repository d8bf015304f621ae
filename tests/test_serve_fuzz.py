"""Fuzzing serve's judge: its endpoints (task, tools, outcome) over real sockets.

Strategy: as tests/test_provider_fuzz.py fuzzes the provider's parsers, each example
here is a short sequence of requests to a served stage, in any order: a method, a path
under /conformance/ (a tool's name, a name that is none, a path trick), headers, and a
body that is a valid report or tool call mutated, JSON of any shape, or raw bytes. Every
answer must be a clear 2xx or 4xx with a JSON error that says why, never a 5xx; the
provider must raise nothing on its loop and serve a good request afterwards; a body the
judge read is not kept; and where a report ended the run, its verdict must be writable
as both reports and printable. A second set runs the whole ``serve`` command with a
fuzzed outcome: it must exit 0 or 1 with both reports written. Hypothesis runs
derandomized: a bounded share by default, the full length with CONFORMANCE_LONG_TESTS=1.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Dict, List, Tuple
from urllib.parse import urlsplit

from conformance._cli.serve import start_served
from conformance._cli.shared import printable
from conformance._results import write_reports
from conformance.gate._remote import StageSession
from conformance.gate.tools import GateToolset
from conformance.wires import WIRES

from .test_provider_fuzz import mutate
from .test_provider_support import LONG_TESTS

HAVE_HYPOTHESIS = importlib.util.find_spec("hypothesis") is not None
SKIP_REASON = "hypothesis is not installed (pip install hypothesis): the fuzz tests need it"

if HAVE_HYPOTHESIS:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
else:  # pragma: no cover - the tests skip; these stand-ins only let the module import

    def _identity(*args: Any, **kwargs: Any) -> Any:
        return lambda function: function

    given = settings = _identity
    st = None  # type: ignore[assignment]
    HealthCheck = None  # type: ignore[assignment,misc]


def _settings(default: int, long: int) -> Dict[str, Any]:
    if not HAVE_HYPOTHESIS:
        return {}
    return {
        "max_examples": long if LONG_TESTS else default,
        "deadline": None,
        "derandomize": True,
        "database": None,
        "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    }


#: Every answer the judge may give: a result, or a refusal that says why.
ANSWERS = {200, 400, 404, 405, 409, 413}

VALID_BODIES = [
    b'{"call_id": "call_1", "arguments": {"text": "gate", "count": 2, "tags": ["a"]}}',
    b'{"call_id": "call_2", "arguments": "{\\"text\\": \\"ga", "key": "k"}',
    b'{"text": "done", "finish_reason": "stop", "stopped": "done"}',
    b'{"error": {"name": "Boom", "message": "x\\ud800\\u001b[2J"}}',
    b'{"text": null, "finish_reason": 3, "stopped": ["budget"]}',
]
PATHS = [
    "/conformance/task",
    "/conformance/outcome",
    "/conformance/tools/echo_json",
    "/conformance/tools/read_fixture",
    "/conformance/tools/delayed_value",
    "/conformance/tools/always_error",
    "/conformance/tools/append_record",
    "/conformance/tools/read_file",
    "/conformance/tools/",
    "/conformance/tools/echo_json/../outcome",
    "/conformance/tools/%2e%2e%2foutcome",
    "/conformance/",
    "/conformance/x",
]

if HAVE_HYPOTHESIS:
    JSON_VALUES = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
        max_leaves=20,
    )
    FIELDS = st.sampled_from(
        ["call_id", "arguments", "key", "text", "finish_reason", "stopped", "error", "content", "chunks",
         "tool_calls", "usage", "name", "message"]
    )  # fmt: skip
    OBJECTS = st.dictionaries(FIELDS, JSON_VALUES, max_size=5).map(lambda d: json.dumps(d).encode())
    MUTATED = st.tuples(
        st.sampled_from(VALID_BODIES),
        st.sampled_from(["flip", "truncate", "insert", "delete"]),
        st.integers(0, 1 << 10),
        st.binary(min_size=1, max_size=6),
    ).map(lambda t: mutate(t[0], t[1], t[2], t[3]))
    BODIES = st.one_of(
        st.sampled_from(VALID_BODIES),
        MUTATED,
        OBJECTS,
        JSON_VALUES.map(lambda v: json.dumps(v).encode()),
        st.binary(max_size=64),
        st.integers(1, 3000).map(lambda depth: b"[" * depth + b"]" * depth),
    )
    REQUEST = st.tuples(
        st.sampled_from(["GET", "POST", "POST", "POST", "PUT", "DELETE"]),
        st.sampled_from(PATHS),
        BODIES,
        st.sampled_from(["application/json", "text/plain", "", "application/json; charset=latin-1"]),
    )
    SEQUENCES = st.lists(REQUEST, min_size=1, max_size=6)


def send(url: str, method: str, path: str, body: bytes, content_type: str) -> Tuple[int, bytes]:
    """One request on a connection of its own: the status and the body."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    try:
        headers = {"content-type": content_type} if content_type else {}
        connection.request(method, path, body=body if method != "GET" else None, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@unittest.skipUnless(HAVE_HYPOTHESIS, SKIP_REASON)
class JudgeEndpointFuzzTests(unittest.TestCase):
    @settings(**_settings(40, 300))
    @given(SEQUENCES)
    def test_every_request_gets_a_clear_answer_and_the_verdict_can_be_written(
        self, sequence: List[Tuple[str, str, bytes, str]]
    ) -> None:
        """A 2xx or a 4xx naming the problem, never a 5xx; the judge's bodies let go; reports written."""
        with GateToolset(run_id="fz") as toolset:
            session = StageSession(WIRES["openai-chat"], "forced-tool", "chat", toolset, model="m")
            provider = start_served(False, "127.0.0.1", 0, False)
            try:
                session.attach(lambda: provider.requests)
                provider.reply(session.handle)
                for method, path, body, content_type in sequence:
                    status, answer = send(provider.url, method, path, body, content_type)
                    self.assertIn(status, ANSWERS, (method, path, body[:200], answer[:500]))
                    document = json.loads(answer)
                    if status != 200:
                        self.assertTrue(document["error"]["message"], answer)
                self.assertEqual(provider.errors, [])
                judged = [
                    r for r in provider.requests if r.path.startswith("/conformance/") and r.method == "POST"
                ]
                self.assertEqual(
                    [len(r.body) for r in judged if r.response is not None],
                    [0] * sum(1 for r in judged if r.response is not None),
                )
                # The provider serves a good request as if nothing had happened.
                status, _ = send(provider.url, "POST", "/v1/chat/completions", b"{}", "application/json")
                self.assertLess(status, 500)
                verdict = session.verdict
                if verdict is None:
                    verdict = session.give_up()
                with tempfile.TemporaryDirectory() as folder:
                    paths = Path(folder) / "r.json", Path(folder) / "r.xml"
                    write_reports(
                        [verdict.record], json_path=paths[0], junit_path=paths[1], command="c", seconds=0
                    )
                    json.loads(paths[0].read_text(encoding="utf-8"))
                    ET.fromstring(paths[1].read_text(encoding="utf-8"))
                printable(verdict.record.detail).encode("utf-8")
            finally:
                provider.close()
                session.close()


@unittest.skipUnless(HAVE_HYPOTHESIS, SKIP_REASON)
class ServeCommandFuzzTests(unittest.TestCase):
    @settings(**_settings(8, 60))
    @given(BODIES)
    def test_serve_ends_with_a_verdict_and_both_reports_whatever_the_outcome(self, body: bytes) -> None:
        """A fuzzed outcome, then a valid one if it was refused: exit 0 or 1, both reports written."""
        from .test_serve_attacks import StrictServe, post_raw

        with tempfile.TemporaryDirectory() as folder:
            paths = Path(folder) / "v.json", Path(folder) / "v.xml"
            serve = StrictServe(
                "--wire", "openai-chat", "--stage", "text", "--timeout", "20",
                "--json", str(paths[0]), "--junit", str(paths[1]),
            )  # fmt: skip
            status, answer = post_raw(serve.url, "/conformance/outcome", body)
            self.assertIn(status, ANSWERS, answer)
            if status != 200:
                status, answer = post_raw(
                    serve.url, "/conformance/outcome", b'{"text": "", "stopped": "done"}'
                )
                self.assertEqual(status, 200, answer)
            self.assertIn(serve.end(), (0, 1))
            document = json.loads(paths[0].read_text(encoding="utf-8"))
            ET.fromstring(paths[1].read_text(encoding="utf-8"))
        self.assertEqual(len(document["cases"]), 1)


if __name__ == "__main__":
    unittest.main()
