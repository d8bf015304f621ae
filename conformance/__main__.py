"""``python -m conformance``: the command line, whose commands live in :mod:`conformance._cli`."""

from __future__ import annotations

import sys

from ._cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
