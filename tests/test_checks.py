"""The checks judge meaning, not spelling: correct but unusual backends pass, and the
schema rule still fails a tool that would take other calls."""

from __future__ import annotations

import base64
import copy
import dataclasses
import http.client
import pathlib
import re
import unittest
from typing import Any, AsyncIterator, Dict, List, Optional
from unittest import mock
from urllib.parse import urlsplit

from conformance._checks import CALL_ID_SEPARATORS, CHECKS, Problem, Seen, _table, carries_id
from conformance._checks._rule import FINISH, TEXT_FINISH, Rule, rule_of
from conformance._checks._seen import REPLY_SCENARIOS
from conformance._checks.tool_calls import _NO_CALL_TURNS, _OWN_CALL_RULE, TOOL_TURNS
from conformance.cases import BackendConformanceTarget, ConformanceCase
from conformance.contract import ChatRequest, ChatResponse, LLMError, Reasoning, StreamChunk, ToolCall
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.reference import REFERENCE_BACKENDS
from conformance.reference.anthropic import AnthropicBackend
from conformance.reference.gemini import GeminiBackend
from conformance.reference.gemini_vertex import GeminiVertexBackend
from conformance.reference.openai_chat import OpenAIChatBackend
from conformance.scenarios import SCENARIOS
from conformance.wires import WIRES, Variant
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


class KeepsTheCutCallMarked(OpenAIChatBackend):
    """Keeps the call the token limit cut off, its text marked unparsed, as some libraries do."""

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        reply = await super().chat(chat)
        cut = ToolCall("call_cut", "get_weather", {}, unparsed_arguments='{"city": "Par')
        return dataclasses.replace(reply, tool_calls=(cut,))


class UnparsedMarkTests(unittest.TestCase):
    def test_a_call_whose_text_does_not_parse_may_carry_the_mark(self) -> None:
        """A kept cut-off call fails tool-calls, not unparsed-only-broken: its text did not parse."""
        wire = WIRES["openai-chat"]
        target = BackendConformanceTarget("o", wire, lambda url: KeepsTheCutCallMarked(url + "/v1"))
        problems = problems_of(ConformanceCase(target, "truncated-tool-call", "chat"))
        self.assertTrue(any(line.endswith("[tool-calls]") for line in problems), problems)
        self.assertFalse(any("unparsed-only-broken" in line for line in problems), problems)


class CallIdTests(unittest.TestCase):
    def test_an_id_that_carries_the_providers_passes(self) -> None:
        """A Gemini call id with a suffix the library adds still carries the provider's id."""
        target = BackendConformanceTarget("g", gemini_wire, lambda url: SuffixedCallId(url))
        for mode in ("chat", "stream"):
            with self.subTest(mode=mode):
                self.assertEqual(problems_of(ConformanceCase(target, "tool-call", mode)), [])

    def test_an_id_must_begin_with_the_providers_then_a_separator(self) -> None:
        """The provider's id, or it, a separator and more, passes; an id that only contains it fails."""
        for separator in CALL_ID_SEPARATORS:
            with self.subTest(separator=separator):
                self.assertTrue(carries_id(f"call_A{separator}sig", "call_A"))
        self.assertTrue(carries_id("call_A", "call_A"))
        for got in ("call_Acall_B", "xcall_A", "call_AB", "", None, 7):
            with self.subTest(got=got):
                self.assertFalse(carries_id(got, "call_A"))
        self.assertFalse(carries_id("call_Acall_B", "call_B"))


def seen_of(cases: List[ConformanceCase]) -> List[Seen]:
    """What each variant of ``cases`` saw, by running them (a failure is left to other tests)."""
    seen: List[Seen] = []

    def spy(one: Seen) -> List[Problem]:
        seen.append(one)
        return []

    with mock.patch("conformance._checks.run_checks", spy):
        for case in cases:
            try:
                case.run()
            except unittest.SkipTest:
                pass
    return seen


