"""langchain-aws's ``ChatBedrockConverse`` as the user's backend (it runs on boto3)."""

from __future__ import annotations

from typing import Any, List, Optional

from botocore.config import Config
from botocore.exceptions import ClientError
from langchain_aws import ChatBedrockConverse

from conformance import BackendConformanceTarget, bedrock_converse_wire

from ._langchain import LangChainChat
from .boto3_converse import NO_ABORT, bedrock_error

LIBRARY = "langchain-aws"
KIND = "backend"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("langchain-aws", "langchain-core", "boto3")


class Chat(LangChainChat):
    wire = "bedrock-converse"

    def build(self, url: str) -> Any:
        return ChatBedrockConverse(
            model="conformance-model",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
            # For a model id it has not verified as streaming-capable the integration falls
            # back to the whole-reply API even in astream; this is its documented override.
            disable_streaming=False,
        )

    def error(self, exc: BaseException) -> Optional[BaseException]:
        # ChatBedrockConverse's ConnectionError for a stream without messageStop is read by
        # the shared transport rule (_kit.LIBRARY_TRANSPORTS), as every library's is.
        return bedrock_error(exc) if isinstance(exc, ClientError) else None


#: What this adapter leaves out, and why: a gap of the adapter, not a verdict on the library.
NOT_MAPPED = "the adapter does not read langchain-aws's reasoning_content blocks yet"


def targets() -> List[BackendConformanceTarget]:
    # Its async methods run boto3's blocking calls in a thread: an abort cannot reach them.
    return [
        BackendConformanceTarget(
            "langchain-aws ChatBedrockConverse",
            bedrock_converse_wire,
            Chat,
            skip={
                "abort": NO_ABORT,
                "cancel": NO_ABORT,
                "reasoning": NOT_MAPPED,
                "tool-result:reasoning": NOT_MAPPED,
                "tool-result:reasoning-then-call": NOT_MAPPED,
            },
            client="langchain-aws",
        )
    ]
