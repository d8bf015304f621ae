"""The configurations of a shipped wire that the command line can name.

Strategy: a shipped wire is one object of ``WIRES``, and a few are built by a
constructor that plays more shapes than the default object does
(``OpenAIChatWire(servers=..., reasoning_content=...)``, the OpenAI-compatible servers'
own). :data:`OPTIONS` is the table of the command-line options that each set one keyword
of such a constructor: the option, the wire it configures, the keyword, how its text is
read, and the settings ``serve --list`` shows one by one. The reference matrix and
``serve`` take them; ``run`` and ``gate`` do not, since a target names its wire object
itself. A problem with an option is a :class:`ValueError` whose message the command line
shows as a usage error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

if TYPE_CHECKING:
    import argparse

    from .wires._base import Wire
    from .wires._variants import Variant

__all__ = [
    "OPTIONS",
    "WireOption",
    "add_options",
    "as_code",
    "check_chosen",
    "configured",
    "extra_variants",
    "flags_of",
    "given",
]

#: wire name -> the keywords of its constructor the command line sets, and their values.
Settings = Mapping[str, Mapping[str, Any]]


def _servers(text: str) -> Tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise ValueError("--servers takes one or more server names, comma-separated: --servers mistral,groq")
    return names


def _every_server() -> Tuple[Tuple[str, ...], ...]:
    from .wires.openai_chat import OpenAIChatWire

    return tuple((name,) for name in OpenAIChatWire.SERVERS)


@dataclass(frozen=True)
class WireOption:
    """One command-line option that sets one keyword of a shipped wire's constructor."""

    flag: str
    #: The name of the wire (in ``WIRES``) whose class takes the keyword.
    wire: str
    keyword: str
    help: str
    #: How the option's text is read; ``None`` for a switch (it sets ``True``).
    read: Optional[Callable[[str], Any]] = None
    metavar: str = ""
    #: Each setting ``serve --list`` shows the variants of, one at a time.
    settings: Callable[[], Tuple[Any, ...]] = lambda: (True,)

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")

    def spelled(self, value: Any) -> str:
        """The option as it is written on the command line for ``value``: ``--servers mistral,groq``."""
        if self.read is None:
            return self.flag
        return f"{self.flag} {','.join(value)}"


OPTIONS: Tuple[WireOption, ...] = (
    WireOption(
        "--servers",
        "openai-chat",
        "servers",
        "openai-chat only: also play these OpenAI-compatible servers' own recorded shapes, as variants "
        "after api.openai.com's (comma-separated: mistral, groq, deepseek, llama.cpp, openrouter); "
        "OpenAIChatWire(servers=...)",
        read=_servers,
        metavar="NAME[,NAME...]",
        settings=_every_server,
    ),
    WireOption(
        "--reasoning-content",
        "openai-chat",
        "reasoning_content",
        "openai-chat only: the wire of a server that returns reasoning_content (DeepSeek, vLLM, SGLang), "
        "with the reasoning scenario api.openai.com has no part in; OpenAIChatWire(reasoning_content=True)",
    ),
)


def add_options(parser: argparse.ArgumentParser, *, suppress: bool = False, hidden: bool = False) -> None:
    """Add :data:`OPTIONS` to ``parser``. Under a command they default to :data:`argparse.SUPPRESS`,
    so that one given before the command's name is not undone; ``hidden`` leaves them out of
    the help of a command that takes them only to refuse them with the reason."""
    import argparse

    default: Any = argparse.SUPPRESS if suppress else None
    for option in OPTIONS:
        text = argparse.SUPPRESS if hidden else option.help
        if option.read is None:
            parser.add_argument(option.flag, action="store_true", default=default, help=text)
        else:
            parser.add_argument(option.flag, metavar=option.metavar, default=default, help=text)


def given(args: argparse.Namespace) -> Dict[str, Dict[str, Any]]:
    """The settings the command line gave: wire name -> {keyword: value}; empty where none."""
    out: Dict[str, Dict[str, Any]] = {}
    for option in OPTIONS:
        text = getattr(args, option.dest, None)
        if text is None or text is False:
            continue
        value = True if option.read is None else option.read(text)
        out.setdefault(option.wire, {})[option.keyword] = value
    for name in out:
        configured(name, out)  # a bad value is refused now, before anything starts
    return out


