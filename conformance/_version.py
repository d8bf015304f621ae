"""The library's version, kept in the package itself so that a vendored copy knows it too.

``pyproject.toml`` reads :data:`__version__` from here (``[tool.setuptools.dynamic]``),
so there is one place to change it. :func:`kit_version` is what reports state.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

__all__ = ["__version__", "kit_version"]

__version__ = "0.1.0.dev0"


def kit_version() -> str:
    """The version reports state: the installed distribution's where it describes this very
    copy; else :data:`__version__` followed by ``(source tree)`` for a checkout of this
    project, or ``(vendored)`` for the ``conformance/`` folder copied into another one.

    A vendored copy has no distribution metadata of its own, and one installed beside it
    may be another release: the metadata counts only where it describes the running files.
    """
    import importlib.metadata as metadata

    here = Path(__file__).resolve().parent
    try:
        distribution = metadata.distribution("llm-backend-conformance")
    except metadata.PackageNotFoundError:
        distribution = None
    if distribution is not None:
        located = _package_folder(distribution)
        if located is None or located == here:
            return str(distribution.version)
    pyproject = here.parent / "pyproject.toml"
    try:
        ours = 'name = "llm-backend-conformance"' in pyproject.read_text(encoding="utf-8")
    except OSError:
        ours = False
    return f"{__version__} ({'source tree' if ours else 'vendored'})"


def _package_folder(distribution: Any) -> Optional[Path]:
    """Where ``distribution`` keeps the ``conformance`` package, or ``None`` where it does not say.

    A regular install lists the package's files; an editable one lists none (a ``.pth``
    entry points at the source tree) and names that tree in ``direct_url.json``.
    """
    for entry in distribution.files or ():
        if tuple(getattr(entry, "parts", ())) == ("conformance", "__init__.py"):
            return Path(str(distribution.locate_file(entry))).resolve().parent
    import json
    import urllib.parse

    try:
        direct = json.loads(distribution.read_text("direct_url.json") or "{}")
    except ValueError:
        return None
    url = direct.get("url") if isinstance(direct, dict) else None
    if not isinstance(url, str) or not url.startswith("file://"):
        return None
    root = urllib.parse.unquote(urllib.parse.urlparse(url).path)
    return (Path(root) / "conformance").resolve()
