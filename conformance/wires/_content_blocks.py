"""Conversations of content blocks, as Anthropic Messages and Bedrock Converse take them.

Strategy: both APIs take a system prompt beside a list of ``user`` and ``assistant``
turns, each a list of content blocks, where the tool calls of an assistant turn are
answered by result blocks in the user turn right after it (Converse was made in the
Messages API's image). What they share is done here once:

- out, a scripted call's arguments as the JSON object a whole reply carries
  (:func:`input_object`);
- in, the walk over a request's turns (:class:`BlockHistoryReader`): the system
  prompt, each assistant turn's call ids carried to the user turn that must answer
  them, every result read as the library's tool message (an error flag read as its
  :class:`~conformance.ToolError`), each assistant turn assembled from its text,
  reasoning and calls, and the :class:`~conformance.wires._script.History` made of it.

Each wire's reader says how its blocks are spelt and what its API answers a departure
with, in the API's own words: those differ, and a verdict quotes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Type, TypeVar

from ..contract import Message, Reasoning, ReasoningKind, ToolCall

if TYPE_CHECKING:
    from ..contract import ToolChoice
    from ..provider.replies import RecordedRequest
    from ._script import History

__all__ = ["BlockHistoryReader", "input_object"]

_Reader = TypeVar("_Reader", bound="BlockHistoryReader")


def input_object(arguments: str) -> Dict[str, Any]:
    """A scripted call's arguments as the JSON object a whole reply carries.

    Arguments scripted corrupt (a cut-off call) have no object form, and arrive as
    the empty input a cut leaves.
    """
    import json

    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


class BlockHistoryReader:
    """Reads a request body of content-block turns into the normal form, noting each departure.

    A wire's reader subclasses it and fills in the hooks: :meth:`system_text`,
    :meth:`role`, :meth:`has_content`, :meth:`user`, :meth:`assistant` and
    :meth:`unanswered`, and, where its API checks the order of the roles,
    :meth:`check_roles`.
    """

    #: Who the reasoning read back comes from (``Reasoning.provider``).
    provider: str = ""
    #: What the ``system`` field must be, for the problem where it is not.
    system_shape: str = ""
    #: Whether the API takes an empty ``system`` list as no system prompt at all.
    empty_system: bool = False

    def __init__(self, body: Mapping[str, Any]) -> None:
        self.body = body
        self.messages: List[Message] = []
        self.problems: List[str] = []
        #: id -> name of every tool call seen, for the results' names.
        self.names: Dict[str, str] = {}

    @classmethod
    def of(cls: Type[_Reader], request: RecordedRequest) -> _Reader:
        """A reader that has read ``request``'s body (a body that is no JSON object reads as empty)."""
        body = request.json if isinstance(request.json, dict) else {}
        reader = cls(body)
        if not body:
            reader.problems.append("expected a JSON object body with messages, got none")
        else:
            reader.read()
        return reader

    def history(self, tools: Tuple[str, ...], choice: Optional[ToolChoice], stream: bool) -> History:
        """What was read, with the request's tool names, tool choice and stream flag."""
        from ._script import History

        return History(tuple(self.messages), tuple(self.problems), tools, choice, stream)

    # -- the walk ------------------------------------------------------------------------

    def read(self) -> None:
        """Read the system prompt, then each turn in order."""
        system = self.body.get("system")
        if system is not None and not (self.empty_system and system == []):
            text = self.system_text(system)
            if text is None:
                self.problems.append(f"system: expected {self.system_shape}, got {system!r}")
            else:
                self.messages.append(Message("system", text))
        raw = self.body.get("messages")
        if not isinstance(raw, list) or not raw:
            self.problems.append(f"messages: expected a non-empty list of messages, got {raw!r}")
            return
        turns = self.turns(raw)
        pending: List[str] = []  # the call ids of the latest assistant turn, due in the next user turn
        pending_at = -1
        for position, (index, item) in enumerate(turns):
            role = self.role(index, item)
            if role is None:
                continue
            content = item.get("content")
            if not self.has_content(index, role, content, position == len(turns) - 1):
                continue
            if role == "user":
                self.user(index, content, pending, pending_at)
                pending = []
            else:
                if pending:
                    self.unanswered(pending_at, index, pending)
                final = not any(
                    isinstance(m, dict) and m.get("role") == "assistant" for _, m in turns[position + 1 :]
                )
                pending = self.assistant(index, content, final)
                pending_at = index
        self.check_roles(raw)

    def turns(self, raw: List[Any]) -> List[Tuple[int, Any]]:
        """The turns to read, each with its index in ``messages``: by default each message as sent."""
        return list(enumerate(raw))

    # -- what the turns make -------------------------------------------------------------

    def result(self, call_id: str, text: str, is_error: bool) -> None:
        """A tool result, as the tool message of the call it answers: ``text`` as its content,
        or, where the turn flags it an error, the :class:`~conformance.ToolError` it spells."""
        from ._tool_results import flagged_result

        self.messages.append(
            Message.tool(flagged_result(call_id, self.names.get(call_id, ""), text, is_error))
        )

    def user_text(self, texts: Sequence[str]) -> None:
        """The text of a user turn, after its results, where it has any."""
        if texts:
            self.messages.append(Message("user", "".join(texts)))

    def called(self, call: ToolCall, calls: List[ToolCall]) -> None:
        """A call of the assistant turn being read, its name kept for the result that answers it."""
        self.names[call.id] = call.name
        calls.append(call)

    def assistant_turn(
        self, texts: Sequence[str], calls: Sequence[ToolCall], reasoning: Sequence[Reasoning]
    ) -> List[str]:
        """The assistant turn read; returns its call ids, which the next user turn must answer."""
        self.messages.append(Message("assistant", "".join(texts), tuple(calls), reasoning=tuple(reasoning)))
        return [c.id for c in calls]

    def thinking(self, text: str, signature: str) -> Reasoning:
        """Thinking sent back with its signature."""
        return Reasoning(ReasoningKind.THINKING.value, text=text, signature=signature, provider=self.provider)

    def redacted(self, data: str) -> Reasoning:
        """Redacted thinking sent back: its opaque data."""
        return Reasoning(ReasoningKind.REDACTED_THINKING.value, data=data, provider=self.provider)

    # -- the hooks -----------------------------------------------------------------------

    def system_text(self, system: Any) -> Optional[str]:
        """The system prompt's text; ``None`` where it is not spelt as the API takes it."""
        raise NotImplementedError

    def role(self, index: int, item: Any) -> Optional[str]:
        """``user`` or ``assistant``; ``None``, after noting why, where the message is refused."""
        raise NotImplementedError

    def has_content(self, index: int, role: str, content: Any, last: bool) -> bool:
        """Whether the turn's content is read; ``False``, after noting why, where it is refused."""
        raise NotImplementedError

    def user(self, index: int, content: Any, pending: Sequence[str], pending_at: int) -> None:
        """Read a user turn, which must answer the calls ``pending`` of the turn at ``pending_at``."""
        raise NotImplementedError

    def assistant(self, index: int, content: Any, final: bool) -> List[str]:
        """Read an assistant turn (``final`` where no assistant turn follows); returns its call ids."""
        raise NotImplementedError

    def unanswered(self, asked_at: int, due_at: int, ids: Sequence[str]) -> None:
        """Note the calls ``ids`` of turn ``asked_at`` that turn ``due_at`` leaves unanswered."""
        raise NotImplementedError

    def check_roles(self, raw: List[Any]) -> None:
        """Note what the API refuses in the order of the roles; by default nothing."""
