"""anthropic-python's Messages API against the Anthropic wire, through the conformance mixin.

The adapters below are what a user's backend over the SDK would be:
``client.messages.create(...)``, whole and with ``stream=True``, from ``Anthropic`` and
``AsyncAnthropic`` with ``max_retries=0``, pointed at the fake provider with
``base_url``. They judge the wire: every shape the fake provider sends must parse in
the SDK's own models and surface through its own exceptions. (anthropic 2.x sends
``Authorization: Bearer``, 1.x ``x-api-key``: the wire takes either.)

A conversation goes back as the SDK's ``MessageParam`` blocks: an assistant turn is its
``thinking`` and ``redacted_thinking`` blocks (Anthropic's own only, signature and data
as they came), its text, then a ``tool_use`` block per call; a turn's results go in one
user turn of ``tool_result`` blocks, ``is_error`` set on a ``ToolError``. The thinking
blocks of a reply come back in ``ChatResponse.reasoning``; in a stream each is handed
over in a ``StreamChunk`` once its ``content_block_stop`` has come, signature and all.

The SDK has no abort signal. The async adapter races each await against the signal
and cancels the SDK's task when it fires, which closes the connection. The sync
adapter shuts the sockets of its own connection pool down from the aborting thread,
which ends the blocked read; the SDK then fails with a connection error, and the
adapter raises the caller's reason instead.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import threading
import unittest
from typing import TYPE_CHECKING, Any, AsyncIterator, Dict, Iterator, List, Mapping, Optional, Sequence

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
from conformance.wires.anthropic import anthropic_wire

from ..test_provider_support import asyncio_debug_off_for_module
from ._roundtrip import AdapterRoundTrip
from ._support import HTTPX_H2_SKIPS, broken_connection, cut_error, retries_only, shared_between

#: The suites here run without asyncio's debug mode unless CONFORMANCE_LONG_TESTS=1.
setUpModule, tearDownModule = asyncio_debug_off_for_module()

HAVE_ANTHROPIC = importlib.util.find_spec("anthropic") is not None
if HAVE_ANTHROPIC:  # imported once here: a first import inside a case's event loop is slow
    import anthropic

    # anthropic 2.x is built on httpx2, older releases on httpx: use the one it imported.
    if "httpx2" in sys.modules:
        import httpcore2
        import httpx2
    else:
        import httpcore as httpcore2  # type: ignore[no-redef]
        import httpx as httpx2  # type: ignore[no-redef]
if TYPE_CHECKING:
    from anthropic.types import ContentBlockParam, MessageParam, ToolChoiceParam, ToolResultBlockParam
SKIP_REASON = "anthropic is not installed: pip install anthropic"

HEADERS = {"x-gateway-key": "test"}
#: error.type -> the contract's kind.
KINDS: Mapping[str, str] = {
    "rate_limit_error": "rate_limit",
    "authentication_error": "auth",
    "permission_error": "auth",
    "billing_error": "quota",
    "overloaded_error": "overloaded",
    "api_error": "server_error",
    "timeout_error": "server_error",
}
SPEND_LIMIT_CODES = frozenset({"enforced_spend_limit_reached", "contract_spend_limit_reached"})
STOP_REASONS: Mapping[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "refusal",
}


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


def _timeout(read_timeout: Optional[float]) -> Any:
    """Ten seconds, and ``read_timeout`` for each read where given (the latency cases' setting)."""
    return 10.0 if read_timeout is None else httpx2.Timeout(10.0, read=read_timeout)


def _sync_http_client(sockets: _Sockets, http2: bool, read_timeout: Optional[float] = None) -> Any:
    transport = httpx2.HTTPTransport(http1=not http2, http2=http2)
    # The pool is rebuilt around the recording backend: httpx has no public hook for it.
    transport._pool = httpcore2.ConnectionPool(network_backend=sockets, http1=not http2, http2=http2)
    return httpx2.Client(transport=transport, timeout=_timeout(read_timeout))


def _async_http_client(http2: bool, read_timeout: Optional[float] = None) -> Any:
    transport = httpx2.AsyncHTTPTransport(http1=not http2, http2=http2)
    return httpx2.AsyncClient(transport=transport, timeout=_timeout(read_timeout))


def assistant_blocks(message: Message) -> List[ContentBlockParam]:
    """An assistant turn's blocks: thinking first, then text, then ``tool_use``."""
    blocks: List[ContentBlockParam] = []
    for r in message.reasoning:
        if r.provider not in ("", "anthropic"):
            continue  # another provider's signature means nothing here
        if str(r.kind) == ReasoningKind.THINKING.value:
            blocks.append({"type": "thinking", "thinking": r.text, "signature": r.signature})
        elif str(r.kind) == ReasoningKind.REDACTED_THINKING.value:
            blocks.append({"type": "redacted_thinking", "data": r.data})
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)})
    return blocks


