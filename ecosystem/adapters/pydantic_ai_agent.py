"""pydantic-ai's own loop: ``Agent.run``, with its OpenAI (Chat, Responses), Anthropic, Cohere,
Google (Gemini API) and Bedrock Converse model classes.

A stream-mode task runs with an ``event_stream_handler``, which makes the agent
stream each model request. The model clients' retries are off and their timeout is
the task's budget; the agent's own settings are its defaults. The Google model runs on
a google-genai client and the Bedrock one on a boto3 client, each built with fake
credentials as the backend rows build them. pydantic-ai's Ollama provider speaks
Ollama's OpenAI-compatible ``/v1`` endpoint, the OpenAI Chat wire the
``OpenAIChatModel`` row already covers, not Ollama's own ``/api/chat``: it has no row.
"""

from __future__ import annotations

from typing import Any, List

import anthropic
import boto3
import cohere
import openai
from botocore.config import Config
from google import genai
from google.genai import types
from pydantic_ai import Agent, Tool
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.bedrock import BedrockConverseModel
from pydantic_ai.models.cohere import CohereModel
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.bedrock import BedrockProvider
from pydantic_ai.providers.cohere import CohereProvider
from pydantic_ai.providers.google import GoogleProvider
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import UsageLimits

from conformance import (
    anthropic_wire,
    bedrock_converse_wire,
    cohere_wire,
    gemini_wire,
    openai_chat_wire,
    openai_responses_wire,
)
from conformance.gate import AgentLoopTarget, LoopResult, LoopTask

from ._loops import budget_result, run_tool, text_result, until_abort
from .boto3_converse import NO_ABORT

LIBRARY = "pydantic-ai-slim"
KIND = "loop"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("pydantic-ai-slim", "anthropic", "boto3", "cohere", "openai", "google-genai")


def gate_tool(task: LoopTask, spec: Any) -> Tool[Any]:
    async def invoke(context: Any, **arguments: Any) -> str:
        result = await run_tool(task, context.tool_call_id, spec.name, arguments)
        return result.text

    return Tool.from_schema(
        invoke,
        name=spec.name,
        description=spec.description,
        json_schema=dict(spec.parameters),
        takes_ctx=True,
    )


class AgentLoop:
    def __init__(self, url: str) -> None:
        self.url = url

    def model(self, task: LoopTask) -> Any:
        client = openai.AsyncOpenAI(
            base_url=f"{self.url}/v1", api_key="test", max_retries=0, timeout=task.max_seconds
        )
        return OpenAIChatModel(task.model, provider=OpenAIProvider(openai_client=client))

    async def run(self, task: LoopTask) -> LoopResult:
        choice = task.tool_choice
        settings: ModelSettings = {}
        if choice is not None:
            settings["tool_choice"] = [choice.name] if choice.mode == "tool" and choice.name else choice.mode  # type: ignore[typeddict-item]
        agent = Agent(
            self.model(task), tools=[gate_tool(task, spec) for spec in task.tools], model_settings=settings
        )

        async def drain(context: Any, events: Any) -> None:
            async for _ in events:
                pass

        try:
            done = await until_abort(
                task,
                agent.run(
                    task.prompt,
                    usage_limits=UsageLimits(request_limit=task.max_requests),
                    event_stream_handler=drain if task.stream else None,
                ),
            )
        except UsageLimitExceeded:
            return budget_result()
        return text_result(done.output)


class ResponsesLoop(AgentLoop):
    def model(self, task: LoopTask) -> Any:
        client = openai.AsyncOpenAI(
            base_url=f"{self.url}/v1", api_key="test", max_retries=0, timeout=task.max_seconds
        )
        return OpenAIResponsesModel(task.model, provider=OpenAIProvider(openai_client=client))


class AnthropicLoop(AgentLoop):
    def model(self, task: LoopTask) -> Any:
        client = anthropic.AsyncAnthropic(
            base_url=self.url, api_key="test", max_retries=0, timeout=task.max_seconds
        )
        return AnthropicModel(task.model, provider=AnthropicProvider(anthropic_client=client))


class CohereLoop(AgentLoop):
    def model(self, task: LoopTask) -> Any:
        client = cohere.AsyncClientV2(
            api_key="test", base_url=self.url, max_retries=0, timeout=task.max_seconds
        )
        return CohereModel(task.model, provider=CohereProvider(cohere_client=client))


class GoogleLoop(AgentLoop):
    def model(self, task: LoopTask) -> Any:
        options = types.HttpOptions(
            base_url=self.url,
            retry_options=types.HttpRetryOptions(attempts=1),
            timeout=int(task.max_seconds * 1000),
        )
        client = genai.Client(api_key="test", http_options=options)
        return GoogleModel(task.model, provider=GoogleProvider(client=client))


class BedrockLoop(AgentLoop):
    def model(self, task: LoopTask) -> Any:
        client = boto3.client(
            "bedrock-runtime",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(
                retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=task.max_seconds
            ),
        )
        return BedrockConverseModel(task.model, provider=BedrockProvider(bedrock_client=client))


def targets() -> List[AgentLoopTarget]:
    return [
        AgentLoopTarget(
            "pydantic-ai Agent, OpenAIChatModel", openai_chat_wire, AgentLoop, client="pydantic-ai-slim"
        ),
        AgentLoopTarget(
            "pydantic-ai Agent, OpenAIResponsesModel",
            openai_responses_wire,
            ResponsesLoop,
            client="pydantic-ai-slim",
        ),
        AgentLoopTarget(
            "pydantic-ai Agent, AnthropicModel", anthropic_wire, AnthropicLoop, client="pydantic-ai-slim"
        ),
        AgentLoopTarget("pydantic-ai Agent, CohereModel", cohere_wire, CohereLoop, client="pydantic-ai-slim"),
        AgentLoopTarget("pydantic-ai Agent, GoogleModel", gemini_wire, GoogleLoop, client="pydantic-ai-slim"),
        AgentLoopTarget(
            "pydantic-ai Agent, BedrockConverseModel",
            bedrock_converse_wire,
            BedrockLoop,
            # The model runs boto3's blocking call in a thread, which a cancel cannot reach.
            skip={"cancel/chat": NO_ABORT},
            client="pydantic-ai-slim",
        ),
    ]
