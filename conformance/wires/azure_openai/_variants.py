"""Azure OpenAI's error bodies and variants: each real shape it answers a scenario with.

Azure answers a failure of its own front (the key, the deployment's rate limit) with its
own body, ``{"error": {"code": "401", "message": ...}}``: ``code`` a string, no ``type``
and no ``param``. A failure of the model behind it comes in OpenAI's body
(``{"error": {"message", "type", "param", "code"}}``), its message pointing at an Azure
support request. A variant names another shape of the same scenario, with where it was
seen; the shapes Azure serves as api.openai.com does keep OpenAI's rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Tuple

from ...fixture import CONFORMANCE_FIXTURE as FX
from .._variants import EitherRule, Variant
from ._shape import azure_headers

if TYPE_CHECKING:
    from ...provider.replies import JsonReply

__all__ = [
    "CHAT_OWN",
    "NO_CONTENT_FILTER",
    "NO_QUOTA",
    "NO_REASONING",
    "RESPONSES_OWN",
    "azure_error",
    "in_stream_overload",
]

_SUPPORT = (
    "You can retry your request, or contact us through an Azure support request at: "
    "https://go.microsoft.com/fwlink/?linkid=2213926 if the error persists. (Please include the "
    "request ID 6d6321f8-e4aa-4a77-9aa0-67868802d7ca in your message.)"
)
OVERLOADED_MESSAGE = "That model is currently overloaded with other requests. " + _SUPPORT
SERVER_ERROR_MESSAGE = "The server had an error while processing your request. Sorry about that! " + _SUPPORT
AUTH_MESSAGE = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a "
    "valid key for an active subscription and use a correct regional API endpoint for your resource."
)
APIM_MISSING_KEY_MESSAGE = (
    "Access denied due to missing subscription key. Make sure to include subscription key when making "
    "requests to an API."
)
RATE_LIMIT_MESSAGE = (
    "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have "
    "exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 7 seconds. "
    "Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the "
    "default rate limit."
)
#: The wording since 2025: the deployment, its region and the AIServices tier named.
AISERVICES_RATE_LIMIT_MESSAGE = (
    "Your requests to gpt-4.1-mini for gpt-4.1-mini in East US 2 have exceeded the token rate limit "
    "for your current AIServices S0 pricing tier. This request was for ChatCompletions_Create under "
    "Azure OpenAI API version 2024-10-21. Please retry after 7 seconds. To increase your default rate "
    "limit, visit: https://aka.ms/oai/quotaincrease."
)
SHORT_RATE_LIMIT_MESSAGE = "Rate limit is exceeded. Try again in 7 seconds."
CONTEXT_MESSAGE = (
    "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 "
    "tokens. Please reduce the length of the messages."
)

NO_REASONING = (
    "Azure OpenAI's Chat Completions has no reasoning case: like api.openai.com's, it returns none "
    "(its reasoning models keep it server-side; the Responses API returns it)"
)
NO_QUOTA = (
    "Azure OpenAI has no quota case: it bills the subscription, with no prepaid credit to run "
    "out of; a deployment's quota is its tokens-per-minute limit, and running past it is a 429 "
    "rate limit (the rate-limit case)"
)

NO_CONTENT_FILTER = (
    "Azure OpenAI's Responses API has no content-filter case: no capture or raw body of Azure "
    "filtering a Responses turn was found (its Chat filter and its prompt filter's 400 are "
    "recorded, its Responses one is not), and the fake sends only what the provider is seen sending"
)


def _gateway(code: str, message: str) -> Dict[str, Any]:
    """The body Azure's own front answers with: a string ``code``, no ``type``, no ``param``."""
    return {"error": {"code": code, "message": message}}


def _model_error(message: str, type_: str, param: Any, code: Any) -> Dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


#: The remaining-limit headers an Azure 429 carries (microsoft/copilot-camp#551).
_LIMITS = {
    "x-ratelimit-limit-requests": "8",
    "x-ratelimit-limit-tokens": "8000",
    "x-ratelimit-remaining-requests": "7",
    "x-ratelimit-remaining-tokens": "0",
}

