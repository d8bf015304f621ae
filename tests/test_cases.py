"""Cases for any runner: what they check, how they fail, and that they never hang."""

from __future__ import annotations

import asyncio
import time
import unittest
from typing import Any, Iterator, Set, Tuple

from conformance.cases import (
    ABORT_RAISE_WITHIN,
    BackendConformanceTarget,
    ConformanceCase,
    backend_conformance_cases,
    scenario_reply,
)
from conformance.contract import ChatRequest, ChatResponse, LLMError, StreamChunk
from conformance.errors import TargetDefinitionError
from conformance.reference.azure_openai import AzureOpenAIChatBackend
from conformance.reference.openai_chat import OpenAIChatBackend
from conformance.reference.openai_responses import OpenAIResponsesBackend
from conformance.scenarios import SCENARIOS
from conformance.wires import SOURCE_KINDS, Variant
from conformance.wires._variants import AFTER_FINISH, CLEAN_ENDS, REQUEST_CONDITIONS
from conformance.wires.azure_openai import azure_openai_chat_wire
from conformance.wires.openai_chat import openai_chat_wire
from conformance.wires.openai_responses import openai_responses_wire

from .test_driver import gave_up_after


def reference(url: str) -> OpenAIChatBackend:
    return OpenAIChatBackend(f"{url}/v1")


def target(create: Any = reference, **kwargs: Any) -> BackendConformanceTarget:
    return BackendConformanceTarget("test", openai_chat_wire, create, **kwargs)


def case(scenario: str, mode: str, create: Any = reference, **kwargs: Any) -> ConformanceCase:
    return ConformanceCase(target(create, **kwargs), scenario, mode)


def azure_case(scenario: str, mode: str, **kwargs: Any) -> ConformanceCase:
    """A case on Azure's Chat wire, whose 429 comes in two shapes (with a delay and without)."""
    target = BackendConformanceTarget("test", azure_openai_chat_wire, AzureOpenAIChatBackend, **kwargs)
    return ConformanceCase(target, scenario, mode)


class NotImplementedBackend:
    """Raises NotImplementedError from every method, sync."""

    def chat(self, request: ChatRequest) -> ChatResponse:
        raise NotImplementedError("chat")

    def chat_stream(self, request: ChatRequest) -> Iterator[StreamChunk]:
        raise NotImplementedError("chat_stream")


class AsyncNotImplementedBackend:
    """Raises NotImplementedError from every method, async."""

    async def chat(self, request: ChatRequest) -> ChatResponse:
        raise NotImplementedError("chat")

    async def chat_stream(self, request: ChatRequest) -> Any:
        raise NotImplementedError("chat_stream")
        yield  # pragma: no cover - makes this an async generator


class HangingBackend:
    """Never returns: awaits an event nobody sets."""

    async def chat(self, request: ChatRequest) -> ChatResponse:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def chat_stream(self, request: ChatRequest) -> Any:
        await asyncio.Event().wait()
        yield StreamChunk()