class RetryAfterTests(unittest.TestCase):
    def test_each_variant_says_the_delay_its_reply_carries(self) -> None:
        """On every wire, the delay a variant declares is the one its wire reads from the reply it sends."""
        scenarios = [name for name, row in SCENARIOS.items() if row.error_kind]
        for wire in WIRES.values():
            target = BackendConformanceTarget(
                wire.name, wire, lambda url, w=wire.name: REFERENCE_BACKENDS[w](url, False)
            )
            cases = [ConformanceCase(target, s, m) for s in scenarios for m in SCENARIOS[s].modes]
            for seen in seen_of(cases):
                with self.subTest(wire=wire.name, case=seen.case.name, variant=seen.variant.name):
                    self.assertTrue(seen.replies)
                    self.assertEqual(wire.retry_after_sent(seen.replies[-1]), seen.variant.retry_after)

    def test_gemini_quota_reports_its_retry_info_delay(self) -> None:
        """Gemini's exhausted quota names a delay, which is reported though the error is not retryable."""
        self.assertEqual(gemini_wire.variants("quota", "chat")[0].retry_after, 52758.0)


class OverStrictTests(unittest.TestCase):
    def test_a_throttle_typed_as_one_may_be_a_rate_limit(self) -> None:
        """Bedrock's daily-quota ThrottlingException and Ollama's usage-limit 429 pass as rate limits too."""
        for wire in ("bedrock-converse", "ollama"):
            base = REFERENCE_BACKENDS[wire]

            def create(url: str, base: Any = base) -> Any:
                backend = base(url, False)
                build = backend.build_error

                def as_rate_limit(kind: str, message: str, **kwargs: Any) -> Any:
                    return build("rate_limit" if kind == "quota" else kind, message, **kwargs)

                backend.build_error = as_rate_limit
                return backend

            target = BackendConformanceTarget(wire, WIRES[wire], create)
            for mode in ("chat", "stream"):
                with self.subTest(wire=wire, mode=mode):
                    self.assertEqual(problems_of(ConformanceCase(target, "quota", mode)), [])

    def test_vertexs_quota_passes_read_either_way(self) -> None:
        """Vertex's quota is a 429 RESOURCE_EXHAUSTED that only its words call a quota: a backend that
        reads it as a rate limit passes, and so does one that reads it as a quota."""
        base = REFERENCE_BACKENDS["anthropic-vertex"]

        def create(url: str, as_quota: bool) -> Any:
            backend = base(url, False)
            build = backend.build_error

            def reading(kind: str, message: str, **kwargs: Any) -> Any:
                return build("quota" if as_quota and kind == "rate_limit" else kind, message, **kwargs)

            backend.build_error = reading
            return backend

        for as_quota in (False, True):
            target = BackendConformanceTarget(
                "vertex", WIRES["anthropic-vertex"], lambda url, q=as_quota: create(url, q)
            )
            for mode in ("chat", "stream"):
                with self.subTest(as_quota=as_quota, mode=mode):
                    self.assertEqual(problems_of(ConformanceCase(target, "quota", mode)), [])

    def test_a_stream_that_reported_no_usage_expects_none(self) -> None:
        """Where OpenAI was not asked for usage it sends none: the request fails, and None is right."""
        base = REFERENCE_BACKENDS["openai-chat"]

        def create(url: str) -> Any:
            backend = base(url, False)
            body = backend.body

            def unasked(chat: ChatRequest, stream: bool) -> Dict[str, Any]:
                sent: Dict[str, Any] = body(chat, stream)
                sent.pop("stream_options", None)
                return sent

            backend.body = unasked
            return backend

        target = BackendConformanceTarget("o", WIRES["openai-chat"], create)
        lines = [
            line for line in problems_of(ConformanceCase(target, "text", "stream")) if line.startswith("  - ")
        ]
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("include_usage", lines[0])
        self.assertTrue(lines[0].endswith("[request]"))


