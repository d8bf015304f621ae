"""Agent loops written over the official SDKs, the way a careful user of each SDK writes one.

Each loop takes the gate's :class:`~conformance.gate.LoopTask` and carries it out with
the SDK's own client and types, following the SDK's documented tool-use pattern:

- OpenAI Chat Completions: ``chat.completions.create`` for whole replies and
  ``create(stream=True)`` for streamed ones, the chunks' tool-call fragments gathered
  by ``index``. Not the ``chat.completions.stream`` helper: it parses each call's
  arguments with ``json.loads`` as it goes, so it raises on two calls whose fragments
  interleave and on a call whose arguments are broken JSON, and the loop never sees
  the turn (see ``docs/wires/openai-chat.md``).
- OpenAI Responses: ``responses.create``, and ``create(stream=True)`` read up to its
  ``response.completed`` event, stateless (``store=False``) with the encrypted
  reasoning asked for, so that ``response.output`` (reasoning items included) is
  appended to the next ``input`` whole, then one ``function_call_output`` per call.
  Not the ``responses.stream`` helper: it ``json.loads`` a strict tool's arguments
  at the end of the stream and raises on broken JSON.
- Anthropic Messages: ``messages.create`` and the ``messages.stream`` helper
  (``get_final_message``); the assistant's ``content`` blocks (thinking blocks with
  their signatures included) go back as they came, then one user turn of
  ``tool_result`` blocks, ``is_error`` on a failed tool. The helper fills a
  ``tool_use`` block's ``input`` with a partial-JSON parser that closes what the
  model left open, so broken argument JSON comes out as a smaller, valid object; the
  loop reads the ``input_json_delta`` text itself and parses it strictly.

What a loop adds to the SDK is what the gate asks of any loop:

- Every tool runs through ``task.toolset`` with the task's signal and the call id as
  its key, once per call id (a retried request never runs a call again), after the
  SDK has handed over the complete turn. A call to a tool the task lacks, or whose
  arguments are not a JSON object, never runs: it is answered with a structured
  ``ToolError`` (``unknown_tool``, ``invalid_arguments``), and its arguments go back
  in the history as ``{}``, since the provider refuses broken JSON there.
- A turn that ended at the output limit (``length``, Anthropic ``max_tokens``) or by
  the content filter runs none of its calls, and the loop returns it. A write (a tool
  whose schema has ``idempotency_key``) runs once per ``write_key`` in a task; a repeat
  under a new call id gets the first run's result.
- ``tool_choice`` goes on the first request only, so the model can answer once it has
  the result.
- The loop counts requests and time; it stops with ``stopped="budget"``, and bounds
  each request's timeout by what is left.
- A request that fails in a way worth another try (a 408, 409, 429 or 5xx; a
  connection that failed or was dropped; a stream that broke before its end event)
  is sent again, the same conversation, after what the provider asked for
  (``retry-after-ms``, ``retry-after``) or 50 ms, while the budget allows. Out of
  budget, or on any other failure, the loop raises :class:`LoopStopped`, whose
  message says what happened (the status, the timeout, the broken stream).
- On abort it raises the caller's reason itself. None of the SDKs takes an abort
  signal. The async loops race each await against the signal (``race_abort``): the
  cancelled await unwinds the SDK's stream context, which closes the response. The
  sync loops shut the sockets of their own connection pool down from the aborting
  thread (a blocked read wakes only that way), then leave the SDK's stream context,
  which closes the response.

Each client is made with ``max_retries=0``. The SDKs' own retries would cover a 429,
a 5xx or a dropped connection on the request itself (both read ``retry-after-ms`` and
``retry-after``), but not a stream that breaks after its ``200``, which the loop must
retry anyway; and a try the SDK makes on its own is hidden from the loop's count of
requests and time, which the gate holds it to.
"""

from __future__ import annotations

import email.utils
import importlib.util
import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Collection, Dict, List, Mapping, Optional, Sequence, Tuple

from conformance.abort import race_abort, shutdown_socket
from conformance.contract import AbortSignal, ToolCall, ToolChoice, ToolError, ToolResult, ToolSpec
from conformance.gate import LoopResult, LoopTask, validate, write_key

from ..test_provider_support import LONG_TESTS
from ._support import flatten

HAVE_OPENAI = importlib.util.find_spec("openai") is not None
HAVE_ANTHROPIC = importlib.util.find_spec("anthropic") is not None
if HAVE_OPENAI:  # imported once here: a first import inside a case's event loop is slow
    import openai
if HAVE_ANTHROPIC:
    import anthropic

#: Seconds an SDK may wait for a reply: far beyond any case, so the loop's own budget acts.
SDK_TIMEOUT = 10.0
#: Anthropic requires max_tokens on every request.
MAX_TOKENS = 1024
#: Anthropic's stop reasons that mean the model finished (the gate's "stop").
ANTHROPIC_STOPS = ("end_turn", "stop_sequence")
#: The pause before another try where the provider asked for none.
RETRY_PAUSE = 0.05
#: The statuses worth another try, as both SDKs' own retry logic has them (and any 5xx).
RETRY_STATUSES = (408, 409, 429)


