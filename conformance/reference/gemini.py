"""A reference backend for the Gemini API, standard library plus ``h2``.

It is the smallest backend that meets the whole contract on this wire, and so the
plainest account of how to read it:

- The model goes in the path (``/v1beta/models/{model}:generateContent``), the key in
  ``x-goog-api-key``; a stream is ``:streamGenerateContent?alt=sse`` (without
  ``alt=sse`` Gemini streams one JSON array instead).
- Decode the stream as bytes and split events before decoding UTF-8 (the SSE
  decoder does). There is no ``[DONE]``: a stream is complete when an event carried
  ``finishReason`` (or a ``promptFeedback.blockReason``), and cut short otherwise.
- Function calls arrive whole, one ``functionCall`` part each, ``args`` an object.
  Gemini 3 gives them an ``id``; Gemini 2.x does not, and then the backend makes one
  up. A turn with calls is a ``tool_calls`` turn though Gemini says ``STOP``; a
  ``MAX_TOKENS`` turn keeps no call.
- ``usageMetadata`` comes on every event; the last one counts.
- A conversation goes back as ``contents``: an assistant turn is a ``model`` turn
  (thought parts, text, then the ``functionCall`` parts with their ids), and the
  results that answer it one ``user`` turn of ``functionResponse`` parts,
  ``{"output": ...}`` or ``{"error": ...}``. A ``thoughtSignature`` goes back on the
  very part it came on, untouched: a call's in ``ToolCall.reasoning``, a thought's
  or a bare one in the turn's ``reasoning``; one from another provider is dropped.
  An id the backend made up for a Gemini 2.x call is not sent back.
- A ``data: {"error": ...}`` event is a failure after the 200, with the HTTP code in
  ``error.code``.
- Every 429 is ``RESOURCE_EXHAUSTED``: a ``QuotaFailure`` whose ``quotaId`` counts per
  day is an exhausted quota; otherwise it is a rate limit, and ``RetryInfo.retryDelay``
  says how long to wait. A wrong key is a 400 whose ``ErrorInfo.reason`` is
  ``API_KEY_INVALID``; a context overflow is a 400 told by its message.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import replace
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ..contract import (
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
from ._base import ReferenceBackend
from ._decoders import SSEDecoder
from ._errors import decode_json, status_kind
from ._google import RPC_KINDS, rpc_error

__all__ = ["GeminiBackend"]

#: ``finishReason`` values that mean a safety system stopped the output.
FILTER_REASONS = frozenset(
    {
        "SAFETY",
        "PROHIBITED_CONTENT",
        "BLOCKLIST",
        "SPII",
        "RECITATION",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        # Vertex AI's Model Armor, screening the prompt or the output.
        "MODEL_ARMOR",
    }
)
FINISH_REASONS: Mapping[str, str] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    **{reason: "content_filter" for reason in FILTER_REASONS},
}
#: ``ErrorInfo.reason`` values that mean the key itself is wrong.
AUTH_REASONS = frozenset({"API_KEY_INVALID", "API_KEY_EXPIRED", "API_KEY_SERVICE_BLOCKED"})
_CONTEXT_OVERFLOW = re.compile(
    r"input token count .* exceeds the maximum|exceeds the maximum number of tokens", re.I
)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _details(error: Mapping[str, Any], type_suffix: str) -> List[Mapping[str, Any]]:
    """The ``error.details`` entries of one ``google.rpc`` type (``QuotaFailure``, ...)."""
    details = error.get("details")
    if not isinstance(details, list):
        return []
    return [d for d in details if isinstance(d, dict) and str(d.get("@type", "")).endswith(f".{type_suffix}")]


class GeminiBackend(ReferenceBackend):
    """Talks to ``{base_url}/{api_version}/models/{model}:generateContent``.

    ``base_url`` is the API root, without the version: ``https://generativelanguage.googleapis.com``.
    """

    provider = "gemini"
    api_version = "v1beta"

    def __init__(self, base_url: str, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        #: The ids made up for calls Gemini sent without one: they are not Gemini's to get back.
        self.made_up_ids: Set[str] = set()

    # -- the request ------------------------------------------------------------------

    def headers(self, stream: bool) -> Dict[str, str]:
        """Headers of every request: the key (in a header, not the URL), JSON, and the caller's own."""
        return {
            "x-goog-api-key": self.api_key,
            "content-type": "application/json",
            "accept": "application/json",
            **self.extra_headers,
        }

    def url(self, chat: ChatRequest, stream: bool) -> str:
        """The method URL: the model is in the path; a stream asks for SSE with ``alt=sse``."""
        model = chat.model[len("models/") :] if chat.model.startswith("models/") else chat.model
        if stream:
            return f"{self.base_url}/{self.api_version}/models/{model}:streamGenerateContent?alt=sse"
        return f"{self.base_url}/{self.api_version}/models/{model}:generateContent"

    def body(self, chat: ChatRequest, stream: bool) -> Dict[str, Any]:
        """The ``GenerateContentRequest``: system messages go to ``systemInstruction``.

        It is the same for a stream: the URL, not the body, asks for one.
        """
        system = [m.content for m in chat.messages if m.role == "system"]
        body: Dict[str, Any] = {"contents": self.contents(chat.messages)}
        if system:
            body["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
        if chat.tools:
            body["tools"] = [
                {
                    "functionDeclarations": [
                        {
                            "name": t.name,
                            "description": t.description,
                            # JSON Schema as is; a schema already in Gemini's own form (its Type
                            # enum in upper case, as gemini_schema() gives) goes in "parameters".
                            _schema_key(t.parameters): dict(t.parameters),
                        }
                        for t in chat.tools
                    ]
                }
            ]
        if chat.tool_choice is not None:
            body["toolConfig"] = {"functionCallingConfig": _calling_config(chat.tool_choice)}
        config: Dict[str, Any] = {}
        if chat.max_tokens is not None:
            config["maxOutputTokens"] = chat.max_tokens
        if chat.thinking:
            # Thought summaries come only to a request that asks for them.
            config["thinkingConfig"] = {"includeThoughts": True}
        if config:
            body["generationConfig"] = config
        return body

    def contents(self, messages: Sequence[Message]) -> List[Dict[str, Any]]:
        """The ``contents``: one turn per message, a run of tool results merged into one user turn."""
        contents: List[Dict[str, Any]] = []
        for message in messages:
            if message.role == "system":
                continue
            if message.role == "tool" and message.tool_result is not None:
                part = {"functionResponse": self.function_response(message)}
                last = contents[-1] if contents else None
                if last is not None and last["role"] == "user" and "functionResponse" in last["parts"][-1]:
                    last["parts"].append(part)
                else:
                    contents.append({"role": "user", "parts": [part]})
            elif message.role == "assistant":
                contents.append({"role": "model", "parts": self.model_parts(message)})
            else:
                contents.append({"role": "user", "parts": [{"text": message.content}]})
        return contents

    def model_parts(self, message: Message) -> List[Dict[str, Any]]:
        """An assistant turn's parts: its thoughts and signatures, its text, then its calls."""
        parts: List[Dict[str, Any]] = []
        for item in self.own(message.reasoning):
            if item.text:
                part: Dict[str, Any] = {"text": item.text, "thought": True}
            else:
                part = {"text": ""}
            if item.signature:
                part["thoughtSignature"] = item.signature
            parts.append(part)
        if message.content:
            parts.append({"text": message.content})
        for call in message.tool_calls:
            function_call: Dict[str, Any] = {"name": call.name, "args": dict(call.arguments)}
            if call.id and call.id not in self.made_up_ids:
                function_call = {"id": call.id, **function_call}
            part = {"functionCall": function_call}
            signature = next((r.signature for r in self.own(call.reasoning) if r.signature), "")
            if signature:
                part["thoughtSignature"] = signature
            parts.append(part)
        return parts or [{"text": ""}]

    def function_response(self, message: Message) -> Dict[str, Any]:
        """One result as a ``functionResponse``: ``{"output": content}`` or ``{"error": {...}}``."""
        result = message.tool_result
        assert result is not None
        response: Dict[str, Any] = {}
        if result.call_id and result.call_id not in self.made_up_ids:
            response["id"] = result.call_id
        response["name"] = result.name
        if result.error is not None:
            response["response"] = {"error": dict(result.error.as_dict())}
        else:
            response["response"] = {"output": result.content}
        return response

    def own(self, items: Sequence[Reasoning]) -> List[Reasoning]:
        """The reasoning items Gemini gave (or no provider claims): thought signatures only."""
        return [
            r
            for r in items
            if r.provider in ("", self.provider) and str(r.kind) == ReasoningKind.THOUGHT_SIGNATURE.value
        ]

    # -- errors -----------------------------------------------------------------------

    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        """The contract's kind for a ``google.rpc.Status`` error object."""
        rpc_status = str(error.get("status") or "")
        message = str(error.get("message") or "")
        for failure in _details(error, "QuotaFailure"):
            for violation in failure.get("violations") or ():
                quota_id = str(violation.get("quotaId", "")) if isinstance(violation, dict) else ""
                # A per-day quota will not come back within any sensible retry.
                if "PerDay" in quota_id or "Daily" in quota_id:
                    return "quota"
        if any(info.get("reason") in AUTH_REASONS for info in _details(error, "ErrorInfo")):
            return "auth"
        if _CONTEXT_OVERFLOW.search(message):
            return "context_overflow"
        if rpc_status in RPC_KINDS:
            return RPC_KINDS[rpc_status]
        code = error.get("code")
        if status is None and isinstance(code, int):
            status = code
        return status_kind(status) if status is not None else "server_error"

    def status_error(self, status: int, headers: Mapping[str, str], raw: bytes) -> LLMError:
        """The error for a failure status, with ``retry_after`` the delay the reply carries.

        An exhausted daily quota names the time until the day resets in its RetryInfo
        too: that is reported, and the error is still not retryable.
        """
        # A streamed request without alt=sse gets its error as a JSON array's one element.
        error = rpc_error(decode_json(raw))
        if error is None:
            error = {"message": f"HTTP {status} with a body that is not a google.rpc.Status"}
        kind = self.error_kind(status, error)
        return self.make_error(kind, error, status=status, retry_after=self.retry_delay(error, headers))

    def retry_delay(self, error: Mapping[str, Any], headers: Mapping[str, str]) -> Optional[float]:
        """``RetryInfo.retryDelay`` (a Duration such as ``"7s"``), then the retry-after headers."""
        for info in _details(error, "RetryInfo"):
            found = _DURATION.match(str(info.get("retryDelay", "")))
            if found:
                return float(found.group(1))
        return self.retry_after(headers)

    def make_error(
        self,
        kind: str,
        error: Mapping[str, Any],
        *,
        status: Optional[int],
        retry_after: Optional[float] = None,
    ) -> LLMError:
        """The error a ``google.rpc.Status`` describes, its status, code and details kept."""
        details = {"status": error.get("status"), "code": error.get("code"), "details": error.get("details")}
        return self.build_error(
            kind, str(error.get("message") or kind), status=status, details=details, retry_after=retry_after
        )

    # -- the answer -------------------------------------------------------------------

    def finish_reason(self, reason: Optional[str], calls: List[ToolCall]) -> str:
        """The contract's finish reason: calls make a ``tool_calls`` turn (Gemini says STOP)."""
        mapped = FINISH_REASONS.get(reason or "", "error")
        if mapped == "stop" and calls:
            return "tool_calls"
        return mapped

    def tool_call(self, function_call: Mapping[str, Any]) -> Optional[ToolCall]:
        """A ``functionCall`` as a :class:`ToolCall`; without an ``id`` one is made up."""
        name, args = function_call.get("name"), function_call.get("args", {})
        if not isinstance(name, str) or not isinstance(args, dict):
            return None
        call_id = function_call.get("id")
        if not call_id:
            call_id = f"call_{secrets.token_hex(12)}"
            self.made_up_ids.add(call_id)
        return ToolCall(str(call_id), name, args)

    def keep_calls(self, calls: List[ToolCall], reason: Optional[str]) -> List[ToolCall]:
        """The calls of a finished turn; none at all on a turn cut off by the limit."""
        return [] if reason == "MAX_TOKENS" else calls

    @staticmethod
    def usage(raw: Any) -> Optional[Usage]:
        """``usageMetadata``; thinking tokens are output tokens too. One that counts nothing
        (Vertex's ``{"trafficType": ...}`` alone) reports no usage."""
        counts = ("promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount", "totalTokenCount")
        if not isinstance(raw, dict) or not any(key in raw for key in counts):
            return None
        output = int(raw.get("candidatesTokenCount", 0)) + int(raw.get("thoughtsTokenCount", 0))
        prompt = int(raw.get("promptTokenCount", 0))
        return Usage(prompt, output, int(raw.get("totalTokenCount", prompt + output)))

    def read_response(self, body: Mapping[str, Any]) -> Tuple[str, List[ToolCall], Optional[str]]:
        """Take in one ``GenerateContentResponse``: its text, its calls, its finish reason.

        A blocked prompt has no candidates, only ``promptFeedback.blockReason``; it
        finishes the turn as ``SAFETY`` would.
        """
        error = body.get("error")
        if isinstance(error, dict):
            raise self.make_error(self.error_kind(None, error), error, status=error.get("code"))
        text: List[str] = []
        calls: List[ToolCall] = []
        reason: Optional[str] = None
        candidates = body.get("candidates")
        if not candidates:
            feedback = body.get("promptFeedback")
            if isinstance(feedback, dict) and feedback.get("blockReason"):
                return "", [], "SAFETY"
            return "", [], None
        first: Mapping[str, Any] = candidates[0] if isinstance(candidates[0], dict) else {}
        content: Mapping[str, Any] = first.get("content") or {}
        for part in content.get("parts") or ():
            if not isinstance(part, dict) or part.get("thought"):
                continue  # a thought summary is not the answer
            if isinstance(part.get("text"), str):
                text.append(part["text"])
            if isinstance(part.get("functionCall"), dict):
                call = self.tool_call(part["functionCall"])
                signature = part.get("thoughtSignature")
                if call is not None and isinstance(signature, str) and signature:
                    # The signature belongs to this very call and goes back on its part.
                    call = replace(call, reasoning=(self.signature(signature),))
                if call is not None:
                    calls.append(call)
        reason = first.get("finishReason") or None
        return "".join(text), calls, reason

    def signature(self, signature: str, text: str = "") -> Reasoning:
        """A thought signature as Gemini sent it, with the thought's text where it ended one."""
        return Reasoning(
            ReasoningKind.THOUGHT_SIGNATURE.value, text=text, signature=signature, provider=self.provider
        )

    def read_thoughts(self, body: Mapping[str, Any], thoughts: _Thoughts) -> List[Reasoning]:
        """Feed one response's thoughts and bare signatures to ``thoughts``; return the items completed."""
        candidates = body.get("candidates")
        if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], dict):
            return []
        content = candidates[0].get("content")
        done: List[Reasoning] = []
        for part in (content.get("parts") if isinstance(content, dict) else None) or ():
            if not isinstance(part, dict) or "functionCall" in part:
                continue
            signature = part.get("thoughtSignature")
            signature = signature if isinstance(signature, str) else ""
            if part.get("thought"):
                text = part.get("text")
                done.extend(thoughts.thought(text if isinstance(text, str) else "", signature))
            elif signature:
                done.extend(thoughts.bare(signature))
        return done

    async def chat(self, chat: ChatRequest) -> ChatResponse:
        """One whole reply."""
        response = await self.send(chat, stream=False)
        body = decode_json(await response.read())
        if not isinstance(body, dict):
            raise self.make_error(
                "server_error", {"message": f"the reply is not a JSON object: {body!r:.200}"}, status=200
            )
        text, calls, reason = self.read_response(body)
        calls = self.keep_calls(calls, reason)
        thoughts = _Thoughts(self)
        reasoning = self.read_thoughts(body, thoughts) + thoughts.close()
        return ChatResponse(
            content=text,
            finish_reason=self.finish_reason(reason, calls),
            tool_calls=tuple(calls),
            usage=self.usage(body.get("usageMetadata")),
            reasoning=tuple(reasoning),
        )

    async def chat_stream(self, chat: ChatRequest) -> AsyncIterator[StreamChunk]:
        """Text deltas as they come, then one last chunk with the calls, reason and usage.

        Calls are held back to the end: only the finish reason says whether the turn
        was cut off, and a cut-off turn yields none.
        """
        response = await self.send(chat, stream=True)
        decoder = self.sse_decoder()
        calls: List[ToolCall] = []
        reason: Optional[str] = None
        usage: Optional[Usage] = None
        thoughts = _Thoughts(self)
        try:
            async for data in response:
                for event in decoder.feed(data):
                    body = json.loads(event.data)
                    text, new_calls, new_reason = self.read_response(body)
                    calls.extend(new_calls)
                    reason = new_reason or reason
                    usage = self.usage(body.get("usageMetadata")) or usage
                    # A thought is yielded once its signature (or the next non-thought) ends it.
                    done = self.read_thoughts(body, thoughts)
                    if done or text:
                        yield StreamChunk(content=text, reasoning=tuple(done))
        finally:
            await response.aclose()
        rest = thoughts.close()
        if rest:
            yield StreamChunk(reasoning=tuple(rest))
        self.check_ended(reason is not None, "a finishReason")
        calls = self.keep_calls(calls, reason)
        yield StreamChunk(
            tool_calls=tuple(calls), finish_reason=self.finish_reason(reason, calls), usage=usage
        )

    def sse_decoder(self) -> SSEDecoder:
        """The event decoder: it splits events on bytes and decodes whole lines only."""
        return SSEDecoder()


