"""Azure OpenAI mutants: the OpenAI zoos' bugs on Azure's wires, and the bugs only Azure's shapes catch.

Azure serves OpenAI's APIs, so every bug of an OpenAI backend is one here too, and its
mutant is the OpenAI one over the Azure reference backend. What Azure adds catches more:
a stream that opens with a chunk with no choices, an annotation chunk with no delta, a
filtered reply whose message has no content, the 429 with a delay and the 401 whose
``code`` is the status as a string.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, Mapping, Optional

from conformance.contract import ChatRequest, ChatResponse, LLMError
from conformance.reference._openai import OpenAIBase
from conformance.reference.azure_openai import AzureOpenAIChatBackend, AzureOpenAIResponsesBackend
from conformance.reference.openai_chat import _PartialCall
from conformance.wires.azure_openai import azure_openai_responses_wire

from . import Mutant, openai_chat, openai_responses
from . import _common as shared
from ._common import Zoo

chat_zoo = Zoo("azure-openai-chat", AzureOpenAIChatBackend)
responses_zoo = Zoo("azure-openai-responses", AzureOpenAIResponsesBackend)

#: Left out of the shared bugs: Azure has no quota case (a forgotten header is caught on
#: the 401 instead), and an overload is a server_error that only its message calls one,
#: which a backend may report as either.
LEFT_OUT = (
    shared.QUOTA_AS_RATE_LIMIT,
    shared.QUOTA_RETRYABLE,
    shared.INVENTS_QUOTA_DELAY,
    shared.FORGETS_HEADERS,
    shared.OVERLOAD_AS_SERVER_ERROR,
)


def every_wire(zoo: Zoo) -> List[Mutant]:
    """The shared bugs, less :data:`LEFT_OUT`; a forgotten header caught on the 401 instead."""
    forgets = zoo.shared(shared.FORGETS_HEADERS, cases=("text/chat", "abort/stream", "auth/stream"))
    return [
        *zoo.every_wire(leave_out=LEFT_OUT),
        forgets,
        *(zoo.shared(bug) for bug in shared.PROVIDER_IDS),
        *zoo.unparsed(),
    ]


class FirstChoiceOfEveryChunk(AzureOpenAIChatBackend):
    """Reads ``choices[0]`` of every chunk, as code written against api.openai.com does."""

    def on_chunk(self, chunk: Mapping[str, Any], partials: Dict[int, _PartialCall]) -> str:
        if not chunk.get("error"):
            chunk["choices"][0]  # noqa: B018 - the bug: an IndexError on Azure's first chunk
        return super().on_chunk(chunk, partials)


class DeltaOfEveryChoice(AzureOpenAIChatBackend):
    """Reads every choice's ``delta``, which the Asynchronous Filter's annotations lack."""

    def on_chunk(self, chunk: Mapping[str, Any], partials: Dict[int, _PartialCall]) -> str:
        for choice in chunk.get("choices") or ():
            choice["delta"]  # noqa: B018 - the bug: a KeyError on an annotation chunk
        return super().on_chunk(chunk, partials)


class ContentRequired(AzureOpenAIChatBackend):
    """Reads ``message["content"]`` as always there, which a filtered Azure reply has not."""

    def completion(self, body: Any) -> ChatResponse:
        body["choices"][0]["message"]["content"]  # noqa: B018 - the bug: KeyError on a filtered reply
        return super().completion(body)


class FilterResultsRequired(AzureOpenAIChatBackend):
    """Reads a filtered choice's ``content_filter_results`` as always there, to name the category."""

    def completion(self, body: Any) -> ChatResponse:
        choice = body["choices"][0]
        if choice.get("finish_reason") == "content_filter":
            choice["content_filter_results"].items()  # the bug: KeyError where Azure sends none
        return super().completion(body)


class NestedErrorOnly(OpenAIBase):
    """Reads a failure only as ``body["error"]``; an API Management front's 401 has none."""

    def status_error(self, status: int, headers: Mapping[str, str], raw: bytes) -> LLMError:
        error = json.loads(raw)["error"]
        return self.make_error(self.error_kind(status, error), error, status=status)


class NoApiVersion(AzureOpenAIChatBackend):
    """Leaves out the api-version query, which Azure's deployment path needs."""

    def url(self, chat: ChatRequest, stream: bool) -> str:
        return super().url(chat, stream).split("?", 1)[0]


class RateLimitFromCodeOnly(OpenAIBase):
    """Tells a rate limit only by api.openai.com's ``rate_limit_exceeded``, never by the 429."""

    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        if kind == "rate_limit" and error.get("code") not in self.rate_limit_codes:
            return "invalid_request"
        return kind


