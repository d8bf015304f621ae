"""The stages of the agent-loop suite: what the scripted model does, and what the loop must do.

Strategy: each stage is a row of :data:`STAGES`: its name, the sentence a failure
message opens with (``must``), a hint, the prompt and tool choice of the task, and a
script. The script is a small function of the :class:`Step` (which generation request
this is, what the loop sent) returning the :class:`~conformance.wires._turns.ScriptedTurn`
the model answers with; it is written once, provider-neutral, and every wire that
scripts turns plays it. The model's final text quotes each tool's fixture id only
when that result came back correlated to the right call (``Step.final``); what the
loop must do is checked by the invariants (``_invariants``), never by wording.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..contract import Reasoning, ToolChoice
from ..errors import TargetDefinitionError
from ..wires._turns import ScriptedTurn
from ._stage import LOOP_MODES, Stage, Step

if TYPE_CHECKING:
    from ..wires._base import Wire

__all__ = [
    "INTERLEAVED",
    "DELAY_MS",
    "ENDED_FINISHES",
    "LOOP_MODES",
    "STAGES",
    "STRESS_STAGES",
    "Stage",
    "Step",
    "check_stage_keys",
    "reasoning_for",
]


#: The text the model answers the plain-text stage with: non-ASCII, so a loop that
#: decodes per chunk shows it.
PLAIN_TEXT = "The gate is open: caf\u00e9, 18 \u00b0C, \U0001f324 and all."

#: Stage C's call: non-ASCII as raw UTF-8 and as a \\uXXXX surrogate pair escape.
FRAGMENTED_ARGUMENTS = (
    '{"text": "\\ud83d\\ude00 caf\u00e9 \u65e5\u672c\u8a9e", "count": 3, "tags": ["\u00e9t\u00e9", "\u00df"]}'
)


def _fragments(arguments: str) -> Tuple[str, ...]:
    """Stage C's pieces: many, one boundary inside the surrogate pair's first escape,
    one between its two halves, and a last piece that only closes the object."""
    pair = arguments.index("\\ud83d")
    inside = pair + 4  # after "\ud8"
    between = pair + 6  # between "\ud83d" and "\ude00"
    tail = len(arguments) - 2  # the closing "]}"
    cuts = sorted({3, 9, inside, between, pair + 10, pair + 16, pair + 22, pair + 30, pair + 44, tail})
    bounds = [0, *[c for c in cuts if 0 < c < len(arguments)], len(arguments)]
    return tuple(arguments[a:b] for a, b in zip(bounds, bounds[1:]))


# -- the scripts -------------------------------------------------------------------------

ECHO_ARGUMENTS: Mapping[str, Any] = {"text": "gate", "count": 2, "tags": ["a", "b"]}


def _text(step: Step) -> ScriptedTurn:
    return ScriptedTurn(text=PLAIN_TEXT, seed=f"gate/{step.stage}/{step.index}")


def _one_call(name: str, arguments: Any) -> Callable[[Step], ScriptedTurn]:
    def script(step: Step) -> ScriptedTurn:
        if step.index == 0:
            return step.turn(step.call(name, arguments))
        return step.final()

    return script


def _fragmented(step: Step) -> ScriptedTurn:
    if step.index == 0:
        step.hold = (0, "before-last")
        args = FRAGMENTED_ARGUMENTS
        return step.turn(step.call("echo_json", args, fragments=_fragments(args)))
    return step.final()


def _parallel(interleave: bool) -> Callable[[Step], ScriptedTurn]:
    """Two calls in one turn: streamed one after the other, as every provider sends them, or,
    for the opt-in stress stage, their fragments alternating by index."""

    def script(step: Step) -> ScriptedTurn:
        if step.index == 0:
            first = step.call("read_fixture", {"path": "weather.json"}, 0)
            second = step.call("read_fixture", {"path": "notes/unicode.txt"}, 1)
            return step.turn(first, second, interleave=interleave)
        return step.final()

    return script


#: Why the interleaved stage is opt-in: the order is the format's, not a provider's.
INTERLEAVED = (
    "a stress order no provider was seen sending: the two calls' argument fragments alternate, "
    "each naming its call by index (OpenAI Chat index, Responses output_index, Anthropic and "
    "Bedrock content block index), which the format allows; the providers stream one call "
    "after the other"
)


def _error_corrects(step: Step) -> ScriptedTurn:
    if step.index == 0:
        return step.turn(step.call("always_error", {"reason": "first try"}))
    if step.index == 1:
        return step.turn(step.call("echo_json", ECHO_ARGUMENTS))
    return step.final()


def _error_insists(step: Step) -> ScriptedTurn:
    # Past the budget and two more, the model gives up, so a broken loop still ends.
    if step.index < step.max_requests + 2:
        return step.turn(step.call("always_error", {"reason": f"try {step.index + 1}"}))
    return step.final()


def _cancel(step: Step) -> ScriptedTurn:
    if step.index == 0:
        step.hold = (0, "cancel")
        return step.turn(step.call("echo_json", ECHO_ARGUMENTS, fragments=_fragments_plain()))
    return step.final()


#: How long the cancel-in-tool stage's ``delayed_value`` call waits: the gate aborts
#: 50 ms into it, so a loop that lets it run out is seen finishing it 250 ms after the abort.
DELAY_MS = 300
DELAYED_ARGUMENTS: Mapping[str, Any] = {"value": "gate", "delay_ms": DELAY_MS}


def _cancel_in_tool(step: Step) -> ScriptedTurn:
    if step.index == 0:
        slow = step.call("delayed_value", DELAYED_ARGUMENTS, 0)
        return step.turn(slow, step.call("echo_json", ECHO_ARGUMENTS, 1))
    return step.final()


#: The finish reasons that end a turn whose calls must not run: the provider cut the output
#: at its limit, or its safety system stopped it.
ENDED_FINISHES = ("length", "content_filter")
#: What the length stage's model wrote before the limit cut it off.
LENGTH_PREAMBLE = "Let me echo that for you."
#: The length stage's cut call: the argument text written before the cut, in a stream ...
CUT_ARGUMENTS = '{"text": "gate", "count": 2, "tags": ["a"'
#: ... and, where the provider carries arguments as an object, what the cut left parseable.
CUT_PARSEABLE = '{"text": "gate", "count": 2, "tags": ["a"]}'


def _length(step: Step) -> ScriptedTurn:
    if step.index == 0:
        from .faults import raw_arguments_reach

        text = CUT_ARGUMENTS if raw_arguments_reach(step.wire, step.history.stream) else CUT_PARSEABLE
        call = step.call("echo_json", text)
        return ScriptedTurn(LENGTH_PREAMBLE, (call,), finish="length", seed=f"gate/{step.stage}/0")
    return step.final()


def _filtered(step: Step) -> ScriptedTurn:
    if step.index == 0:
        return step.turn(step.call("echo_json", ECHO_ARGUMENTS))
    return ScriptedTurn(finish="content_filter", seed=f"gate/{step.stage}/{step.index}")


def _calls_with_stop(step: Step) -> ScriptedTurn:
    if step.index == 0:
        call = step.call("echo_json", ECHO_ARGUMENTS)
        return ScriptedTurn(calls=(call,), finish="stop", seed=f"gate/{step.stage}/0")
    return step.final()


#: Where a provider really ends a turn that calls tools with ``stop``, by wire name, and the source.
STOP_WITH_CALLS: Mapping[str, str] = {
    "openai-chat": "finish_reason stop beside tool_calls in real api.openai.com replies (crewAI cassettes "
    "test_output_json_dict_hierarchical.yaml, gpt-4o; test_memory_events_are_emitted.yaml, gpt-4o-mini), "
    "and OpenAI-compatible servers",
    "gemini": "Gemini ends every turn with finishReason STOP, functionCall parts or not",
    "gemini-vertex": "Gemini on Vertex AI ends every turn with finishReason STOP, functionCall parts or not",
    "ollama": "Ollama ends every turn with done_reason stop, tool_calls or not",
}


def _fragments_plain() -> Tuple[str, ...]:
    text = json.dumps(dict(ECHO_ARGUMENTS))
    return (text[:6], text[6:18], text[18:30], text[30:])


def _reasoning(step: Step) -> ScriptedTurn:
    if step.index == 0:
        call = step.call("echo_json", ECHO_ARGUMENTS, reasoning=step.call_reasoning)
        return ScriptedTurn(calls=(call,), reasoning=step.reasoning, seed=f"gate/{step.stage}/0")
    return step.final()


STAGES: Dict[str, Stage] = {
    s.name: s
    for s in (
        Stage(
            "text",
            "return the model's text whole, with finish reason stop, after one request and no tool run",
            "return the text of the turn that had no calls; a loop that keeps asking, or drops a "
            "piece of the stream, fails here",
            "Say something about the weather.",
            _text,
            requests=1,
        ),
        Stage(
            "forced-tool",
            "call echo_json when the request forces it, run it once on valid arguments, send the result "
            "back under its call id, and return the final text",
            "send tool_choice naming echo_json; run each complete call once and send its result back with "
            "the call's id",
            "Use echo_json to echo a greeting.",
            _one_call("echo_json", ECHO_ARGUMENTS),
            tool_choice=ToolChoice.tool("echo_json"),
            tools_called=("echo_json",),
            requests=2,
        ),
        Stage(
            "fragmented-arguments",
            "assemble the call's argument fragments (non-ASCII, a \\uXXXX pair split between fragments, "
            "UTF-8 split between chunks) into one call, and run it once, only after its last fragment",
            "gather fragments per call and parse them once the call is complete (at the end of the turn "
            "or its done event); decode UTF-8 across chunk boundaries",
            "Echo some non-ASCII text with echo_json.",
            _fragmented,
            tools_called=("echo_json",),
            requests=2,
        ),
        Stage(
            "parallel-calls",
            "run both read_fixture calls of one turn and send each result back under its own call id",
            "keep parallel calls apart by their index or id and answer each call id with its own result",
            "Read weather.json and notes/unicode.txt.",
            _parallel(False),
            tools_called=("read_fixture", "read_fixture"),
            requests=2,
        ),
        Stage(
            "stress-interleaved-calls",
            "run both read_fixture calls of one turn, their argument fragments interleaved by index, "
            "and send each result back under its own call id",
            "add each argument fragment to the call its index names, never to the call opened last",
            "Read weather.json and notes/unicode.txt.",
            _parallel(True),
            tools_called=("read_fixture", "read_fixture"),
            requests=2,
            modes=("stream",),
            stress=INTERLEAVED,
        ),
        Stage(
            "tool-error-corrects",
            "send always_error's structured error back as that call's result, then run the corrected "
            "call and finish",
            "send a failed tool's error back as its result (the provider's error marker where it has "
            "one), never drop it or stop on it",
            "Try always_error, then echo_json.",
            _error_corrects,
            tools_called=("always_error", "echo_json"),
            requests=3,
        ),
        Stage(
            "tool-error-insists",
            "stop within max_requests when the model keeps calling a failing tool, and say so with "
            'LoopResult(stopped="budget")',
            "count generation requests and stop at task.max_requests (and task.max_seconds)",
            "Keep trying always_error.",
            _error_insists,
            tools_called=("always_error",),
            budget=True,
        ),
        Stage(
            "cancel",
            "raise the caller's abort reason, run no tool after the abort, and close the connection",
            "pass task.signal to the client and to toolset.execute; on abort raise signal.reason itself "
            "and close the stream",
            "Echo a greeting, slowly.",
            _cancel,
            tools_called=("echo_json",),
            cancel=True,
        ),
        Stage(
            "cancel-in-tool",
            "pass the signal into the running tool, raise the caller's abort reason promptly, and start "
            "no other call and send no further request after the abort",
            "pass task.signal to toolset.execute / aexecute (the tool stops when it fires); on abort "
            "raise signal.reason itself, without running the turn's other calls or asking again",
            "Fetch a value slowly, then echo a greeting.",
            _cancel_in_tool,
            tools_called=("delayed_value", "echo_json"),
            cancel=True,
            abort_in_tool=True,
        ),
        Stage(
            "length-tool-turn",
            "run no call of a turn the provider cut off at its output limit (finish reason length), and "
            "return its text with finish reason length (or raise an error that says so)",
            "look at the finish reason before running a turn's calls: a length turn's calls are cut "
            "off, even where what arrived parses; return LoopResult(text, 'length')",
            "Echo a long greeting.",
            _length,
            tools_called=("echo_json",),
            requests=1,
            may_stop=True,
        ),
        Stage(
            "content-filter-turn",
            "stop cleanly when the provider's content filter ends a turn mid-conversation: return "
            "LoopResult with finish reason content_filter (or refusal), or raise an error that says "
            "so, asking nothing more",
            "a content_filter (or refusal) finish ends the conversation: return it, never retry it "
            "or run anything more",
            "Echo a greeting, then comment on it.",
            _filtered,
            tools_called=("echo_json",),
            requests=2,
            may_stop=True,
        ),
        Stage(
            "calls-with-stop",
            "run the calls of a turn whose finish reason says stop, as the provider sends it there, and "
            "send their results back",
            "decide whether to run calls by the calls present, not by the finish reason: some "
            "providers end a tool turn with stop",
            "Echo a greeting.",
            _calls_with_stop,
            tools_called=("echo_json",),
            requests=2,
        ),
        Stage(
            "large-result",
            "send a large tool result back whole, or cut to the loop's declared max_result_chars",
            "declare max_result_chars on the target when the loop cuts results, and cut to a prefix",
            "Read large.txt.",
            _one_call("read_fixture", {"path": "large.txt"}),
            tools_called=("read_fixture",),
            requests=2,
        ),
        Stage(
            "empty-result",
            "send an empty file's result back as that call's result",
            "send every result back, even one whose content is empty",
            "Read empty.txt.",
            _one_call("read_fixture", {"path": "empty.txt"}),
            tools_called=("read_fixture",),
            requests=2,
        ),
        Stage(
            "non-ascii-result",
            "send a result with characters of one to four UTF-8 bytes back unaltered",
            "keep tool results as text end to end; never encode them to ASCII or decode per chunk",
            "Read notes/unicode.txt.",
            _one_call("read_fixture", {"path": "notes/unicode.txt"}),
            tools_called=("read_fixture",),
            requests=2,
        ),
        Stage(
            "error-result",
            "send a tool's structured error (read_fixture of a missing file) back as that call's result",
            "send ToolResult.error back (the provider's error marker where it has one), not a bare text",
            "Read missing.txt.",
            _one_call("read_fixture", {"path": "missing.txt"}),
            tools_called=("read_fixture",),
            requests=2,
        ),
        Stage(
            "reasoning",
            "send the reasoning of the model's tool turn back with it, byte for byte, signature included",
            "build the next request's assistant turn with Message.from_response (or keep "
            "ChatResponse.reasoning / StreamChunk.reasoning and each call's reasoning)",
            "Think, then echo a greeting.",
            _reasoning,
            tools_called=("echo_json",),
            reasoning=True,
            requests=2,
        ),
    )
}


# The fault stages, placed at protocol events, follow the stages above.
from .faults import FAULT_STAGES  # noqa: E402 - they are built from Stage and Step

STAGES.update(FAULT_STAGES)


#: The opt-in stress stages, by name: what no provider sends, run only where a target asks.
STRESS_STAGES: Tuple[str, ...] = tuple(name for name, row in STAGES.items() if row.stress)


def reasoning_for(wire: Wire) -> Optional[Tuple[Tuple[Reasoning, ...], Tuple[Reasoning, ...]]]:
    """The reasoning ``wire``'s model carries on a tool turn, (the turn's, the call's), or ``None``
    where it carries none: the wire's own ``turn_reasoning`` and ``call_reasoning``, as the
    backend suite's ``tool-result`` case uses them."""
    if not (wire.turn_reasoning or wire.call_reasoning):
        return None
    return tuple(wire.turn_reasoning), tuple(wire.call_reasoning)


def check_stage_keys(skip: Mapping[str, str], where: str) -> None:
    """Every key of an agent-loop target's ``skip`` names a stage or a stage/mode, with a reason.

    A key ``replay/<conversation>`` (or ``replay/<conversation>/<mode>``) names a replayed
    conversation, which only the target's recordings know; it is taken as given.
    """
    known = [*STAGES, *(f"{s}/{m}" for s, row in STAGES.items() for m in row.modes)]
    for key, reason in skip.items():
        if key not in known and not (key.startswith("replay/") and len(key) > len("replay/")):
            import difflib  # only on the way to an error

            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}?" if close else f"the stages: {', '.join(STAGES)}"
            raise TargetDefinitionError(f"{where}: unknown stage {key!r} in skip; {hint}")
        if not isinstance(reason, str) or not reason.strip():
            raise TargetDefinitionError(
                f"{where}: skip[{key!r}] needs a reason, the sentence a reader sees beside the skipped "
                f"case, got {reason!r}"
            )


def stage_names() -> List[str]:
    """The stages in table order."""
    return list(STAGES)
