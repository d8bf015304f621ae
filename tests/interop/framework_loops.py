"""Agent frameworks driven with the gate's tools: what a team gets from a framework's loop.

Written against each framework's public API and the kit's (``conformance``,
``conformance.gate``), as a team's own adapter would be.

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

from conformance import Usage, race_abort
from conformance.contract import ToolCall, ToolResult
from conformance.contract import ToolError as GateToolError  # anthropic.lib.tools has a ToolError
from conformance.gate import LoopResult, LoopTask, validate

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
        schemas = {s.name: s.parameters for s in task.tools}

        def make(name: str) -> Any:
            def run(**arguments: Any) -> str:
                call = ToolCall(ids.take(name), name, arguments)
                violations = validate(schemas[name], arguments)
                if violations:  # the runner hands a tool its input as the model wrote it
                    raise ToolError("; ".join(str(v) for v in violations))
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

        # The runner has close() from anthropic 1.14.0 on; an older one cannot be told to stop,
        # and sends its next request once the turn's tools have run.
        close = getattr(runner, "close", None)

        def on_abort(reason: BaseException) -> None:
            self.guard.shutdown(reason)
            if close is not None:
                close()

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


# -- pydantic-ai ---------------------------------------------------------------------------------

HAVE_PYDANTIC_AI = importlib.util.find_spec("pydantic_ai") is not None


def _usage(input_tokens: Any, output_tokens: Any) -> Optional[Usage]:
    """A framework's token counts as the contract's usage; ``None`` where it counted nothing."""
    if not input_tokens and not output_tokens:
        return None
    given, made = int(input_tokens or 0), int(output_tokens or 0)
    return Usage(given, made, given + made)


#: pydantic-ai's finish reasons (``ModelResponse.finish_reason``) in the contract's spelling.
PYDANTIC_AI_FINISH = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content_filter",
    "tool_call": "tool_calls",
}


class PydanticAILoop:
    """An async loop over pydantic-ai's ``Agent.run``; ``api``: ``"chat"``, ``"responses"``, ``"anthropic"``.

    The tools are the gate's own schemas (``Tool.from_schema``), each taking the
    ``RunContext``, whose ``tool_call_id`` keys the execution. ``UsageLimits
    (request_limit=...)`` is the request budget; the ``UsageLimitExceeded`` it raises is
    a stop at the budget. Streamed mode hands ``run`` an ``event_stream_handler``, which
    makes pydantic-ai stream every model request. A forced tool is asked for on the
    first request only, through a capability's per-step model settings (a static
    ``tool_choice`` would force a call on every step, and pydantic-ai refuses it).
    """

    def __init__(self, base_url: str, api: str, http2: bool = False) -> None:
        self.api = api
        if api == "anthropic":
            import anthropic as anthropic_sdk

            self.client: Any = anthropic_sdk.AsyncAnthropic(
                api_key="test",
                base_url=base_url,
                max_retries=0,
                timeout=SDK_TIMEOUT,
                http_client=anthropic_sdk.DefaultAsyncHttpxClient(http1=not http2, http2=http2),
            )
        else:
            import openai

            self.client = openai.AsyncOpenAI(
                api_key="test",
                base_url=f"{base_url}/v1",
                max_retries=0,
                timeout=SDK_TIMEOUT,
                http_client=openai.DefaultAsyncHttpxClient(http1=not http2, http2=http2),
            )

    def model(self, task: LoopTask) -> Any:
        client = self.client.with_options(timeout=max(0.05, task.max_seconds))
        if self.api == "anthropic":
            from pydantic_ai.models.anthropic import AnthropicModel
            from pydantic_ai.providers.anthropic import AnthropicProvider

            return AnthropicModel(task.model, provider=AnthropicProvider(anthropic_client=client))
        from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
        from pydantic_ai.providers.openai import OpenAIProvider

        provider = OpenAIProvider(openai_client=client)
        if self.api != "responses":
            return OpenAIChatModel(task.model, provider=provider)
        # The kit's own model name, which no deprecation table lists, declared a reasoning
        # model by its profile: pydantic-ai sends a reasoning item's encrypted content back
        # only for a model its profile says reasons, and a real model's name would tie the
        # test to the date its provider retires it.
        from pydantic_ai.profiles import merge_profile
        from pydantic_ai.profiles.openai import OpenAIModelProfile

        profile = merge_profile(
            provider.model_profile(task.model),
            OpenAIModelProfile(
                openai_supports_reasoning=True,
                openai_supports_encrypted_reasoning_content=True,
            ),
        )
        return OpenAIResponsesModel(task.model, provider=provider, profile=profile)

    def agent(self, task: LoopTask) -> Any:
        from pydantic_ai import Agent, RunContext, Tool
        from pydantic_ai.capabilities import AbstractCapability

        schemas = {s.name: s.parameters for s in task.tools}

        def make(name: str) -> Any:
            async def run(ctx: RunContext[None], **arguments: Any) -> str:
                call_id = str(ctx.tool_call_id)
                # Tool.from_schema skips validating the arguments against the schema (its
                # docstring says so): a loop that declares its tools by schema checks them.
                violations = validate(schemas[name], arguments)
                if violations:
                    message = "; ".join(str(v) for v in violations)
                    return ToolResult(call_id, name, error=GateToolError("invalid_arguments", message)).text
                call = ToolCall(call_id, name, arguments)
                result: ToolResult = await task.toolset.aexecute(call, key=call.id, signal=task.signal)
                return result.text

            return run

        tools = [
            Tool.from_schema(
                make(s.name),
                name=s.name,
                description=s.description,
                json_schema=dict(s.parameters),
                takes_ctx=True,
            )
            for s in task.tools
        ]
        capabilities: List[Any] = []
        choice = task.tool_choice
        if choice is not None and choice.mode == "tool":

            class ForceFirst(AbstractCapability[None]):
                def get_model_settings(self) -> Any:
                    return lambda ctx: {"tool_choice": [choice.name]} if ctx.run_step <= 1 else {}

            capabilities.append(ForceFirst())
        settings: Dict[str, Any] = {"max_tokens": MAX_TOKENS} if self.api == "anthropic" else {}

        model = self.model(task)
        return Agent(model, tools=tools, capabilities=capabilities, model_settings=settings or None)

    async def run(self, task: LoopTask) -> LoopResult:
        from pydantic_ai import UsageLimits
        from pydantic_ai.exceptions import UsageLimitExceeded

        agent = self.agent(task)

        async def drain(ctx: Any, events: Any) -> None:
            async for _event in events:
                pass

        limits = UsageLimits(request_limit=task.max_requests)
        handler = drain if task.stream else None
        try:
            run = agent.run(
                task.prompt, usage_limits=limits, event_stream_handler=handler, timeout=task.max_seconds
            )
            result = await race_abort(run, task.signal)
        except UsageLimitExceeded:
            return LoopResult("", "tool_calls", stopped="budget")
        usage = result.usage
        reason = str(result.response.finish_reason)
        finish = PYDANTIC_AI_FINISH.get(reason, reason)
        return LoopResult(str(result.output), finish, usage=_usage(usage.input_tokens, usage.output_tokens))

    async def aclose(self) -> None:
        await self.client.close()


# -- LangChain ---------------------------------------------------------------------------------

HAVE_LANGCHAIN = all(
    importlib.util.find_spec(name) is not None
    for name in ("langchain", "langchain_openai", "langchain_anthropic")
)
#: LangChain's finish reasons, from an AIMessage's response_metadata, in the contract's spelling.
LANGCHAIN_FINISH = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "completed": "stop",
    "length": "length",
    "max_tokens": "length",
    "max_output_tokens": "length",
    "content_filter": "content_filter",
    "refusal": "refusal",
}


class LangChainLoop:
    """An async loop over ``langchain.agents.create_agent``; ``api`` is ``"chat"``, ``"responses"``
    (``ChatOpenAI``, ``use_responses_api``) or ``"anthropic"`` (``ChatAnthropic``).

    The tools are ``StructuredTool``s over the gate's JSON schemas; a middleware's
    ``awrap_tool_call`` sees each call's id (``request.tool_call["id"]``) and hands it to
    the tool through a context variable while LangChain runs it. ``streaming`` is the
    task's stream flag. ``ModelCallLimitMiddleware(run_limit=max_requests,
    exit_behavior="error")`` is the request budget; its ``ModelCallLimitExceededError``
    is a stop at the budget, and so is the run's time running out (``asyncio.wait_for``
    over ``max_seconds``). The finish reason is the last AIMessage's, mapped to the
    contract's (``end_turn`` is ``stop``), and the usage the sum of every AIMessage's
    ``usage_metadata``. ``ChatOpenAI`` is given the httpx client it sends with, which the
    loop closes; ``ChatAnthropic`` takes none and keeps one per base URL for the life of
    the process (``langchain_anthropic/_client_utils.py``, an ``lru_cache``), so the loop
    closes the clients of the models it built and empties that cache (a later case on a
    reused port would otherwise be handed a closed client).
    """

    def __init__(self, base_url: str, api: str, http2: bool = False) -> None:
        import httpx

        self.base_url = base_url
        self.api = api
        # ChatOpenAI takes the httpx client it sends with, so the loop can close it; without
        # one it keeps a client per base URL for the life of the process.
        self.http = httpx.AsyncClient(http1=not http2, http2=http2, timeout=SDK_TIMEOUT)
        self.models: List[Any] = []

    async def aclose(self) -> None:
        await self.http.aclose()
        if not self.models:
            return
        # The cached client holds a pooled connection on this case's event loop, which
        # ends with the case: left open, its socket is a ResourceWarning at exit.
        for model in self.models:
            await model._async_client.close()
        try:
            from langchain_anthropic._client_utils import _get_default_async_httpx_client as cached
        except ImportError:  # a release that keeps no client past its model
            return
        cached.cache_clear()

    def model(self, task: LoopTask) -> Any:
        timeout = max(0.05, task.max_seconds)
        if self.api == "anthropic":
            from langchain_anthropic import ChatAnthropic

            model = ChatAnthropic(
                model=task.model,
                base_url=self.base_url,
                api_key="test",
                max_retries=0,
                default_request_timeout=timeout,
                max_tokens=MAX_TOKENS,
                streaming=task.stream,
            )
            self.models.append(model)
            return model
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(
            model=task.model,
            base_url=f"{self.base_url}/v1",
            api_key="test",
            max_retries=0,
            timeout=timeout,
            streaming=task.stream,
            stream_usage=True,
            use_responses_api=self.api == "responses",
            http_async_client=self.http,
        )

    def agent(self, task: LoopTask) -> Any:
        import contextvars

        from langchain.agents import create_agent
        from langchain.agents.middleware import AgentMiddleware, ModelCallLimitMiddleware
        from langchain_core.tools import StructuredTool

        current: contextvars.ContextVar[str] = contextvars.ContextVar("gate_call_id")

        schemas = {s.name: s.parameters for s in task.tools}

        def make(name: str) -> Any:
            async def run(**arguments: Any) -> str:
                call_id = current.get()
                # A StructuredTool whose args_schema is a JSON schema dict passes the
                # arguments through unvalidated (langchain_core/tools/base.py,
                # BaseTool._parse_input): a loop that declares its tools by schema checks them.
                violations = validate(schemas[name], arguments)
                if violations:
                    message = "; ".join(str(v) for v in violations)
                    return ToolResult(call_id, name, error=GateToolError("invalid_arguments", message)).text
                call = ToolCall(call_id, name, arguments)
                result: ToolResult = await task.toolset.aexecute(call, key=call.id, signal=task.signal)
                return result.text

            return run

        class CallIds(AgentMiddleware):  # type: ignore[type-arg]
            async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
                token = current.set(str(request.tool_call["id"]))
                try:
                    return await handler(request)
                finally:
                    current.reset(token)

        tools = [
            StructuredTool.from_function(
                coroutine=make(s.name), name=s.name, description=s.description, args_schema=dict(s.parameters)
            )
            for s in task.tools
        ]
        choice = task.tool_choice

        class ForcesFirst(AgentMiddleware):  # type: ignore[type-arg]
            """Forces the task's tool on the first model call only: a model bound with
            ``tool_choice`` would be forced on every call, and never give its answer."""

            calls = 0

            async def awrap_model_call(self, request: Any, handler: Any) -> Any:
                ForcesFirst.calls += 1
                if ForcesFirst.calls == 1 and choice is not None and choice.mode != "auto":
                    forced = choice.name if choice.mode == "tool" else "any"
                    request = request.override(tool_choice=forced)
                return await handler(request)

        model = self.model(task)
        limit = ModelCallLimitMiddleware(run_limit=task.max_requests, exit_behavior="error")
        return create_agent(model, tools, middleware=[CallIds(), ForcesFirst(), limit])

    async def run(self, task: LoopTask) -> LoopResult:
        import asyncio

        from langchain.agents.middleware.model_call_limit import ModelCallLimitExceededError
        from langchain_core.messages import AIMessage

        agent = self.agent(task)
        work = asyncio.wait_for(agent.ainvoke({"messages": [("user", task.prompt)]}), task.max_seconds)
        try:
            state = await race_abort(work, task.signal)
        except ModelCallLimitExceededError:
            return LoopResult("", "tool_calls", stopped="budget")
        except asyncio.TimeoutError:
            return LoopResult("", "tool_calls", stopped="budget")
        replies = [m for m in state["messages"] if isinstance(m, AIMessage)]
        last = replies[-1]
        meta = last.response_metadata or {}
        reason = str(meta.get("finish_reason") or meta.get("stop_reason") or meta.get("status") or "")
        if reason == "incomplete":  # a Responses turn the provider ended: its reason says why
            details = meta.get("incomplete_details")
            reason = str(details.get("reason") or reason) if isinstance(details, dict) else reason
        finish = LANGCHAIN_FINISH.get(reason, "tool_calls" if last.tool_calls else reason)
        counts = [m.usage_metadata for m in replies if m.usage_metadata]
        usage = _usage(sum(c["input_tokens"] for c in counts), sum(c["output_tokens"] for c in counts))
        return LoopResult(last.text if isinstance(last.text, str) else str(last.text()), finish, usage=usage)
