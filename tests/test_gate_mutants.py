"""The agent-loop zoo: broken loops, each caught in the cases it declares by exactly its checks.

Each mutant is the reference loop with one classic bug (a loop that runs a call on
arguments still arriving, runs earlier calls again, runs a tool after the cancel,
sends a result with the wrong role, swaps two results, drops the error result, loops
past its budget, mangles non-ASCII). It declares the cases it must fail and the set of
check ids that must catch it there, and the verdict is compared exactly: a mutant
caught for another reason, or for more than its own, is a wrong verdict.
"""

from __future__ import annotations

import json
import re
import unittest
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Dict, List, Mapping, Optional, Set, Tuple

from conformance.contract import ChatRequest, Message, StreamChunk, ToolCall, ToolResult
from conformance.gate import validate
from conformance.gate.cases import AgentLoopCase, agent_loop_cases
from conformance.gate.loop import AgentLoopTarget, LoopResult, LoopTask
from conformance.gate.reference_loop import ReferenceLoop
from conformance.reference.openai_chat import OpenAIChatBackend, _PartialCall
from conformance.wires import WIRES

TIMEOUT = 3.0
_CHECK_ID = re.compile(r"^  - .*\[([a-z-]+)\]$", re.M)


def close_partial(text: str) -> Optional[Any]:
    """What a partial-JSON parser makes of arguments still arriving: the text with its open
    strings, arrays and objects closed, parsed; ``None`` where even that does not parse."""
    stack: List[str] = []
    in_string = escape = False
    for char in text:
        if in_string:
            if escape:
                escape = False
            elif char == "\\":
                escape = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            stack.append("]" if char == "[" else "}")
        elif char in "]}" and stack:
            stack.pop()
    if escape:
        return None
    closed = text + ('"' if in_string else "") + "".join(reversed(stack))
    try:
        return json.loads(closed)
    except ValueError:
        return None


class EagerBackend(OpenAIChatBackend):
    """Yields each streamed call as soon as its arguments so far, closed, pass the schema."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Calls seen opening in the current stream, with the fragments so far.
        self.opened: Dict[str, _PartialCall] = {}

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        schemas = {t.name: t.parameters for t in chat.tools}
        response = await self.send(chat, stream=True)
        decoder = self.sse_decoder()
        partials: Dict[int, _PartialCall] = {}
        yielded: Set[int] = set()
        reason = None
        try:
            async for data in response:
                for event in decoder.feed(data):
                    if event.data == "[DONE]":
                        continue
                    chunk = json.loads(event.data)
                    text = self.on_chunk(chunk, partials)
                    for choice in chunk.get("choices") or ():
                        reason = choice.get("finish_reason") or reason
                    if text:
                        yield StreamChunk(content=text)
                    for index, partial in partials.items():
                        self.opened[partial.id] = partial
                        arguments = close_partial("".join(partial.arguments))
                        schema = schemas.get(partial.name)
                        if index in yielded or not isinstance(arguments, dict) or schema is None:
                            continue
                        if not validate(schema, arguments):
                            yielded.add(index)
                            yield StreamChunk(tool_calls=(ToolCall(partial.id, partial.name, arguments),))
        finally:
            await response.aclose()
        yield StreamChunk(finish_reason="tool_calls" if yielded else (reason or "stop"))


class EagerLoop(ReferenceLoop):
    """Runs each call the moment the stream yields it, before the turn is over."""

    async def _stream(self, request: ChatRequest) -> Any:
        from conformance.contract import ChatResponse

        text, calls, finish = [], [], "stop"
        async for chunk in self.backend.chat_stream(request):
            text.append(chunk.content)
            for call in chunk.tool_calls:
                calls.append(call)
                self.early[call.id] = await self.task.toolset.aexecute(
                    call, key=call.id, signal=request.signal
                )
            if chunk.finish_reason is not None:
                finish = str(chunk.finish_reason)
        return ChatResponse("".join(text), finish, tuple(calls))

    async def run(self, task: LoopTask) -> LoopResult:
        self.task, self.early = task, {}
        return await super().run(task)

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        if call.id in self.early:
            return self.early[call.id]  # type: ignore[no-any-return]
        return await super()._execute(task, tracker, call, schema)


class FinishesAfterCancel(ReferenceLoop):
    """On abort, runs the calls it had seen opening, to leave nothing half done."""

    async def run(self, task: LoopTask) -> LoopResult:
        try:
            return await super().run(task)
        except Exception:
            for partial in self.backend.opened.values():
                arguments = close_partial("".join(partial.arguments))
                call = ToolCall(partial.id, partial.name, arguments if isinstance(arguments, dict) else {})
                task.toolset.execute(call)  # no signal: it would refuse
            raise


class RerunsEarlierCalls(ReferenceLoop):
    """Runs every call of the conversation again on each turn (no idempotency key)."""

    async def run(self, task: LoopTask) -> LoopResult:
        self.done: List[ToolCall] = []
        return await super().run(task)

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        for earlier in self.done:
            if earlier.id != call.id:
                await task.toolset.aexecute(earlier, signal=task.signal)
        self.done.append(call)
        return await task.toolset.aexecute(call, key=call.id, signal=task.signal)


def rewrite(transform: Callable[[List[Message]], List[Message]]) -> Callable[[Any], Any]:
    """A loop class whose requests carry ``transform`` of the conversation."""

    class Rewrites(ReferenceLoop):
        async def _stream(self, request: ChatRequest) -> Any:
            return await super()._stream(_rewritten(request))

        def __init__(self, backend: Any, **kwargs: Any) -> None:
            super().__init__(_Rewriting(backend, transform), **kwargs)

    return Rewrites


def _rewritten(request: ChatRequest) -> ChatRequest:
    return request


class _Rewriting:
    """A backend wrapper that rewrites each request's messages before sending it."""

    def __init__(self, backend: Any, transform: Callable[[List[Message]], List[Message]]) -> None:
        self.backend, self.transform = backend, transform

    def _request(self, request: ChatRequest) -> ChatRequest:
        from dataclasses import replace

        return replace(request, messages=tuple(self.transform(list(request.messages))))

    async def chat(self, request: ChatRequest) -> Any:
        return await self.backend.chat(self._request(request))

    def chat_stream(self, request: ChatRequest) -> Any:
        return self.backend.chat_stream(self._request(request))

    async def aclose(self) -> None:
        await self.backend.aclose()


