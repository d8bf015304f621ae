"""langchain-anthropic's ``ChatAnthropic`` as the user's backend."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from langchain_anthropic import ChatAnthropic

from conformance import BackendConformanceTarget, Reasoning, anthropic_wire

from ._langchain import LangChainChat
from .anthropic_sdk import Messages

LIBRARY = "langchain-anthropic"
KIND = "backend"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("langchain-anthropic", "langchain-core")


class Chat(LangChainChat):
    wire = "anthropic"
    thinking = {"thinking": {"type": "adaptive"}}

    def build(self, url: str) -> Any:
        # Fine-grained tool streaming on, through ChatAnthropic's own betas setting.
        return ChatAnthropic(
            model="conformance-model",
            base_url=url,
            api_key="test",
            max_retries=0,
            betas=["fine-grained-tool-streaming-2025-05-14"],
        )

    def error(self, exc: BaseException) -> Optional[BaseException]:
        return Messages.error(self, exc)  # type: ignore[arg-type]

    def read_reasoning(self, message: Any) -> List[Reasoning]:
        blocks = message.content if isinstance(message.content, list) else []
        found: List[Reasoning] = []
        for b in blocks:
            if isinstance(b, dict) and b.get("type") == "thinking":
                found.append(
                    Reasoning(
                        "thinking",
                        text=b.get("thinking", ""),
                        signature=b.get("signature", ""),
                        provider="anthropic",
                    )
                )
            elif isinstance(b, dict) and b.get("type") == "redacted_thinking":
                found.append(Reasoning("redacted_thinking", data=b.get("data", ""), provider="anthropic"))
        return found

    def reasoning_blocks(self, message: Any) -> List[Dict[str, Any]]:
        return [
            {"type": "thinking", "thinking": r.text, "signature": r.signature}
            if r.kind == "thinking"
            else {"type": "redacted_thinking", "data": r.data}
            for r in message.reasoning
            if r.kind in ("thinking", "redacted_thinking")
        ]


def targets() -> List[BackendConformanceTarget]:
    return [
        BackendConformanceTarget(
            "langchain-anthropic ChatAnthropic", anthropic_wire, Chat, client="langchain-anthropic"
        )
    ]
