"""The SDKs' own stream accumulation reads scripted turns with two interleaved calls.

openai-python's ``responses.stream()`` helper appends each argument delta to the item
at its ``output_index``; ollama-python parses each ``message.tool_calls`` line into its
own models. Both must see two complete calls, each with its arguments whole, however
the turn's deltas alternate and the transport cuts them.
"""

from __future__ import annotations

import importlib.util
import json
import unittest
from typing import Any, Dict, List

from conformance.contract import Reasoning, ReasoningKind
from conformance.provider import start_fake_provider
from conformance.wires._turns import ScriptedCall, ScriptedTurn, play_turn
from conformance.wires.ollama import ollama_wire
from conformance.wires.openai_responses import openai_responses_wire

from ..test_provider_support import asyncio_debug_off_for_module

#: The suites here run without asyncio's debug mode unless CONFORMANCE_LONG_TESTS=1.
setUpModule, tearDownModule = asyncio_debug_off_for_module()

HAVE_OPENAI = importlib.util.find_spec("openai") is not None
HAVE_OLLAMA = importlib.util.find_spec("ollama") is not None
TIMEOUT = 10.0
MODEL = "conformance-model"

ARGS_A = '{"text": "sun ☀ and \\ud83d\\ude00", "count": 2, "tags": ["a"]}'
ARGS_B = '{"path": "notes/unicode.txt"}'
CUT = ARGS_A.index("\\ude00") - 2


def scripted(reasoning: Reasoning) -> ScriptedTurn:
    return ScriptedTurn(
        text="Checking ☀ twice.",
        calls=(
            ScriptedCall("call_a1", "echo_json", ARGS_A, (ARGS_A[:9], ARGS_A[9:CUT], ARGS_A[CUT:])),
            ScriptedCall("call_b2", "read_fixture", ARGS_B),
        ),
        reasoning=(reasoning,),
        interleave=True,
        seed="sdk-two-calls",
    )


@unittest.skipUnless(HAVE_OPENAI, "openai is not installed: pip install openai")
class OpenAIResponsesStreamTest(unittest.TestCase):
    def test_the_stream_helper_accumulates_two_interleaved_calls(self) -> None:
        import openai

        reasoning = Reasoning(
            ReasoningKind.REASONING_ITEM.value,
            id="rs_1",
            summary=("Two lookups.",),
            data="gAAAA==",
            provider="openai",
        )
        turn = scripted(reasoning)
        with start_fake_provider() as provider:
            provider.reply(lambda r: play_turn(openai_responses_wire, turn, r))
            client = openai.OpenAI(
                base_url=provider.url + "/v1", api_key="test", max_retries=0, timeout=TIMEOUT
            )
            try:
                snapshots: Dict[int, str] = {}
                with client.responses.stream(model=MODEL, input="q") as stream:
                    for event in stream:
                        if event.type == "response.function_call_arguments.delta":
                            snapshots[event.output_index] = event.snapshot
                    final = stream.get_final_response()
            finally:
                client.close()
        calls = [item for item in final.output if item.type == "function_call"]
        self.assertEqual(
            [(c.call_id, c.name, c.arguments) for c in calls],
            [(c.id, c.name, c.arguments) for c in turn.calls],
        )
        # The helper's own running snapshot, built delta by delta, ends whole too.
        self.assertEqual(sorted(snapshots.values()), sorted(c.arguments for c in turn.calls))
        [item] = [item for item in final.output if item.type == "reasoning"]
        self.assertEqual((item.id, item.encrypted_content), ("rs_1", "gAAAA=="))
        self.assertEqual(final.output_text, turn.text)


@unittest.skipUnless(HAVE_OLLAMA, "ollama is not installed: pip install ollama")
class OllamaStreamTest(unittest.TestCase):
    def test_the_client_reads_two_calls_and_the_thinking(self) -> None:
        import ollama

        reasoning = Reasoning(ReasoningKind.THINKING.value, text="Two lookups ☀.", provider="ollama")
        turn = scripted(reasoning)
        with start_fake_provider() as provider:
            provider.reply(lambda r: play_turn(ollama_wire, turn, r))
            client = ollama.Client(host=provider.url, timeout=TIMEOUT)
            calls: List[Any] = []
            text, thinking = "", ""
            try:
                for chunk in client.chat(
                    model=MODEL, messages=[{"role": "user", "content": "q"}], stream=True
                ):
                    calls.extend(chunk.message.tool_calls or ())
                    text += chunk.message.content or ""
                    thinking += chunk.message.thinking or ""
            finally:
                # Client.close() came in ollama 0.6.2; the httpx client beneath is older.
                client._client.close()
        self.assertEqual(
            [(c.function.name, dict(c.function.arguments)) for c in calls],
            [(c.name, json.loads(c.arguments)) for c in turn.calls],
        )
        self.assertEqual((text, thinking), (turn.text, reasoning.text))


if __name__ == "__main__":
    unittest.main()
