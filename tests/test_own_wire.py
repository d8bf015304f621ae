"""A wire of one's own: the one in docs/own-wire.md, built from a name and reply() alone."""

from __future__ import annotations

import json
import re
import unittest
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List

from conformance import (
    BackendConformanceTarget,
    ChatRequest,
    ChatResponse,
    LLMError,
    StreamChunk,
    TargetDefinitionError,
    Usage,
    Wire,
    aws_event_stream_message,
    backend_conformance_cases,
    ndjson,
    sse,
)
from conformance.wires import WireLike

DOC = Path(__file__).resolve().parent.parent / "docs" / "own-wire.md"


def _doc_wire() -> Wire:
    """Run the page's wire code as a reader would paste it, and return its wire."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## The whole wire", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "docs/own-wire.md lost its wire code block"
    namespace: Dict[str, Any] = {}
    exec(compile(code.group(1), str(DOC), "exec"), namespace)  # noqa: S102 - our own docs
    wire = namespace["cohere_like_wire"]
    assert isinstance(wire, Wire)
    return wire


def _usage(tokens: Dict[str, int]) -> Usage:
    sent, received = tokens["input_tokens"], tokens["output_tokens"]
    return Usage(sent, received, sent + received)


class CohereLikeBackend:
    """A small sync client for the page's wire: text, streams and the 429."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _post(self, request: ChatRequest, stream: bool) -> Any:
        body = json.dumps(
            {"model": request.model, "stream": stream, "messages": [m.__dict__ for m in request.messages]}
        ).encode()
        call = urllib.request.Request(f"{self.url}/v2/chat", body, {"content-type": "application/json"})
        try:
            return urllib.request.urlopen(call, timeout=5)
        except urllib.error.HTTPError as exc:
            with exc:
                message = json.loads(exc.read()).get("message", "")
                if exc.code == 429:
                    retry = float(exc.headers.get("retry-after") or 0) or None
                    raise LLMError.from_kind("rate_limit", message, retry_after=retry, status=429) from None
                raise LLMError.from_kind("server_error", message, status=exc.code) from None

    def chat(self, request: ChatRequest) -> ChatResponse:
        with self._post(request, stream=False) as response:
            body = json.loads(response.read())
        text = "".join(part["text"] for part in body["message"]["content"])
        return ChatResponse(text, "stop", (), _usage(body["usage"]["tokens"]))

    def chat_stream(self, request: ChatRequest) -> Iterator[StreamChunk]:
        with self._post(request, stream=True) as response:
            data = response.read().decode("utf-8")
        for block in data.split("\n\n"):
            lines = [line[len("data: ") :] for line in block.splitlines() if line.startswith("data: ")]
            if not lines:
                continue
            event = json.loads("\n".join(lines))
            if event["type"] == "content-delta":
                yield StreamChunk(content=event["delta"]["message"]["content"]["text"])
            elif event["type"] == "message-end":
                yield StreamChunk(finish_reason="stop", usage=_usage(event["delta"]["usage"]["tokens"]))


class NameAndReplyOnly(Wire):
    """The least a wire can be: a name, and a reply that knows one scenario."""

    name = "minimal"

    def reply(self, scenario: str, mode: str, request: Any) -> Any:
        return _doc_wire().reply(scenario, mode, request) if scenario == "text" else None


