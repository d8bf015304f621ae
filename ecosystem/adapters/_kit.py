"""What the backend adapters share: the abort race, the error mapping, the OpenAI-shaped messages.

Strategy: an adapter shows what its library does, so it adds as little as it can.
Each is an async backend whose ``chat`` and ``chat_stream`` call the library once and
translate what came back; the abort is raced with the kit's own :func:`race_abort`
(the library's task is cancelled, and an httpx-based client closes its connection as
it unwinds). What a provider's failure means is the provider's business, not the
library's: given the status, headers and body the library surfaced, the kind is
read by the kit's :func:`~conformance.provider_error` (as the reference backend for
that wire reads it), so a row fails on an error only where the library lost what a
careful user needs.
Retries are turned off through each library's own knob, so that each answer
surfaces as it came and a retry the library makes on its own shows in the table. A
library that retries by default has a second row, ``(default retries)``, built as it
ships (:func:`default_retries`): the kit's faults then relent as a provider's would, and
its retry layer is judged on the scenarios a retry changes.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass
from typing import Any, AsyncIterator, Dict, FrozenSet, List, Mapping, Optional, Tuple

from conformance import (
    ERROR_KINDS,
    BackendConformanceTarget,
    ChatRequest,
    ChatResponse,
    LLMError,
    Reasoning,
    StreamChunk,
    ToolCall,
    Usage,
    provider_error,
    race_abort,
    race_abort_iter,
)

__all__ = [
    "RETRY_SCENARIOS",
    "default_retries",
    "LIBRARY_TRANSPORTS",
    "TRANSPORTS",
    "TransportRule",
    "ANTHROPIC_STOP",
    "AsyncAdapter",
    "anthropic_body",
    "anthropic_messages",
    "call",
    "last_chunk",
    "response",
    "tool_calls",
    "usage",
    "openai_messages",
    "openai_tools",
    "parse_arguments",
    "sign_calls",
    "call_signature",
    "with_signatures",
    "public_error",
    "class_error",
    "READINGS",
    "status_error",
    "stream_error",
    "transport_error",
]

def class_error(
    wire: str, kind: str, message: str, status: Optional[int], retry_after: Optional[float] = None
) -> LLMError:
    """The error a library's exception class names: the contract's ``kind`` where it is one of
    ERROR_KINDS, else a non-retryable error under the library's own kind name."""
    if kind in ERROR_KINDS:
        return LLMError.from_kind(
            kind, message, retry_after=retry_after, status=status, provider=wire, details={"kind": kind}
        )
    return LLMError(
        message,
        code="LLM_INVALID_REQUEST",
        kind=kind,
        retryable=False,
        status=status,
        provider=wire,
        details={"kind": kind},
    )


def status_error(wire: str, status: int, headers: Mapping[str, str], raw: bytes) -> LLMError:
    """The contract's error for a failure status, as the kit reads the provider's reply."""
    return provider_error(wire, raw, status=status, headers=headers)


def public_error(
    wire: str,
    *,
    status: Optional[int],
    headers: Mapping[str, str],
    body: Any,
    signalled: Optional[LLMError] = None,
) -> Optional[LLMError]:
    """The contract's error from what a library's public exception exposes, the same for every library.

    ``status`` (the provider's, where the library keeps it apart from its own, as
    LiteLLM's ``provider_status_code``), ``headers`` and ``body`` (the provider's error
    body, bytes or parsed) are read as the reference backend for ``wire`` reads the
    provider's reply: with a status as a failed request, without one as an error inside
    a stream. ``signalled`` is the error the exception's class states, for a library that
    documents its classes as the retry signal (LiteLLM's Router retries by class): where
    the class says retryable and the bytes do not, or the other way round, the class is
    what its user acts on, and that error stands. Where the exception kept no body, the class's
    error (``None`` without one).
    """
    empty = body is None or body == b"" or body == {}
    if empty and (signalled is not None or status is None):
        return signalled
    if status is None:
        read = stream_error(wire, body)
    else:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        read = status_error(wire, status, headers, raw)
    if signalled is not None and signalled.retryable != read.retryable:
        # The class's kind is what its user acts on; a delay the body carries is still there.
        if signalled.retry_after is None:
            signalled.retry_after = read.retry_after
        return signalled
    return read


