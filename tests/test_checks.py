"""The checks judge meaning, not spelling: correct but unusual backends pass, and the
schema rule still fails a tool that would take other calls."""

from __future__ import annotations

import base64
import copy
import dataclasses
import http.client
import unittest
from typing import Any, AsyncIterator, Dict, List, Optional
from urllib.parse import urlsplit

from conformance._checks import CHECKS, Problem
from conformance.cases import BackendConformanceTarget, ConformanceCase
from conformance.contract import ChatRequest, Reasoning, StreamChunk, ToolCall
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.reference import REFERENCE_BACKENDS
from conformance.reference.anthropic import AnthropicBackend
from conformance.reference.gemini import GeminiBackend
from conformance.wires import WIRES
from conformance.wires.gemini import gemini_wire


def strict(schema: Dict[str, Any]) -> Dict[str, Any]:
    """The fixture's schema as OpenAI strict function calling wants it, with a $schema too."""
    out = copy.deepcopy(schema)
    out["$schema"] = "http://json-schema.org/draft-07/schema#"
    out["additionalProperties"] = False
    out["required"] = sorted(out["properties"])
    unit = out["properties"]["unit"]
    unit["type"] = ["string", "null"]
    unit["enum"] = [*unit["enum"], None]
    unit["description"] = ""
    return out


def openapi_upper(schema: Dict[str, Any]) -> Dict[str, Any]:
    """The fixture's schema in Gemini's ``Schema`` form: upper-case types, empty descriptions."""
    out: Dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type":
            out[key] = value.upper()
        elif key == "properties":
            out[key] = {name: openapi_upper(prop) for name, prop in value.items()}
        else:
            out[key] = value
    out.setdefault("description", "")
    return out


def without_unit(schema: Dict[str, Any]) -> Dict[str, Any]:
    out = copy.deepcopy(schema)
    del out["properties"]["unit"]
    return out


def rewrite(value: Any, change: Any) -> Any:
    """``value`` with every copy of the fixture's schema put through ``change``."""
    if value == dict(FX.tool_parameters):
        return change(copy.deepcopy(value))
    if isinstance(value, dict):
        return {k: rewrite(v, change) for k, v in value.items()}
    if isinstance(value, list):
        return [rewrite(v, change) for v in value]
    return value


def backend_spelling(wire: str, change: Any, extra: Optional[Dict[str, Any]] = None) -> Any:
    """The wire's reference backend, sending the tool schema as ``change`` spells it."""
    base = REFERENCE_BACKENDS[wire]

    def create(url: str) -> Any:
        backend = base(url, False)
        original = backend.body

        def body(chat: ChatRequest, stream: bool) -> Dict[str, Any]:
            sent: Dict[str, Any] = rewrite(original(chat, stream), change)
            return sent

        backend.body = body
        return backend

    return create


def problems_of(case: ConformanceCase) -> List[str]:
    try:
        case.run()
    except AssertionError as failed:
        return str(failed).splitlines()
    return []


class SchemaSpellingTests(unittest.TestCase):
    def test_a_strict_schema_is_the_same_tool_on_every_wire(self) -> None:
        """additionalProperties false, $schema, nullable optional properties and empty descriptions pass."""
        for wire in WIRES:
            with self.subTest(wire=wire):
                target = BackendConformanceTarget(wire, WIRES[wire], backend_spelling(wire, strict))
                self.assertEqual(problems_of(ConformanceCase(target, "text", "chat")), [])

    def test_gemini_takes_the_upper_case_schema_form(self) -> None:
        """Gemini's OpenAPI-style Schema with STRING/OBJECT and an empty description passes."""
        target = BackendConformanceTarget("g", gemini_wire, backend_spelling("gemini", openapi_upper))
        self.assertEqual(problems_of(ConformanceCase(target, "text", "chat")), [])

    def test_a_schema_that_drops_a_property_still_fails(self) -> None:
        """Leaving out a property is another tool, on every wire, and the message says which."""
        for wire in WIRES:
            with self.subTest(wire=wire):
                target = BackendConformanceTarget(wire, WIRES[wire], backend_spelling(wire, without_unit))
                lines = problems_of(ConformanceCase(target, "text", "chat"))
                self.assertTrue(
                    any("lacks the property ['unit']" in line and "[request]" in line for line in lines),
                    lines,
                )


