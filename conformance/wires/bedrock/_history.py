"""Bedrock multi-turn, in: the conversation a Converse request carried, read back.

Strategy: the ``system`` blocks and the ``messages`` are read into the library's
normal form, and every departure from what Converse accepts is noted in AWS's own
400 wording: a conversation that does not start with a user turn or does not
alternate, a ``toolUse`` whose ``toolResult`` does not come in the next user turn,
reasoning sent back without its signature.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Sequence, Tuple

from ...contract import Reasoning, ToolCall, ToolChoice
from .._chunks import dumps
from .._content_blocks import BlockHistoryReader
from ._replies import response_headers
from ._request import blocks_text
from ._variants import ERROR_NAMESPACE

if TYPE_CHECKING:
    from ...provider.replies import JsonReply, RecordedRequest
    from .._script import History

__all__ = ["history_error", "read_history"]

#: The 400 Bedrock answers a history that does not start with a user turn.
FIRST_USER = (
    "A conversation must start with a user message. Try again with a conversation that starts "
    "with a user message."
)
#: The 400 Bedrock answers two turns of the same role in a row.
ALTERNATE = (
    "A conversation must alternate between user and assistant roles. Make sure the conversation "
    "alternates between user and assistant roles and try again."
)


def _choice(tool_config: Any) -> Optional[ToolChoice]:
    raw = tool_config.get("toolChoice") if isinstance(tool_config, dict) else None
    if not isinstance(raw, dict) or len(raw) != 1:
        return None
    if "auto" in raw:
        return ToolChoice.AUTO
    if "any" in raw:
        return ToolChoice.REQUIRED
    name = raw["tool"].get("name") if isinstance(raw.get("tool"), dict) else None
    return ToolChoice.tool(name) if isinstance(name, str) and name else None


def _tool_names(tool_config: Any) -> Tuple[str, ...]:
    tools = tool_config.get("tools") if isinstance(tool_config, dict) else None
    if not isinstance(tools, list):
        return ()
    specs = [t.get("toolSpec") for t in tools if isinstance(t, dict)]
    return tuple(str(s["name"]) for s in specs if isinstance(s, dict) and isinstance(s.get("name"), str))


def _result_text(content: Any) -> Optional[str]:
    """A toolResult's content as text: its ``text`` blocks, ``json`` blocks as compact JSON."""
    if not isinstance(content, list):
        return None
    parts: List[str] = []
    for block in content:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(block, dict) and "json" in block:
            parts.append(dumps(block["json"]))
        else:
            return None
    return "".join(parts)


def _null(path: str) -> str:
    # The wording of AWS's request validation, whose member paths count from 1.
    return (
        f"1 validation error detected: Value null at '{path}' failed to satisfy constraint: "
        "Member must not be null"
    )