class OwnWireTests(unittest.TestCase):
    def _outcomes(self, wire: Wire) -> Dict[str, str]:
        target = BackendConformanceTarget("own", wire, CohereLikeBackend)
        outcomes: Dict[str, str] = {}
        for case in backend_conformance_cases(target):
            try:
                case.run()
            except unittest.SkipTest as skipped:
                outcomes[case.name] = f"skip: {skipped}"
            except AssertionError as failed:
                outcomes[case.name] = f"FAIL: {failed}"
            else:
                outcomes[case.name] = "pass"
        return outcomes

    def test_the_documented_wire_passes_what_it_scripts_and_skips_the_rest(self) -> None:
        """The page's wire passes text and rate-limit and skips every other case with its reason."""
        outcomes = self._outcomes(_doc_wire())
        for name in ("text/chat", "text/stream", "rate-limit/chat", "rate-limit/stream"):
            self.assertEqual(outcomes.pop(name), "pass", name)
        failed: List[str] = []
        for name, outcome in outcomes.items():
            scenario = name.split("/")[0]
            expected = f"skip: cohere-like has no {scenario} case"
            if scenario == "cancel" and outcome.startswith("skip: cancel applies to async"):
                expected = outcome  # a sync backend is never cancelled, whatever the wire
            if scenario == "reasoning":
                expected = (
                    "skip: cohere-like has no reasoning case (its provider returns no reasoning: give it "
                    "variants_table['reasoning'], each Variant with the reasoning it returns)"
                )
            if scenario == "corrupt-frame":
                expected = "skip: cohere-like has no corrupt-frame case (its format has nothing to corrupt)"
            if scenario in ("slow-first-token", "stall"):
                # Played from the wire's own text reply, held back: the target declares no read_timeout.
                expected = f"skip: {scenario} holds the provider silent" + outcome.partition("silent")[2]
                self.assertIn("declare read_timeout", outcome)
            if scenario in ("tool-result", "parallel-tool-calls", "corrupt-arguments"):
                expected = (
                    f"skip: cohere-like has no {scenario} case (it scripts no multi-turn conversations: "
                    "give it turn_stream, turn_whole and read_history)"
                )
            if outcome != expected:
                failed.append(f"{name}: {outcome}")
        self.assertEqual(failed, [])

    def test_a_name_and_reply_are_enough(self) -> None:
        """A wire with only a name and reply() runs: its title is its name and no request check applies."""
        wire = NameAndReplyOnly()
        self.assertEqual(wire.title, "minimal")
        self.assertEqual(wire.check_request(_FakeRequest(), "m"), [])
        outcomes = self._outcomes(wire)
        self.assertEqual(outcomes["text/chat"], "pass")
        self.assertEqual(outcomes["rate-limit/chat"], "skip: minimal has no rate-limit case")

    def test_an_object_that_is_no_wire_subclass_runs(self) -> None:
        """A plain class with a name and reply() is a wire, and the settings it defines are used."""
        inner = _doc_wire()

        class Plain:
            name = "plain"
            unsupported = {"content-filter": "no safety system here"}

            def reply(self, scenario: str, mode: str, request: Any) -> Any:
                return inner.reply(scenario, mode, request) if scenario in ("text", "rate-limit") else None

        plain = Plain()
        self.assertIsInstance(plain, WireLike)
        target = BackendConformanceTarget("own", plain, CohereLikeBackend)  # type: ignore[arg-type]
        self.assertIsInstance(target.wire, Wire)
        self.assertIs(target.wire.inner, plain)  # type: ignore[attr-defined]
        self.assertEqual(target.wire.unsupported, {"content-filter": "no safety system here"})
        outcomes = self._outcomes(target.wire)
        self.assertEqual(outcomes["text/stream"], "pass")
        self.assertEqual(outcomes["rate-limit/chat"], "pass")
        self.assertEqual(outcomes["tool-call/chat"], "skip: plain has no tool-call case")
        # A setting the object defines is the wire's: its reason skips the case.
        self.assertEqual(outcomes["content-filter/chat"], "skip: no safety system here")

    def test_a_plain_wire_works_in_both_mixins_and_the_loop_target(self) -> None:
        """The test-class mixins and AgentLoopTarget take a WireLike object as well."""
        from conformance import BackendConformanceTestCase
        from conformance.gate import AgentLoopConformanceTestCase, AgentLoopTarget

        class Plain:
            name = "plain"

            def reply(self, scenario: str, mode: str, request: Any) -> Any:
                return None

        class Backend(BackendConformanceTestCase, unittest.TestCase):
            wire = Plain()  # type: ignore[assignment]

            def create_backend(self, url: str) -> Any:
                return CohereLikeBackend(url)

        class Loop(AgentLoopConformanceTestCase, unittest.TestCase):
            wire = Plain()  # type: ignore[assignment]

            def create_loop(self, url: str) -> Any:
                raise AssertionError("never built: the wire scripts no turns")

        self.assertIsInstance(Backend.wire, Wire)
        self.assertIsInstance(Loop.wire, Wire)
        target = AgentLoopTarget("loop", Plain(), lambda url: None)  # type: ignore[arg-type]
        self.assertEqual(target.wire.name, "plain")

    def test_what_is_not_a_wire_is_refused_with_what_it_lacks(self) -> None:
        """A class instead of an instance, no name, or no reply() is refused when the target is made."""

        class NoReply:
            name = "no-reply"

        class NoName:
            def reply(self, scenario: str, mode: str, request: Any) -> Any:
                return None

        table = [
            (NoReply, "got the class NoReply: use NoReply()"),
            (NoReply(), "has no reply() method"),
            (NoName(), "has no name (got None)"),
            (42, "has no name"),
        ]
        for wire, message in table:
            with self.subTest(wire=wire):
                with self.assertRaisesRegex(TargetDefinitionError, re.escape(message)):
                    BackendConformanceTarget("own", wire, CohereLikeBackend)  # type: ignore[arg-type]

    def test_the_page_plain_wire_runs(self) -> None:
        """The page's wire that subclasses nothing runs its text cases as shown."""
        text = DOC.read_text(encoding="utf-8")
        section = text.split("### Without subclassing `Wire`", 1)[1]
        code = re.search(r"```python\n(.*?)```", section, re.S)
        assert code is not None, "docs/own-wire.md lost its plain wire example"
        namespace: Dict[str, Any] = {"cohere_like_wire": _doc_wire()}
        exec(compile(code.group(1), str(DOC), "exec"), namespace)  # noqa: S102 - our own docs
        outcomes = self._outcomes(namespace["PlainWire"]())
        self.assertEqual(outcomes["text/chat"], "pass")
        self.assertEqual(outcomes["text/stream"], "pass")

    def test_a_title_set_in_the_class_stands(self) -> None:
        """A wire's own title is kept, also by a subclass that renames the wire."""

        class Titled(NameAndReplyOnly):
            name = "titled"
            title = "Titled Chat"

        class Renamed(Titled):
            name = "renamed"

        self.assertEqual(Titled().title, "Titled Chat")
        self.assertEqual(Renamed().title, "Titled Chat")

    def test_a_wire_without_reply_says_what_to_write(self) -> None:
        """Calling reply() on a wire that lacks it names the method and what it returns."""

        class Empty(Wire):
            name = "empty"

        with self.assertRaisesRegex(NotImplementedError, r"must implement reply\(scenario, mode, request\)"):
            Empty().reply("text", "chat", _FakeRequest())

    def test_the_encoders_write_what_the_page_shows(self) -> None:
        """The page's encoder examples print the bytes the encoders give."""
        page = DOC.read_text(encoding="utf-8")
        for written in (
            sse({"type": "content-delta"}, event="content-delta"),
            sse("[DONE]"),
            ndjson({"message": {"content": "It is"}, "done": False}),
        ):
            self.assertIn(f"# {written!r}", page)
        headers = {":event-type": "contentBlockDelta", ":message-type": "event"}
        frame = aws_event_stream_message(headers, b"{}")
        self.assertEqual(int.from_bytes(frame[:4], "big"), len(frame))


class _FakeRequest:
    method = "POST"
    path = "/v2/chat"
    json: Any = {}
    body = b"{}"


if __name__ == "__main__":
    unittest.main()
