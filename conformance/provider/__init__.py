"""The fake provider: a real HTTP/1.1 and h2c server on loopback, scripted per request.

This package is the only place in the library that touches sockets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .replies import DropReply, Handler, HangReply, JsonReply, RecordedRequest, Reply, StreamReply, held

if TYPE_CHECKING:
    from ._server import FakeProvider, start_fake_provider
    from .events import WireEvent, events_around

__all__ = [
    "DropReply",
    "FakeProvider",
    "Handler",
    "HangReply",
    "JsonReply",
    "RecordedRequest",
    "Reply",
    "StreamReply",
    "WireEvent",
    "events_around",
    "held",
    "start_fake_provider",
]


def __getattr__(name: str) -> Any:
    # The server (sockets, its loop thread) loads when first asked for: a wire needs only
    # the reply types, and importing the cases should not start up the server's code.
    if name in ("FakeProvider", "start_fake_provider", "WireEvent", "events_around"):
        from . import _server, events

        value = getattr(_server if name in ("FakeProvider", "start_fake_provider") else events, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
