"""The surfaces a backend offers the cases, as Protocols a type checker holds a backend to.

Strategy: the cases are duck-typed (they call ``backend.chat(request)`` and
``backend.chat_stream(request)`` and read attributes of what comes back), so these
classes are for type checkers only: annotate a factory or a variable with one, and
``mypy --strict`` tells you where your backend's signatures part from the contract.
They are ``typing.Protocol`` classes, in the standard library since Python 3.8.

What counts as async is decided per call, by what is called: the ``chat`` or
``stream`` hook where the target sets one, else ``backend.chat`` in chat mode and
``backend.chat_stream`` in stream mode. It is async when :func:`inspect.iscoroutinefunction`
(``async def``) or :func:`inspect.isasyncgenfunction` (``async def`` with ``yield``)
says so, and then it runs on the case's event loop and gets the ``cancel`` case. A
plain function is sync: it runs in a thread of its own, and an awaitable or async
iterator it returns is still awaited or iterated, but the ``cancel`` case is skipped.
"""

from __future__ import annotations

from typing import AsyncIterator, Iterable, Protocol, runtime_checkable

from .contract import ChatRequest, ChatResponse, StreamChunk

__all__ = ["AsyncChatBackend", "ChatBackend"]


@runtime_checkable
class ChatBackend(Protocol):
    """A sync backend: ``chat`` returns a reply, ``chat_stream`` an iterable of chunks.

    On an abort both raise ``request.signal``'s reason; :func:`conformance.shutdown_on_abort`
    cuts the blocking read that stands in the way.
    """

    def chat(self, request: ChatRequest) -> ChatResponse: ...

    def chat_stream(self, request: ChatRequest) -> Iterable[StreamChunk]: ...


@runtime_checkable
class AsyncChatBackend(Protocol):
    """An async backend: ``async def chat`` and an async generator ``chat_stream``.

    On an abort both raise ``request.signal``'s reason (:func:`conformance.race_abort`
    and :func:`conformance.race_abort_iter` race the work against it); a cancelled
    task lets ``asyncio.CancelledError`` through unchanged.
    """

    async def chat(self, request: ChatRequest) -> ChatResponse: ...

    def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]: ...