# -- what every loop shares ---------------------------------------------------------------


class LoopStopped(Exception):
    """The loop gave up on a request; the message says what happened and why it did not try again."""


class BrokenStream(Exception):
    """A stream that ended before its turn's end event: none of its calls is complete."""


def _transport_errors(name: str) -> Tuple[type, ...]:
    """``name``'s class from each httpx the SDKs may use: a stream read raises them."""
    errors: List[type] = []
    for module in ("httpx2", "httpx"):
        if importlib.util.find_spec(module) is not None:
            errors.append(getattr(importlib.import_module(module), name))
    return tuple(errors)


TRANSPORT_ERRORS = _transport_errors("TransportError")
TRANSPORT_TIMEOUTS = _transport_errors("TimeoutException")


def _sdk_errors(name: str) -> Tuple[type, ...]:
    """``name``'s error classes from both SDKs present."""
    found = []
    for sdk, present in (("openai", HAVE_OPENAI), ("anthropic", HAVE_ANTHROPIC)):
        if present:
            found.append(getattr(importlib.import_module(sdk), name))
    return tuple(found)


STATUS_ERRORS = _sdk_errors("APIStatusError")
TIMEOUT_ERRORS = _sdk_errors("APITimeoutError")
CONNECTION_ERRORS = _sdk_errors("APIConnectionError")


def retry_after(headers: Mapping[str, str]) -> Optional[float]:
    """The delay a reply asks for: ``retry-after-ms``, or ``retry-after`` in seconds or as an HTTP date."""
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
    except ValueError:
        pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _cause(error: BaseException) -> str:
    """The transport error under an SDK's connection error, named, with its message."""
    under = error.__cause__ or error.__context__ or error
    return f"{type(under).__name__}: {under}" if str(under) else f"{type(under).__name__}, no message"


def classify(error: BaseException, timeout: float) -> Tuple[str, Optional[float]]:
    """What happened to a request, and the pause before another try (``None``: not worth one)."""
    if isinstance(error, BrokenStream):
        return f"the stream broke: {error}", RETRY_PAUSE
    if isinstance(error, STATUS_ERRORS):
        status = error.status_code
        what = f"the provider answered {status}: {error.message}"
        if status in RETRY_STATUSES or status >= 500:
            asked = retry_after(error.response.headers)
            return what, RETRY_PAUSE if asked is None else asked
        return what, None
    if isinstance(error, TIMEOUT_ERRORS + TRANSPORT_TIMEOUTS):
        return f"it timed out, no answer within {timeout:.2f} s ({_cause(error)})", RETRY_PAUSE
    if isinstance(error, CONNECTION_ERRORS):
        return f"the connection failed or was dropped ({_cause(error)})", RETRY_PAUSE
    if isinstance(error, TRANSPORT_ERRORS):
        return f"the stream broke off ({_cause(error)})", RETRY_PAUSE
    return "", None


class Budget:
    """Counts generation requests and time against a task's limits, and decides on retries."""

    def __init__(self, task: LoopTask) -> None:
        self.task = task
        self.started = time.monotonic()
        self.sent = 0
        self.answered = 0
        self.last_timeout = SDK_TIMEOUT

    def spent(self) -> bool:
        """True once no request may be sent: the count is reached or the time is up."""
        return self.sent >= self.task.max_requests or self.left() <= 0

    def last(self) -> bool:
        """True after the last request the budget allows: a result could not be sent back."""
        return self.sent >= self.task.max_requests

    def left(self) -> float:
        return self.task.max_seconds - (time.monotonic() - self.started)

    def timeout(self) -> float:
        """The SDK's timeout for the next request: what the budget has left."""
        self.last_timeout = max(0.05, min(SDK_TIMEOUT, self.left()))
        return self.last_timeout

    def retry_pause(self, error: Exception) -> float:
        """The pause before sending the failed request again.

        Raises ``error`` itself when it is not worth another try, and
        :class:`LoopStopped` (saying what happened) when the budget leaves no room for one.
        """
        what, pause = classify(error, self.last_timeout)
        if pause is None:
            raise error
        task = self.task
        where = f"request {self.sent} failed: {what}"
        if self.sent >= task.max_requests:
            raise LoopStopped(
                f"{where}; all {task.max_requests} requests of the task's budget are spent"
            ) from error
        left = self.left()
        if left <= 0:
            raise LoopStopped(f"{where}; the task's {task.max_seconds:.2f} s are spent") from error
        if pause >= left:
            raise LoopStopped(
                f"{where}; {max(0.0, left):.2f} s of the task's {task.max_seconds:.2f} s are left, "
                f"not enough to wait {pause:.2f} s and try again"
            ) from error
        return pause


@dataclass
class Call:
    """One complete call of a turn, and the refusal to send in its place when it must not run."""

    call: ToolCall
    refused: Optional[ToolResult] = None

    @property
    def id(self) -> str:
        return self.call.id