def stream_error(wire: str, body: Any) -> LLMError:
    """The contract's error for a failure reported inside a stream (no status).

    ``body`` is what the stream carried: the error object for the JSON wires, the
    error's text for Ollama's, ``{"__type": name, "message": text}`` for Bedrock's.
    """
    return provider_error(wire, body)


#: The transports the table's libraries send through, each by the top-level modules its
#: errors are raised from (httpx2 and httpcore2: the fork the openai and anthropic SDKs
#: ship on; requests: urllib3's; botocore: its own sender over urllib3).
TRANSPORTS: Mapping[str, Tuple[str, ...]] = {
    "httpx": ("httpx", "httpcore", "h11", "h2"),
    "httpx2": ("httpx2", "httpcore2", "h11", "h2"),
    "aiohttp": ("aiohttp",),
    "urllib3": ("urllib3", "requests"),
    "botocore": ("botocore", "urllib3"),
}


@dataclass(frozen=True)
class TransportRule:
    """How a library is judged where a connection fails or a body is cut short.

    ``transports`` are the keys of :data:`TRANSPORTS` it sends through. ``own`` are the
    classes (module, name; a subclass counts) its documentation tells its user to catch
    for a connection failure. Where it names some, a transport's error that reaches the
    user raw breaks that promise: the adapter lets it through unread and the case fails
    (a library bug, filed). Where it names none, its transports' errors are its interface:
    read, like its own, as the contract's retryable ``server_error``. ``raises`` are classes
    its code raises for a connection failure without documenting them, read alike. ``source``
    is where the library says so.
    """

    transports: Tuple[str, ...]
    own: FrozenSet[Tuple[str, str]]
    source: str
    raises: FrozenSet[Tuple[str, str]] = frozenset()


