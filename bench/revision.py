"""The package as it was at a git revision, imported beside the working copy, for side-by-side figures.

Strategy: ``git archive REV conformance`` is unpacked into a temporary folder and
imported under a name of its own (``conformance_at_<hash>``), so the code before a
change and the code after it run in one process, in the same rounds, under the same
load. That works because the package imports itself only relatively (``from ..errors
import``), never as ``conformance``. The unpacked folder also serves a fresh
interpreter (``PYTHONPATH``), for figures that need one, such as the import time.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Optional, Tuple

__all__ = ["Revision", "load_revision"]

ROOT = Path(__file__).resolve().parent.parent


class Revision:
    """One revision's package, imported: ``module("provider")`` is its ``conformance.provider``."""

    def __init__(self, label: str, name: str, folder: Path) -> None:
        #: How the bench names it in its tables: the short hash.
        self.label = label
        #: The name it is imported under.
        self.name = name
        #: The folder holding its ``conformance/`` (for ``PYTHONPATH``).
        self.folder = folder

    def module(self, dotted: str) -> ModuleType:
        """A submodule of the revision's package, such as ``"provider._http1"``."""
        return importlib.import_module(f"{self.name}.{dotted}")


def load_revision(rev: str) -> Tuple[Optional[Revision], str]:
    """The package at ``rev`` (a commit, tag or branch), or ``None`` and why it could not be had."""
    try:
        short = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", f"{rev}^{{commit}}"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.strip()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", short, "conformance"],
            capture_output=True, timeout=60, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return None, (
            f"no base revision {rev!r} to compare with ({type(exc).__name__}: "
            "not a git checkout, or no such revision)"
        )
    folder = Path(tempfile.mkdtemp(prefix=f"bench-{short}-"))
    atexit.register(shutil.rmtree, folder, True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        if hasattr(tarfile, "data_filter"):  # 3.12, and the security releases before it
            tar.extractall(folder, filter="data")
        else:
            tar.extractall(folder)  # our own repository's archive, written by git just now
    name = f"conformance_at_{short}"
    package = folder / "conformance"
    spec = importlib.util.spec_from_file_location(
        name, package / "__init__.py", submodule_search_locations=[str(package)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return Revision(short, name, folder), ""
