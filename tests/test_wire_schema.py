"""Tool schemas compare by the calls they allow: annotations pass, changes to the call fail."""

from __future__ import annotations

import unittest
from typing import Any, Dict

from conformance.fixture import CONFORMANCE_FIXTURE as FX
from conformance.wires._schema import schema_difference

BASE: Dict[str, Any] = dict(FX.tool_parameters)


def edited(**changes: Any) -> Dict[str, Any]:
    """The fixture's schema with top-level keys changed (``None`` removes one)."""
    out = {k: v for k, v in BASE.items()}
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def with_property(name: str, **changes: Any) -> Dict[str, Any]:
    props = {k: dict(v) for k, v in BASE["properties"].items()}
    props[name].update(changes)
    return edited(properties=props)


class SameToolTests(unittest.TestCase):
    def test_spellings_of_the_same_tool(self) -> None:
        """Annotations, envelope keys, case of type names and strict-mode nullables change nothing."""
        table = {
            "as is": BASE,
            "additionalProperties false": edited(additionalProperties=False),
            "strict and $schema": edited(
                strict=True, **{"$schema": "https://json-schema.org/draft/2020-12/schema"}
            ),
            "title and empty description": edited(title="get_weather", description=""),
            "upper-case types": {
                **edited(type="OBJECT"),
                "properties": {
                    "city": {"type": "STRING", "description": "City name, e.g. Paris"},
                    "unit": {"type": "STRING", "enum": ["celsius", "fahrenheit"]},
                },
            },
            "strict-mode optional": {
                **with_property("unit", type=["string", "null"]),
                "required": ["city", "unit"],
            },
            "nullable flag": {**with_property("unit", nullable=True), "required": ["city", "unit"]},
            "enum in another order": with_property("unit", enum=["fahrenheit", "celsius"]),
        }
        for name, schema in table.items():
            with self.subTest(name):
                self.assertIsNone(schema_difference(BASE, schema))

    def test_changes_to_the_call_are_named(self) -> None:
        """A dropped or added property, another type, enum or required set is another tool."""
        props = dict(BASE["properties"])
        table = {
            "dropped property": (edited(properties={"city": props["city"]}), "lacks the property ['unit']"),
            "added property": (
                edited(properties={**props, "day": {"type": "string"}}),
                "adds the property ['day']",
            ),
            "other type": (with_property("city", type="integer"), "the schema.city has type ['integer']"),
            "other enum": (with_property("unit", enum=["kelvin"]), "the schema.unit allows ['kelvin']"),
            "not required": (edited(required=[]), "does not require ['city']"),
            "forced and not nullable": (edited(required=["city", "unit"]), "requires ['unit']"),
            "not an object": (None, "not a schema object"),
        }
        for name, (schema, fragment) in table.items():
            with self.subTest(name):
                difference = schema_difference(BASE, schema)
                self.assertIsNotNone(difference)
                self.assertIn(fragment, difference or "")


if __name__ == "__main__":
    unittest.main()
