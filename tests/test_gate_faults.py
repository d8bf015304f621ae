"""The fault stages' replies: the provider's bare drop, and each wire's 429 with its delay made short.

The loops that mishandle a fault are in the one zoo (``tests/gate_zoo.py``, run by
``tests/test_gate_mutants.py``) beside every other broken loop.
"""

from __future__ import annotations

import json
import socket
import unittest
from typing import Tuple

from conformance.errors import ProviderInputError
from conformance.gate.faults import RATE_LIMIT_RETRY_AFTER
from conformance.provider import DropReply, start_fake_provider
from conformance.provider.replies import JsonReply, RecordedRequest
from conformance.wires import WIRES


class DropReplyTests(unittest.TestCase):
    def _ask(self, end: str) -> Tuple[bytes, str]:
        with start_fake_provider() as provider:
            provider.reply(DropReply(end))
            with socket.create_connection(("127.0.0.1", provider.port), timeout=5) as sock:
                sock.sendall(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}")
                try:
                    return sock.recv(100), "eof"
                except ConnectionResetError:
                    return b"", "reset"

    def test_a_dropped_request_gets_no_byte_and_the_connection_ends_as_asked(self) -> None:
        """close ends the connection with a FIN, reset with a TCP reset, neither after any response byte."""
        self.assertEqual(self._ask("close"), (b"", "eof"))
        self.assertEqual(self._ask("reset"), (b"", "reset"))

    def test_a_misspelt_end_is_refused(self) -> None:
        """DropReply takes 'close' or 'reset', and says so."""
        with self.assertRaisesRegex(ProviderInputError, "did you mean 'reset'"):
            DropReply("rest")


class RateLimitReplyTests(unittest.TestCase):
    def test_the_wire_s_own_429_asks_for_the_short_delay(self) -> None:
        """Each delay is rewritten in its provider's form; Bedrock's, Cohere's, Vertex's, OpenAI's: none."""
        from conformance.gate._fault_replies import rate_limit_reply

        body = json.dumps({"model": "m", "stream": False}).encode()
        request = RecordedRequest("POST", "/v1/chat/completions", "", {}, body, "HTTP/1.1")
        shown = f"{RATE_LIMIT_RETRY_AFTER:g}"
        undelayed = ("bedrock-converse", "bedrock-invoke", "anthropic-vertex", "gemini-vertex", "cohere")
        undelayed += ("openai-chat", "openai-responses")
        for name in ("azure-openai-chat", "anthropic", "gemini", *undelayed):
            with self.subTest(name):
                reply = rate_limit_reply(WIRES[name], request, RATE_LIMIT_RETRY_AFTER)
                assert isinstance(reply, JsonReply)
                self.assertEqual(reply.status, 429)
                headers = {k.lower(): v for k, v in (reply.headers or {}).items()}
                encoded = reply.encoded()
                if name == "gemini":
                    self.assertIn(f'"{shown}s"'.encode(), encoded)
                    self.assertNotIn(b'"7s"', encoded)
                elif name in undelayed:
                    self.assertNotIn("retry-after", headers)  # these throttles ask for no delay
                    self.assertNotIn(b"retryDelay", encoded)
                else:
                    self.assertEqual(headers["retry-after"], shown)
                if "retry-after-ms" in headers:
                    self.assertEqual(headers["retry-after-ms"], str(int(RATE_LIMIT_RETRY_AFTER * 1000)))
        self.assertIsNone(rate_limit_reply(WIRES["ollama"], request, RATE_LIMIT_RETRY_AFTER))


if __name__ == "__main__":
    unittest.main()
