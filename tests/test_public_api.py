"""The public surface: __all__, what each name resolves to, and what importing costs."""

from __future__ import annotations

import ast
import subprocess
import sys
import unittest
from pathlib import Path

import conformance
import conformance.wires

PACKAGE = Path(conformance.__file__).resolve().parent


class PublicApiTests(unittest.TestCase):
    def test_all_is_sorted_and_unique(self) -> None:
        """__all__ lists each public name once, in order."""
        self.assertEqual(conformance.__all__, sorted(set(conformance.__all__)))

    def test_every_name_in_all_resolves_to_its_module(self) -> None:
        """Each exported name is found, and is the object its module defines."""
        for name in conformance.__all__:
            with self.subTest(name=name):
                value = getattr(conformance, name)
                module = conformance._EXPORTS[name]
                source = __import__(f"conformance.{module}", fromlist=[name])
                self.assertIs(value, getattr(source, name))

    def test_type_checking_imports_match_the_exports(self) -> None:
        """The imports type checkers read name exactly the exported names, from the same modules."""
        tree = ast.parse((PACKAGE / "__init__.py").read_text())
        found = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                for alias in node.names:
                    found[alias.name] = node.module
        self.assertEqual(found, dict(conformance._EXPORTS))

    def test_unknown_name_is_an_attribute_error(self) -> None:
        """A misspelt name fails like any missing module attribute."""
        with self.assertRaisesRegex(AttributeError, "has no attribute 'BackendConformanceTestcase'"):
            conformance.BackendConformanceTestcase  # noqa: B018

    def test_dir_lists_the_public_names(self) -> None:
        """dir() shows every public name, imported yet or not."""
        self.assertLessEqual(set(conformance.__all__), set(dir(conformance)))

    def test_import_loads_neither_asyncio_nor_h2(self) -> None:
        """import conformance alone leaves asyncio and h2 unloaded; the HTTP/1.1 path never loads h2."""
        code = (
            "import sys, conformance; before = ('asyncio' in sys.modules, 'h2' in sys.modules); "
            "from conformance import BackendConformanceTestCase, openai_chat_wire, start_fake_provider; "
            "start_fake_provider().close(); print(before, 'h2' in sys.modules)"
        )
        done = _fresh_python(code)
        self.assertEqual(done.stdout.strip(), "(False, False) False", done.stderr)

    def test_the_gate_import_loads_neither_asyncio_nor_ssl(self) -> None:
        """import conformance.gate, and the mixin with a wire, leave asyncio and ssl for a case to load."""
        code = (
            "import sys, conformance.gate; a = [m for m in ('asyncio', 'ssl') if m in sys.modules]; "
            "from conformance import openai_chat_wire; "
            "from conformance.gate import AgentLoopConformanceTestCase, AgentLoopTarget, STAGES; "
            "b = [m for m in ('asyncio', 'ssl') if m in sys.modules]; print(a, b)"
        )
        done = _fresh_python(code)
        self.assertEqual(done.stdout.strip(), "[] []", done.stderr)

    def test_the_gate_names_are_its_modules_own(self) -> None:
        """Each name conformance.gate lists loads from the module defining it; a typo is an AttributeError."""
        import importlib

        import conformance.gate as gate

        self.assertEqual(sorted(gate.__all__), sorted(gate._EXPORTS))
        for name, module in gate._EXPORTS.items():
            with self.subTest(name=name):
                defined = getattr(importlib.import_module(f"conformance.gate.{module}"), name)
                self.assertIs(getattr(gate, name), defined)
        self.assertLessEqual(set(gate.__all__), set(dir(gate)))
        with self.assertRaisesRegex(AttributeError, "has no attribute 'ReferenceLop'"):
            gate.ReferenceLop  # noqa: B018

    def test_the_app_mode_names_are_its_modules_own(self) -> None:
        """Each name conformance.app lists loads from the module defining it; a typo is an AttributeError."""
        import importlib

        import conformance.app as app

        self.assertEqual(sorted(app.__all__), sorted(app._EXPORTS))
        for name, module in app._EXPORTS.items():
            with self.subTest(name=name):
                defined = getattr(importlib.import_module(f"conformance.app.{module}"), name)
                self.assertIs(getattr(app, name), defined)
        self.assertLessEqual(set(app.__all__), set(dir(app)))
        with self.assertRaisesRegex(AttributeError, "has no attribute 'FakeProviderEnviron'"):
            app.FakeProviderEnviron  # noqa: B018

    def test_the_app_mode_import_loads_neither_asyncio_nor_pytest(self) -> None:
        """import conformance.app and its mixin leave asyncio and pytest unloaded: pytest loads its plugin."""
        code = (
            "import sys, conformance.app; from conformance.app import AppConformanceTestCase; "
            "print([m for m in ('asyncio', 'pytest', 'conformance.app.pytest_plugin') if m in sys.modules])"
        )
        done = _fresh_python(code)
        self.assertEqual(done.stdout.strip(), "[]", done.stderr)

    def test_naming_a_wire_loads_only_what_its_definitions_need(self) -> None:
        """The tutorial's import with any wire leaves replies, encoders, turns and other wires unloaded."""
        # What a case needs once it runs, not a test module when it is imported.
        unwanted = (
            "asyncio",
            "socket",
            "unittest",
            "json",
            "uuid",
            "hashlib",
            "urllib.parse",
            "conformance.cases",
            "conformance.encoders",
            "conformance.provider",
            "conformance.provider.replies",
            "conformance.wires._schema",
            "conformance.wires._script",
            "conformance.wires._turns",
            "conformance.wires._tool_results",
        )
        wires = (
            "anthropic",
            "anthropic_vertex",
            "azure_openai",
            "bedrock",
            "bedrock_invoke",
            "cohere",
            "gemini",
            "gemini_vertex",
            "ollama",
            "openai_chat",
            "openai_responses",
        )
        # Each wire's package plays turns and reads histories only once a case asks it to.
        unwanted += tuple(f"conformance.wires.{w}.{m}" for w in wires for m in ("_turns", "_history"))
        for name in conformance.wires._MODULES:
            # Its own package, and the package of the wire it is built on (Claude's hosts build on
            # Anthropic's).
            lineage = {
                cls.__module__.split(".")[2]
                for cls in type(getattr(conformance.wires, name)).__mro__
                if cls.__module__.startswith("conformance.wires.")
            }
            with self.subTest(wire=name):
                code = (
                    f"import sys; from conformance import BackendConformanceTestCase, {name}; "
                    f"print(' '.join(m for m in {unwanted!r} if m in sys.modules) or '-'); "
                    f"print(' '.join(w for w in {wires!r} if 'conformance.wires.' + w in sys.modules))"
                )
                done = _fresh_python(code)
                loaded, own = (done.stdout.splitlines() + ["", ""])[:2]
                self.assertEqual(
                    loaded,
                    "-",
                    f"importing {name} loaded {loaded}: import them where "
                    f"a reply or check uses them ({done.stderr})",
                )
                self.assertIn(conformance.wires._MODULES[name], lineage)
                expected = " ".join(w for w in wires if w in lineage)
                self.assertEqual(own, expected, "only the named wire, and the wire it is built on, load")

    def test_each_wire_package_exports_its_class_and_its_wire(self) -> None:
        """A wire's package lists its Wire class and the instance conformance exports, and nothing else
        (Azure's holds its two wires, each with its class)."""
        import importlib

        for name, module in conformance.wires._MODULES.items():
            with self.subTest(wire=name):
                package = importlib.import_module(f"conformance.wires.{module}")
                held = [n for n, m in conformance.wires._MODULES.items() if m == module]
                classes = [type(getattr(package, n)).__name__ for n in held]
                self.assertEqual(sorted(package.__all__), sorted([*classes, *held]))
                cls = type(getattr(package, name))
                self.assertIs(cls, getattr(package, cls.__name__))
                self.assertIs(getattr(conformance, name), getattr(package, name))

    def test_helpers_for_a_wire_of_ones_own_import_from_the_base(self) -> None:
        """The turn and schema helpers wires._base passes on are the objects their modules define."""
        from conformance.wires import _base, _schema, _turns

        for name in ("History", "ScriptedCall", "ScriptedTurn", "TurnEvents", "split_text"):
            with self.subTest(name=name):
                self.assertIs(getattr(_base, name), getattr(_turns, name))
        self.assertIs(_base.schema_difference, _schema.schema_difference)
        self.assertLessEqual(set(_base.__all__), set(dir(_base)) | set(_base._REEXPORTS))
        with self.assertRaisesRegex(AttributeError, "has no attribute 'Histroy'"):
            _base.Histroy  # noqa: B018


