"""The provider loop a process's cases share: each case's provider stays its own; none poisons the next."""

from __future__ import annotations

import http.client
import json
import threading
import time
import unittest
from typing import Tuple
from unittest import mock

from conformance._host import case_provider, host
from conformance.errors import ProviderInputError
from conformance.provider import HangReply, JsonReply, RecordedRequest, Reply, _server

from .hygiene import blocks_on_purpose


def get(port: int, path: str, timeout: float = 5.0) -> Tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


class SharedLoopTests(unittest.TestCase):
    def test_two_cases_at_once_keep_their_own_port_script_and_record(self) -> None:
        """Two providers on the shared loop answer with their own scripts and record only their own."""
        with case_provider(False) as first, case_provider(False) as second:
            first.reply(JsonReply({"from": "first"}))
            second.reply(JsonReply({"from": "second"}))
            self.assertNotEqual(first.port, second.port)
            self.assertIs(first._loop, second._loop)
            self.assertEqual(json.loads(get(first.port, "/a")[1]), {"from": "first"})
            self.assertEqual(json.loads(get(second.port, "/b")[1]), {"from": "second"})
            self.assertEqual([r.path for r in first.requests], ["/a"])
            self.assertEqual([r.path for r in second.requests], ["/b"])

    def test_closing_one_case_ends_its_requests_and_no_other(self) -> None:
        """A case's close ends its own hanging request; another case on the loop goes on answering."""
        with case_provider(False) as other:
            other.reply(JsonReply({"ok": True}))
            with case_provider(False) as hanging:
                hanging.reply(HangReply())
                errors = []

                def ask() -> None:
                    try:
                        get(hanging.port, "/hang", timeout=5)
                    except OSError as exc:
                        errors.append(exc)

                thread = threading.Thread(target=ask)
                thread.start()
                hanging.next_request(5)
            started = time.monotonic()
            thread.join(5)
            self.assertLess(time.monotonic() - started, 2, "the hanging request outlived its case's provider")
            self.assertTrue(errors, "the hanging request was answered")
            self.assertEqual(get(other.port, "/after")[0], 200)

    def test_a_handler_that_blocks_the_loop_poisons_no_later_case(self) -> None:
        """A blocked handler fails its case's close, naming it; the next case is served on a fresh loop."""
        release = threading.Event()
        self.addCleanup(release.set)

        def blocks(request: RecordedRequest) -> Reply:
            with blocks_on_purpose():
                release.wait(30)
            return JsonReply({})

        blocked = host()
        answered: list = []
        with mock.patch.object(_server, "_JOIN_SECONDS", 0.2):
            with self.assertRaisesRegex(ProviderInputError, "the reply handler .*blocks.* has not returned"):
                with case_provider(False) as stuck:
                    stuck.reply(blocks)
                    port = stuck.port
                    client = threading.Thread(target=lambda: answered.append(get(port, "/", timeout=30)))
                    client.start()
                    stuck.next_request(5)
        self.assertTrue(blocked.retired)
        with case_provider(False) as later:
            later.reply(JsonReply({"fresh": True}))
            self.assertIsNot(later._loop, blocked.loop)
            self.assertEqual(json.loads(get(later.port, "/")[1]), {"fresh": True})
        release.set()
        client.join(10)
        stuck.close()  # the handler returned: this close finishes
        blocked.thread.join(5)
        self.assertFalse(blocked.thread.is_alive(), "the retired loop did not end once it was free")
        self.assertTrue(blocked.loop.is_closed())


if __name__ == "__main__":
    unittest.main()
