"""Backends over the official ``openai`` SDK's Chat Completions, as a careful user writes them.

``SyncOpenAIChatBackend`` wraps ``openai.OpenAI`` and ``AsyncOpenAIChatBackend`` wraps
``openai.AsyncOpenAI``, both with ``max_retries=0`` so each answer surfaces as it came.
They map the SDK's models and exceptions into the contract's types:

- a conversation goes back as the SDK's message params: an assistant turn with its
  ``tool_calls`` (arguments as JSON text), then one ``tool`` message per result naming
  the ``tool_call_id`` it answers, a ``ToolError`` as its JSON text (Chat Completions
  has no error flag); api.openai.com's Chat Completions returns no reasoning and takes
  none back, so a turn's reasoning is not sent;
- an OpenAI-compatible server's ``reasoning_content`` (DeepSeek's) is not in the SDK's
  models, which keep it as an extra field (``message.reasoning_content``,
  ``delta.reasoning_content``): it is read from there as one thinking item, whole at
  the end of a stream;
- a stream asks for usage with ``stream_options={"include_usage": True}``; tool-call
  deltas are gathered by ``index`` (by id where a compatible server sends a whole call
  with none, as Mistral does) and handed out only once the turn has ended; a call with
  no ``type`` (Mistral's) is a function call; a chunk with no choices, or a choice with
  no ``delta`` (Azure's filter annotations), carries nothing to gather;
- a turn with calls is a ``tool_calls`` turn whatever ``finish_reason`` said, and a
  ``length`` turn drops the call that was cut off;
- errors are told apart by status and ``e.code``: ``insufficient_quota`` is a quota
  even though it comes as a 429, ``context_length_exceeded`` is a 400 of its own (as is
  llama-server's ``exceed_context_size_error`` type), and
  the retry delay is read from ``retry-after-ms``, then ``retry-after``;
- a mid-stream ``data: {"error": ...}`` surfaces as ``openai.APIError`` with no status,
  classified by its ``code`` and ``type``;
- a connection that breaks before the answer is complete (a body cut short of its
  Content-Length, a stream cut before ``[DONE]``) is, status and type unknown, a
  retryable ``server_error``. The SDK raises ``APIConnectionError`` for a body cut
  short, but for a stream cut while it is read only from openai 3.14.0 on (openai/
  openai-python#3827); before it (2.48.0, the last release for Python 3.9, among
  them) ``Stream._iter_events`` (``openai/_streaming.py``, lines 52-53, and
  ``AsyncStream``'s at 161-162) reads the body with nothing around it, and httpx's
  ``RemoteProtocolError`` comes out as it is. So both are caught, by
  ``broken_connection``.

The SDK takes no abort signal. The async backend races each await against
``signal.wait()`` and cancels the SDK's task when the signal fires: httpx closes the
connection as the cancellation unwinds. The sync backend cannot interrupt a read from
the thread blocked in it; closing the response or the stream from the aborting thread
only closes the socket's file descriptor, which leaves the blocked ``recv`` (and the
connection) alive. So it records the sockets its connections open, through the httpcore
``trace`` request extension, and shuts them down from the aborting thread: the read
wakes, the SDK fails with ``APIConnectionError``, and the backend raises the reason.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator, Dict, Iterator, List, Mapping, Optional, Tuple

from conformance.abort import race_abort
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

from ._support import TracedSockets, broken_connection, cut_error

HAVE_OPENAI = importlib.util.find_spec("openai") is not None
if HAVE_OPENAI:  # imported here, once: a first import inside a case would eat its time budget
    import openai

if TYPE_CHECKING:
    from openai.types.chat import (
        ChatCompletionMessageParam,
        ChatCompletionMessageToolCallParam,
        ChatCompletionToolChoiceOptionParam,
    )

__all__ = ["HAVE_OPENAI", "AsyncOpenAIChatBackend", "SyncOpenAIChatBackend"]


#: What openai-python cannot tell its caller, so its adapters cannot: whether a stream
#: ended at ``data: [DONE]`` or at the end of a body a gateway closed properly after the
#: finish reason. Its ``Stream`` stops at either and says nothing (``openai/_streaming.py``),
#: so that cut reads as a whole turn.
DONE_UNSEEN = {
    "stream-cut/stream:clean-end-after-finish": (
        "openai-python stops a stream at data: [DONE] and at the end of its body alike and says "
        "which to no one (openai/_streaming.py): a body ended properly after the finish reason "
        "reads as a whole turn"
    )
}


#: ``error.code`` values that mean the money ran out, not the requests per minute.
QUOTA_CODES = frozenset(
    {
        "insufficient_quota",
        "credit_balance_exhausted",
        "organization_spend_limit_exceeded",
        "project_spend_limit_exceeded",
        "organization_usage_limit_exceeded",
    }
)
OVERLOAD_CODES = frozenset({"server_is_overloaded", "slow_down"})

FINISH_REASONS: Mapping[str, str] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


# -- the request ---------------------------------------------------------------------------


def message_param(message: Message) -> ChatCompletionMessageParam:
    """One message as the SDK's ``ChatCompletionMessageParam``."""
    result = message.tool_result
    if result is not None:
        return {"role": "tool", "tool_call_id": result.call_id, "content": result.text}
    if message.role == "assistant" and message.tool_calls:
        calls: List[ChatCompletionMessageToolCallParam] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": json.dumps(dict(call.arguments), ensure_ascii=False),
                },
            }
            for call in message.tool_calls
        ]
        return {"role": "assistant", "content": message.content or None, "tool_calls": calls}
    if message.role == "system":
        return {"role": "system", "content": message.content}
    if message.role == "assistant":
        return {"role": "assistant", "content": message.content}
    return {"role": "user", "content": message.content}