def message_params(messages: Sequence[Message]) -> List[MessageParam]:
    """The ``messages`` list: consecutive results merged into one user turn, results first."""
    out: List[MessageParam] = []
    results: List[ContentBlockParam] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.tool_result is not None:
            result = m.tool_result
            block: ToolResultBlockParam = {
                "type": "tool_result",
                "tool_use_id": result.call_id,
                "content": result.text,
            }
            if result.is_error:
                block["is_error"] = True
            results.append(block)
            continue
        if results:
            if m.role == "user":  # the user's words join the results' turn, after them
                results.append({"type": "text", "text": m.content})
                out.append({"role": "user", "content": results})
                results = []
                continue
            out.append({"role": "user", "content": results})
            results = []
        if m.role == "assistant":
            out.append({"role": "assistant", "content": assistant_blocks(m)})
        else:
            out.append({"role": "user", "content": m.content})
    if results:
        out.append({"role": "user", "content": results})
    return out


def tool_choice(choice: ToolChoice) -> ToolChoiceParam:
    """``auto``, ``any``, or the one tool by name."""
    if choice.mode == "tool":
        assert choice.name is not None
        return {"type": "tool", "name": choice.name}
    return {"type": "any"} if choice.mode == "required" else {"type": "auto"}


def params(request: ChatRequest) -> Dict[str, Any]:
    """The ``messages.create`` arguments for a request: the system prompt apart."""
    out: Dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens or 1024,
        "messages": message_params(request.messages),
        # Fine-grained tool streaming on, so that the broken argument JSON it may send reaches us.
        "tools": [
            {
                "name": t.name,
                "description": t.description,
                "input_schema": dict(t.parameters),
                "eager_input_streaming": True,
            }
            for t in request.tools
        ],
    }
    if request.thinking:
        out["thinking"] = {"type": "adaptive"}
    system = [m.content for m in request.messages if m.role == "system"]
    if system:
        out["system"] = "\n\n".join(system)
    if request.tool_choice is not None:
        out["tool_choice"] = tool_choice(request.tool_choice)
    return out


def error_from(exc: Any) -> LLMError:
    """An LLMError from anthropic's APIStatusError (status 200 for ``event: error`` mid-stream)."""
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    type_, message = str(error.get("type", "")), str(error.get("message", exc.message))
    details = error.get("details") if isinstance(error.get("details"), dict) else {}
    status = exc.status_code
    if details.get("error_code") in SPEND_LIMIT_CODES:
        kind = "quota"
    elif type_ == "invalid_request_error" and "prompt is too long" in message:
        kind = "context_overflow"
    elif type_ == "invalid_request_error":
        # Out of credit or at a spend limit set is a 400 that only its message calls a
        # quota: read by its bytes, a bad request, never retried (the cases accept both).
        return LLMError(
            message,
            code="LLM_INVALID_REQUEST",
            kind="invalid_request",
            retryable=False,
            status=status,
            provider="anthropic",
        )
    elif status == 529:
        kind = "overloaded"
    else:
        kind = KINDS.get(type_, "server_error")
    retry_after = None
    if kind == "rate_limit" and "retry-after" in exc.response.headers:
        retry_after = float(exc.response.headers["retry-after"])
    return LLMError.from_kind(
        kind, message, retry_after=retry_after, status=status if status != 200 else None, provider="anthropic"
    )


