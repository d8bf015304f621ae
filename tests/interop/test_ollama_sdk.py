"""ollama-python against the Ollama wire, through the conformance mixin.

The adapters below are what a user's backend over the SDK would be: ``Client(host=url)``
and ``AsyncClient(host=url)`` calling ``chat(..., stream=False/True)``. ollama-python
never retries. Extra keyword arguments go to httpx, so the async adapter also runs
over h2c with ``http1=False, http2=True``.

ollama-python 0.6 drops ``tool_calls[].id`` (its ``ToolCall`` model has no such
field), so the adapters make an id up for every call; the wire's ``tool_call_id`` is
``None`` for that reason among others.

A conversation goes back as the SDK's ``ollama.Message`` models: an assistant turn
with its ``thinking`` (Ollama's own only, as it came) and ``tool_calls``; each result a
``tool`` message naming its ``tool_name`` (there is no call id to echo), a
``ToolError`` as its JSON text (Ollama has no error flag). Ollama has no tool choice,
so none is sent. A reply's ``thinking`` comes back in ``ChatResponse.reasoning``; in a
stream it is handed over whole once the first text, call or the last line comes.
"""

from __future__ import annotations

import importlib.util
import secrets
import ssl
import unittest
from typing import Any, AsyncIterator, Dict, Iterator, List, Mapping, Optional, Tuple

from conformance.abort import race_abort
from conformance.contract import (
    ChatRequest,
    ChatResponse,
    LLMError,
    Message,
    Reasoning,
    ReasoningKind,
    StreamChunk,
    ToolCall,
    Usage,
)
from conformance.testcase import BackendConformanceTestCase
from conformance.wires.ollama import ollama_wire

from ..test_provider_support import asyncio_debug_off_for_module
from ._roundtrip import AdapterRoundTrip
from ._support import HTTPX_H2_SKIPS, broken_connection, cut_error, ended_short, shared_between

#: The suites here run without asyncio's debug mode unless CONFORMANCE_LONG_TESTS=1.
setUpModule, tearDownModule = asyncio_debug_off_for_module()

HAVE_OLLAMA = importlib.util.find_spec("ollama") is not None
HAVE_H2 = importlib.util.find_spec("h2") is not None
_SSL: List[Any] = []


def _verify() -> Any:
    """One SSL context for every client: httpx would load the CA certificates for each."""
    if not _SSL:
        _SSL.append(ssl.create_default_context())
    return _SSL[0]


SYNC_ABORT = (
    "ollama-python's sync Client has no way to abort a call blocked in httpx: no "
    "cancellation API, and the socket sits inside httpx's pool"
)


def _message(message: Message) -> Any:
    """One message as the SDK's ``ollama.Message``."""
    import ollama

    result = message.tool_result
    if result is not None:
        return ollama.Message(role="tool", tool_name=result.name, content=result.text)
    thinking = "".join(
        r.text
        for r in message.reasoning
        # Only Ollama's own thinking: another provider's reasoning means nothing here.
        if str(r.kind) == ReasoningKind.THINKING.value and r.provider in ("", "ollama")
    )
    calls = [
        ollama.Message.ToolCall(
            function=ollama.Message.ToolCall.Function(name=call.name, arguments=dict(call.arguments))
        )
        for call in message.tool_calls
    ]
    return ollama.Message(
        role=message.role, content=message.content, thinking=thinking or None, tool_calls=calls or None
    )


def _params(request: ChatRequest, stream: bool) -> Dict[str, Any]:
    params: Dict[str, Any] = {
        "model": request.model,
        "messages": [_message(m) for m in request.messages],
        "tools": [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)},
            }
            for t in request.tools
        ],
        "stream": stream,
    }
    if request.max_tokens is not None:
        params["options"] = {"num_predict": request.max_tokens}
    if request.thinking:
        params["think"] = True
    return params


