"""The tool-schema validator, the strict-mode check, and Gemini's form of a schema."""

from __future__ import annotations

import unittest

from conformance.gate.schema import (
    SchemaViolation,
    UnsupportedSchemaError,
    check_schema,
    gemini_schema,
    strict_problems,
    validate,
)

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "a name"},
        "age": {"type": "integer"},
        "score": {"type": "number"},
        "admin": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        "nickname": {"type": ["string", "null"]},
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


class ValidateTests(unittest.TestCase):
    def test_valid_values_have_no_violations(self) -> None:
        """Values that keep to the schema pass, including integral floats and null where allowed."""
        table = [
            {"name": "Ada", "age": 36},
            {"name": "Ada", "age": 36.0, "score": 1.5, "admin": False, "tags": ["a", "b"]},
            {"name": "", "age": -1, "nickname": None, "address": {"city": "Paris"}},
            {"name": "é☀🌤", "age": 0, "nickname": "x", "tags": []},
        ]
        for value in table:
            with self.subTest(value=value):
                self.assertEqual(validate(PERSON, value), ())

    def test_each_violation_names_the_place_and_the_fault(self) -> None:
        """Each broken rule gives one violation, with its path and what was wrong."""
        table = [
            ({"age": 1}, ["$: missing required property 'name'"]),
            ({"name": "a", "age": 1, "x": 0}, ["$: unexpected property 'x' (allowed: address, admin, age, "
                                                "name, nickname, score, tags)"]),
            ({"name": 1, "age": 1}, ["$.name: expected string, got integer"]),
            ({"name": "a", "age": 1.5}, ["$.age: expected integer, got number"]),
            ({"name": "a", "age": True}, ["$.age: expected integer, got boolean"]),
            ({"name": "a", "age": 1, "score": True}, ["$.score: expected number, got boolean"]),
            ({"name": "a", "age": 1, "admin": 1}, ["$.admin: expected boolean, got integer"]),
            ({"name": "a", "age": 1, "tags": ["a", "c"]}, ["$.tags[1]: expected one of ['a', 'b'], got 'c'"]),
            ({"name": "a", "age": 1, "tags": "a"}, ["$.tags: expected array, got string"]),
            ({"name": "a", "age": 1, "nickname": 3}, ["$.nickname: expected string or null, got integer"]),
            ({"name": "a", "age": 1, "address": {}}, ["$.address: missing required property 'city'"]),
            ({"name": "a", "age": 1, "score": float("nan")}, ["$.score: expected number, got float"]),
            ("text", ["$: expected object, got string"]),
            (None, ["$: expected object, got null"]),
        ]
        for value, expected in table:
            with self.subTest(value=value):
                self.assertEqual([str(v) for v in validate(PERSON, value)], expected)

    def test_enum_keeps_booleans_apart_from_numbers(self) -> None:
        """An enum of 1 refuses True and an enum of True refuses 1, unlike Python's ==."""
        self.assertTrue(validate({"enum": [1]}, True))
        self.assertTrue(validate({"enum": [True]}, 1))
        self.assertEqual(validate({"enum": [1]}, 1.0), ())
        self.assertEqual(validate({"enum": [None, [1, {"a": False}]]}, [1, {"a": False}]), ())
        self.assertTrue(validate({"enum": [[1, {"a": False}]]}, [1, {"a": 0}]))

    def test_violation_is_data(self) -> None:
        """A violation keeps its path and message apart for a report to use."""
        violation = validate({"type": "string"}, 1)[0]
        self.assertEqual(violation, SchemaViolation("$", "expected string, got integer"))

    def test_a_schema_outside_the_subset_is_refused(self) -> None:
        """A keyword or form the validator does not check is an error, never a silent pass."""
        table = [
            ({"type": "object", "minProperties": 1}, r"\$: unsupported keyword\(s\) minProperties"),
            ({"type": "date"}, r"\$.type: unknown type 'date'"),
            ({"additionalProperties": {"type": "string"}}, "only true or false"),
            ({"properties": {"a": {"pattern": "x"}}}, r"\$.properties.a: unsupported keyword\(s\) pattern"),
            ({"items": {"format": "uri"}}, r"\$.items: unsupported"),
            ({"enum": []}, "non-empty list"),
            ({"required": "a"}, "list of property names"),
            ([], "must be an object"),
        ]
        for schema, pattern in table:
            with self.subTest(schema=schema), self.assertRaisesRegex(UnsupportedSchemaError, pattern):
                validate(schema, {})  # type: ignore[arg-type]
        self.assertIsInstance(UnsupportedSchemaError("x"), ValueError)
        check_schema(PERSON)


class StrictTests(unittest.TestCase):
    def test_strict_schema_has_no_problems(self) -> None:
        """A schema whose objects forbid extras and require every property is strict."""
        schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                  "additionalProperties": False}
        self.assertEqual(strict_problems(schema), ())

    def test_each_loose_object_is_named(self) -> None:
        """Every object that allows extras or leaves a property optional is reported."""
        self.assertEqual(
            strict_problems(PERSON),
            ("$: every property must be required, not address, admin, nickname, score, tags",),
        )
        loose = {"type": "object", "properties": {"inner": {"type": "object", "properties": {}}}}
        self.assertEqual(
            strict_problems(loose),
            (
                "$: an object must set additionalProperties to false",
                "$: every property must be required, not inner",
                "$.properties.inner: an object must set additionalProperties to false",
            ),
        )


class GeminiSchemaTests(unittest.TestCase):
    def test_additional_properties_dropped_and_types_upper_cased(self) -> None:
        """Gemini's form has no additionalProperties anywhere and spells types as its enum does."""
        converted = gemini_schema(PERSON)
        self.assertNotIn("additionalProperties", repr(converted))
        self.assertEqual(converted["type"], "OBJECT")
        self.assertEqual(converted["properties"]["tags"], {"type": "ARRAY", "items": {"type": "STRING",
                                                                                      "enum": ["a", "b"]}})
        self.assertEqual(converted["properties"]["nickname"], {"type": "STRING", "nullable": True})
        self.assertEqual(converted["properties"]["address"],
                         {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}, "required": ["city"]})
        self.assertEqual(converted["required"], ["name", "age"])
        self.assertEqual(converted["properties"]["name"]["description"], "a name")

    def test_lower_case_form_on_request(self) -> None:
        """upper=False keeps JSON Schema's lower-case names, which the API also takes."""
        self.assertEqual(gemini_schema({"type": "string"}, upper=False), {"type": "string"})

    def test_the_original_is_left_alone(self) -> None:
        """Converting never edits the strict schema the gate validates against."""
        before = repr(PERSON)
        gemini_schema(PERSON)
        self.assertEqual(repr(PERSON), before)

    def test_forms_gemini_cannot_take_are_refused(self) -> None:
        """A union of types or a non-string enum has no Gemini form, and says so."""
        table = [
            ({"type": ["string", "integer"]}, "one type"),
            ({"type": "integer", "enum": [1, 2]}, "strings only"),
        ]
        for schema, pattern in table:
            with self.subTest(schema=schema), self.assertRaisesRegex(UnsupportedSchemaError, pattern):
                gemini_schema(schema)


if __name__ == "__main__":
    unittest.main()
