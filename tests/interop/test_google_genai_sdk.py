"""google-genai against the Gemini wire, through the conformance mixin.

The adapters below are what a user's backend over the SDK would be:
``genai.Client`` pointed at the fake provider with ``HttpOptions(base_url=...,
api_version="v1beta")``, exactly one attempt (``HttpRetryOptions(attempts=1)``; the
SDK does not retry unless told to, and this says so), and ``generate_content`` /
``generate_content_stream``, sync and through ``client.aio``. The async adapter also
runs over h2c, with httpx told to speak HTTP/2 by prior knowledge.

A conversation goes back as the SDK's ``types.Content``: an assistant turn is a
``model`` turn of its thoughts (``thought=True`` parts), its text, then a
``function_call`` part per call carrying the call's ``thought_signature``; a turn's
results go in one ``user`` turn of ``function_response`` parts, ``{"output": ...}`` or
``{"error": ...}`` for a ``ToolError``. An id the adapter made up for a call that came
without one is not sent back. The SDK holds a ``thought_signature`` as bytes: the
adapter decodes the base64 string it returned into ``ChatResponse.reasoning`` (or the
call's ``reasoning``) and the SDK encodes it again when it sends the turn back.
"""

from __future__ import annotations

import base64
import importlib.util
import re
import secrets
import ssl
import unittest
from typing import (
    AbstractSet,
    Any,
    AsyncIterator,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
)

from conformance.abort import race_abort
from conformance.contract import (
    ChatRequest,
    ChatResponse,
    LLMError,
    Message,
    Reasoning,
    ReasoningKind,
    StreamChunk,
    ToolCall,
    ToolChoice,
    Usage,
)
from conformance.testcase import BackendConformanceTestCase
from conformance.wires.gemini import gemini_wire

from ..test_provider_support import AsyncioDebugOff
from ._roundtrip import AdapterRoundTrip
from ._support import (
    HTTPX_H2_SKIPS,
    ThirdPartyWarnings,
    broken_connection,
    cut_error,
    ended_short,
    installed_version,
    shared_between,
)

HAVE_GENAI = (
    importlib.util.find_spec("google") is not None and importlib.util.find_spec("google.genai") is not None
)

HAVE_H2 = importlib.util.find_spec("h2") is not None

# google-genai and google-auth warn about pydantic's deprecations and Python 3.9's end of
# life from their own modules; nothing raised from conformance or these tests is ignored.
_SDK_WARNINGS = ThirdPartyWarnings(r"(google|pydantic)(\.|$)")


_ASYNCIO_DEBUG = AsyncioDebugOff()  # unless CONFORMANCE_LONG_TESTS=1


def setUpModule() -> None:
    _SDK_WARNINGS.start()
    _ASYNCIO_DEBUG.start()
    if HAVE_GENAI:
        _warm_up()


def _warm_up() -> None:
    """One request through each client before any case.

    google-genai imports itself and builds its request machinery on first use: about
    3 s, which on a loaded machine is the whole 5 s bound of the first case to run.
    """
    import asyncio

    from conformance.fixture import conformance_request
    from conformance.provider import start_fake_provider

    with start_fake_provider() as provider:
        provider.reply(lambda request: gemini_wire.reply("text", "chat", request))
        sync = GenAISyncBackend(provider.url, {})
        try:
            sync.chat(conformance_request("warm-up"))
        finally:
            sync.close()

        async def warm_async() -> None:
            backend = GenAIAsyncBackend(provider.url, {})
            try:
                await backend.chat(conformance_request("warm-up"))
            finally:
                await backend.aclose()

        asyncio.run(warm_async())


def tearDownModule() -> None:
    _ASYNCIO_DEBUG.stop()
    _SDK_WARNINGS.stop()


