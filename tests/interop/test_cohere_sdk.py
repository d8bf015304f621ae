"""cohere-python's ``ClientV2`` against the Cohere Chat v2 wire, through the conformance mixin.

The SDK is the judge of the wire: every shape the fake provider sends must parse in
the SDK's own models (generated from Cohere's OpenAPI spec) and surface through its
own exceptions, and the adapters below must then meet every case. They are what a
user's backend over the SDK would be: ``ClientV2`` and ``AsyncClientV2`` calling
``chat(...)`` and ``chat_stream(...)`` with ``request_options={"max_retries": 0}``
(cohere 5.x has no ``max_retries`` on the client; 7.x has both), each over an httpx
client of the adapter's own, which carries the target's headers. The async adapter
also runs over h2c (httpx with ``http1=False, http2=True``).

What an adapter over the SDK must add, which the cases hold it to: the SDK hands
``finish_reason`` on as a string, so ``ERROR`` and ``TIMEOUT`` must be raised and
``MAX_TOKENS`` must drop the cut-off call; ``tool_plan`` is the turn's reasoning, not
its text; usage is ``usage.tokens`` (floats in the SDK's model); a stream that ends
without ``message-end`` ends the SDK's iterator quietly, so the adapter must notice;
a 402 is a plain ``ApiError`` (no class of its own), and every error's kind is in its
``status_code`` (``provider_error`` reads it). ``tool_choice`` takes ``REQUIRED`` or
``NONE`` only: a named tool is forced by offering it alone with ``REQUIRED``.
"""

from __future__ import annotations

import importlib.util
import json
import ssl
import unittest
from typing import Any, AsyncIterator, Dict, Iterator, List, Mapping, Optional, Tuple

from conformance.abort import race_abort, race_abort_iter
from conformance.contract import (
    AbortSignal,
    ChatRequest,
    ChatResponse,
    LLMError,
    Message,
    Reasoning,
    ReasoningKind,
    StreamChunk,
    ToolCall,
    ToolChoice,
    Usage,
)
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.reference import provider_error
from conformance.testcase import BackendConformanceTestCase
from conformance.wires._turns import ScriptedTurn
from conformance.wires.cohere import cohere_wire

from ..test_provider_support import asyncio_debug_off_for_module
from ._roundtrip import CHOICES, AdapterRoundTrip
from ._support import HTTPX_H2_SKIPS, TracedSockets, broken_connection, cut_error, shared_between

#: The suites here run without asyncio's debug mode unless CONFORMANCE_LONG_TESTS=1.
setUpModule, tearDownModule = asyncio_debug_off_for_module()

HAVE_COHERE = importlib.util.find_spec("cohere") is not None
HAVE_H2 = importlib.util.find_spec("h2") is not None
SKIP_REASON = "cohere is not installed: pip install cohere (5.21.1 on Python 3.9, 7.x on 3.10 and later)"
NO_RETRIES = {"max_retries": 0}
_SSL: List[Any] = []


def _verify() -> Any:
    """One SSL context for every client: httpx would load the CA certificates for each."""
    if not _SSL:
        _SSL.append(ssl.create_default_context())
    return _SSL[0]


def _cohere_version() -> Tuple[int, ...]:
    from importlib.metadata import version

    return tuple(int(part) for part in version("cohere").split(".")[:2] if part.isdigit())


#: A known SDK break: before 7.0.0 the sync client's ``EventSource.iter_sse``
#: (``cohere/core/http_sse/_api.py``) decodes each network chunk on its own,
#: ``chunk.decode(charset, errors="replace")``, so a UTF-8 character cut between two
#: chunks comes out as U+FFFD. 7.0.0 decodes incrementally; 5.21.1, the last release
#: for Python 3.9, still breaks. The async client reads ``aiter_lines()`` and passes.
SPLIT_CHARACTER_BREAK = (
    "cohere before 7.0 decodes each chunk of a sync stream on its own (core/http_sse/_api.py, "
    "EventSource.iter_sse: chunk.decode(charset, errors='replace')): a character cut between chunks "
    "becomes U+FFFD; see CohereSyncStreamKnownBreak"
)
#: The stream cases whose text has a character the wire cuts between chunks (a cut's
#: text before the error is judged too, so stream-cut shows the break as well).
SPLIT_CHARACTER_CASES = (
    "text/stream",
    "reasoning/stream",
    "stream-error/stream",
    "stream-cut/stream",
    "tool-result/stream",
)
SYNC_SKIPS: Mapping[str, str] = (
    {case: SPLIT_CHARACTER_BREAK for case in SPLIT_CHARACTER_CASES}
    if HAVE_COHERE and _cohere_version() < (7, 0)
    else {}
)


