"""Agent loops written over the official SDKs, the way a user of each SDK writes one.

Each loop takes the gate's :class:`~conformance.gate.LoopTask` and carries it out with
the SDK's own client, its own streaming helper and its own types, following the
SDK's documented tool-use pattern:

- OpenAI Chat Completions: ``chat.completions.create`` for whole replies, the
  ``chat.completions.stream`` helper (``get_final_completion``) for streamed ones;
  the assistant message goes back as the SDK returned it, each result as a ``tool``
  message under its ``tool_call_id``.
- OpenAI Responses: ``responses.create`` and the ``responses.stream`` helper
  (``get_final_response``), stateless (``store=False``) with the encrypted reasoning
  asked for, so that ``response.output`` (reasoning items included) is appended to
  the next ``input`` whole, then one ``function_call_output`` per call.
- Anthropic Messages: ``messages.create`` and the ``messages.stream`` helper
  (``get_final_message``); the assistant's ``content`` blocks (thinking blocks with
  their signatures included) go back as they came, then one user turn of
  ``tool_result`` blocks, ``is_error`` on a failed tool.

What a loop adds to the SDK is what the gate asks of any loop: every tool runs through
``task.toolset`` with the task's signal and the call id as its key, once, after the
SDK has handed over the complete call; ``tool_choice`` goes on the first request only,
so the model can answer once it has the result; the loop counts requests and time
and stops with ``stopped="budget"``; and on abort it raises the caller's reason
itself. None of the SDKs takes an abort signal. The async loops race each await
against the signal (``race_abort``): the cancelled await unwinds the SDK's stream
context, which closes the response. The sync loops shut the sockets of their own
connection pool down from the aborting thread (a blocked read wakes only that way),
then leave the SDK's stream context, which closes the response.

Each client is made with ``max_retries=0``: the gate counts every generation request
against the budget, and a transport retry the loop did not ask for would count too.
"""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from conformance.abort import race_abort, shutdown_socket
from conformance.contract import AbortSignal, ToolCall, ToolChoice, ToolError, ToolResult, ToolSpec
from conformance.gate import LoopResult, LoopTask

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


# -- what every loop shares ---------------------------------------------------------------


class Budget:
    """Counts generation requests and time against a task's limits."""

    def __init__(self, task: LoopTask) -> None:
        self.task = task
        self.started = time.monotonic()
        self.sent = 0

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
        return max(0.05, min(SDK_TIMEOUT, self.left()))


def parse_arguments(
    call_id: str, name: str, arguments: Any
) -> Tuple[Optional[ToolCall], Optional[ToolResult]]:
    """The call to execute, or the error result to send back when its arguments are no JSON object."""
    if isinstance(arguments, Mapping):
        return ToolCall(call_id, name, dict(arguments)), None
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError as exc:
        error = ToolError("invalid_arguments", f"the arguments are not JSON ({exc}); send a JSON object")
        return None, ToolResult(call_id, name, error=error)
    if not isinstance(parsed, dict):
        error = ToolError(
            "invalid_arguments", f"the arguments are {type(parsed).__name__}, not a JSON object"
        )
        return None, ToolResult(call_id, name, error=error)
    return ToolCall(call_id, name, parsed), None


def run_tool(task: LoopTask, call_id: str, name: str, arguments: Any) -> ToolResult:
    """Run one complete call through the task's toolset, keyed by its call id."""
    task.signal.raise_if_aborted()
    call, refused = parse_arguments(call_id, name, arguments)
    if call is None:
        assert refused is not None
        return refused
    return task.toolset.execute(call, key=call_id, signal=task.signal)


async def arun_tool(task: LoopTask, call_id: str, name: str, arguments: Any) -> ToolResult:
    """The async form of :func:`run_tool`."""
    task.signal.raise_if_aborted()
    call, refused = parse_arguments(call_id, name, arguments)
    if call is None:
        assert refused is not None
        return refused
    return await task.toolset.aexecute(call, key=call_id, signal=task.signal)


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


# -- OpenAI Chat Completions --------------------------------------------------------------


