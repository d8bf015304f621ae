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
place for any. Anthropic documents ``ping`` events "any number of times" in a stream
(``Wire.keepalive``): there ``slow-first-token`` has a ``pinged`` shape too, pings
every 0.4 of the read timeout for longer than the timeout in all, which a backend whose
timeout is per read waits out. A stall whose pings keep coming is a provider still
alive, which a read timeout rightly outlasts, so the stall here is the one a read
timeout exists for: no bytes at all (an upstream gone, a proxy holding a buffered
stream).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Mapping, Optional, Tuple

from .._bounds import in_time_silence
from ._variants import Variant

if TYPE_CHECKING:
    from ..provider.replies import RecordedRequest, Reply, StreamReply

__all__ = ["LATENCY_VARIANTS", "PINGED", "latency_reply", "latency_variants"]

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


#: The ``slow-first-token`` shape of a wire whose provider keeps a stream alive while it
#: thinks (``Wire.keepalive``): the first block opened, then that event every 0.4 of the read
#: timeout, three silences in all, 1.2 of it, then the rest. No gap reaches the read
#: timeout, so a backend whose timeout is per read waits it out; one that takes its read
#: timeout for a deadline on the whole reply gives up.
PINGED = Variant(
    "pinged",
    "a block opened, then a ping every 0.4 of the read timeout, 1.2 of it in all, then the rest",
    "https://docs.anthropic.com/en/docs/build-with-claude/streaming#event-types (event streams "
    "may include any number of ping events)",
    source_kind="docs",
)

#: How many silences the ``pinged`` shape holds, each :func:`~conformance._bounds.in_time_silence`.
PINGED_SILENCES = 3


def latency_variants(wire: Any, scenario: str, mode: str) -> Tuple[Variant, ...]:
    """The shapes ``wire`` plays a latency ``scenario`` in, in ``mode``: where a stream may
    carry pings, the plain silence is named ``silent``, beside ``pinged``."""
    listed = LATENCY_VARIANTS.get(f"{scenario}/{mode}") or LATENCY_VARIANTS[scenario]
    keepalive: bytes = getattr(wire, "keepalive", b"")
    if scenario == "slow-first-token" and mode == "stream" and keepalive:
        return (dataclasses.replace(listed[0], name="silent"), PINGED)
    return listed


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
        if variant == PINGED.name and isinstance(text, StreamReply):
            return _pinged(text, wire.keepalive, silence), 0.0
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


def _pinged(text: StreamReply, keepalive: bytes, silence: float) -> StreamReply:
    """``text`` up to its first ``content_block_start`` event (where real streams carry their
    ``ping``; the first event where there is none), then ``keepalive`` after each of
    :data:`PINGED_SILENCES` silences but the last, which the rest of the stream ends."""
    raw = b"".join(text.chunks)
    opened = raw.find(b"content_block_start")
    end = raw.index(b"\n\n", max(opened, 0)) + 2
    chunks = [raw[:end], *([keepalive] * (PINGED_SILENCES - 1)), raw[end:]]
    pauses = {index: silence for index in range(1, len(chunks))}
    return dataclasses.replace(text, chunks=chunks, pauses=pauses)