def finish(stop_reason: Optional[str], calls: List[ToolCall]) -> str:
    reason = STOP_REASONS.get(stop_reason or "", "error")
    if reason in ("length", "refusal"):
        return reason
    return "tool_calls" if calls else reason


def thinking(type_: str, text: str, signature: str) -> Optional[Reasoning]:
    """The reasoning of a ``thinking`` or ``redacted_thinking`` block (``signature`` holds its data)."""
    if type_ == "thinking":
        return Reasoning(ReasoningKind.THINKING.value, text=text, signature=signature, provider="anthropic")
    if type_ == "redacted_thinking":
        return Reasoning(ReasoningKind.REDACTED_THINKING.value, data=signature, provider="anthropic")
    return None


def read_message(message: Any) -> ChatResponse:
    """A ChatResponse from a ``Message`` model."""
    text: List[str] = []
    calls: List[ToolCall] = []
    reasoning: List[Optional[Reasoning]] = []
    for block in message.content:
        if block.type == "thinking":
            reasoning.append(thinking(block.type, block.thinking, block.signature))
        elif block.type == "redacted_thinking":
            reasoning.append(thinking(block.type, "", block.data))
        elif block.type == "text":
            text.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall(block.id, block.name, dict(block.input)))
    if STOP_REASONS.get(message.stop_reason or "") == "length":
        calls = []  # the SDK hands a cut-off input over as a plausible dict: never trust it
    usage = Usage(
        message.usage.input_tokens,
        message.usage.output_tokens,
        message.usage.input_tokens + message.usage.output_tokens,
    )
    return ChatResponse(
        "".join(text),
        finish(message.stop_reason, calls),
        tuple(calls),
        usage,
        tuple(r for r in reasoning if r is not None),
    )


class _StreamState:
    """Reads raw stream events; ``on_event`` returns the chunk to yield, if any."""

    def __init__(self) -> None:
        self.blocks: Dict[int, Dict[str, Any]] = {}
        #: Thinking blocks in progress by index: their type, text parts and signature.
        self.thinking: Dict[int, Dict[str, Any]] = {}
        self.stop_reason: Optional[str] = None
        self.input_tokens = 0
        self.output_tokens = 0
        self.stopped = False

    def on_event(self, event: Any) -> Optional[StreamChunk]:
        if event.type == "message_start":
            self.input_tokens = event.message.usage.input_tokens
            self.output_tokens = event.message.usage.output_tokens
        elif event.type == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                self.blocks[event.index] = {"id": block.id, "name": block.name, "parts": []}
            elif block.type == "thinking":
                self.thinking[event.index] = {
                    "type": "thinking",
                    "parts": [block.thinking],
                    "signature": block.signature,
                }
            elif block.type == "redacted_thinking":
                self.thinking[event.index] = {
                    "type": "redacted_thinking",
                    "parts": [],
                    "signature": block.data,
                }
        elif event.type == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                return StreamChunk(content=delta.text) if delta.text else None
            if delta.type == "input_json_delta" and event.index in self.blocks:
                self.blocks[event.index]["parts"].append(delta.partial_json)
            elif delta.type == "thinking_delta" and event.index in self.thinking:
                self.thinking[event.index]["parts"].append(delta.thinking)
            elif delta.type == "signature_delta" and event.index in self.thinking:
                self.thinking[event.index]["signature"] += delta.signature
        elif event.type == "content_block_stop" and event.index in self.thinking:
            # A thinking block is whole, signature and all, only at its end.
            block = self.thinking.pop(event.index)
            item = thinking(block["type"], "".join(block["parts"]), block["signature"])
            return StreamChunk(reasoning=(item,)) if item is not None else None
        elif event.type == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self.output_tokens = event.usage.output_tokens
        elif event.type == "message_stop":
            self.stopped = True
        return None

    def last_chunk(self) -> StreamChunk:
        if not self.stopped:
            raise LLMError.from_kind(
                "server_error", "the stream ended before message_stop", provider="anthropic"
            )
        calls = []
        if STOP_REASONS.get(self.stop_reason or "") != "length":
            for index in sorted(self.blocks):
                block = self.blocks[index]
                text = "".join(block["parts"])
                try:
                    arguments = json.loads(text or "{}")
                except ValueError:
                    arguments = None
                if isinstance(arguments, dict):
                    calls.append(ToolCall(block["id"], block["name"], arguments))
                else:  # the input_json_delta text as it came: handed on, never run
                    calls.append(ToolCall(block["id"], block["name"], {}, unparsed_arguments=text))
        usage = Usage(self.input_tokens, self.output_tokens, self.input_tokens + self.output_tokens)
        return StreamChunk(
            tool_calls=tuple(calls), finish_reason=finish(self.stop_reason, calls), usage=usage
        )