# -- the request ---------------------------------------------------------------------------


def _message(message: Message) -> Dict[str, Any]:
    """One message as Chat v2 takes it; only Cohere's own reasoning goes back."""
    result = message.tool_result
    if result is not None:
        return {"role": "tool", "tool_call_id": result.call_id, "content": result.text}
    thinking = [
        r.text
        for r in message.reasoning
        if r.provider in ("", "cohere") and str(r.kind) == ReasoningKind.THINKING.value and r.text
    ]
    if message.role == "assistant" and message.tool_calls:
        turn: Dict[str, Any] = {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))},
                }
                for c in message.tool_calls
            ],
        }
        if thinking:
            turn["tool_plan"] = "".join(thinking)
        if message.content:
            turn["content"] = [{"type": "text", "text": message.content}]
        return turn
    if message.role == "assistant" and thinking:
        items: List[Dict[str, Any]] = [{"type": "thinking", "thinking": t} for t in thinking]
        return {"role": "assistant", "content": [*items, {"type": "text", "text": message.content}]}
    return {"role": message.role, "content": message.content}


def _params(request: ChatRequest) -> Dict[str, Any]:
    tools = list(request.tools)
    choice = request.tool_choice
    if choice is not None and choice.mode == "tool":
        tools = [t for t in tools if t.name == choice.name]
    params: Dict[str, Any] = {
        "model": request.model,
        "messages": [_message(m) for m in request.messages],
        "tools": [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)},
            }
            for t in tools
        ],
        "request_options": NO_RETRIES,
    }
    if choice is not None and choice.mode != "auto":
        params["tool_choice"] = "REQUIRED"
    if request.max_tokens is not None:
        params["max_tokens"] = request.max_tokens
    return params


# -- the answer ----------------------------------------------------------------------------


def _thinking(text: str) -> Reasoning:
    return Reasoning(ReasoningKind.THINKING.value, text=text, provider="cohere")


def _call(call_id: Any, name: Any, arguments: Optional[str]) -> ToolCall:
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return ToolCall(str(call_id), str(name), parsed)
    return ToolCall(str(call_id), str(name), {}, unparsed_arguments=arguments or "")


def _usage(usage: Any) -> Optional[Usage]:
    tokens = getattr(usage, "tokens", None)
    if tokens is None:
        return None
    inp, out = int(tokens.input_tokens or 0), int(tokens.output_tokens or 0)
    return Usage(inp, out, inp + out)


def _finish(reason: Optional[str], calls: List[ToolCall]) -> str:
    if reason == "MAX_TOKENS":
        return "length"
    return "tool_calls" if calls else "stop"


def _raise_failed(reason: Optional[str], error: Optional[str]) -> None:
    if reason in ("ERROR", "TIMEOUT"):
        raise provider_error("cohere", {"finish_reason": reason, "error": error})


