"""The fault stages: the provider breaks a conversation at a protocol event.

Strategy: a fault stage is a row of the same stage table, whose script marks the
request it breaks (``Step.fault``, a name of
:data:`~conformance.gate._fault_replies.FAULT_REPLIES`); the conversation then
answers that request with the fault instead of the model's turn. Faults are placed
at protocol events, never at byte counts: right after the event that carried a
call's first argument fragment, right after the one that carried its last (before
the turn's end event), inside that first event's bytes, or on the request that
carries the results of a tool the loop already ran. A stream fault exists only in
stream mode; the others in both. After a broken stream the model, asked again,
makes the call anew (a new response, so a new call id); after a broken request that
carried results it answers with its final text, but in the ambiguous retry, where it
repeats a write under a new id. Every fault is bounded: no pause is longer than the
429's 0.2 s, the timeout stage's budget is 0.6 s, and the storm of 429s ends after the
request budget and two more.

Three stages break the model's turn itself rather than the transport: it calls a
tool the task lacks, writes a call's arguments as broken JSON on a turn that ends
normally, or writes them as a JSON object the tool's schema forbids. A backend hands
the loop the broken call with ``ToolCall.unparsed_arguments``; where the provider
never delivers such a call (Gemini, Ollama; Anthropic and Bedrock in a whole reply,
whose ``input`` is an object) that stage is skipped with the reason.

What the loop must do at each fault is checked by the fault invariants (in
``_invariants.recovery``): ``partial-call``, ``re-executed``, ``write-once``, ``retry-wait``,
``refused-call`` and ``recovered``, with ``arguments-schema`` and ``error-message``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Callable, Dict, Optional, Tuple

from ..wires._turns import ScriptedTurn
from ._fault_replies import RATE_LIMIT_RETRY_AFTER, scripting_wire

if TYPE_CHECKING:
    from ..provider.replies import RecordedRequest
    from ..wires._base import Wire
    from ._stage import Stage, Step

__all__ = [
    "CORRUPT_ARGUMENTS",
    "CUT_FRAGMENTS",
    "FAULT_STAGES",
    "INVALID_ARGUMENTS",
    "RATE_LIMIT_RETRY_AFTER",
    "RETRY_AFTER_BUDGET",
    "TIMEOUT_BUDGET",
    "UNKNOWN_TOOL",
    "WRITE_ARGUMENTS",
    "fault_skip",
    "raw_arguments_reach",
]

#: The tool the unknown-tool stage's model calls: close to ``read_fixture``, as a
#: model's slip is, and not one of the task's tools.
UNKNOWN_TOOL = "read_file"
#: The retry-after stage's ``max_seconds``: room for the budget's four requests and the
#: three waits between them, and short enough that a loop that ignores the request
#: budget runs into it.
RETRY_AFTER_BUDGET = 2.0
#: The timeout stage's ``max_seconds``: the loop's deadline, short so the stage stays quick.
TIMEOUT_BUDGET = 0.6

#: The cut streams' ``echo_json`` fragments: the first alone, its open string, array
#: and object closed, is a valid call (what a partial-JSON parser would make of it).
CUT_FRAGMENTS = ('{"text": "gate", "count": 2, "tags": ["a"', ', "b"', "]}")
_ARGUMENTS = "".join(CUT_FRAGMENTS)

#: The corrupt-arguments stage's ``echo_json`` call, in the fragments a stream sends: the
#: model stopped writing inside a string, the array and the object left open. Closed,
#: it would be a valid call; a loop that repairs broken JSON runs it.
CORRUPT_FRAGMENTS = ('{"text": "gate", ', '"count": 2, "tags": ', '["a", "b')
CORRUPT_ARGUMENTS = "".join(CORRUPT_FRAGMENTS)

#: The invalid-arguments stage's ``echo_json`` call: a JSON object, as a model writes
#: one, whose ``count`` is a string where the schema asks for an integer.
INVALID_ARGUMENTS = '{"text": "gate", "count": "two", "tags": ["a", "b"]}'

def _cut_stream(fault: str) -> Callable[[Step], ScriptedTurn]:
    def script(step: Step) -> ScriptedTurn:
        if step.index == 0:
            step.fault = fault
            return step.turn(step.call("echo_json", _ARGUMENTS, fragments=CUT_FRAGMENTS))
        if step.index == 1:
            return step.turn(step.call("echo_json", _ARGUMENTS))
        return step.final()

    return script


def _after_execution(fault: str, every: bool = False) -> Callable[[Step], ScriptedTurn]:
    def script(step: Step) -> ScriptedTurn:
        if step.index == 0:
            return step.turn(step.call("echo_json", _ARGUMENTS))
        if step.index == 1 or every:
            step.fault = fault
        return step.final()

    return script


def _storm(step: Step) -> ScriptedTurn:
    # Past the budget and two more, the provider relents, so a loop that never stops still ends.
    if step.index < step.max_requests + 2:
        step.fault = "rate-limit"
    return ScriptedTurn(text="The storm has passed.", seed=f"gate/{step.stage}/{step.index}")


#: The ambiguous-retry stage's write: the same arguments on the model's first call and its repeat.
WRITE_ARGUMENTS = {"idempotency_key": "order-7f3a-ship", "record": "ship order 7f3a"}


def _ambiguous(step: Step) -> ScriptedTurn:
    if step.index in (0, 2):
        # The repeat is a new turn of the model's: a new response, so a new call id.
        return step.turn(step.call("append_record", WRITE_ARGUMENTS))
    if step.index == 1:
        step.fault = "drop-reset"
    return step.final()


def _refused(name: str, arguments: str, fragments: Tuple[str, ...] = ()) -> Callable[[Step], ScriptedTurn]:
    def script(step: Step) -> ScriptedTurn:
        if step.index == 0:
            return step.turn(step.call(name, arguments, fragments=fragments))
        return step.final()

    return script


def _rows() -> Dict[str, Stage]:
    from ._stage import Stage

    stream_only = ("stream",)
    rows = []
    for end, how in (("close", "closes cleanly"), ("reset", "resets")):
        rows += [
            Stage(
                f"{end}-after-first-fragment",
                "run no tool on a call whose stream broke after its first argument fragment, then recover "
                "or stop with a useful error within budget",
                "take a call only once its turn has ended (the provider's done event, finish reason, "
                "message_stop); on a broken stream drop what it carried, then retry or raise",
                "Echo a greeting.",
                _cut_stream(f"{end}-after-first"),
                tools_called=("echo_json",),
                modes=stream_only,
                fault=f"the stream {how} right after the call's first argument event",
                may_stop=True,
            ),
            Stage(
                f"{end}-after-last-fragment",
                "run no tool on a call whose stream broke after its last argument fragment but before the "
                "turn's end event, then recover or stop with a useful error within budget",
                "a call whose arguments are all there is still partial until its turn ends; retrying "
                "after running it runs it twice",
                "Echo a greeting.",
                _cut_stream(f"{end}-after-last"),
                tools_called=("echo_json",),
                modes=stream_only,
                fault=f"the stream {how} right after the call's last argument event, before the turn's end",
                may_stop=True,
            ),
            Stage(
                f"{end}-mid-event",
                "run no tool when the stream broke inside an event's bytes, then recover or stop with a "
                "useful error within budget",
                "never parse or act on an event that did not arrive whole; treat the broken stream as "
                "a failed request",
                "Echo a greeting.",
                _cut_stream(f"{end}-mid-event"),
                tools_called=("echo_json",),
                modes=stream_only,
                fault=f"the connection {how} inside the bytes of the call's first argument event",
                may_stop=True,
            ),
            Stage(
                f"{end}-after-execution",
                "not run a tool again when the request carrying its result got no response and is retried",
                "key executions by an idempotency key (the call id) and, on a retry, send the results "
                "already made; never run the turn's calls again",
                "Echo a greeting.",
                _after_execution(f"drop-{end}"),
                tools_called=("echo_json",),
                fault=f"the request carrying the result is answered with nothing: the connection {how}",
                may_stop=True,
            ),
        ]
    rows += [
        Stage(
            "rate-limited",
            "wait out a 429's retry-after on the request carrying a result and recover, or stop with a "
            "useful error within budget, never running the tool again",
            "read the provider's retry delay (retry-after, retry-after-ms, RetryInfo), wait it out "
            "within task.max_seconds, and send the same request again",
            "Echo a greeting.",
            _after_execution("rate-limit"),
            tools_called=("echo_json",),
            fault=f"the request carrying the result gets the wire's own 429, asking for "
            f"{RATE_LIMIT_RETRY_AFTER} s",
            may_stop=True,
        ),
        Stage(
            "ambiguous-retry",
            "land the write append_record makes at most once per idempotency key, when the request "
            "carrying its result got no response and the model, asked again, repeats the call under "
            "a new call id",
            "a write (a tool whose schema has idempotency_key) runs at most once per key in a task: "
            "key it by tool and idempotency_key (conformance.gate.write_key), and answer a repeat "
            "with the first run's result under the new call id",
            "Record that order 7f3a ships.",
            _ambiguous,
            tools_called=("append_record", "append_record"),
            fault="the request carrying append_record's result is answered with nothing (the "
            "connection is reset); asked again, the model repeats the call, same arguments, new id",
            may_stop=True,
            extra_tools=("append_record",),
        ),
        Stage(
            "retry-after",
            "wait at least the retry delay each 429 asks for before asking again, and stop within "
            "task.max_requests (and max_seconds) when the 429s keep coming",
            "read the provider's retry delay (retry-after, retry-after-ms, RetryInfo) and wait it out "
            "before the next request; count every retry in max_requests and give up with the error",
            "Say something about the weather.",
            _storm,
            fault=f"every request gets the wire's own 429, asking for {RATE_LIMIT_RETRY_AFTER} s",
            may_stop=True,
            max_seconds=RETRY_AFTER_BUDGET,
        ),
        Stage(
            "timeout",
            f"stop within task.max_seconds ({TIMEOUT_BUDGET} s here) when the provider never answers, with "
            'a useful error or LoopResult(stopped="budget"), never running the tool again',
            "bound each request by what is left of task.max_seconds, and stop (or raise an error that "
            "says it timed out) when it runs out",
            "Echo a greeting.",
            _after_execution("hang", every=True),
            tools_called=("echo_json",),
            fault="every request after the tool ran is never answered",
            may_stop=True,
            max_seconds=TIMEOUT_BUDGET,
        ),
        Stage(
            "unknown-tool",
            f"never run a call to a tool the task does not have ({UNKNOWN_TOOL}); send a structured error "
            "back as its result and carry on",
            'answer a call to an unknown tool with ToolResult(error=ToolError("unknown_tool", ...)); '
            "never map it to a tool with a similar name",
            "Read weather.json.",
            _refused(UNKNOWN_TOOL, json.dumps({"path": "weather.json"})),
            tools_called=(UNKNOWN_TOOL,),
            requests=2,
            fault=f"the model calls {UNKNOWN_TOOL}, which the task does not offer",
        ),
        Stage(
            "corrupt-arguments",
            "never run a call whose arguments are not a JSON object (the turn ended normally); send a "
            "structured error back as its result and carry on",
            "answer a call with unparsed_arguments (JSON that did not parse) with "
            'ToolResult(error=ToolError("invalid_arguments", ...)); never repair the JSON or run it '
            "with empty arguments",
            "Echo a greeting.",
            _refused("echo_json", CORRUPT_ARGUMENTS, CORRUPT_FRAGMENTS),
            tools_called=("echo_json",),
            requests=2,
            fault="the model writes echo_json's arguments as broken JSON (an open string, array and "
            "object) on a turn that ends normally",
        ),
        Stage(
            "invalid-arguments",
            "never run a call whose arguments break its tool's schema (count is a string); send a "
            "structured error back as its result and carry on",
            "validate each call's arguments against its tool's schema before executing it, and answer "
            'a call that fails with ToolResult(error=ToolError("invalid_arguments", ...))',
            "Echo a greeting twice.",
            _refused("echo_json", INVALID_ARGUMENTS),
            tools_called=("echo_json",),
            requests=2,
            fault='the model writes echo_json\'s "count" as a string, which its schema types as an integer',
        ),
    ]
    return {row.name: row for row in rows}


def raw_arguments_reach(wire: Wire, stream: bool) -> bool:
    """Whether argument text that is not a JSON object can reach a loop on ``wire`` (in a stream
    or a whole reply): where it cannot, the provider carries arguments as an object."""
    return ("stream" if stream else "chat") not in wire.argument_text_absent


def fault_skip(stage: Stage, wire: Wire, mode: str) -> Optional[str]:
    """Why ``wire`` cannot play ``stage``'s fault in ``mode``, or ``None``."""
    if stage.name in ("rate-limited", "retry-after"):
        absent = scripting_wire(wire).absent("rate-limit")
        if absent:
            return f"{wire.name} has no rate-limit reply: {absent}"
    if stage.name == "corrupt-arguments" and mode in wire.argument_text_absent:
        # The wire knows where its provider carries arguments as objects, never as text.
        why = wire.argument_text_absent[mode]
        return f"no corrupt call reaches a loop on {wire.name} in {mode} mode: {why}"
    return None


def fault_unasked(stage: Stage, wire: Wire, request: RecordedRequest) -> str:
    """Why the provider would never send ``stage``'s fault to ``request``; empty where it may.

    The broken argument JSON of ``corrupt-arguments`` is the backend suite's shape of that
    name: where every one of the wire's shapes needs the request to ask for something
    (Anthropic's fine-grained tool streaming: without it the API buffers and validates
    the JSON), a loop whose request does not ask never meets it, and is not held to it.
    """
    if stage.name != "corrupt-arguments":
        return ""
    shapes = wire.variants("corrupt-arguments", "stream" if wire.wants_stream(request) else "chat")
    reasons = [wire.unasked(shape, request) for shape in shapes]
    return reasons[0] if reasons and all(reasons) else ""


FAULT_STAGES: Dict[str, Stage] = _rows()