# -- the sync adapter ----------------------------------------------------------------------


class SyncAnthropicBackend:
    """A sync backend over ``anthropic.Anthropic().messages``.

    ``client_for`` and ``error`` are what an adapter over another of the SDK's clients
    (``AnthropicBedrock``, ``AnthropicVertex``) changes: the messages are the same.
    """

    #: The contract's error for one of the SDK's ``APIStatusError``.
    error = staticmethod(error_from)

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        http2: bool = False,
        read_timeout: Optional[float] = None,
    ) -> None:
        self.sockets = _Sockets()
        http_client = _sync_http_client(self.sockets, http2, read_timeout)
        self.client = self.client_for(base_url, dict(headers), http_client)

    def client_for(self, base_url: str, headers: Dict[str, str], http_client: Any) -> Any:
        return anthropic.Anthropic(
            api_key="test", base_url=base_url, max_retries=0, default_headers=headers, http_client=http_client
        )

    def _guard(self, signal: Optional[AbortSignal]) -> Any:
        return signal.add_callback(self.sockets.shutdown) if signal is not None else (lambda: None)

    def chat(self, request: ChatRequest) -> ChatResponse:
        unregister = self._guard(request.signal)
        try:
            message = self.client.messages.create(**params(request))
        except anthropic.APIStatusError as exc:
            raise self.error(exc) from exc
        except Exception as exc:
            if request.signal is not None and request.signal.aborted:
                request.signal.raise_reason()
            if broken_connection(exc):
                raise cut_error(exc, "anthropic") from exc  # a body cut short of its Content-Length
            raise
        finally:
            unregister()
        return read_message(message)

    def chat_stream(self, request: ChatRequest) -> Iterator[StreamChunk]:
        signal = request.signal
        unregister = self._guard(signal)
        state = _StreamState()
        try:
            stream = self.client.messages.create(**params(request), stream=True)
            with stream:
                for event in stream:
                    chunk = state.on_event(event)
                    if chunk is not None:
                        yield chunk
        except anthropic.APIStatusError as exc:
            raise self.error(exc) from exc
        except Exception as exc:
            if signal is not None and signal.aborted:
                signal.raise_reason()
            if broken_connection(exc):
                raise cut_error(exc, "anthropic") from exc  # cut before message_stop, or reset
            raise
        finally:
            unregister()
        yield state.last_chunk()

    def close(self) -> None:
        self.client.close()


# -- the async adapter ---------------------------------------------------------------------


