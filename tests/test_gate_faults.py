"""The fault stages: the provider's bare drop, the wire's short 429, and a zoo of loops that
mishandle a fault, each caught by exactly the fault check named for it."""

from __future__ import annotations

import difflib
import json
import socket
import unittest
from dataclasses import replace
from typing import Any, AsyncIterator, Dict, List, Set, Tuple

from conformance.contract import ChatRequest, StreamChunk, ToolCall, ToolResult
from conformance.errors import ProviderInputError
from conformance.gate.faults import FAULT_STAGES, RATE_LIMIT_RETRY_AFTER
from conformance.gate.loop import LoopResult, LoopTask
from conformance.gate.reference_loop import ReferenceLoop
from conformance.gate.tools import TOOLS
from conformance.provider import DropReply, start_fake_provider
from conformance.provider.replies import JsonReply, RecordedRequest
from conformance.reference.openai_chat import OpenAIChatBackend, _PartialCall
from conformance.wires import WIRES

from .test_gate_mutants import LoopMutant, close_partial, wrong_verdicts


class KeepsBrokenCalls(OpenAIChatBackend):
    """When the stream breaks off, yields the calls it had so far, their open JSON closed."""

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        response = await self.send(chat, stream=True)
        decoder = self.sse_decoder()
        partials: Dict[int, _PartialCall] = {}
        done = False
        try:
            async for data in response:
                for event in decoder.feed(data):
                    if event.data == "[DONE]":
                        done = True
                        continue
                    text = self.on_chunk(json.loads(event.data), partials)
                    if text:
                        yield StreamChunk(content=text)
        except Exception:  # noqa: BLE001 - however it broke, this mutant keeps what it had
            done = False
        try:
            await response.aclose()
        except Exception:  # noqa: BLE001 - the connection is gone either way
            pass
        calls: List[ToolCall] = []
        if done:
            calls = self.complete_calls([partials[i] for i in sorted(partials)], None)
        else:
            for partial in partials.values():
                arguments = close_partial("".join(partial.arguments))
                if isinstance(arguments, dict):
                    calls.append(ToolCall(partial.id, partial.name, arguments))
        yield StreamChunk(tool_calls=tuple(calls), finish_reason="tool_calls" if calls else "stop")


class RerunsOnRetry(ReferenceLoop):
    """Before sending a failed request again, runs the last turn's calls again to rebuild their results."""

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        self.last_calls: List[Tuple[LoopTask, ToolCall]] = [*getattr(self, "last_calls", []), (task, call)]
        return await super()._execute(task, tracker, call, schema)

    async def _pause(self, task: LoopTask, seconds: float) -> None:
        for owner, call in getattr(self, "last_calls", []):
            await owner.toolset.aexecute(call, key=call.id, signal=owner.signal)
        await super()._pause(task, seconds)


class GuessesTools(ReferenceLoop):
    """Runs a call to an unknown tool as the known tool whose name is closest."""

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        if call.name not in TOOLS:
            guess = difflib.get_close_matches(call.name, list(TOOLS), n=1, cutoff=0.3)
            if guess:
                ran = await task.toolset.aexecute(
                    replace(call, name=guess[0]), key=call.id, signal=task.signal
                )
                return ToolResult(call.id, call.name, ran.content, ran.error)
        return await super()._execute(task, tracker, call, schema)


class RepairsBrokenJson(ReferenceLoop):
    """Closes the open strings, arrays and objects of arguments that did not parse, and runs the call."""

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        if call.unparsed_arguments is not None:
            repaired = close_partial(call.unparsed_arguments)
            if isinstance(repaired, dict):
                call = ToolCall(call.id, call.name, repaired, call.reasoning)
        return await super()._execute(task, tracker, call, schema)


class NoDeadline(ReferenceLoop):
    """Waits as long as the provider takes: it never bounds a request by its budget."""

    async def run(self, task: LoopTask) -> LoopResult:
        return await super().run(replace(task, max_seconds=3600.0))


def _stream_cases(*stages: str) -> Dict[str, Set[str]]:
    return {f"{stage}/stream": {"partial-call"} for stage in stages}


def _both(stage: str, check: str) -> Dict[str, Set[str]]:
    return {f"{stage}/chat": {check}, f"{stage}/stream": {check}}


