"""The broken agent loops of the gate's zoo, and the taps that let some of them see calls early.

A loop is the reference loop with one classic bug. Most bugs live in the loop itself
(what it runs, what it sends back), so they run over every wire's reference backend
as it is. Three need to see a call before the backend hands it over complete (a loop
that runs a call on its first fragments, a loop that finishes the calls it saw
opening after a cancel, a loop that runs the calls a broken stream had begun): for
those, :func:`tapped` subclasses the wire's reference
backend so that every call it has seen opening, with the argument text so far, is
kept in ``opened``, and ``watch`` is called after each stream event.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Type

from conformance.contract import (
    AbortController,
    ChatRequest,
    ChatResponse,
    Message,
    ToolCall,
    ToolError,
    ToolResult,
    Usage,
)
from conformance.gate import validate
from conformance.gate.loop import LoopResult, LoopTask
from conformance.gate.reference_loop import ReferenceLoop
from conformance.reference import (
    REFERENCE_BACKENDS,
    AnthropicBackend,
    AnthropicVertexBackend,
    AzureOpenAIChatBackend,
    AzureOpenAIResponsesBackend,
    BedrockConverseBackend,
    BedrockInvokeBackend,
    CohereBackend,
    GeminiBackend,
    GeminiVertexBackend,
    OllamaBackend,
    OpenAIChatBackend,
    OpenAIResponsesBackend,
)

from .mutants._common import late_by

#: The result size limit every zoo target declares (as the reference loops do).
LIMIT = 4096


def close_partial(text: str) -> Optional[Any]:
    """What a partial-JSON parser makes of arguments still arriving: the text with its open
    strings, arrays and objects closed, parsed; ``None`` where even that does not parse."""
    stack: List[str] = []
    in_string = escape = False
    for char in text:
        if in_string:
            if escape:
                escape = False
            elif char == "\\":
                escape = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            stack.append("]" if char == "[" else "}")
        elif char in "]}" and stack:
            stack.pop()
    if escape:
        return None
    closed = text + ('"' if in_string else "") + "".join(reversed(stack))
    try:
        return json.loads(closed)
    except ValueError:
        return None


# -- the taps: every call seen opening, with its argument text so far ----------------------


class _Tap:
    """Mixed into a reference backend: ``opened`` maps call id to (tool, argument text so far)."""

    opened: Dict[str, Tuple[str, str]]
    watch: Optional[Callable[[Dict[str, Tuple[str, str]]], None]]

    def _init_tap(self) -> None:
        self.opened = {}
        self.watch = None
        self._items: Dict[int, List[str]] = {}

    def _seen(self, call_id: str, name: str, text: str) -> None:
        if call_id:
            self.opened[call_id] = (name, text)

    def _event(self) -> None:
        if self.watch is not None:
            self.watch(dict(self.opened))


class _ChatTap(_Tap, OpenAIChatBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_tap()

    def on_chunk(self, chunk: Mapping[str, Any], partials: Dict[int, Any]) -> str:
        text = super().on_chunk(chunk, partials)
        for partial in partials.values():
            self._seen(partial.id, partial.name, "".join(partial.arguments))
        self._event()
        return text


class _AzureChatTap(_ChatTap, AzureOpenAIChatBackend):
    """The Chat tap, over Azure's reference backend."""


