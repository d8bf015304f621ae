"""The bugs both OpenAI zoos share: how an OpenAI error body is misread."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from conformance.reference._openai import OVERLOAD_CODES, OpenAIBase


class OverloadedOnlyByCode(OpenAIBase):
    """Calls an error an overload only when its code says ``server_is_overloaded``.

    It passes the in-stream ``server_is_overloaded`` shape and misses the 503
    ``server_error`` whose code is null and whose message alone says "overloaded".
    """

    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        if kind == "overloaded" and error.get("code") not in OVERLOAD_CODES:
            return "server_error"
        return kind


class StreamErrorAsOverload(OpenAIBase):
    """Calls every in-stream error it cannot place an overload, as the first one it met was."""

    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "overloaded" if status is None and kind == "server_error" else kind


class QuotaOnlyOn429(OpenAIBase):
    """Recognises ``insufficient_quota`` on a 429 only, not inside a stream."""

    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        if kind == "quota" and status != 429:
            return "server_error"
        return kind