_OPENAI_DOC = (
    "openai's README, Handling errors: a connection failure raises a subclass of "
    "openai.APIConnectionError, and in a stream an HTTPX failure raises APIConnectionError, "
    '"Catch these SDK exceptions instead of raw HTTPX exceptions"'
)
_ANTHROPIC_DOC = (
    "anthropic's README and API reference, Handling errors: when the library cannot connect "
    "(network problems or a timeout) a subclass of anthropic.APIConnectionError is raised"
)
_LANGCHAIN_DOC = (
    "langchain_core/exceptions.py: ModelConnectionError, raised when a model provider cannot be "
    "reached (is_retryable); the integration's own classes also inherit the SDK's"
)
_BOTOCORE_DOC = (
    "botocore/exceptions.py: HTTPClientError (ResponseStreamingError, ConnectionClosedError, "
    "ReadTimeoutError) and ConnectionError (EndpointConnectionError), raised for urllib3's failures"
)
_BOTOCORE_OWN = frozenset(
    {("botocore", "HTTPClientError"), ("botocore", "ConnectionError"), ("botocore", "IncompleteReadError")}
)
#: Each library's rule, by the name its adapter gives (``transport_rule``; by default the
#: adapter module's ``LIBRARY``). A library that hands on its provider SDK's errors (any-llm's
#: default mode, a LangChain integration that wraps none) is judged by that SDK's rule.
LIBRARY_TRANSPORTS: Mapping[str, TransportRule] = {
    "openai": TransportRule(("httpx2",), frozenset({("openai", "APIConnectionError")}), _OPENAI_DOC),
    "anthropic": TransportRule(("httpx2",), frozenset({("anthropic", "APIConnectionError")}), _ANTHROPIC_DOC),
    "ollama": TransportRule(
        ("httpx",),
        frozenset(),
        "ollama's README, Errors: ResponseError for an error status or an error detected while "
        "streaming, and no class for a connection failure (its client turns only httpx.ConnectError "
        "into Python's ConnectionError, ollama/_client.py:148-149)",
        raises=frozenset({("builtins", "ConnectionError")}),
    ),
    "google-genai": TransportRule(
        ("httpx", "aiohttp"),
        frozenset(),
        "google-genai's README, Error Handling: APIError for errors raised by the model service; "
        "its retry options retry httpx's and aiohttp's own connection errors "
        "(google/genai/_api_client.py:73-82)",
    ),
    "cohere": TransportRule(
        ("httpx",),
        frozenset(),
        "cohere's client raises ApiError for an error status and lets httpx's errors through, which "
        "its retry option names (cohere/core/http_client.py:537, retry_remote_protocol_errors)",
    ),
    "boto3": TransportRule(
        ("botocore",),
        _BOTOCORE_OWN,
        _BOTOCORE_DOC,
    ),
    "litellm": TransportRule(
        ("httpx", "aiohttp"),
        frozenset(
            {("litellm", "APIConnectionError"), ("litellm", "Timeout"), ("openai", "APIConnectionError")}
        ),
        "LiteLLM's exception mapping docs: every provider's failure is raised as one of its "
        "OpenAI-compatible classes, APIConnectionError for a connection failure "
        "(litellm/exceptions.py)",
    ),
    "any-llm-sdk": TransportRule(
        ("httpx", "httpx2", "aiohttp"),
        frozenset({("any_llm", "AnyLLMError")}),
        "any_llm/exceptions.py: AnyLLMError, the base of every error any-llm raises with "
        "ANY_LLM_UNIFIED_EXCEPTIONS set (the original kept in original_exception)",
    ),
    "langchain-anthropic": TransportRule(
        ("httpx2",),
        frozenset({("anthropic", "APIConnectionError"), ("langchain_core", "ModelConnectionError")}),
        _LANGCHAIN_DOC + "; " + _ANTHROPIC_DOC,
    ),
    "langchain-openai": TransportRule(
        ("httpx2",),
        frozenset({("openai", "APIConnectionError"), ("langchain_core", "ModelConnectionError")}),
        _LANGCHAIN_DOC + "; " + _OPENAI_DOC,
    ),
    "langchain-aws": TransportRule(
        ("botocore",),
        _BOTOCORE_OWN | {("builtins", "ConnectionError")},
        _BOTOCORE_DOC + "; ChatBedrockConverse raises Python's ConnectionError for a stream that "
        "ended before messageStop (langchain_aws/chat_models/bedrock_converse.py, \"Incomplete "
        "Bedrock response stream\")",
    ),
}
LIBRARY_TRANSPORTS = {
    **LIBRARY_TRANSPORTS,
    # ChatGoogleGenerativeAI wraps only google-genai's status errors: a transport failure
    # reaches its user as google-genai hands it over.
    "langchain-google-genai": LIBRARY_TRANSPORTS["google-genai"],
}


def _classes(exc: BaseException) -> List[Tuple[str, str]]:
    return [(k.__module__.split(".")[0], k.__name__) for k in type(exc).__mro__]


def transport_error(exc: BaseException, wire: str, library: str) -> Optional[LLMError]:
    """The contract's retryable ``server_error`` where ``exc``, as ``library`` raised it, is a
    transport failure its rule (:data:`LIBRARY_TRANSPORTS`) reads as one, else ``None``.

    Only the exception the library raised counts, not what it was raised while handling: a
    crash on the way out of a broken stream is that crash.
    """
    try:
        rule = LIBRARY_TRANSPORTS[library]
    except KeyError:
        raise ValueError(
            f"no transport rule for {library!r}: add its transports and the class it documents for a "
            f"connection failure to LIBRARY_TRANSPORTS (known: {', '.join(sorted(LIBRARY_TRANSPORTS))})"
        ) from None
    classes = _classes(exc)
    if any(c in rule.own or c in rule.raises for c in classes):
        how = "the library's own connection error"
    elif not rule.own and classes[0][0] in {m for t in rule.transports for m in TRANSPORTS[t]}:
        how = "its transport's error, which the library documents no class of its own for"
    else:
        return None
    message = f"the connection failed or was cut short ({how}): {type(exc).__name__}: {exc}"
    details = {"kind": "server_error", "transport": True}
    return LLMError.from_kind("server_error", message, provider=wire, details=details)


