"""The OpenAI-compatible servers a Chat Completions wire can be told to speak for: which
scenario each server answers in a shape of its own, and where that shape was seen.

Strategy: a server's shapes are variants of the scenarios it has a recording for, and
they run only on a wire that names the server (``OpenAIChatWire(servers=...)``): a
backend written for api.openai.com alone never meets them, a gateway for "any
OpenAI-compatible server" meets each of them. Where a scenario had one shape, the
api.openai.com shape becomes its first variant, ``openai``, so the default stays what
api.openai.com sends. Each row is ``(server, Variant)``; the bytes are ``_server_replies``' and
``_llama_cpp``'s.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Sequence, Tuple

from ...contract import Reasoning, ReasoningKind
from ...fixture import CONFORMANCE_FIXTURE as FX
from .._ids import provider_id
from .._variants import CONTEXT_OVERFLOW_OR_BAD_REQUEST, Variant
from ._replies import TOOL_CALL_ID
from ._server_errors import GROQ_RETRY_AFTER

__all__ = [
    "DEEPSEEK_CALL_ID",
    "DEEPSEEK_THINKING",
    "GROQ_CALL_ID",
    "MISTRAL_CALL_ID",
    "SERVERS",
    "SERVER_SHAPES",
    "check_servers",
    "with_servers",
]

#: The servers a wire can name, in the order their variants run.
SERVERS: Tuple[str, ...] = ("mistral", "groq", "deepseek", "llama.cpp", "openrouter")

#: Mistral's call ids: 9 letters and digits (``gSIMJiOkT``).
MISTRAL_CALL_ID = provider_id("", "openai-chat/mistral/tool-call", 9)
#: Groq's: 9 lower-case letters and digits (``tk85n1k4m``).
GROQ_CALL_ID = provider_id("", "openai-chat/groq/tool-call", 9, "0123456789abcdefghijklmnopqrstuvwxyz")
#: DeepSeek's: ``call_00_`` and 24 letters and digits, the ``00`` the call's position.
DEEPSEEK_CALL_ID = provider_id("call_00_", "openai-chat/deepseek/tool-call")
#: The thinking DeepSeek's reasoner returns before its answer or its call.
DEEPSEEK_THINKING = (Reasoning(ReasoningKind.THINKING.value, text=FX.thinking, provider="openai"),)

_VERCEL = "vercel/ai packages/{package}/src/{where}__fixtures__/{stem}.chunks.txt and {stem}.json"

#: api.openai.com's own shape of a scenario, named where the servers add theirs.
OPENAI_SHAPES: Mapping[str, Variant] = {
    "text": Variant(
        "openai",
        "api.openai.com: usage in a choices: [] chunk after the finish reason, when asked for",
        _VERCEL.format(package="openai", where="chat/", stem="openai-text") + " (gpt-4.1-nano)",
        source_kind="capture",
    ),
    "tool-call": Variant(
        "openai",
        "api.openai.com: the call opened with id and name, then argument fragments by index",
        "crewAIInc/crewAI cassette test_handle_streaming_tool_calls.yaml (36 of 52 recorded "
        "tool-call streams open the call in the role chunk)",
        call_id=TOOL_CALL_ID,
        source_kind="capture",
    ),
    "context-overflow": Variant(
        "openai",
        "api.openai.com: 400 invalid_request_error / context_length_exceeded",
        "chathub-dev/chathub#126 and crewAIInc/crewAI-examples#121 (raw 400 bodies: "
        "invalid_request_error, context_length_exceeded, param messages)",
        source_kind="issue",
    ),
    "auth": Variant(
        "openai",
        "api.openai.com: 401 invalid_request_error / invalid_api_key, the fields under error",
        "https://platform.openai.com/docs/guides/error-codes/api-errors (401 Incorrect API key provided)",
        source_kind="docs",
    ),
    "quota": Variant(
        "openai",
        "api.openai.com: 429 insufficient_quota, told from a rate limit by its code",
        "https://platform.openai.com/docs/guides/error-codes/api-errors (429 You exceeded your current "
        "quota)",
        source_kind="docs",
    ),
}

#: Mistral's 429: its fields at the top level, not under ``error`` (``_server_errors``).
_MISTRAL_ENVELOPE = "top-level {object: error, message, type: rate_limited, param, code: \"1300\"}"

#: DeepSeek's prompt past the window: OpenAI's error object, but its code repeats its type
#: (invalid_request_error), so only the message says the context length was passed.
_DEEPSEEK_OVERFLOW = Variant(
    "deepseek",
    "DeepSeek: 400 invalid_request_error, code invalid_request_error (context overflow in the message only)",
    "NoFxAiOS/nofx#1278 (the raw 400 body); FoundationAgents/OpenManus#79 and evalstate/fast-agent#621 "
    "(the same body from deepseek-chat)",
    error_kinds=CONTEXT_OVERFLOW_OR_BAD_REQUEST,
    source_kind="issue",
)

#: OpenRouter's prompt past the window: a 400 in its envelope, only the message naming the overflow.
_OPENROUTER_OVERFLOW = Variant(
    "openrouter",
    "OpenRouter: 400, {error: {message, code: 400, metadata: {provider_name}}}, the overflow in the "
    "message only; the same before a stream",
    "Aider-AI/aider#3721 (the raw 400 body from openrouter.ai, 2025-04); OpenHands/OpenHands#9937 (the "
    "same message, 2025-07)",
    error_kinds=CONTEXT_OVERFLOW_OR_BAD_REQUEST,
    source_kind="issue",
)

#: The llama-server build that sent the envelope played before an in-stream error.
_LLAMA_CPP_CHUNKS = "openai-php/client#780 (the chunks of llama-server b9554: key order, timings)"

#: OpenRouter's error envelope: the fields under error, code the HTTP status as a number.
_OPENROUTER_ENVELOPE = "{error: {message, code: <the status, a number>[, metadata]}}, no type"
#: Where OpenRouter documents its error envelope and its failure inside a stream.
_OPENROUTER_ERRORS_DOCS = "https://openrouter.ai/docs/api-reference/errors (error.code the HTTP status)"

#: scenario (or scenario/mode) -> (server, its shape), in :data:`SERVERS` order.
SERVER_ROWS: Mapping[str, Tuple[Tuple[str, Variant], ...]] = {
    "text": (
        (
            "mistral",
            Variant(
                "mistral",
                "Mistral: usage on the finish chunk, asked for or not; no choices: [] chunk",
                _VERCEL.format(package="mistral", where="", stem="mistral-text") + " (mistral-small-latest)",
                usage_unasked=True,
                source_kind="capture",
            ),
        ),
        (
            "groq",
            Variant(
                "groq",
                "Groq: x_groq on the first and last chunks, usage on the finish chunk too; "
                "service_tier on_demand",
                _VERCEL.format(package="groq", where="", stem="groq-text") + " (llama-3.3-70b-versatile)",
                usage_unasked=True,
                source_kind="capture",
            ),
        ),
        (
            "deepseek",
            Variant(
                "deepseek",
                "DeepSeek: usage with prompt_cache_hit/miss_tokens on the finish chunk; a UUID id",
                _VERCEL.format(package="deepseek", where="chat/", stem="deepseek-text") + " (deepseek-chat)",
                source_kind="capture",
            ),
        ),
    ),
    "text/stream": (
        (
            "openrouter",
            Variant(
                "openrouter",
                "OpenRouter: SSE comment lines before the data, gen- ids, provider and native_finish_reason "
                "on each chunk, the role on every delta; the usage, asked for or not, on a chunk after the "
                "finish whose finish_reason is null again",
                "openai/openai-go#227 (raw OpenRouter stream, 2025-02: two ': OPENROUTER PROCESSING' "
                "comments, then chunks with gen- id, provider, native_finish_reason, role on every delta); "
                "https://openrouter.ai/docs/api-reference/streaming (comments sent to keep the connection); "
                "https://openrouter.ai/docs/use-cases/usage-accounting (the usage, with cost and "
                "cost_details, in the last SSE message); CopilotKit/aimock src/openrouter-chat.ts (usage "
                "sent without include_usage). The finish_reason null on that last chunk is seen only in "
                "client test suites quoting OpenRouter streams of 2025-09 to 2026-01",
                usage_unasked=True,
                source_kind="issue",
            ),
        ),
    ),
    "tool-call": (
        (
            "mistral",
            Variant(
                "mistral",
                "Mistral: the call whole in one chunk with the finish reason, no index, no type",
                _VERCEL.format(package="mistral", where="", stem="mistral-tool-call")
                + " (mistral-small-latest)",
                call_id=MISTRAL_CALL_ID,
                usage_unasked=True,
                source_kind="capture",
            ),
        ),
        (
            "groq",
            Variant(
                "groq",
                "Groq: the call whole in one chunk, index last; x_groq usage",
                _VERCEL.format(package="groq", where="", stem="groq-tool-call")
                + " (llama-3.3-70b-versatile)",
                call_id=GROQ_CALL_ID,
                usage_unasked=True,
                source_kind="capture",
            ),
        ),
        (
            "deepseek",
            Variant(
                "deepseek",
                "DeepSeek reasoner: reasoning_content deltas, then the call by index; usage on the finish",
                _VERCEL.format(package="deepseek", where="chat/", stem="deepseek-tool-call")
                + " (deepseek-reasoner)",
                call_id=DEEPSEEK_CALL_ID,
                source_kind="capture",
            ),
        ),
    ),
    "reasoning": (
        (
            "deepseek",
            Variant(
                "deepseek",
                "DeepSeek reasoner: reasoning_content null beside each content delta; usage on the finish",
                _VERCEL.format(package="deepseek", where="chat/", stem="deepseek-reasoning")
                + " (deepseek-reasoner)",
                reasoning=DEEPSEEK_THINKING,
                source_kind="capture",
            ),
        ),
    ),
    "context-overflow/chat": (
        ("deepseek", _DEEPSEEK_OVERFLOW),
        (
            "llama.cpp",
            Variant(
                "llama-cpp",
                "llama-server: 400 exceed_context_size_error, code 400 a number, n_prompt_tokens, n_ctx",
                "arbs-io/github-copilot-llm-gateway#55 (raw 400 body); ggml-org/llama.cpp#19774 (b8064)",
                source_kind="issue",
            ),
        ),
        ("openrouter", _OPENROUTER_OVERFLOW),
    ),
    "context-overflow/stream": (
        ("deepseek", _DEEPSEEK_OVERFLOW),
        (
            "llama.cpp",
            Variant(
                "llama-cpp",
                "llama-server since 2025-10-09: the same 400, before the stream",
                "arbs-io/github-copilot-llm-gateway#55 (raw 400 body); ggml-org/llama.cpp#16486 "
                "(HTTP 400 when the prompt exceeds the context, also when streaming)",
                source_kind="issue",
            ),
        ),
        (
            "llama.cpp",
            Variant(
                "llama-cpp-in-stream",
                "llama-server 2025-09-19 to 2025-10-09: HTTP 200, data: {error: exceed_context_size_error}, "
                "then data: [DONE]",
                "oobabooga/textgen#7257 (the body, without the HTTP status being 400); "
                "ggml-org/llama.cpp#16109 (an error in a stream becomes a data: line) and #16486",
                source_kind="issue",
            ),
        ),
        (
            "llama.cpp",
            Variant(
                "llama-cpp-error-field",
                "llama-server before 2025-09-19: HTTP 200, an error: line SSE drops, then data: [DONE]",
                "coddy-project/coddy-agent#106 (raw bytes from llama-server b5966); "
                "ggml-org/llama.cpp#16109 (the error: field it replaced)",
                # The field's type names no contract kind, and an SSE reader drops the
                # field: a turn that ends at [DONE] with nothing, which is a failure.
                error_kinds=("context_overflow", "server_error"),
                source_kind="issue",
            ),
        ),
        ("openrouter", _OPENROUTER_OVERFLOW),
    ),
    # Sources for the other failures were not found: Mistral's quota, overload, server
    # error and context overflow, Groq's 401, quota, overload, server error and context
    # overflow, DeepSeek's 401, 402 and 429, llama-server's 401 and 503, and OpenRouter's
    # 502 and 503 before a stream are api.openai.com's shape here (the page lists them).
    "rate-limit": (
        (
            "mistral",
            Variant(
                "mistral",
                f"Mistral: 429, {_MISTRAL_ENVELOPE}; no retry-after",
                "cline/cline#9085 (the raw 429 body from api.mistral.ai, devstral-2512, 2026-02); "
                "vercel/ai packages/mistral/src/mistral-error.ts (parses exactly these top-level fields)",
                source_kind="issue",
            ),
        ),
        (
            "mistral",
            Variant(
                "mistral-raw-status",
                "Mistral since 2026-07: the same envelope with raw_status_code 429 added",
                "raycast/extensions#31107 (the raw 429 body, 2026-09); SubtitleEdit/subtitleedit#12921 "
                "(the same, 2026-07)",
                source_kind="issue",
            ),
        ),
        (
            "groq",
            Variant(
                "groq",
                "Groq: 429 under error, type tokens, code rate_limit_exceeded, no param; retry-after "
                "in seconds and x-ratelimit-* headers",
                "danielmiessler/Fabric#364, OpenHands/OpenHands#4167 and Aider-AI/aider#3265 (raw 429 "
                "bodies: type tokens, code rate_limit_exceeded, \"Please try again in\" in the message); "
                "Pythagora-io/gpt-pilot#862 (Groq's rate-limit docs quoted: retry-after in seconds, set "
                "only on a 429; x-ratelimit-* on every reply)",
                retry_after=GROQ_RETRY_AFTER,
                source_kind="issue",
            ),
        ),
        (
            "openrouter",
            Variant(
                "openrouter",
                f"OpenRouter: 429, {_OPENROUTER_ENVELOPE}: Provider returned error, the upstream's words in "
                "metadata.raw; no retry-after",
                "open-webui/computer#293 (the raw 429 body from openrouter.ai, 2026-09: metadata raw, "
                f"provider_name, limit_source, remedy_hint); {_OPENROUTER_ERRORS_DOCS}",
                source_kind="issue",
            ),
        ),
    ),
    "auth": (
        (
            "mistral",
            Variant(
                "mistral",
                "Mistral's gateway: 401, top-level {message: Unauthorized, request_id}, no error object",
                "cline/cline#1734 and coolcline/CoolCline#36 (the raw 401 body from api.mistral.ai, "
                "application/json; charset=utf-8)",
                source_kind="issue",
            ),
        ),
        (
            "mistral",
            Variant(
                "mistral-detail",
                "Mistral: 401, top-level {detail: Unauthorized}",
                "agent0ai/agent-zero#539 (the raw 401 body of /v1/chat/completions, 2025-06); "
                "nextcloud/integration_openai#332 (the same body from /v1/models, 2026-01)",
                source_kind="issue",
            ),
        ),
        (
            "openrouter",
            Variant(
                "openrouter",
                f"OpenRouter: 401, {_OPENROUTER_ENVELOPE}: No auth credentials found",
                "musistudio/claude-code-router#227 (the raw 401 body from openrouter.ai, 2025-07); "
                f"Gitlawb/openclaude#967 (the same envelope, 2026-05); {_OPENROUTER_ERRORS_DOCS}",
                source_kind="issue",
            ),
        ),
    ),
    "quota": (
        (
            "openrouter",
            Variant(
                "openrouter",
                f"OpenRouter: 402, {_OPENROUTER_ENVELOPE}, user_id beside error: the credits ran out",
                "Gitlawb/openclaude#1125 and babikov/doka-site#7 (raw 402 bodies from openrouter.ai, "
                "2026-04 and 2026-05); https://openrouter.ai/docs/api-reference/errors (402: insufficient "
                "credits)",
                source_kind="issue",
            ),
        ),
    ),
    "stream-error": (
        (
            "llama.cpp",
            Variant(
                "llama-cpp",
                "llama-server: text, then data: {error: server_error, code 500} with no choices, "
                "and no [DONE]",
                "ggml-org/llama.cpp tools/server (an error after the first chunk is one data: line, "
                "then the stream ends: terminate on error); ggml-org/llama.cpp#19774 (the body); "
                f"unslothai/unsloth#9390 (an error chunk carries no choices); {_LLAMA_CPP_CHUNKS}",
                error_kind="server_error",
                source_kind="provider-source",
            ),
        ),
        (
            "openrouter",
            Variant(
                "openrouter",
                "OpenRouter: text, then HTTP 200's chunk with a top-level error {code: \"server_error\", "
                "message} beside choices[0].finish_reason \"error\", and the stream ends: no [DONE]",
                "https://openrouter.ai/docs/api-reference/errors (Mid-Stream Errors: the error at the top "
                "level, a choice with finish_reason error, the status stays 200, the stream is terminated "
                "after this event); damianvtran/local-operator#223 and gethouston/houston#1211 (OpenRouter "
                "streams failing mid-answer this way, 2026-08)",
                error_kind="server_error",
                source_kind="docs",
            ),
        ),
        (
            "openrouter",
            Variant(
                "openrouter-no-choices",
                "OpenRouter: text, then a chunk with choices [] and a top-level error, code 502 a number, "
                "metadata {raw, provider_name}, and the stream ends",
                "diegosouzapw/OmniRoute#8210 (a live OpenRouter stream, HTTP 200, ending in a chunk with "
                "empty choices and a top-level error, 2026-07); damianvtran/local-operator#223 (code, "
                f"message and metadata on the in-band error); {_OPENROUTER_ERRORS_DOCS}",
                error_kind="server_error",
                source_kind="issue",
            ),
        ),
    ),
}

#: Every server variant's name: the shapes ``_server_replies`` plays.
SERVER_SHAPES = frozenset(variant.name for rows in SERVER_ROWS.values() for _, variant in rows)


def check_servers(servers: Any) -> Tuple[str, ...]:
    """``servers`` as a tuple of known names; :class:`ValueError` naming the known ones otherwise."""
    import difflib

    if isinstance(servers, str):
        raise ValueError(
            f"servers takes a sequence of server names, got the string {servers!r}: "
            f"write servers=({servers!r},)"
        )
    names = tuple(servers)
    for name in names:
        if name not in SERVERS:
            close = difflib.get_close_matches(str(name), SERVERS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown OpenAI-compatible server {name!r}: the known ones are {SERVERS}{hint}")
    return names


def with_servers(
    table: Mapping[str, Tuple[Variant, ...]], servers: Sequence[str]
) -> Dict[str, Tuple[Variant, ...]]:
    """``table`` with each named server's shapes added after the scenario's own.

    A scenario that had one unnamed shape gets api.openai.com's as its first variant,
    ``openai``; ``reasoning``, which api.openai.com has no part in, gets the servers' alone.
    """
    merged = dict(table)
    for key, rows in SERVER_ROWS.items():
        added = tuple(variant for server, variant in rows if server in servers)
        if not added:
            continue
        scenario = key.split("/")[0]
        # A mode's own rows go after the scenario's, the servers' of both modes included.
        own = table.get(key) or merged.get(scenario)
        if not own:
            own = (OPENAI_SHAPES[scenario],) if scenario in OPENAI_SHAPES else ()
        merged[key] = tuple(own) + added
    return merged