class _HistoryReader(BlockHistoryReader):
    """Reads a Converse request body into the normal form, noting each departure."""

    provider = "bedrock"
    system_shape = 'a list of {"text": ...} blocks'
    # Converse's system is an optional list with no minimum length; boto3 users' libraries
    # (pydantic-ai's BedrockConverseModel, langchain-aws's ChatBedrockConverse) send [] for
    # a conversation with no system prompt.
    empty_system = True

    def system_text(self, system: Any) -> Optional[str]:
        return blocks_text(system)

    def role(self, index: int, item: Any) -> Optional[str]:
        role = item.get("role") if isinstance(item, dict) else None
        if role not in ("user", "assistant"):
            self.problems.append(
                f"1 validation error detected: Value {role!r} at 'messages.{index + 1}.member.role' "
                "failed to satisfy constraint: Member must satisfy enum value set: [user, assistant]"
            )
            return None
        return str(role)

    def has_content(self, index: int, role: str, content: Any, last: bool) -> bool:
        if not isinstance(content, list) or not content:
            self.problems.append(
                f"messages.{index}.content: expected a non-empty list of content blocks, got {content!r}"
            )
            return False
        return True

    def check_roles(self, raw: List[Any]) -> None:
        roles = [m.get("role") if isinstance(m, dict) else None for m in raw]
        if roles and roles[0] != "user" and roles[0] in ("user", "assistant"):
            self.problems.insert(0, FIRST_USER)
        if any(a == b and a in ("user", "assistant") for a, b in zip(roles, roles[1:])):
            self.problems.insert(0, ALTERNATE)

    def unanswered(self, asked_at: int, due_at: int, ids: Sequence[str]) -> None:
        self.problems.append(
            f"Expected toolResult blocks at messages.{due_at}.content for the following Ids: {', '.join(ids)}"
        )

    def user(self, index: int, content: Any, pending: Sequence[str], pending_at: int) -> None:
        texts: List[str] = []
        answered: List[str] = []
        for number, block in enumerate(content):
            where = f"messages.{index + 1}.member.content.{number + 1}.member"
            members = list(block) if isinstance(block, dict) else []
            if members == ["text"] and isinstance(block["text"], str):
                texts.append(block["text"])
                continue
            if members != ["toolResult"] or not isinstance(block["toolResult"], dict):
                self.problems.append(
                    f"messages.{index}.content.{number}: expected a content block with one member, text or "
                    f"toolResult, in a user message, got {block!r}"
                )
                continue
            result = block["toolResult"]
            call_id = result.get("toolUseId")
            if not isinstance(call_id, str) or not call_id:
                self.problems.append(_null(f"{where}.toolResult.toolUseId"))
                continue
            if call_id not in pending:
                self.problems.append(
                    f"messages.{index}.content.{number}: the toolResult's toolUseId {call_id} matches no "
                    f"toolUse block of the previous assistant turn (its ids: {', '.join(pending) or 'none'})"
                )
            answered.append(call_id)
            text = _result_text(result.get("content"))
            if text is None:
                self.problems.append(
                    f"messages.{index}.content.{number}.toolResult.content: expected a list of "
                    f'{{"text": ...}} or {{"json": ...}} blocks, got {result.get("content")!r}'
                )
                text = ""
            status = result.get("status")
            at = f"messages.{index}.content.{number}.toolResult"
            for part, member in enumerate(result.get("content") or ()):
                if isinstance(member, dict) and "json" in member and not isinstance(member["json"], dict):
                    self.problems.append(
                        f"The format of the value at {at}.content.{part}.json is invalid. Provide a json "
                        "object for the field and try again."
                    )
            if status == "error" and not result.get("content"):
                self.problems.append(f"The content field at {at} cannot be empty when status value is error.")
            if status not in (None, "success", "error"):
                self.problems.append(
                    f"1 validation error detected: Value {status!r} at '{where}.toolResult.status' failed to "
                    "satisfy constraint: Member must satisfy enum value set: [success, error]"
                )
            self.result(call_id, text, status == "error")
        if len(answered) > len(pending):
            self.problems.append(
                f"The number of toolResult blocks at messages.{index}.content exceeds the number of toolUse "
                "blocks of previous turn."
            )
        missing = [i for i in pending if i not in answered]
        if missing:
            self.unanswered(pending_at, index, missing)
        self.user_text(texts)

    def assistant(self, index: int, content: Any, final: bool) -> List[str]:
        texts: List[str] = []
        calls: List[ToolCall] = []
        reasoning: List[Reasoning] = []
        for number, block in enumerate(content):
            where = f"messages.{index + 1}.member.content.{number + 1}.member"
            members = list(block) if isinstance(block, dict) else []
            if members == ["text"] and isinstance(block["text"], str):
                texts.append(block["text"])
            elif members == ["reasoningContent"] and isinstance(block["reasoningContent"], dict):
                item = self.reasoning(index, number, block["reasoningContent"])
                if item is not None:
                    reasoning.append(item)
            elif members == ["toolUse"] and isinstance(block["toolUse"], dict):
                call = self.tool_use(index, number, where, block["toolUse"])
                if call is not None:
                    self.called(call, calls)
            else:
                self.problems.append(
                    f"messages.{index}.content.{number}: expected a content block with one member, text, "
                    f"reasoningContent or toolUse, in an assistant message, got {block!r}"
                )
        return self.assistant_turn(texts, calls, reasoning)

    def reasoning(self, index: int, number: int, raw: Mapping[str, Any]) -> Optional[Reasoning]:
        where = f"messages.{index}.content.{number}.reasoningContent"
        if list(raw) == ["redactedContent"] and isinstance(raw["redactedContent"], str):
            return self.redacted(raw["redactedContent"])
        text = raw.get("reasoningText") if list(raw) == ["reasoningText"] else None
        if not isinstance(text, dict) or not isinstance(text.get("text"), str):
            self.problems.append(
                f"{where}: expected reasoningText {{text, signature}} or redactedContent, got {raw!r}"
            )
            return None
        signature = text.get("signature")
        if not isinstance(signature, str) or not signature:
            self.problems.append(
                f"{where}.reasoningText.signature: the reasoning came back without its signature; send the "
                "reasoningContent block back exactly as it came, signature included"
            )
            return None
        return self.thinking(text["text"], signature)

    def tool_use(self, index: int, number: int, where: str, raw: Mapping[str, Any]) -> Optional[ToolCall]:
        call_id, name, input_ = raw.get("toolUseId"), raw.get("name"), raw.get("input")
        if not isinstance(call_id, str) or not call_id:
            self.problems.append(_null(f"{where}.toolUse.toolUseId"))
            return None
        if not isinstance(name, str) or not name:
            self.problems.append(_null(f"{where}.toolUse.name"))
            return None
        if not isinstance(input_, dict):
            hint = " (send the parsed arguments, not their JSON text)" if isinstance(input_, str) else ""
            self.problems.append(
                f"messages.{index}.content.{number}.toolUse.input: expected the arguments as a JSON object, "
                f"got {type(input_).__name__}{hint}"
            )
            return None
        return ToolCall(call_id, name, input_)


def read_history(request: RecordedRequest, stream: bool) -> History:
    """The conversation a Converse request carried, in normal form, with every departure."""
    reader = _HistoryReader.of(request)
    tool_config = reader.body.get("toolConfig")
    return reader.history(_tool_names(tool_config), _choice(tool_config), stream)


def history_error(problems: Sequence[str]) -> JsonReply:
    """Bedrock's 400 ``ValidationException`` for a malformed history, quoting the first problem."""
    from ...provider.replies import JsonReply
    from .._script import first_problem

    headers = response_headers({"x-amzn-ErrorType": f"ValidationException:{ERROR_NAMESPACE}"})
    return JsonReply({"message": first_problem(problems)}, status=400, headers=headers)
