"""The Ollama wire: its settings, its routes, and the reply to each scenario.

The replies are built from ``_replies`` and ``_variants``; the multi-turn hooks play
turns with ``_turns`` and read histories with ``_history``, and the request checks
are ``_request``'s, each loaded when a case first needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence

from ...contract import Reasoning, ReasoningKind
from ...fixture import CONFORMANCE_FIXTURE as FX
from .._base import Wire
from .._chunks import CUT_IN_CALL, cut_short
from ._replies import JSON_TYPE, VERSION, Lines, chat_response, response_headers, show, tag, tool_call
from ._variants import ERRORS, RUNNER_ERROR, VARIANTS, error_reply

if TYPE_CHECKING:
    from ...provider.replies import RecordedRequest, Reply
    from .._script import History, ScriptedTurn, TurnEvents

__all__ = ["OllamaWire", "ollama_wire"]


class OllamaWire(Wire):
    """Ollama's native chat API, whole and streamed."""

    turn_reasoning = (
        Reasoning(
            ReasoningKind.THINKING.value,
            text="The user wants the weather in Paris, so I call get_weather.",
            provider="ollama",
        ),
    )

    name = "ollama"
    provider = "ollama"
    title = "Ollama"
    # tool-call sends the call with an id (Ollama 0.12+), tool-call-with-stop without
    # (older servers): the backend keeps an id where there is one and makes one up
    # otherwise. ollama-python 0.6 drops the id either way.
    tool_call_id = None
    unsupported = {
        "content-filter": (
            "Ollama has no safety layer: no done_reason or error says the output was filtered"
        ),
        "rate-limit": (
            "Ollama documents a 429 for a rate limit (docs/api/errors.mdx) but no body or header "
            "of one has been seen: a local server queues or answers 503, and every recorded 429 "
            "from ollama.com is a usage limit without retry-after (the quota case)"
        ),
    }
    argument_text_absent = dict.fromkeys(
        ("chat", "stream"),
        "Ollama's tool parser makes a call only once its arguments parse, and passes "
        "unparsable text on as message content",
    )
    variants_table = VARIANTS
    terminal_event = 'the "done": true line'

    def is_generation(self, request: RecordedRequest) -> bool:
        return request.method == "POST" and request.path.endswith("/api/chat")

    def wants_stream(self, request: RecordedRequest) -> bool:
        # The server streams unless told "stream": false.
        return not (isinstance(request.json, dict) and request.json.get("stream") is False)

    def aux_reply(self, request: RecordedRequest) -> Reply:
        from ...provider.replies import JsonReply

        path = request.path
        if path in ("/", "") and request.method in ("GET", "HEAD"):
            return JsonReply(b"Ollama is running", content_type="text/plain; charset=utf-8")
        if path.endswith("/api/version"):
            return JsonReply({"version": VERSION}, content_type=JSON_TYPE)
        body = request.json if isinstance(request.json, dict) else {}
        model = str(body.get("model") or body.get("name") or "conformance-model")
        if path.endswith("/api/show") and request.method == "POST":
            return JsonReply(show(model), content_type=JSON_TYPE)
        if path.endswith("/api/tags") and request.method == "GET":
            return JsonReply({"models": [tag(model)]}, content_type=JSON_TYPE)
        if path.endswith("/api/ps") and request.method == "GET":
            return JsonReply({"models": []}, content_type=JSON_TYPE)
        return JsonReply(
            {
                "error": f"the Ollama fake provider has no route for {request.method} {path}; "
                "it serves /api/chat, /api/show, /api/tags, /api/ps and /api/version"
            },
            status=404,
            content_type=JSON_TYPE,
        )

    def request_asks(self, condition: str, request: RecordedRequest) -> bool:
        """The ``thinking`` field comes only to a request with ``think`` set (``true`` or a level,
        https://docs.ollama.com/capabilities/thinking)."""
        if condition != "thinking":
            return True
        body = request.json if isinstance(request.json, dict) else {}
        think = body.get("think")
        return think is True or think in ("low", "medium", "high")

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        if scenario in self.unsupported:
            return None
        body = request.json if isinstance(request.json, dict) else {}
        model = str(body.get("model") or "conformance-model")
        variant = variant or self.variants(scenario, mode)[0].name
        if scenario in ERRORS:
            return error_reply(scenario, variant)
        if scenario == "stream-cut":
            return self._cut(model, variant, self.wants_stream(request))
        if not self.wants_stream(request):
            return self._whole(scenario, model)
        return self._stream(scenario, model)

    def _cut(self, model: str, variant: str, stream: bool) -> Reply:
        """A turn cut short: its body before its end, or its stream before ``"done": true``.

        A call comes whole on one line, so the cut inside a call falls in the line after
        it, the one that would have said ``done``.
        """
        from ...provider.replies import JsonReply

        in_call = variant in CUT_IN_CALL
        if not stream:
            if in_call:
                body = chat_response(model, 0, "", "stop", tool_calls=[tool_call(with_id=True)])
            else:
                body = chat_response(model, 0, FX.text, "stop")
            whole = JsonReply(body, headers=response_headers(), content_type=JSON_TYPE)
            return cut_short(whole, next(iter(FX.tool_arguments)) if in_call else FX.text)
        out = Lines(model)
        if in_call:
            out.tool_calls([tool_call(with_id=True)])
        else:
            out.text(FX.partial_text, pieces=3)
        keep = len(out.lines)
        if not in_call:
            out.text(FX.text[len(FX.partial_text) :], pieces=1)
        out.done("stop")
        return out.reply(f"{self.name}/stream-cut/{variant}", cut=(keep, variant != "between-events"))

    def _whole(self, scenario: str, model: str) -> Optional[Reply]:
        from ...provider.replies import HangReply, JsonReply

        if scenario == "text":
            body = chat_response(model, 0, FX.text, "stop")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            calls = [tool_call(with_id=scenario == "tool-call")]
            body = chat_response(model, 0, "", "stop", tool_calls=calls)
        elif scenario == "truncated-tool-call":
            # num_predict ran out inside the call: the parser never completed it, so the
            # turn holds only the text before it, and done_reason "length".
            body = chat_response(model, 0, FX.preamble, "length")
        elif scenario in ("abort", "cancel"):
            return HangReply()
        elif scenario == "stream-error":
            # A whole reply cannot fail halfway: the runner's failure comes as a 500.
            return error_reply("server-error")
        else:
            return None
        return JsonReply(body, headers=response_headers(), content_type=JSON_TYPE)

    def _stream(self, scenario: str, model: str) -> Optional[Reply]:
        seed = f"{self.name}/{scenario}"
        out = Lines(model)
        if scenario == "text":
            out.text(FX.text)
            out.done("stop")
        elif scenario in ("tool-call", "tool-call-with-stop"):
            out.tool_calls([tool_call(with_id=scenario == "tool-call")])
            out.done("stop")
        elif scenario == "truncated-tool-call":
            out.text(FX.preamble, pieces=2)
            out.done("length")
        elif scenario == "stream-error":
            out.text(FX.partial_text, pieces=3)
            # The status is already 200: the failure is one last {"error": ...} line.
            out.error(RUNNER_ERROR)
        elif scenario in ("abort", "cancel"):
            out.text(FX.partial_text, pieces=2)
            return out.reply(seed, hang=True)
        else:
            return None
        return out.reply(seed)

    # -- multi-turn --------------------------------------------------------------------

    #: Ollama gives no call an id a result must echo (0.12+ servers send one, which
    #: ollama-python drops): results are matched by ``tool_name`` and order.
    sends_call_ids = False

    def turn_whole(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[Reply]:
        from ._turns import turn_response

        return turn_response(turn, request)

    def turn_stream(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[TurnEvents]:
        from ._turns import turn_events

        return turn_events(turn, request)

    def read_history(self, request: RecordedRequest) -> Optional[History]:
        from ._history import read_history

        return read_history(request, self.wants_stream(request))

    def history_error(self, problems: Sequence[str]) -> Reply:
        from ._history import history_error

        return history_error(problems)

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        from ._request import check_request

        return check_request(request, model)


ollama_wire = OllamaWire()