def chat_tools(specs: Sequence[ToolSpec]) -> List[Dict[str, Any]]:
    """The tools as Chat Completions function tools; strict, as the stream helper requires."""
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


class _OpenAIChatBase:
    def __init__(self, base_url: str, http2: bool = False) -> None:
        self.base_url = f"{base_url}/v1"
        self.http2 = http2

    def request(self, task: LoopTask, budget: Budget, messages: List[Any]) -> Dict[str, Any]:
        kwargs: Dict[str, Any] = {
            "model": task.model,
            "messages": messages,
            "tools": chat_tools(task.tools),
            "timeout": budget.timeout(),
        }
        if task.tool_choice is not None and budget.sent == 0:
            kwargs["tool_choice"] = chat_tool_choice(task.tool_choice)
        return kwargs


class OpenAIChatLoop(_OpenAIChatBase):
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

    def run(self, task: LoopTask) -> LoopResult:
        budget = Budget(task)
        messages: List[Any] = [{"role": "user", "content": task.prompt}]
        text, finish = "", "stop"
        unregister = task.signal.add_callback(self.guard.shutdown)
        try:
            while True:
                task.signal.raise_if_aborted()
                if budget.spent():
                    return LoopResult(text, finish, stopped="budget")
                kwargs = self.request(task, budget, messages)
                budget.sent += 1
                if task.stream:
                    with self.client.chat.completions.stream(**kwargs) as stream:
                        for _event in stream:
                            pass  # the helper accumulates; a UI would show content.delta here
                        completion = stream.get_final_completion()
                else:
                    completion = self.client.chat.completions.create(**kwargs)
                choice = completion.choices[0]
                message = choice.message
                text, finish = message.content or "", choice.finish_reason
                if not message.tool_calls:
                    return LoopResult(text, finish)
                if budget.last():
                    return LoopResult(text, finish, stopped="budget")
                messages.append(message)
                for call in message.tool_calls:
                    result = run_tool(task, call.id, call.function.name, call.function.arguments)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result.text})
        except Exception:
            reraise_abort(task.signal)
            raise
        finally:
            unregister()

    def close(self) -> None:
        self.client.close()


class AsyncOpenAIChatLoop(_OpenAIChatBase):
    """An async loop over ``openai.AsyncOpenAI().chat.completions``."""

    def __init__(self, base_url: str, http2: bool = False) -> None:
        super().__init__(base_url, http2)
        self.client = openai.AsyncOpenAI(
            api_key="test",
            base_url=self.base_url,
            max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(http1=not http2, http2=http2),
        )

    async def run(self, task: LoopTask) -> LoopResult:
        budget = Budget(task)
        signal = task.signal
        messages: List[Any] = [{"role": "user", "content": task.prompt}]
        text, finish = "", "stop"
        while True:
            signal.raise_if_aborted()
            if budget.spent():
                return LoopResult(text, finish, stopped="budget")
            kwargs = self.request(task, budget, messages)
            budget.sent += 1
            if task.stream:
                async with self.client.chat.completions.stream(**kwargs) as stream:
                    events = stream.__aiter__()
                    while True:
                        try:
                            await race_abort(events.__anext__(), signal)
                        except StopAsyncIteration:
                            break
                    completion = await stream.get_final_completion()
            else:
                completion = await race_abort(self.client.chat.completions.create(**kwargs), signal)
            choice = completion.choices[0]
            message = choice.message
            text, finish = message.content or "", choice.finish_reason
            if not message.tool_calls:
                return LoopResult(text, finish)
            if budget.last():
                return LoopResult(text, finish, stopped="budget")
            messages.append(message)
            for call in message.tool_calls:
                result = await arun_tool(task, call.id, call.function.name, call.function.arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result.text})

    async def aclose(self) -> None:
        await self.client.close()


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


def responses_outcome(response: Any) -> Tuple[str, str, List[Any]]:
    """The response's text, the gate's finish reason, and its function calls."""
    calls = [item for item in response.output if item.type == "function_call"]
    if response.status == "incomplete":
        return response.output_text, "length", calls
    return response.output_text, "tool_calls" if calls else "stop", calls