class ProviderErrorTests(unittest.TestCase):
    def test_every_wires_failure_replies_read_as_their_kind(self) -> None:
        """provider_error reads each wire's failure replies, every variant, as the kind the shape means."""
        import json

        from conformance import SCENARIOS, WIRES, JsonReply, RecordedRequest, provider_error

        read = 0
        for name, wire in WIRES.items():
            for scenario, row in SCENARIOS.items():
                if row.error_kind is None or scenario == "stream-error":
                    continue
                for variant in wire.variants(scenario, "chat"):
                    with self.subTest(wire=name, scenario=scenario, variant=variant.name):
                        body = json.dumps({"model": "m", "messages": [], "contents": []}).encode()
                        request = RecordedRequest("POST", "/v1/x", "", {}, body, "HTTP/1.1")
                        reply = wire.reply(scenario, "chat", request, variant.name)
                        if not isinstance(reply, JsonReply):
                            continue
                        error = provider_error(
                            wire, reply.encoded(), status=reply.status, headers=dict(reply.headers or {})
                        )
                        self.assertIn(error.kind, variant.accepted_kinds(row.error_kind))
                        self.assertEqual(error.status, reply.status)
                        read += 1
        self.assertGreaterEqual(read, 6 * 5, "every wire's failure replies were read")

    def test_a_failure_inside_a_stream_reads_from_what_the_stream_carried(self) -> None:
        """Without a status, the error object, Ollama's text or Bedrock's exception gives the kind."""
        from conformance import provider_error

        cases = (
            ("anthropic", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            ("openai-chat", {"error": {"type": "server_error", "code": "server_is_overloaded"}}),
            ("openai-responses", {"type": "error", "code": "server_is_overloaded", "message": "busy"}),
            ("gemini", {"error": {"code": 503, "status": "UNAVAILABLE", "message": "overloaded"}}),
            ("gemini-vertex", {"error": {"code": 503, "status": "UNAVAILABLE", "message": "overloaded"}}),
            ("bedrock-converse", {"__type": "throttlingException", "message": "Too many requests"}),
            ("bedrock-invoke", {"__type": "serviceUnavailableException", "message": "unable to process"}),
            (
                "anthropic-vertex",
                {"type": "error", "error": {"details": None, "type": "overloaded_error", "message": "Busy"}},
            ),
            ("ollama", "server busy, please try again.  maximum pending requests exceeded"),
        )
        for wire, carried in cases:
            with self.subTest(wire=wire):
                error = provider_error(wire, carried)
                self.assertIsInstance(error, conformance.LLMError)
                self.assertIn(error.kind, ("overloaded", "rate_limit"))
                self.assertTrue(error.retryable)
                self.assertEqual(error.details["kind"], error.kind)

    def test_a_cohere_stream_that_ended_in_error_is_a_server_error(self) -> None:
        """Cohere's message-end saying ERROR or TIMEOUT, or its delta, reads as a retryable server_error."""
        from conformance import provider_error

        usage = {"tokens": {"input_tokens": 1, "output_tokens": 1}}
        for carried in (
            {"type": "message-end", "delta": {"error": "internal server error", "finish_reason": "ERROR"}},
            {"finish_reason": "TIMEOUT", "usage": usage},
        ):
            with self.subTest(carried=carried):
                error = provider_error("cohere", carried)
                self.assertEqual((error.kind, error.retryable, error.status), ("server_error", True, None))
                self.assertIn(error.details["finish_reason"], ("ERROR", "TIMEOUT"))

    def test_a_wire_without_a_reference_backend_is_named(self) -> None:
        """A wire name no reference backend reads is a ValueError that lists the ones it knows."""
        from conformance import provider_error

        wrong = "no reference backend reads wire 'openai-chats'; use one of: openai-chat"
        with self.assertRaisesRegex(ValueError, wrong):
            provider_error("openai-chats", b"{}", status=500)
        with self.assertRaisesRegex(ValueError, "error object"):
            provider_error("anthropic", "overloaded")


def _fresh_python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run in a fresh interpreter from the checkout: what an import loads shows there."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=PACKAGE.parent
    )


if __name__ == "__main__":
    unittest.main()
