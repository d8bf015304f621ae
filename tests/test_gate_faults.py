"""The fault stages' replies: the provider's bare drop, and each wire's 429 with its delay made short.

The loops that mishandle a fault are in the one zoo (``tests/gate_zoo.py``, run by
``tests/test_gate_mutants.py``) beside every other broken loop.
"""

from __future__ import annotations

import json
import socket
import unittest
from pathlib import Path
from typing import Tuple

from conformance.errors import ProviderInputError
from conformance.gate.cases import AgentLoopCase
from conformance.gate.faults import RATE_LIMIT_RETRY_AFTER
from conformance.gate.loop import AgentLoopTarget
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


#: The wires none of whose 429s asks for a delay in any form (docs/gate-stages.md lists them).
UNDELAYED = (
    "openai-chat",
    "openai-responses",
    "azure-openai-responses",
    "anthropic-vertex",
    "gemini-vertex",
    "bedrock-converse",
    "bedrock-invoke",
    "cohere",
)
DOCS = Path(__file__).resolve().parent.parent / "docs" / "gate-stages.md"


class RateLimitReplyTests(unittest.TestCase):
    def test_the_stage_asks_for_a_delay_wherever_the_provider_has_a_form_for_one(self) -> None:
        """The stage's 429 asks for a delay on every wire with a shape that does; the page lists the rest."""
        from conformance.gate._fault_replies import asked_delay, rate_limit_reply

        undelayed = []
        for name, wire in WIRES.items():
            if not wire.scripts_turns() or name == "ollama":
                continue
            for stream in (False, True):
                body = json.dumps({"model": "m", "stream": stream}).encode()
                request = RecordedRequest("POST", "/v1/chat/completions", "", {}, body, "HTTP/1.1")
                mode = "stream" if wire.wants_stream(request) else "chat"
                delays = [
                    asked_delay(reply)
                    for variant in wire.variants("rate-limit", mode)
                    for reply in [wire.reply("rate-limit", mode, request, variant.name)]
                    if reply is not None
                ]
                stage = rate_limit_reply(wire, request, RATE_LIMIT_RETRY_AFTER)
                assert stage is not None
                with self.subTest(name, mode=mode):
                    if any(d is not None for d in delays):
                        self.assertEqual(asked_delay(stage), RATE_LIMIT_RETRY_AFTER)
                    else:
                        self.assertIsNone(asked_delay(stage))
                        undelayed.append(name)
        self.assertEqual(sorted(set(undelayed)), sorted(UNDELAYED))
        text = DOCS.read_text(encoding="utf-8")
        listed = text[text.index("**The delay in each wire's form.**"):]
        listed = listed[: listed.index("\n\n")]
        for name in UNDELAYED:
            self.assertIn(f"`{name}`", listed, f"docs/gate-stages.md does not list {name} as asking no delay")


    def test_the_wire_s_own_429_asks_for_the_short_delay(self) -> None:
        """Each delay is rewritten in its provider's form; Bedrock's, Cohere's, Vertex's, OpenAI's: none."""
        from conformance.gate._fault_replies import rate_limit_reply

        body = json.dumps({"model": "m", "stream": False}).encode()
        request = RecordedRequest("POST", "/v1/chat/completions", "", {}, body, "HTTP/1.1")
        shown = f"{RATE_LIMIT_RETRY_AFTER:g}"
        undelayed = UNDELAYED
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


class CorruptArgumentsConditionTests(unittest.TestCase):
    @staticmethod
    def case(fine_grained: bool) -> AgentLoopCase:
        """The corrupt-arguments stage (stream) for the reference loop on Anthropic, whose
        backend turns fine-grained tool streaming on or not."""
        from conformance.gate.reference_loop import ReferenceLoop
        from conformance.reference.anthropic import AnthropicBackend

        class Backend(AnthropicBackend):
            fine_grained_tool_streaming = fine_grained

        target = AgentLoopTarget(
            "careful", WIRES["anthropic"], lambda url: ReferenceLoop(Backend(url, api_key="test"))
        )
        return AgentLoopCase(target, "corrupt-arguments", "stream")

    def test_broken_argument_json_is_played_only_to_a_loop_that_asked_for_fine_grained_streaming(
        self,
    ) -> None:
        """A loop whose request never turns on fine-grained tool streaming skips the stage, saying
        why; one whose request does runs it and passes."""
        unasked = "the request did not ask for fine-grained tool streaming"
        with self.assertRaisesRegex(unittest.SkipTest, unasked):
            self.case(False).run()
        self.case(True).run()
