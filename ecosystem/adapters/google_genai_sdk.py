"""google-genai as the user's backend: ``Client().aio.models.generate_content``, and its stream,
on the Gemini API and on Vertex AI (``Client(vertexai=True, ...)``).

The Vertex row is the same adapter with the client a Vertex user builds, under a
project and a location with ``google.oauth2.credentials.Credentials`` holding a token
with no expiry: the SDK sends it as a bearer and never refreshes it, so nothing leaves
the loopback (the SDK asks ``google.auth.default()`` only when given no credentials).
"""

from __future__ import annotations

import base64
import json
import secrets
from typing import Any, AsyncIterator, Dict, List, Optional

from google import genai
from google.genai import errors, types

from conformance import (
    BackendConformanceTarget,
    ChatRequest,
    ChatResponse,
    LLMError,
    Reasoning,
    StreamChunk,
    gemini_vertex_wire,
    gemini_wire,
)

from ._kit import AsyncAdapter, last_chunk, public_error, response, usage

LIBRARY = "google-genai"
KIND = "backend"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("google-genai",)

FINISH = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "BLOCKLIST": "content_filter",
    "SPII": "content_filter",
    "RECITATION": "content_filter",
    "MODEL_ARMOR": "content_filter",  # Vertex AI's Model Armor stopped the output
    # Vertex AI: the model called a function the request never declared; the turn failed.
    "UNEXPECTED_TOOL_CALL": "error",
}


def gemini_contents(request: ChatRequest) -> List[types.Content]:
    out: List[types.Content] = []
    for message in request.messages:
        if message.role == "tool" and message.tool_result is not None:
            result = message.tool_result
            answer: Dict[str, Any] = (
                {"error": dict(result.error.as_dict())}
                if result.error is not None
                else {"output": result.content}
            )
            part = types.Part(
                function_response=types.FunctionResponse(
                    id=None if result.call_id.startswith(MADE_UP) else result.call_id,
                    name=result.name,
                    response=answer,
                )
            )
            last = out[-1] if out else None
            if last is not None and last.role == "user" and last.parts and last.parts[-1].function_response:
                last.parts.append(part)
            else:
                out.append(types.Content(role="user", parts=[part]))
        elif message.role == "assistant":
            parts: List[types.Part] = []
            for item in message.reasoning:
                if item.kind == "thought_signature" and item.text:
                    parts.append(
                        types.Part(
                            text=item.text, thought=True, thought_signature=base64.b64decode(item.signature)
                        )
                    )
            if message.content:
                parts.append(types.Part(text=message.content))
            for c in message.tool_calls:
                signed = [r for r in c.reasoning if r.kind == "thought_signature"]
                parts.append(
                    types.Part(
                        function_call=types.FunctionCall(
                            id=None if c.id.startswith(MADE_UP) else c.id, name=c.name, args=dict(c.arguments)
                        ),
                        thought_signature=base64.b64decode(signed[0].signature) if signed else None,
                    )
                )
            out.append(types.Content(role="model", parts=parts))
        elif message.role == "user":
            out.append(types.Content(role="user", parts=[types.Part(text=message.content)]))
    return out


#: The prefix of a call id made up where the provider sent none: never sent back.
MADE_UP = "made-up-"


def output_tokens(meta: Any) -> Optional[int]:
    """The turn's output as the contract counts it: the answer's tokens and the thoughts'.

    ``candidates_token_count`` leaves the thoughts out, and is absent where a thinking
    model spent its whole budget on them (a MAX_TOKENS turn with no parts).
    """
    parts = (meta.candidates_token_count, meta.thoughts_token_count)
    if all(p is None for p in parts):
        return None
    return sum(int(p or 0) for p in parts)


def genai_error(wire: str, exc: BaseException) -> Optional[BaseException]:
    """The error google-genai raised as the kit's, read as ``wire``'s bytes; ``None`` if not the SDK's."""
    if isinstance(exc, errors.APIError):
        headers = getattr(exc.response, "headers", None) or {}
        details = exc.details[0] if isinstance(exc.details, list) and exc.details else exc.details
        if isinstance(details, dict) and isinstance(details.get("message"), str) and "error" not in details:
            # On the async streaming path the SDK keeps the error body as text under
            # "message" (the whole-reply path parses it): read it back.
            try:
                details = json.loads(details["message"])
            except ValueError:
                pass
        body = details if isinstance(details, dict) else {"error": {"code": exc.code, "message": exc.message}}
        return public_error(wire, status=int(exc.code), headers=headers, body=json.dumps(body).encode())
    return None


def merged(items: List[Reasoning]) -> List[Reasoning]:
    """A streamed thought's text and the signature that came on a later part, as one item."""
    out: List[Reasoning] = []
    for item in items:
        last = out[-1] if out else None
        if last is not None and last.text and not last.signature:
            # A thought streamed in pieces: its signature comes on the last of them.
            out[-1] = Reasoning(
                "thought_signature", text=last.text + item.text, signature=item.signature, provider="gemini"
            )
        else:
            out.append(item)
    return out