def parse_arguments(raw: Any) -> Dict[str, Any]:
    """Arguments as a dict: a dict as it is, JSON text parsed (raising where it does not parse)."""
    if isinstance(raw, Mapping):
        return dict(raw)
    parsed = json.loads(raw or "{}")
    if not isinstance(parsed, dict):
        raise ValueError(f"arguments are not an object: {raw!r}")
    return parsed


def openai_tools(request: ChatRequest) -> List[Dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)},
        }
        for t in request.tools
    ]


def openai_messages(request: ChatRequest) -> List[Dict[str, Any]]:
    """The conversation as Chat Completions messages."""
    out: List[Dict[str, Any]] = []
    for message in request.messages:
        if message.role == "tool" and message.tool_result is not None:
            result = message.tool_result
            out.append({"role": "tool", "tool_call_id": result.call_id, "content": result.text})
        elif message.role == "assistant" and message.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": message.content or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))},
                        }
                        for c in message.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": message.role, "content": message.content})
    return out


def sign_calls(request: ChatRequest, messages: List[Dict[str, Any]], field: str) -> List[Dict[str, Any]]:
    """``messages`` (from :func:`openai_messages`) with each call's Gemini thought signature put back
    where its library reads it: ``field`` is ``"provider_specific_fields"`` (LiteLLM) or
    ``"extra_content"`` (any-llm, under ``"google"``)."""
    assistants = [m for m in request.messages if m.role == "assistant" and m.tool_calls]
    sent = [m for m in messages if m["role"] == "assistant" and m.get("tool_calls")]
    for message, out in zip(assistants, sent):
        for call, part in zip(message.tool_calls, out["tool_calls"]):
            signed = [r.signature for r in call.reasoning if r.kind == "thought_signature" and r.signature]
            if not signed:
                continue
            if field == "extra_content":
                part["extra_content"] = {"google": {"thought_signature": signed[0]}}
            else:
                part[field] = {"thought_signature": signed[0]}
    return messages


def usage(input_tokens: Any, output_tokens: Any, total: Any = None) -> Optional[Usage]:
    if input_tokens is None and output_tokens is None:
        return None
    i, o = int(input_tokens or 0), int(output_tokens or 0)
    return Usage(i, o, int(total) if total is not None else i + o)


async def call(request: ChatRequest, awaitable: Any) -> Any:
    """``awaitable`` raced against the request's abort signal."""
    return await race_abort(awaitable, request.signal)