class _ResponsesTap(_Tap, OpenAIResponsesBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_tap()
        self._calls: Dict[int, Tuple[str, str]] = {}

    def on_event(self, event: Mapping[str, Any], turn: Any, items: List[Mapping[str, Any]]) -> str:
        text = super().on_event(event, turn, items)
        kind, index = event.get("type"), int(event.get("output_index", -1))
        item = event.get("item") or {}
        if kind == "response.output_item.added" and item.get("type") == "function_call":
            self._calls[index] = (str(item.get("call_id", "")), str(item.get("name", "")))
            self._items[index] = []
        elif kind == "response.function_call_arguments.delta" and index in self._items:
            self._items[index].append(str(event.get("delta", "")))
        for at, (call_id, name) in self._calls.items():
            self._seen(call_id, name, "".join(self._items[at]))
        self._event()
        return text


class _AzureResponsesTap(_ResponsesTap, AzureOpenAIResponsesBackend):
    """The Responses tap, over Azure's reference backend."""


class _AnthropicTap(_Tap, AnthropicBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_tap()

    def on_event(self, name: str, data: str, turn: Any) -> str:
        text = super().on_event(name, data, turn)
        for block in turn.blocks.values():
            if block.type == "tool_use":
                self._seen(block.id, block.name, "".join(block.parts))
        self._event()
        return text


class _BedrockInvokeTap(_AnthropicTap, BedrockInvokeBackend):
    """Claude's events, as Bedrock's event stream carries them."""


class _VertexTap(_AnthropicTap, AnthropicVertexBackend):
    """Claude's events, as Vertex AI serves them."""


class _BedrockTap(_Tap, BedrockConverseBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_tap()

    def on_event(self, event_type: str, payload: Mapping[str, Any], turn: Any) -> str:
        text = super().on_event(event_type, payload, turn)
        for use in turn.tool_uses.values():
            self._seen(use.tool_use_id, use.name, "".join(use.input))
        self._event()
        return text


class _CohereTap(_Tap, CohereBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_tap()

    def on_event(self, event: Mapping[str, Any], turn: Any) -> str:
        text = super().on_event(event, turn)
        for partial in turn.calls.values():
            self._seen(partial.id, partial.name, "".join(partial.arguments))
        self._event()
        return text


class _GeminiTap(_Tap, GeminiBackend):
    """Gemini streams each call whole, in one event."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_tap()

    def read_response(self, body: Mapping[str, Any]) -> Any:
        text, calls, reason = super().read_response(body)
        for call in calls:
            self._seen(call.id, call.name, json.dumps(dict(call.arguments)))
        self._event()
        return text, calls, reason


class _GeminiVertexTap(_GeminiTap, GeminiVertexBackend):
    """Gemini on Vertex AI, read as the Gemini API is."""


class _OllamaTap(_Tap, OllamaBackend):
    """Ollama streams each call whole, in one line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_tap()

    def read_line(self, line: Mapping[str, Any]) -> Any:
        text, calls = super().read_line(line)
        for call in calls:
            self._seen(call.id, call.name, json.dumps(dict(call.arguments)))
        self._event()
        return text, calls


_TAPS: Dict[str, Callable[[str, bool], Any]] = {
    "openai-chat": lambda url, http2: _ChatTap(f"{url}/v1", http2=http2),
    "openai-responses": lambda url, http2: _ResponsesTap(f"{url}/v1", http2=http2),
    "azure-openai-chat": lambda url, http2: _AzureChatTap(url, http2=http2),
    "azure-openai-responses": lambda url, http2: _AzureResponsesTap(url, http2=http2),
    "anthropic": lambda url, http2: _AnthropicTap(url, http2=http2),
    "anthropic-vertex": lambda url, http2: _VertexTap(f"{url}/v1", http2=http2),
    "bedrock-invoke": lambda url, http2: _BedrockInvokeTap(url, http2=http2),
    "bedrock-converse": lambda url, http2: _BedrockTap(url, http2=http2),
    "cohere": lambda url, http2: _CohereTap(url, http2=http2),
    "gemini": lambda url, http2: _GeminiTap(url, http2=http2),
    "gemini-vertex": lambda url, http2: _GeminiVertexTap(url, http2=http2),
    "ollama": lambda url, http2: _OllamaTap(url, http2=http2),
}


def tapped(wire: str, url: str, http2: bool) -> Any:
    """``wire``'s reference backend, keeping every call it has seen opening."""
    return _TAPS[wire](url, http2)


def _literal(backend: Type[Any]) -> Type[Any]:
    """``backend`` reporting the provider's finish reason word for word, calls or not."""

    class Literal(backend):  # type: ignore[misc, valid-type]
        def finish_reason(self, reason: Any, calls: Any) -> str:
            return str(super().finish_reason(reason, []))

    Literal.__name__ = f"Literal{backend.__name__}"
    return Literal


_LITERAL: Dict[str, Callable[[str, bool], Any]] = {
    "openai-chat": lambda url, http2: _literal(OpenAIChatBackend)(f"{url}/v1", http2=http2),
    "gemini": lambda url, http2: _literal(GeminiBackend)(url, http2=http2),
    "gemini-vertex": lambda url, http2: _literal(GeminiVertexBackend)(url, http2=http2),
    "ollama": lambda url, http2: _literal(OllamaBackend)(url, http2=http2),
}


def literal(wire: str, url: str, http2: bool) -> Any:
    """``wire``'s reference backend taking the provider's finish reason at its word (a turn with
    calls that says stop stays stop); the wires whose providers send such a turn."""
    return _LITERAL[wire](url, http2)


def plain(wire: str, url: str, http2: bool) -> Any:
    """``wire``'s reference backend as it is."""
    return REFERENCE_BACKENDS[wire](url, http2)


# -- loops that need to see calls early ------------------------------------------------------


class EagerLoop(ReferenceLoop):
    """Runs each streamed call the moment its arguments so far, closed, pass the schema."""

    async def run(self, task: LoopTask) -> LoopResult:
        self.early: Dict[str, ToolResult] = {}
        schemas = {spec.name: spec.parameters for spec in task.tools}

        def watch(opened: Dict[str, Tuple[str, str]]) -> None:
            for call_id, (name, text) in opened.items():
                arguments = close_partial(text)
                schema = schemas.get(name)
                if call_id in self.early or not isinstance(arguments, dict) or schema is None:
                    continue
                if not validate(schema, arguments):
                    call = ToolCall(call_id, name, arguments)
                    self.early[call_id] = task.toolset.execute(call, key=call_id, signal=task.signal)

        self.backend.watch = watch if task.stream else None
        return await super().run(task)

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        if call.id in self.early:
            return self.early[call.id]
        return await super()._execute(task, tracker, call, schema)


#: How long the after-cancel loop lets its turn run on, at most, for a call to open.
FINISH_WITHIN = 1.0


class FinishesAfterCancel(ReferenceLoop):
    """On abort, lets its turn read on until a call has opened, then runs the calls it had
    seen opening, to leave nothing half done, and only then stops.

    Waiting for the call, rather than taking whatever was parsed at the abort, keeps the
    bug the same on a loaded machine: where the call arrives whole (Gemini, Ollama) the
    abort may otherwise come before the loop has read the held chunk.
    """

    async def run(self, task: LoopTask) -> LoopResult:
        inner = AbortController()

        def defer(reason: BaseException) -> None:
            def fire() -> None:
                deadline = time.monotonic() + FINISH_WITHIN
                while not self.backend.opened and time.monotonic() < deadline:
                    time.sleep(0.005)
                inner.abort(reason)

            threading.Thread(target=fire, name="finishes-after-cancel", daemon=True).start()

        unregister = task.signal.add_callback(defer)
        try:
            return await super().run(replace(task, signal=inner.signal))
        except Exception:
            self.finish_opened(task)
            raise
        finally:
            unregister()

    def finish_opened(self, task: LoopTask) -> None:
        for call_id, (name, text) in list(self.backend.opened.items()):
            arguments = close_partial(text)
            call = ToolCall(call_id, name, arguments if isinstance(arguments, dict) else {})
            task.toolset.execute(call)  # no signal: it would refuse


#: How long after ``run()`` has raised ``FinishesInTheBackground``'s leftover task starts
#: its tool: well inside the gate's grace, and past the moment the loop was seen returning.
BACKGROUND_AFTER = 0.05


class FinishesInTheBackground(FinishesAfterCancel):
    """On abort, raises the reason but leaves a task behind that, once the loop has returned,
    runs the calls it had seen opening (a tool task nobody cancelled or awaited)."""

    async def run(self, task: LoopTask) -> LoopResult:
        self.returned = threading.Event()
        try:
            return await super().run(task)
        finally:
            self.returned.set()

    def finish_opened(self, task: LoopTask) -> None:
        def leftover() -> None:
            if self.returned.wait(FINISH_WITHIN + 1.0):
                time.sleep(BACKGROUND_AFTER)
                FinishesAfterCancel.finish_opened(self, task)

        threading.Thread(target=leftover, name="left in the background", daemon=True).start()


# -- loops with a bug of their own -----------------------------------------------------------


class RerunsEarlierCalls(ReferenceLoop):
    """Runs every call of the conversation again on each turn (no idempotency key)."""

    async def run(self, task: LoopTask) -> LoopResult:
        self.done: List[ToolCall] = []
        return await super().run(task)

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        for earlier in self.done:
            if earlier.id != call.id:
                await task.toolset.aexecute(earlier, signal=task.signal)
        self.done.append(call)
        return await task.toolset.aexecute(call, key=call.id, signal=task.signal)


class PastBudget(ReferenceLoop):
    """Ignores the request budget the task gives it."""

    async def run(self, task: LoopTask) -> LoopResult:
        return await super().run(replace(task, max_requests=task.max_requests + 10))


class NeverForcesTheTool(ReferenceLoop):
    """Leaves the task's tool choice out of its requests: the model is never told it must call."""

    async def run(self, task: LoopTask) -> LoopResult:
        return await super().run(replace(task, tool_choice=None))


class OffByOneBudget(ReferenceLoop):
    """Counts its requests from the second one on, so it sends one more than the budget, then
    says it stopped at the budget."""

    async def run(self, task: LoopTask) -> LoopResult:
        return await super().run(replace(task, max_requests=task.max_requests + 1))


class SaysDoneAtItsBudget(ReferenceLoop):
    """Stops at its budget, but reports ``stopped="done"`` as if the model had finished."""

    async def run(self, task: LoopTask) -> LoopResult:
        return replace(await super().run(task), stopped="done")


class SaysBudgetAfterATool(ReferenceLoop):
    """Reports ``stopped="budget"`` whenever the conversation ran a tool, though the model finished."""

    async def run(self, task: LoopTask) -> LoopResult:
        result = await super().run(task)
        return replace(result, stopped="budget") if len(task.toolset.log) else result


class _Intercepting(ReferenceLoop):
    """A loop that asks for every turn, whole or streamed, through :meth:`intercept`."""

    def __init__(self, backend: Any, **kwargs: Any) -> None:
        super().__init__(backend, **kwargs)
        whole = backend.chat

        async def chat(request: ChatRequest) -> ChatResponse:
            return await self.intercept(request, whole)

        self.backend = _Wrapped(backend, chat=chat)

    async def _stream(self, request: ChatRequest) -> ChatResponse:
        return await self.intercept(request, super()._stream)

    async def intercept(self, request: ChatRequest, ask: Callable[[ChatRequest], Any]) -> ChatResponse:
        """The turn the loop goes on with; ``ask`` sends ``request`` as the loop would."""
        raise NotImplementedError


class _Observing(_Intercepting):
    """A loop shown every response its backend gives, whole or streamed, through :meth:`observe`."""

    async def intercept(self, request: ChatRequest, ask: Callable[[ChatRequest], Any]) -> ChatResponse:
        response: ChatResponse = await ask(request)
        self.observe(response)
        return response

    def observe(self, response: ChatResponse) -> None:
        """Called with each response, in the order the turns came."""
        raise NotImplementedError


#: How long after ``run()`` has raised ``RunsTheRestLater``'s leftover thread runs the turn's
#: other calls: past the quiet the gate once watched for (0.25 s), within the one it watches now.
LATER_BY = 0.4


class RunsTheRestLater(_Observing):
    """On abort in a tool, raises the reason at once, but hands the turn's calls not yet run to a
    thread that runs them a while after ``run()`` has raised (to leave nothing half done)."""

    turn: Sequence[ToolCall] = ()
    begun: List[str] = []

    async def run(self, task: LoopTask) -> LoopResult:
        self.turn = ()
        self.begun = []
        try:
            return await super().run(task)
        except BaseException as exc:
            if exc is task.signal.reason:
                turn: Sequence[ToolCall] = self.turn
                rest = [call for call in turn if call.id not in self.begun]

                def later() -> None:
                    time.sleep(LATER_BY)
                    for call in rest:
                        task.toolset.execute(call)  # no signal: it would refuse

                threading.Thread(target=later, name="runs-the-rest-later", daemon=True).start()
            raise

    def observe(self, response: ChatResponse) -> None:
        self.turn = response.tool_calls

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        self.begun.append(call.id)
        return await super()._execute(task, tracker, call, schema)


class KeepsTheFirstFinishReason(_Observing):
    """Returns the finish reason of the first turn (``tool_calls``), not of the last."""

    async def run(self, task: LoopTask) -> LoopResult:
        self.first: Optional[str] = None
        result = await super().run(task)
        return replace(result, finish_reason=self.first or result.finish_reason)

    def observe(self, response: ChatResponse) -> None:
        if self.first is None:
            self.first = str(response.finish_reason)


class SkipsValidation(ReferenceLoop):
    """Hands every call of a known tool to the toolset without checking its arguments against
    the tool's schema (the tool is left to cope)."""

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        return await super()._execute(task, tracker, call, {} if schema is not None else None)


class HandsEveryCallOn(ReferenceLoop):
    """Hands every call to the toolset as it came, an unknown tool's and one whose arguments do not
    parse included, and sends back whatever the toolset says (its refusal is an error, so the
    model is told; a tool of the loop's own would have run on it)."""

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        tracker.complete(call)
        return await task.toolset.aexecute(call, key=call.id, signal=task.signal)


class StopsWithoutAWord(ReferenceLoop):
    """At a failed request, gives up with a bare ``RuntimeError()`` that says nothing."""

    def _retry_pause(self, error: BaseException, task: LoopTask, started: float, sent: int) -> Any:
        if task.signal.aborted:
            return None
        raise RuntimeError() from error


class TimesOutWithoutAWord(ReferenceLoop):
    """At a failed request, gives up with a bare ``TimeoutError()``, also where nothing timed out."""

    def _retry_pause(self, error: BaseException, task: LoopTask, started: float, sent: int) -> Any:
        if task.signal.aborted:
            return None
        raise TimeoutError() from error


class RaisesABareTimeout(ReferenceLoop):
    """Where its time runs out, raises a bare ``TimeoutError()`` (as aiohttp's total timeout does)
    instead of stopping with ``stopped="budget"``: no bug, its class says what happened."""

    async def run(self, task: LoopTask) -> LoopResult:
        result = await super().run(task)
        if str(getattr(result.stopped, "value", result.stopped)) == "budget":
            raise TimeoutError()
        return result


class DropsUsage(ReferenceLoop):
    """Reads no usage from its turns, and so reports it unavailable (``usage=None``)."""

    async def run(self, task: LoopTask) -> LoopResult:
        return replace(await super().run(task), usage=None)


class ZeroesMissingUsage(ReferenceLoop):
    """Reports usage as zeros where no turn carried any, rather than unavailable (``usage=None``).

    Over Chat Completions it streams without asking for usage (no
    ``stream_options.include_usage``, a client's choice), so the provider reports none;
    elsewhere every turn carries usage and the bug cannot show.
    """

    def __init__(self, backend: Any, **kwargs: Any) -> None:
        super().__init__(backend, **kwargs)
        if isinstance(backend, OpenAIChatBackend):
            whole = backend.body

            def body(chat: ChatRequest, stream: bool) -> Dict[str, Any]:
                out: Dict[str, Any] = whole(chat, stream)
                out.pop("stream_options", None)
                return out

            backend.body = body  # type: ignore[method-assign]

    async def run(self, task: LoopTask) -> LoopResult:
        result = await super().run(task)
        return result if result.usage is not None else replace(result, usage=Usage(0, 0, 0))


class ReturnsAtOnce(ReferenceLoop):
    """Returns an empty answer at once, asking the model nothing (a loop that takes a task it
    cannot start, here every task, for one already done)."""

    async def run(self, task: LoopTask) -> LoopResult:
        return LoopResult("", "stop")


class HangsAfterTheAnswer(ReferenceLoop):
    """Carries the task to the model's final text, then waits on an event nobody sets: ``run()``
    never returns (a completion callback the loop awaits but never fires)."""

    async def run(self, task: LoopTask) -> LoopResult:
        import asyncio

        await super().run(task)
        await asyncio.Event().wait()
        raise AssertionError("unreachable: the event is never set")


class KeepsTheLastTurnsUsage(_Observing):
    """Reports the usage of the last turn alone, not the sum over the conversation."""

    async def run(self, task: LoopTask) -> LoopResult:
        self.last: Any = None
        return replace(await super().run(task), usage=self.last)

    def observe(self, response: ChatResponse) -> None:
        self.last = response.usage


class ReturnsTheResponse(ReferenceLoop):
    """Hands back the backend's last response instead of a LoopResult."""

    async def run(self, task: LoopTask) -> Any:
        result = await super().run(task)
        return ChatResponse(result.text, result.finish_reason)


class KeepsTheFirstText(_Observing):
    """Returns the text of the first turn (empty on a tool turn), not the model's final text."""

    async def run(self, task: LoopTask) -> LoopResult:
        self.first: Optional[str] = None
        result = await super().run(task)
        return replace(result, text=self.first or "")

    def observe(self, response: ChatResponse) -> None:
        if self.first is None:
            self.first = response.content


class AsksOnceMore(ReferenceLoop):
    """After the model's final text, asks once more ("anything else?") and returns that answer."""

    async def run(self, task: LoopTask) -> LoopResult:
        result = await super().run(task)
        request = ChatRequest(
            task.model,
            (
                Message("user", task.prompt),
                Message("assistant", result.text),
                Message("user", "Anything else?"),
            ),
            tools=task.tools,
            signal=task.signal,
        )
        again = await (self._stream(request) if task.stream else self.backend.chat(request))
        return LoopResult(again.content, str(again.finish_reason))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class CamelCasesToolNames(ReferenceLoop):
    """Dispatches calls by a camel-cased name (echo_json -> echoJson), as a registry of its own would."""

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        renamed = ToolCall(call.id, _camel(call.name), call.arguments)
        result = await task.toolset.aexecute(renamed, key=call.id, signal=task.signal)
        return replace(result, name=call.name)


def _ascii(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("ascii", "replace").decode()
    if isinstance(value, list):
        return [_ascii(v) for v in value]
    if isinstance(value, dict):
        return {k: _ascii(v) for k, v in value.items()}
    return value


class MangledArguments(ReferenceLoop):
    """Decodes a call's arguments as ASCII, each other character a '?'."""

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        mangled = ToolCall(call.id, call.name, _ascii(dict(call.arguments)), call.reasoning)
        return await super()._execute(task, tracker, mangled, schema)


class WrapsTheAbort(ReferenceLoop):
    """Catches the caller's abort and raises an error of its own instead."""

    async def run(self, task: LoopTask) -> LoopResult:
        try:
            return await super().run(task)
        except Exception as exc:
            raise RuntimeError(f"the agent was cancelled: {exc}") from exc


#: How long ``RaisesTheAbortLate`` waits: twice the bound, counted as the bound counts it
#: (``late_by``: a stall of the whole process does not shorten it).
LATE_ABORT = 1.0


class RaisesTheAbortLate(ReferenceLoop):
    """Raises the caller's abort reason, but only after tidying up for a second."""

    async def run(self, task: LoopTask) -> LoopResult:
        try:
            return await super().run(task)
        except BaseException as exc:
            if exc is task.signal.reason:
                await late_by(LATE_ABORT)
            raise


class LeavesTheRequestRunning(ReferenceLoop):
    """Watches the signal itself and raises its reason, but never tells the client: the request
    (and its connection) carries on in a task of its own."""

    async def run(self, task: LoopTask) -> LoopResult:
        import asyncio

        from conformance.contract import AbortController

        detached = replace(task, signal=AbortController().signal)
        work = asyncio.ensure_future(super().run(detached))
        self.detached = work  # kept: the request goes on after run() has returned
        aborted = asyncio.ensure_future(task.signal.wait())
        done, _ = await asyncio.wait({work, aborted}, return_when=asyncio.FIRST_COMPLETED)
        if work in done:
            aborted.cancel()
            return work.result()
        task.signal.raise_reason()


class KeepsTheSignalFromTools(ReferenceLoop):
    """Checks the signal before each call, but never hands it to the toolset: a running tool
    goes on to its end."""

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        task.signal.raise_if_aborted()
        return await super()._execute(replace(task, signal=AbortController().signal), tracker, call, schema)


#: How long after the task's signal ``RelaysTheSignalLate`` fires the one it handed the tool.
RELAY_AFTER = 0.2


class RelaysTheSignalLate(ReferenceLoop):
    """Hands each tool a signal of its own, and fires it from the task's 200 ms late (a relay that
    polls, or is scheduled behind other work): the tool stops, but runs on past the cancel."""

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        own = AbortController()

        def relay(reason: BaseException) -> None:
            threading.Timer(RELAY_AFTER, own.abort, (reason,)).start()

        unregister = task.signal.add_callback(relay)
        try:
            return await super()._execute(replace(task, signal=own.signal), tracker, call, schema)
        finally:
            unregister()


class WaitsTheToolOut(ReferenceLoop):
    """Never lets the abort interrupt its work: waits the running tool out, runs the turn's other
    calls, and carries the conversation on to its end."""

    async def run(self, task: LoopTask) -> LoopResult:
        return await super().run(replace(task, signal=AbortController().signal))


class SendsTheResultsFirst(_Observing):
    """On abort, first sends the model an error result for each call of its turn, so that the
    provider's side of the conversation is complete, then raises the reason."""

    def observe(self, response: ChatResponse) -> None:
        self.last = response

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        try:
            return await super()._execute(task, tracker, call, schema)
        except BaseException as exc:
            if exc is task.signal.reason:
                await self._tell(task)
            raise

    async def _tell(self, task: LoopTask) -> None:
        stopped = ToolError("aborted", "the caller cancelled")
        results = [Message.tool(ToolResult(c.id, c.name, error=stopped)) for c in self.last.tool_calls]
        request = ChatRequest(
            task.model,
            (Message("user", task.prompt), Message.from_response(self.last), *results),
            tools=task.tools,
            signal=AbortController().signal,
        )
        await (self._stream(request) if task.stream else self.backend.chat(request))


class SendsErrorsAsText(ReferenceLoop):
    """Sends a failed tool's message back as plain text, without the structured error."""

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        result = await super()._execute(task, tracker, call, schema)
        if result.error is not None:
            return ToolResult(result.call_id, result.name, f"Tool failed: {result.error.message}")
        return result


class IgnoresItsLimit(ReferenceLoop):
    """Declares max_result_chars on its target but sends every result back whole."""

    def __init__(self, backend: Any, **kwargs: Any) -> None:
        super().__init__(backend, max_result_chars=None)


# -- loops that rewrite the conversation they send --------------------------------------------


class _Wrapped:
    """A backend with some of its methods replaced."""

    def __init__(self, backend: Any, **methods: Any) -> None:
        self._backend = backend
        self.__dict__.update(methods)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


class _Rewriting:
    """A backend wrapper that rewrites each request's messages before sending it."""

    def __init__(self, backend: Any, transform: Callable[[List[Message]], List[Message]]) -> None:
        self.backend, self.transform = backend, transform

    def _request(self, request: ChatRequest) -> ChatRequest:
        return replace(request, messages=tuple(self.transform(list(request.messages))))

    async def chat(self, request: ChatRequest) -> Any:
        return await self.backend.chat(self._request(request))

    def chat_stream(self, request: ChatRequest) -> Any:
        return self.backend.chat_stream(self._request(request))

    async def aclose(self) -> None:
        await self.backend.aclose()


def rewrite(transform: Callable[[List[Message]], List[Message]]) -> Type[ReferenceLoop]:
    """A loop class whose requests carry ``transform`` of the conversation."""

    class Rewrites(ReferenceLoop):
        def __init__(self, backend: Any, **kwargs: Any) -> None:
            super().__init__(_Rewriting(backend, transform), **kwargs)

    Rewrites.__name__ = f"Rewrites{transform.__name__.title().replace('_', '')}"
    return Rewrites


def results_as_user(messages: List[Message]) -> List[Message]:
    return [Message("user", m.content) if m.role == "tool" else m for m in messages]


def swap_results(messages: List[Message]) -> List[Message]:
    out = list(messages)
    spots = [i for i, m in enumerate(out) if m.role == "tool"]
    if len(spots) >= 2:
        a, b = out[spots[0]].tool_result, out[spots[1]].tool_result
        assert a is not None and b is not None
        out[spots[0]] = Message.tool(ToolResult(a.call_id, a.name, b.content, b.error))
        out[spots[1]] = Message.tool(ToolResult(b.call_id, b.name, a.content, a.error))
    return out


def drop_errors(messages: List[Message]) -> List[Message]:
    failed = {m.tool_result.call_id for m in messages if m.tool_result is not None and m.tool_result.is_error}
    out = []
    for m in messages:
        if m.tool_result is not None and m.tool_result.call_id in failed:
            continue
        if m.tool_calls and all(c.id in failed for c in m.tool_calls):
            continue
        out.append(m)
    return out


def _empty_output(result: Optional[ToolResult]) -> bool:
    """Whether a tool's output is empty: no text at all, or a JSON object whose ``content`` is ""."""
    if result is None or result.is_error:
        return False
    try:
        data = json.loads(result.content) if result.content else {}
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("content", "") == ""


def drop_empty(messages: List[Message]) -> List[Message]:
    """Leaves out every result whose output is empty, and the turn that called it."""
    empty = {
        m.tool_result.call_id for m in messages if m.tool_result is not None and _empty_output(m.tool_result)
    }
    out = []
    for m in messages:
        if m.tool_result is not None and m.tool_result.call_id in empty:
            continue
        if m.tool_calls and all(c.id in empty for c in m.tool_calls):
            continue
        out.append(m)
    return out


def mangle_non_ascii(messages: List[Message]) -> List[Message]:
    out = []
    for m in messages:
        r = m.tool_result
        if r is not None and r.error is None:
            m = Message.tool(ToolResult(r.call_id, r.name, r.content.encode("ascii", "replace").decode()))
        out.append(m)
    return out


def send_results_twice(messages: List[Message]) -> List[Message]:
    """Sends each result twice, as a loop that appends a result on every retry of its bookkeeping."""
    out = []
    for m in messages:
        out.append(m)
        if m.tool_result is not None:
            out.append(m)
    return out


def cut_call_signatures(messages: List[Message]) -> List[Message]:
    """Keeps only the first 16 characters of each call's signature (a copy cut for logging)."""
    out = []
    for m in messages:
        if m.role == "assistant" and any(c.reasoning for c in m.tool_calls):
            calls = tuple(
                replace(c, reasoning=tuple(replace(r, signature=r.signature[:16]) for r in c.reasoning))
                for c in m.tool_calls
            )
            m = replace(m, tool_calls=calls)
        out.append(m)
    return out


def drop_call_turns(messages: List[Message]) -> List[Message]:
    """Leaves out each assistant turn that made calls, keeping the results, as a loop that rebuilds
    its history from the results alone."""
    return [m for m in messages if not (m.role == "assistant" and m.tool_calls)]


DropsCallTurns = rewrite(drop_call_turns)


def drop_reasoning(messages: List[Message]) -> List[Message]:
    """Rebuilds each assistant turn from its text and calls alone, as a loop that keeps no reasoning."""
    out = []
    for m in messages:
        if m.role == "assistant":
            calls = tuple(ToolCall(c.id, c.name, c.arguments) for c in m.tool_calls)
            m = Message("assistant", m.content, tool_calls=calls)
        out.append(m)
    return out


# -- loops that mishandle a fault ---------------------------------------------------------------


class RunsBrokenCalls(ReferenceLoop):
    """When a stream breaks off, runs the calls it had seen opening (their open JSON closed),
    to keep the work the model had begun, then retries."""

    async def run(self, task: LoopTask) -> LoopResult:
        self.kept: Dict[str, ToolResult] = {}
        self.task = task
        return await super().run(task)

    async def _stream(self, request: ChatRequest) -> ChatResponse:
        self.backend.opened.clear()  # only this stream's calls: the earlier ones ran as they should
        try:
            return await super()._stream(request)
        except Exception:
            for call_id, (name, text) in self.backend.opened.items():
                arguments = close_partial(text)
                if call_id not in self.kept and isinstance(arguments, dict):
                    call = ToolCall(call_id, name, arguments)
                    self.kept[call_id] = await self.task.toolset.aexecute(
                        call, key=call_id, signal=request.signal
                    )
            raise


class EndsOnABrokenStream(ReferenceLoop):
    """Takes a stream that broke off as the end of the model's turn: it returns the text so far."""

    async def _stream(self, request: ChatRequest) -> ChatResponse:
        try:
            return await super()._stream(request)
        except Exception:
            return ChatResponse("", "stop")


class RerunsOnRetry(ReferenceLoop):
    """Before sending a failed request again, runs the last turn's calls again to rebuild their results."""

    async def run(self, task: LoopTask) -> LoopResult:
        self.last_calls: List[ToolCall] = []
        return await super().run(task)

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        self.last_calls.append(call)
        return await super()._execute(task, tracker, call, schema)

    async def _pause(self, task: LoopTask, seconds: float) -> None:
        for call in self.last_calls:
            await task.toolset.aexecute(call, key=call.id, signal=task.signal)
        await super()._pause(task, seconds)


class RetriesAtOnce(ReferenceLoop):
    """Sends a failed request again at once, whatever delay the provider asked for."""

    def _retry_pause(self, error: BaseException, task: LoopTask, started: float, n: int) -> Optional[float]:
        pause = super()._retry_pause(error, task, started, n)
        return None if pause is None else 0.0


class KeysWritesByCallId(ReferenceLoop):
    """Keys every execution by its call id alone, writes too: a write the model repeats under a
    new call id runs again."""

    @staticmethod
    def _write_key(call: ToolCall, schema: Any) -> Optional[str]:
        return None


class RunsCutOffCalls(ReferenceLoop):
    """When a turn ends at the output limit, runs the calls it had seen opening (their open
    JSON closed), so as not to lose the work the model began, then returns the turn."""

    async def run(self, task: LoopTask) -> LoopResult:
        self.task = task
        return await super().run(task)

    async def _stream(self, request: ChatRequest) -> ChatResponse:
        self.backend.opened.clear()
        response = await super()._stream(request)
        if str(response.finish_reason) == "length":
            for call_id, (name, text) in self.backend.opened.items():
                arguments = close_partial(text)
                if isinstance(arguments, dict):
                    call = ToolCall(call_id, name, arguments)
                    await self.task.toolset.aexecute(call, key=call_id, signal=request.signal)
        return response


class SaysStopAtTheLimit(ReferenceLoop):
    """Reports a turn cut off at the output limit as if the model had finished (stop)."""

    async def run(self, task: LoopTask) -> LoopResult:
        result = await super().run(task)
        return replace(result, finish_reason="stop") if result.finish_reason == "length" else result


class StopsSilentlyAtTheLimit(ReferenceLoop):
    """Raises an error with no message when a turn is cut off at the output limit."""

    async def run(self, task: LoopTask) -> LoopResult:
        result = await super().run(task)
        if result.finish_reason == "length":
            raise RuntimeError()
        return result


class RunsOnlyToolCallTurns(_Intercepting):
    """Runs a turn's calls only when its finish reason says tool_calls; any other finish ends it."""

    async def intercept(self, request: ChatRequest, ask: Callable[[ChatRequest], Any]) -> ChatResponse:
        response: ChatResponse = await ask(request)
        if str(response.finish_reason) != "tool_calls":
            return ChatResponse(response.content, response.finish_reason, usage=response.usage)
        return response


class AsksAgainWhenFiltered(_Intercepting):
    """Takes a turn the content filter ended for a fluke and sends the same request once more."""

    async def intercept(self, request: ChatRequest, ask: Callable[[ChatRequest], Any]) -> ChatResponse:
        from conformance.gate.reference_loop import _add

        response: ChatResponse = await ask(request)
        if str(response.finish_reason) in ("content_filter", "refusal"):
            first = response
            response = await ask(request)
            # Both turns count (its only bug is the request it should not have sent).
            response = replace(response, usage=_add(first.usage, response.usage))
        return response


def _closest_tool(name: str, known: List[str]) -> Optional[str]:
    import difflib

    guess = difflib.get_close_matches(name, known, n=1, cutoff=0.3)
    return guess[0] if guess else None


class GuessesTools(ReferenceLoop):
    """Runs a call to a tool it lacks as the known tool whose name is closest."""

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        known = [spec.name for spec in task.tools]
        guess = None if call.name in known else _closest_tool(call.name, known)
        if guess is None:
            return await super()._execute(task, tracker, call, schema)
        ran = await task.toolset.aexecute(replace(call, name=guess), key=call.id, signal=task.signal)
        return ToolResult(call.id, call.name, ran.content, ran.error)


class GuessesToolsButSaysNot(ReferenceLoop):
    """Runs a call to a tool it lacks as the known tool whose name is closest (for the log), but
    tells the model the tool does not exist: the run is the bug, the result is right."""

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        known = [spec.name for spec in task.tools]
        guess = None if call.name in known else _closest_tool(call.name, known)
        if guess is not None:
            await task.toolset.aexecute(replace(call, name=guess), key=call.id, signal=task.signal)
        return await super()._execute(task, tracker, call, schema)


class RefusesInPlainText(ReferenceLoop):
    """Refuses a call it must refuse without running it, but says so in plain text, not as a
    structured error (the model cannot tell the refusal from a tool's output)."""

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        result = await super()._execute(task, tracker, call, schema)
        if result.error is not None and result.error.code in ("unknown_tool", "invalid_arguments"):
            return ToolResult(call.id, call.name, f"Error: {result.error.message}")
        return result


class RaisesOnARefusedCall(ReferenceLoop):
    """Raises where a call names a tool it lacks, instead of sending the error back to the model."""

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        if schema is None:
            raise LookupError(f"no tool {call.name!r}")
        return await super()._execute(task, tracker, call, schema)


class RaisesAfterTheAnswer(ReferenceLoop):
    """Carries the task to the model's final text, then raises on tidying up (a bug of its own)."""

    async def run(self, task: LoopTask) -> LoopResult:
        await super().run(task)
        raise RuntimeError("the loop's own bookkeeping failed after the answer")


class RepairsBrokenJson(ReferenceLoop):
    """Closes the open strings, arrays and objects of arguments that did not parse, and runs the call."""

    async def _execute(self, task: LoopTask, tracker: Any, call: ToolCall, schema: Any) -> ToolResult:
        if call.unparsed_arguments is not None:
            repaired = close_partial(call.unparsed_arguments)
            if isinstance(repaired, dict):
                call = ToolCall(call.id, call.name, repaired, call.reasoning)
        return await super()._execute(task, tracker, call, schema)


#: The budget ``OverstaysItsBudget`` keeps to instead of the task's.
OWN_BUDGET = 2.5


class OverstaysItsBudget(ReferenceLoop):
    """Stops at a budget of its own, seconds past the task's ``max_seconds``."""

    async def run(self, task: LoopTask) -> LoopResult:
        return await super().run(replace(task, max_seconds=OWN_BUDGET))


class NoDeadline(ReferenceLoop):
    """Waits as long as the provider takes: it never bounds a request by its budget."""

    async def run(self, task: LoopTask) -> LoopResult:
        return await super().run(replace(task, max_seconds=3600.0))


class _Restarting:
    """A backend wrapper that, once a request has failed, sends only the conversation's first
    message (the user's prompt) on the next one: the tool turn and its results are gone."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.failed = False

    def _request(self, request: ChatRequest) -> ChatRequest:
        if not self.failed:
            return request
        self.failed = False
        return replace(request, messages=request.messages[:1])

    async def chat(self, request: ChatRequest) -> Any:
        try:
            return await self.backend.chat(self._request(request))
        except Exception:
            self.failed = True
            raise

    async def chat_stream(self, request: ChatRequest) -> Any:
        stream = self.backend.chat_stream(self._request(request))
        try:
            async for chunk in stream:
                yield chunk
        except Exception:
            self.failed = True
            raise
        finally:
            await stream.aclose()

    async def aclose(self) -> None:
        await self.backend.aclose()


class RestartsAfterAFailure(ReferenceLoop):
    """After a request that got no reply, starts the conversation again from the user's prompt,
    without the tool turn and its results, and returns what the model answers to that."""

    def __init__(self, backend: Any, **kwargs: Any) -> None:
        super().__init__(_Restarting(backend), **kwargs)


def drop_result_ids(messages: List[Message]) -> List[Message]:
    """Sends every result without its call id, by the tool's name alone."""
    out = []
    for m in messages:
        r = m.tool_result
        if r is not None:
            m = Message.tool(ToolResult("", r.name, r.content, r.error))
        out.append(m)
    return out


def double_results(messages: List[Message]) -> List[Message]:
    """Sends every result twice, one right after the other."""
    out = []
    for m in messages:
        out.append(m)
        if m.tool_result is not None:
            out.append(m)
    return out
