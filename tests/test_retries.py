"""A target that says it retries: the provider relents, the reference retry layer passes, and the
layer's own rules (its delays, when it gives up) hold."""

from __future__ import annotations

import asyncio
import unittest
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, List, Tuple

from conformance import BackendConformanceTestCase
from conformance._checks.retries import (
    PERMANENT,
    RELENTS,
    RETRY_FLOOR,
    RETRY_GROWTH,
    RETRY_GROWTH_SLACK,
)
from conformance._loops import kept_loops
from conformance._targets import outcome, reference_targets
from conformance.cases import BackendConformanceTarget, ConformanceCase, backend_conformance_cases
from conformance.contract import ChatRequest, LLMError, StreamChunk
from conformance.errors import TargetDefinitionError
from conformance.reference import REFERENCE_BACKENDS
from conformance.reference.retrying import RetryingBackend
from conformance.wires import WIRES, openai_chat_wire

#: The cases a retry layer changes: the failures that relent, those that never do, and the
#: plain answer (one request still).
JUDGED = {*RELENTS, *PERMANENT, "text", "stream-error"}


def _error(kind: str, retryable: bool, retry_after: Any = None) -> LLMError:
    return LLMError("failed", kind=kind, code="x", retryable=retryable, retry_after=retry_after)


class _Failing:
    """A backend that fails with ``errors`` in turn, then answers; it counts its calls."""

    def __init__(self, errors: List[LLMError], yield_first: bool = False) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.yield_first = yield_first

    async def chat(self, request: ChatRequest) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "answer"

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.calls += 1
        if self.yield_first:
            yield StreamChunk(content="partial")
        if self.errors:
            raise self.errors.pop(0)
        yield StreamChunk(content="answer")

    async def aclose(self) -> None:
        pass


class RetryingBackendTests(unittest.TestCase):
    def test_delay_is_the_providers_or_a_doubling_backoff_whichever_is_longer(self) -> None:
        """The wait is at least retry_after, and at least a backoff that doubles from the first."""
        layer = RetryingBackend(_Failing([]), backoff=0.05, longest=2.0)
        cases = [((None, 1), 0.05), ((None, 3), 0.2), ((0.1, 1), 0.1), ((0.01, 2), 0.1), ((None, 9), 2.0)]
        for (asked, attempt), expected in cases:
            with self.subTest(asked=asked, attempt=attempt):
                self.assertAlmostEqual(layer.delay(_error("rate_limit", True, asked), attempt), expected)
        self.assertGreater(layer.delay(_error("overloaded", True), 1), RETRY_FLOOR)

    def test_retries_what_can_come_back_and_raises_what_cannot(self) -> None:
        """A retryable failure is asked again until the answer; a quota is raised at once."""
        backend = _Failing([_error("rate_limit", True, 0.01), _error("overloaded", True)])
        layer = RetryingBackend(backend, backoff=0.01)
        self.assertEqual(asyncio.run(layer.chat(ChatRequest(model="m", messages=()))), "answer")
        self.assertEqual(backend.calls, 3)
        quota = _Failing([_error("quota", False)])
        with self.assertRaises(LLMError):
            asyncio.run(RetryingBackend(quota, backoff=0.01).chat(ChatRequest(model="m", messages=())))
        self.assertEqual(quota.calls, 1)

    def test_gives_up_after_its_attempts_or_a_delay_longer_than_it_waits(self) -> None:
        """The last failure is raised once the attempts run out, or where the provider asks too long."""
        backend = _Failing([_error("overloaded", True)] * 5)
        with self.assertRaises(LLMError):
            retrying = RetryingBackend(backend, attempts=2, backoff=0.01)
            asyncio.run(retrying.chat(ChatRequest(model="m", messages=())))
        self.assertEqual(backend.calls, 2)
        slow = _Failing([_error("rate_limit", True, 60.0)])
        with self.assertRaises(LLMError):
            retrying = RetryingBackend(slow, backoff=0.01, longest=1.0)
            asyncio.run(retrying.chat(ChatRequest(model="m", messages=())))
        self.assertEqual(slow.calls, 1)

    def test_a_stream_is_retried_only_while_it_has_yielded_nothing(self) -> None:
        """A stream failing before its first chunk starts again; after it, the failure is raised."""

        async def drain(layer: RetryingBackend) -> List[str]:
            return [c.content async for c in layer.chat_stream(ChatRequest(model="m", messages=()))]

        early = _Failing([_error("server_error", True)])
        self.assertEqual(asyncio.run(drain(RetryingBackend(early, backoff=0.01))), ["answer"])
        late = _Failing([_error("server_error", True)], yield_first=True)
        with self.assertRaises(LLMError):
            asyncio.run(drain(RetryingBackend(late, backoff=0.01)))
        self.assertEqual(late.calls, 1)

    def test_bad_settings_are_refused(self) -> None:
        """No attempts, or a backoff of nothing, is refused at once."""
        for options in ({"attempts": 0}, {"backoff": 0.0}, {"backoff": 3.0, "longest": 1.0}):
            with self.subTest(**options), self.assertRaises(ValueError):
                RetryingBackend(_Failing([]), **options)


