"""A JSON Schema validator for the subset tool schemas use, and Gemini's form of it.

Strategy: the library has no dependencies beyond ``h2`` and the standard library, and
the gate must tell whether a loop ran a tool with arguments its schema forbids. Tool
schemas use a small subset of JSON Schema (the part every provider's strict mode
accepts), so this module checks exactly that subset and refuses any other keyword
rather than let it pass unchecked. What each ``type`` admits is one table,
:data:`TYPE_CHECKS`.

JSON has no bool among its numbers, but Python's ``bool`` is an ``int``: the checks
and the ``enum`` comparison keep ``True`` apart from ``1``. An ``integer`` is any
number without a fractional part, ``1.0`` included, as JSON Schema says.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Tuple

from ..errors import ConformanceError

__all__ = [
    "KEYWORDS",
    "TYPE_CHECKS",
    "SchemaViolation",
    "UnsupportedSchemaError",
    "check_schema",
    "gemini_schema",
    "strict_problems",
    "validate",
]


class UnsupportedSchemaError(ConformanceError, ValueError):
    """A schema uses a keyword or form outside the subset this validator checks."""


@dataclass(frozen=True)
class SchemaViolation:
    """One way a value breaks its schema: where (``$.tags[1]``) and what was wrong."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_integer(value: Any) -> bool:
    return _is_number(value) and float(value).is_integer()


#: What each JSON type admits among the values ``json.loads`` gives.
TYPE_CHECKS: Mapping[str, Callable[[Any], bool]] = {
    "string": lambda value: isinstance(value, str),
    "number": _is_number,
    "integer": _is_integer,
    "boolean": lambda value: isinstance(value, bool),
    "array": lambda value: isinstance(value, (list, tuple)),
    "object": lambda value: isinstance(value, Mapping),
    "null": lambda value: value is None,
}

#: The keywords checked; ``description`` and ``title`` are notes that constrain nothing.
KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "enum", "items", "description", "title"}
)


def _types(schema: Mapping[str, Any]) -> Tuple[str, ...]:
    declared = schema.get("type")
    if declared is None:
        return ()
    return (declared,) if isinstance(declared, str) else tuple(declared)


def check_schema(schema: Any, path: str = "$") -> None:
    """Raise :class:`UnsupportedSchemaError` unless ``schema`` keeps to the subset.

    The message names the place and the keyword, so that a schema can be fixed
    rather than be half checked.
    """
    if not isinstance(schema, Mapping):
        raise UnsupportedSchemaError(f"{path}: a schema must be an object, got {type(schema).__name__}")
    unknown = sorted(set(schema) - KEYWORDS)
    if unknown:
        raise UnsupportedSchemaError(
            f"{path}: unsupported keyword(s) {', '.join(unknown)}; "
            f"the tool schema subset is {', '.join(sorted(KEYWORDS))}"
        )
    declared = schema.get("type")
    if declared is not None and not isinstance(declared, (str, list, tuple)):
        raise UnsupportedSchemaError(f"{path}.type: must be a type name or a list of them, got {declared!r}")
    for name in _types(schema):
        if name not in TYPE_CHECKS:
            raise UnsupportedSchemaError(
                f"{path}.type: unknown type {name!r}; use one of {', '.join(sorted(TYPE_CHECKS))}"
            )
    extra = schema.get("additionalProperties", True)
    if not isinstance(extra, bool):
        raise UnsupportedSchemaError(
            f"{path}.additionalProperties: only true or false is supported, not a schema"
        )
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise UnsupportedSchemaError(f"{path}.properties: must be an object")
    for key, sub in properties.items():
        check_schema(sub, f"{path}.properties.{key}")
    required = schema.get("required", [])
    if not isinstance(required, (list, tuple)) or not all(isinstance(k, str) for k in required):
        raise UnsupportedSchemaError(f"{path}.required: must be a list of property names")
    enum = schema.get("enum")
    if enum is not None and (not isinstance(enum, (list, tuple)) or not enum):
        raise UnsupportedSchemaError(f"{path}.enum: must be a non-empty list")
    if "items" in schema:
        check_schema(schema["items"], f"{path}.items")


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``True`` is not ``1``, though Python says it is."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and bool(a == b)