FINISH_REASONS: Mapping[str, str] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "BLOCKLIST": "content_filter",
    "SPII": "content_filter",
    "RECITATION": "content_filter",
    "MODEL_ARMOR": "content_filter",
}
RPC_KINDS: Mapping[str, str] = {
    "RESOURCE_EXHAUSTED": "rate_limit",
    "UNAVAILABLE": "overloaded",
    "INTERNAL": "server_error",
    "UNAUTHENTICATED": "auth",
    "PERMISSION_DENIED": "auth",
}


def _genai_version() -> Tuple[int, ...]:
    return installed_version("google-genai")


# google-genai 1.47, the last release that installs on Python 3.9, ends a stream
# quietly at the provider's mid-stream `data: {"error": ...}` event (3.6 raises it as
# an APIError): an SDK limit that an adapter cannot see past.
# It also leaves the HTTP response under an async stream open when the stream is
# closed early, between two events (the abort case closes it right after the first),
# so the provider goes on sending; 3.6 closes it.
SKIP = (
    {
        "stream-error": "google-genai before 2.0 ends a stream quietly at a mid-stream error event",
        "abort/stream": (
            "google-genai before 2.0 leaves the HTTP response of an async stream open when the "
            "stream is closed between two events, so the provider goes on sending"
        ),
    }
    if HAVE_GENAI and _genai_version() < (2,)
    else {}
)
SYNC_ABORT = (
    "google-genai's sync client has no way to abort a call blocked in httpx: no "
    "cancellation API, and the socket sits inside httpx's pool"
)


def _tool_config(choice: Optional[ToolChoice]) -> Any:
    """``function_calling_config``: AUTO, ANY, or ANY limited to the one function named."""
    from google.genai import types

    if choice is None:
        return None
    Mode = types.FunctionCallingConfigMode
    if choice.mode == "tool":
        assert choice.name is not None
        calling = types.FunctionCallingConfig(mode=Mode.ANY, allowed_function_names=[choice.name])
    else:
        calling = types.FunctionCallingConfig(mode=Mode.ANY if choice.mode == "required" else Mode.AUTO)
    return types.ToolConfig(function_calling_config=calling)


def _config(request: ChatRequest) -> Any:
    from google.genai import types

    system = "\n\n".join(m.content for m in request.messages if m.role == "system")
    return types.GenerateContentConfig(
        system_instruction=system or None,
        max_output_tokens=request.max_tokens,
        thinking_config=types.ThinkingConfig(include_thoughts=True) if request.thinking else None,
        tool_config=_tool_config(request.tool_choice),
        tools=[
            types.Tool(
                function_declarations=[
                    types.FunctionDeclaration(
                        name=t.name, description=t.description, parameters_json_schema=dict(t.parameters)
                    )
                    for t in request.tools
                ]
            )
        ],
    )


def _own(items: Sequence[Reasoning]) -> List[Reasoning]:
    """Gemini's thought signatures (or unmarked ones); another provider's mean nothing here."""
    return [
        r
        for r in items
        if r.provider in ("", "gemini") and str(r.kind) == ReasoningKind.THOUGHT_SIGNATURE.value
    ]


def _signature(item: Reasoning) -> Optional[bytes]:
    return base64.b64decode(item.signature) if item.signature else None


def _model_parts(message: Message, made_up: AbstractSet[str]) -> List[Any]:
    """An assistant turn's parts: thoughts and signatures, text, then calls with their signatures."""
    from google.genai import types

    parts = []
    for item in _own(message.reasoning):
        if item.text:
            parts.append(types.Part(text=item.text, thought=True, thought_signature=_signature(item)))
        else:
            parts.append(types.Part(text="", thought_signature=_signature(item)))
    if message.content:
        parts.append(types.Part(text=message.content))
    for call in message.tool_calls:
        signatures = [r for r in _own(call.reasoning) if r.signature]
        function_call = types.FunctionCall(
            id=None if call.id in made_up else call.id, name=call.name, args=dict(call.arguments)
        )
        parts.append(
            types.Part(
                function_call=function_call,
                thought_signature=_signature(signatures[0]) if signatures else None,
            )
        )
    return parts or [types.Part(text="")]


