"""The fake provider: a real HTTP/1.1 and h2c server on loopback, scripted per request.

This package is the only place in the library that touches sockets.
"""

from __future__ import annotations

from ._server import FakeProvider, start_fake_provider
from .replies import Handler, HangReply, JsonReply, RecordedRequest, Reply, StreamReply

__all__ = [
    "FakeProvider",
    "Handler",
    "HangReply",
    "JsonReply",
    "RecordedRequest",
    "Reply",
    "StreamReply",
    "start_fake_provider",
]
