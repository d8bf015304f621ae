"""The migration gate: holds an agent loop to the invariants of a tool turn."""

from __future__ import annotations

from .schema import (
    SchemaViolation,
    UnsupportedSchemaError,
    check_schema,
    gemini_schema,
    strict_problems,
    validate,
)

__all__ = [
    "SchemaViolation",
    "UnsupportedSchemaError",
    "check_schema",
    "gemini_schema",
    "strict_problems",
    "validate",
]
