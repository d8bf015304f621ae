"""The OpenAI Agents SDK's own loop: ``Runner.run`` and ``Runner.run_streamed``, over Chat and Responses.

Configured with the SDK's defaults except what running offline needs: tracing off
(it would export to OpenAI's servers), the client's retries off and its timeout the
task's budget.
"""

from __future__ import annotations

from typing import Any, List

import openai
from agents import (
    Agent,
    FunctionTool,
    MaxTurnsExceeded,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    set_tracing_disabled,
)

from conformance import openai_chat_wire, openai_responses_wire
from conformance.gate import AgentLoopTarget, LoopResult, LoopTask

from ._loops import budget_result, run_tool, text_result, until_abort

LIBRARY = "openai-agents"
KIND = "loop"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("openai-agents", "openai")
set_tracing_disabled(True)


def gate_tool(task: LoopTask, spec: Any) -> FunctionTool:
    async def invoke(context: Any, arguments: str) -> str:
        result = await run_tool(task, context.tool_call_id, spec.name, arguments)
        return result.text

    return FunctionTool(
        name=spec.name,
        description=spec.description,
        params_json_schema=dict(spec.parameters),
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


class RunnerLoop:
    responses = False

    def __init__(self, url: str) -> None:
        self.url = url

    async def run(self, task: LoopTask) -> LoopResult:
        client = openai.AsyncOpenAI(
            base_url=f"{self.url}/v1", api_key="test", max_retries=0, timeout=task.max_seconds
        )
        kind = OpenAIResponsesModel if self.responses else OpenAIChatCompletionsModel
        model = kind(model=task.model, openai_client=client)
        choice = task.tool_choice
        settings = ModelSettings(
            tool_choice=None if choice is None else choice.name if choice.mode == "tool" else choice.mode
        )
        agent = Agent(
            name="gate",
            instructions=None,
            model=model,
            model_settings=settings,
            tools=[gate_tool(task, spec) for spec in task.tools],
        )
        try:
            if task.stream:
                streamed = Runner.run_streamed(
                    agent, task.prompt, max_turns=task.max_requests, run_config=RunConfig()
                )

                async def drain() -> Any:
                    async for _ in streamed.stream_events():
                        pass
                    return streamed.final_output

                output = await until_abort(task, drain())
            else:
                done = await until_abort(task, Runner.run(agent, task.prompt, max_turns=task.max_requests))
                output = done.final_output
        except MaxTurnsExceeded:
            return budget_result()
        finally:
            await client.close()
        return text_result(output)


class ResponsesRunnerLoop(RunnerLoop):
    responses = True


def targets() -> List[AgentLoopTarget]:
    return [
        AgentLoopTarget(
            "openai-agents Runner, OpenAIChatCompletionsModel",
            openai_chat_wire,
            RunnerLoop,
            client="openai-agents",
        ),
        AgentLoopTarget(
            "openai-agents Runner, OpenAIResponsesModel",
            openai_responses_wire,
            ResponsesRunnerLoop,
            client="openai-agents",
        ),
    ]
