"""The command line, one module per command.

``main`` reads the arguments and hands them to a command: ``matrix`` (the reference
matrix, run when no command is named), ``run``, ``serve`` (with ``listing`` for
``serve --list``), ``record`` and ``gate``. ``shared`` holds what they share: the
options every command that runs cases takes, the default jobs and processes, colour,
and the reports written.
"""

from __future__ import annotations

from .main import main

__all__ = ["main"]