class FailsOnNoParts(GeminiBackend):
    """Raises on a MAX_TOKENS turn that returned nothing, as pydantic-ai does: one of two sound readings."""

    def keep_calls(self, calls: List[ToolCall], reason: Optional[str]) -> List[ToolCall]:
        self.limited = reason == "MAX_TOKENS"
        return super().keep_calls(calls, reason)

    async def chat(self, chat: ChatRequest) -> Any:
        response = await super().chat(chat)
        if getattr(self, "limited", False) and not response.content:
            raise LLMError.from_kind("server_error", "the limit came before any answer", provider="gemini")
        return response


class RaisesPlainlyOnNoParts(GeminiBackend):
    """Raises a bare ValueError on the same turn: a failure in no kind of the contract's."""

    async def chat(self, chat: ChatRequest) -> Any:
        response = await super().chat(chat)
        if response.finish_reason == "length" and not response.content:
            raise ValueError("no parts")
        return response


class DropsUndeclaredCalls(GeminiVertexBackend):
    """Drops a call to a function the request never declared: one of two sound readings."""

    def keep_calls(self, calls: List[ToolCall], reason: Optional[str]) -> List[ToolCall]:
        return [] if reason == "UNEXPECTED_TOOL_CALL" else super().keep_calls(calls, reason)