class SettingTests(unittest.TestCase):
    def test_retries_must_be_a_bool(self) -> None:
        """A target whose retries is not True or False is refused, saying what it takes."""
        with self.assertRaisesRegex(TargetDefinitionError, "retries must be True"):
            BackendConformanceTarget("t", openai_chat_wire, lambda url: None, retries="yes")  # type: ignore[arg-type]

    def test_the_class_attribute_reaches_the_target(self) -> None:
        """retries = True on a test class is the target's setting."""

        class Retrying(BackendConformanceTestCase):
            wire = openai_chat_wire
            retries = True

        self.assertTrue(Retrying().conformance_target().retries)

    def test_without_the_setting_a_retry_still_fails_no_retry(self) -> None:
        """A retrying backend on a target that does not say so: the provider never relents, no-retry fails."""
        target = BackendConformanceTarget(
            "unsaid",
            WIRES["anthropic"],
            lambda url: RetryingBackend(REFERENCE_BACKENDS["anthropic"](url, False), backoff=0.01),
        )
        status, detail = outcome(ConformanceCase(target, "overloaded", "chat"))
        self.assertEqual(status, "FAIL", detail)
        self.assertIn("[no-retry]", detail)
        self.assertIn("retries = True", detail)


class MessageTests(unittest.TestCase):
    def test_a_wait_too_short_is_named_with_the_request_times_and_the_delay_asked(self) -> None:
        """retry-wait's message names when each request came and the delay the 429 asked for."""
        from .mutants.retries import IgnoresRetryAfter

        target = BackendConformanceTarget(
            "ignores retry-after",
            WIRES["anthropic"],
            lambda url: IgnoresRetryAfter(REFERENCE_BACKENDS["anthropic"](url, False)),
            retries=True,
        )
        status, detail = outcome(ConformanceCase(target, "rate-limit", "chat"))
        self.assertEqual(status, "FAIL", detail)
        self.assertRegex(detail, r"requests at \+0 ms, \+\d+ ms, \+\d+ ms\)")
        self.assertIn("which asked for a retry delay of 200 ms", detail)
        self.assertIn("the provider fails twice, then answers", detail)

    def test_a_wait_that_does_not_grow_is_named_with_both_waits_and_the_bound(self) -> None:
        """retry-growth's message names the two waits, the request times and the least it wanted."""
        from .mutants.retries import ConstantBackoff

        target = BackendConformanceTarget(
            "constant backoff",
            WIRES["openai-chat"],
            lambda url: ConstantBackoff(REFERENCE_BACKENDS["openai-chat"](url, False)),
            retries=True,
            timeout=12.0,  # two waits of four seconds
        )
        status, detail = outcome(ConformanceCase(target, "rate-limit", "chat"))
        self.assertEqual(status, "FAIL", detail)
        self.assertRegex(detail, r"request 3 came \d+ ms after the failure answering request 2, where the")
        least = f"at least {RETRY_GROWTH:g} times the wait before less {1000 * RETRY_GROWTH_SLACK:.0f} ms"
        self.assertIn(least, detail)
        self.assertIn("[retry-growth]", detail)


class _Hangs:
    """A backend that sends the request, then never returns: a retry layer waiting forever."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    async def chat(self, request: ChatRequest) -> Any:
        try:
            await self.backend.chat(request)
        except LLMError:
            await asyncio.sleep(3600)

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        await self.chat(request)
        yield StreamChunk(content="never")

    async def aclose(self) -> None:
        await self.backend.aclose()


class _NeverAsks:
    """A backend that waits before its first request, forever."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    async def chat(self, request: ChatRequest) -> Any:
        await asyncio.sleep(3600)

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        await asyncio.sleep(3600)
        yield StreamChunk(content="never")

    async def aclose(self) -> None:
        await self.backend.aclose()


