"""The anthropic SDK's own loop: ``AsyncAnthropic().beta.messages.tool_runner``, whole and streamed.

Made with ``thread=False``: by default the runner keeps the conversation in a
server-side message thread (a beta) and sends only the new messages each turn, which
a provider or gateway that keeps no threads refuses. The runner calls a tool with its
input alone; the ids of a turn's calls are read from the message it yields before it
runs that message's tools, and handed out in the order it calls them.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Deque, Dict, List, Optional

import anthropic
from anthropic.lib.tools import BetaAsyncFunctionTool, ToolError

from conformance import anthropic_wire
from conformance.gate import AgentLoopTarget, LoopResult, LoopTask

from ._loops import run_tool, until_abort

LIBRARY = "anthropic"
KIND = "loop"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("anthropic",)
CHOICE = {"auto": {"type": "auto"}, "required": {"type": "any"}}
#: The last message's stop_reason in the contract's spelling: the runner stops on each of
#: these and hands that message back, its tool_use blocks unrun.
FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "refusal": "refusal",
    "tool_use": "tool_calls",
}


class ToolRunnerLoop:
    def __init__(self, url: str) -> None:
        self.url = url

    async def run(self, task: LoopTask) -> LoopResult:
        client = anthropic.AsyncAnthropic(
            base_url=self.url, api_key="test", max_retries=0, timeout=task.max_seconds
        )
        pending: Dict[str, Deque[str]] = {}

        def make(spec: Any) -> BetaAsyncFunctionTool[Any]:
            async def invoke(**arguments: Any) -> str:
                queue = pending.get(spec.name)
                call_id = queue.popleft() if queue else ""
                result = await run_tool(task, call_id, spec.name, arguments)
                if result.is_error:
                    raise ToolError(result.text)  # the runner sends it with is_error: true
                return result.text

            return BetaAsyncFunctionTool(
                invoke, name=spec.name, description=spec.description, input_schema=dict(spec.parameters)
            )

        kwargs: Dict[str, Any] = {
            "model": task.model,
            "max_tokens": 1024,
            "messages": [{"role": "user", "content": task.prompt}],
            "tools": [make(spec) for spec in task.tools],
            "max_iterations": task.max_requests,
            "thread": False,
            # Fine-grained tool streaming, through the SDK's own beta list: the only mode in
            # which the API streams a tool's input unvalidated, so the corrupt-arguments
            # stage plays (and judges the runner) only to a request that turns it on.
            "betas": ["fine-grained-tool-streaming-2025-05-14"],
        }
        choice = task.tool_choice
        if choice is not None:
            kwargs["tool_choice"] = (
                {"type": "tool", "name": choice.name} if choice.mode == "tool" else CHOICE[choice.mode]
            )

        async def drive() -> Optional[Any]:
            message = None
            async for item in client.beta.messages.tool_runner(stream=task.stream, **kwargs):
                if task.stream:
                    async for _ in item:
                        pass
                    message = await item.get_final_message()
                else:
                    message = item
                pending.clear()
                for block in message.content:
                    if block.type == "tool_use":
                        pending.setdefault(block.name, deque()).append(block.id)
            return message

        try:
            message = await until_abort(task, drive())
        finally:
            await client.close()
        if message is None:
            raise RuntimeError("the tool runner ended without a message")
        text = "".join(b.text for b in message.content if b.type == "text")
        finish = FINISH.get(message.stop_reason or "", "stop")
        # A last turn still asking for tools means the runner stopped at max_iterations; on any
        # other stop reason (max_tokens, refusal) it stops by design and runs none of the calls.
        return LoopResult(text, finish, stopped="budget" if finish == "tool_calls" else "done")


def targets() -> List[AgentLoopTarget]:
    return [
        AgentLoopTarget(
            "anthropic AsyncAnthropic beta.messages.tool_runner",
            anthropic_wire,
            ToolRunnerLoop,
            client="anthropic",
        )
    ]
