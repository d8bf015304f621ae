"""The Bedrock InvokeModel wire for Claude: Anthropic's wire, served as Bedrock serves it.

The replies are Anthropic's, built by ``wires/anthropic`` and framed by ``_replies``;
the failures are Bedrock's (``_variants``, and Converse's error table in
``wires/bedrock``, loaded when a failure is first answered); the route and the
credentials are ``_request``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...fixture import CONFORMANCE_FIXTURE as FX
from ..anthropic._hosted import HostedWire
from ._replies import MESSAGE_ID, MESSAGE_ID_2026, TOOL_USE_ID, InvokeEvents, message_headers
from ._request import REFUSED_MEMBERS, check_headers, match_route
from ._variants import FRAMED_FAILURES, VARIANT_ERRORS, VARIANTS

if TYPE_CHECKING:
    from ...provider.replies import JsonReply, RecordedRequest, Reply

__all__ = ["BedrockInvokeWire", "bedrock_invoke_wire"]

#: The optional scenario only checksummed formats have.
CORRUPT_FRAME = "corrupt-frame"


class BedrockInvokeWire(HostedWire):
    """Amazon Bedrock InvokeModel and InvokeModelWithResponseStream, for Claude."""

    #: Bedrock sends no ``ping`` (none in any InvokeModel stream recorded), so no keep-alive.
    keepalive = b""
    name = "bedrock-invoke"
    provider = "bedrock"
    title = "Amazon Bedrock InvokeModel (Claude)"
    tool_call_id = TOOL_USE_ID
    events_class = InvokeEvents
    variants_table = VARIANTS
    optional_scenarios = frozenset({CORRUPT_FRAME})
    #: ``bedrock-2023-05-31`` in AWS's docs, pydantic-ai's recordings and anthropic 0.x's
    #: ``AnthropicBedrock``; anthropic 2.x sends its own API version.
    anthropic_versions = ("bedrock-2023-05-31", "2026-10-21")
    refused_members = REFUSED_MEMBERS

    def route(self, path: str) -> Optional[Tuple[str, bool]]:
        return match_route(path)

    def route_shape(self) -> str:
        return "ending in /model/{modelId}/invoke or /model/{modelId}/invoke-with-response-stream"

    def check_headers(self, headers: Mapping[str, str]) -> List[str]:
        return check_headers(headers)

    def message_reply(self, body: Dict[str, Any]) -> JsonReply:
        from ...provider.replies import JsonReply

        # As pydantic-ai's whole reply of 2026-07-30 (claude-opus-4-8): the id msg_bdrk_ and 52
        # lower-case characters, and output_tokens_details in the usage.
        if body.get("id") == MESSAGE_ID:
            body = {**body, "id": MESSAGE_ID_2026}
        usage = dict(body.get("usage") or {})
        if "output_tokens" in usage:
            usage["output_tokens_details"] = {"thinking_tokens": 0}
            body = {**body, "usage": usage}
        return JsonReply(body, headers=message_headers(usage.get("output_tokens", FX.usage.output_tokens)))

    def error_reply(self, scenario: str, variant: str, stream: bool) -> Reply:
        from .._aws import error_reply, exception_frame

        framed = FRAMED_FAILURES.get((scenario, variant))
        if framed is not None and stream:
            out = self.events("conformance-model", variant=variant)
            out.events.append(exception_frame(*framed))
            return out.reply(f"{self.name}/{scenario}/{variant}")
        row = VARIANT_ERRORS.get((scenario, variant))
        if row is None:
            from ..bedrock._variants import ERRORS  # the service's table, the same for every operation

            row = ERRORS[scenario]
        return error_reply(*row)

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        if scenario == CORRUPT_FRAME:
            if not self.wants_stream(request):
                return None
            from .._aws import corrupt

            out = self.events(self.model_of(request))
            out.message_start()
            out.text(FX.partial_text, pieces=2, stop=False)
            out.events[-1] = corrupt(out.events[-1])
            out.content_block_stop()
            out.message_delta("end_turn")
            return out.reply(f"{self.name}/{scenario}")
        return super().reply(scenario, mode, request, variant)

    def aux_reply(self, request: RecordedRequest) -> Reply:
        from .._aws import error_reply

        message = (
            f"the {self.title} fake provider has no route for {request.method} {request.path}; "
            "only InvokeModel and InvokeModelWithResponseStream are scripted"
        )
        return error_reply(404, "UnknownOperationException", message)

    def history_error(self, problems: Sequence[str]) -> Reply:
        """Bedrock's 400 ValidationException quoting Claude's own words, as InvokeModel passes them
        on (browser-use/browser-use#988: "messages.2: Did not find 1 `tool_result` block(s)...")."""
        from .._aws import error_reply
        from .._script import first_problem

        return error_reply(400, "ValidationException", first_problem(problems))


bedrock_invoke_wire = BedrockInvokeWire()