class AsyncAdapter:
    """An async backend over one library: subclasses give ``complete`` and ``events``.

    ``complete(request)`` returns a :class:`ChatResponse`; ``events(request)`` yields
    :class:`StreamChunk` items; ``error(exc)`` turns the library's exception into the
    contract's (or returns ``None`` to let it through).
    """

    async def complete(self, request: ChatRequest) -> ChatResponse:
        raise NotImplementedError

    def events(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        raise NotImplementedError

    def error(self, exc: BaseException) -> Optional[BaseException]:
        return None

    #: The wire this adapter's library speaks, for the errors it maps.
    wire = ""
    #: The library whose rule (:data:`LIBRARY_TRANSPORTS`) judges a transport failure; by
    #: default the adapter module's ``LIBRARY``.
    transport_rule = ""

    def _mapped(self, request: ChatRequest, exc: BaseException) -> Optional[BaseException]:
        if _is_abort(request, exc):
            return None
        mapped = self.error(exc)
        if mapped is None or mapped is exc:
            library = self.transport_rule or getattr(sys.modules[type(self).__module__], "LIBRARY", "")
            return transport_error(exc, self.wire, library)
        return mapped

    async def chat(self, request: ChatRequest) -> ChatResponse:
        try:
            return await race_abort(self.complete(request), request.signal)
        except Exception as exc:
            mapped = self._mapped(request, exc)
            if mapped is None:
                raise
            raise mapped from exc

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in race_abort_iter(self.events(request), request.signal):
                yield chunk
        except Exception as exc:
            mapped = self._mapped(request, exc)
            if mapped is None:
                raise
            raise mapped from exc


def _is_abort(request: ChatRequest, exc: BaseException) -> bool:
    signal = request.signal
    return signal is not None and signal.aborted and exc is signal.reason


#: How an adapter turns what its library handed over into the contract's turn, by what the
#: library is. ``"backend"``: a provider's own SDK, which hands over the provider's stop
#: reason and blocks as sent; the adapter is then the user's backend over it, and does what
#: the contract asks of one (map the stop reason, call a turn with calls a tool turn, drop
#: the call a length turn cut off). ``"as-given"``: a library that promises normalized
#: output (LiteLLM's and any-llm's OpenAI-shaped finish reasons and calls): what it hands
#: its user goes to the kit unrepaired. ``"finish-derived"``: a library with no normalized
#: finish reason (LangChain: the provider's own in ``response_metadata``): the adapter maps
#: it, and calls a turn with calls a tool turn, but hands the calls on as the library gave them.
READINGS = ("backend", "as-given", "finish-derived")


def tool_calls(raw: Any, finish: str, reading: str = "backend") -> List[ToolCall]:
    """The calls of a turn from ``(id, name, arguments)`` as the library gave them.

    Arguments the library left as text are parsed here; where they do not parse, a
    ``backend`` reading of a ``length`` turn drops the call (it was cut off), and
    otherwise the call is kept with its raw text, as the contract asks. Arguments the
    library already made a dict are taken as they are: what it did to them is what the
    table judges.
    """
    calls: List[ToolCall] = []
    for call_id, name, arguments in raw:
        if isinstance(arguments, Mapping):
            calls.append(ToolCall(call_id, name, dict(arguments)))
            continue
        try:
            calls.append(ToolCall(call_id, name, parse_arguments(arguments)))
        except ValueError:
            if finish != "length" or reading != "backend":
                calls.append(ToolCall(call_id, name, {}, unparsed_arguments=str(arguments)))
    return calls


def response(
    text: str,
    finish: str,
    raw_calls: Any,
    used: Optional[Usage],
    reasoning: Any = (),
    reading: str = "backend",
) -> ChatResponse:
    """A whole turn, read as ``reading`` says (:data:`READINGS`): for a provider's SDK, a turn
    with calls is a ``tool_calls`` turn unless the provider said it was cut off, filtered,
    refused or failed, and a length turn's last call is dropped; a normalizing library's
    turn goes on as it came."""
    if reading not in READINGS:
        raise ValueError(f"reading {reading!r} is none of {READINGS}")
    raw = list(raw_calls)
    calls = tool_calls(raw, finish, reading)
    if reading == "backend" and finish == "length" and calls and len(calls) == len(raw):
        # A turn cut off by the token limit ends inside its last call, whatever shape
        # the provider's SDK gave its arguments in (a dict may be a cut-off input closed up).
        calls = calls[:-1]
    if reading != "as-given" and calls and finish not in ("length", "content_filter", "refusal", "error"):
        finish = "tool_calls"
    return ChatResponse(text, finish, tuple(calls), used, tuple(reasoning))


def last_chunk(
    finish: str, raw_calls: Any, used: Optional[Usage], reasoning: Any = (), reading: str = "backend"
) -> StreamChunk:
    """The chunk that ends a stream: the calls, complete, and how the turn finished."""
    whole = response("", finish, raw_calls, used, reasoning, reading)
    return StreamChunk("", whole.tool_calls, whole.finish_reason, used, whole.reasoning)


#: Chat Completions' finish reasons, as the contract's.
OPENAI_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
}


