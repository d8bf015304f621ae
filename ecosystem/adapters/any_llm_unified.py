"""any-llm in the mode it recommends: ``ANY_LLM_UNIFIED_EXCEPTIONS`` set, every failure its own class.

any-llm's deprecation warning (any_llm/utils/exception_handler.py) says the unified
exceptions will become the default and asks its users to turn them on now; it reads
the variable each time it raises, so it is set here, in this adapter's own process
(the runner gives every adapter one), before any request. The rows are
``any_llm_acompletion``'s, each named for its mode.
"""

from __future__ import annotations

import os
from typing import List

from conformance import BackendConformanceTarget

from . import any_llm_acompletion

LIBRARY = "any-llm-sdk"
KIND = "backend"
#: The distributions this adapter imports, which `python3 dev.py ecosystem --only` installs.
REQUIRES = ("any-llm-sdk",)


def targets() -> List[BackendConformanceTarget]:
    os.environ["ANY_LLM_UNIFIED_EXCEPTIONS"] = "1"
    return any_llm_acompletion.targets(unified=True)
