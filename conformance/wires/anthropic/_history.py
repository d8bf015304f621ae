"""Anthropic multi-turn, in: the conversation a Messages request carried, read back.

Strategy: the ``system`` field and the ``messages`` (consecutive turns of one role
combined, as the API combines them) are read into the library's normal form, and
every departure from what the Messages API accepts is noted in its own 400 wording:
a ``tool_use`` whose ``tool_result`` does not come first in the next user turn, a
result with no call before it, a thinking block sent back without its signature.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Sequence, Tuple

from ...contract import Message, Reasoning, ToolCall, ToolChoice
from .._content_blocks import BlockHistoryReader
from .._request import text_of
from ._replies import request_id, response_headers

if TYPE_CHECKING:
    from ...provider.replies import JsonReply, RecordedRequest
    from .._script import History

__all__ = ["history_error", "read_history"]

THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


def _choice(raw: Any) -> Optional[ToolChoice]:
    type_ = raw.get("type") if isinstance(raw, dict) else None
    if type_ == "auto":
        return ToolChoice.AUTO
    if type_ == "any":
        return ToolChoice.REQUIRED
    if type_ == "tool" and isinstance(raw.get("name"), str) and raw["name"]:
        return ToolChoice.tool(raw["name"])
    return None


def _result_text(content: Any) -> Optional[str]:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return text_of(content)


def _blocks(content: Any) -> Optional[List[Any]]:
    """A message's content as a list of blocks, or ``None`` where it is neither a string nor a list."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else None


def _merge_consecutive(raw: List[Any]) -> List[Tuple[int, Any]]:
    """The messages with consecutive turns of one role combined, each at its first index.

    The Messages API documents that consecutive ``user`` or ``assistant`` turns are
    combined into a single turn (the ``messages`` parameter of
    https://docs.anthropic.com/en/api/messages), so results sent one ``tool_result``
    per user message answer the turn before as one user turn would. A message that
    cannot be combined (not an object, no content, another role) stays as it is.
    """
    out: List[Tuple[int, Any]] = []
    for index, item in enumerate(raw):
        role = item.get("role") if isinstance(item, dict) else None
        blocks = _blocks(item.get("content")) if isinstance(item, dict) else None
        if out and role in ("user", "assistant") and blocks:
            at, before = out[-1]
            earlier = _blocks(before.get("content")) if isinstance(before, dict) else None
            if isinstance(before, dict) and before.get("role") == role and earlier:
                out[-1] = (at, {**before, "content": [*earlier, *blocks]})
                continue
        out.append((index, item))
    return out