FAULT_MUTANTS: Tuple[LoopMutant, ...] = (
    LoopMutant(
        "executes-a-partial-call",
        ReferenceLoop,
        _stream_cases(
            "close-after-first-fragment",
            "reset-after-first-fragment",
            "close-after-last-fragment",
            "reset-after-last-fragment",
        ),
        backend=KeepsBrokenCalls,
    ),
    LoopMutant(
        "re-executes-on-retry",
        RerunsOnRetry,
        {
            **_both("close-after-execution", "re-executed"),
            **_both("reset-after-execution", "re-executed"),
            **_both("rate-limited", "re-executed"),
        },
    ),
    LoopMutant("executes-an-unknown-tool", GuessesTools, _both("unknown-tool", "refused-call")),
    LoopMutant("executes-a-corrupt-call", RepairsBrokenJson, _both("corrupt-arguments", "refused-call")),
    LoopMutant("never-stops", NoDeadline, _both("timeout", "recovered")),
)


class FaultZooTests(unittest.TestCase):
    def test_each_fault_mutant_is_caught_by_its_own_check(self) -> None:
        """Each loop that mishandles a fault fails its cases, over HTTP/1.1 and h2c, for exactly its check."""
        wrong = wrong_verdicts(list(FAULT_MUTANTS))
        self.assertEqual(wrong, [], "\n".join(wrong))

    def test_every_fault_check_has_a_mutant(self) -> None:
        """No fault invariant goes unguarded: each is the verdict of at least one mutant."""
        guarded = {check for m in FAULT_MUTANTS for checks in m.cases.values() for check in checks}
        self.assertEqual(guarded, {"partial-call", "re-executed", "refused-call", "recovered"})

    def test_mutants_declare_fault_stages(self) -> None:
        """Every declared case is a fault stage in a mode it runs in."""
        known = {f"{name}/{mode}" for name, stage in FAULT_STAGES.items() for mode in stage.modes}
        for mutant in FAULT_MUTANTS:
            with self.subTest(mutant.name):
                self.assertLessEqual(set(mutant.cases), known)


class DropReplyTests(unittest.TestCase):
    def _ask(self, end: str) -> Tuple[bytes, str]:
        with start_fake_provider() as provider:
            provider.reply(DropReply(end))
            with socket.create_connection(("127.0.0.1", provider.port), timeout=5) as sock:
                sock.sendall(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}")
                try:
                    return sock.recv(100), "eof"
                except ConnectionResetError:
                    return b"", "reset"

    def test_a_dropped_request_gets_no_byte_and_the_connection_ends_as_asked(self) -> None:
        """close ends the connection with a FIN, reset with a TCP reset, neither after any response byte."""
        self.assertEqual(self._ask("close"), (b"", "eof"))
        self.assertEqual(self._ask("reset"), (b"", "reset"))

    def test_a_misspelt_end_is_refused(self) -> None:
        """DropReply takes 'close' or 'reset', and says so."""
        with self.assertRaisesRegex(ProviderInputError, "did you mean 'reset'"):
            DropReply("rest")


class RateLimitReplyTests(unittest.TestCase):
    def test_the_wire_s_own_429_asks_for_the_short_delay(self) -> None:
        """The delay is rewritten in each provider's own form; Bedrock's throttle still carries none."""
        from conformance.gate._fault_replies import rate_limit_reply

        body = json.dumps({"model": "m", "stream": False}).encode()
        request = RecordedRequest("POST", "/v1/chat/completions", "", {}, body, "HTTP/1.1")
        shown = f"{RATE_LIMIT_RETRY_AFTER:g}"
        for name in ("openai-chat", "openai-responses", "anthropic", "gemini", "bedrock-converse"):
            with self.subTest(name):
                reply = rate_limit_reply(WIRES[name], request, RATE_LIMIT_RETRY_AFTER)
                assert isinstance(reply, JsonReply)
                self.assertEqual(reply.status, 429)
                headers = {k.lower(): v for k, v in (reply.headers or {}).items()}
                encoded = reply.encoded()
                if name == "gemini":
                    self.assertIn(f'"{shown}s"'.encode(), encoded)
                    self.assertNotIn(b'"7s"', encoded)
                elif name == "bedrock-converse":
                    self.assertNotIn("retry-after", headers)
                else:
                    self.assertEqual(headers["retry-after"], shown)
                if "retry-after-ms" in headers:
                    self.assertEqual(headers["retry-after-ms"], str(int(RATE_LIMIT_RETRY_AFTER * 1000)))
        self.assertIsNone(rate_limit_reply(WIRES["ollama"], request, RATE_LIMIT_RETRY_AFTER))


if __name__ == "__main__":
    unittest.main()
