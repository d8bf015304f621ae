"""A reference agent loop over any contract backend: the plainest loop that passes every stage.

It shows what the gate asks of a loop, in the order a loop meets it:

- Send the conversation in the contract's normal form; the backend renders it in
  its provider's shape. Force a tool (``task.tool_choice``) on the first request
  only, so that the model can answer once it has the result.
- Take a call only once it is complete: a stream yields calls at the end of their
  turn, and :class:`~conformance.gate.ToolCallTracker` refuses to run one before.
- Run each call once, keyed by its call id, through the task's toolset with the
  task's signal; send every result back under its call id, an error as the
  structured error it is, cut to ``max_result_chars`` where the loop has a limit.
- Never run a call to a tool the task lacks, or one whose arguments break its
  schema or are not a JSON object at all (``ToolCall.unparsed_arguments``, which the
  tracker reads as the text it is): answer it with ``ToolError("unknown_tool")`` or
  ``ToolError("invalid_arguments")`` under its id, and carry on.
- Run a write (a tool whose schema has an ``idempotency_key``, such as
  ``append_record``) at most once per key in a task (:func:`~conformance.gate.write_key`):
  a model that repeats the call under a new id, after a retry whose outcome it never
  saw, gets the first run's result back under the new id, and nothing lands twice.
  Reads may run again.
- Carry the assistant turn back whole (:meth:`Message.from_response`): its text,
  its calls and the reasoning the provider needs, unaltered.
- Look at the finish reason before running anything: a turn that ended ``length``
  (cut off at the output limit) or ``content_filter`` / ``refusal`` runs none of its
  calls, and the loop returns it as it is. A turn whose calls came with ``stop`` (as
  Gemini and Ollama always say) runs them: the calls present decide.
- Count requests and time; stop with ``stopped="budget"`` at either limit, before
  running a call whose result could not be sent. Sum the usage of every turn the
  provider answered in full into ``LoopResult.usage`` (``None`` where no turn
  reported any).
- On abort, the backend raises the reason and closes its connection; the loop lets
  it through and runs nothing more.
- Bound each request by what is left of ``max_seconds``. When a request fails in a
  way worth another try (a broken stream or connection, a retryable
  :class:`~conformance.LLMError` such as a 429), wait what the provider asked (or a
  short pause) if the budget allows, and send the same conversation again: the
  results already made go back as they are, and nothing runs a second time (the
  tracker keys executions by call id). A broken stream's calls were never complete,
  so nothing of it is kept. Otherwise raise the error, which says what happened.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Dict, List, Optional

from ..contract import (
    ChatRequest,
    ChatResponse,
    LLMError,
    Message,
    Reasoning,
    ToolCall,
    ToolError,
    ToolResult,
    Usage,
)
from .loop import LoopResult, LoopTask
from .state import ToolCallTracker
from .tools import write_key

__all__ = ["ReferenceLoop"]

#: The finish reasons whose turn's calls never run.
ENDED = ("length", "content_filter", "refusal")
#: The pause before another try where the provider asked for none.
RETRY_PAUSE = 0.05


class ReferenceLoop:
    """Runs a task over ``backend`` (an async contract backend such as the reference ones)."""

    def __init__(self, backend: Any, *, max_result_chars: Optional[int] = None) -> None:
        self.backend = backend
        self.max_result_chars = max_result_chars

    async def run(self, task: LoopTask) -> LoopResult:
        """Carry ``task`` to the model's final text, or to the budget."""
        started = time.monotonic()
        messages: List[Message] = [Message("user", task.prompt)]
        tracker = ToolCallTracker()
        schemas = {spec.name: spec.parameters for spec in task.tools}
        self._writes: Dict[str, ToolResult] = {}  # by write key: a write lands once
        sent = answered = 0
        last = ChatResponse("", "stop")
        usage: Optional[Usage] = None

        def ending(stopped: str = "done") -> LoopResult:
            return LoopResult(last.content, str(last.finish_reason), stopped=stopped, usage=usage)

        try:
            while True:
                task.signal.raise_if_aborted()
                left = task.max_seconds - (time.monotonic() - started)
                if sent >= task.max_requests or left <= 0:
                    return ending("budget")
                request = ChatRequest(
                    task.model,
                    tuple(messages),
                    tools=task.tools,
                    tool_choice=task.tool_choice if answered == 0 else None,
                    signal=task.signal,
                )
                sent += 1
                ask = self._stream(request) if task.stream else self.backend.chat(request)
                try:
                    last = await asyncio.wait_for(ask, left)
                except asyncio.TimeoutError:
                    return ending("budget")
                except (LLMError, ConnectionError, EOFError, ValueError) as exc:
                    pause = self._retry_pause(exc, task, started, sent)
                    if pause is None:
                        raise
                    await self._pause(task, pause)
                    continue
                answered += 1
                usage = _add(usage, last.usage)
                if not last.tool_calls or str(last.finish_reason) in ENDED:
                    # A turn cut off at the limit, or stopped by the content filter, ends the
                    # conversation: whatever calls it carries never completed.
                    return ending()
                if sent >= task.max_requests:
                    # No request is left to send results in: run nothing whose result would be lost.
                    return ending("budget")
                messages.append(Message.from_response(last))
                for call in last.tool_calls:
                    # A cancel that came while the call before ran: start nothing more.
                    task.signal.raise_if_aborted()
                    result = await self._execute(task, tracker, call, schemas.get(call.name))
                    messages.append(Message.tool(result))
        except BaseException:
            tracker.cancel_all("the loop stopped")
            raise

    def _retry_pause(
        self, error: BaseException, task: LoopTask, started: float, sent: int
    ) -> Optional[float]:
        """How long to wait before sending the failed request again; ``None`` to raise instead."""
        if task.signal.aborted:
            return None
        if isinstance(error, LLMError):
            if not error.retryable:
                return None
            pause = error.retry_after if error.retry_after is not None else RETRY_PAUSE
        elif isinstance(error, (ConnectionError, EOFError)) or _is_stream_error(error):
            pause = RETRY_PAUSE
        else:
            return None
        left = task.max_seconds - (time.monotonic() - started)
        if sent >= task.max_requests or pause >= left:
            return None  # no room for another try: the error says what happened
        return pause

    @staticmethod
    async def _pause(task: LoopTask, seconds: float) -> None:
        """Wait ``seconds``, or raise the abort reason as soon as the signal fires."""
        try:
            await asyncio.wait_for(task.signal.wait(), seconds)
        except asyncio.TimeoutError:
            return
        task.signal.raise_if_aborted()

    async def _stream(self, request: ChatRequest) -> ChatResponse:
        """The streamed turn gathered: text deltas joined, calls and reasoning as completed."""
        text: List[str] = []
        calls: List[ToolCall] = []
        reasoning: List[Reasoning] = []
        finish = "stop"
        usage: Optional[Usage] = None
        stream = self.backend.chat_stream(request)
        try:
            async for chunk in stream:
                text.append(chunk.content)
                calls.extend(chunk.tool_calls)
                reasoning.extend(chunk.reasoning)
                if chunk.finish_reason is not None:
                    finish = str(chunk.finish_reason)
                if chunk.usage is not None:
                    usage = chunk.usage  # the turn's usage: the last a stream reports
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return ChatResponse("".join(text), finish, tuple(calls), usage=usage, reasoning=tuple(reasoning))

    async def _execute(
        self, task: LoopTask, tracker: ToolCallTracker, call: ToolCall, schema: Any
    ) -> ToolResult:
        """Run ``call`` once, keyed by its id; invalid arguments go back as an error, unrun."""
        tracker.complete(call)
        if schema is None:
            error = ToolError("unknown_tool", f"there is no tool {call.name!r}")
            return ToolResult(call.id, call.name, error=error)
        problems = tracker.validate(call.id, schema)
        if problems:
            tracker.cancel(call.id, "invalid arguments")
            message = "; ".join(str(p) for p in problems)
            return ToolResult(call.id, call.name, error=ToolError("invalid_arguments", message))

        key = self._write_key(call, schema)
        if key is not None and key in self._writes:
            first = self._writes[key]
            tracker.cancel(call.id, "a repeat of a write that already landed")
            return ToolResult(call.id, call.name, first.content, first.error)

        async def run() -> ToolResult:
            return await task.toolset.aexecute(call, key=key or call.id, signal=task.signal)

        result: ToolResult = await tracker.aexecute(call.id, run)
        if key is not None:
            self._writes[key] = result
        limit = self.max_result_chars
        if limit is not None and result.error is None and len(result.content) > limit:
            result = ToolResult(result.call_id, result.name, result.content[:limit])
        return result

    @staticmethod
    def _write_key(call: ToolCall, schema: Any) -> Optional[str]:
        """The key a write runs once under (``None`` for a read, which may run again)."""
        return write_key(call, schema)

    async def aclose(self) -> None:
        """Close the backend's connections."""
        await self.backend.aclose()


def _add(total: Optional[Usage], turn: Optional[Usage]) -> Optional[Usage]:
    """``total`` with one more turn's usage added; a turn that reported none adds nothing."""
    if turn is None:
        return total
    if total is None:
        return Usage(turn.input_tokens, turn.output_tokens, turn.total_tokens)
    return Usage(
        total.input_tokens + turn.input_tokens,
        total.output_tokens + turn.output_tokens,
        total.total_tokens + turn.total_tokens,
    )


def _is_stream_error(error: BaseException) -> bool:
    """A stream that broke off inside an event: its bytes do not decode."""
    from ..reference._decoders import EventStreamError

    return isinstance(error, (EventStreamError, UnicodeDecodeError))
