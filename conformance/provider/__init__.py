"""The fake provider: a real HTTP/1.1 and h2c server on loopback, scripted per request.

This package is the only place in the library that touches sockets.
"""

from __future__ import annotations

from ._server import FakeProvider, start_fake_provider
from .events import WireEvent, events_around
from .replies import Handler, HangReply, JsonReply, RecordedRequest, Reply, StreamReply

__all__ = [
    "FakeProvider",
    "Handler",
    "HangReply",
    "JsonReply",
    "RecordedRequest",
    "Reply",
    "StreamReply",
    "WireEvent",
    "events_around",
    "start_fake_provider",
]
