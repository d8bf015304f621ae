"""What a request to Claude on Vertex AI is: its route, and the credentials it must carry.

The route is ``POST {base}/projects/{project}/locations/{region}/publishers/anthropic/
models/{model}:rawPredict`` for a whole reply and ``:streamRawPredict`` for a stream
(``{base}`` is ``https://{region}-aiplatform.googleapis.com/v1``); the method, not the
body, says whether to stream. ``…/models/count-tokens:rawPredict`` counts tokens. The
credentials are a Google OAuth access token as ``Authorization: Bearer``, never an
``x-api-key``. The body is the Messages API's, checked by ``wires/anthropic``, with
``anthropic_version`` in it (``vertex-2023-10-16``) and no ``model``.
"""

from __future__ import annotations

import re
from typing import List, Mapping, Optional, Tuple

__all__ = ["COUNT_TOKENS", "check_headers", "match_route"]

_ROUTE = re.compile(
    r"/projects/[^/]+/locations/[^/]+/publishers/anthropic/models/(?P<model>[^/]+?)"
    r":(?P<method>rawPredict|streamRawPredict)\Z"
)
#: The model segment of the token-counting route, which is no generation.
COUNT_TOKENS = "count-tokens"


def match_route(path: str) -> Optional[Tuple[str, bool]]:
    """The model (percent-decoded) and whether the method streams, or ``None`` where ``path`` is
    not a ``rawPredict`` route of a model."""
    found = _ROUTE.search(path)
    if found is None or found.group("model") == COUNT_TOKENS:
        return None
    from urllib.parse import unquote  # per request, not per import

    return unquote(found.group("model")), found.group("method") == "streamRawPredict"


def check_headers(headers: Mapping[str, str]) -> List[str]:
    """A Google access token as ``Authorization: Bearer``."""
    authorization = headers.get("authorization", "")
    if authorization.lower().startswith("bearer ") and authorization[7:].strip():
        return []
    shown = f"authorization={authorization!r}" if authorization else "none"
    hint = " (Vertex AI takes a Google access token, not an x-api-key)" if "x-api-key" in headers else ""
    return [f"expected Authorization: Bearer with a Google access token, got {shown}{hint}"]