def openai_turn(done: Any, reading: str = "backend") -> ChatResponse:
    """A Chat Completions reply (the openai SDK's model, or a library's look-alike) as a turn."""
    choice = done.choices[0]
    message = choice.message
    parts = list(getattr(message, "tool_calls", None) or ())
    calls = [(c.id, c.function.name, c.function.arguments) for c in parts]
    used = getattr(done, "usage", None)
    counted = used and usage(used.prompt_tokens, used.completion_tokens, used.total_tokens)
    turn = response(
        message.content or "", OPENAI_FINISH.get(choice.finish_reason or "", "stop"), calls, counted,
        reading=reading,
    )
    return with_signatures(turn, {c.id: call_signature(c) for c in parts})


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def call_signature(part: Any) -> Optional[str]:
    """The Gemini thought signature an OpenAI-shaped library hands its user on a tool call, or ``None``.

    LiteLLM keeps it in the call's ``provider_specific_fields["thought_signature"]``, any-llm in
    its ``extra_content["google"]["thought_signature"]`` (each base64, as the provider sent it).
    """
    specific = _field(part, "provider_specific_fields")
    if isinstance(specific, Mapping) and specific.get("thought_signature"):
        return str(specific["thought_signature"])
    extra = _field(part, "extra_content")
    google = extra.get("google") if isinstance(extra, Mapping) else None
    if isinstance(google, Mapping) and google.get("thought_signature"):
        return str(google["thought_signature"])
    return None


def with_signatures(turn: ChatResponse, signatures: Mapping[str, Optional[str]]) -> ChatResponse:
    """``turn`` with each call carrying the thought signature its library handed on with it."""
    from dataclasses import replace

    calls = tuple(
        replace(c, reasoning=(Reasoning("thought_signature", signature=signatures[c.id], provider="gemini"),))
        if signatures.get(c.id)
        else c
        for c in turn.tool_calls
    )
    return replace(turn, tool_calls=calls)


async def openai_chunks(
    stream: Any, thoughts: Optional[Thoughts] = None, reading: str = "backend", wire: str = "openai-chat"
) -> AsyncIterator[StreamChunk]:
    """Chat Completions stream chunks (the SDK's, or a look-alike) as the contract's: calls whole at the end.

    ``thoughts`` gathers the reasoning a library adds to each delta, handed over at the end.
    A stream that ended without any ``finish_reason`` was cut short, however cleanly it
    closed: a ``backend`` reading (a careful user's backend on the provider's SDK, which
    ends its iteration at the end of the body as at ``[DONE]``) raises the contract's
    retryable ``server_error`` there; any other reading hands the end on as the library
    gave it, with no finish reason, since inventing one would hide the cut.
    """
    pending: Dict[int, List[Any]] = {}
    finish: Optional[str] = None
    counted = None
    async for chunk in stream:
        used = getattr(chunk, "usage", None)
        if used:
            counted = usage(used.prompt_tokens, used.completion_tokens, used.total_tokens)
        for choice in chunk.choices or ():
            delta = choice.delta
            if delta is not None and delta.content:
                yield StreamChunk(delta.content)
            if delta is not None and thoughts is not None:
                thoughts.add(delta)
            for part in (getattr(delta, "tool_calls", None) or ()) if delta is not None else ():
                slot = pending.setdefault(part.index or 0, ["", "", "", None])
                if part.id:
                    slot[0] = part.id
                slot[3] = call_signature(part) or slot[3]
                if part.function and part.function.name:
                    slot[1] = part.function.name
                if part.function and part.function.arguments:
                    slot[2] += part.function.arguments
            if choice.finish_reason:
                finish = OPENAI_FINISH.get(choice.finish_reason, "stop")
    found = thoughts.items() if thoughts is not None else []
    calls = [tuple(pending[i][:3]) for i in sorted(pending)]
    signatures = {pending[i][0]: pending[i][3] for i in pending}
    if finish is None:
        if reading == "backend":
            raise LLMError.from_kind(
                "server_error",
                "the stream ended before any finish_reason: the turn was cut short",
                provider=wire,
                details={"kind": "server_error"},
            )
        whole = with_signatures(response("", "stop", calls, counted, found, reading), signatures)
        if whole.tool_calls or found or counted is not None:
            yield StreamChunk("", whole.tool_calls, None, counted, whole.reasoning)
        return
    whole = with_signatures(response("", finish, calls, counted, found, reading), signatures)
    yield StreamChunk("", whole.tool_calls, whole.finish_reason, counted, whole.reasoning)


