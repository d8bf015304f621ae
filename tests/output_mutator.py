"""The output mutator: a reference backend's output, one field changed, must fail some case.

Strategy: every round of audits found the same class of bug one step sideways: one
field of a correct backend's output changed (a flag set where it must be empty, a
signature dropped, an id suffixed, a finish reason moved, text added or withheld, an
error's delay or status invented). Rather than wait for the next instance, this module
lists the ways a field of :class:`ChatResponse`, :class:`StreamChunk`, :class:`ToolCall`,
:class:`Reasoning`, :class:`Usage` and :class:`LLMError` can change (drop, duplicate,
reorder, move, replace by a neighbour's value, invent), puts each in front of a shipped
reference backend as a :class:`Perturbation`, and runs the wire's cases: each
perturbation must fail a case where it changed something, unless it is one of the
:data:`ALLOWED` equivalences (docs/architecture.md lists them, with why).

A stream is gathered whole, changed, then yielded chunk by chunk, the error (if any)
raised after: so only the one field differs, not the timing (the abort and cancel
cases, which judge timing, are left out).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Sequence, Tuple

from conformance.contract import (
    ERROR_KINDS,
    ChatRequest,
    ChatResponse,
    LLMError,
    StreamChunk,
    ToolCall,
    Usage,
)

Chunks = List[StreamChunk]


@dataclass(frozen=True)
class Perturbation:
    """One way to change one field of a backend's output.

    ``reply`` changes a whole reply, ``stream`` a stream's chunks (each ``None`` where it
    does not apply), ``error`` the error raised; each returns its input unchanged where
    there is nothing to change, and the run then does not count.
    """

    name: str
    what: str
    reply: Optional[Callable[[ChatResponse], ChatResponse]] = None
    stream: Optional[Callable[[Chunks], Chunks]] = None
    error: Optional[Callable[[BaseException], BaseException]] = None


# -- helpers ---------------------------------------------------------------------------


def _calls_in_reply(
    edit: Callable[[List[ToolCall]], List[ToolCall]]
) -> Callable[[ChatResponse], ChatResponse]:
    def apply(response: ChatResponse) -> ChatResponse:
        return dataclasses.replace(response, tool_calls=tuple(edit(list(response.tool_calls))))

    return apply


def _calls_in_stream(edit: Callable[[List[ToolCall]], List[ToolCall]]) -> Callable[[Chunks], Chunks]:
    def apply(chunks: Chunks) -> Chunks:
        return [
            dataclasses.replace(c, tool_calls=tuple(edit(list(c.tool_calls)))) if c.tool_calls else c
            for c in chunks
        ]

    return apply


def _each_call(edit: Callable[[ToolCall], ToolCall]) -> Tuple[Callable[..., Any], Callable[..., Any]]:
    def calls(listed: List[ToolCall]) -> List[ToolCall]:
        return [edit(c) for c in listed]

    return _calls_in_reply(calls), _calls_in_stream(calls)


def _calls(edit: Callable[[List[ToolCall]], List[ToolCall]]) -> Tuple[Callable[..., Any], Callable[..., Any]]:
    return _calls_in_reply(edit), _calls_in_stream(edit)


def _last_carrying(chunks: Chunks) -> int:
    for index in range(len(chunks) - 1, -1, -1):
        if chunks[index].finish_reason is not None:
            return index
    return -1


#: A neighbour's value for each finish reason: a reason a sloppy mapping gives instead.
_OTHER_FINISH = {
    "stop": "length",
    "tool_calls": "stop",
    "length": "stop",
    "content_filter": "stop",
    "refusal": "stop",
    "error": "stop",
}

#: A neighbour's kind for each error kind: the kind a sloppy mapping gives instead.
_OTHER_KIND = {
    "rate_limit": "quota",
    "quota": "rate_limit",
    "auth": "invalid_request",
    "overloaded": "rate_limit",
    "server_error": "rate_limit",
    "context_overflow": "quota",
    "invalid_request": "auth",
}


def _rebuilt(error: BaseException, **changes: Any) -> BaseException:
    """The error as an :class:`LLMError` with ``changes``; a non-LLMError passes unchanged."""
    if not isinstance(error, LLMError):
        return error
    fields: Dict[str, Any] = {
        "code": error.code,
        "kind": error.kind,
        "retryable": error.retryable,
        "retry_after": error.retry_after,
        "status": error.status,
        "provider": error.provider,
        "details": dict(error.details),
    }
    fields.update(changes)
    details = fields.pop("details")
    built = LLMError(error.message, **fields)
    if "details" in changes:
        built.details = details  # as given, kind and all
    else:
        built.details = {**details, "kind": built.kind}
    return built


def _other_kind(error: BaseException) -> BaseException:
    if not isinstance(error, LLMError) or error.kind not in _OTHER_KIND:
        return error
    row = ERROR_KINDS[_OTHER_KIND[error.kind]]
    return _rebuilt(error, kind=row.kind, code=row.code, retryable=row.retryable)


class _LLMErrorOfItsOwn(LLMError):
    """A backend's own subclass of the contract's error: the same fields, another class."""


def _subclassed(error: BaseException) -> BaseException:
    if not isinstance(error, LLMError) or isinstance(error, _LLMErrorOfItsOwn):
        return error
    own = _LLMErrorOfItsOwn(
        error.message,
        code=error.code,
        kind=error.kind,
        retryable=error.retryable,
        retry_after=error.retry_after,
        status=error.status,
        provider=error.provider,
        details=dict(error.details),
    )
    return own


@dataclass(frozen=True)
class _UsageWithMore(Usage):
    """A :class:`Usage` with a field of its own (cached tokens, as several providers report)."""

    cached_tokens: int = 0


def _more_usage(usage: Optional[Usage]) -> Optional[Usage]:
    if usage is None or isinstance(usage, _UsageWithMore):
        return usage
    return _UsageWithMore(usage.input_tokens, usage.output_tokens, usage.total_tokens, cached_tokens=3)


def _off_by_one(usage: Optional[Usage]) -> Optional[Usage]:
    if usage is None:
        return None
    return Usage(usage.input_tokens, usage.output_tokens + 1, usage.total_tokens + 1)


def _signature_dropped(items: Sequence[Any]) -> Tuple[Any, ...]:
    return tuple(dataclasses.replace(r, signature="") if r.signature else r for r in items)


def _rechunked(chunks: Chunks) -> Chunks:
    out: Chunks = []
    for chunk in chunks:
        if len(chunk.content) > 1:
            out += [StreamChunk(content=ch) for ch in chunk.content[:-1]]
            out.append(dataclasses.replace(chunk, content=chunk.content[-1]))
        else:
            out.append(chunk)
    return out


def _finish_first(chunks: Chunks) -> Chunks:
    at = _last_carrying(chunks)
    if at <= 0:
        return chunks
    reason = chunks[at].finish_reason
    moved = [dataclasses.replace(c, finish_reason=None) for c in chunks]
    return [StreamChunk(finish_reason=reason), *moved]


def _finish_twice(chunks: Chunks) -> Chunks:
    at = _last_carrying(chunks)
    if at <= 0:
        return chunks
    return [dataclasses.replace(chunks[0], finish_reason=chunks[at].finish_reason), *chunks[1:]]


def _usage_first(chunks: Chunks) -> Chunks:
    usage = next((c.usage for c in chunks if c.usage is not None), None)
    if usage is None or chunks[0].usage is not None:
        return chunks
    moved = [dataclasses.replace(c, usage=None) for c in chunks]
    return [dataclasses.replace(moved[0], usage=usage), *moved[1:]]


def _text_withheld(chunks: Chunks) -> Chunks:
    first = next((i for i, c in enumerate(chunks) if c.content), None)
    if first is None:
        return chunks
    return [*chunks[:first], dataclasses.replace(chunks[first], content=""), *chunks[first + 1 :]]


def _text_added(chunks: Chunks) -> Chunks:
    if not chunks:
        return chunks
    return [*chunks[:-1], StreamChunk(content=" (via the gateway)"), chunks[-1]]


def _map_chunks(edit: Callable[[StreamChunk], StreamChunk]) -> Callable[[Chunks], Chunks]:
    def apply(chunks: Chunks) -> Chunks:
        return [edit(c) for c in chunks]

    return apply


def _invent_call(calls: List[ToolCall]) -> List[ToolCall]:
    return calls or [ToolCall("call_invented0000000000000", "get_weather", {"city": "Paris"})]


def _rotate_ids(calls: List[ToolCall]) -> List[ToolCall]:
    if len(calls) < 2:
        return calls
    ids = [c.id for c in calls]
    return [dataclasses.replace(c, id=i) for c, i in zip(calls, ids[1:] + ids[:1])]


def _key_dropped(call: ToolCall) -> ToolCall:
    if not call.arguments:
        return call
    return dataclasses.replace(call, arguments=dict(list(call.arguments.items())[:-1]))


def _key_added(call: ToolCall) -> ToolCall:
    if call.unparsed_arguments is not None:
        return call
    return dataclasses.replace(call, arguments={**call.arguments, "country": "FR"})


def _keys_reversed(call: ToolCall) -> ToolCall:
    return dataclasses.replace(call, arguments=dict(reversed(list(call.arguments.items()))))


def _unparsed_invented(call: ToolCall) -> ToolCall:
    if call.unparsed_arguments is not None:
        return call
    return dataclasses.replace(call, unparsed_arguments=json.dumps(dict(call.arguments)))


# -- the catalogue ---------------------------------------------------------------------

def _both(name: str, what: str, pair: Tuple[Callable[..., Any], Callable[..., Any]]) -> Perturbation:
    """A perturbation that edits the calls of a whole reply and of a stream alike."""
    return Perturbation(name, what, reply=pair[0], stream=pair[1])


_ID_SUFFIX = _each_call(lambda c: dataclasses.replace(c, id=f"{c.id}_b7f3") if c.id else c)
_ID_DROP = _each_call(lambda c: dataclasses.replace(c, id=""))
_NAME = _each_call(lambda c: dataclasses.replace(c, name=f"functions.{c.name}"))
_KEY_DROP = _each_call(_key_dropped)
_KEY_ADD = _each_call(_key_added)
_KEYS_REVERSED = _each_call(_keys_reversed)
_CALL_REASONING = _each_call(lambda c: dataclasses.replace(c, reasoning=()))
_UNPARSED_INVENTED = _each_call(_unparsed_invented)
_UNPARSED_DROPPED = _each_call(lambda c: dataclasses.replace(c, unparsed_arguments=None))
_DROP_CALLS = _calls(lambda calls: [])
_DUPLICATE_CALL = _calls(lambda calls: calls + calls[:1])
_REORDER_CALLS = _calls(lambda calls: list(reversed(calls)))
_INVENT_CALL = _calls(_invent_call)
_ROTATE_IDS = _calls(_rotate_ids)

PERTURBATIONS: Tuple[Perturbation, ...] = (
    # the text
    Perturbation(
        "content-dropped",
        "the reply's text dropped",
        reply=lambda r: dataclasses.replace(r, content=""),
        stream=_map_chunks(lambda c: dataclasses.replace(c, content="")),
    ),
    Perturbation(
        "content-invented",
        "words of the backend's own added to the text",
        reply=lambda r: dataclasses.replace(r, content=(r.content or "") + " (via the gateway)"),
        stream=_text_added,
    ),
    Perturbation(
        "content-first-piece-dropped", "the first piece of streamed text dropped", stream=_text_withheld
    ),
    # the finish reason
    Perturbation(
        "finish-neighbour",
        "the finish reason replaced by a neighbour's",
        reply=lambda r: dataclasses.replace(
            r, finish_reason=_OTHER_FINISH.get(r.finish_reason, r.finish_reason)
        ),
        stream=_map_chunks(
            lambda c: c
            if c.finish_reason is None
            else dataclasses.replace(c, finish_reason=_OTHER_FINISH.get(c.finish_reason, c.finish_reason))
        ),
    ),
    Perturbation(
        "finish-dropped",
        "the finish reason dropped",
        reply=lambda r: dataclasses.replace(r, finish_reason=""),
        stream=_map_chunks(lambda c: dataclasses.replace(c, finish_reason=None)),
    ),
    Perturbation("finish-twice", "the finish reason on the first chunk too", stream=_finish_twice),
    Perturbation(
        "finish-first", "the finish reason moved to a chunk ahead of the rest", stream=_finish_first
    ),
    # the calls
    _both("calls-dropped", "every call dropped", _DROP_CALLS),
    _both("call-duplicated", "the first call twice", _DUPLICATE_CALL),
    _both("calls-reordered", "the calls in another order", _REORDER_CALLS),
    _both("call-invented", "a get_weather call on a turn without one", _INVENT_CALL),
    _both("id-suffixed", "each call id with a suffix of the backend's own", _ID_SUFFIX),
    _both("id-dropped", "each call id emptied", _ID_DROP),
    _both("ids-rotated", "each call given a neighbour's id", _ROTATE_IDS),
    _both("name-namespaced", "each call named functions.<name>", _NAME),
    _both("argument-dropped", "a call's last argument dropped", _KEY_DROP),
    _both("argument-invented", "an argument nobody sent added", _KEY_ADD),
    _both("arguments-reordered", "a call's arguments in another key order", _KEYS_REVERSED),
    _both("call-reasoning-dropped", "the reasoning tied to each call dropped", _CALL_REASONING),
    _both("unparsed-invented", "unparsed_arguments on a call whose arguments parsed", _UNPARSED_INVENTED),
    _both("unparsed-dropped", "unparsed_arguments dropped where the text did not parse", _UNPARSED_DROPPED),
    # the reasoning
    Perturbation(
        "reasoning-dropped",
        "the turn's reasoning dropped",
        reply=lambda r: dataclasses.replace(r, reasoning=()),
        stream=_map_chunks(lambda c: dataclasses.replace(c, reasoning=())),
    ),
    Perturbation(
        "reasoning-duplicated",
        "each reasoning item twice",
        reply=lambda r: dataclasses.replace(r, reasoning=tuple(r.reasoning) * 2),
        stream=_map_chunks(lambda c: dataclasses.replace(c, reasoning=tuple(c.reasoning) * 2)),
    ),
    Perturbation(
        "reasoning-signature-dropped",
        "each reasoning item's signature emptied",
        reply=lambda r: dataclasses.replace(r, reasoning=_signature_dropped(r.reasoning)),
        stream=_map_chunks(lambda c: dataclasses.replace(c, reasoning=_signature_dropped(c.reasoning))),
    ),
    # the usage
    Perturbation(
        "usage-dropped",
        "the usage dropped",
        reply=lambda r: dataclasses.replace(r, usage=None),
        stream=_map_chunks(lambda c: dataclasses.replace(c, usage=None)),
    ),
    Perturbation(
        "usage-invented",
        "zeros reported where the provider reported no usage",
        reply=lambda r: r if r.usage is not None else dataclasses.replace(r, usage=Usage(0, 0, 0)),
        stream=lambda cs: cs
        if any(c.usage is not None for c in cs) or not cs
        else [*cs[:-1], dataclasses.replace(cs[-1], usage=Usage(0, 0, 0))],
    ),
    Perturbation(
        "usage-off-by-one",
        "one output token more than reported",
        reply=lambda r: dataclasses.replace(r, usage=_off_by_one(r.usage)),
        stream=_map_chunks(lambda c: dataclasses.replace(c, usage=_off_by_one(c.usage))),
    ),
    Perturbation("usage-moved-first", "the usage moved to the first chunk", stream=_usage_first),
    Perturbation(
        "usage-extra-field",
        "a Usage with a field of its own",
        reply=lambda r: dataclasses.replace(r, usage=_more_usage(r.usage)),
        stream=_map_chunks(lambda c: dataclasses.replace(c, usage=_more_usage(c.usage))),
    ),
    Perturbation("rechunked", "the text re-chunked a character at a time", stream=_rechunked),
    # the error
    Perturbation("error-kind-neighbour", "the error's kind replaced by a neighbour's", error=_other_kind),
    Perturbation(
        "error-retryable-flipped",
        "the error's retryable flipped",
        error=lambda e: _rebuilt(e, retryable=not e.retryable) if isinstance(e, LLMError) else e,
    ),
    Perturbation(
        "error-delay-invented",
        "an hour's retry_after where the provider sent none",
        error=lambda e: _rebuilt(e, retry_after=3600.0)
        if isinstance(e, LLMError) and e.retry_after is None
        else e,
    ),
    Perturbation(
        "error-delay-dropped",
        "the provider's retry_after dropped",
        error=lambda e: _rebuilt(e, retry_after=None) if isinstance(e, LLMError) and e.retry_after else e,
    ),
    Perturbation(
        "error-status-invented",
        "a status 599 nobody sent",
        error=lambda e: _rebuilt(e, status=599) if isinstance(e, LLMError) and e.status is None else e,
    ),
    Perturbation(
        "error-status-dropped",
        "the provider's status dropped",
        error=lambda e: _rebuilt(e, status=None) if isinstance(e, LLMError) and e.status is not None else e,
    ),
    Perturbation(
        "error-details-emptied",
        "the error's details emptied",
        error=lambda e: _rebuilt(e, details={}) if isinstance(e, LLMError) else e,
    ),
    Perturbation(
        "error-subclassed", "the error as a subclass of LLMError of the backend's own", error=_subclassed
    ),
)

#: The perturbations a correct backend may make: the contract allows each (docs/architecture.md).
ALLOWED: Dict[str, str] = {
    "calls-reordered": "a turn's calls in completion order: each is matched to its result by id",
    "arguments-reordered": "arguments are a mapping: key order means nothing",
    "usage-extra-field": "a Usage with more fields than the contract's three",
    "rechunked": "a stream re-chunked: only the text joined, and where the finish reason sits, count",
    "usage-moved-first": "a stream's usage on an earlier chunk: the turn's is the last its chunks carry",
    "error-subclassed": "a backend's own LLMError subclass: the cases read its fields, not its class",
}


#: The perturbations a backend may make on a wire whose provider sends no call ids
#: (``Wire.sends_call_ids`` false): the ids are then the backend's own, and any distinct,
#: non-empty ones will do.
ALLOWED_WITHOUT_IDS: Dict[str, str] = {
    "id-suffixed": "an id of the backend's own, where the provider sends none, may be any",
    "ids-rotated": "ids of the backend's own, where the provider sends none, pair with no provider id",
}


def allowed(wire: Any, name: str) -> bool:
    """Whether the perturbation ``name`` is one the contract allows on ``wire``."""
    return name in ALLOWED or (name in ALLOWED_WITHOUT_IDS and not wire.sends_call_ids)


def _shown(output: Any) -> str:
    """The output as compared for a change: its repr, which shows key order and classes too."""
    return repr(output)


def perturbing(perturbation: Perturbation, base: type) -> type:
    """``base`` (a reference backend's class) with ``perturbation`` applied to its output, and
    a ``changed`` flag set where it changed anything."""

    class Perturbing(base):  # type: ignore[misc]
        changed = False

        async def chat(self, chat: ChatRequest) -> ChatResponse:
            try:
                response: ChatResponse = await super().chat(chat)
            except BaseException as error:
                raise self._error(error) from None
            if perturbation.reply is None:
                return response
            edited = perturbation.reply(response)
            self._note(_shown(edited) != _shown(response))
            return edited

        async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
            chunks: Chunks = []
            failure: Optional[BaseException] = None
            try:
                async for chunk in super().chat_stream(chat):
                    chunks.append(chunk)
            except Exception as error:  # noqa: BLE001 - raised again below, perhaps changed
                failure = error
            if perturbation.stream is not None:
                edited = perturbation.stream(chunks)
                self._note(_shown(edited) != _shown(chunks))
                chunks = edited
            for chunk in chunks:
                yield chunk
            if failure is not None:
                raise self._error(failure) from None

        def _error(self, error: BaseException) -> BaseException:
            if perturbation.error is None:
                return error
            changed = perturbation.error(error)
            self._note(changed is not error)
            return changed

        def _note(self, changed: bool) -> None:
            if changed:
                type(self).changed = True

    Perturbing.__name__ = f"Perturbing_{perturbation.name.replace('-', '_')}"
    return Perturbing
