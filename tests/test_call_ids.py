"""Call ids: one hook shapes both suites' scripted calls like each provider's own, and every
id a wire sends keeps its provider's shape (the table is ``tests/call_id_shapes.py``)."""

from __future__ import annotations

import importlib
import pkgutil
import re
import unittest
from typing import Any, AsyncIterator, Dict, List, Tuple

import conformance.wires
from conformance._multiturn import earlier_call, parallel_calls
from conformance.cases import BackendConformanceTarget, backend_conformance_cases
from conformance.contract import ChatRequest, ChatResponse, StreamChunk
from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.gate._stage import Step
from conformance.reference import REFERENCE_BACKENDS
from conformance.scenarios import SCENARIOS
from conformance.wires import WIRES
from conformance.wires._base import Wire
from conformance.wires._ids import provider_id
from conformance.wires._turns import History
from conformance.wires._unparsed import UNPARSED_TEXTS, corrupt_call
from conformance.wires.anthropic import AnthropicWire
from conformance.wires.anthropic._replies import tool_use_id
from conformance.wires.openai_chat import OpenAIChatWire
from conformance.wires.openai_chat._servers import SERVERS

from .call_id_shapes import ID_SHAPES, OTHER_SHAPES, id_shape

#: Each call id constant of a wire package (``package.NAME``) -> its row in the shape table.
#: A constant named ``*CALL_ID`` or ``*USE_ID`` that is not listed fails the test below.
ID_CONSTANTS = {
    "anthropic.SERVER_TOOL_USE_ID": "anthropic-server-tool",
    "anthropic.TOOL_USE_ID": "anthropic",
    "anthropic_vertex.ANTHROPIC_TOOL_USE_ID": "anthropic",
    "anthropic_vertex.TOOL_USE_ID": "anthropic-vertex",
    "bedrock.TOOL_USE_ID": "bedrock-converse",
    "bedrock_invoke.ANTHROPIC_TOOL_USE_ID": "anthropic",
    "bedrock_invoke.TOOL_USE_ID": "bedrock-invoke",
    "cohere.TOOL_CALL_ID": "cohere",
    "gemini.FUNCTION_CALL_ID": "gemini",
    "gemini_vertex.FUNCTION_CALL_ID": "gemini-vertex",
    "ollama.TOOL_CALL_ID": "ollama",
    "openai_chat.DEEPSEEK_CALL_ID": "deepseek",
    "openai_chat.GROQ_CALL_ID": "groq",
    "openai_chat.MISTRAL_CALL_ID": "mistral",
    "openai_chat.TOOL_CALL_ID": "openai-chat",
    "openai_responses.CALL_ID": "openai-responses",
    "openai_responses.FUNCTION_CALL_ID": "openai-responses-item",
}


def backend_suite_ids(wire: Wire) -> List[str]:
    """The ids of every call the backend suite scripts on ``wire``, as its cases make them."""
    return [
        earlier_call(wire, "result").id,
        *(call.id for call in parallel_calls(wire)),
        *(corrupt_call(wire, variant).id for variant in UNPARSED_TEXTS),
    ]


def gate_id(wire: Wire, tool: str) -> str:
    """The id the agent-loop suite gives a call to ``tool`` on ``wire``."""
    step = Step(0, wire, "forced-tool", History([]), 4, quote=lambda: "")
    return step.call(tool, {}).id


class RecordsCallIds:
    """A reference backend, keeping the id of every call it returns."""

    def __init__(self, inner: Any, seen: List[str]) -> None:
        self.inner = inner
        self.seen = seen

    async def chat(self, request: ChatRequest) -> ChatResponse:
        response: ChatResponse = await self.inner.chat(request)
        self.seen.extend(call.id for call in response.tool_calls)
        return response

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        async for chunk in self.inner.chat_stream(request):
            self.seen.extend(call.id for call in chunk.tool_calls)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class BackendSuiteIdTests(unittest.TestCase):
    def test_the_backend_suites_ids_are_shaped_like_its_providers(self) -> None:
        """The calls of tool-result, parallel-tool-calls and corrupt-arguments carry the provider's shape."""
        self.assertEqual(set(ID_SHAPES) | {"ollama"}, {n for n, w in WIRES.items() if w.scripts_turns()})
        for name in ID_SHAPES:
            with self.subTest(wire=name):
                ids = backend_suite_ids(WIRES[name])
                self.assertEqual(len(set(ids)), len(ids), ids)  # one per call, never repeated
                for call_id in ids:
                    self.assertRegex(call_id, id_shape(name, FX.tool_name))

    def test_both_suites_take_their_ids_from_the_one_hook(self) -> None:
        """Every wire's loop_call_id is its scripted_call_id, and the gate's ids come from it too."""
        for name, wire in WIRES.items():
            with self.subTest(wire=name):
                self.assertIs(type(wire).loop_call_id, type(wire).scripted_call_id)
                self.assertEqual(
                    gate_id(wire, "echo_json"), wire.scripted_call_id("echo_json", "gate/forced-tool/0/0")
                )

    def test_the_backend_gets_each_providers_ids_through_its_bytes(self) -> None:
        """The calls a reference backend parses from the wire's bytes carry ids of that shape, and pass."""
        for name in ID_SHAPES:
            seen: List[str] = []

            def create(url: str, name: str = name, seen: List[str] = seen) -> RecordsCallIds:
                return RecordsCallIds(REFERENCE_BACKENDS[name](url, False), seen)

            target = BackendConformanceTarget(f"ids {name}", WIRES[name], create)
            scenarios = ("parallel-tool-calls", "corrupt-arguments")
            cases = [c for c in backend_conformance_cases(target) if c.scenario in scenarios]
            with self.subTest(wire=name):
                ran = 0
                for case in cases:
                    if target.skip_reason(case.scenario, case.mode) is None:
                        case.run()
                        ran += 1
                self.assertGreaterEqual(ran, 2)  # Gemini has no corrupt-arguments case
                self.assertGreaterEqual(len(seen), 2 * ran)  # both parallel calls, every variant's call
                for call_id in seen:
                    self.assertRegex(call_id, id_shape(name, FX.tool_name))


