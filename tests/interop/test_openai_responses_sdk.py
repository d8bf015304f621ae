"""openai-python's Responses API against the Responses wire, through the conformance mixin.

The adapters below are what a user's backend over the SDK would be:
``client.responses.create(...)``, whole and with ``stream=True``, from ``OpenAI`` and
``AsyncOpenAI`` with ``max_retries=0``, pointed at the fake provider with
``base_url``. They judge the wire: every shape the fake provider sends must parse in
the SDK's own models and surface through its own exceptions.

A conversation goes back as the SDK's input item params: an assistant turn is its
``reasoning`` items (OpenAI's own only, id, summary and ``encrypted_content`` as they
came), its text, then a ``function_call`` per call; each result is a
``function_call_output`` naming the ``call_id`` it answers, a ``ToolError`` as its JSON
text (Responses has no error flag). The ``reasoning`` items of a reply come back in
``ChatResponse.reasoning``, and in the last ``StreamChunk`` of a stream.

The SDK has no abort signal. The async adapter races each await against the signal
and cancels the SDK's task when it fires, which closes the connection. The sync
adapter shuts the sockets of its own connection pool down from the aborting thread,
which ends the blocked read; the SDK then fails with a connection error, and the
adapter raises the caller's reason instead.

A stream cut before its end is a retryable ``server_error``. From openai 3.14.0 on
(openai/openai-python#3827) the SDK raises ``APIConnectionError`` for it; before
(2.48.0, the last release for Python 3.9, among them) ``Stream._iter_events``
(``openai/_streaming.py``, lines 52-53, and ``AsyncStream``'s at 161-162) reads the
body with nothing around it and lets httpx's ``RemoteProtocolError`` out. Both
adapters catch either, by ``broken_connection``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import unittest
from typing import TYPE_CHECKING, Any, AsyncIterator, Dict, Iterator, List, Mapping, Optional

from conformance.abort import race_abort, shutdown_socket
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
from conformance.testcase import BackendConformanceTestCase
from conformance.wires.openai_responses import openai_responses_wire

from ..test_provider_support import asyncio_debug_off_for_module
from ._roundtrip import AdapterRoundTrip
from ._support import HTTPX_H2_SKIPS, broken_connection, cut_error, shared_between

#: The suites here run without asyncio's debug mode unless CONFORMANCE_LONG_TESTS=1.
setUpModule, tearDownModule = asyncio_debug_off_for_module()

HAVE_OPENAI = importlib.util.find_spec("openai") is not None
if HAVE_OPENAI:  # imported once here: a first import inside a case's event loop is slow
    import openai

    # openai 3.x is built on httpx2, older releases on httpx: use the one it imported.
    if "httpx2" in sys.modules:
        import httpcore2
        import httpx2
    else:
        import httpcore as httpcore2  # type: ignore[no-redef]
        import httpx as httpx2  # type: ignore[no-redef]
if TYPE_CHECKING:
    from openai.types.responses import ResponseInputItemParam, ToolChoiceFunctionParam
SKIP_REASON = "openai is not installed: pip install openai"

QUOTA_CODES = frozenset({"insufficient_quota", "credit_balance_exhausted"})
HEADERS = {"x-gateway-key": "test"}


# -- what the sync and async adapters share ------------------------------------------------


class _Sockets:
    """An httpcore network backend that remembers its sockets, so an abort can shut them."""

    def __init__(self) -> None:
        self.backend = httpcore2.SyncBackend()
        self.streams: List[Any] = []
        self.lock = threading.Lock()

    def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        stream = self.backend.connect_tcp(*args, **kwargs)
        with self.lock:
            self.streams.append(stream)
        return stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def shutdown(self, _reason: Any = None) -> None:
        # shutdown(), unlike close(), wakes a recv blocked in another thread.
        with self.lock:
            streams = list(self.streams)
        for stream in streams:
            shutdown_socket(stream.get_extra_info("socket"))


def _sync_http_client(sockets: _Sockets, http2: bool) -> Any:
    transport = httpx2.HTTPTransport(http1=not http2, http2=http2)
    # The pool is rebuilt around the recording backend: httpx has no public hook for it.
    transport._pool = httpcore2.ConnectionPool(network_backend=sockets, http1=not http2, http2=http2)
    return httpx2.Client(transport=transport, timeout=10.0)


def _async_http_client(http2: bool) -> Any:
    return httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(http1=not http2, http2=http2), timeout=10.0)


def input_items(message: Message) -> List[ResponseInputItemParam]:
    """The input items of one message that is not a system prompt."""
    result = message.tool_result
    if result is not None:
        return [{"type": "function_call_output", "call_id": result.call_id, "output": result.text}]
    if message.role != "assistant":
        return [{"role": "user", "content": message.content}]
    items: List[ResponseInputItemParam] = []
    for r in message.reasoning:
        # Only OpenAI's own items: another provider's reasoning means nothing here.
        if str(r.kind) == ReasoningKind.REASONING_ITEM.value and r.provider in ("", "openai"):
            items.append(
                {
                    "type": "reasoning",
                    "id": r.id,
                    "summary": [{"type": "summary_text", "text": text} for text in r.summary],
                    "encrypted_content": r.data or None,
                }
            )
    if message.content:
        items.append({"role": "assistant", "content": message.content})
    for call in message.tool_calls:
        arguments = json.dumps(dict(call.arguments), ensure_ascii=False)
        items.append({"type": "function_call", "call_id": call.id, "name": call.name, "arguments": arguments})
    return items


def tool_choice(choice: ToolChoice) -> Any:
    """``"auto"``, ``"required"``, or the one function by name."""
    if choice.mode == "tool":
        assert choice.name is not None
        named: ToolChoiceFunctionParam = {"type": "function", "name": choice.name}
        return named
    return choice.mode


def params(request: ChatRequest) -> Dict[str, Any]:
    """The ``responses.create`` arguments for a request."""
    system = [m.content for m in request.messages if m.role == "system"]
    out: Dict[str, Any] = {
        "model": request.model,
        "input": [item for m in request.messages if m.role != "system" for item in input_items(m)],
        "tools": [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": dict(t.parameters),
                "strict": False,
            }
            for t in request.tools
        ],
    }
    if system:
        out["instructions"] = "\n\n".join(system)
    if request.tool_choice is not None:
        out["tool_choice"] = tool_choice(request.tool_choice)
    if request.max_tokens is not None:
        out["max_output_tokens"] = request.max_tokens
    return out


def kind_of(status: Optional[int], code: Optional[str], type_: Optional[str]) -> str:
    """The contract's kind from what an openai exception carries."""
    if code in QUOTA_CODES or type_ in QUOTA_CODES:
        return "quota"
    if code == "context_length_exceeded":
        return "context_overflow"
    if code in ("server_is_overloaded", "slow_down") or type_ == "service_unavailable_error" or status == 503:
        return "overloaded"
    if code == "rate_limit_exceeded" or status == 429:
        return "rate_limit"
    if code == "invalid_api_key" or status in (401, 403):
        return "auth"
    return "server_error"


