"""The agent-loop suite through agent frameworks: anthropic's tool runner, the OpenAI Agents SDK,
pydantic-ai and LangChain's ``create_agent``.

Each framework runs its own loop; the gate's tools are registered in it, and the
stages it can run are run. A stage a framework cannot meet for a reason of its own
design is skipped with that reason; a framework's bug is a known break, an expected
failure that names the framework's code and must fail for the check it names (a pass,
or a failure for another reason, is an unexpected success and turns the run red). The
OpenAI Agents SDK needs Python 3.10 or later, pydantic-ai and LangChain 3.11 or later; each
is skipped where it is absent (``pip install -e .[interop,frameworks]``).
"""

from __future__ import annotations

import functools
import logging
import re
import sys
import unittest
import warnings
from typing import Any, Callable, FrozenSet, Mapping, Optional, Tuple

from conformance.gate import AgentLoopConformanceTestCase, AgentLoopTarget
from conformance.wires.anthropic import anthropic_wire
from conformance.wires.openai_chat import openai_chat_wire
from conformance.wires.openai_responses import openai_responses_wire

from ..test_provider_support import AsyncioDebugOff
from ._support import installed_version
from .framework_loops import (
    HAVE_AGENTS,
    HAVE_LANGCHAIN,
    HAVE_PYDANTIC_AI,
    HAVE_TOOL_RUNNER,
    AnthropicToolRunnerLoop,
    LangChainLoop,
    OpenAIAgentsLoop,
    PydanticAILoop,
    prime,
)
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
RUNNER_RUNS_LENGTH_CALLS = (
    "anthropic's tool runner before 1.1.0 (0.125.0, the last release for Python 3.9, among them) "
    "ends its loop only at a turn with no tool_use block or at stop_reason 'refusal' "
    "(anthropic/lib/tools/_beta_runner.py, BaseSyncToolRunner.__run__, lines 289-297 in 0.125.0): a "
    "max_tokens turn's cut-off call runs and the model is asked again; streamed, the messages.stream "
    "accumulator has first closed the call's broken argument JSON into a smaller valid object "
    "(anthropic/lib/streaming/_beta_messages.py, accumulate_event, lines 502-519), which the tool "
    "takes. 1.1.0 maps each stop reason to a step (_STOP_REASON_STEPS, max_tokens to stop) and runs "
    "no call of a max_tokens turn, and the stage passes"
)
RUNNER_CANNOT_CLOSE = (
    "anthropic's tool runner before 1.14.0 (0.125.0, the last release for Python 3.9, among them) "
    "has no close(), so nothing stops it once the caller aborts; like later releases it turns "
    "what a tool function raises at the abort into an is_error tool_result, runs the turn's next "
    "tool_use block (anthropic/lib/tools/_beta_runner.py, _generate_tool_call_response, lines "
    "363-384 in 0.125.0), then goes round to its next request with the results "
    "(BaseSyncToolRunner.__run__, lines 273-300); the loop sees it only at the runner's next message"
)
#: The known breaks of the installed anthropic's tool runner, by release.
RUNNER_KNOWN = {"cancel-in-tool": (frozenset({"after-cancel"}), RUNNER_RUNS_ON_AFTER_ABORT)}
if HAVE_TOOL_RUNNER and installed_version("anthropic") < (1, 14):
    RUNNER_KNOWN["cancel-in-tool"] = (frozenset({"after-cancel", "request-after-abort"}), RUNNER_CANNOT_CLOSE)
if HAVE_TOOL_RUNNER and installed_version("anthropic") < (1, 1):
    RUNNER_KNOWN.update(
        {
            "length-tool-turn/chat": (frozenset({"requests", "ended-turn"}), RUNNER_RUNS_LENGTH_CALLS),
            "length-tool-turn/stream": (
                frozenset({"requests", "ended-turn", "refused-call"}),
                RUNNER_RUNS_LENGTH_CALLS,
            ),
        }
    )