class TwoReadingsTests(unittest.TestCase):
    def test_a_turn_with_no_parts_may_end_as_length_or_fail_in_a_contract_kind(self) -> None:
        """MAX_TOKENS with no parts passes as an empty length turn or an LLMError; a bare ValueError fails."""
        for create in (lambda url: GeminiBackend(url), lambda url: FailsOnNoParts(url)):
            target = BackendConformanceTarget("g", gemini_wire, create)
            self.assertEqual(problems_of(ConformanceCase(target, "truncated-tool-call", "chat")), [])
        target = BackendConformanceTarget("g", gemini_wire, lambda url: RaisesPlainlyOnNoParts(url))
        lines = problems_of(ConformanceCase(target, "truncated-tool-call", "chat"))
        self.assertTrue(
            any("[no-parts]" in line and "one of the contract's kinds" in line for line in lines), lines
        )

    def test_an_undeclared_call_may_be_passed_on_or_dropped_but_never_run(self) -> None:
        """UNEXPECTED_TOOL_CALL passes with the call kept or dropped under finish error, not as tool_calls."""
        from conformance.wires.gemini_vertex import gemini_vertex_wire

        for create in (lambda url: GeminiVertexBackend(url), lambda url: DropsUndeclaredCalls(url)):
            target = BackendConformanceTarget("v", gemini_vertex_wire, create)
            self.assertEqual(problems_of(ConformanceCase(target, "tool-call", "chat")), [])

        class RunsIt(GeminiVertexBackend):
            def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
                return "tool_calls" if calls else super().finish_reason(reason, calls)

        target = BackendConformanceTarget("v", gemini_vertex_wire, lambda url: RunsIt(url))
        lines = problems_of(ConformanceCase(target, "tool-call", "chat"))
        self.assertTrue(any("never declared" in line and "[finish-reason]" in line for line in lines), lines)
        self.assertTrue(any("the backend must report \"error\"" in line for line in lines), lines)


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

    def test_every_reply_scenario_has_a_finish_reason_and_a_rule_for_its_calls(self) -> None:
        """A turn that ends normally is judged on its finish reason and on its calls, by one table each."""
        for scenario in REPLY_SCENARIOS:
            with self.subTest(scenario=scenario):
                self.assertEqual((scenario in FINISH) + (scenario in TEXT_FINISH), 1)
                tables = (TOOL_TURNS, _NO_CALL_TURNS, _OWN_CALL_RULE)
                self.assertEqual(sum(scenario in t for t in tables), 1)

    def test_a_shapes_rule_is_the_variants_where_it_says_else_the_scenarios(self) -> None:
        """rule_of: a variant's own finish reasons, kinds and text win; else its scenario's; a cut's
        kinds default to what any cut allows; the words on the wire pages follow."""
        from conformance.wires._variants import CUT_KINDS, EitherRule

        wire = WIRES["openai-chat"]
        plain = rule_of(wire, "tool-call", Variant("x"))
        self.assertEqual((plain.reply, plain.finish_reasons, plain.error_kinds), (True, ("tool_calls",), ()))
        self.assertEqual(plain.text, wire.texts.get("tool-call"))
        self.assertEqual(plain.describe(), "replies, ending `tool_calls`")
        paused = Variant("p", finish_reasons=("stop", "length"), text="", reports_usage=False)
        own = rule_of(wire, "text", paused)
        self.assertEqual((own.finish_reasons, own.text, own.reports_usage), (("stop", "length"), "", False))
        self.assertEqual(own.describe(), "replies, ending `stop` or `length`; no usage")
        self.assertEqual(rule_of(wire, "stream-cut", Variant("c")).error_kinds, CUT_KINDS)
        self.assertEqual(rule_of(wire, "stream-cut", Variant("c", error_kinds=("server_error",))).error_kinds,
                         ("server_error",))
        quota = rule_of(wire, "quota", Variant("q", error_kinds=("quota", "invalid_request")))
        self.assertEqual((quota.reply, quota.finish_reasons), (False, ()))
        self.assertEqual(quota.describe(), "fails: `quota` or `invalid_request`")
        self.assertEqual(rule_of(wire, "rate-limit", Variant("r")).describe(), "fails: `rate_limit`")
        either = rule_of(wire, "content-filter", Variant(
            "f", either=EitherRule(error_kinds=("invalid_request",), finish_reasons=("content_filter",))
        ))
        self.assertEqual(either.describe(), "replies, ending `content_filter`, or fails: `invalid_request`")
        loose = rule_of(wire, "text", Variant("n", may_fail=True, undeclared_call="web_search"))
        self.assertEqual(
            loose.describe(),
            "replies, ending `stop`; the call to `web_search` passed on or dropped, no tool turn; "
            "or fails with any contract kind",
        )
        self.assertEqual(rule_of(wire, "abort", Variant("")).describe(), "ends as the caller ended it")
        self.assertIsInstance(plain, Rule)

    def test_the_table_takes_every_familys_rows_once_each_in_its_place(self) -> None:
        """The families' rows become one table in the order given; a row without a place, a place
        without a row, an id listed twice or held by two families is refused at import."""

        def check(seen: Seen) -> List[str]:
            return []

        table = _table(("b", "a", "c"), {"a": check, "c": check}, {"b": check})
        self.assertEqual(list(table), ["b", "a", "c"])
        wrong = {
            "no place for ['c']": (("a", "b"), {"a": check, "c": check}, {"b": check}),
            "no row for ['d']": (("a", "b", "d"), {"a": check}, {"b": check}),
            "lists ['a'] more than once": (("a", "a", "b"), {"a": check}, {"b": check}),
            "two families hold a check 'a'": (("a", "b"), {"a": check}, {"a": check, "b": check}),
        }
        for said, (order, *families) in wrong.items():
            with self.subTest(said=said):
                with self.assertRaises(ValueError) as raised:
                    _table(order, *families)
                self.assertIn(said, str(raised.exception))

    def test_the_troubleshooting_page_explains_every_check(self) -> None:
        """Each check id has its row in the table of docs/troubleshooting.md, and no row outlives its id."""
        page = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "troubleshooting.md").read_text(
            "utf-8"
        )
        start = page.index("## The checks")
        rows = re.findall(r"^\| `([a-z-]+)` \|", page[start : page.index("\n## ", start + 1)], re.M)
        self.assertEqual(sorted(rows), sorted(CHECKS))


if __name__ == "__main__":
    unittest.main()