def _function_response(message: Message, made_up: AbstractSet[str]) -> Any:
    """One result as a ``function_response`` part: ``{"output": ...}`` or ``{"error": {...}}``."""
    from google.genai import types

    result = message.tool_result
    assert result is not None
    if result.error is not None:
        response: Dict[str, Any] = {"error": dict(result.error.as_dict())}
    else:
        response = {"output": result.content}
    return types.Part(
        function_response=types.FunctionResponse(
            id=None if result.call_id in made_up else result.call_id, name=result.name, response=response
        )
    )


def _contents(request: ChatRequest, made_up: AbstractSet[str] = frozenset()) -> List[Any]:
    """One ``Content`` per message; a run of tool results merged into one user turn."""
    from google.genai import types

    contents: List[Any] = []
    for m in request.messages:
        if m.role == "system":
            continue
        if m.tool_result is not None:
            part = _function_response(m, made_up)
            last = contents[-1] if contents else None
            if last is not None and last.role == "user" and last.parts[-1].function_response is not None:
                last.parts.append(part)
            else:
                contents.append(types.Content(role="user", parts=[part]))
        elif m.role == "assistant":
            contents.append(types.Content(role="model", parts=_model_parts(m, made_up)))
        else:
            contents.append(types.Content(role="user", parts=[types.Part(text=m.content)]))
    return contents


_SSL: List[Any] = []


def _client_options(url: str, headers: Mapping[str, str], http2: bool, api_version: str = "v1beta") -> Any:
    from google.genai import types

    # The fake provider is plain http; one shared SSL context spares every client the
    # ~100 ms the SDK would spend loading CA certificates (verify for httpx, ssl for
    # the websocket options it prepares alongside).
    if not _SSL:
        _SSL.append(ssl.create_default_context())
    args: Dict[str, Any] = {"verify": _SSL[0], "ssl": _SSL[0]}
    if http2:
        args.update(http1=False, http2=True)
    return types.HttpOptions(
        base_url=url,
        api_version=api_version,
        headers=dict(headers),
        retry_options=types.HttpRetryOptions(attempts=1),
        client_args=dict(args),
        async_client_args=dict(args),
    )


#: How a client reaches Vertex AI, as ``vertex`` names it: ``"project"``, under a project and
#: a location with an OAuth token; ``"express"``, with an API key and neither.
VERTEX_MODES = ("project", "express")


def _client(url: str, headers: Mapping[str, str], http2: bool, vertex: str = "") -> Any:
    """A ``genai.Client`` for the Gemini API, or for Vertex AI where ``vertex`` names how.

    Vertex's credentials are faked the two ways google-genai allows without reaching the
    network: an API key (express mode, ``x-goog-api-key``), or ``google.oauth2.credentials.
    Credentials`` holding a token with no expiry, which the SDK sends as a bearer and never
    refreshes (``AnonymousCredentials`` cannot be refreshed, and the SDK tries).
    """
    from google import genai

    if not vertex:
        return genai.Client(api_key="test", http_options=_client_options(url, headers, http2))
    options = _client_options(url, headers, http2, "v1beta1")
    if vertex == "express":
        return genai.Client(vertexai=True, api_key="test", http_options=options)
    from google.oauth2.credentials import Credentials

    token = Credentials(token="test")  # type: ignore[no-untyped-call]
    return genai.Client(
        vertexai=True,
        project="conformance-project",
        location="us-central1",
        credentials=token,
        http_options=options,
    )