class _OpenAIResponsesBase:
    def __init__(self, base_url: str, http2: bool = False) -> None:
        self.base_url = f"{base_url}/v1"
        self.http2 = http2

    def request(self, task: LoopTask, budget: Budget, items: List[Any]) -> Dict[str, Any]:
        kwargs: Dict[str, Any] = {
            "model": task.model,
            "input": items,
            "tools": responses_tools(task.tools),
            # Stateless: the reasoning items come back encrypted and go into the next input.
            "store": False,
            "include": ["reasoning.encrypted_content"],
            "timeout": budget.timeout(),
        }
        if task.tool_choice is not None and budget.sent == 0:
            kwargs["tool_choice"] = responses_tool_choice(task.tool_choice)
        return kwargs


class OpenAIResponsesLoop(_OpenAIResponsesBase):
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

    def run(self, task: LoopTask) -> LoopResult:
        budget = Budget(task)
        items: List[Any] = [{"role": "user", "content": task.prompt}]
        text, finish = "", "stop"
        unregister = task.signal.add_callback(self.guard.shutdown)
        try:
            while True:
                task.signal.raise_if_aborted()
                if budget.spent():
                    return LoopResult(text, finish, stopped="budget")
                kwargs = self.request(task, budget, items)
                budget.sent += 1
                if task.stream:
                    with self.client.responses.stream(**kwargs) as stream:
                        for _event in stream:
                            pass
                        response = stream.get_final_response()
                else:
                    response = self.client.responses.create(**kwargs)
                text, finish, calls = responses_outcome(response)
                if not calls:
                    return LoopResult(text, finish)
                if budget.last():
                    return LoopResult(text, finish, stopped="budget")
                items += response.output
                for call in calls:
                    result = run_tool(task, call.call_id, call.name, call.arguments)
                    items.append(
                        {"type": "function_call_output", "call_id": call.call_id, "output": result.text}
                    )
        except Exception:
            reraise_abort(task.signal)
            raise
        finally:
            unregister()

    def close(self) -> None:
        self.client.close()


class AsyncOpenAIResponsesLoop(_OpenAIResponsesBase):
    """An async loop over ``openai.AsyncOpenAI().responses``."""

    def __init__(self, base_url: str, http2: bool = False) -> None:
        super().__init__(base_url, http2)
        self.client = openai.AsyncOpenAI(
            api_key="test",
            base_url=self.base_url,
            max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(http1=not http2, http2=http2),
        )

    async def run(self, task: LoopTask) -> LoopResult:
        budget = Budget(task)
        signal = task.signal
        items: List[Any] = [{"role": "user", "content": task.prompt}]
        text, finish = "", "stop"
        while True:
            signal.raise_if_aborted()
            if budget.spent():
                return LoopResult(text, finish, stopped="budget")
            kwargs = self.request(task, budget, items)
            budget.sent += 1
            if task.stream:
                async with self.client.responses.stream(**kwargs) as stream:
                    events = stream.__aiter__()
                    while True:
                        try:
                            await race_abort(events.__anext__(), signal)
                        except StopAsyncIteration:
                            break
                    response = await stream.get_final_response()
            else:
                response = await race_abort(self.client.responses.create(**kwargs), signal)
            text, finish, calls = responses_outcome(response)
            if not calls:
                return LoopResult(text, finish)
            if budget.last():
                return LoopResult(text, finish, stopped="budget")
            items += response.output
            for call in calls:
                result = await arun_tool(task, call.call_id, call.name, call.arguments)
                items.append({"type": "function_call_output", "call_id": call.call_id, "output": result.text})

    async def aclose(self) -> None:
        await self.client.close()


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
    return text, finish, calls


def tool_result_block(call_id: str, result: ToolResult) -> Dict[str, Any]:
    block: Dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": result.text}
    if result.is_error:
        block["is_error"] = True
    return block


