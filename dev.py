"""The project's two commands, with their set-up, on a machine that has only Python.

    python3 dev.py main [ARGS]    the main job: python -m conformance ARGS
    python3 dev.py test [NAMES]   the tests: python -X dev -W error -m unittest (discover, or NAMES)

Each creates the virtual environment ``.venv`` beside this file on first use (or the
one named by ``CONFORMANCE_VENV``), installs the project into it editable, with the
``test`` and ``interop`` extras for ``test``, and runs the command with the
environment's Python from this folder, wherever it was called from. The install is
repeated only when ``pyproject.toml`` changes. Standard library only, so it runs
before anything is installed; it reaches nothing but the package index pip uses.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import List, Sequence

ROOT = Path(__file__).resolve().parent
TEST_COMMAND = ["-X", "dev", "-W", "error", "-m", "unittest"]
EXTRAS = {"main": (), "test": ("test", "interop")}
USAGE = __doc__.split("\n\n")[1]


def environment() -> Path:
    return Path(os.environ.get("CONFORMANCE_VENV") or ROOT / ".venv").resolve()


def interpreter(env: Path) -> Path:
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure(extras: Sequence[str]) -> Path:
    """The environment's Python, with the project and ``extras`` installed."""
    env = environment()
    python = interpreter(env)
    if not python.exists():
        print(f"creating the virtual environment {env}", flush=True)
        venv.create(env, with_pip=True)
    # One stamp per set of extras, keyed on pyproject.toml: a change to the
    # dependencies reinstalls, an unchanged tree costs nothing.
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]
    stamp = env / f".conformance-{'-'.join(extras) or 'base'}-{digest}"
    if not stamp.exists():
        target = f".[{','.join(extras)}]" if extras else "."
        print(f"installing {target} (editable) into {env}", flush=True)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        done = subprocess.run([*pip, "-e", target], cwd=ROOT)
        if done.returncode != 0:
            raise SystemExit(
                f"pip install -e '{target}' failed (exit {done.returncode}); see pip's output above"
            )
        stamp.touch()
    return python


def main(argv: List[str]) -> int:
    if not argv or argv[0] not in EXTRAS:
        print(USAGE, file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    python = ensure(EXTRAS[command])
    if command == "main":
        args = ["-m", "conformance", *rest]
    else:
        args = [*TEST_COMMAND, *(rest or ["discover", "-s", "tests", "-t", "."])]
    print(f"== {command}: python {' '.join(args)}", flush=True)
    return subprocess.run([str(python), *args], cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
