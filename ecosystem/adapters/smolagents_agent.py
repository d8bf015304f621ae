"""smolagents' own loop: ``ToolCallingAgent`` over ``OpenAIServerModel`` pointed at the fake provider.

smolagents reaches a custom base URL through ``OpenAIServerModel(api_base=...)``. Its
tools are ``Tool`` subclasses declared from the gate's JSON schemas; a tool's
``forward`` is not handed the call's id, so the model's ``generate`` (its public
hook, and ``generate_stream`` when it streams) notes the ids of each turn's calls, and
each tool takes the next id for its
name. The agent is synchronous: it runs in the case's worker thread, and the task's
abort is checked between steps through a step callback. At ``max_steps`` the agent
makes one request more, asking the model for a final answer (``provide_final_answer``),
so a budget of N requests is ``max_steps=N - 1``; a run that got there ends in the
state ``max_steps_error`` (``return_full_result=True``), a stop at the budget.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Deque, Dict, List

from smolagents import OpenAIServerModel, Tool, ToolCallingAgent

from conformance import openai_chat_wire
from conformance.gate import AgentLoopTarget, LoopResult, LoopTask

from ._loops import run_tool

LIBRARY = "smolagents"
KIND = "loop"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("smolagents",)


class NotingModel(OpenAIServerModel):
    """The model, noting the ids of the calls of each turn it returns, by tool name."""

    pending: Dict[str, Deque[str]]

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        message = super().generate(*args, **kwargs)
        self.pending = {}
        for call in message.tool_calls or ():
            self.pending.setdefault(call.function.name, deque()).append(call.id)
        return message

    def generate_stream(self, *args: Any, **kwargs: Any) -> Any:
        names: Dict[int, List[str]] = {}
        for delta in super().generate_stream(*args, **kwargs):
            for call in delta.tool_calls or ():
                slot = names.setdefault(call.index or 0, ["", ""])
                if call.id:
                    slot[0] = call.id
                if call.function is not None and call.function.name:
                    slot[1] += call.function.name
            yield delta
        self.pending = {}
        for _, (call_id, name) in sorted(names.items()):
            self.pending.setdefault(name, deque()).append(call_id)


def gate_tool(task: LoopTask, spec: Any, model: NotingModel) -> Tool:
    properties = dict(spec.parameters.get("properties", {}))
    required = set(spec.parameters.get("required", ()))
    inputs = {
        name: {
            "type": str(p.get("type", "any")),
            "description": str(p.get("description", name)),
            **({} if name in required else {"nullable": True}),
        }
        for name, p in properties.items()
    }

    class GateTool(Tool):
        skip_forward_signature_validation = True

        def forward(self, **arguments: Any) -> str:
            queue = model.pending.get(spec.name)
            call_id = queue.popleft() if queue else ""
            return asyncio.run(run_tool(task, call_id, spec.name, arguments)).text

    GateTool.name = spec.name
    GateTool.description = spec.description
    GateTool.inputs = inputs
    GateTool.output_type = "string"
    return GateTool()


class AgentLoop:
    def __init__(self, url: str) -> None:
        self.url = url

    def run(self, task: LoopTask) -> LoopResult:
        model = NotingModel(
            task.model,
            api_base=f"{self.url}/v1",
            api_key="test",
            client_kwargs={"max_retries": 0, "timeout": task.max_seconds},
            retry=False,
        )
        model.pending = {}

        def stop_on_abort(*_: Any, **__: Any) -> None:
            task.signal.raise_if_aborted()

        agent = ToolCallingAgent(
            tools=[gate_tool(task, spec, model) for spec in task.tools],
            model=model,
            max_steps=max(1, task.max_requests - 1),
            step_callbacks=[stop_on_abort],
            verbosity_level=-1,
            stream_outputs=task.stream,
            return_full_result=True,
        )
        result = agent.run(task.prompt)
        task.signal.raise_if_aborted()
        stopped = "budget" if result.state == "max_steps_error" else "done"
        return LoopResult(str(result.output or ""), "stop", stopped=stopped)


def targets() -> List[AgentLoopTarget]:
    return [
        AgentLoopTarget(
            "smolagents ToolCallingAgent, OpenAIServerModel", openai_chat_wire, AgentLoop, client="smolagents"
        )
    ]
