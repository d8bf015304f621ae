"""A stream or body broken before its end: cut short of the terminal event, or a damaged frame.

A cut is a failure, never a short success: a retryable error of a kind a careful
client derives from the cut (its variant's ``error_kinds``; where a variant names none,
:data:`~conformance.wires._variants.CUT_KINDS`, what a cut that carries no status
allows), with no finish reason and no tool call yielded before it, also where the
finish reason came and only the terminal event did not, and also where the response
ended properly (:data:`~conformance.wires._variants.CLEAN_ENDS`): only the terminal
event ends a turn. A frame whose checksum fails is
an error too.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..contract import ERROR_KINDS
from ..wires._variants import BY_LENGTH, CLEAN_ENDS
from ._seen import MISSING, Check, Seen, describe, value_of

__all__ = ["ROWS"]


def _corrupt_frame(seen: Seen) -> List[str]:
    if seen.scenario != "corrupt-frame" or not seen.ended or seen.error is not None:
        return []
    content = seen.collected()[0]
    return [
        "expected an error once the damaged frame arrived, got a normal end after the text "
        f"{content!r} (the frame's checksum was not checked)"
    ]


def _cut_kinds(seen: Seen) -> Tuple[str, ...]:
    """The kinds the backend may give this cut: its shape's, else what any cut allows."""
    return seen.rule.error_kinds


def _cut_error(seen: Seen) -> Optional[BaseException]:
    """The error a backend raised for a cut stream or body, if it raised one."""
    if seen.scenario != "stream-cut" or not seen.ended:
        return None
    return seen.error


def _cut_raised(seen: Seen) -> List[str]:
    if seen.scenario != "stream-cut" or not seen.ended or seen.error is not None:
        return []
    if seen.case.mode == "stream":
        content = seen.collected()[0]
        if seen.variant.name in CLEAN_ENDS:
            framing = (
                "at the content-length it named"
                if seen.variant.name in BY_LENGTH
                else "with the chunked encoding's last chunk, or h2 END_STREAM"
            )
            how = (
                f"the response ended properly ({framing}: no transport error) before "
                f"{seen.wire.terminal_event}"
            )
            fix = "only the terminal event ends a turn, not the end of the body"
        else:
            how = f"the connection closed before {seen.wire.terminal_event}"
            fix = "a cut stream is a failure, never a short success"
        return [
            f"expected a retryable error once {how}, got a normal end after "
            f"{len(seen.outcome.chunks)} chunks (text {content!r}): {fix}"
        ]
    return [
        "expected a retryable error for a body cut short of its Content-Length, got the reply "
        f"{seen.outcome.response!r}"
    ]


def _cut_retryable(seen: Seen) -> List[str]:
    error = _cut_error(seen)
    if error is None or getattr(error, "retryable", None) is True:
        return []
    return [
        f"expected retryable True on the error for a connection cut short (the same request may well "
        f"succeed), got {describe(error)}"
    ]


def _cut_kind(seen: Seen) -> List[str]:
    error = _cut_error(seen)
    if error is None:
        return []
    kinds = _cut_kinds(seen)
    kind, code = getattr(error, "kind", MISSING), getattr(error, "code", MISSING)
    if kind in kinds and code == ERROR_KINDS[kind].code:
        return []
    wanted = " or ".join(f"{k!r} ({ERROR_KINDS[k].code})" for k in kinds)
    return [
        f"expected an error of kind {wanted}, got {describe(error)}: a cut carries no status or "
        "error type, so either is what a careful client derives, and no other kind"
    ]


def _cut_finish(seen: Seen) -> List[str]:
    if seen.scenario not in ("stream-cut", "stall") or seen.case.mode != "stream":
        return []
    for index, chunk in enumerate(seen.outcome.chunks):
        reason = getattr(chunk, "finish_reason", None)
        if reason is not None:
            return [
                f"expected no finish reason before the error, got {value_of(reason)!r} on chunk {index}: "
                f"the turn never reached {seen.wire.terminal_event}, so it did not finish"
            ]
    return []


def _cut_tool_call(seen: Seen) -> List[str]:
    if seen.scenario not in ("stream-cut", "stall") or seen.case.mode != "stream":
        return []
    for index, chunk in enumerate(seen.outcome.chunks):
        calls = list(getattr(chunk, "tool_calls", None) or ())
        if calls:
            return [
                f"expected no tool call before the error, got {calls!r} on chunk {index}: a call is "
                f"complete only once the turn reached {seen.wire.terminal_event}"
            ]
    return []


#: This family's rows of :data:`~conformance._checks.CHECKS`.
ROWS: Dict[str, Check] = {
    "corrupt-frame": _corrupt_frame,
    "cut-raised": _cut_raised,
    "cut-retryable": _cut_retryable,
    "cut-kind": _cut_kind,
    "cut-finish": _cut_finish,
    "cut-tool-call": _cut_tool_call,
}
