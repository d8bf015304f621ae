"""The fake provider is safe to leave running: loopback only, bounded input, no evaluation of input."""

from __future__ import annotations

import ast
import io
import socket
import unittest
from contextlib import redirect_stderr
from pathlib import Path

from conformance.__main__ import main
from conformance.errors import ProviderInputError
from conformance.provider import FakeProvider, JsonReply, start_fake_provider
from conformance.provider._server import is_loopback

from .test_provider_support import RawConnection, http1_request

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "conformance"
#: What would run or rebuild objects from bytes a client sent.
FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__"}
FORBIDDEN_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "jsonpickle"}


def _can_bind(host: str) -> bool:
    try:
        with socket.socket() as sock:
            sock.bind((host, 0))
        return True
    except OSError:
        return False


class TestBinding(unittest.TestCase):
    def test_provider_binds_loopback_by_default(self) -> None:
        """Without a host, the provider listens on 127.0.0.1 only."""
        with start_fake_provider() as provider:
            assert provider._sock is not None
            sockname = provider._sock.getsockname()
            self.assertEqual(sockname[0], "127.0.0.1")
            self.assertTrue(provider.url.startswith("http://127.0.0.1:"))

    def test_serve_refuses_a_non_loopback_host_without_allow_remote(self) -> None:
        """serve will not bind beyond loopback unless told to, and says why."""
        for host in ("0.0.0.0", "::", "192.0.2.1"):
            with self.subTest(host=host):
                argv = ["serve", "--wire", "openai-chat", "--scenario", "text", "--host", host]
                err = io.StringIO()
                with redirect_stderr(err), self.assertRaises(SystemExit) as done:
                    main(argv, out=io.StringIO())
                self.assertEqual(done.exception.code, 2)  # a usage error
                self.assertRegex(err.getvalue(), "refusing to bind .*add --allow-remote")

    def test_serve_with_allow_remote_warns_before_it_binds(self) -> None:
        """With --allow-remote, serve warns that the host is reachable before it binds it."""
        # 192.0.2.1 is a documentation address no machine has: the bind fails at once,
        # after the warning, as a usage error naming the address, and nothing is ever reachable.
        out, err = io.StringIO(), io.StringIO()
        argv = ["serve", "--wire", "openai-chat", "--scenario", "text", "--host", "192.0.2.1",
                "--allow-remote"]
        with redirect_stderr(err), self.assertRaises(SystemExit) as done:
            main(argv, out=out)
        self.assertEqual(done.exception.code, 2)
        self.assertIn("cannot listen on 192.0.2.1 port 0", err.getvalue())
        self.assertEqual(out.getvalue(), "warning: listening on 192.0.2.1, reachable from other machines\n")

    def test_provider_refuses_a_non_loopback_host_without_allow_remote(self) -> None:
        """start_fake_provider binds beyond loopback only when told to, and says why."""
        for host in ("0.0.0.0", "::", "192.0.2.1", "example.org"):
            with self.subTest(host=host):
                expected = f"refusing to bind {host}.*allow_remote=True"
                with self.assertRaisesRegex(ProviderInputError, expected):
                    start_fake_provider(host=host)

    def test_every_loopback_address_counts_as_loopback(self) -> None:
        """localhost, all of 127.0.0.0/8 and ::1 need no flag; anything else does."""
        for host in ("localhost", "127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "[::1]"):
            with self.subTest(host=host):
                self.assertTrue(is_loopback(host))
        for host in ("0.0.0.0", "::", "10.0.0.1", "192.0.2.1", "example.org", ""):
            with self.subTest(host=host):
                self.assertFalse(is_loopback(host))


class TestLimits(unittest.TestCase):
    def test_default_limits_are_sane(self) -> None:
        """By default heads are capped at 64 KiB, bodies at 64 MiB, and a slow head at 30 s."""
        provider = FakeProvider()
        hub = provider._hub
        self.assertEqual(hub.max_header_bytes, 64 * 1024)
        self.assertEqual(hub.max_body_bytes, 64 * 1024 * 1024)
        self.assertEqual(hub.header_timeout, 30.0)

    def test_limit_settings_move_the_limits(self) -> None:
        """max_header_bytes and max_body_bytes change where 431 and 413 begin, byte for byte."""
        for header_limit, body_limit in ((2048, 1000), (8192, 50000)):
            with self.subTest(max_header_bytes=header_limit, max_body_bytes=body_limit):
                limits = {"max_header_bytes": header_limit, "max_body_bytes": body_limit}
                with start_fake_provider(**limits) as provider:
                    provider.reply(JsonReply({}))
                    base = len(http1_request("GET", "/h", headers={"x-pad": ""}))
                    for pad, status in ((header_limit - base, 200), (header_limit - base + 1, 431)):
                        with RawConnection(provider.port) as connection:
                            connection.send(http1_request("GET", "/h", headers={"x-pad": "p" * pad}))
                            self.assertEqual(connection.read_response().status, status, pad)
                    for size, status in ((body_limit, 200), (body_limit + 1, 413)):
                        with RawConnection(provider.port) as connection:
                            connection.send(http1_request("POST", "/b", b"x" * size))
                            self.assertEqual(connection.read_response().status, status, size)


class TestNoEvaluation(unittest.TestCase):
    def test_package_never_evaluates_or_unpickles(self) -> None:
        """No module of the package calls eval/exec/compile or imports pickle, marshal or the like."""
        found = []
        files = sorted(PACKAGE.rglob("*.py"))
        self.assertGreater(len(files), 10)
        for path in files:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    if node.func.id in FORBIDDEN_CALLS:
                        found.append(f"{where} calls {node.func.id}()")
                elif isinstance(node, ast.Import):
                    found += [f"{where} imports {a.name}" for a in node.names
                              if a.name.split(".")[0] in FORBIDDEN_MODULES]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    if node.module.split(".")[0] in FORBIDDEN_MODULES:
                        found.append(f"{where} imports from {node.module}")
                elif isinstance(node, ast.Attribute) and node.attr in ("loads", "load"):
                    base = node.value
                    if isinstance(base, ast.Name) and base.id in FORBIDDEN_MODULES:
                        found.append(f"{where} uses {base.id}.{node.attr}")
        self.assertEqual(found, [])


if __name__ == "__main__":
    unittest.main()