class AuthFromCodeOnly(OpenAIBase):
    """Tells a bad key only by api.openai.com's ``invalid_api_key``, never by the 401."""

    def error_kind(self, status: Optional[int], error: Mapping[str, Any]) -> str:
        kind = super().error_kind(status, error)
        return "invalid_request" if kind == "auth" and error.get("code") != "invalid_api_key" else kind


def _nested_error_only(zoo: Zoo) -> Mutant:
    return zoo.mutant(
        "nested-error-only",
        'reads a failure only as body["error"]; the API Management front\'s 401 is {"statusCode", "message"}',
        NestedErrorOnly,
        checks=("error-details", "error-kind", "error-status"),
        cases=("auth/chat", "auth/stream"),
        variants=("apim-missing-key",),
    )


def _from_code_only(zoo: Zoo) -> List[Mutant]:
    """Azure's front answers with ``code`` the status as a string: the code alone says nothing.

    The rate limit read as a bad request still carries the delay the reply sent, as every
    kind does, so only the kind is wrong."""
    checks = ("error-details", "error-kind")
    return [
        zoo.mutant(
            "rate-limit-from-code-only",
            "tells a rate limit by api.openai.com's error.code alone, not by the 429",
            RateLimitFromCodeOnly,
            checks=checks,
            cases=("rate-limit/chat", "rate-limit/stream"),
        ),
        zoo.mutant(
            "auth-from-code-only",
            "tells a bad key by api.openai.com's error.code alone, not by the 401",
            AuthFromCodeOnly,
            checks=checks,
            cases=("auth/chat", "auth/stream"),
        ),
    ]


CHAT = [
    *every_wire(chat_zoo),
    *openai_chat.own_mutants(chat_zoo),
    chat_zoo.shared(shared.IGNORES_RETRY_AFTER, cases=("rate-limit/chat", "rate-limit/stream")),
    *_from_code_only(chat_zoo),
    _nested_error_only(chat_zoo),
    chat_zoo.mutant(
        "first-choice-of-every-chunk",
        "reads choices[0] of every chunk, and fails on Azure's first, which has none",
        FirstChoiceOfEveryChunk,
        checks=("reply",),
        cases=("text/stream", "tool-call/stream"),
    ),
    chat_zoo.mutant(
        "delta-of-every-choice",
        "reads every choice's delta, and fails on the Asynchronous Filter's annotation chunk",
        DeltaOfEveryChoice,
        checks=("reply",),
        cases=("text/stream",),
    ),
    chat_zoo.mutant(
        "content-required",
        "reads message.content as always there, and fails on a filtered reply",
        ContentRequired,
        checks=("reply",),
        cases=("content-filter/chat",),
    ),
    chat_zoo.mutant(
        "filter-results-required",
        "reads a filtered choice's content_filter_results as always there; Azure does not always send them",
        FilterResultsRequired,
        checks=("reply",),
        cases=("content-filter/chat",),
        variants=("unpopulated-results",),
    ),
    chat_zoo.mutant(
        "plain-400-as-server-error",
        "calls a 400 it cannot place a retryable server error: Azure's prompt refused by its filter",
        shared.mislabels("invalid_request", "server_error"),
        checks=("reply",),
        cases=("content-filter/chat", "content-filter/stream"),
        variants=("prompt-filtered-400",),
    ),
    chat_zoo.mutant(
        "no-api-version",
        "leaves out the api-version query",
        NoApiVersion,
        checks=("request",),
        cases=chat_zoo.every_case(),
    ),
]

def _played(mutants: List[Mutant]) -> List[Mutant]:
    """``mutants`` less the cases Azure's Responses wire does not play (its content filter)."""
    absent = set(azure_openai_responses_wire.unsupported)
    kept = [
        dataclasses.replace(m, cases=tuple(c for c in m.cases if c.split("/")[0] not in absent))
        for m in mutants
    ]
    return [m for m in kept if m.cases]


RESPONSES = [
    *every_wire(responses_zoo),
    *_played(openai_responses.own_mutants(responses_zoo)),
    # Its stream fails as api.openai.com's does, server_is_overloaded among the shapes.
    responses_zoo.shared(shared.OVERLOAD_AS_SERVER_ERROR, cases=("stream-error/stream",)),
    *_from_code_only(responses_zoo),
    _nested_error_only(responses_zoo),
]

MUTANTS = [*CHAT, *RESPONSES]
