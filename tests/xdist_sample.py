"""A small target for the parallel-run test: the reference OpenAI Chat backend, run by pytest-xdist.

Not named test_*.py, so unittest discovery leaves it alone; tests/test_parallel.py hands
it to pytest by path.
"""

from __future__ import annotations

import unittest
from typing import Any

from conformance import BackendConformanceTestCase, openai_chat_wire
from conformance.reference import REFERENCE_BACKENDS


class ReferenceOpenAIChat(BackendConformanceTestCase, unittest.TestCase):
    """The reference backend, so that every case it gets passes."""

    wire = openai_chat_wire

    def create_backend(self, url: str) -> Any:
        return REFERENCE_BACKENDS["openai-chat"](url, False)
