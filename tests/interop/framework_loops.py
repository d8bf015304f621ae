"""Agent frameworks driven with the gate's tools: what a team gets from a framework's loop.

- ``AnthropicToolRunnerLoop``: anthropic-python's own loop,
  ``client.beta.messages.tool_runner(...)``, whole replies and ``stream=True``. It
  runs each ``tool_use`` through the tool's ``call(input)``, sends the results back
  and stops when the model stops calling, or at ``max_iterations``. It is made with
  ``thread=False``: by default (anthropic 2.x) the runner keeps the conversation in a
  server-side message thread (the ``message-threads-2026-08-12`` beta) and sends only
  the new messages each turn, which a provider or gateway that keeps no threads
  refuses (its second request starts with a ``tool_result`` that answers nothing).
- ``OpenAIAgentsLoop``: the OpenAI Agents SDK (``openai-agents``), ``Runner.run`` and
  ``Runner.run_streamed`` over an ``OpenAIResponsesModel`` or
  ``OpenAIChatCompletionsModel`` on an ``AsyncOpenAI`` client pointed at the fake
  provider, with tracing off (it would export to OpenAI's servers), so it runs
  offline.

Each is configured as a user who holds a loop to a time budget would: the client's
timeout is the task's ``max_seconds`` (a request the provider never answers ends in
the SDK's timeout error), and the SDKs' own retries are off (``max_retries=0``), as
for the hand-written loops, so that every request the gate counts is one the loop
sent. The Agents SDK runs with ``RunConfig(tool_not_found_behavior=
"return_error_to_model")``: by default it raises ``ModelBehaviorError`` at a call to a
tool the agent lacks, and the conversation ends there. A ``FunctionTool``'s
``on_invoke_tool`` gets the call's argument text as the model wrote it; ours refuses
text that is not a JSON object with a structured ``invalid_arguments`` error instead
of running the tool. What each framework then does at each fault stage is its own.

The gate keys every execution by call id. The Agents SDK hands each tool a
``ToolContext`` that carries ``tool_call_id``. anthropic's tool runner calls a tool
with its input alone, so that loop learns the ids of a turn from the message the
runner yields before it runs that message's tools, and hands them to the tool
functions in the order the runner calls them, the order of the calls in the turn.
"""

from __future__ import annotations

import importlib.util
import threading
from collections import deque
from typing import Any, Deque, Dict, List, Optional, Tuple

from conformance.abort import race_abort
from conformance.contract import ToolCall, ToolResult
from conformance.gate import LoopResult, LoopTask

from .sdk_loops import (
    MAX_TOKENS,
    SDK_TIMEOUT,
    Budget,
    SocketGuard,
    anthropic_outcome,
    anthropic_tool_choice,
    prepare,
)

HAVE_ANTHROPIC = importlib.util.find_spec("anthropic") is not None
HAVE_AGENTS = importlib.util.find_spec("agents") is not None
HAVE_TOOL_RUNNER = False
#: Whether this anthropic's tool runner takes ``thread`` (2.x, where threads are the default).
RUNNER_TAKES_THREAD = False
if HAVE_ANTHROPIC:
    import inspect

    import anthropic
    from anthropic.resources.beta.messages import Messages

    HAVE_TOOL_RUNNER = hasattr(Messages, "tool_runner")
    if HAVE_TOOL_RUNNER:
        from anthropic.lib.tools import BetaFunctionTool, ToolError

        RUNNER_TAKES_THREAD = "thread" in inspect.signature(Messages.tool_runner).parameters


