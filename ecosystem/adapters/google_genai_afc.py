"""google-genai's own loop: automatic function calling in ``Client().aio.models.generate_content``
(and its stream), on the Gemini API and on Vertex AI.

The gate's tools are given as Python coroutine functions, as the SDK's documentation
shows: the SDK builds each declaration from the function's name, docstring and
signature (here made from the tool's JSON schema), calls the function with the
model's arguments, and sends back ``{"result": ...}``, or ``{"error": ...}`` where
the function raised, under the function's name alone. A function is not handed the
id of the call it runs, which the toolset records each run under, and the SDK runs
it before the reply that carried the call reaches the caller; so the adapter reads
the calls' ids from the reply's bytes as they pass (the aiohttp session given to the
SDK, ``HttpOptions(aiohttp_client=...)``, makes its responses of a ``response_class``
that shows their bytes to the adapter as the SDK reads them) and hands them out by
name, in the order the calls came. The budget is ``maximum_remote_calls``: on the
last request the SDK runs no function and returns the call to the caller, which the
adapter reads as the loop stopped at its budget.
"""

from __future__ import annotations

import inspect
import json
import re
from collections import deque
from typing import Any, Deque, Dict, List, Optional

import aiohttp
from google import genai
from google.genai import types

from conformance import gemini_vertex_wire, gemini_wire
from conformance.gate import AgentLoopTarget, LoopResult, LoopTask

from ._loops import run_tool, until_abort
from .google_genai_sdk import FINISH

LIBRARY = "google-genai"
KIND = "loop"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("google-genai", "aiohttp")

#: A JSON schema's scalar types as the annotations the SDK turns back into a declaration.
TYPES: Dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "object": dict}
FUNCTION_CALL = re.compile(rb'"functionCall"\s*:\s*')


def annotation(schema: Any) -> Any:
    if schema.get("type") == "array":
        return List[annotation(schema.get("items") or {"type": "string"})]  # type: ignore[misc]
    return TYPES.get(str(schema.get("type")), str)


class CallIds:
    """The ids of the calls in the replies read so far, by function name, oldest first."""

    def __init__(self) -> None:
        self.pending: Dict[str, Deque[str]] = {}
        self.buffer = b""
        self.at = 0

    def feed(self, data: bytes) -> None:
        self.buffer += data
        decoder = json.JSONDecoder()
        while True:
            found = FUNCTION_CALL.search(self.buffer, self.at)
            if found is None:
                return
            text = self.buffer[found.end() :].decode("utf-8", "replace")
            try:
                call, _ = decoder.raw_decode(text)
            except ValueError:
                return  # the object is not all here yet: read again with the next bytes
            self.at = found.end()
            if isinstance(call, dict) and call.get("name"):
                self.pending.setdefault(str(call["name"]), deque()).append(str(call.get("id") or ""))

    def take(self, name: str) -> str:
        queue = self.pending.get(name)
        return queue.popleft() if queue else ""


class Lines:
    """A response's body reader whose lines are shown to ``ids`` as the SDK reads them."""

    def __init__(self, inner: Any, ids: CallIds) -> None:
        self.inner = inner
        self.ids = ids

    async def readline(self, *args: Any, **kwargs: Any) -> bytes:
        line: bytes = await self.inner.readline(*args, **kwargs)
        self.ids.feed(line)
        return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def watching(ids: CallIds) -> Any:
    """An aiohttp ``response_class`` whose bodies (whole or read line by line) ``ids`` reads."""

    class Watched(aiohttp.ClientResponse):
        async def start(self, connection: Any) -> Any:
            started = await super().start(connection)
            self.content = Lines(self.content, ids)  # type: ignore[assignment]
            return started

        async def read(self) -> bytes:
            body = await super().read()
            ids.feed(body)
            return body

    return Watched


def gate_function(task: LoopTask, spec: Any, ids: CallIds) -> Any:
    async def invoke(**arguments: Any) -> str:
        result = await run_tool(task, ids.take(spec.name), spec.name, arguments)
        if result.is_error:
            raise RuntimeError(result.text)  # the SDK sends it back as {"error": "..."}
        return result.text

    properties = dict(spec.parameters.get("properties") or {})
    invoke.__name__ = spec.name
    invoke.__doc__ = spec.description
    invoke.__annotations__ = {name: annotation(schema) for name, schema in properties.items()}
    invoke.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation(schema))
            for name, schema in properties.items()
        ],
        return_annotation=str,
    )
    return invoke


