"""A user's code type-checks against the library: mypy --strict on a backend of one's own."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HAVE_MYPY = importlib.util.find_spec("mypy") is not None

USER_CODE = textwrap.dedent(
    """
    from __future__ import annotations

    from typing import AsyncIterator, Iterator

    from conformance import (
        AsyncChatBackend, ChatBackend, ChatRequest, ChatResponse, StreamChunk, race_abort,
        shutdown_on_abort,
    )


    class SyncBackend:
        def chat(self, request: ChatRequest) -> ChatResponse:
            signal = request.signal
            if signal is not None and signal.aborted:
                signal.raise_reason()
            with shutdown_on_abort(signal, []):
                return ChatResponse("hi", "stop")

        def chat_stream(self, request: ChatRequest) -> Iterator[StreamChunk]:
            yield StreamChunk("hi", finish_reason="stop")


    class AsyncBackend:
        async def chat(self, request: ChatRequest) -> ChatResponse:
            async def call() -> ChatResponse:
                return ChatResponse("hi", "stop")

            return await race_abort(call(), request.signal)

        async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
            yield StreamChunk("hi", finish_reason="stop")


    def make_sync(url: str) -> ChatBackend:
        return SyncBackend()


    def make_async(url: str) -> AsyncChatBackend:
        return AsyncBackend()
    """
)

WRONG_CODE = textwrap.dedent(
    """
    from __future__ import annotations

    from conformance import ChatBackend, ChatRequest, ChatResponse


    class Wrong:
        def chat(self, prompt: str) -> ChatResponse:
            return ChatResponse("hi", "stop")


    def make(url: str) -> ChatBackend:
        return Wrong()
    """
)


@unittest.skipUnless(HAVE_MYPY, "mypy is not installed: pip install -e '.[test]'")
class TypingTests(unittest.TestCase):
    cache: tempfile.TemporaryDirectory[str]

    @classmethod
    def setUpClass(cls) -> None:
        # One cache for the class's runs, none in the source tree: the first run reads
        # the standard library's stubs and the package, the others reuse what it found.
        # mypy checks each cached module against its source, so nothing stale is used.
        cls.cache = tempfile.TemporaryDirectory()
        cls.addClassCleanup(cls.cache.cleanup)

    def _mypy(self, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "user_backend.py"
            path.write_text(code, encoding="utf-8")
            env = {k: v for k, v in os.environ.items() if k != "MYPYPATH"}
            return subprocess.run(
                [sys.executable, "-m", "mypy", "--strict", "--cache-dir", self.cache.name, str(path)],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )

    def test_a_users_backends_check_against_the_protocols(self) -> None:
        """Sync and async backends that follow the contract pass mypy --strict, raise_reason() included."""
        done = self._mypy(USER_CODE, ROOT)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)

    def test_a_backend_that_parts_from_the_contract_is_refused(self) -> None:
        """A chat() that takes the wrong argument does not pass for a ChatBackend."""
        done = self._mypy(WRONG_CODE, ROOT)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn('Incompatible return value type (got "Wrong", expected "ChatBackend")', done.stdout)

    def test_an_installed_package_is_visible_to_mypy(self) -> None:
        """Where the package is installed (editable or not), mypy finds it from any directory."""
        with tempfile.TemporaryDirectory() as elsewhere:
            # Away from the source tree, Python finds the package only where it is installed.
            found = subprocess.run(
                [sys.executable, "-c", "import conformance"], cwd=elsewhere, capture_output=True, timeout=60
            )
            if found.returncode != 0:
                self.skipTest("llm-backend-conformance is not installed here; the test command installs it")
            done = self._mypy(USER_CODE, Path(elsewhere))
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)


if __name__ == "__main__":
    unittest.main()