def tool_choice_param(choice: ToolChoice) -> ChatCompletionToolChoiceOptionParam:
    """``"auto"``, ``"required"``, or the one function by name."""
    if choice.mode == "tool":
        assert choice.name is not None
        return {"type": "function", "function": {"name": choice.name}}
    return "required" if choice.mode == "required" else "auto"


def create_params(request: ChatRequest, stream: bool) -> Dict[str, Any]:
    """The keyword arguments of ``client.chat.completions.create``."""
    params: Dict[str, Any] = {
        "model": request.model,
        "messages": [message_param(m) for m in request.messages],
    }
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                },
            }
            for t in request.tools
        ]
    if request.tool_choice is not None:
        params["tool_choice"] = tool_choice_param(request.tool_choice)
    if request.max_tokens is not None:
        params["max_completion_tokens"] = request.max_tokens
    if stream:
        params["stream"] = True
        params["stream_options"] = {"include_usage": True}
    return params


# -- errors --------------------------------------------------------------------------------


def error_kind(
    status: Optional[int], code: Optional[str], type_: Optional[str], message: str = ""
) -> Optional[str]:
    """The contract's kind, or ``None`` for a client error of no kind (a bad request).

    An overload also comes as a ``server_error`` whose code is null and whose message
    alone says "overloaded", in a 503 or inside a stream.
    """
    if code in QUOTA_CODES or type_ == "insufficient_quota":
        return "quota"  # before the 429: a quota comes as one too
    if status == 402:
        return "quota"  # Payment Required: OpenRouter's credits ran out (the SDK gives its code as "402")
    if code == "context_length_exceeded" or type_ == "exceed_context_size_error":
        return "context_overflow"  # the second is llama-server's type, its code the status
    overloaded = code is None and "overloaded" in message.lower()
    if code in OVERLOAD_CODES or type_ == "service_unavailable_error" or status == 503 or overloaded:
        return "overloaded"
    if status == 429 or code == "rate_limit_exceeded":
        return "rate_limit"
    if status in (401, 403) or code == "invalid_api_key":
        return "auth"
    if status is None or status >= 500:
        return "server_error"
    return None


def retry_after(headers: Any) -> Optional[float]:
    """Seconds to wait: ``retry-after-ms`` first, then ``retry-after``, as the SDK reads them."""
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) / divisor
        except ValueError:
            continue  # an HTTP-date: no delay we can use as such
    return None


def llm_error(exc: Any) -> LLMError:
    """An :class:`LLMError` from ``openai.APIStatusError`` or a mid-stream ``openai.APIError``."""
    status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
    kind = error_kind(status, exc.code, exc.type, str(exc.message or ""))
    details = {"type": exc.type, "code": exc.code, "request_id": getattr(exc, "request_id", None)}
    if kind is None:
        return LLMError(
            exc.message,
            code="LLM_INVALID_REQUEST",
            kind="invalid_request",
            retryable=False,
            status=status,
            provider="openai",
            details=details,
        )
    delay = None
    if kind == "rate_limit" and isinstance(exc, openai.APIStatusError):
        delay = retry_after(exc.response.headers)
    return LLMError.from_kind(
        kind, exc.message, retry_after=delay, status=status, provider="openai", details=details
    )


# -- the answer ----------------------------------------------------------------------------


def finish_reason(reason: Optional[str], calls: List[ToolCall]) -> str:
    """The contract's reason: calls present make a ``tool_calls`` turn, except one cut off."""
    if reason == "length":
        return "length"
    if calls:
        return "tool_calls"
    return FINISH_REASONS.get(reason or "", "error")