def prepare(task: LoopTask, call_id: str, name: str, arguments: Any) -> Call:
    """The call as the loop will handle it: refused when its tool is unknown, or its arguments are
    no JSON object or break the tool's schema.

    ``arguments`` is the provider's argument text, or the object an SDK already parsed.
    """
    if isinstance(arguments, Mapping):
        call = ToolCall(call_id, name, dict(arguments))
    else:
        text = arguments or "{}"
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            call = ToolCall(call_id, name, {}, unparsed_arguments=text)
            error = ToolError("invalid_arguments", f"the arguments are not JSON ({exc}); send a JSON object")
            return Call(call, ToolResult(call_id, name, error=error))
        if not isinstance(parsed, dict):
            call = ToolCall(call_id, name, {}, unparsed_arguments=text)
            error = ToolError(
                "invalid_arguments", f"the arguments are {type(parsed).__name__}, not a JSON object"
            )
            return Call(call, ToolResult(call_id, name, error=error))
        call = ToolCall(call_id, name, parsed)
    names = [spec.name for spec in task.tools]
    if name not in names:
        error = ToolError("unknown_tool", f"there is no tool {name!r}; the tools are {', '.join(names)}")
        return Call(call, ToolResult(call_id, name, error=error))
    schema = next(spec.parameters for spec in task.tools if spec.name == name)
    violations = validate(schema, call.arguments)
    if violations:
        error = ToolError("invalid_arguments", "; ".join(str(v) for v in violations))
        return Call(call, ToolResult(call_id, name, error=error))
    return Call(call)


@dataclass
class Turn:
    """A model turn as the loop reads it: text, the gate's finish reason, its calls, its history entries."""

    text: str
    finish: str
    calls: List[Call]
    history: List[Any]


class SocketGuard:
    """Remembers the sockets its httpx client opens, so an abort can shut them down.

    httpcore reports each new connection's network stream to a request's ``trace``
    extension; the client's request hook puts the extension on every request.
    ``shutdown`` (unlike ``close``) wakes a read blocked in another thread and sends
    the FIN, over HTTP/1.1 and h2c alike.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.streams: List[Any] = []

    def hooks(self) -> Dict[str, Any]:
        return {"request": [self.on_request]}

    def on_request(self, request: Any) -> None:
        request.extensions["trace"] = self.trace

    def trace(self, event: str, info: Mapping[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            with self.lock:
                self.streams.append(info["return_value"])

    def shutdown(self, _reason: Optional[BaseException] = None) -> None:
        with self.lock:
            streams = list(self.streams)
        for stream in streams:
            sock = stream.get_extra_info("socket")
            if sock is not None:
                shutdown_socket(sock)


def reraise_abort(signal: AbortSignal) -> None:
    """Raise the caller's reason, the very object, when the signal has fired."""
    if signal.aborted:
        signal.raise_reason()


async def drain(stream: Any, signal: AbortSignal, each: Callable[[Any], None]) -> None:
    """Hand each event of an SDK's async stream to ``each``, every wait raced against the abort."""
    events = stream.__aiter__()
    while True:
        try:
            event = await race_abort(events.__anext__(), signal)
        except StopAsyncIteration:
            return
        each(event)


class SyncDriver:
    """The sync loop: send, read the turn, run each call once by id, retry a failed request in budget.

    A subclass sets ``client`` and ``guard`` and provides ``request``, ``ask`` and ``answer``.
    """

    client: Any
    guard: SocketGuard

    def request(self, task: LoopTask, budget: Budget, history: List[Any]) -> Dict[str, Any]:
        raise NotImplementedError

    def ask(self, task: LoopTask, kwargs: Dict[str, Any]) -> Turn:
        raise NotImplementedError

    def answer(self, answers: List[Tuple[Call, ToolResult]]) -> List[Any]:
        raise NotImplementedError

    def run(self, task: LoopTask) -> LoopResult:
        budget = Budget(task)
        history: List[Any] = [{"role": "user", "content": task.prompt}]
        results: Dict[str, ToolResult] = {}  # by call id: a call never runs twice
        writes = Writes(task)
        text, finish = "", "stop"
        unregister = task.signal.add_callback(self.guard.shutdown)
        try:
            while True:
                task.signal.raise_if_aborted()
                if budget.spent():
                    return LoopResult(text, finish, stopped="budget")
                kwargs = self.request(task, budget, history)
                budget.sent += 1
                try:
                    turn = self.ask(task, kwargs)
                except Exception as exc:
                    reraise_abort(task.signal)
                    if task.signal.wait_sync(budget.retry_pause(exc)):
                        task.signal.raise_reason()
                    continue
                budget.answered += 1
                text, finish = turn.text, turn.finish
                if not turn.calls or finish in ENDED:
                    return LoopResult(text, finish)
                if budget.last():
                    return LoopResult(text, finish, stopped="budget")
                history += turn.history
                for call in turn.calls:
                    if call.id not in results:
                        results[call.id] = call.refused or writes.once(call, run_tool)
                history += self.answer([(call, results[call.id]) for call in turn.calls])
        except Exception:
            reraise_abort(task.signal)
            raise
        finally:
            unregister()

    def close(self) -> None:
        self.client.close()