def _error(exc: Any) -> LLMError:
    """An LLMError from google.genai.errors.APIError: ``details`` is the whole error body."""
    body = exc.details if isinstance(exc.details, dict) else {}
    error = body.get("error", {}) if isinstance(body.get("error"), dict) else {}
    details = [d for d in error.get("details") or () if isinstance(d, dict)]
    kind = RPC_KINDS.get(str(exc.status), "")
    retry_after = None
    for detail in details:
        kind_of = str(detail.get("@type", ""))
        if kind_of.endswith(".QuotaFailure") and any(
            "PerDay" in str(v.get("quotaId", "")) for v in detail.get("violations") or ()
        ):
            kind = "quota"
        if kind_of.endswith(".ErrorInfo") and detail.get("reason") == "API_KEY_INVALID":
            kind = "auth"
        if kind_of.endswith(".RetryInfo"):
            found = re.match(r"^(\d+(?:\.\d+)?)s$", str(detail.get("retryDelay", "")))
            retry_after = float(found.group(1)) if found else None
    if exc.code == 400 and "exceeds the maximum number of tokens" in str(exc.message):
        kind = "context_overflow"
    if not kind:
        kind = "server_error" if int(exc.code) >= 500 else "auth" if exc.code in (401, 403) else ""
    if not kind:
        return LLMError(
            str(exc.message),
            code="LLM_INVALID_REQUEST",
            kind="invalid_request",
            retryable=False,
            status=exc.code,
            provider="gemini",
        )
    return LLMError.from_kind(
        kind,
        str(exc.message),
        # The delay the reply names, on every kind: a per-day quota names one too.
        retry_after=retry_after,
        status=exc.code,
        provider="gemini",
    )


def _thought_signature(part: Any, text: str = "") -> Reasoning:
    """The part's ``thought_signature`` (bytes in the SDK) as the base64 Gemini sent."""
    signature = base64.b64encode(part.thought_signature).decode("ascii") if part.thought_signature else ""
    return Reasoning(ReasoningKind.THOUGHT_SIGNATURE.value, text=text, signature=signature, provider="gemini")


class _Thoughts:
    """Gathers a thought's text across parts and events; it is whole at its signature.

    A signature on a part that is neither a thought nor a call is an item of its own;
    thought text still open at the end of the turn is an item without a signature.
    """

    def __init__(self) -> None:
        self.text: List[str] = []

    def take(self, part: Any) -> List[Reasoning]:
        if part.function_call is not None:
            return []
        if part.thought:
            self.text.append(part.text or "")
            return self.flush(part) if part.thought_signature else []
        if part.thought_signature:
            return [*self.close(), _thought_signature(part)]
        return []

    def flush(self, part: Any) -> List[Reasoning]:
        text, self.text = "".join(self.text), []
        return [_thought_signature(part, text)]

    def close(self) -> List[Reasoning]:
        if not self.text:
            return []
        text, self.text = "".join(self.text), []
        return [Reasoning(ReasoningKind.THOUGHT_SIGNATURE.value, text=text, provider="gemini")]


def _read(
    response: Any, made_up: Set[str], thoughts: _Thoughts
) -> Tuple[str, List[ToolCall], Optional[str], List[Reasoning]]:
    """Text, calls, finish reason and completed reasoning of one GenerateContentResponse."""
    if not response.candidates:
        feedback = response.prompt_feedback
        blocked = feedback is not None and feedback.block_reason is not None
        return "", [], "SAFETY" if blocked else None, []
    candidate = response.candidates[0]
    text, calls, reasoning = [], [], []
    for part in (candidate.content.parts if candidate.content else None) or ():
        reasoning.extend(thoughts.take(part))
        if part.thought:
            continue  # a thought summary is not the answer
        if part.text:
            text.append(part.text)
        if part.function_call is not None:
            call = part.function_call
            call_id = call.id
            if not call_id:  # Gemini 2.x sends no id: make one up, and never send it back
                call_id = f"call_{secrets.token_hex(12)}"
                made_up.add(call_id)
            # The signature belongs to this very call and goes back on its part.
            signed = (_thought_signature(part),) if part.thought_signature else ()
            calls.append(ToolCall(call_id, call.name or "", call.args or {}, signed))
    reason = candidate.finish_reason.value if candidate.finish_reason is not None else None
    return "".join(text), calls, reason, reasoning