def results_as_user(messages: List[Message]) -> List[Message]:
    return [Message("user", m.content) if m.role == "tool" else m for m in messages]


def swap_results(messages: List[Message]) -> List[Message]:
    out = list(messages)
    spots = [i for i, m in enumerate(out) if m.role == "tool"]
    if len(spots) >= 2:
        a, b = out[spots[0]].tool_result, out[spots[1]].tool_result
        assert a is not None and b is not None
        out[spots[0]] = Message.tool(ToolResult(a.call_id, a.name, b.content, b.error))
        out[spots[1]] = Message.tool(ToolResult(b.call_id, b.name, a.content, a.error))
    return out


def drop_errors(messages: List[Message]) -> List[Message]:
    failed = {m.tool_result.call_id for m in messages if m.tool_result is not None and m.tool_result.is_error}
    out = []
    for m in messages:
        if m.tool_result is not None and m.tool_result.call_id in failed:
            continue
        if m.tool_calls and all(c.id in failed for c in m.tool_calls):
            continue
        out.append(m)
    return out


def mangle_non_ascii(messages: List[Message]) -> List[Message]:
    out = []
    for m in messages:
        r = m.tool_result
        if r is not None and r.error is None:
            m = Message.tool(ToolResult(r.call_id, r.name, r.content.encode("ascii", "replace").decode()))
        out.append(m)
    return out


class PastBudget(ReferenceLoop):
    """Ignores the request budget the task gives it."""

    async def run(self, task: LoopTask) -> LoopResult:
        from dataclasses import replace

        return await super().run(replace(task, max_requests=task.max_requests + 10))


@dataclass(frozen=True)
class LoopMutant:
    name: str
    loop: Callable[..., Any]
    #: case name -> the exact set of check ids that must catch it there.
    cases: Mapping[str, Set[str]]
    backend: Callable[..., Any] = OpenAIChatBackend
    #: Cases whose verdict rests on the provider holding a stream at a protocol event.
    needs_pauses: bool = False


def both(stage: str, checks: Set[str]) -> Dict[str, Set[str]]:
    return {f"{stage}/chat": checks, f"{stage}/stream": checks}