def _flags(name: str, keywords: Mapping[str, Any]) -> List[str]:
    return [o.spelled(keywords[o.keyword]) for o in OPTIONS if o.wire == name and o.keyword in keywords]


def check_chosen(settings: Settings, wires: Optional[Sequence[str]], where: str) -> None:
    """A :class:`ValueError` where ``settings`` configure a wire that is not among ``wires``
    (``None``: every wire runs), saying which wire the options are for."""
    for name, keywords in settings.items():
        if wires is None or name in wires:
            continue
        named = " and ".join(_flags(name, keywords))
        raise ValueError(
            f"{named} configure{'s' if len(keywords) == 1 else ''} the {name} wire, and {where} "
            f"{', '.join(wires) or 'no wire'}: add --wire {name}, or leave {named.split()[0]} out"
        )


def configured(name: str, settings: Settings) -> Wire:
    """The wire ``name`` as ``settings`` configure it: the shipped object where they say nothing."""
    from .wires import WIRES

    base = WIRES[name]
    keywords = settings.get(name)
    if not keywords:
        return base
    try:
        return type(base)(**keywords)
    except ValueError as exc:
        raise ValueError(f"{' '.join(_flags(name, keywords))}: {exc}") from None


def as_code(settings: Settings) -> str:
    """The wires ``settings`` configure, as Python builds them: ``OpenAIChatWire(servers=('mistral',))``."""
    parts = []
    for name, keywords in settings.items():
        wire = configured(name, settings)
        shown = ", ".join(f"{keyword}={getattr(wire, keyword)!r}" for keyword in keywords)
        parts.append(f"{type(wire).__name__}({shown})")
    return ", ".join(parts)


def flags_of(wire: Wire) -> List[str]:
    """The options that build ``wire`` from its shipped object, as they are written: ``[]`` for it."""
    out = []
    for option in OPTIONS:
        if option.wire != wire.name:
            continue
        value = getattr(wire, option.keyword, None)
        if value:
            out.append(option.spelled(value))
    return out


def _either(settings: List[Tuple[WireOption, Any]]) -> str:
    """``--servers mistral, groq or deepseek``: the options that each add a variant, grouped by option."""
    parts = []
    for option in OPTIONS:
        values = [value for o, value in settings if o is option]
        if not values:
            continue
        if option.read is None:
            parts.append(option.flag)
            continue
        named = [",".join(value) for value in values]
        listed = ", ".join(named[:-1]) + f" or {named[-1]}" if len(named) > 1 else named[0]
        parts.append(f"{option.flag} {listed}")
    return " or ".join(parts)


def extra_variants(wire: Wire) -> List[Tuple[str, str, int, Variant, str]]:
    """The variants a configuration of ``wire`` plays and ``wire`` does not, for ``serve --list``:
    ``(scenario, mode, its place among the scenario's variants, the variant, the options
    that add it, as they are written)``, in scenario order."""
    from .scenarios import SCENARIOS

    found: Dict[Tuple[str, str, str], Tuple[int, Variant, List[Tuple[WireOption, Any]]]] = {}
    for option in OPTIONS:
        if option.wire != wire.name:
            continue
        for value in option.settings():
            other = type(wire)(**{option.keyword: value})
            for scenario, row in SCENARIOS.items():
                for mode in row.modes:
                    own = set()
                    if wire.absent_in(scenario, mode) is None:
                        own = {v.name for v in wire.variants(scenario, mode)}
                    for place, variant in enumerate(other.variants(scenario, mode)):
                        if not variant.name or variant.name in own:
                            continue
                        key = (scenario, mode, variant.name)
                        entry = found.setdefault(key, (place, variant, []))
                        entry[2].append((option, value))
    order = {name: index for index, name in enumerate(SCENARIOS)}
    rows = [(s, m, place, v, _either(settings)) for (s, m, _), (place, v, settings) in found.items()]
    return sorted(rows, key=lambda r: (order[r[0]], r[1] != "chat", r[2]))
