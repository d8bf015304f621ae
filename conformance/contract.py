"""The library's own types: what a backend returns, raises and is cancelled with.

A backend either returns these frozen dataclasses, or the target's adapter hooks
convert its results into them. The cases read attributes only, so a backend's own
exception type passes as long as it carries the attributes of :class:`LLMError`.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, NoReturn, Optional, Sequence

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "ERROR_KINDS",
    "AbortController",
    "AbortSignal",
    "ChatRequest",
    "ChatResponse",
    "ErrorKind",
    "FinishReason",
    "LLMError",
    "Message",
    "StreamChunk",
    "ToolCall",
    "ToolSpec",
    "Usage",
]


class FinishReason(str, enum.Enum):
    """Why a turn ended; a ``str`` so ``reason == "stop"`` reads naturally."""

    STOP = "stop"
    TOOL_CALLS = "tool_calls"
    LENGTH = "length"
    CONTENT_FILTER = "content_filter"
    REFUSAL = "refusal"
    ERROR = "error"

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class Message:
    """One message of the conversation sent to the model."""

    role: str
    content: str


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call; ``parameters`` is a JSON Schema object."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """One complete tool call, its arguments already parsed from JSON."""

    id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class Usage:
    """Token counts as the provider reported them."""

    input_tokens: int
    output_tokens: int
    total_tokens: int


@dataclass(frozen=True)
class ChatRequest:
    """What the caller asks a backend for.

    ``signal`` is an :class:`AbortSignal` the backend must honour: once it fires,
    the backend raises ``signal.reason`` and closes its connection.
    """

    model: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    max_tokens: Optional[int] = None
    signal: Optional[AbortSignal] = None


@dataclass(frozen=True)
class ChatResponse:
    """A whole reply."""

    content: str
    finish_reason: str
    tool_calls: Sequence[ToolCall] = ()
    usage: Optional[Usage] = None


@dataclass(frozen=True)
class StreamChunk:
    """One piece of a streamed reply.

    ``content`` is a text delta. ``tool_calls`` holds calls only once they are
    complete; a backend never yields a call whose arguments are still arriving.
    """

    content: str = ""
    tool_calls: Sequence[ToolCall] = ()
    finish_reason: Optional[str] = None
    usage: Optional[Usage] = None


@dataclass(frozen=True)
class ErrorKind:
    """One row of :data:`ERROR_KINDS`."""

    kind: str
    code: str
    retryable: bool


#: The kinds of failure a backend reports, by kind. A quota exhausted is never
#: retryable, even where the provider sends it as a 429 beside a rate limit.
ERROR_KINDS: Mapping[str, ErrorKind] = {
    row.kind: row
    for row in (
        ErrorKind("rate_limit", "LLM_RATE_LIMITED", True),
        ErrorKind("quota", "LLM_QUOTA_EXCEEDED", False),
        ErrorKind("auth", "LLM_AUTH_FAILED", False),
        ErrorKind("overloaded", "LLM_OVERLOADED", True),
        ErrorKind("server_error", "LLM_SERVER_ERROR", True),
        ErrorKind("context_overflow", "LLM_CONTEXT_LENGTH_EXCEEDED", False),
    )
}


class LLMError(Exception):
    """A provider failure, classified.

    ``retry_after`` is in seconds, as :func:`time.sleep` takes them.
    ``details["kind"]`` always equals ``kind``. Build one from a kind with
    :meth:`from_kind`, which fills ``code`` and ``retryable`` from
    :data:`ERROR_KINDS`.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str,
        kind: str,
        retryable: bool,
        retry_after: Optional[float] = None,
        status: Optional[int] = None,
        provider: Optional[str] = None,
        details: Optional[Mapping[str, Any]] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.kind = kind
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status
        self.provider = provider
        merged = dict(details or {})
        merged["kind"] = kind
        self.details: Mapping[str, Any] = merged

    @classmethod
    def from_kind(
        cls,
        kind: str,
        message: str,
        *,
        retry_after: Optional[float] = None,
        status: Optional[int] = None,
        provider: Optional[str] = None,
        details: Optional[Mapping[str, Any]] = None,
    ) -> LLMError:
        """Build an error of a kind of :data:`ERROR_KINDS`."""
        try:
            row = ERROR_KINDS[kind]
        except KeyError:
            known = ", ".join(sorted(ERROR_KINDS))
            raise ValueError(f"unknown error kind {kind!r}; use one of: {known}") from None
        return cls(
            message,
            code=row.code,
            kind=row.kind,
            retryable=row.retryable,
            retry_after=retry_after,
            status=status,
            provider=provider,
            details=details,
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, code={self.code!r}, kind={self.kind!r}, "
            f"retryable={self.retryable!r}, retry_after={self.retry_after!r}, "
            f"status={self.status!r}, provider={self.provider!r})"
        )