class AsyncDriver:
    """The async form of :class:`SyncDriver`; a subclass provides ``aask`` instead of ``ask``."""

    client: Any

    def request(self, task: LoopTask, budget: Budget, history: List[Any]) -> Dict[str, Any]:
        raise NotImplementedError

    async def aask(self, task: LoopTask, kwargs: Dict[str, Any]) -> Turn:
        raise NotImplementedError

    def answer(self, answers: List[Tuple[Call, ToolResult]]) -> List[Any]:
        raise NotImplementedError

    async def run(self, task: LoopTask) -> LoopResult:
        import asyncio

        budget = Budget(task)
        signal = task.signal
        history: List[Any] = [{"role": "user", "content": task.prompt}]
        results: Dict[str, ToolResult] = {}  # by call id: a call never runs twice
        writes = Writes(task)
        text, finish = "", "stop"
        while True:
            signal.raise_if_aborted()
            if budget.spent():
                return LoopResult(text, finish, stopped="budget")
            kwargs = self.request(task, budget, history)
            budget.sent += 1
            try:
                turn = await self.aask(task, kwargs)
            except Exception as exc:
                reraise_abort(signal)
                pause = budget.retry_pause(exc)
                try:
                    await asyncio.wait_for(signal.wait(), pause)
                except asyncio.TimeoutError:
                    continue
                signal.raise_reason()
            budget.answered += 1
            text, finish = turn.text, turn.finish
            if not turn.calls or finish in ENDED:
                return LoopResult(text, finish)
            if budget.last():
                return LoopResult(text, finish, stopped="budget")
            history += turn.history
            for call in turn.calls:
                if call.id not in results:
                    results[call.id] = call.refused or await writes.aonce(call, arun_tool)
            history += self.answer([(call, results[call.id]) for call in turn.calls])

    async def aclose(self) -> None:
        await self.client.close()


#: The finish reasons whose turn's calls never run: cut off at the limit, or filtered.
ENDED = ("length", "content_filter", "refusal")


class Writes:
    """A write (a tool whose schema has ``idempotency_key``) runs once per key in a task; a repeat
    under a new call id gets the first run's result back under its own id."""

    def __init__(self, task: LoopTask) -> None:
        self.task = task
        self.schemas = {spec.name: spec.parameters for spec in task.tools}
        self.done: Dict[str, ToolResult] = {}

    def _key(self, call: Call) -> Optional[str]:
        schema = self.schemas.get(call.call.name)
        return write_key(call.call, schema) if schema is not None else None

    def _repeat(self, call: Call, key: Optional[str]) -> Optional[ToolResult]:
        first = self.done.get(key) if key is not None else None
        return None if first is None else ToolResult(call.call.id, call.call.name, first.content, first.error)

    def once(self, call: Call, run: Callable[[LoopTask, ToolCall], ToolResult]) -> ToolResult:
        key = self._key(call)
        result = self._repeat(call, key) or run(self.task, call.call)
        if key is not None:
            self.done.setdefault(key, result)
        return result

    async def aonce(self, call: Call, run: Callable[[LoopTask, ToolCall], Any]) -> ToolResult:
        key = self._key(call)
        result = self._repeat(call, key) or await run(self.task, call.call)
        if key is not None:
            self.done.setdefault(key, result)
        return result


def run_tool(task: LoopTask, call: ToolCall) -> ToolResult:
    """Run one complete call through the task's toolset, keyed by its call id."""
    task.signal.raise_if_aborted()
    return task.toolset.execute(call, key=call.id, signal=task.signal)


async def arun_tool(task: LoopTask, call: ToolCall) -> ToolResult:
    """The async form of :func:`run_tool`."""
    task.signal.raise_if_aborted()
    return await task.toolset.aexecute(call, key=call.id, signal=task.signal)


# -- OpenAI Chat Completions --------------------------------------------------------------


def chat_tools(specs: Sequence[ToolSpec]) -> List[Dict[str, Any]]:
    """The tools as Chat Completions function tools, strict."""
    return [
        {
            "type": "function",
            "function": {
                "name": s.name,
                "description": s.description,
                "parameters": dict(s.parameters),
                "strict": True,
            },
        }
        for s in specs
    ]


def chat_tool_choice(choice: ToolChoice) -> Any:
    if choice.mode == "tool":
        return {"type": "function", "function": {"name": choice.name}}
    return choice.mode