class Generate(AsyncAdapter):
    wire = "gemini"

    def __init__(self, url: str) -> None:
        options = types.HttpOptions(base_url=url, retry_options=types.HttpRetryOptions(attempts=1))
        self.client = genai.Client(api_key="test", http_options=options)

    async def aclose(self) -> None:
        await self.client.aio.aclose()

    def config(self, request: ChatRequest) -> types.GenerateContentConfig:
        system = "\n".join(m.content for m in request.messages if m.role == "system")
        tools = (
            [
                types.Tool(
                    function_declarations=[
                        types.FunctionDeclaration(
                            name=t.name, description=t.description, parameters_json_schema=dict(t.parameters)
                        )
                        for t in request.tools
                    ]
                )
            ]
            if request.tools
            else None
        )
        return types.GenerateContentConfig(
            tools=tools,
            system_instruction=system or None,
            max_output_tokens=request.max_tokens,
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            thinking_config=types.ThinkingConfig(include_thoughts=True) if request.thinking else None,
        )

    def error(self, exc: BaseException) -> Optional[BaseException]:
        return genai_error(self.wire, exc)

    @staticmethod
    def read(parts: Any, text: List[str], calls: List[Any], reasoning: List[Reasoning]) -> None:
        for part in parts or ():
            signature = base64.b64encode(part.thought_signature).decode() if part.thought_signature else ""
            if part.function_call is not None:
                call = part.function_call
                calls.append(
                    (
                        call.id or f"{MADE_UP}{secrets.token_hex(8)}",
                        call.name,
                        dict(call.args or {}),
                        signature,
                    )
                )
            elif part.thought:
                reasoning.append(
                    Reasoning(
                        "thought_signature", text=part.text or "", signature=signature, provider="gemini"
                    )
                )
            else:
                text.append(part.text or "")
                if signature:
                    reasoning.append(Reasoning("thought_signature", signature=signature, provider="gemini"))

    @staticmethod
    def signed(turn: ChatResponse, calls: List[Any]) -> ChatResponse:
        """The calls with the signature that came on their part."""
        from dataclasses import replace

        signatures = {c[0] or c[1]: c[3] for c in calls}
        fixed = tuple(
            replace(
                c,
                reasoning=(
                    Reasoning("thought_signature", signature=signatures[c.id or c.name], provider="gemini"),
                ),
            )
            if signatures.get(c.id or c.name)
            else c
            for c in turn.tool_calls
        )
        return replace(turn, tool_calls=fixed)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        done = await self.client.aio.models.generate_content(
            model=request.model, contents=gemini_contents(request), config=self.config(request)
        )
        text: List[str] = []
        calls: List[Any] = []
        reasoning: List[Reasoning] = []
        candidate = (done.candidates or [None])[0]
        if candidate is not None and candidate.content is not None:
            self.read(candidate.content.parts, text, calls, reasoning)
        reason = candidate.finish_reason.name if candidate is not None and candidate.finish_reason else "STOP"
        if done.prompt_feedback is not None and done.prompt_feedback.block_reason is not None:
            reason = "SAFETY"  # the prompt itself was blocked: no candidate at all
        meta = done.usage_metadata
        used = meta and usage(meta.prompt_token_count, output_tokens(meta), meta.total_token_count)
        turn = response("".join(text), FINISH.get(reason, "stop"), [c[:3] for c in calls], used, reasoning)
        return self.signed(turn, calls)

    async def events(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        stream = await self.client.aio.models.generate_content_stream(
            model=request.model, contents=gemini_contents(request), config=self.config(request)
        )
        calls: List[Any] = []
        reasoning: List[Reasoning] = []
        reason, used = "", None
        async for chunk in stream:
            text: List[str] = []
            candidate = (chunk.candidates or [None])[0]
            if candidate is not None and candidate.content is not None:
                self.read(candidate.content.parts, text, calls, reasoning)
            if text:
                yield StreamChunk("".join(text))
            if candidate is not None and candidate.finish_reason:
                reason = candidate.finish_reason.name
            if chunk.prompt_feedback is not None and chunk.prompt_feedback.block_reason is not None:
                reason = "SAFETY"
            meta = chunk.usage_metadata
            if meta and meta.prompt_token_count is not None:
                used = usage(meta.prompt_token_count, output_tokens(meta), meta.total_token_count)
        if not reason:
            # Cut short, however cleanly the body closed: the provider sent no error and no
            # status but the 200 it began with, so none is made up.
            raise LLMError.from_kind(
                "server_error",
                "the stream ended before a candidate with finishReason: the turn was cut short",
                provider=self.wire,
                details={"kind": "server_error"},
            )
        last = last_chunk(FINISH.get(reason, "stop"), [c[:3] for c in calls], used, merged(reasoning))
        turn = self.signed(ChatResponse("", last.finish_reason or "stop", last.tool_calls, used), calls)
        yield StreamChunk("", turn.tool_calls, turn.finish_reason, used, last.reasoning)


class VertexGenerate(Generate):
    wire = "gemini-vertex"

    def __init__(self, url: str) -> None:
        from google.oauth2.credentials import Credentials

        options = types.HttpOptions(base_url=url, retry_options=types.HttpRetryOptions(attempts=1))
        self.client = genai.Client(
            vertexai=True,
            project="conformance-project",
            location="us-central1",
            credentials=Credentials(token="test"),
            http_options=options,
        )


def targets() -> List[BackendConformanceTarget]:
    return [
        BackendConformanceTarget(
            "google-genai aio.models.generate_content", gemini_wire, Generate, client="google-genai"
        ),
        BackendConformanceTarget(
            "google-genai vertexai aio.models.generate_content",
            gemini_vertex_wire,
            VertexGenerate,
            client="google-genai",
        ),
    ]