def tool_config(task: LoopTask) -> Optional[types.ToolConfig]:
    choice = task.tool_choice
    if choice is None:
        return None
    Mode = types.FunctionCallingConfigMode
    if choice.mode == "tool" and choice.name:
        calling = types.FunctionCallingConfig(mode=Mode.ANY, allowed_function_names=[choice.name])
    else:
        calling = types.FunctionCallingConfig(mode=Mode.ANY if choice.mode == "required" else Mode.AUTO)
    return types.ToolConfig(function_calling_config=calling)


def has_calls(content: Any) -> bool:
    return bool(content and content.parts and any(p.function_call for p in content.parts))


class AutomaticFunctionCalling:
    def __init__(self, url: str) -> None:
        self.url = url

    def client(self, task: LoopTask, session: aiohttp.ClientSession) -> genai.Client:
        return genai.Client(api_key="test", http_options=self.options(task, session))

    def options(self, task: LoopTask, session: aiohttp.ClientSession) -> types.HttpOptions:
        return types.HttpOptions(
            base_url=self.url,
            retry_options=types.HttpRetryOptions(attempts=1),
            timeout=int(task.max_seconds * 1000),
            aiohttp_client=session,
        )

    async def run(self, task: LoopTask) -> LoopResult:
        ids = CallIds()
        session = aiohttp.ClientSession(response_class=watching(ids))
        client = self.client(task, session)
        config = types.GenerateContentConfig(
            tools=[gate_function(task, spec, ids) for spec in task.tools],
            tool_config=tool_config(task),
            automatic_function_calling=types.AutomaticFunctionCallingConfig(
                maximum_remote_calls=task.max_requests
            ),
        )
        try:
            if task.stream:
                return await until_abort(task, self.streamed(client, task, config))
            response = await until_abort(
                task,
                client.aio.models.generate_content(model=task.model, contents=task.prompt, config=config),
            )
        finally:
            await client.aio.aclose()
            await session.close()
        candidate = response.candidates[0] if response.candidates else None
        content = candidate.content if candidate is not None else None
        finish = FINISH.get(str(getattr(candidate, "finish_reason", "") or "").split(".")[-1], "stop")
        stopped = "budget" if has_calls(content) else "done"
        return LoopResult(response.text or "", finish, stopped=stopped)

    async def streamed(self, client: genai.Client, task: LoopTask, config: Any) -> LoopResult:
        text: List[str] = []
        finish, called = "stop", False
        stream = await client.aio.models.generate_content_stream(
            model=task.model, contents=task.prompt, config=config
        )
        ended = False
        async for chunk in stream:
            candidate = chunk.candidates[0] if chunk.candidates else None
            if candidate is None:
                continue
            if ended:
                # The chunks of every request come through one stream: the chunk after a
                # finish reason starts the next turn, and the last turn's text is the answer.
                text, called, ended = [], False, False
            parts = (candidate.content.parts if candidate.content else None) or []
            called = called or any(p.function_call for p in parts)
            text += [p.text for p in parts if p.text]
            if candidate.finish_reason:
                finish = FINISH.get(str(candidate.finish_reason).split(".")[-1], "stop")
                ended = True
        # Calls the SDK left unrun at the end: it stopped at maximum_remote_calls.
        stopped = "budget" if called else "done"
        return LoopResult("".join(text), finish, stopped=stopped)


class VertexAutomaticFunctionCalling(AutomaticFunctionCalling):
    def client(self, task: LoopTask, session: aiohttp.ClientSession) -> genai.Client:
        from google.oauth2.credentials import Credentials

        return genai.Client(
            vertexai=True,
            project="conformance-project",
            location="us-central1",
            credentials=Credentials(token="test"),
            http_options=self.options(task, session),
        )


def targets() -> List[AgentLoopTarget]:
    return [
        AgentLoopTarget(
            "google-genai aio.models.generate_content automatic function calling",
            gemini_wire,
            AutomaticFunctionCalling,
            client="google-genai",
        ),
        AgentLoopTarget(
            "google-genai vertexai aio.models.generate_content automatic function calling",
            gemini_vertex_wire,
            VertexAutomaticFunctionCalling,
            client="google-genai",
        ),
    ]
