"""langchain-google-genai's ``ChatGoogleGenerativeAI`` as the user's backend (it runs on google-genai)."""

from __future__ import annotations

from typing import Any, List, Optional

from langchain_google_genai import ChatGoogleGenerativeAI

from conformance import BackendConformanceTarget, gemini_wire

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
