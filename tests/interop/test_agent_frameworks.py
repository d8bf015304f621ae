"""The agent-loop suite through agent frameworks: anthropic's tool runner and the OpenAI Agents SDK.

Each framework runs its own loop; the gate's tools are registered in it, and the
stages it can run are run. A stage a framework cannot meet for a reason of its own
design is skipped with that reason. The OpenAI Agents SDK needs Python 3.10 or later
and is skipped where it is absent.
"""

from __future__ import annotations

import logging
import re
import unittest
import warnings
from typing import Any, FrozenSet, Mapping, Optional, Tuple

from conformance.gate import AgentLoopConformanceTestCase, AgentLoopTarget
from conformance.wires.anthropic import anthropic_wire
from conformance.wires.openai_chat import openai_chat_wire
from conformance.wires.openai_responses import openai_responses_wire

from ..test_provider_support import AsyncioDebugOff
from .framework_loops import HAVE_AGENTS, HAVE_TOOL_RUNNER, AnthropicToolRunnerLoop, OpenAIAgentsLoop, prime
from .sdk_loops import LONG_TESTS, quick_suite

AGENTS_MISSING = "openai-agents is not installed (it needs Python 3.10 or later): pip install openai-agents"
RUNNER_MISSING = (
    "anthropic's tool runner (client.beta.messages.tool_runner) is not installed: pip install -U anthropic"
)

#: The fault-stage findings: what each framework does, by its own design, where the gate
#: asks for something else. None is the loop's to patch; each is the framework as shipped.
RUNNER_REPAIRS_ARGUMENTS = (
    "anthropic's tool runner (2.14.0) streams through the messages.stream accumulator, which "
    "parses each tool_use block's input_json_delta text with jiter's partial mode "
    "(anthropic/lib/streaming/_messages.py, accumulate_event) and so closes broken argument JSON "
    'into a smaller valid object (\'{"tags": ["a", "b\' becomes tags [\'a\']); the runner calls the '
    "tool with that object and the tool function never sees the text, so it cannot refuse it. "
    "Related upstream: https://github.com/anthropics/anthropic-sdk-python/issues/1265 (the "
    "accumulator raises only on text partial mode cannot close). A hand-written loop over "
    "messages.stream that reads the input_json_delta text passes"
)
#: Why the Agents SDK's targets declare error_results="text": at a call to a tool the
#: agent lacks, with RunConfig(tool_not_found_behavior="return_error_to_model") (without it
#: the SDK raises ModelBehaviorError), openai-agents 0.24.0 sends back the plain text
#: "Tool 'read_file' not found.", no JSON error; neither OpenAI wire has an error marker for
#: a function output, so that text is the error as the API can carry it.
AGENTS_PLAIN_TEXT_ERRORS = "openai-agents sends an unknown tool's error as plain text"
AGENTS_CHAT_SENDS_BROKEN_JSON = (
    "the OpenAI Agents SDK (openai-agents 0.24.0) over Chat Completions sends the model's broken "
    "argument text back verbatim in the assistant turn's tool_calls, which the Chat Completions "
    "API refuses with a 400 (function.arguments must be JSON); the tool itself answered with a "
    "structured invalid_arguments error. Over Responses the same text is accepted and the stage "
    "passes"
)

#: The framework bugs the gate finds, run as expected failures: the stage must fail with
#: exactly these checks, for the reason given (a framework that is fixed then fails the test,
#: and the entry goes).
RUNNER_RUNS_ON_AFTER_ABORT = (
    "anthropic's tool runner (2.15.0) catches every Exception a tool function raises, the "
    "caller's abort reason included, into an is_error tool_result (anthropic/lib/tools/"
    "_beta_runner.py, BetaToolRunner._run_tool), and _generate_tool_call_response goes on to "
    "the turn's next tool_use block: after the abort inside delayed_value the runner calls "
    "echo_json's function, which reaches the toolset (refused there, the signal having fired). "
    "A tool function that checks the signal before it starts keeps the second call from running"
)
AGENTS_CHAT_RUNS_LENGTH_CALLS = (
    "the OpenAI Agents SDK (openai-agents 0.24.0) over Chat Completions raises on finish_reason "
    "'length' only when the turn has no text, refusal or tool call (agents/models/"
    "openai_chatcompletions.py, OpenAIChatCompletionsModel.get_response; streamed, "
    "ChatCmplStreamHandler in chatcmpl_stream_handler.py with raise_on_length_truncation): a "
    "length turn with a preamble and a cut-off call is taken as a tool turn, the runner hands "
    "the call's broken argument text to the tool (the toolset refuses it at the door), and the "
    "next request carries that text back, which the API refuses with a 400. Over Responses the "
    "SDK raises at the incomplete response and the stage passes"
)


