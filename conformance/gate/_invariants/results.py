"""Results and call ids: each call's result goes back once, under its own call, as the tool made it.

What the requests after a tool turn carried: a history the provider accepts, a result
for every call (and still for every call on the request the model answered last),
each answering its own call and only once, a tool's failure sent back as an error,
and the tool's output unchanged (or a prefix of it, where the loop declares a limit).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from .._conversation import Exchange, PlannedCall, fixture_id_in, same_write
from ..log import ExecutionRecord
from ._seen import Check, LoopProblem, LoopSeen, refusal, value_of

if TYPE_CHECKING:
    from ...contract import Message, ToolResult

__all__ = ["ROWS", "error_accepted", "error_hint", "error_payload", "results_due"]


def check_result_format(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for exchange in seen.refused:
        for problem in exchange.problems:
            problems.append(
                LoopProblem(
                    "result-format",
                    f"request {exchange.index + 1} ({exchange.request}): the provider refuses this history: "
                    + problem,
                    seen.events_of(seen.exchanges[exchange.index - 1]) if exchange.index else "",
                )
            )
    return problems


def results_due(seen: LoopSeen) -> List[Tuple[PlannedCall, Exchange, Optional[Message]]]:
    out = []
    for planned in seen.planned():
        exchange, message = seen.result_of(planned)
        if exchange is not None:
            out.append((planned, exchange, message))
    return out


def check_results(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for planned, exchange, message in results_due(seen):
        if message is None:
            problems.append(
                LoopProblem(
                    "results",
                    f"{seen.label(planned)}: request {exchange.index + 1} carried no result for this call; "
                    "every call the model made needs its result back",
                    seen.events_of(seen.exchanges[planned.exchange]),
                )
            )
    return problems


def check_final_results(seen: LoopSeen) -> List[LoopProblem]:
    """The request the model answered with its final text still carried every result.

    ``results`` looks at the request right after each call; a loop that sends a
    result there, and then (after a dropped reply, say) starts the conversation
    again without the tool turn, gets a final answer the model made without it.
    A call whose result ``results`` already found missing is its problem alone.
    """
    stage = seen.stage
    if stage.budget or stage.cancel or not seen.finished_cleanly:
        return []
    if value_of(seen.outcome.result.stopped) != "done":
        return []
    final = seen.exchanges[-1] if seen.exchanges else None
    if final is None or final.history is None or final.turn is None or final.turn.calls:
        return []
    present = {p for p, message in seen.conversation.correlate(final.history) if message is not None}
    problems = []
    for planned in seen.planned():
        if planned in present or planned.exchange >= final.index:
            continue
        exchange, message = seen.result_of(planned)
        if exchange is None or message is None or exchange is final:
            continue  # never sent, or not where it was due: results says so
        problems.append(
            LoopProblem(
                "final-results",
                f"{seen.label(planned)}: request {exchange.index + 1} sent its result back, but request "
                f"{final.index + 1}, the one the model answered with its final text, carried no result "
                "for it, so that answer was made without the tool's output; when a request fails, send "
                "the same conversation again (the tool turn and its results), never a new one without them",
                seen.events_of(final),
            )
        )
    return problems


def check_call_ids(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for planned, exchange, message in results_due(seen):
        if message is None or message.tool_result is None or refusal(planned) is not None:
            continue  # a refused call's result is refused-call's
        # A result under another tool's name never gets this far on a shipped wire: Gemini
        # refuses it (result-format), Ollama pairs results by name (results), the others
        # carry no name with a result.
        result = message.tool_result
        fixture = fixture_id_in(result.content)
        if fixture is None:
            continue
        own = seen.records_for(planned)
        record = next((r for r in seen.records if r.fixture_id == fixture), None)
        abort_at = seen.outcome.abort_at
        if record is not None and abort_at is not None and record.started >= abort_at:
            continue  # a run begun after the abort: after-cancel's
        if record is not None and record not in own and not same_write(record, planned.call):
            problems.append(
                LoopProblem(
                    "call-ids",
                    f"{seen.label(planned)}: request {exchange.index + 1} answered it with {fixture}, "
                    "the result of "
                    f"{record.tool} {record.call_id}; each result must answer its own call",
                )
            )
    return problems


def check_duplicate_results(seen: LoopSeen) -> List[LoopProblem]:
    if not seen.case.target.wire.sends_call_ids:
        return []
    problems = []
    for exchange in seen.exchanges:
        if exchange.history is None or exchange.problems:
            continue  # a refused history is result-format's
        ids = [m.tool_result.call_id for m in exchange.history.results if m.tool_result is not None]
        ids = [i for i in ids if i]  # a result without an id answers no call twice
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            problems.append(
                LoopProblem(
                    "duplicate-results",
                    f"request {exchange.index + 1}: more than one result for call {', '.join(repeated)}; "
                    "send each call's result once",
                )
            )
    return problems


def check_result_count(seen: LoopSeen) -> List[LoopProblem]:
    """Without call ids (Ollama), no call answered twice: no more results of a tool after a
    turn than the turn's calls to it, since each result answers the next call to its tool."""
    if seen.case.target.wire.sends_call_ids:
        return []  # a call id answered twice is call-ids'
    problems: List[LoopProblem] = []
    told = set()
    for exchange in seen.exchanges:
        if exchange.history is None or exchange.problems:
            continue
        messages = exchange.history.messages
        turn = 0
        for at, message in enumerate(messages):
            if message.role != "assistant" or not message.tool_calls:
                continue
            turn += 1
            results = []
            for after in messages[at + 1 :]:
                if after.role != "tool" or after.tool_result is None:
                    break
                results.append(after.tool_result)
            called = [c.name for c in message.tool_calls]
            for name in sorted(set(called) | {r.name for r in results if r.name}):
                made, sent = called.count(name), sum(1 for r in results if r.name == name)
                if sent > made and (turn, name) not in told:
                    told.add((turn, name))
                    problems.append(
                        LoopProblem(
                            "result-count",
                            f"request {exchange.index + 1}: assistant turn {turn} called {name} {made} "
                            f"time(s) and {sent} results for {name} followed it; "
                            f"{seen.case.target.wire.name} sends no call ids, so each result answers the "
                            "next call to its tool, and the extra one answers none: send one result per call",
                        )
                    )
    return problems