class ChatChunks:
    """A streamed Chat Completions turn gathered from its chunks: tool-call fragments by ``index``."""

    def __init__(self) -> None:
        self.text: List[str] = []
        self.calls: Dict[int, List[Any]] = {}  # index: [id, name, fragments]
        self.finish: Optional[str] = None

    def add(self, chunk: Any) -> None:
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                self.text.append(delta.content)
            for fragment in delta.tool_calls or ():
                entry = self.calls.setdefault(fragment.index, ["", "", []])
                if fragment.id:
                    entry[0] = fragment.id
                function = fragment.function
                if function is not None:
                    if function.name:
                        entry[1] = function.name
                    if function.arguments:
                        entry[2].append(function.arguments)
            if choice.finish_reason is not None:
                self.finish = choice.finish_reason

    def done(self) -> Tuple[str, str, List[Tuple[str, str, str]]]:
        """The turn's text, finish reason and calls (id, name, argument text), once it has ended."""
        if self.finish is None:
            raise BrokenStream("it ended before a chunk carried a finish_reason; the turn never completed")
        calls = [(e[0], e[1], "".join(e[2])) for _, e in sorted(self.calls.items())]
        return "".join(self.text), self.finish, calls


class _OpenAIChatBase:
    def __init__(self, base_url: str, http2: bool = False) -> None:
        self.base_url = f"{base_url}/v1"
        self.http2 = http2

    def request(self, task: LoopTask, budget: Budget, history: List[Any]) -> Dict[str, Any]:
        kwargs: Dict[str, Any] = {
            "model": task.model,
            "messages": history,
            "tools": chat_tools(task.tools),
            "timeout": budget.timeout(),
        }
        if task.tool_choice is not None and budget.answered == 0:
            kwargs["tool_choice"] = chat_tool_choice(task.tool_choice)
        return kwargs

    def whole(self, task: LoopTask, completion: Any) -> Turn:
        choice = completion.choices[0]
        message = choice.message
        raw = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or ()]
        return self.turn(task, message.content or "", choice.finish_reason, raw, message)

    def turn(
        self, task: LoopTask, text: str, finish: str, raw: List[Tuple[str, str, str]], message: Any = None
    ) -> Turn:
        """The turn; its history entry is the SDK's message where every call's arguments parsed."""
        calls = [prepare(task, *r) for r in raw]
        if message is not None and all(c.call.unparsed_arguments is None for c in calls):
            return Turn(text, finish, calls, [message])
        entry: Dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            # Arguments that did not parse go back as {}: the API refuses broken JSON in a history.
            entry["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.call.name, "arguments": json.dumps(dict(c.call.arguments))},
                }
                for c in calls
            ]
        return Turn(text, finish, calls, [entry])

    def answer(self, answers: List[Tuple[Call, ToolResult]]) -> List[Any]:
        return [{"role": "tool", "tool_call_id": call.id, "content": result.text} for call, result in answers]


class OpenAIChatLoop(_OpenAIChatBase, SyncDriver):
    """A sync loop over ``openai.OpenAI().chat.completions``."""

    def __init__(self, base_url: str, http2: bool = False) -> None:
        super().__init__(base_url, http2)
        self.guard = SocketGuard()
        self.client = openai.OpenAI(
            api_key="test",
            base_url=self.base_url,
            max_retries=0,
            http_client=openai.DefaultHttpxClient(
                http1=not http2, http2=http2, event_hooks=self.guard.hooks()
            ),
        )

    def ask(self, task: LoopTask, kwargs: Dict[str, Any]) -> Turn:
        if not task.stream:
            return self.whole(task, self.client.chat.completions.create(**kwargs))
        chunks = ChatChunks()
        with self.client.chat.completions.create(stream=True, **kwargs) as stream:
            for chunk in stream:
                chunks.add(chunk)  # a UI would show chunk.choices[0].delta.content here
        return self.turn(task, *chunks.done())


class AsyncOpenAIChatLoop(_OpenAIChatBase, AsyncDriver):
    """An async loop over ``openai.AsyncOpenAI().chat.completions``."""

    def __init__(self, base_url: str, http2: bool = False) -> None:
        super().__init__(base_url, http2)
        self.client = openai.AsyncOpenAI(
            api_key="test",
            base_url=self.base_url,
            max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(http1=not http2, http2=http2),
        )

    async def aask(self, task: LoopTask, kwargs: Dict[str, Any]) -> Turn:
        if not task.stream:
            completion = await race_abort(self.client.chat.completions.create(**kwargs), task.signal)
            return self.whole(task, completion)
        chunks = ChatChunks()
        stream = await race_abort(self.client.chat.completions.create(stream=True, **kwargs), task.signal)
        async with stream:
            await drain(stream, task.signal, chunks.add)
        return self.turn(task, *chunks.done())


# -- OpenAI Responses -----------------------------------------------------------------------


def responses_tools(specs: Sequence[ToolSpec]) -> List[Dict[str, Any]]:
    return [
        {
            "type": "function",
            "name": s.name,
            "description": s.description,
            "parameters": dict(s.parameters),
            "strict": True,
        }
        for s in specs
    ]


def responses_tool_choice(choice: ToolChoice) -> Any:
    if choice.mode == "tool":
        return {"type": "function", "name": choice.name}
    return choice.mode


#: The events that end a Responses stream, each carrying the whole response.
RESPONSE_ENDS = ("response.completed", "response.incomplete", "response.failed")


