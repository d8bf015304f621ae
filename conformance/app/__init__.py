"""App mode: an application's own code, unchanged, judged against the fake provider.

:class:`FakeProviderEnvironment` starts the fake provider and points every official
SDK at it through the environment it reads; a test scripts what the provider does
next (:class:`ProviderScript`), runs the application's function and reads the
:class:`AppRun`. :class:`AppConformanceTestCase` is the ``unittest`` mixin; the pytest
fixture ``fake_provider_environment`` comes from the plugin
(``conformance.app.pytest_plugin``), which pytest loads by itself.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict, List

if TYPE_CHECKING:
    from .environment import AppRun, FakeProviderEnvironment, Finding
    from .routes import CLEARED, SDK_ENVIRONMENT
    from .script import FAULTS, ProviderScript
    from .testcase import AppConformanceTestCase

#: Each public name, and the module of this package that defines it.
_EXPORTS: Dict[str, str] = {
    "AppConformanceTestCase": "testcase",
    "AppRun": "environment",
    "CLEARED": "routes",
    "FAULTS": "script",
    "FakeProviderEnvironment": "environment",
    "Finding": "environment",
    "ProviderScript": "script",
    "SDK_ENVIRONMENT": "routes",
}

__all__ = [
    "CLEARED",
    "FAULTS",
    "SDK_ENVIRONMENT",
    "AppConformanceTestCase",
    "AppRun",
    "FakeProviderEnvironment",
    "Finding",
    "ProviderScript",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted({*globals(), *__all__})