def error_from(exc: Any) -> LLMError:
    """An LLMError from openai's APIStatusError, or the APIError of a failed stream."""
    status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
    kind = kind_of(status, getattr(exc, "code", None), getattr(exc, "type", None))
    retry_after = None
    if kind == "rate_limit" and isinstance(exc, openai.APIStatusError):
        headers = exc.response.headers
        if "retry-after-ms" in headers:
            retry_after = float(headers["retry-after-ms"]) / 1000.0
        elif "retry-after" in headers:
            retry_after = float(headers["retry-after"])
    return LLMError.from_kind(kind, exc.message, retry_after=retry_after, status=status, provider="openai")


def failed_error(error: Any) -> LLMError:
    """An LLMError from a failed response's ``error`` (or a flat error event)."""
    code = getattr(error, "code", None)
    kind = kind_of(None, code, getattr(error, "type", None))
    if kind == "server_error" and code == "rate_limit_exceeded":
        kind = "rate_limit"
    return LLMError.from_kind(kind, str(getattr(error, "message", "failed")), provider="openai")


def usage_of(raw: Any) -> Optional[Usage]:
    if raw is None:
        return None
    return Usage(raw.input_tokens, raw.output_tokens, raw.total_tokens)


def read_response(response: Any) -> ChatResponse:
    """Text, finish reason, complete calls, usage and reasoning of a ``Response`` model."""
    if response.status == "failed" and response.error is not None:
        raise failed_error(response.error)
    text, calls, reasoning, refused = [], [], [], False
    for item in response.output:
        if item.type == "reasoning":
            summary = tuple(part.text for part in item.summary)
            reasoning.append(
                Reasoning(
                    ReasoningKind.REASONING_ITEM.value,
                    id=item.id,
                    summary=summary,
                    data=item.encrypted_content or "",
                    provider="openai",
                )
            )
        elif item.type == "message":
            for part in item.content:
                if part.type == "output_text":
                    text.append(part.text)
                elif part.type == "refusal":
                    refused = True
        elif item.type == "function_call" and item.status != "incomplete":
            try:
                arguments = json.loads(item.arguments or "{}")
            except ValueError:
                arguments = None
            if isinstance(arguments, dict):
                calls.append(ToolCall(item.call_id, item.name, arguments))
            else:  # the SDK keeps the model's text as it came: hand it on, never run it
                calls.append(ToolCall(item.call_id, item.name, {}, unparsed_arguments=item.arguments))
    reason = response.incomplete_details.reason if response.incomplete_details else None
    if response.status == "incomplete":
        calls = []  # a turn cut off by the limit keeps no call
        finish = "content_filter" if reason == "content_filter" else "length"
    elif refused:
        finish = "refusal"
    else:
        finish = "tool_calls" if calls else "stop"
    return ChatResponse("".join(text), finish, tuple(calls), usage_of(response.usage), tuple(reasoning))