def usage_of(raw: Any) -> Optional[Usage]:
    if raw is None:
        return None
    return Usage(raw.prompt_tokens, raw.completion_tokens, raw.total_tokens)


def parse_call(call_id: str, name: str, arguments: str) -> Optional[ToolCall]:
    """A complete call; where its arguments are not a JSON object, the call with that text
    kept exactly in ``unparsed_arguments`` (the SDK hands the text over as it came)."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return ToolCall(call_id, name, parsed)
    return ToolCall(call_id, name, {}, unparsed_arguments=arguments)


def read_completion(completion: Any) -> ChatResponse:
    """A ``ChatCompletion`` as a :class:`ChatResponse`."""
    if not completion.choices:
        raise LLMError.from_kind("server_error", "the completion has no choices", provider="openai")
    choice = completion.choices[0]
    message = choice.message
    calls = []
    if choice.finish_reason != "length":  # a call cut off by the limit is no call
        for call in message.tool_calls or ():
            # Mistral's calls carry no type; the lenient SDK leaves it None.
            if call.type in ("function", None):
                parsed = parse_call(call.id, call.function.name, call.function.arguments)
                if parsed is not None:
                    calls.append(parsed)
    return ChatResponse(
        content=message.content or "",
        finish_reason=finish_reason(choice.finish_reason, calls),
        tool_calls=tuple(calls),
        usage=usage_of(completion.usage),
        reasoning=reasoning_of(getattr(message, "reasoning_content", None)),
    )


def reasoning_of(thinking: Any) -> Tuple[Reasoning, ...]:
    """``reasoning_content``, an extra field the SDK keeps as it came, as one thinking item."""
    if not isinstance(thinking, str) or not thinking:
        return ()
    return (Reasoning(ReasoningKind.THINKING.value, text=thinking, provider="openai"),)


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: List[str] = field(default_factory=list)


class _Gather:
    """Takes in ``ChatCompletionChunk`` objects; hands out text now, calls at the end."""

    def __init__(self) -> None:
        self.partials: Dict[int, _PartialCall] = {}
        self.reason: Optional[str] = None
        self.usage: Optional[Usage] = None
        self.thinking: List[str] = []

    def feed(self, chunk: Any) -> str:
        """Gather one chunk; return its text."""
        if chunk.usage is not None:
            self.usage = usage_of(chunk.usage)
        text = []
        for choice in chunk.choices:
            delta = choice.delta
            if delta is None:
                continue  # an Azure content filter's annotation: results, no delta (openai-python#1677)
            thinking = getattr(delta, "reasoning_content", None)
            if isinstance(thinking, str):
                self.thinking.append(thinking)
            if delta.content:
                text.append(delta.content)
            for fragment in delta.tool_calls or ():
                partial = self.partials.setdefault(self.call_index(fragment), _PartialCall())
                partial.id = fragment.id or partial.id
                if fragment.function is not None:
                    partial.name = fragment.function.name or partial.name
                    if fragment.function.arguments:
                        partial.arguments.append(fragment.function.arguments)
            if choice.finish_reason is not None:
                self.reason = choice.finish_reason
        return "".join(text)

    def call_index(self, fragment: Any) -> int:
        """The call a fragment belongs to: its ``index``, or, where a server sends each call
        whole with none (Mistral; the lenient SDK leaves it ``None``), the call its id names."""
        if fragment.index is not None:
            return int(fragment.index)
        for index, partial in self.partials.items():
            if fragment.id and partial.id == fragment.id:
                return index
        if not fragment.id and self.partials:
            return max(self.partials)
        return max(self.partials, default=-1) + 1

    def last_chunk(self) -> StreamChunk:
        """The chunk that ends the turn: complete calls, the reason and the usage."""
        if self.reason is None:
            # The SDK ends quietly when the body ends without [DONE]; the turn did not.
            raise LLMError.from_kind(
                "server_error", "the stream ended before a finish_reason", provider="openai"
            )
        calls = []
        if self.reason != "length":
            for index in sorted(self.partials):
                p = self.partials[index]
                parsed = parse_call(p.id, p.name, "".join(p.arguments))
                if parsed is not None:
                    calls.append(parsed)
        return StreamChunk(
            tool_calls=tuple(calls),
            finish_reason=finish_reason(self.reason, calls),
            usage=self.usage,
            reasoning=reasoning_of("".join(self.thinking)),
        )


# -- the sync backend ----------------------------------------------------------------------


def _timeout(read_timeout: Optional[float]) -> Any:
    """The client's timeout: ten seconds, and ``read_timeout`` for each read where given (the
    latency cases' setting; httpx's read timeout is per read, as the cases mean it)."""
    if read_timeout is None:
        return 10.0
    return openai.Timeout(10.0, read=read_timeout)  # the SDK's own httpx's Timeout


class SyncOpenAIChatBackend:
    """A sync backend over ``openai.OpenAI().chat.completions``.

    ``strict`` validates every reply against the SDK's models (``_strict_response_validation``),
    so a field the wire omits fails; off, the SDK reads replies as it does by default.
    """

    def __init__(
        self,
        base_url: str,
        headers: Optional[Mapping[str, str]] = None,
        *,
        strict: bool = True,
        read_timeout: Optional[float] = None,
    ) -> None:
        self.sockets = TracedSockets()
        self.client = openai.OpenAI(
            api_key="test",
            base_url=base_url,
            max_retries=0,
            timeout=_timeout(read_timeout),
            _strict_response_validation=strict,
            default_headers=dict(headers or {}),
            http_client=openai.DefaultHttpxClient(event_hooks={"request": [self.sockets.on_request]}),
        )

    def _on_abort(self, signal: Optional[AbortSignal]) -> Any:
        return signal.add_callback(self.sockets.shutdown) if signal is not None else (lambda: None)

    def chat(self, request: ChatRequest) -> ChatResponse:
        signal = request.signal
        unregister = self._on_abort(signal)
        try:
            completion = self.client.chat.completions.create(**create_params(request, False))
        except Exception as exc:
            if signal is not None and signal.aborted:
                signal.raise_reason()
            if isinstance(exc, openai.APIStatusError):
                raise llm_error(exc) from exc
            if broken_connection(exc):
                raise cut_error(exc, "openai") from exc
            raise
        finally:
            unregister()
        return read_completion(completion)

    def chat_stream(self, request: ChatRequest) -> Iterator[StreamChunk]:
        signal = request.signal
        unregister = self._on_abort(signal)
        gather = _Gather()
        try:
            with self.client.chat.completions.create(**create_params(request, True)) as stream:
                for chunk in stream:
                    text = gather.feed(chunk)
                    if text:
                        yield StreamChunk(content=text)
        except Exception as exc:
            if signal is not None and signal.aborted:
                signal.raise_reason()
            if broken_connection(exc):
                raise cut_error(exc, "openai") from exc  # cut before [DONE], or reset
            if isinstance(exc, openai.APIError):
                raise llm_error(exc) from exc  # a status, or an error event after the 200
            raise
        finally:
            unregister()
        yield gather.last_chunk()

    def close(self) -> None:
        self.client.close()


# -- the async backend ---------------------------------------------------------------------


class AsyncOpenAIChatBackend:
    """An async backend over ``openai.AsyncOpenAI().chat.completions`` (``strict`` as the sync one's).

    ``max_retries`` is the SDK's own retry layer: 0 so each answer surfaces as it came, or
    its default (2) on a target that says it retries.
    """

    def __init__(
        self,
        base_url: str,
        headers: Optional[Mapping[str, str]] = None,
        *,
        strict: bool = True,
        max_retries: int = 0,
        read_timeout: Optional[float] = None,
    ) -> None:
        self.client = openai.AsyncOpenAI(
            api_key="test",
            base_url=base_url,
            max_retries=max_retries,
            timeout=_timeout(read_timeout),
            _strict_response_validation=strict,
            default_headers=dict(headers or {}),
        )

    async def chat(self, request: ChatRequest) -> ChatResponse:
        create = self.client.chat.completions.create(**create_params(request, False))
        try:
            completion = await race_abort(create, request.signal)
        except openai.APIStatusError as exc:
            raise llm_error(exc) from exc
        except openai.APIConnectionError as exc:
            raise cut_error(exc, "openai") from exc  # a body cut short of its Content-Length
        return read_completion(completion)

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        signal = request.signal
        gather = _Gather()
        try:
            create = self.client.chat.completions.create(**create_params(request, True))
            stream = await race_abort(create, signal)
            try:
                while True:
                    try:
                        chunk = await race_abort(stream.__anext__(), signal)
                    except StopAsyncIteration:
                        break
                    text = gather.feed(chunk)
                    if text:
                        yield StreamChunk(content=text)
            finally:
                await stream.close()
        except Exception as exc:
            if broken_connection(exc):  # raw httpx before openai 3.14: see the module's docstring
                raise cut_error(exc, "openai") from exc  # cut before [DONE], or reset
            if isinstance(exc, openai.APIError):
                raise llm_error(exc) from exc  # a status, or an error event after the 200
            raise
        yield gather.last_chunk()

    async def aclose(self) -> None:
        await self.client.close()