def _error(exc: Any) -> LLMError:
    """An LLMError from ollama.ResponseError: the status, or -1 for a line mid-stream."""
    message = str(exc.error)
    status: Optional[int] = exc.status_code if exc.status_code > 0 else None
    if "usage limit" in message:
        kind = "quota"
    elif "context length" in message:
        kind = "context_overflow"
    elif status == 503 or "server busy" in message:
        kind = "overloaded"
    elif status in (401, 403):
        kind = "auth"
    elif status == 429:
        kind = "rate_limit"
    elif status is None or status >= 500:
        kind = "server_error"
    else:
        return LLMError(
            message,
            code="LLM_INVALID_REQUEST",
            kind="invalid_request",
            retryable=False,
            status=status,
            provider="ollama",
        )
    return LLMError.from_kind(kind, message, status=status, provider="ollama")


def _calls(message: Any) -> List[ToolCall]:
    return [
        ToolCall(f"call_{secrets.token_hex(12)}", call.function.name, dict(call.function.arguments))
        for call in message.tool_calls or ()
    ]


def _finish(done_reason: Optional[str], calls: List[ToolCall]) -> str:
    if done_reason == "length":
        return "length"
    return "tool_calls" if calls else "stop"


def _reasoning(thinking: str) -> Tuple[Reasoning, ...]:
    """A turn's ``thinking`` as the reasoning to send back with it, or nothing."""
    if not thinking:
        return ()
    return (Reasoning(ReasoningKind.THINKING.value, text=thinking, provider="ollama"),)


def _usage(response: Any) -> Usage:
    prompt, output = response.prompt_eval_count or 0, response.eval_count or 0
    return Usage(prompt, output, prompt + output)


class _Turn:
    """What the lines of one streamed turn add up to."""

    def __init__(self) -> None:
        self.calls: List[ToolCall] = []
        self.thinking: List[str] = []
        self.final: Any = None

    def take(self, part: Any) -> Optional[StreamChunk]:
        calls = _calls(part.message)
        self.calls.extend(calls)
        if part.done:
            self.final = part
        text = part.message.content or ""
        if part.message.thinking:
            self.thinking.append(part.message.thinking)
        reasoning: Tuple[Reasoning, ...] = ()
        if self.thinking and (text or calls or part.done):
            # The thinking is whole once anything else comes.
            reasoning, self.thinking = _reasoning("".join(self.thinking)), []
        return StreamChunk(content=text, reasoning=reasoning) if text or reasoning else None

    def last_chunk(self) -> StreamChunk:
        reason = self.final.done_reason if self.final is not None else None
        calls = [] if reason == "length" else self.calls
        usage = _usage(self.final) if self.final is not None else None
        return StreamChunk(tool_calls=tuple(calls), finish_reason=_finish(reason, calls), usage=usage)


def _whole(response: Any) -> ChatResponse:
    calls = [] if response.done_reason == "length" else _calls(response.message)
    return ChatResponse(
        response.message.content or "",
        _finish(response.done_reason, calls),
        tuple(calls),
        _usage(response),
        _reasoning(response.message.thinking or ""),
    )


class OllamaSyncBackend:
    """A sync backend over ``ollama.Client``."""

    def __init__(self, url: str, headers: Mapping[str, str], **httpx_args: Any) -> None:
        import ollama

        self.client = ollama.Client(host=url, headers=dict(headers), verify=_verify(), **httpx_args)

    def chat(self, request: ChatRequest) -> ChatResponse:
        import ollama

        try:
            return _whole(self.client.chat(**_params(request, stream=False)))
        except ollama.ResponseError as exc:
            raise _error(exc) from exc
        except Exception as exc:
            if broken_connection(exc):
                raise cut_error(exc, "ollama") from exc  # a body cut short of its Content-Length
            raise

    def chat_stream(self, request: ChatRequest) -> Iterator[StreamChunk]:
        import ollama

        turn = _Turn()
        try:
            for part in self.client.chat(**_params(request, stream=True)):
                chunk = turn.take(part)
                if chunk is not None:
                    yield chunk
        except ollama.ResponseError as exc:
            raise _error(exc) from exc
        except Exception as exc:
            if broken_connection(exc):
                raise cut_error(exc, "ollama") from exc  # cut before the done line, or reset
            raise
        if turn.final is None:
            raise ended_short("ollama", 'the "done": true line')  # a body that ended properly before it
        yield turn.last_chunk()

    def close(self) -> None:
        self.client._client.close()


