"""Whether two JSON Schemas describe the same tool call: meaning, not spelling.

Strategy: a backend may spell the fixture's ``get_weather`` schema in whatever way
its provider or its SDK accepts, and the call the model makes is the same. So the
comparison walks the parts that decide which calls are valid (``type``,
``properties``, ``required``, ``enum``, ``items``) and passes over everything
that only annotates or tightens the envelope: descriptions (empty or not),
``title``, ``$schema``, ``additionalProperties``, OpenAI's ``strict``, Gemini's
``propertyOrdering`` and ``nullable``. Type names compare case-insensitively
(Gemini's ``Schema`` spells them ``STRING``). A property that strict function
calling forces into ``required`` is the same property when its type admits
``null``: the model sends ``null`` where it would have left it out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, List, Optional, Set

__all__ = ["schema_difference"]


def _types(schema: Mapping[str, Any]) -> Set[str]:
    """The type names a schema admits, lower-cased; ``nullable: true`` adds ``null``."""
    declared = schema.get("type")
    names: Set[str] = set()
    if isinstance(declared, str):
        names.add(declared.lower())
    elif isinstance(declared, list):
        names.update(t.lower() for t in declared if isinstance(t, str))
    for option in schema.get("anyOf") or ():
        if isinstance(option, Mapping):
            names |= _types(option)
    if schema.get("nullable") is True:
        names.add("null")
    return names


def _enum(schema: Mapping[str, Any]) -> Optional[Set[str]]:
    values = schema.get("enum")
    if not isinstance(values, list):
        return None
    return {repr(v) for v in values if v is not None}


def _differences(expected: Any, got: Any, where: str) -> List[str]:
    if not isinstance(got, Mapping):
        return [f"{where} is {got!r}, not a schema object"]
    problems: List[str] = []
    want_types, got_types = _types(expected), _types(got)
    if want_types and got_types - {"null"} != want_types:
        problems.append(f"{where} has type {sorted(got_types)!r}, expected {sorted(want_types)!r}")
    want_enum, got_enum = _enum(expected), _enum(got)
    if want_enum != got_enum:
        problems.append(f"{where} allows {got.get('enum')!r}, expected {expected.get('enum')!r}")
    if "items" in expected:
        problems += _differences(expected["items"], got.get("items"), f"{where}.items")
    want_props = expected.get("properties")
    if isinstance(want_props, Mapping):
        got_props = got.get("properties")
        if not isinstance(got_props, Mapping):
            return problems + [f"{where} has no properties, expected {sorted(want_props)!r}"]
        missing = sorted(set(want_props) - set(got_props))
        extra = sorted(set(got_props) - set(want_props))
        if missing:
            problems.append(f"{where} lacks the propert{'y' if len(missing) == 1 else 'ies'} {missing!r}")
        if extra:
            problems.append(f"{where} adds the propert{'y' if len(extra) == 1 else 'ies'} {extra!r}")
        for name in sorted(set(want_props) & set(got_props)):
            problems += _differences(want_props[name], got_props[name], f"{where}.{name}")
        want_required = set(expected.get("required") or ())
        got_required = set(got.get("required") or ()) if isinstance(got.get("required"), list) else set()
        dropped = sorted(want_required - got_required)
        # Strict function calling lists every property as required and makes the
        # optional ones nullable; that is the same call.
        forced = sorted(
            name
            for name in got_required - want_required
            if not (isinstance(got_props.get(name), Mapping) and "null" in _types(got_props[name]))
        )
        if dropped:
            problems.append(f"{where} does not require {dropped!r}")
        if forced:
            problems.append(f"{where} requires {forced!r}, which the tool leaves optional (and not nullable)")
    return problems


def schema_difference(expected: Mapping[str, Any], got: Any) -> Optional[str]:
    """What makes ``got`` describe other calls than ``expected``, or ``None`` if nothing does."""
    problems = _differences(expected, got, "the schema")
    return "; ".join(problems) if problems else None
