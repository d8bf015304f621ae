"""The library's own exceptions.

Contract failures of a backend are plain :class:`AssertionError` so that a
misbehaving backend shows as FAIL, not ERROR, in any test runner. Everything else
the library raises derives from :class:`ConformanceError`.
"""

from __future__ import annotations

__all__ = ["ConformanceError", "ProviderInputError", "TargetDefinitionError"]


class ConformanceError(Exception):
    """Base of the errors this library raises for its own reasons."""


class ProviderInputError(ConformanceError, ValueError):
    """The fake provider was given something it cannot serve (a bad reply, a bad setting)."""


class TargetDefinitionError(ConformanceError, TypeError):
    """A target or test class is declared wrong: a misspelt scenario, a missing wire."""