class AsyncAnthropicBackend:
    """An async backend over ``anthropic.AsyncAnthropic().messages``; ``client_for`` and ``error``
    as for :class:`SyncAnthropicBackend`."""

    error = staticmethod(error_from)

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        http2: bool = False,
        read_timeout: Optional[float] = None,
    ) -> None:
        self.client = self.client_for(base_url, dict(headers), _async_http_client(http2, read_timeout))

    def client_for(self, base_url: str, headers: Dict[str, str], http_client: Any) -> Any:
        return anthropic.AsyncAnthropic(
            api_key="test", base_url=base_url, max_retries=0, default_headers=headers, http_client=http_client
        )

    async def chat(self, request: ChatRequest) -> ChatResponse:
        try:
            message = await race_abort(self.client.messages.create(**params(request)), request.signal)
        except anthropic.APIStatusError as exc:
            raise self.error(exc) from exc
        except anthropic.APIConnectionError as exc:
            raise cut_error(exc, "anthropic") from exc  # a body cut short of its Content-Length
        return read_message(message)

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        state = _StreamState()
        try:
            create = self.client.messages.create(**params(request), stream=True)
            stream = await race_abort(create, request.signal)
            try:
                iterator = stream.__aiter__()
                while True:
                    try:
                        event = await race_abort(iterator.__anext__(), request.signal)
                    except StopAsyncIteration:
                        break
                    chunk = state.on_event(event)
                    if chunk is not None:
                        yield chunk
            finally:
                await stream.close()
        except anthropic.APIStatusError as exc:
            raise self.error(exc) from exc
        except Exception as exc:
            if broken_connection(exc):
                raise cut_error(exc, "anthropic") from exc  # cut before message_stop, or reset
            raise
        yield state.last_chunk()

    async def aclose(self) -> None:
        await self.client.close()


class StreamHelperBackend(SyncAnthropicBackend):
    """A backend over the ``messages.stream`` helper: ``get_final_message()`` read as a whole reply."""

    def chat_stream(self, request: ChatRequest) -> Iterator[StreamChunk]:
        with self.client.messages.stream(**params(request)) as stream:
            response = read_message(stream.get_final_message())
        yield StreamChunk(
            content=response.content,
            tool_calls=tuple(response.tool_calls),
            finish_reason=response.finish_reason,
            usage=response.usage,
        )


# -- the targets ---------------------------------------------------------------------------


@unittest.skipUnless(HAVE_ANTHROPIC, SKIP_REASON)
class AnthropicSyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``Anthropic().messages.create`` over HTTP/1.1."""

    wire = anthropic_wire
    headers = HEADERS
    read_timeout = 0.5  # httpx's read timeout, per read, as the latency cases mean it

    def create_backend(self, url: str) -> SyncAnthropicBackend:
        return SyncAnthropicBackend(url, self.headers, http2=self.http2, read_timeout=self.read_timeout)


@unittest.skipUnless(HAVE_ANTHROPIC, SKIP_REASON)
class AnthropicAsyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """``AsyncAnthropic().messages.create`` over HTTP/1.1."""

    wire = anthropic_wire
    headers = HEADERS
    read_timeout = 0.5

    def create_backend(self, url: str) -> AsyncAnthropicBackend:
        return AsyncAnthropicBackend(url, self.headers, http2=self.http2, read_timeout=self.read_timeout)


@unittest.skipUnless(HAVE_ANTHROPIC, SKIP_REASON)
class AnthropicAsyncH2CConformance(AnthropicAsyncConformance):
    """``AsyncAnthropic().messages.create`` over h2c (httpx with HTTP/2 prior knowledge)."""

    http2 = True
    skip = HTTPX_H2_SKIPS


class AsyncAnthropicRetryingBackend(AsyncAnthropicBackend):
    """``AsyncAnthropic()`` with the SDK's own retry layer on, as it ships (``max_retries=2``)."""

    def client_for(self, base_url: str, headers: Dict[str, str], http_client: Any) -> Any:
        return anthropic.AsyncAnthropic(
            api_key="test", base_url=base_url, max_retries=2, default_headers=headers, http_client=http_client
        )


#: anthropic-sdk-python retries every 429: a spend cap's (``enforced_spend_limit_reached``) is
#: sent again (asserted below), and on the 429 asking for 900 s it was still running at the
#: case's bound.
SDK_RETRIES_QUOTA = "anthropic-sdk-python's default retries send a spend cap's 429 again (asserted below)"



