"""anthropic-python's own stream accumulation reads the wire's scripted turns.

``client.messages.stream(...).get_final_message()`` builds the message from the events
by block index, as every client of the SDK gets it: a turn with thinking, redacted
thinking, text and two interleaved ``tool_use`` blocks must come out as those blocks,
each call whole, the signature byte for byte.
"""

from __future__ import annotations

import importlib.util
import json
import unittest
from typing import Any

from conformance.provider import start_fake_provider
from conformance.wires._turns import play_turn
from conformance.wires.anthropic import anthropic_wire

from ..test_provider_support import asyncio_debug_off_for_module
from ..turns_cases import REDACTED, SIGNATURE, scripted

#: The suites here run without asyncio's debug mode unless CONFORMANCE_LONG_TESTS=1.
setUpModule, tearDownModule = asyncio_debug_off_for_module()

HAVE_ANTHROPIC = importlib.util.find_spec("anthropic") is not None


@unittest.skipUnless(HAVE_ANTHROPIC, "anthropic is not installed: pip install anthropic")
class AnthropicStreamAccumulationTest(unittest.TestCase):
    def final_message(self, interleave: bool, fragments: bool) -> Any:
        import anthropic

        turn = scripted(interleave, fragments)
        with start_fake_provider() as provider:
            provider.reply(lambda request: play_turn(anthropic_wire, turn, request))
            client = anthropic.Anthropic(api_key="test", base_url=provider.url, max_retries=0)
            try:
                with client.messages.stream(
                    model="conformance-model",
                    max_tokens=1024,
                    messages=[{"role": "user", "content": "go"}],
                ) as stream:
                    return stream.get_final_message(), turn
            finally:
                client.close()

    def test_interleaved_calls_accumulate_as_two_whole_calls(self) -> None:
        for fragments in (False, True):
            with self.subTest(fragments=fragments):
                message, turn = self.final_message(True, fragments)
                types = [block.type for block in message.content]
                self.assertEqual(types, ["thinking", "redacted_thinking", "text", "tool_use", "tool_use"])
                thinking, redacted, text = message.content[:3]
                self.assertEqual(thinking.thinking, turn.reasoning[0].text)
                self.assertEqual(thinking.signature, SIGNATURE)
                self.assertEqual(redacted.data, REDACTED)
                self.assertEqual(text.text, turn.text)
                calls = [(b.id, b.name, b.input) for b in message.content[3:]]
                expected = [(c.id, c.name, json.loads(c.arguments)) for c in turn.calls]
                self.assertEqual(calls, expected)
                self.assertEqual(message.stop_reason, "tool_use")


if __name__ == "__main__":
    unittest.main()
