"""The BackendConformanceTestCase mixin: generated tests, settings, hooks."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
import textwrap
import unittest
from pathlib import Path
from typing import Any

from conformance import BackendConformanceTestCase, ChatRequest, openai_chat_wire
from conformance.errors import TargetDefinitionError
from conformance.reference.openai_chat import OpenAIChatBackend
from conformance.scenarios import SCENARIOS


class ReferenceConformance(BackendConformanceTestCase, unittest.TestCase):
    wire = openai_chat_wire
    skip = {"content-filter/stream": "left out to show a skip by mode"}
    read_timeout = 0.5

    def create_backend(self, url: str) -> OpenAIChatBackend:
        return OpenAIChatBackend(f"{url}/v1", timeout=self.read_timeout)


class HookedConformance(BackendConformanceTestCase, unittest.TestCase):
    """A backend whose surface differs: complete(messages) instead of chat(request)."""

    wire = openai_chat_wire
    calls: list = []

    def create_backend(self, url: str) -> Any:
        return OpenAIChatBackend(f"{url}/v1")

    async def chat(self, backend: Any, request: ChatRequest) -> Any:
        type(self).calls.append("chat")
        return await backend.chat(request)


def generated(cls: type) -> list:
    return sorted(name for name in vars(cls) if name.startswith("test_"))


class GenerationTests(unittest.TestCase):
    def test_one_test_per_scenario_and_mode(self) -> None:
        """The subclass gets test_<scenario>_<mode> for every case."""
        expected = sorted(
            f"test_{s.replace('-', '_')}_{m}" for s, row in SCENARIOS.items() for m in row.modes
        )
        self.assertEqual(generated(ReferenceConformance), expected)

    def test_the_mixin_alone_has_no_tests(self) -> None:
        """Nothing is collected from the mixin itself."""
        self.assertEqual(generated(BackendConformanceTestCase), [])
        self.assertEqual(unittest.defaultTestLoader.getTestCaseNames(BackendConformanceTestCase), [])

    def test_generated_tests_carry_a_troubleshooting_docstring(self) -> None:
        """Each test says what the backend must do and where to look when it fails."""
        doc = ReferenceConformance.test_tool_call_stream.__doc__ or ""
        self.assertTrue(doc.startswith("tool-call/stream: the backend must return one complete get_weather"))
        self.assertIn("docs/troubleshooting.md#tool-call", doc)

    def test_subclass_runs_green_with_its_skip(self) -> None:
        """Run under unittest, the reference subclass passes and skips what it declared."""
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(ReferenceConformance)
        result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(suite)
        self.assertEqual((result.failures, result.errors), ([], []))
        self.assertEqual(
            [(t.id().rsplit(".", 1)[1], r) for t, r in result.skipped],
            [
                ("test_content_filter_stream", "left out to show a skip by mode"),
                ("test_corrupt_frame_stream", openai_chat_wire.absent("corrupt-frame")),
                ("test_reasoning_chat", openai_chat_wire.absent("reasoning")),
                ("test_reasoning_stream", openai_chat_wire.absent("reasoning")),
            ],
        )

    def test_hooks_adapt_the_call(self) -> None:
        """An overridden chat hook is what the case calls."""
        HookedConformance.calls.clear()
        result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(
            HookedConformance("test_text_chat")
        )
        self.assertTrue(result.wasSuccessful())
        self.assertEqual(HookedConformance.calls, ["chat"])


class DeclarationTests(unittest.TestCase):
    def declare(self, **attrs: Any) -> type:
        return type("Declared", (BackendConformanceTestCase, unittest.TestCase), attrs)

    def test_missing_wire_is_refused(self) -> None:
        """A TestCase subclass without a wire fails at class creation."""
        with self.assertRaisesRegex(TargetDefinitionError, "set wire = "):
            self.declare()

    def test_abstract_base_is_allowed(self) -> None:
        """abstract = True marks a shared base that gets no tests."""
        base = self.declare(abstract=True)
        self.assertEqual(generated(base), [])
        child = type("Child", (base,), {"wire": openai_chat_wire})
        self.assertIn("test_text_chat", generated(child))

    def test_misspelt_setting_suggests_the_right_one(self) -> None:
        """skips = {...} is refused with a did-you-mean."""
        with self.assertRaisesRegex(TargetDefinitionError, "unknown setting 'skips'; did you mean 'skip'"):
            self.declare(wire=openai_chat_wire, skips={"auth": "x"})

    def test_misspelt_scenario_suggests_the_right_one(self) -> None:
        """A scenario name with a typo in skip is refused with a did-you-mean."""
        with self.assertRaisesRegex(TargetDefinitionError, "did you mean 'rate-limit'"):
            self.declare(wire=openai_chat_wire, skip={"rate_limit": "x"})

    def test_overriding_a_generated_test_is_refused(self) -> None:
        """A generated test can be left out only with a reason in skip."""
        with self.assertRaisesRegex(TargetDefinitionError, "test_text_chat is generated"):
            self.declare(wire=openai_chat_wire, test_text_chat=lambda self: None)

    def test_wire_must_be_a_wire(self) -> None:
        """A wire given by name is refused."""
        with self.assertRaisesRegex(TargetDefinitionError, "wire must be a Wire"):
            self.declare(wire="openai-chat")

    def test_create_backend_must_be_implemented(self) -> None:
        """A subclass that forgets create_backend fails every case with the reason."""
        cls = self.declare(wire=openai_chat_wire)
        result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(cls("test_text_chat"))
        self.assertEqual(len(result.failures), 1)
        self.assertIn("must implement create_backend", result.failures[0][1])


@unittest.skipUnless(importlib.util.find_spec("pytest"), "pytest is not installed: pip install pytest")
class PytestTests(unittest.TestCase):
    def test_pytest_collects_the_generated_tests(self) -> None:
        """pytest finds the generated tests of a subclass and none of the mixin."""
        root = Path(__file__).resolve().parent.parent
        source = textwrap.dedent(
            """
            import unittest
            from conformance import BackendConformanceTestCase, openai_chat_wire
            from conformance.reference.openai_chat import OpenAIChatBackend

            class TestGateway(BackendConformanceTestCase, unittest.TestCase):
                wire = openai_chat_wire
                def create_backend(self, url):
                    return OpenAIChatBackend(url + "/v1")
            """
        )
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder, "test_gateway.py")
            path.write_text(source)
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    str(path),
                    "-k",
                    "test_text_chat or test_tool_call_stream",
                ],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=folder,
                env={"PYTHONPATH": str(root), "PATH": ""},
            )
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        cases = sum(len(row.modes) for row in SCENARIOS.values())
        self.assertRegex(done.stdout, rf"\b2 passed, {cases - 2} deselected\b")


if __name__ == "__main__":
    unittest.main()
