"""Ollama's error table and variants: each real shape it answers a scenario with.

An error is ``{"error": "<message>"}`` with the HTTP status; after the first line of
a stream the status can no longer change, and a failure is one last ``{"error"}``
line. A variant names another shape of the same scenario, with the capture or
source it was seen in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Tuple

from ...contract import Reasoning, ReasoningKind
from ...fixture import CONFORMANCE_FIXTURE as FX
from .._ids import provider_id
from .._variants import CONTEXT_OVERFLOW_OR_BAD_REQUEST, Variant, stream_cut_variants
from ._replies import JSON_TYPE, response_headers

if TYPE_CHECKING:
    from ...provider.replies import JsonReply

__all__ = ["ERRORS", "RUNNER_ERROR", "SERVER_BUSY", "VARIANTS", "VARIANT_ERRORS", "error_reply"]

#: The message of Ollama's ``ErrMaxQueue``: the queue of pending requests is full.
SERVER_BUSY = "server busy, please try again.  maximum pending requests exceeded"

#: scenario -> (status, body). Only what an Ollama server (or ollama.com behind it) says.
ERRORS: Mapping[str, Tuple[int, Dict[str, Any]]] = {
    # Ollama's cloud models answer 429 only for a used-up session, hourly or weekly
    # usage limit, with no retry-after header: that is a quota, not a rate limit.
    "quota": (
        429,
        {
            "error": "you (conformance) have reached your weekly usage limit, upgrade for higher "
            "limits: https://ollama.com/upgrade"
        },
    ),
    # A cloud model without sign-in (or ollama.com with a wrong key).
    "auth": (
        401,
        {
            "error": "unauthorized",
            "signin_url": "https://ollama.com/connect?name=conformance&key="
            + provider_id("", "ollama/signin", 64),
        },
    ),
    "overloaded": (503, {"error": SERVER_BUSY}),
    # A runner that died, as Ollama 0.30.0 and later word it (llm/llama_server.go).
    "server-error": (500, {"error": "llama-server process has terminated: exit status 2"}),
    # Only when input truncation is off; by default Ollama drops the oldest messages.
    # ollama/ollama llm/llama_server.go (the whole text, with its advice).
    "context-overflow": (
        400,
        {
            "error": "the prompt is longer than the context length currently available to the model; "
            "shorten the prompt, adjust the context length in settings, or use a model with a "
            "longer context length"
        },
    ),
}

#: (scenario, variant) -> the error that variant answers with, where it is not :data:`ERRORS`'.
VARIANT_ERRORS: Mapping[Tuple[str, str], Tuple[int, Dict[str, Any]]] = {
    # The hourly limit asks to wait, which a backend must not take for a rate limit.
    ("quota", "hourly-usage-limit"): (
        429,
        {"error": "you've reached your hourly usage limit, please wait or upgrade to continue"},
    ),
    # The same failure as Ollama 0.24.0 and before word it (llm/server.go), before
    # llama-server replaced the runner.
    ("server-error", "runner-terminated-500"): (
        500,
        {"error": "llama runner process has terminated: exit status 2"},
    ),
    # A cloud model the local server cannot reach: the proxy's own error text as is.
    ("server-error", "cloud-unreachable-502"): (
        502,
        {"error": 'Post "https://ollama.com:443/api/chat": dial tcp: lookup ollama.com: no such host'},
    ),
}

#: What a runner that fails after the 200 says: a server error, not an overload (the
#: queue is only full before the first line, and that is a 503).
RUNNER_ERROR = "an error was encountered while running the model: unexpected EOF"

#: What a 429 from ollama.com may be reported as: Ollama's errors are a message and a
#: status only, and only the message says the limit is a usage quota, not a rate.
QUOTA_OR_RATE_LIMIT = ("quota", "rate_limit")

VARIANTS: Mapping[str, Tuple[Variant, ...]] = {
    "reasoning": (
        Variant(
            "thinking",
            "message.thinking before message.content (streamed: thinking lines, then content lines)",
            "ollama/ollama docs/api.md (the thinking field of a chat message); "
            "https://docs.ollama.com/capabilities/thinking",
            reasoning=(Reasoning(ReasoningKind.THINKING.value, text=FX.thinking, provider="ollama"),),
            asks="thinking",
            source_kind="docs",
        ),
    ),
    # No cut falls between the finish reason and the end: done_reason comes on the done line.
    **stream_cut_variants(
        'the "done": true line',
        "https://github.com/ollama/ollama/blob/main/docs/api.md (the final response of a stream)",
        "Growth-Circle/cadis#2950 (an Ollama stream that ended before done:true reported as complete)",
        'https://github.com/ollama/ollama/blob/main/docs/api.md (a reply with "stream": false)',
        call="the whole call on its line (Ollama never splits one)",
    ),
    "quota": (
        Variant(
            "weekly-usage-limit",
            "429 weekly usage limit, upgrade for higher limits",
            "HomericIntelligence/Scylla#346; continuedev/continue#11444 (the session limit, same form)",
            error_kinds=QUOTA_OR_RATE_LIMIT,
            source_kind="issue",
        ),
        Variant(
            "hourly-usage-limit",
            "429 hourly usage limit, please wait or upgrade to continue",
            "continuedev/continue#9233; continuedev/continue#10579 (the session limit, same form)",
            error_kinds=QUOTA_OR_RATE_LIMIT,
            source_kind="issue",
        ),
    ),
    # Ollama's errors are a status and a message: only the message says the prompt does not fit.
    "context-overflow": (
        Variant(
            "prompt-too-long-400",
            "400 the prompt is longer than the context length (context overflow in the message only)",
            "ollama/ollama llm/llama_server.go (the whole text, with its advice; sent only when input "
            "truncation is off)",
            error_kinds=CONTEXT_OVERFLOW_OR_BAD_REQUEST,
            source_kind="provider-source",
        ),
    ),
    "server-error": (
        Variant(
            "llama-server-terminated-500",
            "500 llama-server process has terminated (Ollama 0.30.0 and later)",
            "ollama/ollama llm/llama_server.go at v0.30.0 (waitUntilRunning: \"llama-server process "
            "has terminated: %s\" with the exit status) and server/routes.go (handleScheduleError: "
            "500); ollama/ollama#16645 (v0.30.6)",
            source_kind="provider-source",
        ),
        Variant(
            "runner-terminated-500",
            "500 llama runner process has terminated (Ollama 0.24.0 and before)",
            "ollama/ollama llm/server.go at v0.24.0 (\"llama runner process has terminated: %w\", "
            "the wording up to v0.24.0) and server/routes.go (a 500); "
            "ollama/ollama#11775",
            source_kind="provider-source",
        ),
        Variant(
            "cloud-unreachable-502",
            "502 from the cloud proxy when ollama.com cannot be reached",
            "ollama/ollama server/cloud_proxy.go; docs/api/errors.mdx (502)",
            source_kind="provider-source",
        ),
    ),
    "stream-error": (
        Variant(
            "runner-error",
            'a mid-stream {"error"} line: an error was encountered while running the model '
            "(a retryable server_error)",
            "ollama/ollama docs/api/errors.mdx; llm/llama_server.go",
            error_kind="server_error",
            source_kind="provider-source",
        ),
    ),
}


def error_reply(scenario: str, variant: str = "") -> JsonReply:
    """The ``{"error": ...}`` body and status Ollama answers ``scenario`` (in ``variant``) with."""
    from ...provider.replies import JsonReply

    status, body = VARIANT_ERRORS.get((scenario, variant)) or ERRORS[scenario]
    return JsonReply(body, status=status, headers=response_headers(), content_type=JSON_TYPE)
