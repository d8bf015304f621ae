"""What a Chat Completions request must carry: the question, ``get_weather`` as a
function tool, and on a stream ``stream_options.include_usage`` (without it OpenAI
reports no usage).

Each problem is one sentence saying what was expected and what came.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List

from .._request import check_function_tool, check_json_post, check_question, text_of

if TYPE_CHECKING:
    from ...provider.replies import RecordedRequest

__all__ = ["check_body", "check_request"]


def check_request(request: RecordedRequest, model: str) -> List[str]:
    """Problems with the generation request: method, path, model, question, tool, usage on a stream."""
    problems, body = check_json_post(request, model, "/v1/chat/completions")
    if not body:
        return problems
    return problems + check_body(body)


def check_body(body: Dict[str, Any]) -> List[str]:
    """Problems with a Chat Completions body: the question, the tool, usage asked for on a stream."""
    problems = _check_messages(body.get("messages"))
    problems.extend(check_function_tool(body.get("tools")))
    if body.get("stream") is True:
        options = body.get("stream_options")
        if not (isinstance(options, dict) and options.get("include_usage") is True):
            problems.append(
                "expected stream_options.include_usage true on a streamed request (without "
                f"it OpenAI reports no usage), got stream_options={options!r}"
            )
    return problems


def _check_messages(messages: Any) -> List[str]:
    if not isinstance(messages, list) or not messages:
        return [f"expected messages to be a non-empty list, got {messages!r}"]
    return check_question(messages, text_of)
