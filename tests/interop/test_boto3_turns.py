"""boto3 reads the Bedrock wire's scripted turns event by event.

boto3 has no stream accumulation of its own: ``converse_stream`` hands each event over
as parsed by the service model, with its ``contentBlockIndex``. A turn with reasoning,
text and two interleaved ``toolUse`` blocks must parse in botocore (every union with
exactly one member) and, gathered by index as a client must, give each call whole and
the signature byte for byte.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import unittest
from typing import Any, Dict, List, Tuple

from conformance.provider import start_fake_provider
from conformance.wires._turns import ScriptedTurn, play_turn
from conformance.wires.bedrock import bedrock_converse_wire

from ..turns_cases import REDACTED, SIGNATURE, scripted

HAVE_BOTO3 = importlib.util.find_spec("boto3") is not None


def client(endpoint_url: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=endpoint_url,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="conformance-secret",
        config=Config(
            retries={"total_max_attempts": 1, "mode": "standard"}, signature_version="v4", read_timeout=10
        ),
    )


@unittest.skipUnless(HAVE_BOTO3, "boto3 is not installed: pip install boto3")
class Boto3StreamEventsTest(unittest.TestCase):
    def events(self, turn: ScriptedTurn) -> List[Dict[str, Any]]:
        with start_fake_provider() as provider:
            provider.reply(lambda request: play_turn(bedrock_converse_wire, turn, request))
            runtime = client(provider.url)
            response = runtime.converse_stream(
                modelId="conformance-model", messages=[{"role": "user", "content": [{"text": "go"}]}]
            )
            return list(response["stream"])

    def gathered(self, events: List[Dict[str, Any]]) -> Tuple[Dict[int, Dict[str, Any]], str]:
        blocks: Dict[int, Dict[str, Any]] = {}
        stop = ""
        for event in events:
            if "contentBlockStart" in event:
                start = event["contentBlockStart"]
                blocks[start["contentBlockIndex"]] = {**start["start"]["toolUse"], "input": ""}
            elif "contentBlockDelta" in event:
                delta = event["contentBlockDelta"]
                block = blocks.setdefault(
                    delta["contentBlockIndex"], {"text": "", "reasoning": "", "signature": ""}
                )
                body = delta["delta"]
                if "toolUse" in body:
                    block["input"] += body["toolUse"]["input"]
                elif "text" in body:
                    block["text"] += body["text"]
                else:
                    thought = body["reasoningContent"]
                    block["reasoning"] += thought.get("text", "")
                    block["signature"] += thought.get("signature", "")
                    if "redactedContent" in thought:
                        block["redacted"] = thought["redactedContent"]
            elif "messageStop" in event:
                stop = event["messageStop"]["stopReason"]
        return blocks, stop

    def test_interleaved_calls_gather_by_index_as_two_whole_calls(self) -> None:
        for fragments in (False, True):
            with self.subTest(fragments=fragments):
                turn = scripted(True, fragments)
                blocks, stop = self.gathered(self.events(turn))
                self.assertEqual(stop, "tool_use")
                self.assertEqual(sorted(blocks), [0, 1, 2, 3, 4])
                self.assertEqual(blocks[0]["reasoning"], turn.reasoning[0].text)
                self.assertEqual(blocks[0]["signature"], SIGNATURE)
                # botocore decodes the blob: the base64 on the wire is what the turn holds.
                self.assertEqual(base64.b64encode(blocks[1]["redacted"]).decode("ascii"), REDACTED)
                self.assertEqual(blocks[2]["text"], turn.text)
                calls = [
                    (blocks[i]["toolUseId"], blocks[i]["name"], json.loads(blocks[i]["input"]))
                    for i in (3, 4)
                ]
                expected = [(c.id, c.name, json.loads(c.arguments)) for c in turn.calls]
                self.assertEqual(calls, expected)


if __name__ == "__main__":
    unittest.main()
