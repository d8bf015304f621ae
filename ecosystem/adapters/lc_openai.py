"""langchain-openai's ``ChatOpenAI`` as the user's backend, on Chat Completions and on Responses."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from langchain_openai import ChatOpenAI

from conformance import BackendConformanceTarget, Reasoning, openai_chat_wire, openai_responses_wire

from ._langchain import LangChainChat
from .openai_sdk import openai_error

LIBRARY = "langchain-openai"
KIND = "backend"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("langchain-openai", "langchain-core")


class Chat(LangChainChat):
    wire = "openai-chat"

    def build(self, url: str) -> Any:
        return ChatOpenAI(
            model="conformance-model", base_url=f"{url}/v1", api_key="test", max_retries=0, stream_usage=True
        )

    def error(self, exc: BaseException) -> Optional[BaseException]:
        return openai_error(self.wire, exc)


class Responses(Chat):
    wire = "openai-responses"

    def build(self, url: str) -> Any:
        return ChatOpenAI(
            model="conformance-model",
            base_url=f"{url}/v1",
            api_key="test",
            max_retries=0,
            use_responses_api=True,
            output_version="responses/v1",
        )

    def read_reasoning(self, message: Any) -> List[Reasoning]:
        blocks = message.content if isinstance(message.content, list) else []
        return [
            Reasoning(
                "reasoning_item",
                id=b.get("id", ""),
                summary=tuple(s.get("text", "") for s in b.get("summary") or ()),
                data=b.get("encrypted_content") or "",
                provider="openai-responses",
            )
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "reasoning"
        ]

    def reasoning_blocks(self, message: Any) -> List[Dict[str, Any]]:
        return [
            {
                "type": "reasoning",
                "id": r.id,
                "summary": [{"type": "summary_text", "text": t} for t in r.summary],
                **({"encrypted_content": r.data} if r.data else {}),
            }
            for r in message.reasoning
            if r.kind == "reasoning_item"
        ]


def targets() -> List[BackendConformanceTarget]:
    return [
        BackendConformanceTarget(
            "langchain-openai ChatOpenAI", openai_chat_wire, Chat, client="langchain-openai"
        ),
        BackendConformanceTarget(
            "langchain-openai ChatOpenAI use_responses_api",
            openai_responses_wire,
            Responses,
            client="langchain-openai",
        ),
    ]