AGENTS_CHAT_RUNS_LENGTH_CALLS = (
    "the OpenAI Agents SDK (openai-agents 0.24.0) over Chat Completions raises on finish_reason "
    "'length' only when the turn has no text, refusal or tool call (agents/models/"
    "openai_chatcompletions.py, OpenAIChatCompletionsModel.get_response; streamed, "
    "ChatCmplStreamHandler in chatcmpl_stream_handler.py with raise_on_length_truncation): a "
    "length turn with a preamble and a cut-off call is taken as a tool turn, the runner hands "
    "the call's broken argument text to the tool (the toolset refuses it at the door), and it "
    "asks the model again after a turn that ended at its limit. Over Responses the SDK raises at "
    "the incomplete response and the stage passes"
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


PYDANTIC_AI_MISSING = (
    "pydantic-ai is not installed (it needs Python 3.11 or later): "
    "pip install 'pydantic-ai-slim[openai,anthropic]'"
)
LANGCHAIN_MISSING = (
    "langchain, langchain-openai and langchain-anthropic are not all installed (they need Python 3.11 or "
    "later): pip install langchain langchain-openai langchain-anthropic"
)
#: Where the gate itself is wrong today about a framework that does what the API allows
#: (issue 22, "false failures"): skipped with the reason until the gate's rule is fixed.
PYDANTIC_AI_ERROR_SHAPES = (
    'pydantic-ai answers an unknown tool with {"error": "..."} (a string) and arguments that do not '
    'parse with {"error": [{type, loc, msg}, ...]} (a list of typed errors); both are structured errors, '
    "but the gate accepts only an object under error (issue 22, item 10)"
)
LANGCHAIN_TEXT_ERRORS = (
    "LangChain's ToolNode answers a call to an unknown tool with the plain text \"Error: read_file is not a "
    "valid tool, try one of [...]\" (ToolMessage status=error, which OpenAI's wires cannot carry); the "
    "gate has no knob yet to accept a framework's text errors on a wire without an error marker "
    "(issue 22, item 10)"
)
LANGCHAIN_INTERLEAVED = (
    "langchain-openai's Responses stream reader keys a call by the output item it opened in and fails "
    "(ToolMessage tool_call_id validation) on the gate's default Responses stream, which interleaves two "
    "calls' argument deltas across output items; the real API streams one item after another "
    "(issue 22, item 11)"
)
LANGCHAIN_ANTHROPIC_BARE_READ_ERROR = (
    "langchain-anthropic lets the anthropic SDK's httpx.ReadError through when the stream is reset, and "
    "httpcore's ReadError for a reset carries no message: the loop stops without saying what happened "
    "(error-message)"
)
#: A framework's own bug: (the check that must catch it, what the framework's code does).
LANGCHAIN_CLOSES_BROKEN_JSON = (
    "refused-call",
    "LangChain's stream path closes broken argument JSON and runs the tool: AIMessageChunk.init_tool_calls "
    "(langchain_core/messages/ai.py) parses every tool_call_chunks entry with parse_partial_json "
    "(langchain_core/utils/json.py), which closes the open string, array and object, so the finished "
    "chunk's tool_calls hold {'text': 'gate', 'count': 2, 'tags': ['a', 'b']} and create_agent's "
    "ToolNode runs echo_json on it",
)
LANGCHAIN_DROPS_BROKEN_CALL = (
    "final-text",
    "LangChain's whole-reply path moves a call whose arguments do not parse into "
    "AIMessage.invalid_tool_calls (langchain_core/messages/tool.py, default_tool_parser), and "
    "create_agent's edge after the model ends the run when tool_calls is empty, never looking at "
    "invalid_tool_calls (langchain/agents/factory.py, _make_model_to_tools_edge), so the run ends as "
    "a clean finish with the model's call unanswered",
)

LANGCHAIN_RESPONSES_SWALLOWS_CANCEL = (
    "abort-reason",
    "on Python 3.11 and earlier the cancel never reaches langchain-openai's Responses stream until the "
    "request times out: _astream_with_chunk_timeout (langchain_openai/chat_models/_client_utils.py) reads "
    "each chunk under asyncio.wait_for, whose 3.11 form can swallow a cancellation that arrives while "
    "the read completes (3.12 rebuilt wait_for on asyncio.timeout, and there it passes); "
    "ChatOpenAI(stream_chunk_timeout=0) reads without it and passes",
)

PYDANTIC_AI_GOES_ON_AFTER_LENGTH = (
    "pydantic-ai (2.68.0) does not stop at a turn the provider cut off at its output limit when the "
    "cut-off call's arguments happen to parse: GraphAgentState.check_incomplete_tool_call "
    "(pydantic_ai/_agent_graph.py) raises IncompleteToolCall on finish_reason 'length' only when the "
    "last part's arguments are invalid JSON, so the run goes on with the stage's cut-off call "
    '({"text": "gate", "count": 2, "tags": ["a"]}): it asks the model again, and over Anthropic '
    "whole replies runs the call first"
)
LANGCHAIN_RUNS_LENGTH_CALLS = (
    "LangChain's create_agent (langchain 1.5.2) routes to the tools whenever the last AIMessage has "
    "tool_calls, never reading its finish reason (langchain/agents/factory.py, "
    "_make_model_to_tools_edge): the call of a turn the provider cut off at its output limit runs (on "
    "a stream it reaches the toolset with the fragments it had, which refuses it) and the model is "
    "asked again"
)


def known_break(cls: Any, case: str, expected: Tuple[str, str], *, race: bool = False) -> None:
    """Mark ``cls``'s generated test of ``case`` as the framework's known break: an expected failure
    that must fail for its check; a pass, or a failure for another reason, is an unexpected success.

    ``race`` marks a break that happens only when two events fall one way (a cancel landing
    while a read completes): then a pass is allowed, and a failure must still be the check's.
    """
    check, why = expected
    stage, _, mode = case.partition("/")
    name = f"test_{stage.replace('-', '_')}_{mode}"
    original: Callable[[Any], None] = getattr(cls, name)

    def run(self: Any) -> None:
        try:
            original(self)
        except AssertionError as failed:
            if f"[{check}]" in str(failed):
                raise
            print(f"\n{cls.__name__}.{name} failed, but not for [{check}]:\n{failed}")
            if race:
                raise AssertionError(
                    f"expected a pass or the known break [{check}], got:\n{failed}"
                ) from None

    def raced(self: Any) -> None:
        try:
            run(self)
        except AssertionError as failed:
            if f"[{check}]" not in str(failed):
                raise

    test = raced if race else unittest.expectedFailure(run)
    test.__name__ = name
    test.__doc__ = f"Known break{' (a race)' if race else ''}, caught by [{check}]: {why}."
    setattr(cls, name, test)


#: What runs without CONFORMANCE_LONG_TESTS=1: each framework on the happy path, whole
#: and streamed, and on one turn the provider ends (a known failure for the Agents SDK over
#: Chat); the other stages, the fault stages among them, run in the long run.
QUICK = {
    "AnthropicToolRunner": ["forced-tool/chat", "forced-tool/stream", "length-tool-turn/stream"],
    "OpenAIAgentsResponses": ["forced-tool/chat", "forced-tool/stream", "content-filter-turn/stream"],
    "OpenAIAgentsChat": ["forced-tool/chat", "forced-tool/stream", "length-tool-turn/chat"],
    "PydanticAIChat": ["forced-tool/chat", "forced-tool/stream"],
    "PydanticAIResponses": ["forced-tool/stream"],
    "PydanticAIAnthropic": ["forced-tool/chat"],
    "LangChainChat": ["forced-tool/chat", "corrupt-arguments/stream"],
    "LangChainResponses": ["forced-tool/stream"],
    "LangChainAnthropic": ["forced-tool/chat", "forced-tool/stream"],
}


def load_tests(loader: unittest.TestLoader, tests: unittest.TestSuite, pattern: Optional[str]) -> Any:
    return quick_suite(tests, QUICK)


#: The tool runner warns when the model calls a tool it lacks, then answers the call
#: with an ``is_error`` result and goes on; the tests run with ``-W error``, under which
#: that warning would end the run, as it does not for a user.
_RUNNER_WARNING = r"Tool '.*' not found in tool runner"
_saved: Optional[warnings.catch_warnings] = None
#: The Agents SDK logs "Error streaming response" (and the like) before it raises the
#: error a fault stage provokes, and the tool runner logs the exception a tool raises (the
#: abort reason, in the cancel-in-tool stage) before it answers the call with is_error;
#: the verdict says what happened, so the logs are quieted.
_QUIETED = [logging.getLogger(name) for name in ("openai.agents", "anthropic.lib.tools")]
_levels = [log.level for log in _QUIETED]


_ASYNCIO_DEBUG = AsyncioDebugOff()  # unless CONFORMANCE_LONG_TESTS=1


def tearDownModule() -> None:
    _ASYNCIO_DEBUG.stop()
    for log, level in zip(_QUIETED, _levels):
        log.setLevel(level)
    if _saved is not None:
        _saved.__exit__(None, None, None)


def setUpModule() -> None:
    global _saved
    _ASYNCIO_DEBUG.start()
    _saved = warnings.catch_warnings()
    _saved.__enter__()
    warnings.filterwarnings("ignore", message=_RUNNER_WARNING, category=UserWarning)
    for log in _QUIETED:
        log.setLevel(logging.CRITICAL)
    # Each framework imported before any case's bound starts: on a busy machine an import
    # alone can take seconds.
    if HAVE_PYDANTIC_AI:
        import pydantic_ai.models.anthropic  # noqa: F401
        import pydantic_ai.models.openai  # noqa: F401
    if HAVE_LANGCHAIN:
        import langchain.agents  # noqa: F401
        import langchain_anthropic  # noqa: F401
        import langchain_openai  # noqa: F401
    if HAVE_LANGCHAIN or HAVE_PYDANTIC_AI or HAVE_AGENTS:
        # What the SDKs import at their first request, which the first case would time:
        # the openai client's resources (a fifth of a second of CPU for Responses, some
        # seconds on a busy two-core machine) and httpx's transport.
        import anyio._backends._asyncio  # noqa: F401
        import httpcore  # noqa: F401
        import openai.resources.chat.completions.completions  # noqa: F401
        import openai.resources.responses.responses  # noqa: F401
    if HAVE_LANGCHAIN:
        # LangChain's Responses case is the first here to stream Responses events, and the
        # openai client builds its validators for them on the first (pydantic schemas,
        # twice the CPU of a whole case after it): outside the case's bound, not in it.
        responses = functools.partial(LangChainLoop, api="responses")
        prime(AgentLoopTarget("langchain responses", openai_responses_wire, responses, timeout=30.0))
    if not LONG_TESTS:
        # The other primes are for the cancel stage, which only the long run has; the
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
    known = RUNNER_KNOWN

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
    # It sends the model's broken argument text back verbatim, as api.openai.com takes it.
    known = {"length-tool-turn": (frozenset({"requests"}), AGENTS_CHAT_RUNS_LENGTH_CALLS)}

    def create_loop(self, url: str) -> OpenAIAgentsLoop:
        return OpenAIAgentsLoop(url, "chat")


@unittest.skipUnless(HAVE_PYDANTIC_AI, PYDANTIC_AI_MISSING)
class PydanticAIChat(KnownFailures, AgentLoopConformanceTestCase, unittest.TestCase):
    """pydantic-ai's ``Agent.run`` over ``OpenAIChatModel``, over HTTP/1.1."""

    wire = openai_chat_wire
    timeout = 8.0  # pydantic-ai builds its tool schemas and graph on a run's first request
    skip = {"unknown-tool": PYDANTIC_AI_ERROR_SHAPES, "corrupt-arguments": PYDANTIC_AI_ERROR_SHAPES}

    known = {"length-tool-turn": (frozenset({"requests"}), PYDANTIC_AI_GOES_ON_AFTER_LENGTH)}

    def create_loop(self, url: str) -> PydanticAILoop:
        return PydanticAILoop(url, "chat")


@unittest.skipUnless(HAVE_PYDANTIC_AI, PYDANTIC_AI_MISSING)
class PydanticAIResponses(KnownFailures, AgentLoopConformanceTestCase, unittest.TestCase):
    """pydantic-ai's ``Agent.run`` over ``OpenAIResponsesModel``, over HTTP/1.1.

    The model's profile declares it a reasoning model (see ``PydanticAILoop.model``):
    pydantic-ai sends a reasoning item's encrypted content back only for a model its
    profile says reasons.
    """

    wire = openai_responses_wire
    timeout = 8.0
    skip = {"unknown-tool": PYDANTIC_AI_ERROR_SHAPES, "corrupt-arguments": PYDANTIC_AI_ERROR_SHAPES}

    known = {"length-tool-turn": (frozenset({"requests"}), PYDANTIC_AI_GOES_ON_AFTER_LENGTH)}

    def create_loop(self, url: str) -> PydanticAILoop:
        return PydanticAILoop(url, "responses")


@unittest.skipUnless(HAVE_PYDANTIC_AI, PYDANTIC_AI_MISSING)
class PydanticAIAnthropic(KnownFailures, AgentLoopConformanceTestCase, unittest.TestCase):
    """pydantic-ai's ``Agent.run`` over ``AnthropicModel``, over HTTP/1.1."""

    wire = anthropic_wire
    timeout = 8.0

    known = {
        "length-tool-turn/chat": (frozenset({"ended-turn", "requests"}), PYDANTIC_AI_GOES_ON_AFTER_LENGTH),
        "length-tool-turn/stream": (frozenset({"requests"}), PYDANTIC_AI_GOES_ON_AFTER_LENGTH),
    }

    def create_loop(self, url: str) -> PydanticAILoop:
        return PydanticAILoop(url, "anthropic")


@unittest.skipUnless(HAVE_LANGCHAIN, LANGCHAIN_MISSING)
class LangChainChat(KnownFailures, AgentLoopConformanceTestCase, unittest.TestCase):
    """LangChain's ``create_agent`` over ``ChatOpenAI``, over HTTP/1.1."""

    wire = openai_chat_wire
    skip = {"unknown-tool": LANGCHAIN_TEXT_ERRORS}

    known = {
        "length-tool-turn/stream": (
            frozenset({"ended-turn", "refused-call", "requests"}),
            LANGCHAIN_RUNS_LENGTH_CALLS,
        )
    }

    def create_loop(self, url: str) -> LangChainLoop:
        return LangChainLoop(url, "chat")


@unittest.skipUnless(HAVE_LANGCHAIN, LANGCHAIN_MISSING)
class LangChainResponses(KnownFailures, AgentLoopConformanceTestCase, unittest.TestCase):
    """LangChain's ``create_agent`` over ``ChatOpenAI(use_responses_api=True)``, over HTTP/1.1."""

    wire = openai_responses_wire
    skip = {"unknown-tool": LANGCHAIN_TEXT_ERRORS, "parallel-calls/stream": LANGCHAIN_INTERLEAVED}

    known = {
        "length-tool-turn/stream": (
            frozenset({"ended-turn", "refused-call", "requests"}),
            LANGCHAIN_RUNS_LENGTH_CALLS,
        )
    }

    def create_loop(self, url: str) -> LangChainLoop:
        return LangChainLoop(url, "responses")


@unittest.skipUnless(HAVE_LANGCHAIN, LANGCHAIN_MISSING)
class LangChainAnthropic(KnownFailures, AgentLoopConformanceTestCase, unittest.TestCase):
    """LangChain's ``create_agent`` over ``ChatAnthropic``, over HTTP/1.1."""

    wire = anthropic_wire
    skip = {
        "reset-after-first-fragment": LANGCHAIN_ANTHROPIC_BARE_READ_ERROR,
        "reset-after-last-fragment": LANGCHAIN_ANTHROPIC_BARE_READ_ERROR,
        "reset-mid-event": LANGCHAIN_ANTHROPIC_BARE_READ_ERROR,
    }

    known = {
        "length-tool-turn/chat": (frozenset({"ended-turn", "requests"}), LANGCHAIN_RUNS_LENGTH_CALLS),
        "length-tool-turn/stream": (
            frozenset({"ended-turn", "refused-call", "requests"}),
            LANGCHAIN_RUNS_LENGTH_CALLS,
        ),
    }

    def create_loop(self, url: str) -> LangChainLoop:
        return LangChainLoop(url, "anthropic")


for _cls in (LangChainChat, LangChainResponses, LangChainAnthropic):
    known_break(_cls, "corrupt-arguments/stream", LANGCHAIN_CLOSES_BROKEN_JSON)
for _cls in (LangChainChat, LangChainResponses):
    known_break(_cls, "corrupt-arguments/chat", LANGCHAIN_DROPS_BROKEN_CALL)
del _cls  # a test class left in the module under a second name would run twice
if sys.version_info < (3, 12):
    known_break(LangChainResponses, "cancel/stream", LANGCHAIN_RESPONSES_SWALLOWS_CANCEL, race=True)


if __name__ == "__main__":
    unittest.main()
