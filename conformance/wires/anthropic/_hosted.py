"""The Messages API as a cloud serves it: Amazon Bedrock's InvokeModel, Google Vertex AI's rawPredict.

Strategy: a host serves the same Claude, so the ``message``, its events and the rules
of a conversation are Anthropic's own, built by this package. What a host changes is
around them, and :class:`HostedWire` is :class:`AnthropicWire` with those as hooks:

- the route: the model is in the path, and the path, not the body, says whether to
  stream (:meth:`HostedWire.route`);
- the body: ``anthropic_version`` goes in it instead of a header, and ``model`` stays
  out of it (:meth:`HostedWire.check_request`);
- the ids: the host's infix after the type prefix, ``msg_bdrk_01…``, ``toolu_vrtx_01…``
  (:func:`host_id`), stamped on the events as they go out (:class:`HostedEvents`) and
  on a whole message (:meth:`HostedWire.whole_reply`);
- the message's own shape, as the host's captures show it: ``id`` first (both hosts'
  recorded messages start ``id, type, role, model``, api.anthropic.com's with ``model``),
  the ``usage`` members it lacks, whether it says ``stop_details: null``, and no padding
  inside the events' JSON (:func:`host_message`);
- how a stream is framed (a subclass of :class:`HostedEvents`), the headers, and what
  the host's own front end answers a failure with (:meth:`HostedWire.error_reply`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, AbstractSet, Any, Dict, List, Mapping, Optional, Tuple, Type

from ._replies import MESSAGE_ID, TOOL_USE_ID, Events
from ._variants import ERRORS
from ._wire import AnthropicWire

if TYPE_CHECKING:
    from ...provider.replies import JsonReply, RecordedRequest, Reply
    from .._script import History

__all__ = ["HostedEvents", "HostedWire", "host_id", "host_message", "hosted_message"]

#: The members a host's recorded messages start with, in this order.
_FIRST = ("id", "type", "role", "model")


def host_id(id_: str, infix: str) -> str:
    """An Anthropic id as a host names it: ``msg_01…`` becomes ``msg_bdrk_01…``.

    An id that has the infix already (a call id the host's own wire made up) stays as
    it is.
    """
    kind, underscore, rest = id_.partition("_")
    if not underscore or not infix or rest.startswith(infix):
        return id_
    return f"{kind}_{infix}{rest}"


def host_message(
    body: Mapping[str, Any], usage_absent: AbstractSet[str] = frozenset(), null_stop_details: bool = True
) -> Dict[str, Any]:
    """A ``message`` (whole, or inside ``message_start``) in a host's shape: ``id, type, role,
    model`` first, without the ``usage`` members in ``usage_absent``, and without
    ``stop_details: null`` unless ``null_stop_details``."""
    out = {key: body[key] for key in _FIRST if key in body}
    for key, value in body.items():
        if key in out or (key == "stop_details" and value is None and not null_stop_details):
            continue
        if key == "usage" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in usage_absent}
        out[key] = value
    return out


def hosted_message(
    body: Mapping[str, Any],
    infix: str,
    usage_absent: AbstractSet[str] = frozenset(),
    null_stop_details: bool = True,
) -> Dict[str, Any]:
    """A whole ``message`` in the host's shape (:func:`host_message`), with its id and the id of
    the single-turn scenarios' call as the host names them; a scripted call's id is the
    script's, played as it is."""
    content = [
        {**block, "id": host_id(TOOL_USE_ID, infix)}
        if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("id") == TOOL_USE_ID
        else block
        for block in body.get("content") or ()
    ]
    named = {**body, "id": host_id(str(body.get("id", "")), infix), "content": content}
    return host_message(named, usage_absent, null_stop_details)


class HostedEvents(Events):
    """The events of one streamed message, with the host's ids; a host frames them its own way.

    ``variant`` is the shape the stream is played in, for a host whose framing differs by
    shape (which exception a failure is framed as, an event of the host's own).
    """

    #: What the host puts after an id's type prefix: ``bdrk_``.
    infix = ""
    #: The members of api.anthropic.com's ``usage`` the host's messages lack.
    usage_absent: AbstractSet[str] = frozenset()
    #: No host was seen padding the events' JSON (Bedrock pads its frames with ``"p"``).
    padded = False

    def __init__(self, model: str, message_id: str = MESSAGE_ID, variant: str = "") -> None:
        super().__init__(model, host_id(message_id, self.infix))
        self.variant = variant
        self.tool_use_id = host_id(TOOL_USE_ID, self.infix)

    def emit(self, type_: str, **fields: Any) -> None:
        """Anthropic's event in the host's shape, framed by :meth:`send`."""
        if type_ == "message_start":
            shaped = host_message(fields["message"], self.usage_absent, self.null_stop_details)
            fields = {**fields, "message": shaped}
        elif type_ == "message_delta" and not self.null_stop_details:
            delta = fields["delta"]
            if "stop_details" in delta and delta["stop_details"] is None:
                fields = {**fields, "delta": {k: v for k, v in delta.items() if k != "stop_details"}}
        self.send(type_, fields)

    def send(self, type_: str, fields: Mapping[str, Any]) -> None:
        """One event as the host frames it: Anthropic's SSE, by default."""
        Events.emit(self, type_, **fields)


class HostedWire(AnthropicWire):
    """Anthropic's Messages wire as a cloud serves it; a host fills in the hooks."""

    #: The builder of a stream, with the host's framing and ids.
    events_class: Type[HostedEvents] = HostedEvents
    #: The ``anthropic_version`` values real clients put in the body, for the docs and the
    #: request's problems; any non-empty value is taken, since each SDK release may send
    #: its own.
    anthropic_versions: Tuple[str, ...] = ()
    #: Body members the host refuses, each with what its API answers.
    refused_members: Mapping[str, str] = {}
    #: Neither host sends a retry delay with its throttle.
    rate_limit_retry_after: Optional[float] = None

    # -- the route ----------------------------------------------------------------------

    def route(self, path: str) -> Optional[Tuple[str, bool]]:
        """The model a generation path names (percent-decoded) and whether it streams; ``None``
        where ``path`` is not a generation route."""
        raise NotImplementedError

    def is_generation(self, request: RecordedRequest) -> bool:
        return request.method == "POST" and self.route(request.path) is not None

    def wants_stream(self, request: RecordedRequest) -> bool:
        found = self.route(request.path)
        return found is not None and found[1]

    def model_of(self, request: RecordedRequest) -> str:
        found = self.route(request.path)
        return found[0] if found is not None and found[0] else "conformance-model"

    # -- the replies --------------------------------------------------------------------

    def events(self, model: str, message_id: str = MESSAGE_ID, variant: str = "") -> Events:
        return self.events_class(model, message_id, variant)

    def scripted_call_id(self, name: str, seed: str) -> str:
        """Anthropic's id with the host's infix: ``toolu_bdrk_01…``, ``toolu_vrtx_01…``."""
        return host_id(super().scripted_call_id(name, seed), self.events_class.infix)

    def whole_reply(self, body: Dict[str, Any]) -> JsonReply:
        shape = self.events_class
        body = hosted_message(body, shape.infix, shape.usage_absent, shape.null_stop_details)
        return self.message_reply(body)

    def message_reply(self, body: Dict[str, Any]) -> JsonReply:
        """A whole ``message``, its ids the host's already, as the host's response carries it."""
        raise NotImplementedError

    def error_reply(self, scenario: str, variant: str, stream: bool) -> Reply:
        """The host's answer to a request that fails before any answer, in ``variant``;
        ``stream`` where the request asked for a stream."""
        raise NotImplementedError

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        variant = variant or self.variants(scenario, mode)[0].name
        stream = self.wants_stream(request)
        if scenario in ERRORS:
            return self.error_reply(scenario, variant, stream)
        if scenario == "stream-error" and not stream:
            # A whole reply cannot fail halfway: the host fails the request instead.
            return self.error_reply("overloaded", "", stream)
        return super().reply(scenario, mode, request, variant)

    # -- multi-turn ---------------------------------------------------------------------

    def read_history(self, request: RecordedRequest) -> Optional[History]:
        from ._history import read_history

        return read_history(request, self.wants_stream(request))

    # -- the request --------------------------------------------------------------------

    def check_headers(self, headers: Mapping[str, str]) -> List[str]:
        """Problems with the headers the host authenticates by."""
        raise NotImplementedError

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        """Problems with the generation request: method, route, model, credentials, body."""
        from .._request import json_object
        from ._request import check_body

        problems: List[str] = []
        if request.method != "POST":
            problems.append(f"expected POST, got {request.method}")
        found = self.route(request.path)
        if found is None:
            problems.append(f"expected a path {self.route_shape()}, got {request.path}")
        elif found[0] != model:
            problems.append(f"expected model {model!r} in the path, got {found[0]!r}")
        problems.extend(self.check_headers(request.headers))
        body = json_object(request, problems)
        if not body:
            return problems
        problems.extend(self.check_version(body.get("anthropic_version")))
        for member, why in self.refused_members.items():
            if member in body:
                problems.append(f"expected no {member!r} in the body ({why}), got {member}={body[member]!r}")
        return problems + check_body(body)

    def route_shape(self) -> str:
        """The generation path, in words, for the problem where a request's is not one."""
        raise NotImplementedError

    def check_version(self, version: Any) -> List[str]:
        if isinstance(version, str) and version:
            return []
        known = " or ".join(repr(v) for v in self.anthropic_versions)
        return [
            f"expected anthropic_version in the body (the {self.title} API takes the version there, not "
            f"in an anthropic-version header; clients send {known}), got {version!r}"
        ]