def _record_of(seen: LoopSeen, planned: PlannedCall, content: str) -> Optional[ExecutionRecord]:
    fixture = fixture_id_in(content)
    if fixture is not None:
        for record in seen.records:
            if record.fixture_id == fixture:
                return record
    records = seen.records_for(planned)
    return records[0] if records else None


def error_payload(result: ToolResult) -> Optional[Any]:
    """The error ``result`` went back as, or ``None`` where it went back as plain output.

    The wire's own error marker (Anthropic ``is_error``, Bedrock ``status: "error"``,
    Gemini ``response.error``) or any JSON result whose top level carries an error:
    an object, a list of errors or a message under ``error``, as ``ToolResult.text``
    writes one and as frameworks write theirs (pydantic-ai sends a validation
    failure as ``{"error": [{"type", "loc", "msg"}, ...]}`` and an unknown tool as
    ``{"error": "..."}``). No code is asked for: the error's shape is the loop's.
    """
    if result.error is not None:
        return result.error.as_dict()
    try:
        data = json.loads(result.content)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, (dict, list)) and error:
        return error
    if isinstance(error, str) and error.strip():
        return error
    return None


def error_accepted(seen: LoopSeen, result: ToolResult) -> bool:
    """Whether ``result`` went back as an error: a structured one, or, where the target
    declares ``error_results="text"`` and the wire has no error marker, any text that
    is not a tool's output (it carries no fixture id)."""
    if error_payload(result) is not None:
        return True
    target = seen.case.target
    return (
        target.error_results == "text"
        and not target.wire.marks_tool_errors
        and bool(result.content.strip())
        and fixture_id_in(result.content) is None
    )


def error_hint(seen: LoopSeen) -> str:
    wire = seen.case.target.wire
    if wire.marks_tool_errors:
        return f"mark it as an error ({wire.tool_error_marker}) or send JSON with a top-level \"error\""
    return (
        'send JSON with a top-level "error" (ToolResult.text does); a framework that sends errors '
        'as plain text declares error_results="text" on its target'
    )


def check_error_result(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    for planned, exchange, message in results_due(seen):
        if message is None or message.tool_result is None:
            continue
        record = _record_of(seen, planned, message.tool_result.content)
        if record is None or record.error is None:
            continue
        result = message.tool_result
        if not error_accepted(seen, result):
            problems.append(
                LoopProblem(
                    "error-result",
                    f"{seen.label(planned)}: the tool failed with {record.error.code!r}; request "
                    f"{exchange.index + 1} sent back {result.content[:120]!r} as if it were the tool's "
                    f"output; {error_hint(seen)}",
                )
            )
    return problems


def _differ(a: str, b: str) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def check_result_content(seen: LoopSeen) -> List[LoopProblem]:
    problems = []
    limit = seen.case.target.max_result_chars
    for planned, exchange, message in results_due(seen):
        if message is None or message.tool_result is None:
            continue
        result = message.tool_result
        record = _record_of(seen, planned, result.content)
        if record is None or record.error is not None or result.is_error:
            continue
        expected, sent = record.result.text, result.content
        ok = sent == expected if limit is None else expected.startswith(sent)
        if not ok:
            at = _differ(expected, sent)
            how = "the tool's output" if limit is None else "a prefix of the tool's output"
            problems.append(
                LoopProblem(
                    "result-content",
                    f"{seen.label(planned)}: request {exchange.index + 1} sent back a result that is "
                    f"not {how}: "
                    f"from character {at}, expected {expected[at : at + 24]!r}, got {sent[at : at + 24]!r}",
                )
            )
    return problems


def check_result_size(seen: LoopSeen) -> List[LoopProblem]:
    limit = seen.case.target.max_result_chars
    if limit is None:
        return []
    problems = []
    for planned, exchange, message in results_due(seen):
        if message is None or message.tool_result is None:
            continue
        size = len(message.tool_result.content)
        if size > limit:
            problems.append(
                LoopProblem(
                    "result-size",
                    f"{seen.label(planned)}: request {exchange.index + 1} sent back {size} characters; "
                    "the loop "
                    f"declares max_result_chars={limit}",
                )
            )
    return problems


#: This family's rows of :data:`~conformance.gate._invariants.INVARIANTS`, in the order they run.
ROWS: Dict[str, Check] = {
    "result-format": check_result_format,
    "results": check_results,
    "final-results": check_final_results,
    "call-ids": check_call_ids,
    "result-count": check_result_count,
    "duplicate-results": check_duplicate_results,
    "error-result": check_error_result,
    "result-content": check_result_content,
    "result-size": check_result_size,
}
