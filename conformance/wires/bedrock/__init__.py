"""Amazon Bedrock Converse: ``POST /model/{modelId}/converse`` and ``/converse-stream``.

Reference: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html
and https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html;
the shapes are those of the service model botocore and the AWS SDK for JavaScript v3
read (``bedrock-runtime/2023-09-30/service-2.json``). The model id is percent-encoded
in the path (``us.anthropic.claude-3-5-haiku-20241022-v1%3A0``).

A whole reply is JSON: ``output.message.content`` (a list of one-member unions:
``{"text": ...}`` or ``{"toolUse": {"toolUseId", "name", "input"}}``), ``stopReason``,
``usage`` and ``metrics``. A streamed reply is ``application/vnd.amazon.eventstream``:
binary messages, each with a prelude, typed headers (``:message-type``,
``:event-type``, ``:content-type``), a JSON payload and two CRC32s. The events run
``messageStart``, then per content block an optional ``contentBlockStart`` (tool
blocks only; text blocks have none), ``contentBlockDelta`` events (``delta.text`` or
``delta.toolUse.input``, a fragment of the input's JSON *string*) and
``contentBlockStop``, then ``messageStop`` with the stop reason and ``metadata`` with
the usage. Every event payload carries a top-level ``"p"`` padding string of varying
length, which clients ignore. A failure after the 200 is a message whose
``:message-type`` is ``exception`` and whose ``:exception-type`` names the error in
lowerCamel case (``serviceUnavailableException``), payload ``{"message": ...}``.

Errors before the stream are an HTTP status, ``x-amzn-ErrorType: <Name>:<namespace>``
and a body ``{"message": ...}``. Bedrock sends no ``retry-after`` on a throttle, so
this wire's rate limit carries no delay (:attr:`BedrockConverseWire.rate_limit_retry_after`
is ``None``); a daily token quota is the same ``ThrottlingException`` told apart only by
its message.

The package keeps one concern per module: ``_replies`` (the response and its
event-stream messages), ``_variants`` (the error table and the variants), ``_turns``
(scripted turns played), ``_history`` (a conversation read back), ``_request`` (the
route, and what a request must carry) and ``_wire`` (:class:`BedrockConverseWire`,
which answers each scenario with them).
"""

from __future__ import annotations

from ._replies import CORRUPT_FRAME as CORRUPT_FRAME
from ._replies import GUARDRAIL_MESSAGE as GUARDRAIL_MESSAGE
from ._replies import TOOL_USE_ID as TOOL_USE_ID
from ._variants import ERROR_NAMESPACE as ERROR_NAMESPACE
from ._variants import ERRORS as ERRORS
from ._wire import BedrockConverseWire, bedrock_converse_wire

__all__ = ["BedrockConverseWire", "bedrock_converse_wire"]