class LongRetryAfterTests(unittest.TestCase):
    """A spend limit sent as a 429 rate_limit_error with a retry-after of minutes reads as a rate
    limit too: a layer still waiting it out when the case ends is not failed for that alone."""

    def _case(
        self, scenario: str, make: Any, retries: bool, only: str = "", wire_name: str = "anthropic"
    ) -> ConformanceCase:
        wire = WIRES[wire_name]
        skip = {f"{scenario}:{v.name}": "another variant" for v in wire.variants(scenario) if v.name != only}
        target = BackendConformanceTarget(
            "long wait",
            wire,
            lambda url: make(REFERENCE_BACKENDS[wire_name](url, False)),
            retries=retries,
            timeout=1.0,
            skip=skip if only else {},
        )
        return ConformanceCase(target, scenario, "chat")

    def test_a_layer_obeying_a_retry_after_longer_than_the_case_passes(self) -> None:
        """The reference layer told to wait up to 1000 s waits the 900 s asked: finished says nothing."""
        case = self._case(
            "quota", lambda b: RetryingBackend(b, longest=1000.0), True, only="subscription-spend-429"
        )
        status, detail = outcome(case)
        self.assertEqual(status, "pass", detail)

    def test_without_the_retries_setting_the_same_wait_fails_finished(self) -> None:
        """A target that does not say it retries has no wait to wait out: still running fails finished."""
        case = self._case(
            "quota", lambda b: RetryingBackend(b, longest=1000.0), False, only="subscription-spend-429"
        )
        status, detail = outcome(case)
        self.assertEqual(status, "FAIL", detail)
        self.assertIn("[finished]", detail)

    def test_a_layer_still_running_past_a_short_delay_fails_finished(self) -> None:
        """Where the failure asked for less than the case lasted (a 200 ms retry-after), still
        running at the end is a hang: finished names it, with retries on."""
        status, detail = outcome(self._case("rate-limit", _Hangs, True))
        self.assertEqual(status, "FAIL", detail)
        self.assertIn("[finished]", detail)

    def test_a_layer_that_never_asks_fails_finished(self) -> None:
        """No request, so no delay asked: still running at the end fails finished, with retries on."""
        status, detail = outcome(self._case("quota", _NeverAsks, True, only="subscription-spend-429"))
        self.assertEqual(status, "FAIL", detail)
        self.assertIn("[finished]", detail)

    def test_a_wait_after_a_failure_that_reads_only_as_a_quota_fails_finished(self) -> None:
        """Gemini's per-day quota asks for a delay of hours (RetryInfo) but reads only as a quota,
        which is never retried: a layer still waiting at the end fails finished."""
        case = self._case("quota", _Hangs, True, wire_name="gemini")
        self.assertGreater(case.target.wire.variants("quota")[0].retry_after or 0.0, 3600.0)
        status, detail = outcome(case)
        self.assertEqual(status, "FAIL", detail)
        self.assertIn("[finished]", detail)


def _run(case: ConformanceCase) -> Tuple[str, str, str]:
    status, detail = outcome(case)
    return f"{case.target.name} {case.name}", status, detail


class ReferenceWithRetriesTests(unittest.TestCase):
    def test_the_reference_layer_passes_every_retry_case_on_every_wire_and_transport(self) -> None:
        """Each wire's reference backend in the retry layer passes the cases retries change, over
        HTTP/1.1 and h2c."""
        cases = [
            case
            for _, target in reference_targets(None, ("h1", "h2c"), retries=True)
            for case in backend_conformance_cases(target)
            if case.scenario in JUDGED
        ]
        with kept_loops(), ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(_run, cases))
        failed = [
            f"{name}: {status}\n{detail}" for name, status, detail in results if status in ("FAIL", "ERROR")
        ]
        self.assertEqual(failed, [], "\n".join(failed))
        played = {name for name, status, _ in results if status == "pass"}
        self.assertTrue(any("rate-limit/stream" in name for name in played))

    def test_the_reference_layer_grows_its_waits_run_after_run(self) -> None:
        """The reference layer's doubling backoff passes retry-growth every time, in 48 bounded runs
        four at a time, where two 429s in a row name no delay (OpenAI Chat), over HTTP/1.1 and h2c."""
        targets = [target for _, target in reference_targets(["openai-chat"], ("h1", "h2c"), retries=True)]
        cases = [
            ConformanceCase(target, "rate-limit", mode)
            for _ in range(12)
            for target in targets
            for mode in ("chat", "stream")
        ]
        with kept_loops(), ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(_run, cases))
        failed = [f"{name}: {status}\n{detail}" for name, status, detail in results if status != "pass"]
        self.assertEqual(failed, [], "\n".join(failed))


if __name__ == "__main__":
    unittest.main()