MUTANTS: Tuple[LoopMutant, ...] = (
    LoopMutant(
        "executes-on-partial-arguments",
        EagerLoop,
        {"fragmented-arguments/stream": {"executed-early"}},
        backend=EagerBackend,
        needs_pauses=True,
    ),
    LoopMutant("reruns-earlier-calls", RerunsEarlierCalls, both("tool-error-corrects", {"executions"})),
    LoopMutant(
        "executes-after-cancel",
        FinishesAfterCancel,
        {"cancel/stream": {"after-cancel"}},
        backend=EagerBackend,
    ),
    LoopMutant("result-as-user-message", rewrite(results_as_user), both("forced-tool", {"result-format"})),
    LoopMutant("swaps-two-results", rewrite(swap_results), both("parallel-calls", {"call-ids"})),
    LoopMutant(
        "drops-the-error-result",
        rewrite(drop_errors),
        {**both("tool-error-corrects", {"results"}), **both("error-result", {"results"})},
    ),
    LoopMutant("loops-past-its-budget", PastBudget, both("tool-error-insists", {"budget"})),
    LoopMutant("mangles-non-ascii", rewrite(mangle_non_ascii), both("non-ascii-result", {"result-content"})),
)


def mutant_case(mutant: LoopMutant, name: str, http2: bool) -> AgentLoopCase:
    def create(url: str) -> Any:
        return mutant.loop(mutant.backend(f"{url}/v1", http2=http2))

    target = AgentLoopTarget(
        f"mutant {mutant.name}", WIRES["openai-chat"], create, http2=http2, timeout=TIMEOUT
    )
    return next(c for c in agent_loop_cases(target) if c.name == name)


def verdict(case: AgentLoopCase) -> Optional[Set[str]]:
    """The ids of the checks that failed the case, or ``None`` where it passed."""
    try:
        case.run()
    except AssertionError as failed:
        return set(_CHECK_ID.findall(str(failed)))
    return None


def pauses_honoured() -> bool:
    """Whether the fake provider holds a stream where ``StreamReply.pauses`` says."""
    import time
    import urllib.request

    from conformance.provider import StreamReply, start_fake_provider

    with start_fake_provider() as provider:
        provider.reply(StreamReply([b"a", b"b"], pauses={1: 0.2}))
        started = time.monotonic()
        with urllib.request.urlopen(f"{provider.url}/x", data=b"{}", timeout=5) as response:
            response.read()
        return time.monotonic() - started >= 0.15


def wrong_verdicts(mutants: List[LoopMutant]) -> List[str]:
    """Each mutant on each declared case over both transports; every verdict that is not exactly declared."""
    jobs = [(mutant, name, http2) for mutant in mutants for name in mutant.cases for http2 in (False, True)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        verdicts = list(pool.map(lambda job: verdict(mutant_case(*job)), jobs))
    wrong = []
    for (mutant, name, http2), got in zip(jobs, verdicts):
        want = mutant.cases[name]
        if got != want:
            shown = "a pass" if got is None else sorted(got)
            transport = "h2c" if http2 else "http/1.1"
            wrong.append(f"{mutant.name} {name} over {transport}: expected {sorted(want)}, got {shown}")
    return wrong


class LoopZooTests(unittest.TestCase):
    def test_each_mutant_is_caught_where_and_why_it_says(self) -> None:
        """Each broken loop fails each declared case, over HTTP/1.1 and h2c, for exactly its checks."""
        wrong = wrong_verdicts([m for m in MUTANTS if not m.needs_pauses])
        self.assertEqual(wrong, [], "\n".join(wrong))

    def test_a_loop_that_runs_a_call_on_arguments_still_arriving_is_caught(self) -> None:
        """Held before the last fragment, the stream shows an eager loop running the call early."""
        if not pauses_honoured():
            self.skipTest("the fake provider does not hold a stream at StreamReply.pauses yet")
        wrong = wrong_verdicts([m for m in MUTANTS if m.needs_pauses])
        self.assertEqual(wrong, [], "\n".join(wrong))

    def test_mutants_declare_known_cases_and_checks(self) -> None:
        """Every declared case exists and every declared check is an invariant of the suite."""
        from conformance.gate._invariants import INVARIANTS

        names = {c.name for c in agent_loop_cases(mutant_case(MUTANTS[0], "text/chat", False).target)}
        for mutant in MUTANTS:
            with self.subTest(mutant.name):
                self.assertLessEqual(set(mutant.cases), names)
                for checks in mutant.cases.values():
                    self.assertTrue(checks)
                    self.assertLessEqual(checks, set(INVARIANTS))


if __name__ == "__main__":
    unittest.main()
