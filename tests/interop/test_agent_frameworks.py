"""The agent-loop suite through agent frameworks: anthropic's tool runner and the OpenAI Agents SDK.

Each framework runs its own loop; the gate's tools are registered in it, and the
stages it can run are run. A stage a framework cannot meet for a reason of its own
design is skipped with that reason. The OpenAI Agents SDK needs Python 3.10 or later
and is skipped where it is absent.
"""

from __future__ import annotations

import unittest

from conformance.gate import AgentLoopConformanceTestCase, AgentLoopTarget
from conformance.wires.anthropic import anthropic_wire
from conformance.wires.openai_chat import openai_chat_wire
from conformance.wires.openai_responses import openai_responses_wire

from .framework_loops import HAVE_AGENTS, HAVE_TOOL_RUNNER, AnthropicToolRunnerLoop, OpenAIAgentsLoop, prime

AGENTS_MISSING = "openai-agents is not installed (it needs Python 3.10 or later): pip install openai-agents"
RUNNER_MISSING = (
    "anthropic's tool runner (client.beta.messages.tool_runner) is not installed: pip install -U anthropic"
)


def setUpModule() -> None:
    if HAVE_TOOL_RUNNER:
        prime(AgentLoopTarget("tool runner", anthropic_wire, AnthropicToolRunnerLoop, timeout=30.0))
    if HAVE_AGENTS:
        for api, wire in (("responses", openai_responses_wire), ("chat", openai_chat_wire)):
            prime(
                AgentLoopTarget(
                    f"agents {api}", wire, lambda url, api=api: OpenAIAgentsLoop(url, api), timeout=30.0
                )
            )


@unittest.skipUnless(HAVE_TOOL_RUNNER, RUNNER_MISSING)
class AnthropicToolRunner(AgentLoopConformanceTestCase, unittest.TestCase):
    """``Anthropic().beta.messages.tool_runner``, over HTTP/1.1."""

    wire = anthropic_wire

    def create_loop(self, url: str) -> AnthropicToolRunnerLoop:
        return AnthropicToolRunnerLoop(url)


@unittest.skipUnless(HAVE_AGENTS, AGENTS_MISSING)
class OpenAIAgentsResponses(AgentLoopConformanceTestCase, unittest.TestCase):
    """The Agents SDK's ``Runner`` over ``OpenAIResponsesModel``, over HTTP/1.1."""

    wire = openai_responses_wire

    def create_loop(self, url: str) -> OpenAIAgentsLoop:
        return OpenAIAgentsLoop(url, "responses")


@unittest.skipUnless(HAVE_AGENTS, AGENTS_MISSING)
class OpenAIAgentsChat(AgentLoopConformanceTestCase, unittest.TestCase):
    """The Agents SDK's ``Runner`` over ``OpenAIChatCompletionsModel``, over HTTP/1.1."""

    wire = openai_chat_wire

    def create_loop(self, url: str) -> OpenAIAgentsLoop:
        return OpenAIAgentsLoop(url, "chat")


if __name__ == "__main__":
    unittest.main()