class Thoughts:
    """Reasoning gathered from a stream's deltas; a subclass says where its library puts it."""

    def add(self, delta: Any) -> None:
        raise NotImplementedError

    def items(self) -> List[Any]:
        raise NotImplementedError


def retry_after(headers: Mapping[str, str]) -> Optional[float]:
    """Seconds from ``retry-after-ms``, then ``retry-after`` (seconds only), or ``None``."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            return float(headers[name]) / scale
        except (KeyError, ValueError):
            continue
    return None


#: Claude's stop reasons, as the contract's finish reasons.
ANTHROPIC_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "refusal",
}


def anthropic_messages(request: ChatRequest) -> List[Dict[str, Any]]:
    """The conversation as Messages API turns: tool results go back in one user turn."""
    out: List[Dict[str, Any]] = []
    for message in request.messages:
        if message.role == "tool" and message.tool_result is not None:
            result = message.tool_result
            block = {"type": "tool_result", "tool_use_id": result.call_id, "content": result.text}
            if result.error is not None:
                block["is_error"] = True
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif message.role == "assistant" and (message.tool_calls or message.reasoning):
            blocks: List[Dict[str, Any]] = []
            for item in message.reasoning:
                if item.kind == "thinking":
                    blocks.append({"type": "thinking", "thinking": item.text, "signature": item.signature})
                elif item.kind == "redacted_thinking":
                    blocks.append({"type": "redacted_thinking", "data": item.data})
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.arguments)}
                for c in message.tool_calls
            ]
            out.append({"role": "assistant", "content": blocks})
        elif message.role != "system":
            out.append({"role": message.role, "content": message.content})
    return out


def anthropic_body(request: ChatRequest) -> Dict[str, Any]:
    """A Messages API body but its ``model``: Bedrock's InvokeModel takes it as it is."""
    body: Dict[str, Any] = {"max_tokens": request.max_tokens or 1024, "messages": anthropic_messages(request)}
    system = "\n".join(m.content for m in request.messages if m.role == "system")
    if system:
        body["system"] = system
    if request.tools:
        # Fine-grained tool streaming on, as a user who wants arguments as they come turns it.
        body["tools"] = [
            {
                "name": t.name,
                "description": t.description,
                "input_schema": dict(t.parameters),
                "eager_input_streaming": True,
            }
            for t in request.tools
        ]
    if request.thinking:
        body["thinking"] = {"type": "adaptive"}
    return body


def _retry_scenarios() -> FrozenSet[str]:
    from conformance._checks.retries import PERMANENT, RELENTS

    return frozenset((*RELENTS, *PERMANENT))


#: The scenarios a retry layer changes: the failures that can come back (the provider
#: relents after a scripted number) and those that cannot (one request, then the error).
RETRY_SCENARIOS: FrozenSet[str] = _retry_scenarios()


def default_retries(target: BackendConformanceTarget, create_backend: Any) -> BackendConformanceTarget:
    """``target``'s library with its retry layer as it ships: a row of its own.

    ``create_backend`` builds the library's client with no retry setting of the
    adapter's. The row says it retries (``retries=True``), so the kit's faults relent as
    a provider's would and the layer is judged: its waits, its bound, and that it never
    sends a failure that will not come back again. It runs only the scenarios a retry
    changes; every other case is the row without retries', whose name the skip gives.
    """
    from conformance.scenarios import SCENARIOS

    why = f"the same with retries off: the row {target.name!r}"
    skip = {name: why for name in SCENARIOS if name not in RETRY_SCENARIOS}
    for key, reason in target.skip.items():
        if key.split("/")[0].split(":")[0] in RETRY_SCENARIOS:
            skip[key] = reason
    return dataclasses.replace(
        target,
        name=f"{target.name} (default retries)",
        create_backend=create_backend,
        retries=True,
        skip=skip,
    )
