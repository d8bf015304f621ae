"""langchain-google-genai's ``ChatGoogleGenerativeAI`` as the user's backend (it runs on google-genai)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from langchain_google_genai import ChatGoogleGenerativeAI

from conformance import BackendConformanceTarget, ChatResponse, gemini_wire

from ._kit import with_signatures
from ._langchain import LangChainChat
from .google_genai_sdk import Generate

LIBRARY = "langchain-google-genai"
KIND = "backend"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("langchain-google-genai", "langchain-core")


class Chat(LangChainChat):
    wire = "gemini"

    def build(self, url: str) -> Any:
        return ChatGoogleGenerativeAI(
            model="conformance-model", google_api_key="test", base_url=url, max_retries=0
        )

    def error(self, exc: BaseException) -> Optional[BaseException]:
        cause = exc
        # The integration raises its own error around google-genai's, kept as the cause.
        while cause is not None and type(cause).__module__.startswith("langchain"):
            cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
        return Generate.error(self, cause) if cause is not None else None  # type: ignore[arg-type]


    #: Where ChatGoogleGenerativeAI keeps each functionCall part's thought signature: a map from
    #: the call's id to the signature (base64) in the message's additional_kwargs, which it
    #: reads back from there when the turn is sent again.
    SIGNATURES = "__gemini_function_call_thought_signatures__"

    def call_reasoning(self, turn: ChatResponse, message: Any) -> ChatResponse:
        kept = (message.additional_kwargs or {}).get(self.SIGNATURES) or {}
        return with_signatures(turn, {str(k): str(v) for k, v in kept.items() if v})

    def extra_kwargs(self, message: Any) -> Dict[str, Any]:
        kept = {
            c.id: r.signature
            for c in message.tool_calls
            for r in c.reasoning
            if r.kind == "thought_signature" and r.signature
        }
        return {self.SIGNATURES: kept} if kept else {}


#: What this adapter leaves out, and why: a gap of the adapter, not a verdict on the library.
NOT_MAPPED = "the adapter does not read langchain-google-genai's thought signatures yet"


def targets() -> List[BackendConformanceTarget]:
    return [
        BackendConformanceTarget(
            "langchain-google-genai ChatGoogleGenerativeAI",
            gemini_wire,
            Chat,
            skip={"reasoning": NOT_MAPPED, "tool-result:reasoning-then-call": NOT_MAPPED},
            client="langchain-google-genai",
        )
    ]