def _usage(response: Any) -> Optional[Usage]:
    """The counts, thoughts among the output tokens; ``None`` where none came (Vertex's
    ``{"trafficType": ...}`` alone)."""
    meta = response.usage_metadata
    counts = ("prompt_token_count", "candidates_token_count", "thoughts_token_count", "total_token_count")
    if meta is None or all(getattr(meta, name, None) is None for name in counts):
        return None
    prompt = meta.prompt_token_count or 0
    output = (meta.candidates_token_count or 0) + (meta.thoughts_token_count or 0)
    return Usage(prompt, output, meta.total_token_count or prompt + output)


def _finish(reason: Optional[str], calls: List[ToolCall]) -> str:
    mapped = FINISH_REASONS.get(reason or "", "error")
    return "tool_calls" if mapped == "stop" and calls else mapped


def _whole(response: Any, made_up: Set[str]) -> ChatResponse:
    thoughts = _Thoughts()
    text, calls, reason, reasoning = _read(response, made_up, thoughts)
    calls = [] if reason == "MAX_TOKENS" else calls
    reasoning += thoughts.close()
    return ChatResponse(text, _finish(reason, calls), tuple(calls), _usage(response), tuple(reasoning))


class _Turn:
    """What the events of one streamed turn add up to."""

    def __init__(self, made_up: Set[str]) -> None:
        self.made_up = made_up
        self.thoughts = _Thoughts()
        self.calls: List[ToolCall] = []
        self.reason: Optional[str] = None
        self.usage: Optional[Usage] = None

    def take(self, response: Any) -> Optional[StreamChunk]:
        text, calls, reason, reasoning = _read(response, self.made_up, self.thoughts)
        self.calls.extend(calls)
        self.reason = reason or self.reason
        self.usage = _usage(response) or self.usage
        return StreamChunk(content=text, reasoning=tuple(reasoning)) if text or reasoning else None

    def last_chunk(self) -> StreamChunk:
        calls = [] if self.reason == "MAX_TOKENS" else self.calls
        return StreamChunk(
            tool_calls=tuple(calls),
            finish_reason=_finish(self.reason, calls),
            usage=self.usage,
            reasoning=tuple(self.thoughts.close()),
        )


class GenAISyncBackend:
    """A sync backend over ``genai.Client`` (with ``vertex``, one of :data:`VERTEX_MODES`, over Vertex AI)."""

    def __init__(self, url: str, headers: Mapping[str, str], http2: bool = False, vertex: str = "") -> None:
        self.client = _client(url, headers, http2, vertex)
        #: The ids made up for calls Gemini sent without one: never sent back.
        self.made_up_ids: Set[str] = set()

    def chat(self, request: ChatRequest) -> ChatResponse:
        from google.genai import errors

        try:
            response = self.client.models.generate_content(
                model=request.model, contents=_contents(request, self.made_up_ids), config=_config(request)
            )
        except errors.APIError as exc:
            raise _error(exc) from exc
        except Exception as exc:
            if broken_connection(exc):
                raise cut_error(exc, "gemini") from exc  # a body cut short of its Content-Length
            raise
        return _whole(response, self.made_up_ids)

    def chat_stream(self, request: ChatRequest) -> Iterator[StreamChunk]:
        from google.genai import errors

        turn = _Turn(self.made_up_ids)
        try:
            for response in self.client.models.generate_content_stream(
                model=request.model, contents=_contents(request, self.made_up_ids), config=_config(request)
            ):
                chunk = turn.take(response)
                if chunk is not None:
                    yield chunk
        except errors.APIError as exc:
            raise _error(exc) from exc
        except Exception as exc:
            if broken_connection(exc):
                raise cut_error(exc, "gemini") from exc  # cut before a finishReason, or reset
            raise
        if turn.reason is None:
            raise ended_short("gemini", "a finishReason")  # a body that ended properly before it
        yield turn.last_chunk()

    def close(self) -> None:
        self.client.close()


