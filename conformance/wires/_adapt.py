"""A wire of one's own need not subclass :class:`Wire`: anything with a name and a reply will do.

Strategy: the cases read a wire through :class:`Wire`'s surface (its hooks and data, each
with a default). :func:`as_wire` takes a :class:`WireLike` object (a ``name`` and a
``reply(scenario, mode, request)``) and wraps it in a :class:`Wire` that answers with
the object's ``reply`` and takes every other hook or setting the object happens to
define, keeping :class:`Wire`'s default for the rest. A :class:`Wire` passes through as
it is; anything else is refused with what it lacks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, FrozenSet, Optional, Protocol, runtime_checkable

from ._base import Wire

if TYPE_CHECKING:
    from ..provider.replies import RecordedRequest, Reply

__all__ = ["AdaptedWire", "WireLike", "as_wire"]


@runtime_checkable
class WireLike(Protocol):
    """What a wire is at the least: a ``name`` and ``reply(scenario, mode, request)``.

    ``reply`` returns a ``JsonReply``, a ``StreamReply`` or a ``HangReply``, or ``None``
    where the provider has no such case (the case is then skipped with that reason).
    Every other hook of :class:`Wire` may be defined too, and is then used.
    """

    name: str

    def reply(self, scenario: str, mode: str, request: RecordedRequest) -> Optional[Reply]: ...


#: What the wrapper never takes from the object: its own answer, and what it works out.
_OWN = frozenset({"reply", "scripts_turns", "absent"})


def _borrowable() -> FrozenSet[str]:
    """Every public hook and setting of :class:`Wire`, from its class body."""
    names: set[str] = set()
    for klass in Wire.__mro__:
        if klass is object:
            continue
        names.update(n for n in vars(klass) if not n.startswith("_"))
    return frozenset(names - _OWN)


class AdaptedWire(Wire):
    """A :class:`WireLike` object seen as a :class:`Wire`: its reply, its own hooks, defaults for the rest."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = str(inner.name)
        self.title = str(getattr(inner, "title", "") or inner.name)
        for attribute in _borrowable() - {"name", "title"}:
            try:
                value = getattr(inner, attribute)
            except AttributeError:
                continue
            setattr(self, attribute, value)

    def reply(self, scenario: str, mode: str, request: RecordedRequest, variant: str = "") -> Optional[Reply]:
        # A reply() of one's own may take no variant: it is passed only where one is asked for.
        if variant:
            return self.inner.reply(scenario, mode, request, variant)  # type: ignore[no-any-return]
        return self.inner.reply(scenario, mode, request)  # type: ignore[no-any-return]

    def scripts_turns(self) -> bool:
        return all(callable(getattr(self.inner, hook, None)) for hook in ("turn_stream", "read_history"))

    def __repr__(self) -> str:
        return f"<wire {self.name!r} of {self.inner!r}>"


def as_wire(obj: Any, where: str) -> Wire:
    """``obj`` as a :class:`Wire`: itself if it is one, wrapped if it is :class:`WireLike`.

    Raises :class:`~conformance.errors.TargetDefinitionError` saying what ``obj`` lacks.
    """
    from ..errors import TargetDefinitionError

    if isinstance(obj, Wire):
        return obj
    expected = (
        "a Wire such as openai_chat_wire, or an object with a name (a non-empty str) and "
        "reply(scenario, mode, request)"
    )
    if isinstance(obj, type):
        raise TargetDefinitionError(
            f"{where}: wire must be {expected}; got the class {obj.__name__}: use {obj.__name__}()"
        )
    name = getattr(obj, "name", None)
    if not isinstance(name, str) or not name:
        raise TargetDefinitionError(f"{where}: wire must be {expected}; {obj!r} has no name (got {name!r})")
    if not callable(getattr(obj, "reply", None)):
        raise TargetDefinitionError(f"{where}: wire must be {expected}; {obj!r} has no reply() method")
    return AdaptedWire(obj)
