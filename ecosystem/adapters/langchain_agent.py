"""LangChain's own loop: ``langchain.agents.create_agent`` over ``ChatOpenAI``, ``ChatAnthropic``,
``ChatGoogleGenerativeAI`` and ``ChatBedrockConverse``.

The gate's tools are ``StructuredTool`` objects declared by their JSON schemas, run by
the agent's own tool node. Their implementation needs the call's id, which a tool
with a JSON-schema argument model is not handed: a ``wrap_tool_call`` middleware (the
documented hook around each tool call) puts it in a context variable for the tool it
then runs through ``handler``, so LangChain still decides which calls run and how. A
forced tool is asked for on the first model call alone, through a ``wrap_model_call``
middleware (``ModelRequest.override(tool_choice=...)``): bound to the model, the choice
would force a call on every turn and the agent could never answer. The finish reason is
the last AIMessage's, read as the chat-model adapters read it. The Gemini and Bedrock
models are built with fake credentials as their backend rows build them.
"""

from __future__ import annotations

import contextvars
from typing import Any, List

from botocore.config import Config
from langchain.agents import create_agent
from langchain.agents.middleware import wrap_model_call, wrap_tool_call
from langchain_anthropic import ChatAnthropic
from langchain_aws import ChatBedrockConverse
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import StructuredTool
from langchain_google_genai import ChatGoogleGenerativeAI
from langchain_openai import ChatOpenAI
from langgraph.errors import GraphRecursionError

from conformance import (
    anthropic_wire,
    bedrock_converse_wire,
    gemini_wire,
    openai_chat_wire,
    openai_responses_wire,
)
from conformance.gate import AgentLoopTarget, LoopResult, LoopTask

from ._langchain import finish_of
from ._loops import budget_result, run_tool, until_abort
from .boto3_converse import NO_ABORT

LIBRARY = "langchain"
KIND = "loop"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = (
    "langchain",
    "langchain-core",
    "langchain-openai",
    "langchain-anthropic",
    "langchain-google-genai",
    "langchain-aws",
    "boto3",
)

#: The id of the call the agent's tool node is running in this task.
CALL_ID: contextvars.ContextVar[str] = contextvars.ContextVar("CALL_ID", default="")


@wrap_tool_call
async def call_id_for_tool(request: Any, handler: Any) -> Any:
    CALL_ID.set(str(request.tool_call.get("id") or ""))
    return await handler(request)


def forces_first(task: LoopTask) -> Any:
    """A middleware that forces the task's tool choice on the run's first model call only."""
    choice = task.tool_choice
    calls = [0]

    @wrap_model_call
    async def force_first(request: Any, handler: Any) -> Any:
        calls[0] += 1
        if calls[0] == 1 and choice is not None and choice.mode != "auto":
            request = request.override(tool_choice=choice.name if choice.mode == "tool" else "any")
        return await handler(request)

    return force_first


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
            middleware=[call_id_for_tool, forces_first(task)],
        )
        # Each model turn and each tool turn is a step of the graph: N requests, N - 1 tool turns.
        config = {"recursion_limit": 2 * task.max_requests - 1}
        try:
            state = await until_abort(
                task, agent.ainvoke({"messages": [HumanMessage(task.prompt)]}, config=config)
            )
        except GraphRecursionError:
            return budget_result()
        last = state["messages"][-1]
        finish = finish_of(last) if isinstance(last, AIMessage) else "stop"
        return LoopResult(str(last.text or ""), finish)


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


class GoogleLoop(AgentLoop):
    def model(self, task: LoopTask) -> Any:
        return ChatGoogleGenerativeAI(
            model=task.model,
            google_api_key="test",
            base_url=self.url,
            max_retries=0,
            timeout=task.max_seconds,
            streaming=task.stream,
        )


class BedrockLoop(AgentLoop):
    def model(self, task: LoopTask) -> Any:
        return ChatBedrockConverse(
            model=task.model,
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(
                retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=task.max_seconds
            ),
            streaming=task.stream,
            # The integration infers the tool choices a model takes from its id; the fake's is
            # none it knows, so they are named, as its documentation says to for such a model.
            supports_tool_choice_values=("auto", "any", "tool"),
            # As in the backend row: without it a model id the integration has not verified
            # as streaming-capable is never streamed.
            disable_streaming=False,
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
        AgentLoopTarget(
            "langchain create_agent, ChatGoogleGenerativeAI", gemini_wire, GoogleLoop, client="langchain"
        ),
        AgentLoopTarget(
            "langchain create_agent, ChatBedrockConverse",
            bedrock_converse_wire,
            BedrockLoop,
            # Its async methods run boto3's blocking calls in a thread, which a cancel cannot reach.
            skip={"cancel": NO_ABORT},
            client="langchain",
        ),
    ]