PROMPT_FILTERED_MESSAGE = (
    "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. "
    "Please modify your prompt and retry. To learn more about our content filtering policies please read "
    "our documentation: https://go.microsoft.com/fwlink/?linkid=2198766"
)


def _prompt_filtered() -> Dict[str, Any]:
    """The 400 for a prompt the filter refused: OpenAI's fields, the status and Azure's inner error."""
    safe = {"filtered": False, "severity": "safe"}
    results = {
        "hate": dict(safe),
        "jailbreak": {"filtered": False, "detected": False},
        "self_harm": dict(safe),
        "sexual": {"filtered": True, "severity": "high"},
        "violence": dict(safe),
    }
    return {
        "error": {
            "message": PROMPT_FILTERED_MESSAGE,
            "type": None,
            "param": "prompt",
            "code": "content_filter",
            "status": 400,
            "innererror": {"code": "ResponsibleAIPolicyViolation", "content_filter_result": results},
        }
    }


#: (scenario, variant) -> (status, body, extra headers); the empty variant is the one shape.
ERRORS: Mapping[Tuple[str, str], Tuple[int, Dict[str, Any], Dict[str, str]]] = {
    ("auth", ""): (401, _gateway("401", AUTH_MESSAGE), {}),
    ("auth", "unauthorized-code"): (401, _gateway("Unauthorized", AUTH_MESSAGE), {}),
    # An API Management front that takes its key in Ocp-Apim-Subscription-Key, not api-key.
    ("auth", "apim-missing-key"): (401, {"statusCode": 401, "message": APIM_MISSING_KEY_MESSAGE}, {}),
    ("rate-limit", "retry-after"): (
        429,
        _gateway("429", RATE_LIMIT_MESSAGE),
        {"retry-after": f"{FX.retry_after:g}", **_LIMITS},
    ),
    ("rate-limit", "retry-after-aiservices"): (
        429,
        _gateway("429", AISERVICES_RATE_LIMIT_MESSAGE),
        {"retry-after": f"{FX.retry_after:g}", **_LIMITS},
    ),
    ("rate-limit", "no-retry-after"): (429, _gateway("429", SHORT_RATE_LIMIT_MESSAGE), dict(_LIMITS)),
    # The token limit's own headers (openai/openai-python#937, 2023-12): its reset in seconds
    # under a hyphenated name no client reads as a retry delay, and the policy that refused.
    ("rate-limit", "reset-tokens"): (
        429,
        _gateway("429", RATE_LIMIT_MESSAGE),
        {
            "x-rate-limit-reset-tokens": f"{FX.retry_after:g}",
            "policy-id": "DeploymentRatelimit-Token",
            "strict-transport-security": "max-age=31536000; includeSubDomains; preload",
            "x-ratelimit-remaining-requests": "7",
            "x-ratelimit-remaining-tokens": "0",
        },
    ),
    ("content-filter", "prompt-filtered-400"): (400, _prompt_filtered(), {}),
    ("overloaded", ""): (503, _model_error(OVERLOADED_MESSAGE, "server_error", None, None), {}),
    ("server-error", ""): (500, _model_error(SERVER_ERROR_MESSAGE, "server_error", None, None), {}),
    ("context-overflow", ""): (
        400,
        _model_error(CONTEXT_MESSAGE, "invalid_request_error", "messages", "context_length_exceeded"),
        {},
    ),
}


def azure_error(scenario: str, variant: str = "") -> JsonReply:
    """The status, body and headers Azure answers ``scenario`` (in ``variant``) with."""
    from ...provider.replies import JsonReply

    status, body, extra = ERRORS.get((scenario, variant)) or ERRORS[(scenario, "")]
    return JsonReply(body, status=status, headers=azure_headers(extra))


def in_stream_overload() -> Dict[str, Any]:
    """The error a failing Azure Chat stream ends with: OpenAI's ``server_error`` object."""
    return _model_error(OVERLOADED_MESSAGE, "server_error", None, None)


_OVERLOADED_OR_SERVER_ERROR = ("overloaded", "server_error")