@unittest.skipUnless(HAVE_ANTHROPIC, SKIP_REASON)
class AnthropicAsyncDefaultRetries(BackendConformanceTestCase, unittest.TestCase):
    """``AsyncAnthropic()`` with its default retries, on a target that says it retries."""

    wire = anthropic_wire
    headers = HEADERS
    retries = True
    skip = retries_only(SDK_RETRIES_QUOTA)

    def create_backend(self, url: str) -> AsyncAnthropicBackend:
        return AsyncAnthropicRetryingBackend(url, self.headers, http2=self.http2)

    def test_its_retries_of_a_spend_cap_are_caught(self) -> None:
        """The SDK's default retries send a spend-cap 429 again: retry-permanent names it."""
        from conformance.cases import ConformanceCase

        others = {f"quota:{v.name}": "another shape" for v in anthropic_wire.variants("quota", "chat")}
        others.pop("quota:tier-cap-429")
        target = dataclasses.replace(self.conformance_target(), skip=others)
        expected = r"\[tier-cap-429\] expected one request .*\[retry-permanent\]"
        with self.assertRaisesRegex(AssertionError, expected):
            ConformanceCase(target, "quota", "chat").run()


@unittest.skipUnless(HAVE_ANTHROPIC, SKIP_REASON)
class StreamHelperKnownBreak(unittest.TestCase):
    """Where the SDK itself breaks a case: its ``messages.stream`` helper, not the raw stream."""

    def test_the_stream_helper_repairs_broken_argument_json(self) -> None:
        """``messages.stream`` fills a tool_use block's input with jiter's partial parser and keeps
        no text, so broken argument JSON comes out as a smaller, valid object: corrupt-arguments fails."""
        # anthropic/lib/streaming/_messages.py, accumulate_event: on each input_json_delta,
        # content.input = from_json(json_buf, partial_mode=True); json_buf is never exposed.
        from conformance.cases import BackendConformanceTarget, ConformanceCase

        target = BackendConformanceTarget(
            "helper", anthropic_wire, lambda url: StreamHelperBackend(url, HEADERS), headers=HEADERS
        )
        with self.assertRaises(AssertionError) as failed:
            ConformanceCase(target, "corrupt-arguments", "stream").run()
        message = str(failed.exception)
        self.assertIn("2 of 2 variants failed", message)
        for variant, repaired in (
            ("unterminated-string", {"city": "Paris"}),
            ("trailing-garbage", {"city": "Paris", "unit": "celsius"}),
        ):
            with self.subTest(variant=variant):
                self.assertIn(f"[{variant}] expected unparsed_arguments", message)
                self.assertIn(f"got {repaired!r}: a repaired or guessed object", message)
        self.assertNotIn("[unparsed-call-kept]", message)


@unittest.skipUnless(HAVE_ANTHROPIC, SKIP_REASON)
class AnthropicRoundTrip(AdapterRoundTrip, unittest.TestCase):
    """Tool choice, thinking dropped from elsewhere, and thinking blocks read back, through the SDK."""

    wire = anthropic_wire
    reply_reasoning = (
        *anthropic_wire.turn_reasoning,
        Reasoning(
            ReasoningKind.REDACTED_THINKING.value, data="RWtvQ0NrZ0lBeEFCR0FJaQ==", provider="anthropic"
        ),
    )

    def create_backend(self, url: str) -> SyncAnthropicBackend:
        return SyncAnthropicBackend(url, HEADERS)


@unittest.skipUnless(HAVE_ANTHROPIC, SKIP_REASON)
class AnthropicAsyncH2CRoundTrip(AnthropicRoundTrip):
    """The same through ``AsyncAnthropic`` over h2c."""

    http2 = True

    def create_backend(self, url: str) -> AsyncAnthropicBackend:  # type: ignore[override]
        return AsyncAnthropicBackend(url, HEADERS, http2=True)


if __name__ == "__main__":
    unittest.main()


def load_tests(loader: unittest.TestLoader, tests: unittest.TestSuite, pattern: Optional[str]) -> Any:
    # By default each case runs through the async adapter once, over HTTP/1.1 or h2c in turn.
    return shared_between(tests, ["AnthropicAsyncConformance", "AnthropicAsyncH2CConformance"])