class KnownFailures:
    """Runs the cases in ``known`` (stage or stage/mode: (the check ids, why)) as expected failures."""

    known: Mapping[str, Tuple[FrozenSet[str], str]] = {}

    def run_agent_loop_case(self, stage: str, mode: str) -> None:
        known = self.known.get(f"{stage}/{mode}") or self.known.get(stage)
        if known is None:
            super().run_agent_loop_case(stage, mode)  # type: ignore[misc]
            return
        checks, why = known
        try:
            super().run_agent_loop_case(stage, mode)  # type: ignore[misc]
        except AssertionError as failed:
            got = set(re.findall(r"^  - .*\[([a-z-]+)\]$", str(failed), re.M))
            assert got == set(checks), f"expected the known failure {sorted(checks)} ({why}); got:\n{failed}"
            return
        raise AssertionError(f"{stage}/{mode} passes now; the known failure is gone: {why}")


#: What runs without CONFORMANCE_LONG_TESTS=1: each framework on the happy path, whole
#: and streamed, and on one turn the provider ends (a known failure for the Agents SDK over
#: Chat); the other stages, the fault stages among them, run in the long run.
QUICK = {
    "AnthropicToolRunner": ["forced-tool/chat", "forced-tool/stream", "length-tool-turn/stream"],
    "OpenAIAgentsResponses": ["forced-tool/chat", "forced-tool/stream", "content-filter-turn/stream"],
    "OpenAIAgentsChat": ["forced-tool/chat", "forced-tool/stream", "length-tool-turn/chat"],
}


def load_tests(loader: unittest.TestLoader, tests: unittest.TestSuite, pattern: Optional[str]) -> Any:
    return quick_suite(tests, QUICK)


#: The tool runner warns when the model calls a tool it lacks, then answers the call
#: with an ``is_error`` result and goes on; the tests run with ``-W error``, under which
#: that warning would end the run, as it does not for a user.
_RUNNER_WARNING = r"Tool '.*' not found in tool runner"
_saved: Optional[warnings.catch_warnings] = None
#: The Agents SDK logs "Error streaming response" (and the like) before it raises the
#: error a fault stage provokes; the verdict says what happened, so the log is quieted.
_AGENTS_LOG = logging.getLogger("openai.agents")
_agents_level = _AGENTS_LOG.level


_ASYNCIO_DEBUG = AsyncioDebugOff()  # unless CONFORMANCE_LONG_TESTS=1


def tearDownModule() -> None:
    _ASYNCIO_DEBUG.stop()
    _AGENTS_LOG.setLevel(_agents_level)
    if _saved is not None:
        _saved.__exit__(None, None, None)


def setUpModule() -> None:
    global _saved
    _ASYNCIO_DEBUG.start()
    _saved = warnings.catch_warnings()
    _saved.__enter__()
    warnings.filterwarnings("ignore", message=_RUNNER_WARNING, category=UserWarning)
    _AGENTS_LOG.setLevel(logging.CRITICAL)
    if not LONG_TESTS:
        # The primes are for the cancel stage, which only the long run has; the
        # default cases only need the Agents SDK imported before their bound starts.
        if HAVE_AGENTS:
            import agents  # noqa: F401
        return
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
class AnthropicToolRunner(KnownFailures, AgentLoopConformanceTestCase, unittest.TestCase):
    """``Anthropic().beta.messages.tool_runner``, over HTTP/1.1."""

    wire = anthropic_wire
    skip = {"corrupt-arguments/stream": RUNNER_REPAIRS_ARGUMENTS}
    known = {"cancel-in-tool": (frozenset({"after-cancel"}), RUNNER_RUNS_ON_AFTER_ABORT)}

    def create_loop(self, url: str) -> AnthropicToolRunnerLoop:
        return AnthropicToolRunnerLoop(url)


@unittest.skipUnless(HAVE_AGENTS, AGENTS_MISSING)
class OpenAIAgentsResponses(AgentLoopConformanceTestCase, unittest.TestCase):
    """The Agents SDK's ``Runner`` over ``OpenAIResponsesModel``, over HTTP/1.1."""

    wire = openai_responses_wire
    error_results = "text"  # AGENTS_PLAIN_TEXT_ERRORS

    def create_loop(self, url: str) -> OpenAIAgentsLoop:
        return OpenAIAgentsLoop(url, "responses")


@unittest.skipUnless(HAVE_AGENTS, AGENTS_MISSING)
class OpenAIAgentsChat(KnownFailures, AgentLoopConformanceTestCase, unittest.TestCase):
    """The Agents SDK's ``Runner`` over ``OpenAIChatCompletionsModel``, over HTTP/1.1."""

    wire = openai_chat_wire
    error_results = "text"  # AGENTS_PLAIN_TEXT_ERRORS
    skip = {"corrupt-arguments": AGENTS_CHAT_SENDS_BROKEN_JSON}
    known = {"length-tool-turn": (frozenset({"result-format"}), AGENTS_CHAT_RUNS_LENGTH_CALLS)}

    def create_loop(self, url: str) -> OpenAIAgentsLoop:
        return OpenAIAgentsLoop(url, "chat")


if __name__ == "__main__":
    unittest.main()