class _StreamState:
    """Reads typed stream events; ``on_event`` returns text to yield."""

    def __init__(self) -> None:
        self.final: Optional[ChatResponse] = None

    def on_event(self, event: Any) -> str:
        if event.type == "response.output_text.delta":
            return str(event.delta)
        if event.type == "error":  # the flat shape: the SDK yields it instead of raising
            raise failed_error(event)
        if event.type in ("response.completed", "response.incomplete", "response.failed"):
            self.final = read_response(event.response)
        return ""

    def last_chunk(self) -> StreamChunk:
        if self.final is None:
            raise LLMError.from_kind(
                "server_error", "the stream ended before the response did", provider="openai"
            )
        final = self.final
        return StreamChunk(
            tool_calls=final.tool_calls,
            finish_reason=final.finish_reason,
            usage=final.usage,
            reasoning=final.reasoning,
        )


# -- the sync adapter ----------------------------------------------------------------------


class SyncOpenAIResponsesBackend:
    """A sync backend over ``openai.OpenAI().responses``."""

    def __init__(self, base_url: str, headers: Mapping[str, str], http2: bool = False) -> None:
        self.sockets = _Sockets()
        self.client = openai.OpenAI(
            api_key="test",
            base_url=base_url,
            max_retries=0,
            default_headers=dict(headers),
            http_client=_sync_http_client(self.sockets, http2),
        )

    def _guard(self, signal: Optional[AbortSignal]) -> Any:
        return signal.add_callback(self.sockets.shutdown) if signal is not None else (lambda: None)

    def chat(self, request: ChatRequest) -> ChatResponse:
        unregister = self._guard(request.signal)
        try:
            response = self.client.responses.create(**params(request))
        except openai.APIStatusError as exc:
            raise error_from(exc) from exc
        except Exception as exc:
            if request.signal is not None and request.signal.aborted:
                request.signal.raise_reason()
            if broken_connection(exc):
                raise cut_error(exc, "openai") from exc  # a body cut short of its Content-Length
            raise
        finally:
            unregister()
        return read_response(response)

    def chat_stream(self, request: ChatRequest) -> Iterator[StreamChunk]:
        signal = request.signal
        unregister = self._guard(signal)
        state = _StreamState()
        try:
            stream = self.client.responses.create(**params(request), stream=True)
            with stream:
                for event in stream:
                    text = state.on_event(event)
                    if text:
                        yield StreamChunk(content=text)
        except Exception as exc:
            if signal is not None and signal.aborted:
                signal.raise_reason()
            if broken_connection(exc):  # raw httpx before openai 3.14: see the module's docstring
                raise cut_error(exc, "openai") from exc  # cut before response.completed, or reset
            if isinstance(exc, openai.APIError):
                raise error_from(exc) from exc
            raise
        finally:
            unregister()
        yield state.last_chunk()

    def close(self) -> None:
        self.client.close()