_AUTH = Variant(
    "access-denied-401",
    '401 {"error": {"code": "401", ...}}: a string code, no type',
    "SciSharp/BotSharp#386 (the raw body and its headers); microsoft/semantic-kernel#10337",
    source_kind="issue",
)
_PROMPT_FILTERED = Variant(
    "prompt-filtered-400",
    '400 code "content_filter", param "prompt", innererror ResponsibleAIPolicyViolation with the '
    "filter's results: the prompt refused before the model ran, whole or streamed",
    "openai/openai-dotnet#55 (the raw 400 body, 2024-06); microsoft/semantic-kernel#2997 (2023-09) and "
    "langchain4j/langchain4j#3286 (2025-07, the same body); compl-ai/compl-ai#20 (with jailbreak among "
    "the results, 2025-02)",
    either=EitherRule(("invalid_request",), ("content_filter",)),
    text="",
    reports_usage=False,
    source_kind="issue",
)
_UNAUTHORIZED = Variant(
    "unauthorized-code",
    '401 {"error": {"code": "Unauthorized", ...}}: the code a word, the same message',
    "vercel/chatbot#588 (the raw 401 body from a deployment's chat/completions, 2024-12)",
    source_kind="issue",
)
_APIM_MISSING_KEY = Variant(
    "apim-missing-key",
    'an API Management front\'s 401 {"statusCode": 401, "message": ...}: no error object',
    "openai/openai-python#1527 (the 401 body through AzureOpenAI, 2024-07); continuedev/continue#4601 "
    "(the same body from a company's API Management front that takes Ocp-Apim-Subscription-Key, 2025-03)",
    source_kind="issue",
)
_SERVER_ERROR = Variant(
    "server-error-500",
    "500 server_error, code null, an Azure support request in the message",
    "Azure-Samples/azure-search-openai-demo#1390 (raw 500 body); Azure/azure-sdk-for-python#40812",
    source_kind="issue",
)
_OVERLOADED = Variant(
    "server-error-503",
    "503 server_error, code null, overloaded in the message",
    "scalaone/azure-openai-proxy#22 (this error object, from Azure's GPT-4); the status as "
    "api.openai.com answers the same body (AutumnWhj/ChatGPT-wechat-bot#153)",
    error_kinds=_OVERLOADED_OR_SERVER_ERROR,
    source_kind="issue",
)
_CONTEXT = Variant(
    "context-length-exceeded",
    "400 invalid_request_error / context_length_exceeded, OpenAI's body",
    "microsoft/kernel-memory#516 (raw 400 body from Azure); Azure/azure-sdk-for-net#41892",
    source_kind="issue",
)
_RETRY_AFTER = Variant(
    "retry-after",
    '429 {"error": {"code": "429", ...}} with retry-after',
    "openai/openai-node#1108 (the body); openai/openai-python#946 (Microsoft: the Chat and "
    "embeddings 429 carries Retry-After); icereed/paperless-gpt#814 (Retry-After: <seconds>)",
    retry_after=FX.retry_after,
    source_kind="issue",
)
_RETRY_AFTER_AISERVICES = Variant(
    "retry-after-aiservices",
    '429 {"error": {"code": "429", ...}} with retry-after, in the 2025 wording (the deployment, its '
    "region, the AIServices S0 tier)",
    "icereed/paperless-gpt#814 (2025-12: the message, \"Your requests to ... in Sweden Central have "
    'exceeded the token rate limit for your current AIServices S0 pricing tier", and Retry-After: '
    "<seconds>)",
    retry_after=FX.retry_after,
    source_kind="issue",
)
_NO_RETRY_AFTER = Variant(
    "no-retry-after",
    '429 {"error": {"code": "429", ...}} without retry-after, the delay in its message only',
    "microsoft/copilot-camp#551 (raw 429 header dump: no Retry-After)",
    source_kind="issue",
)
_RESET_TOKENS = Variant(
    "reset-tokens",
    "429 without retry-after: x-rate-limit-reset-tokens (hyphenated) and policy-id "
    "DeploymentRatelimit-Token instead; retry_after None, as openai-python reads no such header",
    "openai/openai-python#937 (2023-12: the raw 429 header list, x-rate-limit-reset-tokens 55, "
    "policy-id DeploymentRatelimit-Token, apim-request-id, x-ms-region, no Retry-After)",
    source_kind="issue",
)