class CallIds:
    """The call ids of the turn being run, by tool name, in the order the turn made them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: Dict[str, Deque[str]] = {}

    def expect(self, calls: List[Tuple[str, str]]) -> None:
        """Replace the pending ids with ``(call id, tool name)`` of the turn about to run."""
        with self.lock:
            self.pending = {}
            for call_id, name in calls:
                self.pending.setdefault(name, deque()).append(call_id)

    def take(self, name: str) -> str:
        with self.lock:
            queue = self.pending.get(name)
            if not queue:
                raise LookupError(f"the framework ran {name} for a call the model's message did not carry")
            return queue.popleft()


# -- anthropic's tool runner ------------------------------------------------------------------


class AnthropicToolRunnerLoop:
    """A sync loop over ``Anthropic().beta.messages.tool_runner``."""

    def __init__(self, base_url: str, http2: bool = False) -> None:
        self.guard = SocketGuard()
        self.client = anthropic.Anthropic(
            api_key="test",
            base_url=base_url,
            max_retries=0,
            timeout=SDK_TIMEOUT,
            http_client=anthropic.DefaultHttpxClient(
                http1=not http2, http2=http2, event_hooks=self.guard.hooks()
            ),
        )

    def tools(self, task: LoopTask, ids: CallIds) -> List[Any]:
        def make(name: str) -> Any:
            def run(**arguments: Any) -> str:
                call = ToolCall(ids.take(name), name, arguments)
                result: ToolResult = task.toolset.execute(call, key=call.id, signal=task.signal)
                if result.is_error:
                    raise ToolError(result.text)  # the runner sends it with is_error: true
                return result.text

            return run

        return [
            BetaFunctionTool(
                make(s.name), name=s.name, description=s.description, input_schema=dict(s.parameters)
            )
            for s in task.tools
        ]

    def run(self, task: LoopTask) -> LoopResult:
        budget = Budget(task)
        ids = CallIds()
        kwargs: Dict[str, Any] = {
            "model": task.model,
            "max_tokens": MAX_TOKENS,
            "messages": [{"role": "user", "content": task.prompt}],
            "tools": self.tools(task, ids),
            "max_iterations": task.max_requests,
        }
        if task.tool_choice is not None:
            kwargs["tool_choice"] = anthropic_tool_choice(
                task.tool_choice
            )  # the runner drops it after a call
        if RUNNER_TAKES_THREAD:
            kwargs["thread"] = False
        client = self.client.with_options(timeout=max(0.05, task.max_seconds))
        runner = client.beta.messages.tool_runner(stream=task.stream, **kwargs)

        def on_abort(reason: BaseException) -> None:
            self.guard.shutdown(reason)
            runner.close()

        unregister = task.signal.add_callback(on_abort)
        message: Optional[Any] = None
        try:
            for item in runner:
                if task.stream:
                    for _event in item:
                        pass
                    message = item.get_final_message()
                else:
                    message = item
                task.signal.raise_if_aborted()
                budget.sent += 1
                ids.expect([(b.id, b.name) for b in message.content if b.type == "tool_use"])
        except Exception:
            if task.signal.aborted:
                task.signal.raise_reason()
            raise
        finally:
            unregister()
        task.signal.raise_if_aborted()
        if message is None:
            raise RuntimeError("the tool runner ended without a message")
        text, finish, calls = anthropic_outcome(message)
        # Calls left unanswered mean the runner stopped at its iteration limit; on a turn cut off
        # at the output limit (stop_reason max_tokens) it stops by design, and runs none.
        return LoopResult(text, finish, stopped="budget" if calls and finish == "tool_calls" else "done")

    def close(self) -> None:
        self.client.close()


# -- the OpenAI Agents SDK ----------------------------------------------------------------------


class OpenAIAgentsLoop:
    """An async loop over the OpenAI Agents SDK's ``Runner``; ``api`` is ``"responses"`` or ``"chat"``."""

    def __init__(self, base_url: str, api: str, http2: bool = False) -> None:
        import openai
        from agents import set_tracing_disabled

        set_tracing_disabled(True)
        self.api = api
        self.client = openai.AsyncOpenAI(
            api_key="test",
            base_url=f"{base_url}/v1",
            max_retries=0,
            timeout=SDK_TIMEOUT,
            http_client=openai.DefaultAsyncHttpxClient(http1=not http2, http2=http2),
        )

    def agent(self, task: LoopTask) -> Any:
        from agents import (
            Agent,
            FunctionTool,
            ModelSettings,
            OpenAIChatCompletionsModel,
            OpenAIResponsesModel,
        )

        def make(name: str) -> Any:
            async def invoke(context: Any, arguments: str) -> str:
                prepared = prepare(task, context.tool_call_id, name, arguments)
                if prepared.refused is not None:
                    return prepared.refused.text  # broken JSON never runs
                call = prepared.call
                result: ToolResult = await task.toolset.aexecute(call, key=call.id, signal=task.signal)
                return result.text

            return invoke

        tools = [
            FunctionTool(
                name=s.name,
                description=s.description,
                params_json_schema=dict(s.parameters),
                on_invoke_tool=make(s.name),
                strict_json_schema=True,
            )
            for s in task.tools
        ]
        model_class = OpenAIResponsesModel if self.api == "responses" else OpenAIChatCompletionsModel
        settings = ModelSettings()
        if task.tool_choice is not None:
            choice = task.tool_choice
            settings = ModelSettings(tool_choice=choice.name if choice.mode == "tool" else choice.mode)
        return Agent(
            name="gate",
            instructions=None,
            tools=tools,
            model=model_class(
                model=task.model, openai_client=self.client.with_options(timeout=max(0.05, task.max_seconds))
            ),
            model_settings=settings,
        )

    async def run(self, task: LoopTask) -> LoopResult:
        from agents import MaxTurnsExceeded, RunConfig, Runner

        agent = self.agent(task)
        config = RunConfig(tool_not_found_behavior="return_error_to_model")
        try:
            if task.stream:
                streamed = Runner.run_streamed(
                    agent, task.prompt, max_turns=task.max_requests, run_config=config
                )
                try:
                    events = streamed.stream_events().__aiter__()
                    while True:
                        try:
                            await race_abort(events.__anext__(), task.signal)
                        except StopAsyncIteration:
                            break
                finally:
                    streamed.cancel()
                output = streamed.final_output
            else:
                result = await race_abort(
                    Runner.run(agent, task.prompt, max_turns=task.max_requests, run_config=config),
                    task.signal,
                )
                output = result.final_output
        except MaxTurnsExceeded:
            return LoopResult("", "tool_calls", stopped="budget")
        return LoopResult(str(output), "stop")

    async def aclose(self) -> None:
        await self.client.close()


def prime(target: Any) -> None:
    """Run one streamed forced-tool case of ``target`` before the suite, unchecked.

    A framework's first run in a process imports and builds what it uses lazily
    (several seconds for the Agents SDK on a busy two-core machine), before it sends
    its first request; the cancel stage, which runs first, would time that instead of
    the loop. The case's verdict is left to the suite's own run of it.
    """
    from conformance.gate import AgentLoopCase

    try:
        AgentLoopCase(target, "forced-tool", "stream").run()
    except AssertionError:
        pass