class SyncOverReference:
    """A sync backend that wraps the async reference with asyncio.run, as sync shims do."""

    def __init__(self, url: str) -> None:
        self.inner = OpenAIChatBackend(f"{url}/v1")
        self.closed = False

    def chat(self, request: ChatRequest) -> ChatResponse:
        return asyncio.run(self.inner.chat(request))

    def chat_stream(self, request: ChatRequest) -> Iterator[StreamChunk]:
        loop = asyncio.new_event_loop()
        chunks = self.inner.chat_stream(request)
        try:
            while True:
                try:
                    yield loop.run_until_complete(chunks.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            loop.run_until_complete(chunks.aclose())
            loop.close()

    def close(self) -> None:
        self.closed = True


class CaseListTests(unittest.TestCase):
    def test_one_case_per_scenario_and_mode(self) -> None:
        """Cases cover every scenario in each of its modes, in table order."""
        names = [c.name for c in backend_conformance_cases(target())]
        expected = [f"{s}/{m}" for s, row in SCENARIOS.items() for m in row.modes]
        self.assertEqual(names, expected)
        self.assertNotIn("stream-error/chat", names)

    def test_skip_reasons_come_from_target_then_wire(self) -> None:
        """A skip by scenario, or by scenario and mode, is the case's skip reason."""
        t = target(skip={"content-filter": "no safety system", "abort/stream": "no streaming abort"})
        skips = {c.name: c.skip for c in backend_conformance_cases(t) if c.skip}
        self.assertEqual(
            skips,
            {
                "corrupt-frame/stream": openai_chat_wire.absent("corrupt-frame"),
                "reasoning/chat": openai_chat_wire.absent("reasoning"),
                "reasoning/stream": openai_chat_wire.absent("reasoning"),
                "content-filter/chat": "no safety system",
                "content-filter/stream": "no safety system",
                "abort/stream": "no streaming abort",
                **{
                    f"{s}/{m}": t.skip_reason(s, m)
                    for s in ("slow-first-token", "stall")
                    for m in ("chat", "stream")
                },
            },
        )
        with self.assertRaises(unittest.SkipTest):
            ConformanceCase(t, "abort", "stream").run()

    def test_a_latency_case_without_a_read_timeout_says_what_to_declare(self) -> None:
        """A target that declares no read_timeout gets the latency cases skipped, naming the setting."""
        for scenario in ("slow-first-token", "stall"):
            with self.subTest(scenario=scenario):
                reason = target().skip_reason(scenario, "stream") or ""
                self.assertIn("declare read_timeout", reason)
                self.assertIsNone(target(read_timeout=0.5).skip_reason(scenario, "stream"))

    def test_a_read_timeout_out_of_range_is_refused(self) -> None:
        """A read_timeout of zero, below it, past the bound, or not a number fails at declaration."""
        for bad in (0, -1.0, 31.0, "1", True):
            with self.subTest(read_timeout=bad):
                with self.assertRaisesRegex(TargetDefinitionError, "read_timeout"):
                    target(read_timeout=bad)

    def test_misspelt_skip_key_suggests_the_scenario(self) -> None:
        """An unknown scenario in skip is refused with a did-you-mean."""
        with self.assertRaisesRegex(TargetDefinitionError, "did you mean 'content-filter'"):
            target(skip={"content-filtre": "x"})
        with self.assertRaisesRegex(TargetDefinitionError, "needs a reason"):
            target(skip={"auth": ""})

    def test_target_refuses_a_wire_that_is_not_one(self) -> None:
        """A string instead of a wire is a clear declaration error."""
        with self.assertRaisesRegex(TargetDefinitionError, "wire must be a Wire"):
            BackendConformanceTarget("t", "openai-chat", reference)  # type: ignore[arg-type]


class ReferencePassesTests(unittest.TestCase):
    def test_reference_passes_every_case(self) -> None:
        """The OpenAI Chat reference backend meets every case over HTTP/1.1."""
        for c in backend_conformance_cases(target()):
            with self.subTest(case=c.name):
                c.run()

    def test_a_sync_backend_is_driven_too(self) -> None:
        """A sync backend that runs its own event loop passes the cases it can meet."""
        for scenario in ("text", "tool-call", "rate-limit", "stream-error"):
            for mode in SCENARIOS[scenario].modes:
                with self.subTest(scenario=scenario, mode=mode):
                    case(scenario, mode, SyncOverReference).run()

    def test_cancel_is_skipped_for_a_sync_backend(self) -> None:
        """Task cancellation has no sync twin, so the case says so and skips."""
        for mode in ("chat", "stream"):
            with self.subTest(mode=mode):
                with self.assertRaisesRegex(unittest.SkipTest, "async backends only"):
                    case("cancel", mode, SyncOverReference).run()


#: Variants whose only source is a client's own code or no source at all, each to be
#: replaced by a shape a provider is seen sending, or removed. It must end empty: a
#: variant the fake provider serves rests on the provider's bytes.
AWAITING_A_SOURCE: Set[Tuple[str, str, str]] = set()


class RequestConditionTests(unittest.TestCase):
    """A shape that only a request asking for it gets is played only to such a request."""

    @staticmethod
    def anthropic_case(scenario: str, mode: str, base: Any = None, **attributes: Any) -> ConformanceCase:
        from conformance.reference.anthropic import AnthropicBackend
        from conformance.wires.anthropic import anthropic_wire

        backend = type("Careful", (base or AnthropicBackend,), attributes)
        t = BackendConformanceTarget("careful", anthropic_wire, lambda url: backend(url, api_key="test"))
        return next(c for c in backend_conformance_cases(t) if c.name == f"{scenario}/{mode}")

    def test_a_client_that_never_asks_passes_and_is_told_why_a_shape_was_left_out(self) -> None:
        """A client with no server tool nor fine-grained streaming passes text; corrupt-arguments skips."""
        plain = {"fine_grained_tool_streaming": False}
        for mode in ("chat", "stream"):
            with self.subTest(mode=mode):
                self.anthropic_case("text", mode, **plain).run()
        unasked = "the request did not ask for fine-grained tool streaming"
        with self.assertRaisesRegex(unittest.SkipTest, unasked):
            self.anthropic_case("corrupt-arguments", "stream", **plain).run()

    def test_a_client_that_never_asks_for_thinking_is_not_held_to_it(self) -> None:
        """A client that never sends thinking skips the reasoning case, saying why; one that asks runs it."""
        from conformance.reference.anthropic import AnthropicBackend

        class NeverThinks(AnthropicBackend):
            def body(self, chat: ChatRequest, stream: bool) -> Any:
                out = super().body(chat, stream)
                out.pop("thinking", None)
                return out

        with self.assertRaisesRegex(unittest.SkipTest, "the request did not ask for thinking"):
            self.anthropic_case("reasoning", "chat", NeverThinks).run()
        self.anthropic_case("reasoning", "chat").run()

    def test_a_tool_turn_with_thinking_is_played_only_to_a_client_that_asks(self) -> None:
        """tool-result's reasoning-then-call is left out, with the reason, for a client that never
        sends thinking, and the case passes on its other shapes; one that asks gets it played."""
        from conformance.cases import _Unasked
        from conformance.reference.anthropic import AnthropicBackend
        from conformance.wires._variants import REASONING_THEN_CALL

        class NeverThinks(AnthropicBackend):
            def body(self, chat: ChatRequest, stream: bool) -> Any:
                out = super().body(chat, stream)
                out.pop("thinking", None)
                return out

        plain = self.anthropic_case("tool-result", "chat", NeverThinks)
        shape = next(v for v in plain.variants() if v.name == REASONING_THEN_CALL)
        with self.assertRaisesRegex(_Unasked, "the request did not ask for thinking"):
            plain._run_variant(shape)
        plain.run()
        asks = self.anthropic_case("tool-result", "chat")
        seen = asks._run_variant(shape)
        self.assertEqual([r.kind for r in seen.outcome.earlier_reasoning or ()], ["thinking"])

    def test_reasoning_altered_on_a_tool_turn_is_reported_where_it_was_altered(self) -> None:
        """A signature changed on the way in fails reasoning-exact on the call's turn; the history,
        which sends back what the backend returned, is not blamed for it."""
        import dataclasses

        from conformance.reference.anthropic import AnthropicBackend

        class AltersSignature(AnthropicBackend):
            async def chat(self, chat: ChatRequest) -> ChatResponse:
                response = await super().chat(chat)
                if not response.tool_calls:
                    return response
                edited = tuple(
                    dataclasses.replace(r, signature=r.signature[::-1]) for r in response.reasoning
                )
                return dataclasses.replace(response, reasoning=edited)

        with self.assertRaises(AssertionError) as caught:
            self.anthropic_case("tool-result", "chat", AltersSignature).run()
        message = str(caught.exception)
        self.assertIn("[reasoning-then-call] expected reasoning item 1 (thinking) byte for byte", message)
        self.assertIn("[reasoning-exact]", message)
        self.assertNotIn("[history]", message)

    def test_a_client_that_offers_a_server_tool_is_held_to_pause_turn(self) -> None:
        """pause_turn read as an error passes without a server tool offered, and fails with one."""
        from tests.mutants.anthropic import WEB_SEARCH, PauseTurnAsError

        self.anthropic_case("text", "chat", PauseTurnAsError, server_tools=()).run()
        with self.assertRaisesRegex(AssertionError, "pause-turn"):
            self.anthropic_case("text", "chat", PauseTurnAsError, server_tools=WEB_SEARCH).run()

    def test_a_condition_outside_the_table_is_refused(self) -> None:
        """A variant that names an unknown request condition is refused with the known ones."""
        with self.assertRaisesRegex(ValueError, "server-tool"):
            Variant("x", "a shape", "somewhere", asks="web")


class VariantTests(unittest.TestCase):
    def test_every_variant_has_a_source_and_a_row_on_its_wire_page(self) -> None:
        """Each variant says where it was seen, and its wire page's table lists it there."""
        import pathlib

        from conformance.wires import WIRES
        from conformance.wires.openai_chat import OpenAIChatWire

        docs = pathlib.Path(__file__).resolve().parent.parent / "docs" / "wires"
        # The configured wires' variants too: the compatible servers' shapes are on their wire's page.
        servers = OpenAIChatWire(reasoning_content=True, servers=OpenAIChatWire.SERVERS)
        for wire in (*WIRES.values(), servers):
            page = (docs / f"{wire.name}.md").read_text(encoding="utf-8")
            table = dict(wire.variants_table)
            if wire.reasoning_tool_turns:
                # The tool turns a tool-result case plays first are that scenario's shapes too.
                table["tool-result"] = (*table.get("tool-result", ()), *wire.reasoning_tool_turns)
            for key, variants in table.items():
                for variant in variants:
                    with self.subTest(wire=wire.name, variant=f"{key}:{variant.name}"):
                        self.assertTrue(variant.name and variant.title and variant.source)
                        self.assertIn(f"| `{key}` | `{variant.name}` |", page)
                        asks = f"asks for {REQUEST_CONDITIONS[variant.asks]}" if variant.asks else "any"
                        self.assertIn(f"| `{key}` | `{variant.name}` | {asks} |", page, "its condition")
                        self.assertIn(variant.source, page)
                        lead = f"| `{key}` | `{variant.name}` |"
                        row = next(line for line in page.splitlines() if lead in line)
                        if (wire.name, key, variant.name) in AWAITING_A_SOURCE:
                            self.assertEqual(variant.source_kind, "", "listed as awaiting a source")
                        else:
                            self.assertIn(variant.source_kind, SOURCE_KINDS, "the kind of its source")
                            self.assertIn(f"| {variant.source_kind}: {variant.source} |", row)

    def test_a_source_kind_outside_the_four_is_refused(self) -> None:
        """A variant that calls its source anything but the four kinds is refused with the four named."""
        with self.assertRaisesRegex(ValueError, "capture, issue, docs, provider-source"):
            Variant("x", "a shape", "somewhere", source_kind="client-code")
        self.assertEqual(Variant("x", "a shape", "somewhere").source_kind, "")

    def test_a_case_runs_every_variant(self) -> None:
        """The case runs each variant of its scenario, less those the target skips."""
        every = ["retry-after", "retry-after-aiservices", "no-retry-after", "reset-tokens"]
        self.assertEqual([v.name for v in azure_case("rate-limit", "chat").variants()], every)
        skipped = azure_case("rate-limit", "chat", skip={"rate-limit:no-retry-after": "we always get one"})
        self.assertEqual([v.name for v in skipped.variants()], [n for n in every if n != "no-retry-after"])
        by_mode = azure_case("rate-limit", "stream", skip={"rate-limit/chat:no-retry-after": "chat only"})
        self.assertEqual(len(by_mode.variants()), len(every))
        self.assertEqual([v.name for v in case("text", "chat").variants()], [""])

    def test_skipping_every_variant_skips_the_case(self) -> None:
        """A case whose every variant is skipped is skipped, not passed."""
        skip = {f"rate-limit:{v.name}": "r" for v in azure_openai_chat_wire.variants("rate-limit", "chat")}
        with self.assertRaisesRegex(unittest.SkipTest, "every variant of rate-limit/chat"):
            azure_case("rate-limit", "chat", skip=skip).run()

    def test_a_misspelt_variant_is_refused_with_a_suggestion(self) -> None:
        """An unknown variant in skip fails at class creation with the nearest name."""
        with self.assertRaisesRegex(TargetDefinitionError, "did you mean 'no-retry-after'"):
            target(skip={"rate-limit:no-retry-afte": "typo"})
        with self.assertRaisesRegex(TargetDefinitionError, "its variants: none"):
            target(skip={"text:anything": "no variants"})

    def test_a_rate_limit_without_a_delay_expects_none(self) -> None:
        """The retry-after expectation comes from the variant: a value where sent, None where not."""
        expected = {v.name: v.retry_after for v in azure_openai_chat_wire.variants("rate-limit", "chat")}
        self.assertEqual(
            expected,
            {"retry-after": 7.0, "retry-after-aiservices": 7.0, "no-retry-after": None, "reset-tokens": None},
        )
        azure_case("rate-limit", "chat").run()
        azure_case("rate-limit", "stream").run()
        # api.openai.com's own 429 names its delay in the message only: none is expected.
        self.assertEqual([v.retry_after for v in openai_chat_wire.variants("rate-limit", "chat")], [None])
        case("rate-limit", "chat").run()


#: The wires whose context overflow only a message tells from any refused request: a bad
#: request is a fair reading there. Elsewhere a field says it (OpenAI's code).
OVERFLOW_IN_MESSAGE_ONLY = {
    "anthropic",
    "anthropic-vertex",
    "gemini",
    "gemini-vertex",
    "ollama",
    "bedrock-converse",
    "bedrock-invoke",
    "cohere",
}


def reads_as_bad_request(wire: str, kind: str) -> Any:
    """The create_backend of ``wire``'s reference backend, reporting every error of ``kind`` as
    ``invalid_request``: what the status alone says."""
    from conformance.reference import REFERENCE_BACKENDS

    def create(url: str) -> Any:
        backend = REFERENCE_BACKENDS[wire](url, False)

        class ReadsAsBadRequest(type(backend)):  # type: ignore[misc]
            def build_error(self, found: str, message: str, **kwargs: Any) -> LLMError:
                error: LLMError = super().build_error(
                    "invalid_request" if found == kind else found, message, **kwargs
                )
                return error

        backend.__class__ = ReadsAsBadRequest
        return backend

    return create


class BadRequestReadingTests(unittest.TestCase):
    def test_a_plain_400_may_read_as_a_bad_request_where_only_its_message_says_more(self) -> None:
        """A context overflow (or Anthropic's quota 400) read as invalid_request passes where only its
        message names it, and fails where a field does."""
        from conformance.wires import WIRES

        for name, wire in WIRES.items():
            create = reads_as_bad_request(name, "context_overflow")
            for mode in ("chat", "stream"):
                with self.subTest(wire=name, mode=mode):
                    shapes = wire.variants("context-overflow", mode)
                    kinds = {k for v in shapes for k in v.accepted_kinds("context_overflow")}
                    target = BackendConformanceTarget(name, wire, create)
                    run = ConformanceCase(target, "context-overflow", mode).run
                    if name in OVERFLOW_IN_MESSAGE_ONLY:
                        self.assertEqual(kinds, {"context_overflow", "invalid_request"})
                        run()
                    else:
                        self.assertNotIn("invalid_request", kinds)
                        with self.assertRaisesRegex(AssertionError, "error-kind"):
                            run()
        target = BackendConformanceTarget("a", WIRES["anthropic"], reads_as_bad_request("anthropic", "quota"))
        with self.assertRaises(AssertionError) as failed:
            ConformanceCase(target, "quota", "chat").run()
        # The 400s pass as bad requests; only the 402 and the 429s, whose bytes say more, fail.
        self.assertNotIn("[credit-balance-400]", str(failed.exception))
        self.assertNotIn("[spend-limit-400]", str(failed.exception))
        self.assertIn("[billing-402]", str(failed.exception))


class FailureTests(unittest.TestCase):
    def test_not_implemented_fails_every_case(self) -> None:
        """A backend that raises NotImplementedError everywhere fails every case it gets."""
        for create in (lambda url: NotImplementedBackend(), lambda url: AsyncNotImplementedBackend()):
            for c in backend_conformance_cases(target(create)):
                if c.scenario == "cancel" and isinstance(create("x"), NotImplementedBackend):
                    continue
                with self.subTest(case=c.name, backend=type(create("x")).__name__):
                    with self.assertRaises(AssertionError) as failed:
                        c.run()
                    self.assertIn("NotImplementedError", str(failed.exception))

    def test_a_hanging_backend_fails_within_the_bound(self) -> None:
        """A backend that never finishes is failed after the timeout, not waited for."""
        started = time.monotonic()
        for mode in ("chat", "stream"):
            with self.subTest(mode=mode):
                began = time.monotonic()
                with self.assertRaises(AssertionError) as failed:
                    case("text", mode, lambda url: HangingBackend(), timeout=0.3).run()
                gave_up_after(self, str(failed.exception), 0.3, began)
        self.assertLess(time.monotonic() - started, 10)

    def test_failure_message_says_expected_got_and_hint(self) -> None:
        """The message names the wire, mode, scenario, the problem, a hint and the requests."""
        with self.assertRaises(AssertionError) as failed:
            case("text", "chat", lambda url: NotImplementedBackend()).run()
        message = str(failed.exception)
        self.assertTrue(message.startswith("openai-chat/chat text: the backend must return the fixture text"))
        self.assertIn("expected a reply, got NotImplementedError('chat')", message)
        self.assertIn("hint: ", message)
        self.assertIn("requests seen: none", message)

    def test_missing_header_is_named(self) -> None:
        """A header the target declares but the backend does not send fails the case."""
        with self.assertRaisesRegex(AssertionError, "expected header x-gateway-key: k on POST"):
            case("text", "chat", headers={"x-gateway-key": "k"}).run()

    def test_every_failing_variant_is_listed_with_its_source(self) -> None:
        """A backend that misses one shape fails the case once, naming that variant and where it was seen."""

        class OverloadByMessageOnly(OpenAIResponsesBackend):
            def error_kind(self, status: Any, error: Any) -> str:
                kind = super().error_kind(status, error)
                return "server_error" if kind == "overloaded" and error.get("code") is not None else kind

        create = lambda url: OverloadByMessageOnly(f"{url}/v1")  # noqa: E731
        target = BackendConformanceTarget("test", openai_responses_wire, create)
        with self.assertRaises(AssertionError) as failed:
            ConformanceCase(target, "stream-error", "stream").run()
        message = str(failed.exception)
        self.assertIn("1 of 2 variants failed", message)
        self.assertIn(
            "stream-error/stream [openai-responses: in-stream service_unavailable_error / "
            "server_is_overloaded, then response.failed (seen from the ChatGPT/Codex Responses backend)]",
            message,
        )
        self.assertIn("seen in anomalyco/opencode#25730", message)
        self.assertRegex(message, r"  - \[service-unavailable\] expected an error .* \[error-kind\]\n")
        self.assertNotIn("[server-error]", message)

    def test_a_server_error_only_its_message_calls_an_overload_may_be_either(self) -> None:
        """In-stream server_error with a null code passes as overloaded or as server_error, and
        any other kind fails with both named."""

        class OverloadByCodeOnly(OpenAIChatBackend):
            def error_kind(self, status: Any, error: Any) -> str:
                kind = super().error_kind(status, error)
                return "server_error" if kind == "overloaded" and error.get("code") is None else kind

        class ServerErrorAsAuth(OpenAIChatBackend):
            def error_kind(self, status: Any, error: Any) -> str:
                kind = super().error_kind(status, error)
                return "auth" if error.get("type") == "server_error" else kind

        case("stream-error", "stream", lambda url: OverloadByCodeOnly(f"{url}/v1")).run()
        case("overloaded", "chat", lambda url: OverloadByCodeOnly(f"{url}/v1")).run()
        with self.assertRaises(AssertionError) as failed:
            case("stream-error", "stream", lambda url: ServerErrorAsAuth(f"{url}/v1")).run()
        message = str(failed.exception)
        self.assertIn("[openai-chat: in-stream server_error, code null, overloaded in the message]", message)
        self.assertIn("{'kind': 'overloaded', 'code': 'LLM_OVERLOADED', 'retryable': True} or ", message)
        self.assertIn("{'kind': 'server_error', 'code': 'LLM_SERVER_ERROR', 'retryable': True}", message)
        self.assertIn("its message is no contract", message)

    def test_a_400_only_its_message_calls_a_quota_may_be_a_bad_request(self) -> None:
        """Anthropic's quota 400s pass as quota or as a non-retryable invalid_request; a retryable
        kind fails with both accepted readings named."""
        from conformance.reference.anthropic import AnthropicBackend
        from conformance.wires.anthropic import anthropic_wire

        class ByTheBytes(AnthropicBackend):
            def error_kind(self, status: Any, error: Any) -> str:
                kind = super().error_kind(status, error)
                return "invalid_request" if status == 400 and kind == "quota" else kind

        class AsServerError(AnthropicBackend):
            def error_kind(self, status: Any, error: Any) -> str:
                kind = super().error_kind(status, error)
                return "server_error" if status == 400 and kind == "quota" else kind

        def quota(create: Any, mode: str) -> ConformanceCase:
            return ConformanceCase(BackendConformanceTarget("test", anthropic_wire, create), "quota", mode)

        for mode in ("chat", "stream"):
            with self.subTest(mode=mode):
                quota(AnthropicBackend, mode).run()
                quota(ByTheBytes, mode).run()
                with self.assertRaises(AssertionError) as failed:
                    quota(AsServerError, mode).run()
                message = str(failed.exception)
                self.assertIn("2 of 5 variants failed", message)
                quota_row = "{'kind': 'quota', 'code': 'LLM_QUOTA_EXCEEDED', 'retryable': False}"
                self.assertIn(f"{quota_row} or ", message)
                self.assertIn(
                    "{'kind': 'invalid_request', 'code': 'LLM_INVALID_REQUEST', 'retryable': False}", message
                )

    def test_failure_message_quotes_the_last_events_sent(self) -> None:
        """A failed case shows the raw events the provider sent to the generation request."""
        with self.assertRaises(AssertionError) as failed:
            case("text", "stream", headers={"x-gateway-key": "k"}).run()
        message = str(failed.exception)
        self.assertIn("last events sent to POST /v1/chat/completions", message)
        self.assertIn("> #", message)
        self.assertIn("[DONE]", message)

    def test_abort_bound_is_half_a_second(self) -> None:
        """The abort bound is the one the contract states."""
        self.assertEqual(ABORT_RAISE_WITHIN, 0.5)


class OverloadOnCut(OpenAIChatBackend):
    """Calls a cut connection an overload: as defensible as a server_error."""

    def cut_error(self, error: Any) -> BaseException:
        return LLMError.from_kind("overloaded", f"cut: {error}", provider="openai")


#: What ends a turn on each wire, as the bytes spell it.
TERMINAL_MARKERS = {
    "openai-chat": b"data: [DONE]",
    "openai-responses": b"response.completed",
    "azure-openai-chat": b"data: [DONE]",
    "azure-openai-responses": b"response.completed",
    "anthropic": b"message_stop",
    "anthropic-vertex": b"message_stop",
    "gemini": b"finishReason",
    "gemini-vertex": b"finishReason",
    "ollama": b'"done":true',
    "bedrock-converse": b"metadata",
    "bedrock-invoke": b"message_stop",
    "cohere": b"message-end",
}
#: The finish reason of a tool turn, on each wire that sends it before its terminal event:
#: where a stream can be cut after the one and before the other.
FINISH_MARKERS = {
    "openai-chat": b'"finish_reason":"tool_calls"',
    "azure-openai-chat": b'"finish_reason":"tool_calls"',
    "anthropic": b'"stop_reason":"tool_use"',
    "anthropic-vertex": b'"stop_reason":"tool_use"',
    "bedrock-converse": b"messageStop",
    "bedrock-invoke": b"message_delta",
}


class StreamCutTests(unittest.TestCase):
    def test_every_wire_cuts_before_its_terminal_event(self) -> None:
        """Each stream-cut reply ends cleanly, short of its body or of every complete terminal event."""
        import json
        from urllib.parse import urlsplit

        from conformance.fixture import conformance_request
        from conformance.provider import JsonReply, RecordedRequest, StreamReply
        from conformance.reference import REFERENCE_BACKENDS
        from conformance.wires import WIRES

        for name, wire in WIRES.items():
            backend = REFERENCE_BACKENDS[name]("http://127.0.0.1:1", False)
            for mode in ("chat", "stream"):
                request = conformance_request("conformance-model")
                url = urlsplit(backend.url(request, mode == "stream"))
                body = json.dumps(backend.body(request, mode == "stream")).encode()
                recorded = RecordedRequest("POST", url.path, url.query, {}, body, "HTTP/1.1")
                for variant in wire.variants("stream-cut", mode):
                    with self.subTest(wire=name, mode=mode, variant=variant.name):
                        reply = scenario_reply(wire, "stream-cut", mode, recorded, variant.name)
                        cut = CLEAN_ENDS.get(variant.name, variant.name)
                        if cut != variant.name:
                            # Ended properly: the bytes of the cut it names, then a proper end.
                            self.assertEqual(getattr(reply, "end", None), "complete")
                            played = scenario_reply(wire, "stream-cut", mode, recorded, cut)
                            assert isinstance(reply, StreamReply) and isinstance(played, StreamReply)
                            self.assertEqual(reply.chunks, played.chunks)
                            continue
                        self.assertEqual(getattr(reply, "end", None), "close")
                        if isinstance(reply, JsonReply):
                            whole = reply.encoded()
                            sent = reply.sent_body(whole)
                            self.assertLess(len(sent), len(whole))
                            with self.assertRaises(ValueError):
                                json.loads(sent)
                            continue
                        assert isinstance(reply, StreamReply)
                        data = b"".join(reply.chunks)
                        # Only the events sent whole count: a half event may spell the marker.
                        whole_events, cut_inside = self.whole_events(name, data)
                        self.assertNotIn(TERMINAL_MARKERS[name], whole_events)
                        self.assertEqual(cut_inside, variant.name not in ("between-events", AFTER_FINISH))
                        if variant.name == AFTER_FINISH:
                            self.assertIn(FINISH_MARKERS[name], whole_events)

    def test_a_cut_after_the_finish_reason_is_played_where_the_stream_has_room_for_one(self) -> None:
        """The cut after the finish reason runs on each wire whose finish reason precedes its
        terminal event, and on no wire whose finish reason comes on that event."""
        from conformance.wires import WIRES

        cuts = {name: [v.name for v in wire.variants("stream-cut", "stream")] for name, wire in WIRES.items()}
        played = {name for name, names in cuts.items() if AFTER_FINISH in names}
        self.assertEqual(played, set(FINISH_MARKERS))
        for name in WIRES:
            with self.subTest(wire=name):
                self.assertNotIn(AFTER_FINISH, {v.name for v in WIRES[name].variants("stream-cut", "chat")})
                # Each cut between events is played ended properly too, on every wire.
                clean = {clean for clean, cut in CLEAN_ENDS.items() if cut in cuts[name]}
                self.assertEqual(clean, {c for c in CLEAN_ENDS if c in cuts[name]})
                self.assertIn("clean-end", clean)

    def test_a_clean_end_asked_for_a_whole_reply_is_the_cut_body_framed_by_its_own_length(self) -> None:
        """A stream-mode clean end whose request asks for a whole reply gets the cut body, whole
        by its own content-length: no transport error, only its broken JSON."""
        import json

        from conformance.provider import JsonReply, RecordedRequest
        from conformance.wires import openai_chat_wire

        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
        request = RecordedRequest("POST", "/v1/chat/completions", "", {}, body, "HTTP/1.1")
        cut = scenario_reply(openai_chat_wire, "stream-cut", "stream", request, "between-events")
        clean = scenario_reply(openai_chat_wire, "stream-cut", "stream", request, "clean-end")
        assert isinstance(cut, JsonReply) and isinstance(clean, JsonReply)
        self.assertEqual((cut.end, clean.end, clean.cut_at), ("close", "complete", None))
        self.assertEqual(clean.encoded(), cut.sent_body(cut.encoded()))
        with self.assertRaises(ValueError):
            json.loads(clean.encoded())

    @staticmethod
    def whole_events(wire: str, data: bytes) -> Tuple[bytes, bool]:
        """The bytes of the events sent whole, and whether half an event came after them."""
        if wire in ("bedrock-converse", "bedrock-invoke"):
            import base64
            import json

            from conformance.reference._decoders import EventStreamDecoder, EventStreamError

            def name(frame: Any) -> bytes:
                if frame.headers.get(":event-type") != "chunk":
                    return str(frame.headers.get(":event-type")).encode()
                # InvokeModel's chunk carries one Claude event, base64 in its "bytes".
                return str(json.loads(base64.b64decode(json.loads(frame.payload)["bytes"]))["type"]).encode()

            decoder = EventStreamDecoder()
            names = b" ".join(name(m) for m in decoder.feed(data))
            try:
                decoder.close()
            except EventStreamError:
                return names, True
            return names, False
        end = max(data.rfind(sep) + len(sep) for sep in (b"\n\n", b"\r\n\r\n", b"\n"))
        return data[:end], end < len(data)

    def test_an_overloaded_cut_passes_too(self) -> None:
        """A backend that calls the cut an overload passes: the bytes cannot tell it from a server error."""
        for mode in ("chat", "stream"):
            with self.subTest(mode=mode):
                case("stream-cut", mode, lambda url: OverloadOnCut(f"{url}/v1")).run()

    def test_a_cut_takes_the_kinds_its_variant_names(self) -> None:
        """A cut shape that names its kinds is judged by them; one naming none, by the two any cut allows."""
        import dataclasses

        from conformance.wires.openai_chat import OpenAIChatWire

        def with_kinds(kinds: Tuple[str, ...]) -> OpenAIChatWire:
            shapes = OpenAIChatWire.variants_table["stream-cut/chat"]
            table = {
                **OpenAIChatWire.variants_table,
                "stream-cut/chat": tuple(dataclasses.replace(v, error_kinds=kinds) for v in shapes),
            }
            return type("CutKinds", (OpenAIChatWire,), {"variants_table": table})()  # type: ignore[no-any-return]

        def overload(url: str) -> OverloadOnCut:
            return OverloadOnCut(f"{url}/v1")

        narrowed = BackendConformanceTarget("n", with_kinds(("server_error",)), overload)
        with self.assertRaisesRegex(AssertionError, r"of kind 'server_error' \(LLM_SERVER_ERROR\), got"):
            ConformanceCase(narrowed, "stream-cut", "chat").run()
        ConformanceCase(BackendConformanceTarget("d", with_kinds(()), overload), "stream-cut", "chat").run()


class ParallelCallsTests(unittest.TestCase):
    def test_parallel_calls_stream_one_call_after_the_other(self) -> None:
        """On every wire, each parallel call's argument events all come before the next call's first."""
        import json
        from unittest import mock
        from urllib.parse import urlsplit

        from conformance import _multiturn
        from conformance.fixture import conformance_request
        from conformance.provider import RecordedRequest
        from conformance.reference import REFERENCE_BACKENDS
        from conformance.wires import WIRES

        for name, wire in WIRES.items():
            if not wire.scripts_turns():
                continue
            backend = REFERENCE_BACKENDS[name]("http://127.0.0.1:1", False)
            request = conformance_request("conformance-model")
            url = urlsplit(backend.url(request, True))
            body = json.dumps(backend.body(request, True)).encode()
            recorded = RecordedRequest("POST", url.path, url.query, {}, body, "HTTP/1.1")
            with self.subTest(wire=name), mock.patch.object(
                _multiturn, "play_turn", wraps=_multiturn.play_turn
            ) as played:
                self.assertIsNotNone(scenario_reply(wire, "parallel-tool-calls", "stream", recorded, ""))
                turn = played.call_args.args[1]
                events = wire.turn_stream(turn, recorded)
                assert events is not None
                spans = [events.arguments[index] for index in range(len(turn.calls))]
                self.assertEqual(len(spans), 2)
                self.assertGreater(spans[1][0], spans[0][1], f"{name}: the calls' fragments alternate")


if __name__ == "__main__":
    unittest.main()