class SuffixedCallId(GeminiBackend):
    """Adds a thought signature to the id the provider sent, as some libraries do."""

    def tool_call(self, function_call: Any) -> Optional[ToolCall]:
        call = super().tool_call(function_call)
        if call is None:
            return None
        return ToolCall(f"{call.id}|sig=abc", call.name, call.arguments)


class CallIdTests(unittest.TestCase):
    def test_an_id_that_carries_the_providers_passes(self) -> None:
        """A Gemini call id with a suffix the library adds still carries the provider's id."""
        target = BackendConformanceTarget("g", gemini_wire, lambda url: SuffixedCallId(url))
        for mode in ("chat", "stream"):
            with self.subTest(mode=mode):
                self.assertEqual(problems_of(ConformanceCase(target, "tool-call", mode)), [])


class ReencodesSignature(GeminiBackend):
    """Hands thought signatures on URL-safe and unpadded, as an SDK that holds them as bytes may."""

    def signature(self, signature: str, text: str = "") -> Reasoning:
        item = super().signature(signature, text)
        encoded = base64.urlsafe_b64encode(base64.b64decode(item.signature)).decode("ascii").rstrip("=")
        return dataclasses.replace(item, signature=encoded)


def split_items(items: Any) -> Any:
    """Each reasoning item with text as two items, a half of the text each."""
    out = []
    for item in items:
        half = len(item.text) // 2
        if half:
            out += [
                dataclasses.replace(item, text=item.text[:half]),
                dataclasses.replace(item, text=item.text[half:]),
            ]
        else:
            out.append(item)
    return tuple(out)


class YieldsThinkingPieces(AnthropicBackend):
    """Passes a thinking block on as pieces, as a stream that yields per delta does."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        async for chunk in super().chat_stream(chat):
            yield dataclasses.replace(chunk, reasoning=split_items(chunk.reasoning))


class ReasoningTests(unittest.TestCase):
    def test_a_gemini_signature_reencoded_passes(self) -> None:
        """A thought signature re-encoded URL-safe without padding is the same bytes, and passes."""
        target = BackendConformanceTarget("g", gemini_wire, lambda url: ReencodesSignature(url))
        for mode in ("chat", "stream"):
            with self.subTest(mode=mode):
                self.assertEqual(problems_of(ConformanceCase(target, "reasoning", mode)), [])

    def test_reasoning_in_pieces_fails_the_reasoning_check(self) -> None:
        """A thinking block yielded as two items is not the one item sent, and says so."""
        target = BackendConformanceTarget("a", WIRES["anthropic"], lambda url: YieldsThinkingPieces(url))
        lines = problems_of(ConformanceCase(target, "reasoning", "stream"))
        lines = [line for line in lines if line.startswith("  - ")]
        self.assertTrue(lines)
        self.assertTrue(all(line.endswith("[reasoning]") for line in lines), lines)
        self.assertIn("each once and complete", lines[0])


class RootCauseTests(unittest.TestCase):
    def test_a_refused_request_is_reported_alone(self) -> None:
        """An HTTP/1.1-only client against an h2c-only target is told that, and nothing beside it."""

        class Http11Only:
            def __init__(self, url: str) -> None:
                self.url = urlsplit(url)

            def chat(self, request: ChatRequest) -> Any:
                connection = http.client.HTTPConnection(self.url.hostname or "", self.url.port, timeout=5)
                try:
                    connection.request("POST", "/v1/chat/completions", b'{"model": "m"}')
                    return connection.getresponse().read()
                finally:
                    connection.close()

        target = BackendConformanceTarget("t", WIRES["openai-chat"], Http11Only, http2=True)
        lines = problems_of(ConformanceCase(target, "text", "chat"))
        problems = [line for line in lines if line.startswith("  - ")]
        self.assertEqual(len(problems), 1, lines)
        self.assertIn("speaks h2c only", problems[0])
        self.assertTrue(problems[0].endswith("[request]"))
        self.assertNotIn("empty body", "\n".join(lines))
        self.assertNotIn("UTF-8", "\n".join(lines))


class CheckTableTests(unittest.TestCase):
    def test_every_problem_names_its_check(self) -> None:
        """A problem prints with its check id, which the troubleshooting page explains."""
        self.assertEqual(str(Problem("usage", "expected usage")), "expected usage [usage]")
        for check in CHECKS:
            self.assertRegex(check, r"^[a-z]+(-[a-z]+)*$")


if __name__ == "__main__":
    unittest.main()