class _Abort(Exception):
    """The reason given when :meth:`AbortController.abort` is called without one."""


class AbortSignal:
    """The read side of an abort: thread-safe, for sync and async code alike.

    Obtain one from :class:`AbortController`. Callbacks registered with
    :meth:`add_callback` run once, in the thread that aborts (or at once, if the
    signal already fired).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._reason: Optional[BaseException] = None
        self._callbacks: list[Callable[[BaseException], None]] = []

    @property
    def aborted(self) -> bool:
        """Whether the controller has aborted."""
        return self._event.is_set()

    @property
    def reason(self) -> Optional[BaseException]:
        """The exception the caller aborted with, or ``None`` before an abort.

        To raise it, call :meth:`raise_reason` (typed ``NoReturn``) rather than
        ``raise signal.reason``, which a strict type checker refuses for the ``None``.
        """
        return self._reason

    def raise_if_aborted(self) -> None:
        """Raise the abort reason, the very object given, if the signal fired."""
        if self._event.is_set():
            self.raise_reason()

    def raise_reason(self) -> NoReturn:
        """Raise the abort reason, the very object the caller gave.

        For the moment an abort is known to have happened (``signal.aborted`` was
        true, or an abort callback ran). Called before any abort, it raises
        :class:`RuntimeError`, since there is no reason to raise yet.
        """
        reason = self._reason
        if reason is None:
            raise RuntimeError(
                "raise_reason() called on a signal that has not fired; check signal.aborted "
                "first, or call raise_if_aborted()"
            )
        raise reason

    def add_callback(self, callback: Callable[[BaseException], None]) -> Callable[[], None]:
        """Call ``callback(reason)`` on abort; return a function that unregisters it."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return lambda: self._remove(callback)
            reason = self._reason
        assert reason is not None
        callback(reason)
        return lambda: None

    def _remove(self, callback: Callable[[BaseException], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

    def wait_sync(self, timeout: Optional[float] = None) -> bool:
        """Block until aborted or ``timeout`` seconds pass; return whether aborted."""
        return self._event.wait(timeout)

    async def wait(self) -> BaseException:
        """Wait, without blocking the loop, until aborted; return the reason."""
        import asyncio  # here, so that sync users never pay for importing it

        loop = asyncio.get_running_loop()
        future: asyncio.Future[BaseException] = loop.create_future()

        def wake(reason: BaseException) -> None:
            def settle() -> None:
                if not future.done():
                    future.set_result(reason)

            # The abort may come from any thread; only the loop may touch the future.
            try:
                loop.call_soon_threadsafe(settle)
            except RuntimeError:  # the loop closed in the meantime: nobody waits any more
                pass

        unregister = self.add_callback(wake)
        try:
            return await future
        finally:
            unregister()

    def _fire(self, reason: BaseException) -> bool:
        with self._lock:
            if self._event.is_set():
                return False
            self._reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(reason)
        return True

    def __repr__(self) -> str:
        state = f"aborted, reason={self._reason!r}" if self.aborted else "not aborted"
        return f"<AbortSignal {state}>"


class AbortController:
    """The write side of an abort: ``controller.abort(reason)`` fires ``controller.signal``."""

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: Optional[BaseException] = None) -> bool:
        """Fire the signal with ``reason`` (an exception instance); return whether it fired now.

        A second call changes nothing: the first reason stands.
        """
        if reason is None:
            reason = _Abort("aborted by the caller")
        if not isinstance(reason, BaseException):
            raise TypeError(
                f"abort reason must be an exception instance, got {type(reason).__name__}; "
                "wrap it, e.g. RuntimeError(reason)"
            )
        return self.signal._fire(reason)
