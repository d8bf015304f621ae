"""The library's own types: what a backend returns, raises and is cancelled with.

A backend either returns these frozen dataclasses, or the target's adapter hooks
convert its results into them. The cases read attributes only, so a backend's own
exception type passes as long as it carries the attributes of :class:`LLMError`.

Strategy for multi-turn: the conversation is a flat list of :class:`Message`, in the
normal form of OpenAI Chat, whatever the wire. An assistant message carries its
tool calls and the reasoning the provider needs back; each tool result is a message
of its own with role ``"tool"``. A backend for a wire that groups results (Anthropic,
Bedrock and Gemini put all of a turn's results in one user turn) merges consecutive
tool messages. Reasoning is a provider-neutral :class:`Reasoning` that keeps the
provider's opaque payload byte for byte, because every provider rejects a tool turn
whose reasoning came back altered or without its signature.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, NoReturn, Optional, Sequence

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
    "Reasoning",
    "ReasoningKind",
    "StreamChunk",
    "ToolCall",
    "ToolChoice",
    "ToolError",
    "ToolResult",
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
class ToolSpec:
    """A tool the model may call; ``parameters`` is a JSON Schema object."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True)
class ToolChoice:
    """Whether the model may, must, or must call one named tool.

    Use the constants :attr:`AUTO` and :attr:`REQUIRED`, or :meth:`tool` for one tool
    by name. Each wire spells it its own way (OpenAI ``"required"``, Anthropic and
    Bedrock ``any``, Gemini ``ANY`` with ``allowedFunctionNames``); Ollama has no
    such setting and a backend for it sends nothing.
    """

    mode: str
    name: Optional[str] = None

    AUTO: ClassVar[ToolChoice]
    REQUIRED: ClassVar[ToolChoice]
    MODES: ClassVar[frozenset[str]] = frozenset({"auto", "required", "tool"})

    def __post_init__(self) -> None:
        if self.mode not in self.MODES:
            raise ValueError(
                f"unknown tool choice mode {self.mode!r}; use ToolChoice.AUTO, "
                "ToolChoice.REQUIRED or ToolChoice.tool(name)"
            )
        if (self.mode == "tool") != bool(self.name):
            raise ValueError(
                "a tool choice names a tool exactly when its mode is 'tool'; "
                f"got mode {self.mode!r} with name {self.name!r}"
            )

    @classmethod
    def tool(cls, name: str) -> ToolChoice:
        """The model must call the tool ``name``."""
        return cls("tool", name)


ToolChoice.AUTO = ToolChoice("auto")
ToolChoice.REQUIRED = ToolChoice("required")


class ReasoningKind(str, enum.Enum):
    """What kind of provider reasoning a :class:`Reasoning` holds, and so which fields it uses."""

    #: Visible thinking and its ``signature``: an Anthropic ``thinking`` block, a Bedrock
    #: ``reasoningContent.reasoningText``, or Ollama's ``thinking`` (no signature).
    THINKING = "thinking"
    #: Thinking the provider encrypted, in ``data``: an Anthropic ``redacted_thinking``
    #: block, or Bedrock's ``reasoningContent.redactedContent`` (base64).
    REDACTED_THINKING = "redacted_thinking"
    #: An OpenAI Responses ``reasoning`` output item: ``id``, ``summary`` texts, and its
    #: ``encrypted_content`` in ``data``.
    REASONING_ITEM = "reasoning_item"
    #: A Gemini ``thoughtSignature`` (base64) in ``signature``, from the part it came on;
    #: ``text`` is that part's text when it was a thought (``"thought": true``).
    THOUGHT_SIGNATURE = "thought_signature"

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class Reasoning:
    """Reasoning a provider returned that must go back to it, unaltered, next turn.

    The opaque parts (``signature``, ``data``) are the provider's own strings, kept
    exactly as they came: a backend renders them back in the provider's shape and
    never edits them. ``provider`` names where the item came from, so that a backend
    talking to another provider (a migration, a fallback) can drop it instead of
    sending a signature that provider would reject. :class:`ReasoningKind` says which
    fields a kind uses; the others stay empty.
    """

    kind: str
    text: str = ""
    signature: str = ""
    data: str = ""
    id: str = ""
    summary: Sequence[str] = ()
    provider: str = ""

    def __post_init__(self) -> None:
        kind = self.kind.value if isinstance(self.kind, ReasoningKind) else self.kind
        if kind not in _REASONING_KINDS:
            known = ", ".join(sorted(_REASONING_KINDS))
            raise ValueError(f"unknown reasoning kind {self.kind!r}; use one of: {known}")


_REASONING_KINDS = frozenset(kind.value for kind in ReasoningKind)


@dataclass(frozen=True)
class ToolCall:
    """One complete tool call, its arguments already parsed from JSON.

    ``reasoning`` holds what a provider ties to this very call and needs back with
    it: Gemini's ``thoughtSignature``, which sits on the ``functionCall`` part.

    ``unparsed_arguments`` is set only when the turn ended normally but the
    provider's argument text for this call is not a JSON object (the model wrote
    broken JSON): it holds that text exactly, and ``arguments`` is then ``{}``. Such
    a call must never run; a loop answers it with a structured error result
    (``ToolError("invalid_arguments", ...)``) under its id. ``None`` for every call
    whose arguments parsed, and for a backend that drops such calls.
    """

    id: str
    name: str
    arguments: Mapping[str, Any]
    reasoning: Sequence[Reasoning] = ()
    unparsed_arguments: Optional[str] = None