class ResponseEvents:
    """A streamed response read up to the event that ends it."""

    def __init__(self) -> None:
        self.response: Any = None

    def add(self, event: Any) -> None:
        if event.type in RESPONSE_ENDS:
            self.response = event.response

    def done(self) -> Any:
        if self.response is None:
            raise BrokenStream(
                "it ended before response.completed (or .incomplete / .failed); the turn never completed"
            )
        return self.response


class _OpenAIResponsesBase:
    def __init__(self, base_url: str, http2: bool = False) -> None:
        self.base_url = f"{base_url}/v1"
        self.http2 = http2

    def request(self, task: LoopTask, budget: Budget, history: List[Any]) -> Dict[str, Any]:
        kwargs: Dict[str, Any] = {
            "model": task.model,
            "input": history,
            "tools": responses_tools(task.tools),
            # Stateless: the reasoning items come back encrypted and go into the next input.
            "store": False,
            "include": ["reasoning.encrypted_content"],
            "timeout": budget.timeout(),
        }
        if task.tool_choice is not None and budget.answered == 0:
            kwargs["tool_choice"] = responses_tool_choice(task.tool_choice)
        return kwargs

    def turn(self, task: LoopTask, response: Any) -> Turn:
        if response.status == "failed":
            error = response.error
            detail = f"{error.code}: {error.message}" if error is not None else "no error given"
            raise LoopStopped(f"the provider reported the response failed ({detail})")
        calls = [
            prepare(task, item.call_id, item.name, item.arguments)
            for item in response.output
            if item.type == "function_call"
        ]
        finish = "tool_calls" if calls else "stop"
        if response.status == "incomplete":
            reason = getattr(response.incomplete_details, "reason", None)
            finish = "content_filter" if reason == "content_filter" else "length"
        return Turn(response.output_text, finish, calls, list(response.output))

    def answer(self, answers: List[Tuple[Call, ToolResult]]) -> List[Any]:
        return [
            {"type": "function_call_output", "call_id": call.id, "output": result.text}
            for call, result in answers
        ]


class OpenAIResponsesLoop(_OpenAIResponsesBase, SyncDriver):
    """A sync loop over ``openai.OpenAI().responses``."""

    def __init__(self, base_url: str, http2: bool = False) -> None:
        super().__init__(base_url, http2)
        self.guard = SocketGuard()
        self.client = openai.OpenAI(
            api_key="test",
            base_url=self.base_url,
            max_retries=0,
            http_client=openai.DefaultHttpxClient(
                http1=not http2, http2=http2, event_hooks=self.guard.hooks()
            ),
        )

    def ask(self, task: LoopTask, kwargs: Dict[str, Any]) -> Turn:
        if not task.stream:
            return self.turn(task, self.client.responses.create(**kwargs))
        events = ResponseEvents()
        with self.client.responses.create(stream=True, **kwargs) as stream:
            for event in stream:
                events.add(event)
        return self.turn(task, events.done())


class AsyncOpenAIResponsesLoop(_OpenAIResponsesBase, AsyncDriver):
    """An async loop over ``openai.AsyncOpenAI().responses``."""

    def __init__(self, base_url: str, http2: bool = False) -> None:
        super().__init__(base_url, http2)
        self.client = openai.AsyncOpenAI(
            api_key="test",
            base_url=self.base_url,
            max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(http1=not http2, http2=http2),
        )

    async def aask(self, task: LoopTask, kwargs: Dict[str, Any]) -> Turn:
        if not task.stream:
            return self.turn(task, await race_abort(self.client.responses.create(**kwargs), task.signal))
        events = ResponseEvents()
        stream = await race_abort(self.client.responses.create(stream=True, **kwargs), task.signal)
        async with stream:
            await drain(stream, task.signal, events.add)
        return self.turn(task, events.done())


# -- Anthropic Messages ---------------------------------------------------------------------


def anthropic_tools(specs: Sequence[ToolSpec]) -> List[Dict[str, Any]]:
    return [{"name": s.name, "description": s.description, "input_schema": dict(s.parameters)} for s in specs]


def anthropic_tool_choice(choice: ToolChoice) -> Dict[str, Any]:
    if choice.mode == "tool":
        return {"type": "tool", "name": choice.name}
    return {"type": "any" if choice.mode == "required" else "auto"}


def anthropic_outcome(message: Any) -> Tuple[str, str, List[Any]]:
    """The message's text, the gate's finish reason, and its tool_use blocks."""
    text = "".join(block.text for block in message.content if block.type == "text")
    calls = [block for block in message.content if block.type == "tool_use"]
    reason = message.stop_reason
    finish = "stop" if reason in ANTHROPIC_STOPS else "tool_calls" if reason == "tool_use" else str(reason)
    if reason == "max_tokens":
        finish = "length"  # the contract's word for a turn cut off at the limit
    return text, finish, calls


def tool_result_block(call_id: str, result: ToolResult) -> Dict[str, Any]:
    block: Dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": result.text}
    if result.is_error:
        block["is_error"] = True
    return block


