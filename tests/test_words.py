"""A case's headline and hint say what the wire's shapes accept and carry, not the scenario's
general words."""

from __future__ import annotations

import re
import unittest
from typing import List

from conformance._checks._words import case_words
from conformance.contract import ERROR_KINDS
from conformance.scenarios import SCENARIOS
from conformance.wires import WIRES
from conformance.wires.cohere import cohere_wire

#: The kinds a headline names: ``of kind overloaded or server_error`` (with their retryable, where mixed).
_KIND = r"[a-z_]+(?: \((?:not )?retryable\))?"
_KINDS = re.compile(rf"of kind ({_KIND}(?: or {_KIND})*)")


def named_kinds(must: str) -> List[str]:
    found = _KINDS.search(must)
    assert found is not None, must
    return [part.split(" ")[0] for part in found.group(1).split(" or ")]


class CaseWordsTests(unittest.TestCase):
    def test_cohere_stream_error_names_the_one_kind_its_check_accepts(self) -> None:
        """Cohere's in-stream error is a server_error only: the headline says so, not overloaded."""
        must, _ = case_words(cohere_wire, "stream-error", "stream")
        self.assertEqual(named_kinds(must), ["server_error"])
        self.assertNotIn("overloaded", must)

    def test_cohere_rate_limit_promises_no_delay_and_names_no_header(self) -> None:
        """Cohere's 429 carries no delay: retry_after None, and no retry-after header to read."""
        for mode in ("chat", "stream"):
            with self.subTest(mode=mode):
                must, hint = case_words(cohere_wire, "rate-limit", mode)
                self.assertIn("retry_after None", must)
                self.assertNotIn("retry-after", hint)

    def test_a_delay_is_read_where_the_wire_puts_it(self) -> None:
        """Anthropic's 429 names retry-after alone; Gemini's puts its delay in the body, one shape none."""
        must, hint = case_words(WIRES["anthropic"], "rate-limit", "chat")
        self.assertTrue(must.endswith("with retry_after from the provider"), must)
        self.assertEqual(hint, "read retry-after")
        must, hint = case_words(WIRES["gemini"], "rate-limit", "chat")
        self.assertIn("where its reply names one, else None", must)
        self.assertIn("in the body", hint)
        self.assertNotIn("retry-after", hint)

    def test_every_failure_headline_names_exactly_the_kinds_its_variants_accept(self) -> None:
        """On every wire, a failure scenario's headline names the union of its variants' kinds, no other."""
        for name, wire in WIRES.items():
            for scenario, row in SCENARIOS.items():
                if row.error_kind is None:
                    continue
                for mode in row.modes:
                    variants = wire.variants(scenario, mode)
                    with self.subTest(wire=name, scenario=scenario, mode=mode):
                        must, _ = case_words(wire, scenario, mode)
                        accepted = {k for v in variants for k in v.accepted_kinds(row.error_kind)}
                        self.assertEqual(set(named_kinds(must)), accepted)
                        self.assertLessEqual(accepted, set(ERROR_KINDS))

    def test_the_headline_follows_the_failing_shapes(self) -> None:
        """Given only some variants, the headline names what those accept."""
        wire = WIRES["anthropic"]
        variants = wire.variants("quota", "chat")
        for variant in variants:
            with self.subTest(variant=variant.name):
                must, _ = case_words(wire, "quota", "chat", [variant])
                self.assertEqual(set(named_kinds(must)), set(variant.accepted_kinds("quota")))

    def test_a_top_level_failure_body_is_named_where_others_nest_it(self) -> None:
        """Mistral's 429 and 401 carry their fields at the top level, api.openai.com's under error:
        the hint of a case Mistral's shape fails names its fields; api.openai.com's own says nothing."""
        from conformance.wires.openai_chat import OpenAIChatWire

        wire = OpenAIChatWire(servers=("mistral", "groq"))
        for scenario in ("rate-limit", "auth"):
            for mode in ("chat", "stream"):
                mistral = [v for v in wire.variants(scenario, mode) if v.name.startswith("mistral")]
                with self.subTest(scenario=scenario, mode=mode):
                    _, hint = case_words(wire, scenario, mode, mistral)
                    self.assertIn('not every failure body nests its fields under "error"', hint)
                    self.assertIn(mistral[0].name, hint)
                    self.assertIn("message", hint)
                    openai = [v for v in wire.variants(scenario, mode) if not v.name.startswith("mistral")]
                    self.assertNotIn("top level", case_words(wire, scenario, mode, openai)[1])
        _, hint = case_words(wire, "rate-limit", "chat", [wire.variants("rate-limit", "chat")[1]])
        self.assertIn("(object, message, type, param, code)", hint)
        # Where every body is top-level (Cohere's), there is nothing to tell apart.
        self.assertNotIn("top level", case_words(cohere_wire, "rate-limit", "chat")[1])

    def test_a_shape_with_two_readings_names_the_error_it_allows(self) -> None:
        """Azure's prompt-filter 400 may be a content_filter reply or a bad request: the headline
        says both."""
        wire = WIRES["azure-openai-chat"]
        row = SCENARIOS["content-filter"]
        both = [v for v in wire.variants("content-filter", "chat") if v.either]
        must, _ = case_words(wire, "content-filter", "chat", both)
        self.assertTrue(must.startswith(row.must), must)
        self.assertIn("non-retryable error of kind invalid_request", must)
        others = [v for v in wire.variants("content-filter", "chat") if not v.either]
        self.assertEqual(case_words(wire, "content-filter", "chat", others)[0], row.must)

    def test_a_scenario_that_is_no_failure_keeps_the_tables_words(self) -> None:
        """A reply scenario's headline and hint are the scenario table's."""
        row = SCENARIOS["tool-call"]
        self.assertEqual(case_words(cohere_wire, "tool-call", "chat"), (row.must, row.hint))


if __name__ == "__main__":
    unittest.main()
