"""Where a gate run's facts come from: the client the target really uses, and the recordings it replayed.

Strategy: a release report states two things a reader cannot check by eye, and each is
worked out here from evidence, never from what the user wrote alone.

* The client. A target may declare its client package (``client = "openai"`` or
  ``--client``), but the declaration is words: a urllib loop declared as ``openai``
  would be stamped with whatever ``openai`` is installed. :func:`client_evidence`
  reports the installed version only when the target's own code imports the
  package: the modules its hooks are defined in, and the modules they import from,
  two steps deep, hold a module or an object of the package. Otherwise the version
  is ``"declared, not verified"``.
* The recordings. A replayed target's requests went to the kit's fake provider, but
  its answers came from a real one: :func:`recording_provenance` gathers what the
  fixtures' stamps say (models, upstream base URLs, when they were recorded, the tool
  schema hashes, the clients' user agents), and names each of those on which the
  fixtures disagree among themselves.
"""

from __future__ import annotations

import functools
import sys
import types
from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, Iterator, List, Optional, Sequence, Set, Tuple

__all__ = [
    "DECLARED_NOT_VERIFIED",
    "NOT_INSTALLED",
    "ClientEvidence",
    "client_evidence",
    "import_names",
    "recording_provenance",
]

NOT_INSTALLED = "not installed"
DECLARED_NOT_VERIFIED = "declared, not verified"
#: The target's attributes that hold the user's own code.
_HOOKS = ("create_loop", "create_backend", "run", "chat", "stream")
#: How far from the target's own modules an import is followed (the module that defines the
#: hook, then the modules it imports from: a test module importing the team's client module).
_DEPTH = 2


@dataclass(frozen=True)
class ClientEvidence:
    """The client package a report names, its version, and whether the target's code uses it."""

    package: Optional[str]
    #: The installed version where the target's code imports the package, else
    #: :data:`DECLARED_NOT_VERIFIED` or :data:`NOT_INSTALLED`; ``None`` where none is declared.
    version: Optional[str]
    verified: bool
    #: Why the version is or is not stated, for the report's reader.
    reason: str


@functools.lru_cache(maxsize=64)
def _distribution_of(package: str) -> Optional[Tuple[str, str]]:
    """``(distribution name, version)`` of ``package`` (a distribution or an import name), or ``None``."""
    import importlib.metadata as metadata

    try:
        return package, metadata.version(package)
    except metadata.PackageNotFoundError:
        pass
    # An import name (``google.genai``) whose distribution is spelt otherwise (``google-genai``).
    find = getattr(metadata, "packages_distributions", None)  # Python 3.10+
    if find is not None:
        for dist in find().get(package.split(".")[0], []):
            try:
                return dist, metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
    return None


def import_names(package: str) -> FrozenSet[str]:
    """The top-level import names ``package`` (a distribution or an import name) provides."""
    import importlib.metadata as metadata

    names = {package.split(".")[0].replace("-", "_")}
    if "." in package:
        return frozenset({package})  # an import name already: google.genai
    try:
        distribution = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        return frozenset(names)
    top = distribution.read_text("top_level.txt")
    if top:
        names.update(line.strip() for line in top.splitlines() if line.strip())
    for entry in distribution.files or ():
        parts: Tuple[str, ...] = tuple(getattr(entry, "parts", ()))
        if len(parts) >= 2 and parts[-1] == "__init__.py" and not parts[0].endswith((".dist-info", ".data")):
            names.add(parts[0])
    return frozenset(names)


def _unwrap(hook: Any) -> Iterator[str]:
    """The modules the code of ``hook`` lives in."""
    seen = 0
    while hook is not None and seen < 8:
        seen += 1
        if isinstance(hook, functools.partial):
            hook = hook.func
            continue
        owner = getattr(hook, "__self__", None)
        if owner is not None and not isinstance(owner, types.ModuleType):
            yield type(owner).__module__
        module = getattr(hook, "__module__", None)
        if isinstance(module, str):
            yield module
        hook = getattr(hook, "__wrapped__", None) or getattr(hook, "__func__", None)