class GenAIAsyncBackend:
    """An async backend over ``client.aio``: an abort cancels the SDK's call."""

    def __init__(self, url: str, headers: Mapping[str, str], http2: bool = False, vertex: str = "") -> None:
        self.client = _client(url, headers, http2, vertex)
        #: The ids made up for calls Gemini sent without one: never sent back.
        self.made_up_ids: Set[str] = set()

    async def chat(self, request: ChatRequest) -> ChatResponse:
        from google.genai import errors

        try:
            response = await race_abort(
                self.client.aio.models.generate_content(
                    model=request.model,
                    contents=_contents(request, self.made_up_ids),
                    config=_config(request),
                ),
                request.signal,
            )
        except errors.APIError as exc:
            raise _error(exc) from exc
        except Exception as exc:
            if broken_connection(exc):
                raise cut_error(exc, "gemini") from exc  # a body cut short of its Content-Length
            raise
        return _whole(response, self.made_up_ids)

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        from google.genai import errors

        turn = _Turn(self.made_up_ids)
        failure: Optional[LLMError] = None
        try:
            stream = await race_abort(
                self.client.aio.models.generate_content_stream(
                    model=request.model,
                    contents=_contents(request, self.made_up_ids),
                    config=_config(request),
                ),
                request.signal,
            )
            try:
                while True:
                    if request.signal is not None and request.signal.aborted:
                        # The abort landed between two chunks, with no read of ours to
                        # cancel. Closing the SDK's stream then leaves its HTTP response
                        # open (httpx's generators below it report "already running"
                        # and stay unclosed until the loop ends): close the client's
                        # connections instead.
                        await self.client.aio.aclose()
                        request.signal.raise_reason()
                    try:
                        response = await race_abort(stream.__anext__(), request.signal)
                    except StopAsyncIteration:
                        break
                    chunk = turn.take(response)
                    if chunk is not None:
                        yield chunk
            finally:
                await stream.aclose()  # type: ignore[attr-defined]
        except errors.APIError as exc:
            # The SDK raises a mid-stream error from inside its generators and leaves the
            # ones below it open; close them from the top, in order, while the loop runs.
            # The failure is raised outside this handler so the SDK's exception, which
            # holds their frames, does not live on as its __context__.
            failure = _error(exc)
            segments = getattr(getattr(exc, "response", None), "segment_iterator", None)
            if segments is not None:
                await segments.aclose()
        except Exception as exc:
            if not broken_connection(exc):
                raise
            failure = cut_error(exc, "gemini")  # cut before a finishReason, or reset
        if failure is not None:
            raise failure
        if turn.reason is None:
            raise ended_short("gemini", "a finishReason")  # a body that ended properly before it
        yield turn.last_chunk()

    async def aclose(self) -> None:
        await self.client.aio.aclose()
        self.client.close()


@unittest.skipUnless(HAVE_GENAI, "google-genai is not installed: pip install google-genai")
class GoogleGenAISyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """google-genai's sync client, adapted, over HTTP/1.1."""

    wire = gemini_wire
    headers = {"x-gateway-key": "test"}
    skip = {"abort": SYNC_ABORT, **SKIP}

    def create_backend(self, url: str) -> GenAISyncBackend:
        return GenAISyncBackend(url, self.headers)


@unittest.skipUnless(HAVE_GENAI, "google-genai is not installed: pip install google-genai")
class GoogleGenAIAsyncConformance(BackendConformanceTestCase, unittest.TestCase):
    """google-genai's async client (``client.aio``), adapted, over HTTP/1.1."""

    wire = gemini_wire
    headers = {"x-gateway-key": "test"}
    skip = {**SKIP}

    def create_backend(self, url: str) -> GenAIAsyncBackend:
        return GenAIAsyncBackend(url, self.headers)