# -- the async adapter ---------------------------------------------------------------------


class AsyncOpenAIResponsesBackend:
    """An async backend over ``openai.AsyncOpenAI().responses``."""

    def __init__(self, base_url: str, headers: Mapping[str, str], http2: bool = False) -> None:
        self.client = openai.AsyncOpenAI(
            api_key="test",
            base_url=base_url,
            max_retries=0,
            default_headers=dict(headers),
            http_client=_async_http_client(http2),
        )

    async def chat(self, request: ChatRequest) -> ChatResponse:
        try:
            response = await race_abort(self.client.responses.create(**params(request)), request.signal)
        except openai.APIStatusError as exc:
            raise error_from(exc) from exc
        except openai.APIConnectionError as exc:
            raise cut_error(exc, "openai") from exc  # a body cut short of its Content-Length
        return read_response(response)

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        state = _StreamState()
        try:
            create = self.client.responses.create(**params(request), stream=True)
            stream = await race_abort(create, request.signal)
            try:
                iterator = stream.__aiter__()
                while True:
                    try:
                        event = await race_abort(iterator.__anext__(), request.signal)
                    except StopAsyncIteration:
                        break
                    text = state.on_event(event)
                    if text:
                        yield StreamChunk(content=text)
            finally:
                await stream.close()
        except Exception as exc:
            if broken_connection(exc):  # raw httpx before openai 3.14: see the module's docstring
                raise cut_error(exc, "openai") from exc  # cut before response.completed, or reset
            if isinstance(exc, openai.APIError):
                raise error_from(exc) from exc
            raise
        yield state.last_chunk()

    async def aclose(self) -> None:
        await self.client.close()


# -- the targets ---------------------------------------------------------------------------


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIResponsesSyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``OpenAI().responses.create`` over HTTP/1.1."""

    wire = openai_responses_wire
    headers = HEADERS

    def create_backend(self, url: str) -> SyncOpenAIResponsesBackend:
        return SyncOpenAIResponsesBackend(f"{url}/v1", self.headers, http2=self.http2)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIResponsesAsyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``AsyncOpenAI().responses.create`` over HTTP/1.1."""

    wire = openai_responses_wire
    headers = HEADERS

    def create_backend(self, url: str) -> AsyncOpenAIResponsesBackend:
        return AsyncOpenAIResponsesBackend(f"{url}/v1", self.headers, http2=self.http2)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIResponsesAsyncH2CConformance(OpenAIResponsesAsyncConformance):
    """``AsyncOpenAI().responses.create`` over h2c (httpx with HTTP/2 prior knowledge)."""

    http2 = True
    skip = HTTPX_H2_SKIPS


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIResponsesRoundTrip(AdapterRoundTrip, unittest.TestCase):
    """Tool choice, reasoning items dropped from elsewhere and read back, through ``responses.create``."""

    wire = openai_responses_wire
    reply_reasoning = openai_responses_wire.turn_reasoning

    def create_backend(self, url: str) -> SyncOpenAIResponsesBackend:
        return SyncOpenAIResponsesBackend(f"{url}/v1", HEADERS)


@unittest.skipUnless(HAVE_OPENAI, SKIP_REASON)
class OpenAIResponsesAsyncH2CRoundTrip(OpenAIResponsesRoundTrip):
    """The same through ``AsyncOpenAI`` over h2c."""

    http2 = True

    def create_backend(self, url: str) -> AsyncOpenAIResponsesBackend:  # type: ignore[override]
        return AsyncOpenAIResponsesBackend(f"{url}/v1", HEADERS, http2=True)


if __name__ == "__main__":
    unittest.main()


def load_tests(loader: unittest.TestLoader, tests: unittest.TestSuite, pattern: Optional[str]) -> Any:
    # By default each case runs through the async adapter once, over HTTP/1.1 or h2c in turn.
    return shared_between(tests, ["OpenAIResponsesAsyncConformance", "OpenAIResponsesAsyncH2CConformance"])
