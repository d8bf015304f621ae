"""The latency scenarios: a provider slow to its first token, and one that stalls.

Strategy: silence has no wire format, so no wire scripts these scenarios itself. Each
is played from the wire's own ``text`` reply, held back by the provider: a whole reply
before its status line (:func:`~conformance.provider.held`), a stream after its status
line and headers or between two of its chunks (``StreamReply.pauses``), or cut off
where it stands and left open (``hang``). The silence is scaled from the read timeout
the target declares (:mod:`conformance._bounds`), so the kit's own run stays quick
and a user's case fits the backend's own setting.

The provider sends nothing while it is silent: no keep-alive bytes. OpenAI, Gemini,
Ollama, Bedrock and Cohere document none on their streams, and a whole reply has no
place for any. Anthropic documents ``ping`` events "any number of times" in a stream;
a stall whose pings keep coming is a provider still alive, which a read timeout rightly
outlasts, so the stall here is the one a read timeout exists for: no bytes at all
(an upstream gone, a proxy holding a buffered stream).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Mapping, Optional, Tuple

from .._bounds import in_time_silence
from ._variants import Variant

if TYPE_CHECKING:
    from ..provider.replies import RecordedRequest, Reply

__all__ = ["LATENCY_VARIANTS", "latency_reply"]

_TIMEOUTS = "https://www.python-httpx.org/advanced/timeouts/"

#: ``scenario`` or ``scenario/mode`` -> the shapes it is played in.
LATENCY_VARIANTS: Mapping[str, Tuple[Variant, ...]] = {
    "slow-first-token": (
        Variant(
            "",
            "silent before the first byte for 0.4 of the read timeout, then the whole reply",
            _TIMEOUTS,
            source_kind="docs",
        ),
    ),
    "stall/chat": (
        Variant(
            "",
            "no status line, no byte at all, past the read timeout",
            _TIMEOUTS,
            source_kind="docs",
        ),
    ),
    "stall/stream": (
        Variant(
            "before-first-token",
            "the status line and headers, then no byte past the read timeout",
            _TIMEOUTS,
            source_kind="docs",
        ),
        Variant(
            "mid-stream",
            "half the stream's chunks, then no byte past the read timeout",
            _TIMEOUTS,
            source_kind="docs",
        ),
    ),
}


def latency_reply(
    wire: Any, scenario: str, request: RecordedRequest, variant: str, read_timeout: float
) -> Optional[Tuple[Reply, float]]:
    """The provider's answer to ``request`` in a latency ``scenario``, and the seconds it holds
    the whole of it back before its status line; ``None`` where the wire has no text case.

    ``wire`` is a :class:`~conformance.wires.Wire` (not named in the signature: the wire's
    base class looks this module's variants up, so this module does not import it).

    The form (whole or streamed) is the one the request asked for, as the ``text`` case's.
    """
    from ..provider.replies import HangReply, StreamReply

    text = wire.reply("text", "stream" if wire.wants_stream(request) else "chat", request)
    if text is None:
        return None
    if scenario == "slow-first-token":
        silence = in_time_silence(read_timeout)
        if isinstance(text, StreamReply):
            # The status line and headers go out at once, as a provider sends them on a
            # streamed request; its first event waits.
            pauses = dict(text.pauses)
            pauses[0] = pauses.get(0, 0.0) + silence
            return dataclasses.replace(text, pauses=pauses), 0.0
        return text, silence
    if not isinstance(text, StreamReply):
        return HangReply(), 0.0
    chunks = list(text.chunks)
    cut = 0 if variant == "before-first-token" else len(chunks) // 2
    pauses = {index: seconds for index, seconds in text.pauses.items() if index < cut}
    return dataclasses.replace(text, chunks=chunks[:cut], pauses=pauses, hang=True, end="complete"), 0.0
