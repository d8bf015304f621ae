"""LangChain's own loop: ``langchain.agents.create_agent`` over ``ChatOpenAI`` and ``ChatAnthropic``.

The gate's tools are ``StructuredTool`` objects declared by their JSON schemas, run by
the agent's own tool node. Their implementation needs the call's id, which a tool
with a JSON-schema argument model is not handed: a ``wrap_tool_call`` middleware (the
documented hook around each tool call) puts it in a context variable for the tool it
then runs through ``handler``, so LangChain still decides which calls run and how.
"""

from __future__ import annotations

import contextvars
from typing import Any, List

from langchain.agents import create_agent
from langchain.agents.middleware import wrap_tool_call
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage
from langchain_core.tools import StructuredTool
from langchain_openai import ChatOpenAI
from langgraph.errors import GraphRecursionError

from conformance import anthropic_wire, openai_chat_wire, openai_responses_wire
from conformance.gate import AgentLoopTarget, LoopResult, LoopTask

from ._loops import budget_result, run_tool, text_result, until_abort

LIBRARY = "langchain"
KIND = "loop"

#: The id of the call the agent's tool node is running in this task.
CALL_ID: contextvars.ContextVar[str] = contextvars.ContextVar("CALL_ID", default="")


@wrap_tool_call
async def call_id_for_tool(request: Any, handler: Any) -> Any:
    CALL_ID.set(str(request.tool_call.get("id") or ""))
    return await handler(request)


def gate_tool(task: LoopTask, spec: Any) -> StructuredTool:
    async def invoke(**arguments: Any) -> str:
        result = await run_tool(task, CALL_ID.get(), spec.name, arguments)
        return result.text

    return StructuredTool.from_function(
        coroutine=invoke, name=spec.name, description=spec.description, args_schema=dict(spec.parameters)
    )


class AgentLoop:
    def __init__(self, url: str) -> None:
        self.url = url

    def model(self, task: LoopTask) -> Any:
        return ChatOpenAI(
            model=task.model,
            base_url=f"{self.url}/v1",
            api_key="test",
            max_retries=0,
            timeout=task.max_seconds,
            streaming=task.stream,
        )

    async def run(self, task: LoopTask) -> LoopResult:
        agent = create_agent(
            self.model(task),
            tools=[gate_tool(task, spec) for spec in task.tools],
            middleware=[call_id_for_tool],
        )
        # Each model turn and each tool turn is a step of the graph: N requests, N - 1 tool turns.
        config = {"recursion_limit": 2 * task.max_requests - 1}
        try:
            state = await until_abort(
                task, agent.ainvoke({"messages": [HumanMessage(task.prompt)]}, config=config)
            )
        except GraphRecursionError:
            return budget_result()
        return text_result(state["messages"][-1].text)


class ResponsesLoop(AgentLoop):
    def model(self, task: LoopTask) -> Any:
        return ChatOpenAI(
            model=task.model,
            base_url=f"{self.url}/v1",
            api_key="test",
            max_retries=0,
            timeout=task.max_seconds,
            streaming=task.stream,
            use_responses_api=True,
        )


class AnthropicLoop(AgentLoop):
    def model(self, task: LoopTask) -> Any:
        return ChatAnthropic(
            model=task.model,
            base_url=self.url,
            api_key="test",
            max_retries=0,
            timeout=task.max_seconds,
            streaming=task.stream,
        )


def targets() -> List[AgentLoopTarget]:
    return [
        AgentLoopTarget(
            "langchain create_agent, ChatOpenAI", openai_chat_wire, AgentLoop, client="langchain"
        ),
        AgentLoopTarget(
            "langchain create_agent, ChatOpenAI use_responses_api",
            openai_responses_wire,
            ResponsesLoop,
            client="langchain",
        ),
        AgentLoopTarget(
            "langchain create_agent, ChatAnthropic", anthropic_wire, AnthropicLoop, client="langchain"
        ),
    ]