class MessageEvents:
    """The raw ``input_json_delta`` text of each content block, and whether ``message_stop`` came.

    The stream helper yields the raw events beside its own; the text is kept as sent,
    since the helper's ``input`` is what its partial-JSON parser made of it.
    """

    def __init__(self) -> None:
        self.arguments: Dict[int, List[str]] = {}
        self.stopped = False

    def add(self, event: Any) -> None:
        if event.type == "content_block_delta" and event.delta.type == "input_json_delta":
            self.arguments.setdefault(event.index, []).append(event.delta.partial_json)
        elif event.type == "message_stop":
            self.stopped = True

    def done(self) -> Dict[int, str]:
        if not self.stopped:
            raise BrokenStream("it ended before message_stop; the turn never completed")
        return {index: "".join(parts) for index, parts in self.arguments.items()}


class _AnthropicBase:
    def __init__(self, base_url: str, http2: bool = False) -> None:
        self.base_url = base_url
        self.http2 = http2

    def request(self, task: LoopTask, budget: Budget, history: List[Any]) -> Dict[str, Any]:
        kwargs: Dict[str, Any] = {
            "model": task.model,
            "max_tokens": MAX_TOKENS,
            "messages": history,
            "tools": anthropic_tools(task.tools),
            "timeout": budget.timeout(),
        }
        if task.tool_choice is not None and budget.answered == 0:
            kwargs["tool_choice"] = anthropic_tool_choice(task.tool_choice)
        return kwargs

    def turn(self, task: LoopTask, message: Any, arguments: Mapping[int, str]) -> Turn:
        """The turn; ``arguments`` is each streamed ``tool_use`` block's argument text, by index."""
        text, finish, _ = anthropic_outcome(message)
        calls: List[Call] = []
        content: List[Any] = []
        for index, block in enumerate(message.content):
            if block.type != "tool_use":
                content.append(block)
                continue
            call = prepare(task, block.id, block.name, arguments.get(index) or block.input)
            calls.append(call)
            if call.call.unparsed_arguments is None:
                content.append(block)
            else:  # never the helper's repaired object: the call did not parse
                content.append({"type": "tool_use", "id": block.id, "name": block.name, "input": {}})
        return Turn(text, finish, calls, [{"role": "assistant", "content": content}])

    def answer(self, answers: List[Tuple[Call, ToolResult]]) -> List[Any]:
        return [{"role": "user", "content": [tool_result_block(call.id, result) for call, result in answers]}]


class AnthropicLoop(_AnthropicBase, SyncDriver):
    """A sync loop over ``anthropic.Anthropic().messages``."""

    def __init__(self, base_url: str, http2: bool = False) -> None:
        super().__init__(base_url, http2)
        self.guard = SocketGuard()
        self.client = anthropic.Anthropic(
            api_key="test",
            base_url=base_url,
            max_retries=0,
            http_client=anthropic.DefaultHttpxClient(
                http1=not http2, http2=http2, event_hooks=self.guard.hooks()
            ),
        )

    def ask(self, task: LoopTask, kwargs: Dict[str, Any]) -> Turn:
        if not task.stream:
            return self.turn(task, self.client.messages.create(**kwargs), {})
        events = MessageEvents()
        with self.client.messages.stream(**kwargs) as stream:
            for event in stream:
                events.add(event)
            arguments = events.done()
            message = stream.get_final_message()
        return self.turn(task, message, arguments)


class AsyncAnthropicLoop(_AnthropicBase, AsyncDriver):
    """An async loop over ``anthropic.AsyncAnthropic().messages``."""

    def __init__(self, base_url: str, http2: bool = False) -> None:
        super().__init__(base_url, http2)
        self.client = anthropic.AsyncAnthropic(
            api_key="test",
            base_url=base_url,
            max_retries=0,
            http_client=anthropic.DefaultAsyncHttpxClient(http1=not http2, http2=http2),
        )

    async def aask(self, task: LoopTask, kwargs: Dict[str, Any]) -> Turn:
        if not task.stream:
            return self.turn(task, await race_abort(self.client.messages.create(**kwargs), task.signal), {})
        events = MessageEvents()
        async with self.client.messages.stream(**kwargs) as stream:
            await drain(stream, task.signal, events.add)
            arguments = events.done()
            message = await stream.get_final_message()
        return self.turn(task, message, arguments)


# -- which cases run by default ---------------------------------------------------------------

# ``CONFORMANCE_LONG_TESTS=1`` (CI sets it, LONG_TESTS) runs every loop class on every
# stage and mode; without it each loop module runs its ``QUICK`` subset, which keeps the
# default test run short. A class or test named on the command line always runs whole.
#: The stages besides the fault stages, every one in both modes.
PLAIN_STAGES = (
    "text",
    "forced-tool",
    "fragmented-arguments",
    "parallel-calls",
    "tool-error-corrects",
    "tool-error-insists",
    "cancel",
    "cancel-in-tool",
    "length-tool-turn",
    "content-filter-turn",
    "calls-with-stop",
    "large-result",
    "empty-result",
    "non-ascii-result",
    "error-result",
    "reasoning",
)