def _kind(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if TYPE_CHECKS[name](value):
            return name
    return type(value).__name__


def _walk(schema: Mapping[str, Any], value: Any, path: str, out: List[SchemaViolation]) -> None:
    types = _types(schema)
    if types and not any(TYPE_CHECKS[name](value) for name in types):
        out.append(SchemaViolation(path, f"expected {' or '.join(types)}, got {_kind(value)}"))
        return  # the rest of the schema speaks of a type this value is not
    enum = schema.get("enum")
    if enum is not None and not any(_same(value, option) for option in enum):
        out.append(SchemaViolation(path, f"expected one of {list(enum)!r}, got {value!r}"))
    if isinstance(value, Mapping):
        properties: Mapping[str, Any] = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in value:
                out.append(SchemaViolation(path, f"missing required property {key!r}"))
        for key, item in value.items():
            if key in properties:
                _walk(properties[key], item, f"{path}.{key}", out)
            elif schema.get("additionalProperties", True) is False:
                allowed = ", ".join(sorted(properties)) or "none"
                out.append(SchemaViolation(path, f"unexpected property {key!r} (allowed: {allowed})"))
    if isinstance(value, (list, tuple)) and "items" in schema:
        for index, item in enumerate(value):
            _walk(schema["items"], item, f"{path}[{index}]", out)


def validate(schema: Mapping[str, Any], value: Any) -> Tuple[SchemaViolation, ...]:
    """Every way ``value`` breaks ``schema``, in document order; empty when it is valid.

    Raises :class:`UnsupportedSchemaError` first if the schema leaves the subset.
    """
    check_schema(schema)
    out: List[SchemaViolation] = []
    _walk(schema, value, "$", out)
    return tuple(out)


def strict_problems(schema: Mapping[str, Any], path: str = "$") -> Tuple[str, ...]:
    """What keeps ``schema`` from OpenAI's strict mode: each object must forbid extra
    properties and require every property it names. Empty when strict."""
    check_schema(schema, path)
    problems: List[str] = []
    properties: Mapping[str, Any] = schema.get("properties", {})
    if "object" in _types(schema):
        if schema.get("additionalProperties", True) is not False:
            problems.append(f"{path}: an object must set additionalProperties to false")
        missing = sorted(set(properties) - set(schema.get("required", ())))
        if missing:
            problems.append(f"{path}: every property must be required, not {', '.join(missing)}")
    for key, sub in properties.items():
        problems.extend(strict_problems(sub, f"{path}.properties.{key}"))
    if "items" in schema:
        problems.extend(strict_problems(schema["items"], f"{path}.items"))
    return tuple(problems)


def gemini_schema(schema: Mapping[str, Any], *, upper: bool = True) -> Dict[str, Any]:
    """The same schema in the form Gemini's ``functionDeclarations[].parameters`` accepts.

    Gemini's ``Schema`` has no ``additionalProperties`` (the API answers 400 for it), so
    it is dropped: the wire form adapts, the tool's contract does not, and the gate still
    validates arguments against the strict original. A nullable type list
    (``["string", "null"]``) becomes ``nullable``. Type names are upper-cased as the
    API's ``Type`` enum spells them (``OBJECT``); the API also takes them lower-cased,
    which ``upper=False`` gives. ``parametersJsonSchema`` takes the original as it is.
    """
    check_schema(schema)
    return _gemini(schema, "$", upper)


def _gemini(schema: Mapping[str, Any], path: str, upper: bool) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    types = _types(schema)
    named = [name for name in types if name != "null"]
    if len(named) > 1:
        raise UnsupportedSchemaError(
            f"{path}.type: Gemini's Schema takes one type (with nullable), got {list(types)!r}"
        )
    if named:
        out["type"] = named[0].upper() if upper else named[0]
    if "null" in types and named:
        out["nullable"] = True
    for key in ("title", "description"):
        if key in schema:
            out[key] = schema[key]
    if "enum" in schema:
        if not all(isinstance(option, str) for option in schema["enum"]):
            raise UnsupportedSchemaError(f"{path}.enum: Gemini takes enum values of strings only")
        out["enum"] = list(schema["enum"])
    if "properties" in schema:
        out["properties"] = {
            key: _gemini(sub, f"{path}.properties.{key}", upper) for key, sub in schema["properties"].items()
        }
    if "required" in schema:
        out["required"] = list(schema["required"])
    if "items" in schema:
        out["items"] = _gemini(schema["items"], f"{path}.items", upper)
    return out
