"""The read-only directory ``read_fixture`` reads from, the files it holds, and the journal
``append_record`` writes to.

Strategy: the files are data in :data:`SANDBOX_FILES`, written to a fresh temporary
directory that is then made read-only, so every run sees the same bytes and no tool
can change them. A path is taken relative to the sandbox, resolved (following any
link), and refused unless it stays inside: a loop that lets a model read
``../../etc/passwd`` is told so by a structured error, and nothing ever raises into
the loop. The directory goes away on :meth:`Sandbox.close`, or when the object is
collected, whichever comes first. The one write tool writes to a :class:`Journal` in
memory instead, one per toolset, so that a case's writes are its own.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Callable, List, Mapping, Optional, Tuple, Union

from ..contract import ToolError

__all__ = ["SANDBOX_FILES", "Journal", "JournalEntry", "Sandbox"]


def _large_text() -> str:
    # 1024 numbered lines of 64 bytes each: 64 KiB, and any cut or reorder shows.
    return "".join(f"line {n:04d}: the quick brown fox jumps over the lazy dog".ljust(63, ".") + "\n"
                   for n in range(1, 1025))


#: The sandbox's files, by their path inside it: a small JSON document, text of one to
#: four UTF-8 bytes per character, an empty file, and 64 KiB for the large round trip.
SANDBOX_FILES: Mapping[str, str] = {
    "weather.json": json.dumps(
        {"city": "Paris", "temperature_c": 18, "conditions": "sunny"}, sort_keys=True
    ) + "\n",
    "notes/unicode.txt": "Café au lait, 18 °C ☀ — naïve résumé 🌤 ok.\n",
    "empty.txt": "",
    "large.txt": _large_text(),
}

_READ_ONLY_FILE = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
_READ_ONLY_DIR = _READ_ONLY_FILE | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH


def _remove(root: str) -> None:
    # Read-only directories cannot be emptied: give the owner write access back first.
    for directory, _dirs, _files in os.walk(root):
        os.chmod(directory, stat.S_IRWXU)
    shutil.rmtree(root, ignore_errors=True)


class Sandbox:
    """A temporary read-only directory holding ``files`` (by default :data:`SANDBOX_FILES`)."""

    def __init__(self, files: Optional[Mapping[str, str]] = None) -> None:
        self.files: Mapping[str, str] = dict(SANDBOX_FILES if files is None else files)
        self.root = Path(tempfile.mkdtemp(prefix="conformance-gate-")).resolve()
        self._finalizer = weakref.finalize(self, _remove, str(self.root))
        try:
            for name, text in self.files.items():
                target = self.root / PurePosixPath(name)
                if not target.resolve().is_relative_to(self.root):
                    raise ValueError(f"sandbox file {name!r} would lie outside the sandbox")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(text.encode("utf-8"))
            self._lock_down()
        except BaseException:
            self.close()
            raise

    def _lock_down(self) -> None:
        for directory, _dirs, files in os.walk(self.root, topdown=False):
            for name in files:
                os.chmod(os.path.join(directory, name), _READ_ONLY_FILE)
            os.chmod(directory, _READ_ONLY_DIR)

    @property
    def closed(self) -> bool:
        """Whether the directory has been removed."""
        return not self._finalizer.alive

    def close(self) -> None:
        """Remove the directory; a second call does nothing."""
        self._finalizer()

    def detach(self) -> None:
        """Never remove the directory from this process (a forked child holding its parent's)."""
        self._finalizer.detach()

    def names(self) -> Tuple[str, ...]:
        """The readable paths, sorted."""
        return tuple(sorted(self.files))

    def read(self, path: str) -> Union[str, ToolError]:
        """The text of the file at ``path`` inside the sandbox, or the error that says why not."""
        where = {"path": path}
        if self.closed:
            return ToolError("sandbox_closed", "the sandbox was closed; no file can be read", details=where)
        if not path or "\x00" in path:
            return ToolError("invalid_path", "give a non-empty path without NUL characters", details=where)
        if PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute() or path.startswith("\\"):
            return ToolError(
                "outside_sandbox",
                f"{path!r} is absolute; give a path relative to the sandbox, e.g. 'weather.json'",
                details=where,
            )
        target = (self.root / path).resolve()
        if not target.is_relative_to(self.root):
            return ToolError(
                "outside_sandbox", f"{path!r} leads outside the sandbox; only its own files can be read",
                details=where,
            )
        if not target.is_file():
            return ToolError(
                "not_found",
                f"no file {path!r} in the sandbox; the files are: {', '.join(self.names())}",
                details={"path": path, "available": list(self.names())},
            )
        try:
            return target.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            return ToolError("unreadable", f"{path!r} could not be read: {error}", details=where)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self.files)} files"
        return f"<Sandbox {state}>"


@dataclass(frozen=True)
class JournalEntry:
    """One write that landed: its place in the journal, its idempotency key, its text, when."""

    number: int
    key: str
    record: str
    at: float

    def __str__(self) -> str:
        return f"#{self.number} {self.key!r}: {self.record!r}"


class Journal:
    """The sandbox's one writable thing: an in-memory list that ``append_record`` appends to.

    It keeps every write, a repeated key included: a real store behind a tool is only as
    idempotent as the code that calls it, and a second entry under one key is what a
    double write looks like. Thread-safe; readers get snapshots.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._entries: List[JournalEntry] = []
        self._clock = clock

    def append(self, key: str, record: str) -> JournalEntry:
        with self._lock:
            entry = JournalEntry(len(self._entries) + 1, key, record, self._clock())
            self._entries.append(entry)
            return entry

    def entries(self) -> Tuple[JournalEntry, ...]:
        with self._lock:
            return tuple(self._entries)

    def by_key(self, key: str) -> Tuple[JournalEntry, ...]:
        return tuple(e for e in self.entries() if e.key == key)

    def __repr__(self) -> str:
        return f"<Journal {len(self.entries())} entries>"