#: The streamed cases every loop runs by default: where a loop over a stream goes wrong.
STREAMED_EVERYWHERE = ("fragmented-arguments/stream", "parallel-calls/stream", "cancel/stream")


def cases(stages: Collection[str], modes: Collection[str] = ("chat", "stream")) -> List[str]:
    """``stage/mode`` keys of ``stages`` in ``modes``, as a ``QUICK`` entry lists them."""
    return [f"{stage}/{mode}" for stage in stages for mode in modes]


def share(part: int, parts: int = 3) -> List[str]:
    """One loop's share of the default run: every ``parts``-th case of the plain stages
    (each case runs in exactly one of the ``parts`` loops), and the streamed cases every
    loop runs."""
    plain = cases(PLAIN_STAGES)
    mine = plain[part::parts]
    return [*mine, *(key for key in STREAMED_EVERYWHERE if key not in mine)]


def quick_suite(tests: Any, quick: Mapping[str, Collection[str]]) -> Any:
    """The module's tests, narrowed to ``quick`` (class name to ``stage/mode`` keys) unless LONG_TESTS.

    Called from a test module's ``load_tests``. A key that names no generated test is an
    error, so that a renamed stage cannot silently drop a case from the default run.
    """
    import unittest

    from conformance.gate import AgentLoopConformanceTestCase

    if LONG_TESTS:
        return tests
    wanted = set()
    for name, keys in quick.items():
        for key in keys:
            stage, _, mode = key.partition("/")
            wanted.add((name, f"test_{stage.replace('-', '_')}_{mode}"))
    chosen = unittest.TestSuite()
    found = set()
    for test in flatten(tests):
        key = (type(test).__name__, getattr(test, "_testMethodName", ""))
        if key in wanted:
            found.add(key)
            chosen.addTest(test)
        elif not isinstance(test, AgentLoopConformanceTestCase):
            chosen.addTest(test)  # anything else the module holds, a load failure included
    missing = sorted(f"{name}.{method}" for name, method in wanted - found)
    if missing:
        raise LookupError(
            f"the quick subset names tests the module does not have: {', '.join(missing)}; "
            "fix the module's QUICK table"
        )
    return chosen


# -- the first stream in a process ------------------------------------------------------------


def warm_up(family: str) -> None:
    """Stream one scripted tool turn through the SDK, the way its loop streams, once per process.

    The first streamed reply an SDK reads in a process costs it far more than any
    later one: openai-python imports its stream machinery on first use and builds the
    pydantic models of each event type as it first meets it (about 0.5 to 2 s on a
    busy two-core machine). An abort that lands in that time is seen only after it,
    past the gate's bound for raising the reason, and the cancel stage, which runs
    first, would measure the SDK's start-up instead of the loop. A service pays this
    once, at its first request; the tests pay it here, before the first case.
    ``family`` is ``"openai-chat"``, ``"openai-responses"`` or ``"anthropic"``.
    """
    from conformance.gate import tool_specs
    from conformance.provider import start_fake_provider
    from conformance.wires._turns import ScriptedCall, ScriptedTurn, play_turn

    arguments = '{"text": "warm", "count": 1, "tags": []}'
    specs = tool_specs()
    if family == "anthropic":
        from conformance.wires.anthropic import anthropic_wire as wire

        call_id = "toolu_01WarmUpWarmUpWarmUpWarm"
    else:
        from conformance.wires.openai_chat import openai_chat_wire
        from conformance.wires.openai_responses import openai_responses_wire

        wire = openai_chat_wire if family == "openai-chat" else openai_responses_wire
        call_id = "call_WarmUpWarmUpWarmUpWarmUp"
    turn = ScriptedTurn(
        text="warm",
        calls=(ScriptedCall(call_id, "echo_json", arguments, (arguments[:9], arguments[9:])),),
        seed="warm-up",
    )
    prompt = [{"role": "user", "content": "warm up"}]
    with start_fake_provider() as provider:
        provider.reply(lambda request: play_turn(wire, turn, request))
        if family == "anthropic":
            client: Any = anthropic.Anthropic(api_key="test", base_url=provider.url, max_retries=0)
            with client.messages.stream(
                model="warm-up", max_tokens=MAX_TOKENS, messages=prompt, tools=anthropic_tools(specs)
            ) as stream:
                stream.get_final_message()
        elif family == "openai-chat":
            client = openai.OpenAI(api_key="test", base_url=f"{provider.url}/v1", max_retries=0)
            chunks = ChatChunks()
            with client.chat.completions.create(
                model="warm-up", messages=prompt, tools=chat_tools(specs), stream=True
            ) as chat:
                for chunk in chat:
                    chunks.add(chunk)
            chunks.done()
        else:
            client = openai.OpenAI(api_key="test", base_url=f"{provider.url}/v1", max_retries=0)
            events = ResponseEvents()
            with client.responses.create(
                model="warm-up", input=prompt, tools=responses_tools(specs), stream=True
            ) as responses:
                for event in responses:
                    events.add(event)
            events.done()
        client.close()