class OllamaAsyncBackend:
    """An async backend over ``ollama.AsyncClient``: an abort cancels the SDK's call."""

    def __init__(self, url: str, headers: Mapping[str, str], **httpx_args: Any) -> None:
        import ollama

        self.client = ollama.AsyncClient(host=url, headers=dict(headers), verify=_verify(), **httpx_args)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        import ollama

        try:
            response = await race_abort(self.client.chat(**_params(request, stream=False)), request.signal)
        except ollama.ResponseError as exc:
            raise _error(exc) from exc
        except Exception as exc:
            if broken_connection(exc):
                raise cut_error(exc, "ollama") from exc  # a body cut short of its Content-Length
            raise
        return _whole(response)

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        import ollama

        turn = _Turn()
        try:
            stream = await race_abort(self.client.chat(**_params(request, stream=True)), request.signal)
            try:
                while True:
                    try:
                        part = await race_abort(stream.__anext__(), request.signal)
                    except StopAsyncIteration:
                        break
                    chunk = turn.take(part)
                    if chunk is not None:
                        yield chunk
            finally:
                await stream.aclose()
        except ollama.ResponseError as exc:
            raise _error(exc) from exc
        except Exception as exc:
            if broken_connection(exc):
                raise cut_error(exc, "ollama") from exc  # cut before the done line, or reset
            raise
        if turn.final is None:
            raise ended_short("ollama", 'the "done": true line')  # a body that ended properly before it
        yield turn.last_chunk()

    async def aclose(self) -> None:
        await self.client._client.aclose()


@unittest.skipUnless(HAVE_OLLAMA, "ollama is not installed: pip install ollama")
class OllamaSyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """ollama-python's sync Client, adapted, over HTTP/1.1."""

    wire = ollama_wire
    headers = {"x-gateway-key": "test"}
    skip = {"abort": SYNC_ABORT}

    def create_backend(self, url: str) -> OllamaSyncBackend:
        return OllamaSyncBackend(url, self.headers)


@unittest.skipUnless(HAVE_OLLAMA, "ollama is not installed: pip install ollama")
class OllamaAsyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """ollama-python's AsyncClient, adapted, over HTTP/1.1."""

    wire = ollama_wire
    headers = {"x-gateway-key": "test"}

    def create_backend(self, url: str) -> OllamaAsyncBackend:
        return OllamaAsyncBackend(url, self.headers)


@unittest.skipUnless(HAVE_OLLAMA, "ollama is not installed: pip install ollama")
@unittest.skipUnless(HAVE_H2, "h2 is not installed: pip install h2")
class OllamaAsyncH2CConformance(BackendConformanceTestCase, unittest.TestCase):
    """ollama-python's AsyncClient over h2c (httpx with http1=False, http2=True)."""

    wire = ollama_wire
    headers = {"x-gateway-key": "test"}
    http2 = True
    skip = HTTPX_H2_SKIPS

    def create_backend(self, url: str) -> OllamaAsyncBackend:
        return OllamaAsyncBackend(url, self.headers, http1=False, http2=True)


@unittest.skipUnless(HAVE_OLLAMA, "ollama is not installed: pip install ollama")
class OllamaRoundTrip(AdapterRoundTrip, unittest.TestCase):
    """No tool choice sent, thinking dropped from elsewhere and read back, through ``Client.chat``."""

    wire = ollama_wire
    has_tool_choice = False
    reply_reasoning = ollama_wire.turn_reasoning

    def create_backend(self, url: str) -> OllamaSyncBackend:
        return OllamaSyncBackend(url, {})


@unittest.skipUnless(HAVE_OLLAMA, "ollama is not installed: pip install ollama")
@unittest.skipUnless(HAVE_H2, "h2 is not installed: pip install h2")
class OllamaAsyncH2CRoundTrip(OllamaRoundTrip):
    """The same through ``AsyncClient`` over h2c."""

    http2 = True

    def create_backend(self, url: str) -> OllamaAsyncBackend:  # type: ignore[override]
        return OllamaAsyncBackend(url, {}, http1=False, http2=True)


if __name__ == "__main__":
    unittest.main()


def load_tests(loader: unittest.TestLoader, tests: unittest.TestSuite, pattern: Optional[str]) -> Any:
    # By default each case runs through the async adapter once, over HTTP/1.1 or h2c in turn.
    return shared_between(tests, ["OllamaAsyncConformance", "OllamaAsyncH2CConformance"])