class OwnWireHookTests(unittest.TestCase):
    def test_a_wire_defining_loop_call_id_shapes_both_suites(self) -> None:
        """A wire of one's own that defines loop_call_id(name, seed) gets its ids in the backend suite too."""

        class Mine(Wire):
            name = "mine"

            def loop_call_id(self, name: str, seed: str) -> str:
                return provider_id(f"{name}-", seed, 10)

        wire = Mine()
        for call_id in backend_suite_ids(wire):
            self.assertRegex(call_id, r"^get_weather-[A-Za-z0-9]{10}$")
        self.assertRegex(gate_id(wire, "echo_json"), r"^echo_json-[A-Za-z0-9]{10}$")
        self.assertEqual(wire.scripted_call_id("x", "s"), wire.loop_call_id("x", "s"))

    def test_a_wire_defining_scripted_call_id_by_seed_alone_keeps_working(self) -> None:
        """A scripted_call_id(seed) of the form before the hook named the tool is called with the seed."""

        class Earlier(Wire):
            name = "earlier"

            def scripted_call_id(self, seed: str) -> str:  # type: ignore[override]
                return "fn_" + re.sub(r"\W", "_", seed)

        wire = Earlier()
        self.assertEqual(
            backend_suite_ids(wire),
            [
                "fn_earlier_tool_result",
                "fn_earlier_parallel_tool_calls_0",
                "fn_earlier_parallel_tool_calls_1",
                *(f"fn_earlier_corrupt_arguments_{re.sub(r'-', '_', v)}" for v in UNPARSED_TEXTS),
            ],
        )
        self.assertEqual(gate_id(wire, "echo_json"), "fn_gate_forced_tool_0_0")
        self.assertEqual(wire.loop_call_id("echo_json", "s"), "fn_s")
        self.assertIs(Earlier.loop_call_id, Earlier.scripted_call_id)

    def test_a_subclass_calling_super_under_either_name_gets_its_parents_ids(self) -> None:
        """super() under either name reaches the parent's shaping, never the subclass again."""

        class ByLoop(AnthropicWire):
            def loop_call_id(self, name: str, seed: str) -> str:
                return super().loop_call_id(name, seed)[:-1] + "X"

        class ByScripted(AnthropicWire):
            def scripted_call_id(self, name: str, seed: str) -> str:
                return super().scripted_call_id(name, seed)[:-1] + "Y"

        self.assertEqual(ByLoop().scripted_call_id("get_weather", "s"), tool_use_id("s")[:-1] + "X")
        self.assertEqual(ByScripted().loop_call_id("get_weather", "s"), tool_use_id("s")[:-1] + "Y")


def wire_call_ids(wire: Wire) -> List[Tuple[str, str]]:
    """Every id ``wire`` answers a call with, each with its place: its ``tool_call_id`` and every
    variant's ``call_id`` of every scenario and mode."""
    found = [("tool_call_id", wire.tool_call_id)] if wire.tool_call_id else []
    for scenario in SCENARIOS:
        for mode in ("chat", "stream"):
            for variant in wire.variants(scenario, mode):
                if variant.call_id is not None:
                    found.append((f"{scenario}/{mode}:{variant.name}", variant.call_id))
    return found


class WireOwnIdTests(unittest.TestCase):
    def test_each_wires_own_call_ids_are_shaped_like_its_providers(self) -> None:
        """tool_call_id and every variant's call_id keep the provider's shape (a server's in its variant)."""
        wires: Dict[str, Wire] = dict(WIRES)
        wires["openai-chat with servers"] = OpenAIChatWire(servers=SERVERS)
        checked = 0
        for label, wire in wires.items():
            for place, call_id in wire_call_ids(wire):
                row = place.rsplit(":", 1)[-1] if place.rsplit(":", 1)[-1] in SERVERS else wire.name
                with self.subTest(wire=label, place=place):
                    self.assertRegex(call_id, id_shape(row, FX.tool_name))
                    checked += 1
        self.assertGreaterEqual(checked, len(ID_SHAPES) + 3)

    def test_each_call_id_constant_is_shaped_like_its_providers(self) -> None:
        """Every wire package's *CALL_ID and *USE_ID constant is listed and keeps its row's shape."""
        found: Dict[str, str] = {}
        prefix = conformance.wires.__name__ + "."
        for module in pkgutil.walk_packages(conformance.wires.__path__, prefix):
            package = module.name[len(prefix) :].split(".")[0]
            for key, value in vars(importlib.import_module(module.name)).items():
                if re.search(r"(?:CALL|USE)_ID$", key) and isinstance(value, str):
                    found[f"{package}.{key}"] = value
        self.assertEqual(sorted(found), sorted(ID_CONSTANTS))
        for key, value in found.items():
            with self.subTest(constant=key):
                self.assertIn(ID_CONSTANTS[key], {**ID_SHAPES, **OTHER_SHAPES})
                self.assertRegex(value, id_shape(ID_CONSTANTS[key], FX.tool_name))


if __name__ == "__main__":
    unittest.main()