class _Thoughts:
    """Gathers thought text across parts and events into whole reasoning items.

    Gemini may cut a thought over several parts; its signature, when it has one, comes
    on the last. An item is complete at its signature, at a bare signature after it,
    or at the end of the turn.
    """

    def __init__(self, backend: GeminiBackend) -> None:
        self.backend = backend
        self.text: List[str] = []

    def thought(self, text: str, signature: str) -> List[Reasoning]:
        self.text.append(text)
        return self.flush(signature) if signature else []

    def bare(self, signature: str) -> List[Reasoning]:
        return [*self.close(), self.backend.signature(signature)]

    def flush(self, signature: str) -> List[Reasoning]:
        text, self.text = "".join(self.text), []
        return [self.backend.signature(signature, text)]

    def close(self) -> List[Reasoning]:
        return self.flush("") if self.text else []


def _schema_key(schema: Mapping[str, Any]) -> str:
    """``parameters`` for a schema in Gemini's form (``"type": "OBJECT"``), else ``parametersJsonSchema``."""
    kind = schema.get("type")
    return "parameters" if isinstance(kind, str) and kind.isupper() else "parametersJsonSchema"


def _calling_config(choice: ToolChoice) -> Dict[str, Any]:
    """``functionCallingConfig``: AUTO, ANY, or ANY limited to the one function named."""
    if choice.mode == "required":
        return {"mode": "ANY"}
    if choice.mode == "tool":
        return {"mode": "ANY", "allowedFunctionNames": [choice.name]}
    return {"mode": "AUTO"}