class _AnthropicBase:
    def __init__(self, base_url: str, http2: bool = False) -> None:
        self.base_url = base_url
        self.http2 = http2

    def request(self, task: LoopTask, budget: Budget, messages: List[Any]) -> Dict[str, Any]:
        kwargs: Dict[str, Any] = {
            "model": task.model,
            "max_tokens": MAX_TOKENS,
            "messages": messages,
            "tools": anthropic_tools(task.tools),
            "timeout": budget.timeout(),
        }
        if task.tool_choice is not None and budget.sent == 0:
            kwargs["tool_choice"] = anthropic_tool_choice(task.tool_choice)
        return kwargs


class AnthropicLoop(_AnthropicBase):
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

    def run(self, task: LoopTask) -> LoopResult:
        budget = Budget(task)
        messages: List[Any] = [{"role": "user", "content": task.prompt}]
        text, finish = "", "stop"
        unregister = task.signal.add_callback(self.guard.shutdown)
        try:
            while True:
                task.signal.raise_if_aborted()
                if budget.spent():
                    return LoopResult(text, finish, stopped="budget")
                kwargs = self.request(task, budget, messages)
                budget.sent += 1
                if task.stream:
                    with self.client.messages.stream(**kwargs) as stream:
                        for _event in stream:
                            pass
                        message = stream.get_final_message()
                else:
                    message = self.client.messages.create(**kwargs)
                text, finish, calls = anthropic_outcome(message)
                if not calls:
                    return LoopResult(text, finish)
                if budget.last():
                    return LoopResult(text, finish, stopped="budget")
                messages.append({"role": "assistant", "content": message.content})
                results = [tool_result_block(c.id, run_tool(task, c.id, c.name, c.input)) for c in calls]
                messages.append({"role": "user", "content": results})
        except Exception:
            reraise_abort(task.signal)
            raise
        finally:
            unregister()

    def close(self) -> None:
        self.client.close()


class AsyncAnthropicLoop(_AnthropicBase):
    """An async loop over ``anthropic.AsyncAnthropic().messages``."""

    def __init__(self, base_url: str, http2: bool = False) -> None:
        super().__init__(base_url, http2)
        self.client = anthropic.AsyncAnthropic(
            api_key="test",
            base_url=base_url,
            max_retries=0,
            http_client=anthropic.DefaultAsyncHttpxClient(http1=not http2, http2=http2),
        )

    async def run(self, task: LoopTask) -> LoopResult:
        budget = Budget(task)
        signal = task.signal
        messages: List[Any] = [{"role": "user", "content": task.prompt}]
        text, finish = "", "stop"
        while True:
            signal.raise_if_aborted()
            if budget.spent():
                return LoopResult(text, finish, stopped="budget")
            kwargs = self.request(task, budget, messages)
            budget.sent += 1
            if task.stream:
                async with self.client.messages.stream(**kwargs) as stream:
                    events = stream.__aiter__()
                    while True:
                        try:
                            await race_abort(events.__anext__(), signal)
                        except StopAsyncIteration:
                            break
                    message = await stream.get_final_message()
            else:
                message = await race_abort(self.client.messages.create(**kwargs), signal)
            text, finish, calls = anthropic_outcome(message)
            if not calls:
                return LoopResult(text, finish)
            if budget.last():
                return LoopResult(text, finish, stopped="budget")
            messages.append({"role": "assistant", "content": message.content})
            results = []
            for call in calls:
                result = await arun_tool(task, call.id, call.name, call.input)
                results.append(tool_result_block(call.id, result))
            messages.append({"role": "user", "content": results})

    async def aclose(self) -> None:
        await self.client.close()


# -- the first stream in a process ------------------------------------------------------------


def warm_up(family: str) -> None:
    """Stream one scripted tool turn through the SDK's own stream helper, once per process.

    The first streamed reply an SDK reads in a process costs it far more than any
    later one: openai-python imports its stream helpers on first use and builds the
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
            with client.chat.completions.stream(
                model="warm-up", messages=prompt, tools=chat_tools(specs)
            ) as chat:
                chat.get_final_completion()
        else:
            client = openai.OpenAI(api_key="test", base_url=f"{provider.url}/v1", max_retries=0)
            with client.responses.stream(
                model="warm-up", input=prompt, tools=responses_tools(specs)
            ) as responses:
                responses.get_final_response()
        client.close()