class _HistoryReader(BlockHistoryReader):
    """Reads a Messages request body into the normal form, noting each departure."""

    provider = "anthropic"
    system_shape = "a string or a list of text blocks"

    def __init__(self, body: Mapping[str, Any]) -> None:
        super().__init__(body)
        self.thinking_on = isinstance(body.get("thinking"), dict) and body["thinking"].get("type") in (
            "enabled",
            "adaptive",
        )

    def system_text(self, system: Any) -> Optional[str]:
        if isinstance(system, str):
            return system
        return text_of(system)

    def turns(self, raw: List[Any]) -> List[Tuple[int, Any]]:
        return _merge_consecutive(raw)

    def role(self, index: int, item: Any) -> Optional[str]:
        if not isinstance(item, dict):
            self.problems.append(f"messages.{index}: expected a message object, got {item!r}")
            return None
        role = item.get("role")
        if role == "system":
            self.problems.append(
                'messages: Unexpected role "system". The Messages API accepts a top-level `system` '
                'parameter, not "system" as an input message role.'
            )
            return None
        if role not in ("user", "assistant"):
            self.problems.append(
                f"messages.{index}.role: Input should be 'user' or 'assistant' (got {role!r})"
            )
            return None
        return str(role)

    def has_content(self, index: int, role: str, content: Any, last: bool) -> bool:
        if (content == [] or content == "") and (not last or role != "assistant"):
            self.problems.append(
                f"messages.{index}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
            return False
        return True

    def unanswered(self, asked_at: int, due_at: int, ids: Sequence[str]) -> None:
        self.problems.append(
            f"messages.{asked_at}: `tool_use` ids were found without `tool_result` blocks immediately after: "
            f"{', '.join(ids)}. Each `tool_use` block must have a corresponding `tool_result` block in the "
            "next message."
        )

    def user(self, index: int, content: Any, pending: Sequence[str], pending_at: int) -> None:
        if isinstance(content, str):
            if pending:
                self.unanswered(pending_at, index, pending)
            self.messages.append(Message("user", content))
            return
        if not isinstance(content, list):
            self.problems.append(
                f"messages.{index}.content: expected a string or a list of blocks, got {content!r}"
            )
            return
        answered: List[str] = []
        texts: List[str] = []
        text_first = False
        for number, block in enumerate(content):
            where = f"messages.{index}.content.{number}"
            type_ = block.get("type") if isinstance(block, dict) else None
            if type_ == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
                continue
            if type_ != "tool_result":
                self.problems.append(
                    f"{where}: expected a text or tool_result block in a user message, got {block!r}"
                )
                continue
            if texts:
                text_first = True
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str) or not call_id:
                self.problems.append(f"{where}.tool_result.tool_use_id: Field required")
                continue
            if call_id not in pending:
                self.problems.append(
                    f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {call_id}. Each "
                    "`tool_result` block must have a corresponding `tool_use` block in the previous message."
                )
            answered.append(call_id)
            text = _result_text(block.get("content"))
            if text is None:
                self.problems.append(
                    f"{where}.tool_result.content: expected a string or a list of text blocks, got "
                    f"{block.get('content')!r}"
                )
                text = ""
            is_error = block.get("is_error")
            if is_error is not None and not isinstance(is_error, bool):
                self.problems.append(
                    f"{where}.tool_result.is_error: Input should be a valid boolean, got {is_error!r}"
                )
            self.result(call_id, text, is_error is True)
        missing = [i for i in pending if i not in answered]
        if missing or (pending and text_first):
            # Results must come first in the user turn: text before them counts as no result.
            self.unanswered(pending_at, index, missing or pending)
        self.user_text(texts)

    def assistant(self, index: int, content: Any, final: bool) -> List[str]:
        """Read an assistant turn; ``final`` where no assistant turn follows (the one the
        API holds to ``thinking``: earlier turns' thinking blocks it ignores)."""
        if isinstance(content, str):
            self.messages.append(Message("assistant", content))
            return []
        if not isinstance(content, list):
            self.problems.append(
                f"messages.{index}.content: expected a string or a list of blocks, got {content!r}"
            )
            return []
        texts: List[str] = []
        calls: List[ToolCall] = []
        reasoning: List[Reasoning] = []
        for number, block in enumerate(content):
            where = f"messages.{index}.content.{number}"
            type_ = block.get("type") if isinstance(block, dict) else None
            if type_ == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif type_ == "thinking":
                reasoning.extend(self.thinking_block(where, block))
            elif type_ == "redacted_thinking":
                data = block.get("data")
                if not isinstance(data, str) or not data:
                    self.problems.append(f"{where}.redacted_thinking.data: Field required")
                else:
                    reasoning.append(self.redacted(data))
            elif type_ == "tool_use":
                call = self.tool_use(where, block)
                if call is not None:
                    if call.id in self.names:
                        self.problems.append(f"{where}: `tool_use` ids must be unique (repeated: {call.id})")
                    self.called(call, calls)
            else:
                self.problems.append(
                    f"{where}: expected a text, thinking or tool_use block in an assistant message, "
                    f"got {block!r}"
                )
        if self.thinking_on and final and calls and content:
            head = content[0].get("type") if isinstance(content[0], dict) else None
            if head not in ("thinking", "redacted_thinking"):
                self.problems.append(
                    f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                    f"`{head}`. When `thinking` is enabled, a final `assistant` message must start with a "
                    f"thinking block; include the thinking blocks of the turn as they came ({THINKING_DOCS})"
                )
        return self.assistant_turn(texts, calls, reasoning)

    def thinking_block(self, where: str, block: Mapping[str, Any]) -> List[Reasoning]:
        text, signature = block.get("thinking"), block.get("signature")
        if not isinstance(text, str):
            self.problems.append(f"{where}.thinking.thinking: Field required")
            return []
        if signature is None:
            self.problems.append(
                f"{where}.thinking.signature: Field required (send the thinking block back with its "
                "signature, unaltered)"
            )
            return []
        if not isinstance(signature, str) or not signature:
            self.problems.append(f"{where}.thinking: Invalid `signature` in `thinking` block")
            return []
        return [self.thinking(text, signature)]

    def tool_use(self, where: str, block: Mapping[str, Any]) -> Optional[ToolCall]:
        call_id, name, input_ = block.get("id"), block.get("name"), block.get("input")
        if not isinstance(call_id, str) or not call_id:
            self.problems.append(f"{where}.tool_use.id: Field required")
            return None
        if not isinstance(name, str) or not name:
            self.problems.append(f"{where}.tool_use.name: Field required")
            return None
        if not isinstance(input_, dict):
            hint = " (send the parsed arguments, not their JSON text)" if isinstance(input_, str) else ""
            self.problems.append(f"{where}.tool_use.input: Input should be a valid dictionary{hint}")
            return None
        return ToolCall(call_id, name, input_)


def read_history(request: RecordedRequest, stream: Optional[bool] = None) -> History:
    """The conversation a Messages request carried, in normal form, with every departure.

    ``stream`` is whether it asked for a stream, where a host says so elsewhere than in
    the body's ``"stream": true`` (Bedrock's path).
    """
    reader = _HistoryReader.of(request)
    tools = reader.body.get("tools")
    names = (
        tuple(str(t["name"]) for t in tools if isinstance(t, dict) and "name" in t)
        if isinstance(tools, list)
        else ()
    )
    if stream is None:
        stream = reader.body.get("stream") is True
    return reader.history(names, _choice(reader.body.get("tool_choice")), stream)


def history_error(problems: Sequence[str]) -> JsonReply:
    """Anthropic's 400 ``invalid_request_error`` for a malformed history, quoting the first problem."""
    from ...provider.replies import JsonReply
    from .._script import first_problem

    rid = request_id()
    body = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": first_problem(problems)},
        "request_id": rid,
    }
    return JsonReply(body, status=400, headers=response_headers(rid=rid))