@dataclass(frozen=True)
class ToolError:
    """A tool's structured failure, sent back to the model in place of a result.

    ``code`` is a stable machine-readable name (``"not_found"``); ``message`` says what
    went wrong in words a model can act on; ``retryable`` whether the same call may
    succeed later. :meth:`as_dict` is the JSON form wires send.
    """

    code: str
    message: str
    retryable: bool = False
    details: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> Mapping[str, Any]:
        """``{"code", "message", "retryable", "details"}``: the error as JSON data."""
        return {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "details": dict(self.details),
        }


@dataclass(frozen=True)
class ToolResult:
    """What running one tool call gave: its ``content``, or a structured ``error``.

    ``call_id`` is the id of the :class:`ToolCall` it answers and ``name`` that call's
    tool; every provider correlates by one or the other, so both are kept.
    """

    call_id: str
    name: str
    content: str = ""
    error: Optional[ToolError] = None

    @property
    def is_error(self) -> bool:
        """Whether the tool failed."""
        return self.error is not None

    @property
    def text(self) -> str:
        """What a wire that takes only text sends: the content, or the error as JSON."""
        if self.error is None:
            return self.content
        import json  # on use, not on import

        return json.dumps({"error": self.error.as_dict()}, ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class Message:
    """One message of the conversation sent to the model.

    ``Message("user", "...")`` is a plain message. An assistant turn that called
    tools carries its ``tool_calls`` and the ``reasoning`` its provider returned (build
    it with :meth:`from_response`); each result goes back as ``Message.tool(result)``.
    The roles are ``system``, ``user``, ``assistant`` and ``tool``.
    """

    role: str
    content: str = ""
    tool_calls: Sequence[ToolCall] = ()
    tool_result: Optional[ToolResult] = None
    reasoning: Sequence[Reasoning] = ()

    def __post_init__(self) -> None:
        if self.role == "tool" and self.tool_result is None:
            raise ValueError("a tool message needs its tool_result; build it with Message.tool(result)")
        if self.tool_result is not None and self.role != "tool":
            raise ValueError(f"only a tool message carries a tool_result, got role {self.role!r}")
        if (self.tool_calls or self.reasoning) and self.role != "assistant":
            raise ValueError(
                f"only an assistant message carries tool_calls or reasoning, got role {self.role!r}"
            )

    @classmethod
    def tool(cls, result: ToolResult) -> Message:
        """The message that sends one tool result back."""
        return cls("tool", result.text, tool_result=result)

    @classmethod
    def from_response(cls, response: ChatResponse) -> Message:
        """The assistant turn to send back: the reply's text, calls and reasoning, all of it."""
        return cls(
            "assistant",
            response.content,
            tool_calls=tuple(response.tool_calls),
            reasoning=tuple(response.reasoning),
        )


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
    the backend raises ``signal.reason`` and closes its connection. ``tool_choice``
    ``None`` leaves the choice to the provider's default (``auto`` everywhere).
    ``thinking`` asks the provider for its reasoning where the request must ask for it
    (Anthropic's ``thinking``, Gemini's ``thinkingConfig.includeThoughts``, Ollama's
    ``think``): a provider sends those shapes only to a request that asks.
    """

    model: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    max_tokens: Optional[int] = None
    signal: Optional[AbortSignal] = None
    tool_choice: Optional[ToolChoice] = None
    thinking: bool = False


@dataclass(frozen=True)
class ChatResponse:
    """A whole reply.

    ``reasoning`` is what the provider returned that must go back with this turn's
    tool results; :meth:`Message.from_response` carries it over.
    """

    content: str
    finish_reason: str
    tool_calls: Sequence[ToolCall] = ()
    usage: Optional[Usage] = None
    reasoning: Sequence[Reasoning] = ()


@dataclass(frozen=True)
class StreamChunk:
    """One piece of a streamed reply.

    ``content`` is a text delta. ``tool_calls`` holds calls only once they are
    complete; a backend never yields a call whose arguments are still arriving.
    ``reasoning`` likewise holds items only once complete (a thinking block's
    signature comes at its end); the caller collects them for the next turn.
    """

    content: str = ""
    tool_calls: Sequence[ToolCall] = ()
    finish_reason: Optional[str] = None
    usage: Optional[Usage] = None
    reasoning: Sequence[Reasoning] = ()


@dataclass(frozen=True)
class ErrorKind:
    """One row of :data:`ERROR_KINDS`."""

    kind: str
    code: str
    retryable: bool


#: The kinds of failure a backend reports, by kind. A quota exhausted is never
#: retryable, even where the provider sends it as a 429 beside a rate limit.
#: ``invalid_request`` is a request the provider refused as bad, where its status and
#: type say no more than that (a plain 400): a 400 that only its message calls an
#: exhausted quota or a prompt too long may be reported so, since wording is no contract.
ERROR_KINDS: Mapping[str, ErrorKind] = {
    row.kind: row
    for row in (
        ErrorKind("rate_limit", "LLM_RATE_LIMITED", True),
        ErrorKind("quota", "LLM_QUOTA_EXCEEDED", False),
        ErrorKind("auth", "LLM_AUTH_FAILED", False),
        ErrorKind("overloaded", "LLM_OVERLOADED", True),
        ErrorKind("server_error", "LLM_SERVER_ERROR", True),
        ErrorKind("context_overflow", "LLM_CONTEXT_LENGTH_EXCEEDED", False),
        ErrorKind("invalid_request", "LLM_INVALID_REQUEST", False),
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