#: Azure's own Chat shapes; the rest of its table is api.openai.com's (``_chat``).
CHAT_OWN: Mapping[str, Tuple[Variant, ...]] = {
    "text/stream": (
        Variant(
            "filter-results",
            "a first chunk with no choices and the prompt's filter results, then "
            "content_filter_results on every chunk",
            "traceloop/openllmetry packages/opentelemetry-instrumentation-openai/tests/traces/"
            "cassettes/test_azure/test_chat_streaming.yaml; vercel/ai packages/openai/src/chat/"
            "__fixtures__/azure-model-router.1.chunks.txt",
            source_kind="capture",
        ),
        Variant(
            "async-filter",
            "the Asynchronous Filter: text without filter results, then an annotation chunk "
            "with no delta before the finish",
            "openai/openai-python#1677 (Microsoft: the annotation chunks omit delta); "
            "aallam/openai-kotlin#340 (an annotation chunk, raw); langchain-ai/langchain#18977",
            source_kind="issue",
        ),
    ),
    "content-filter/chat": (
        Variant(
            "message-without-content",
            'finish_reason "content_filter", a message with its role and no content, the '
            "filtered category in content_filter_results",
            "https://learn.microsoft.com/en-us/azure/ai-services/openai/concepts/content-filter (a filtered "
            'completion returns no content, finish_reason "content_filter") and content-filter-annotations '
            "(each category's severity and filtered flag returned with the choice); "
            "microsoft/semantic-kernel#4996 (the raw reply names the exceeded filter at the choice "
            "level); langchain-ai/langchain#3861 and #5861 (KeyError: 'content' on it)",
            source_kind="docs",
        ),
        Variant(
            "unpopulated-results",
            'finish_reason "content_filter", a message with its role and no content, and no '
            "content_filter_results on the choice",
            "zhayujie/CowAgent#1539 (the raw reply, gpt-35-turbo, 2023-11: the choice is index, "
            "finish_reason and message {role} alone); microsoft/semantic-kernel#5240 (2024-02: Azure "
            '"doesn\'t always populate content_filter_results" on a filtered reply)',
            source_kind="issue",
        ),
        _PROMPT_FILTERED,
    ),
    "content-filter/stream": (
        Variant(
            "filtered-finish",
            'the role chunk, then finish_reason "content_filter" with the filtered category',
            "https://learn.microsoft.com/azure/foundry/openai/concepts/content-streaming (a filtered "
            'stream ends with status 200, finish_reason "content_filter")',
            source_kind="docs",
        ),
        _PROMPT_FILTERED,
    ),
    "stream-error": (
        Variant(
            "server-error-overloaded",
            "in-stream server_error, code null, overloaded in the message",
            "scalaone/azure-openai-proxy#22 (this error object as a stream's event data, GPT-4 on Azure)",
            error_kinds=_OVERLOADED_OR_SERVER_ERROR,
            source_kind="issue",
        ),
    ),
    "overloaded": (_OVERLOADED,),
    "server-error": (_SERVER_ERROR,),
    "auth": (_AUTH, _UNAUTHORIZED, _APIM_MISSING_KEY),
    "context-overflow": (_CONTEXT,),
    "rate-limit": (_RETRY_AFTER, _RETRY_AFTER_AISERVICES, _NO_RETRY_AFTER, _RESET_TOKENS),
}

#: Azure's own Responses shapes; the rest of its table is api.openai.com's (``_responses``).
RESPONSES_OWN: Mapping[str, Tuple[Variant, ...]] = {
    "overloaded": (_OVERLOADED,),
    "server-error": (_SERVER_ERROR,),
    "auth": (_AUTH, _UNAUTHORIZED, _APIM_MISSING_KEY),
    "rate-limit": (
        Variant(
            "no-retry-after",
            '429 {"error": {"code": "429", ...}} without retry-after',
            "openai/openai-dotnet#838 (Azure's Responses API: the retry-after header is missing, "
            "x-ratelimit-reset-tokens 0); microsoft/copilot-camp#551 (the body, no Retry-After)",
            source_kind="issue",
        ),
    ),
}