def _whole(response: Any) -> ChatResponse:
    message = response.message
    _raise_failed(response.finish_reason, None)
    text = [item.text for item in message.content or () if item.type == "text"]
    reasoning = [_thinking(item.thinking) for item in message.content or () if item.type == "thinking"]
    if message.tool_plan:
        reasoning.append(_thinking(message.tool_plan))
    calls = [_call(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or ()]
    if response.finish_reason == "MAX_TOKENS":
        calls = []
    return ChatResponse(
        "".join(text),
        _finish(response.finish_reason, calls),
        tuple(calls),
        _usage(response.usage),
        tuple(reasoning),
    )


class _Turn:
    """What the events of one streamed turn add up to, by their ``type``."""

    def __init__(self) -> None:
        self.calls: Dict[int, List[Any]] = {}
        self.plan: List[str] = []
        self.thoughts: Dict[int, List[str]] = {}
        self.end: Any = None

    def take(self, event: Any) -> Optional[StreamChunk]:
        kind = event.type
        done: List[Reasoning] = []
        if kind != "tool-plan-delta" and self.plan:
            done.append(_thinking("".join(self.plan)))  # the plan is whole once anything else comes
            self.plan = []
        text = ""
        if kind == "content-start" and event.delta.message.content.type == "thinking":
            self.thoughts[event.index] = []
        elif kind == "content-delta":
            content = event.delta.message.content
            if event.index in self.thoughts:
                self.thoughts[event.index].append(content.thinking or "")
            else:
                text = content.text or ""
        elif kind == "content-end" and event.index in self.thoughts:
            done.append(_thinking("".join(self.thoughts.pop(event.index))))
        elif kind == "tool-plan-delta":
            self.plan.append(event.delta.message.tool_plan or "")
        elif kind == "tool-call-start":
            call = event.delta.message.tool_calls
            self.calls[event.index] = [call.id, call.function.name, [call.function.arguments or ""]]
        elif kind == "tool-call-delta":
            self.calls[event.index][2].append(event.delta.message.tool_calls.function.arguments or "")
        elif kind == "message-end":
            self.end = event.delta
        return StreamChunk(content=text, reasoning=tuple(done)) if text or done else None

    def last_chunk(self) -> StreamChunk:
        if self.end is None:
            # cohere-python ends its iterator quietly when the body ends, message-end or not.
            raise LLMError.from_kind(
                "server_error",
                "the stream ended before message-end",
                provider="cohere",
                details={"transport": "eof"},
            )
        reason = self.end.finish_reason
        _raise_failed(reason, self.end.error)
        calls = (
            []
            if reason == "MAX_TOKENS"
            else [_call(i, n, "".join(a)) for i, n, a in (self.calls[k] for k in sorted(self.calls))]
        )
        return StreamChunk(
            tool_calls=tuple(calls), finish_reason=_finish(reason, calls), usage=_usage(self.end.usage)
        )


def _status_error(exc: Any) -> LLMError:
    """The contract's error for the SDK's ``ApiError``: its status, body and headers, as the bytes say."""
    return provider_error("cohere", exc.body, status=exc.status_code, headers=dict(exc.headers or {}))


# -- the backends --------------------------------------------------------------------------


class CohereSyncBackend:
    """A sync backend over ``cohere.ClientV2``: an abort shuts its connection's socket down."""

    def __init__(self, url: str, headers: Mapping[str, str]) -> None:
        import cohere
        import httpx

        self.sockets = TracedSockets()
        self.http = httpx.Client(
            headers=dict(headers),
            timeout=10.0,
            verify=_verify(),
            event_hooks={"request": [self.sockets.on_request]},
        )
        self.client = cohere.ClientV2(api_key="test", base_url=url, httpx_client=self.http)

    def _on_abort(self, signal: Optional[AbortSignal]) -> Any:
        return signal.add_callback(self.sockets.shutdown) if signal is not None else (lambda: None)

    def _failed(self, exc: Exception, signal: Optional[AbortSignal]) -> BaseException:
        from cohere.core.api_error import ApiError

        if signal is not None and signal.aborted:
            assert signal.reason is not None
            return signal.reason
        if isinstance(exc, ApiError):
            return _status_error(exc)
        if broken_connection(exc):
            return cut_error(exc, "cohere")
        return exc

    def chat(self, request: ChatRequest) -> ChatResponse:
        unregister = self._on_abort(request.signal)
        try:
            response = self.client.chat(**_params(request))
        except Exception as exc:
            raise self._failed(exc, request.signal) from exc
        finally:
            unregister()
        return _whole(response)

    def chat_stream(self, request: ChatRequest) -> Iterator[StreamChunk]:
        unregister = self._on_abort(request.signal)
        turn = _Turn()
        try:
            for event in self.client.chat_stream(**_params(request)):
                chunk = turn.take(event)
                if chunk is not None:
                    yield chunk
        except Exception as exc:
            raise self._failed(exc, request.signal) from exc
        finally:
            unregister()
        yield turn.last_chunk()

    def close(self) -> None:
        self.http.close()


class CohereAsyncBackend:
    """An async backend over ``cohere.AsyncClientV2``: an abort cancels the SDK's call."""

    def __init__(self, url: str, headers: Mapping[str, str], **httpx_args: Any) -> None:
        import cohere
        import httpx

        self.http = httpx.AsyncClient(headers=dict(headers), timeout=10.0, verify=_verify(), **httpx_args)
        self.client = cohere.AsyncClientV2(api_key="test", base_url=url, httpx_client=self.http)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        from cohere.core.api_error import ApiError

        try:
            response = await race_abort(self.client.chat(**_params(request)), request.signal)
        except ApiError as exc:
            raise _status_error(exc) from exc
        except Exception as exc:
            if broken_connection(exc):
                raise cut_error(exc, "cohere") from exc  # a body cut short of its Content-Length
            raise
        return _whole(response)

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        from cohere.core.api_error import ApiError

        turn = _Turn()
        try:
            async for event in race_abort_iter(self.client.chat_stream(**_params(request)), request.signal):
                chunk = turn.take(event)
                if chunk is not None:
                    yield chunk
        except ApiError as exc:
            raise _status_error(exc) from exc
        except Exception as exc:
            if broken_connection(exc):
                raise cut_error(exc, "cohere") from exc  # cut before message-end, or reset
            raise
        yield turn.last_chunk()

    async def aclose(self) -> None:
        await self.http.aclose()


# -- the cases -------------------------------------------------------------------------------


@unittest.skipUnless(HAVE_COHERE, SKIP_REASON)
class CohereSyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``cohere.ClientV2``, adapted, over HTTP/1.1."""

    wire = cohere_wire
    headers = {"x-gateway-key": "test"}
    skip = SYNC_SKIPS

    def create_backend(self, url: str) -> CohereSyncBackend:
        return CohereSyncBackend(url, self.headers)


@unittest.skipUnless(HAVE_COHERE, SKIP_REASON)
class CohereSyncStreamKnownBreak(unittest.TestCase):
    """Where the SDK itself breaks a case: the sync client's stream before cohere 7.0."""

    def test_a_character_cut_between_chunks_is_replaced(self) -> None:
        """Before 7.0 a UTF-8 character cut between two chunks of a sync stream comes out as U+FFFD."""
        from conformance.cases import BackendConformanceTarget, ConformanceCase

        if _cohere_version() >= (7, 0):
            self.skipTest("the installed cohere decodes a sync stream incrementally (fixed in 7.0.0)")
        headers = {"x-gateway-key": "test"}
        target = BackendConformanceTarget(
            "sync", cohere_wire, lambda url: CohereSyncBackend(url, headers), headers=headers
        )
        with self.assertRaises(AssertionError) as failed:
            ConformanceCase(target, "text", "stream").run()
        message = str(failed.exception)
        self.assertIn("2 of 2 variants failed", message)
        self.assertIn("\ufffd", message)
        self.assertRegex(message, r"\[content\]\n")


@unittest.skipUnless(HAVE_COHERE, SKIP_REASON)
class CohereAsyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``cohere.AsyncClientV2``, adapted, over HTTP/1.1."""

    wire = cohere_wire
    headers = {"x-gateway-key": "test"}

    def create_backend(self, url: str) -> CohereAsyncBackend:
        return CohereAsyncBackend(url, self.headers)


@unittest.skipUnless(HAVE_COHERE, SKIP_REASON)
@unittest.skipUnless(HAVE_H2, "h2 is not installed: pip install h2")
class CohereAsyncH2CConformance(BackendConformanceTestCase, unittest.TestCase):
    """``cohere.AsyncClientV2`` over h2c (an httpx client with http1=False, http2=True)."""

    wire = cohere_wire
    headers = {"x-gateway-key": "test"}
    http2 = True
    skip = HTTPX_H2_SKIPS

    def create_backend(self, url: str) -> CohereAsyncBackend:
        return CohereAsyncBackend(url, self.headers, http1=False, http2=True)


@unittest.skipUnless(HAVE_COHERE, SKIP_REASON)
class CohereRoundTrip(AdapterRoundTrip, unittest.TestCase):
    """The tool choice, another provider's plan dropped, and the plan read back, through ``ClientV2``."""

    wire = cohere_wire
    reply_reasoning = cohere_wire.turn_reasoning

    def create_backend(self, url: str) -> CohereSyncBackend:
        return CohereSyncBackend(url, {})

    def test_tool_choice_reads_back(self) -> None:
        """AUTO sends none; REQUIRED with the one tool offered forces it, as the named tool does."""
        forced = ToolChoice.tool(FX.tool_name)
        for choice in CHOICES:
            with self.subTest(choice=choice):
                _, history = self.exchange(self.request(tool_choice=choice), ScriptedTurn(text="ok."), False)
                self.assertEqual(
                    history.tool_choice, ToolChoice.AUTO if choice == ToolChoice.AUTO else forced
                )


@unittest.skipUnless(HAVE_COHERE, SKIP_REASON)
@unittest.skipUnless(HAVE_H2, "h2 is not installed: pip install h2")
class CohereAsyncH2CRoundTrip(CohereRoundTrip):
    """The same through ``AsyncClientV2`` over h2c."""

    http2 = True

    def create_backend(self, url: str) -> CohereAsyncBackend:  # type: ignore[override]
        return CohereAsyncBackend(url, {}, http1=False, http2=True)


def load_tests(loader: unittest.TestLoader, tests: unittest.TestSuite, pattern: Optional[str]) -> Any:
    # By default each case runs through the async adapter once, over HTTP/1.1 or h2c in turn.
    return shared_between(tests, ["CohereAsyncConformance", "CohereAsyncH2CConformance"])


if __name__ == "__main__":
    unittest.main()