@unittest.skipUnless(HAVE_GENAI, "google-genai is not installed: pip install google-genai")
@unittest.skipUnless(HAVE_H2, "h2 is not installed: pip install h2")
class GoogleGenAIAsyncH2CConformance(BackendConformanceTestCase, unittest.TestCase):
    """google-genai's async client over h2c (httpx with http1=False, http2=True)."""

    wire = gemini_wire
    headers = {"x-gateway-key": "test"}
    skip = {**SKIP, **HTTPX_H2_SKIPS}
    http2 = True

    def create_backend(self, url: str) -> GenAIAsyncBackend:
        return GenAIAsyncBackend(url, self.headers, http2=True)


@unittest.skipUnless(HAVE_GENAI, "google-genai is not installed: pip install google-genai")
class GoogleGenAIChatTurns(unittest.TestCase):
    """google-genai's own chat reads a streamed turn of two calls and sends it back as Gemini takes it."""

    def test_chat_stream_keeps_both_calls_and_echoes_them(self) -> None:
        import base64

        if _genai_version() < (2,):
            # Seen with 1.47.0 (the last release for Python 3.9): get_history() holds the
            # streamed model turn, but the next send_message_stream() sends only the new
            # functionResponse parts, a history Gemini refuses.
            self.skipTest(
                "google-genai before 2.0 leaves a streamed tool turn out of the next request's "
                "contents, so the results answer no call"
            )

        from google import genai
        from google.genai import types

        from conformance.gate import tool_specs
        from conformance.provider import start_fake_provider
        from conformance.wires._turns import ScriptedCall, ScriptedTurn, play_turn

        signature = base64.b64encode(b"first-call-signature").decode("ascii")
        calls = (
            ScriptedCall(
                "whZntcQw",
                "echo_json",
                '{"text": "sun \\ud83c\\udf1e", "count": 2, "tags": ["\u00e9"]}',
                reasoning=(Reasoning(ReasoningKind.THOUGHT_SIGNATURE.value, signature=signature),),
            ),
            ScriptedCall("96c1su3s", "read_fixture", '{"path": "notes/unicode.txt"}'),
        )
        turns = [
            ScriptedTurn(text="Both at once.", calls=calls, interleave=True, seed="sdk-calls"),
            ScriptedTurn(text="Done.", seed="sdk-final"),
        ]
        played: List[int] = []

        def answer(request: Any) -> Any:
            if not gemini_wire.is_generation(request):
                return gemini_wire.aux_reply(request)
            played.append(1)
            return play_turn(gemini_wire, turns[min(len(played), 2) - 1], request)

        declarations = [
            types.FunctionDeclaration(name=t.name, description=t.description, parameters=dict(t.parameters))
            for t in tool_specs(gemini=True)
        ]
        config = types.GenerateContentConfig(
            tools=[types.Tool(function_declarations=declarations)],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )
        with start_fake_provider() as provider:
            provider.reply(answer)
            client = genai.Client(api_key="test", http_options=_client_options(provider.url, {}, False))
            chat = client.chats.create(model="conformance-model", config=config)
            got = [call for chunk in chat.send_message_stream("go") for call in chunk.function_calls or ()]
            self.assertEqual([(c.id, c.name) for c in got], [(c.id, c.name) for c in calls])
            self.assertEqual(got[0].args, {"text": "sun \U0001f31e", "count": 2, "tags": ["\u00e9"]})
            parts = [
                p for content in chat.get_history() if content.role == "model" for p in content.parts or ()
            ]
            signed = [p.thought_signature for p in parts if p.function_call is not None]
            self.assertEqual(signed, [base64.b64decode(signature), None])
            results = [
                types.Part(
                    function_response=types.FunctionResponse(id=c.id, name=c.name, response={"output": "ok"})
                )
                for c in got
            ]
            final = "".join(chunk.text or "" for chunk in chat.send_message_stream(results))
            self.assertEqual(final, "Done.")
            second = [r for r in provider.requests if gemini_wire.is_generation(r)][1]
        history = gemini_wire.read_history(second)
        assert history is not None
        self.assertEqual(history.problems, ())
        (assistant,) = history.assistant_turns
        self.assertEqual([(c.id, c.name) for c in assistant.tool_calls], [(c.id, c.name) for c in calls])
        self.assertEqual(assistant.tool_calls[0].reasoning[0].signature, signature)
        self.assertEqual(
            [m.tool_result.call_id for m in history.results if m.tool_result], ["whZntcQw", "96c1su3s"]
        )