def _own_modules(target: Any) -> List[str]:
    found: List[str] = []
    for attribute in _HOOKS:
        for module in _unwrap(getattr(target, attribute, None)):
            if module not in found:
                found.append(module)
    return found


def _is_users(name: str) -> bool:
    """Whether ``name`` is a module of the user's (not this library's, not the standard library's)."""
    top = name.split(".")[0]
    if top in ("conformance", "builtins"):
        return False
    stdlib = getattr(sys, "stdlib_module_names", ())  # Python 3.10+
    return top not in stdlib


def _referenced(module: types.ModuleType) -> Set[str]:
    """The modules ``module``'s globals come from: modules it imported, and the homes of its names."""
    out: Set[str] = set()
    for value in list(vars(module).values()):
        if isinstance(value, types.ModuleType):
            out.add(value.__name__)
            continue
        home = getattr(value, "__module__", None)
        if isinstance(home, str):
            out.add(home)
    return out


def _uses(target: Any, names: FrozenSet[str]) -> Optional[str]:
    """The module of the target's code that imports one of ``names``, or ``None``."""

    def belongs(module: str) -> bool:
        return any(module == n or module.startswith(n + ".") for n in names)

    frontier = [m for m in _own_modules(target) if m in sys.modules]
    visited: Set[str] = set()
    for _ in range(_DEPTH):
        following: List[str] = []
        for name in frontier:
            if name in visited:
                continue
            visited.add(name)
            if belongs(name):
                return name
            for referenced in _referenced(sys.modules[name]):
                if belongs(referenced):
                    return name
                if _is_users(referenced) and referenced in sys.modules:
                    following.append(referenced)
        frontier = following
    return None


def client_evidence(target: Any, package: Optional[str]) -> ClientEvidence:
    """What the report may say of ``package`` as ``target``'s client: see the module's strategy."""
    if not package:
        return ClientEvidence(None, None, False, "the target names no client package")
    found = _distribution_of(package)
    if found is None:
        return ClientEvidence(package, NOT_INSTALLED, False, f"{package} is not installed here")
    distribution, version = found
    user = _uses(target, import_names(distribution) | import_names(package))
    if user is None:
        modules = ", ".join(_own_modules(target)) or "no module"
        return ClientEvidence(
            package,
            DECLARED_NOT_VERIFIED,
            False,
            f"{distribution} {version} is installed, but the target's code ({modules}) never imports it",
        )
    return ClientEvidence(package, version, True, f"imported by {user}")


#: The stamp fields whose values a replayed run reports, by the report's name for them.
_RECORDED = (
    ("models", "model"),
    ("base_urls", "base_url"),
    ("schema_hashes", "schema_hash"),
    ("user_agents", "user_agent"),
    ("wires", "wire"),
)


def recording_provenance(wire: Any) -> Optional[Dict[str, Any]]:
    """What the recordings a replayed ``wire`` serves were made against, or ``None`` for a live wire."""
    from .replay import ReplayWire

    if not isinstance(wire, ReplayWire):
        return None
    stamps = [f.stamp for f in wire.fixtures]
    out: Dict[str, Any] = {"source": str(wire.source), "fixtures": len(stamps)}
    disagree: List[str] = []
    for key, attribute in _RECORDED:
        values = sorted({str(v) for v in (getattr(s, attribute) for s in stamps) if v is not None})
        out[key] = values
        if len(values) > 1:
            disagree.append(attribute)
    when = sorted(s.recorded_at for s in stamps)
    out["recorded_at"] = {"first": when[0], "last": when[-1]}
    missing_hash = sum(1 for s in stamps if s.schema_hash is None)
    if missing_hash and missing_hash < len(stamps):
        disagree.append("schema_hash (some fixtures carry none)")
    out["disagreements"] = disagree
    return out


def describe_disagreements(provenance: Dict[str, Any]) -> Sequence[str]:
    """One sentence per stamp field the fixtures disagree on, for the Markdown."""
    return [
        f"the fixtures disagree on {field}: re-record them in one session, or split the folder"
        for field in provenance.get("disagreements", ())
    ]
