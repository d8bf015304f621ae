"""What an InvokeModel request for Claude is: its route, and the credentials it must carry.

The route is ``POST /model/{modelId}/invoke`` or ``/invoke-with-response-stream``: the
operation, not the body, says whether to stream. boto3 percent-encodes the model id
(``…-v1%3A0``) and anthropic's ``AnthropicBedrock`` leaves a ``:`` as it is; Bedrock
takes both (pydantic-ai's ``test_anthropic_cache_bedrock_real_api.yaml`` records the raw
colon against the real API). The body is the Messages API's, checked by
``wires/anthropic``, with ``anthropic_version`` in it and neither ``model`` nor
``stream`` (Bedrock refuses both: "Malformed input request: #: extraneous key [stream]
is not permitted#: extraneous key [model] is not permitted", as quoted in
fumito-ito/AnthropicSwiftSDK#19).
"""

from __future__ import annotations

import re
from typing import List, Mapping, Optional, Tuple

__all__ = ["REFUSED_MEMBERS", "check_headers", "match_route"]

_ROUTE = re.compile(r"/model/(?P<model>[^/]+)/(?P<operation>invoke|invoke-with-response-stream)\Z")

#: The body members Bedrock refuses for Claude, and why.
REFUSED_MEMBERS: Mapping[str, str] = {
    "model": "Bedrock answers 400 'extraneous key [model] is not permitted': the model is in the path",
    "stream": (
        "Bedrock answers 400 'extraneous key [stream] is not permitted': /invoke-with-response-stream "
        "is what asks for a stream"
    ),
}


def match_route(path: str) -> Optional[Tuple[str, bool]]:
    """The model (percent-decoded) and whether the operation streams, or ``None`` where ``path``
    is not an InvokeModel route."""
    # Matched on the raw path: an ARN's %2F must not split the route.
    found = _ROUTE.search(path)
    if found is None:
        return None
    from urllib.parse import unquote  # per request, not per import

    return unquote(found.group("model")), found.group("operation") == "invoke-with-response-stream"


def check_headers(headers: Mapping[str, str]) -> List[str]:
    """An ``Authorization``: SigV4, or a Bedrock API key as ``Bearer``."""
    if "authorization" in headers:
        return []
    return ["expected an Authorization header (SigV4 or a Bedrock API key as Bearer), got none"]
