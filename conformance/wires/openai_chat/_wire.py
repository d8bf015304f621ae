"""The OpenAI Chat Completions wire: its settings, and the reply to each scenario.

The replies are built from ``_replies`` and ``_variants``; the multi-turn hooks play
turns with ``_turns`` and read histories with ``_history``, and the request checks
are ``_request``'s, each loaded when a case first needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._base import Wire
from .._chunks import CUT_IN_CALL, cut_short
from .._variants import AFTER_FINISH
from ._replies import (
    CREATED,
    TOOL_CALL_ID,
    TRUNCATED_ARGUMENTS,
    Chunks,
    chat_completion,
    fixture_arguments,
    fixture_tool_call,
    response_headers,
    wants_usage,
)
from ._variants import (
    ERRORS,
    NO_REASONING,
    OVERLOADED_MESSAGE,
    REASONING_VARIANTS,
    VARIANTS,
    error_reply,
)

if TYPE_CHECKING:
    from ...provider.replies import JsonReply, RecordedRequest, Reply, StreamReply
    from .._script import History, ScriptedTurn, TurnEvents

__all__ = ["OpenAIChatWire", "openai_chat_wire"]


class OpenAIChatWire(Wire):
    """OpenAI Chat Completions, whole and streamed.

    ``reasoning_content=True`` makes it the wire of an OpenAI-compatible server that
    returns its reasoning as ``reasoning_content`` (DeepSeek and the servers that copy
    it), and so gives it the ``reasoning`` case that api.openai.com has no part in.

    ``servers`` names OpenAI-compatible servers (:attr:`SERVERS`: ``"mistral"``,
    ``"groq"``, ``"deepseek"``, ``"llama.cpp"``, ``"openrouter"``) whose own shapes the cases run too, as
    variants after api.openai.com's: a backend or gateway that talks to them must read
    each. ``"deepseek"`` also turns the ``reasoning`` case on, as its reasoner sends it.
    """

    #: The OpenAI-compatible servers ``servers`` may name.
    SERVERS: Tuple[str, ...] = ("mistral", "groq", "deepseek", "llama.cpp", "openrouter")

    name = "openai-chat"
    interleaves_calls = True
    provider = "openai"
    title = "OpenAI Chat Completions"
    tool_call_id = TOOL_CALL_ID
    generation_path = "/chat/completions"
    variants_table = VARIANTS
    unsupported = {"reasoning": NO_REASONING}
    #: api.openai.com's 429 carries no retry-after (openai/openai-node#1477).
    rate_limit_retry_after: Optional[float] = None

    def __init__(self, *, reasoning_content: bool = False, servers: Sequence[str] = ()) -> None:
        self.reasoning_content = reasoning_content
        self.servers: Tuple[str, ...] = ()
        if reasoning_content:
            self.variants_table = {**VARIANTS, "reasoning": REASONING_VARIANTS}
            self.unsupported = {}
        if servers or isinstance(servers, str):
            # Loaded only for a wire that names servers: api.openai.com's pays nothing.
            from ._servers import check_servers, with_servers

            self.servers = check_servers(servers)
            self.variants_table = with_servers(self.variants_table, self.servers)
            if self.variants_table.get("reasoning"):
                self.unsupported = {}

    def __repr__(self) -> str:
        shown = ", reasoning_content=True" if self.reasoning_content else ""
        if self.servers:
            shown += f", servers={self.servers!r}"
        return f"<{type(self).__name__} {self.name!r}{shown}>"

    terminal_event = "data: [DONE]"

    # -- the shape of a reply: hooks a wire in front of the same API (Azure's) replaces --

    def chunks(self, model: str, include_usage: bool) -> Chunks:
        """A new stream of ``chat.completion.chunk`` events."""
        return Chunks(model, include_usage)

    def completion_reply(self, body: Dict[str, Any]) -> JsonReply:
        """A whole ``chat.completion`` as the reply carrying it."""
        from ...provider.replies import JsonReply

        return JsonReply(body, headers=response_headers())

    def usage_sent(self, scenario: str, request: RecordedRequest) -> bool:
        # A stream reports usage only when the request asked for it.
        if self.wants_stream(request) and not wants_usage(request):
            return False
        return super().usage_sent(scenario, request)

    def aux_reply(self, request: RecordedRequest) -> Reply:
        # openai-python's client.models.retrieve(): GET {base}/models/{model}
        if request.method == "GET" and "/models/" in request.path:
            from ...provider.replies import JsonReply

            model = request.path.rsplit("/models/", 1)[1]
            return JsonReply(
                {"id": model, "object": "model", "created": CREATED, "owned_by": "system"},
                headers=response_headers(),
            )
        return super().aux_reply(request)

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        body = request.json if isinstance(request.json, dict) else {}
        model = str(body.get("model") or "conformance-model")
        variant = variant or self.variants(scenario, mode)[0].name
        if self.servers:
            from ._servers import SERVER_SHAPES

            if variant.startswith("llama-cpp"):
                from ._llama_cpp import llama_cpp_reply

                return llama_cpp_reply(scenario, variant, request, self.wants_stream(request))
            if variant.startswith("openrouter"):
                from ._openrouter import openrouter_reply

                return openrouter_reply(scenario, variant, request, self.wants_stream(request))
            if variant in SERVER_SHAPES:
                from ._server_replies import server_reply

                return server_reply(scenario, variant, request, self.wants_stream(request))
        if scenario in ERRORS:
            return error_reply(scenario, variant)
        if not self.wants_stream(request):
            if scenario == "stream-cut":
                return self._cut_whole(model, variant)
            return self._whole(scenario, model)
        return self._stream(scenario, model, wants_usage(request), variant)

    def _whole(self, scenario: str, model: str) -> Optional[Reply]:
        from ...provider.replies import HangReply

        if scenario == "text":
            body = chat_completion(model, {"content": FX.text}, "stop")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            finish = "tool_calls" if scenario == "tool-call" else "stop"
            message: Dict[str, Any] = {
                "content": None,
                "tool_calls": [fixture_tool_call(fixture_arguments())],
            }
            body = chat_completion(model, message, finish)
        elif scenario == "truncated-tool-call":
            message = {"content": FX.preamble, "tool_calls": [fixture_tool_call(TRUNCATED_ARGUMENTS)]}
            body = chat_completion(model, message, "length")
        elif scenario == "content-filter":
            body = chat_completion(model, {"content": None}, "content_filter")
        elif scenario in ("abort", "cancel"):
            return HangReply()
        elif scenario == "stream-error":
            # A whole reply cannot fail halfway: the provider fails the request instead.
            return error_reply("overloaded")
        else:
            return None
        return self.completion_reply(body)

    def _cut_whole(self, model: str, variant: str) -> Reply:
        if variant in CUT_IN_CALL:
            message: Dict[str, Any] = {
                "content": None,
                "tool_calls": [fixture_tool_call(fixture_arguments())],
            }
            reply = self.completion_reply(chat_completion(model, message, "tool_calls"))
            return cut_short(reply, next(iter(FX.tool_arguments)))
        reply = self.completion_reply(chat_completion(model, {"content": FX.text}, "stop"))
        return cut_short(reply, FX.text)

    def _stream_cut(self, out: Chunks, variant: str) -> StreamReply:
        """A turn whose stream stops before ``[DONE]``: after text, inside a call, or after the finish."""
        if variant == AFTER_FINISH:
            # The whole call, its finish_reason and the usage chunk (where asked), then no [DONE].
            out.tool_call(fixture_arguments(), role=True)
            out.finish("tool_calls")
            return out.reply(f"{self.name}/stream-cut/{variant}", cut=(len(out.events) - 1, False))
        if variant in CUT_IN_CALL:
            # Kept: what came before, the call's first chunk (id, name) and its first fragment.
            keep = len(out.events) + 2
            out.tool_call(fixture_arguments(), role=True)
            out.finish("tool_calls")
        else:
            out.role()
            out.text(FX.partial_text, pieces=3)
            keep = len(out.events)
            out.text(FX.text[len(FX.partial_text) :], pieces=1)
            out.finish("stop")
        return out.reply(f"{self.name}/stream-cut/{variant}", cut=(keep, variant != "between-events"))

    def _stream(self, scenario: str, model: str, include_usage: bool, variant: str) -> Optional[Reply]:
        seed = f"{self.name}/{scenario}"
        out = self.chunks(model, include_usage)
        if scenario == "stream-cut":
            return self._stream_cut(out, variant)
        if scenario == "text":
            out.role()
            out.text(FX.text)
            out.finish("stop")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            out.tool_call(fixture_arguments(), role=True)
            out.finish("tool_calls" if scenario == "tool-call" else "stop")
        elif scenario == "truncated-tool-call":
            out.role()
            out.text(FX.preamble, pieces=2)
            out.tool_call(TRUNCATED_ARGUMENTS, pieces=2)
            out.finish("length")
        elif scenario == "content-filter":
            out.role()
            out.finish("content_filter")
        elif scenario == "stream-error":
            out.role()
            out.text(FX.partial_text, pieces=3)
            out.error(OVERLOADED_MESSAGE, "server_error", None)
        elif scenario in ("abort", "cancel"):
            out.role()
            out.text(FX.partial_text, pieces=2)
            return out.reply(seed, hang=True)
        else:
            return None
        return out.reply(seed)

    # -- multi-turn ---------------------------------------------------------------------

    def turn_whole(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[Reply]:
        if self._server_plays(turn):
            from ._server_replies import server_turn_response

            return server_turn_response(turn, request)
        from ._turns import turn_response

        return turn_response(self, turn, request)

    def turn_stream(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[TurnEvents]:
        if self._server_plays(turn):
            from ._server_replies import server_turn_events

            return server_turn_events(turn, request)
        from ._turns import turn_events

        return turn_events(self, turn, request)

    def _server_plays(self, turn: ScriptedTurn) -> bool:
        """Whether ``turn`` is played in a named server's own chunks (DeepSeek's reasoning)."""
        if not self.servers or not turn.variant:
            return False
        from ._servers import SERVER_SHAPES

        return turn.variant in SERVER_SHAPES

    def read_history(self, request: RecordedRequest) -> Optional[History]:
        from ._history import read_history

        return read_history(request)

    def history_error(self, problems: Sequence[str]) -> Reply:
        from ._history import history_error

        return history_error(problems)

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        from ._request import check_request

        return check_request(request, model)


openai_chat_wire = OpenAIChatWire()