#: A canonical signature with "/" in it: standard base64, which the SDK reads into bytes.
ROUND_TRIP_SIGNATURE = base64.b64encode(b"\xff\xfe\xfd" * 16).decode("ascii")


def _same_bytes(sent: str, want: str) -> bool:
    """Whether two base64 strings, standard or URL-safe, padded or not, hold the same bytes."""
    padded = sent + "=" * (-len(sent) % 4)
    return base64.urlsafe_b64decode(padded.replace("+", "-").replace("/", "_")) == base64.b64decode(want)


@unittest.skipUnless(HAVE_GENAI, "google-genai is not installed: pip install google-genai")
class GoogleGenAIRoundTrip(AdapterRoundTrip, unittest.TestCase):
    """Tool config, signatures dropped from elsewhere and read back, through ``generate_content``."""

    wire = gemini_wire
    call_reasoning = (
        Reasoning(ReasoningKind.THOUGHT_SIGNATURE.value, signature=ROUND_TRIP_SIGNATURE, provider="gemini"),
    )

    unsigned_call_refused = "missing a thought_signature"

    def create_backend(self, url: str) -> Any:
        return GenAISyncBackend(url, {})

    def test_tool_result_history_holds_the_same_signature_bytes(self) -> None:
        """The tool-result history reads back whole, the call's signature as the same bytes.

        google-genai holds ``Part.thought_signature`` as bytes and sends it back as
        URL-safe base64 without padding (googleapis/python-genai#2105): another string,
        the same bytes, which the Gemini API reads alike; the ``tool-result`` cases
        compare it by those bytes, and so does this.
        """
        from dataclasses import replace

        from conformance._multiturn import history_problems, multi_turn_request
        from conformance.wires._turns import ScriptedTurn

        from ._roundtrip import MODEL

        for variant in gemini_wire.variants("tool-result"):
            with self.subTest(variant=variant.name):
                request = multi_turn_request(gemini_wire, "tool-result", variant.name, MODEL, None)
                _, history = self.exchange(request, ScriptedTurn(text="ok."), False)
                self.assertEqual(history.problems, ())
                (assistant,) = history.assistant_turns
                (call,) = assistant.tool_calls
                (want,) = gemini_wire.call_reasoning
                (got,) = call.reasoning
                self.assertTrue(_same_bytes(got.signature, want.signature), (got.signature, want.signature))
                # With the signature's spelling set aside, the history is the case's own.
                respelt = replace(call, reasoning=(replace(got, signature=want.signature),))
                messages = tuple(
                    replace(m, tool_calls=(respelt,)) if m is assistant else m for m in history.messages
                )
                self.assertEqual(
                    history_problems(gemini_wire, variant, replace(history, messages=messages)), []
                )


@unittest.skipUnless(HAVE_GENAI, "google-genai is not installed: pip install google-genai")
@unittest.skipUnless(HAVE_H2, "h2 is not installed: pip install h2")
class GoogleGenAIAsyncH2CRoundTrip(GoogleGenAIRoundTrip):
    """The same through ``client.aio`` over h2c."""

    http2 = True

    def create_backend(self, url: str) -> Any:
        return GenAIAsyncBackend(url, {}, http2=True)


if __name__ == "__main__":
    unittest.main()


def load_tests(loader: unittest.TestLoader, tests: unittest.TestSuite, pattern: Optional[str]) -> Any:
    # By default each case runs through the async adapter once, over HTTP/1.1 or h2c in turn.
    return shared_between(tests, ["GoogleGenAIAsyncConformance", "GoogleGenAIAsyncH2CConformance"])
