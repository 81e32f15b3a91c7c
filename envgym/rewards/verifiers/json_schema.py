"""JSON verifier: the answer is JSON valid under a schema (a documented subset of JSON Schema,
checked when the verifier is built; no extra dependency)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from envgym.errors import ConfigError, suggest
from envgym.rewards.verifiers.base import Verifier, VerifierResult, _clip, _fail, _pass

_SCHEMA_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "uniqueItems",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "minProperties",
        "maxProperties",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
    }
)
_SCHEMA_ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description", "default", "examples"})
_JSON_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_ok(value: Any, expected: str) -> bool:
    actual = _json_type(value)
    if expected == "number":
        return actual in ("number", "integer")
    if expected == "integer":
        return actual == "integer" or (actual == "number" and float(value).is_integer())
    return actual == expected


class JsonSchemaMatch(Verifier):
    """The candidate is JSON (optionally in a ```json fence) that validates against a schema.

    Supports this subset of JSON Schema (draft 2020-12 meanings): ``type`` (one or a list),
    ``properties``, ``required``, ``additionalProperties`` (bool or schema), ``items`` (one schema),
    ``minItems``, ``maxItems``, ``uniqueItems``, ``enum``, ``const``, ``minimum``, ``maximum``,
    ``exclusiveMinimum``, ``exclusiveMaximum`` (numbers), ``multipleOf``, ``minLength``,
    ``maxLength``, ``pattern``, ``minProperties``, ``maxProperties``, ``anyOf``, ``oneOf``,
    ``allOf``, ``not``; annotations (``title``, ``description``, ...) are ignored. Any other
    keyword (``$ref``, ``if``, ``format``, ...) is rejected when the verifier is built rather
    than silently ignored.
    """

    def __init__(self, schema: Mapping[str, Any] | None = None, *, allow_fence: bool = True) -> None:
        if schema is not None:
            self.check_schema(schema)
        super().__init__(schema)
        self.allow_fence = bool(allow_fence)

    @classmethod
    def check_schema(cls, schema: Any, path: str = "schema") -> None:
        """Raise :class:`~envgym.errors.ConfigError` for anything outside the supported subset."""
        if isinstance(schema, bool):
            return
        if not isinstance(schema, Mapping):
            raise ConfigError(f"{path}: expected a JSON schema object, got {schema!r}.")
        for key, value in schema.items():
            if key in _SCHEMA_ANNOTATIONS:
                continue
            if key not in _SCHEMA_KEYWORDS:
                raise ConfigError(
                    f"{path}: unsupported JSON Schema keyword {key!r}.{suggest(str(key), _SCHEMA_KEYWORDS)} "
                    f"Supported: {', '.join(sorted(_SCHEMA_KEYWORDS))}."
                )
            where = f"{path}.{key}"
            if key == "type":
                types = value if isinstance(value, list) else [value]
                for t in types:
                    if t not in _JSON_TYPES:
                        raise ConfigError(
                            f"{where}: expected one of {', '.join(_JSON_TYPES)}, got {t!r}.{suggest(str(t), _JSON_TYPES)}"
                        )
            elif key == "properties":
                if not isinstance(value, Mapping):
                    raise ConfigError(f"{where}: expected an object of schemas, got {value!r}.")
                for name, sub in value.items():
                    cls.check_schema(sub, f"{where}.{name}")
            elif key in ("items", "additionalProperties", "not"):
                cls.check_schema(value, where)
            elif key in ("anyOf", "oneOf", "allOf"):
                if not isinstance(value, list) or not value:
                    raise ConfigError(f"{where}: expected a non-empty list of schemas, got {value!r}.")
                for i, sub in enumerate(value):
                    cls.check_schema(sub, f"{where}[{i}]")
            elif key == "required":
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ConfigError(f"{where}: expected a list of property names, got {value!r}.")
            elif key == "enum":
                if not isinstance(value, list):
                    raise ConfigError(f"{where}: expected a list of values, got {value!r}.")
            elif key == "pattern":
                try:
                    re.compile(value)
                except (re.error, TypeError) as err:
                    raise ConfigError(f"{where}: {value!r} is not a valid regular expression: {err}.") from err
            elif key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ConfigError(f"{where}: expected a number, got {value!r}.")
                if key == "multipleOf" and value <= 0:
                    raise ConfigError(f"{where}: expected a number > 0, got {value!r}.")
            elif key in ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"):
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ConfigError(f"{where}: expected a whole number >= 0, got {value!r}.")
            elif key == "uniqueItems" and not isinstance(value, bool):
                raise ConfigError(f"{where}: expected true or false, got {value!r}.")

    @classmethod
    def errors(cls, instance: Any, schema: Any, path: str = "$") -> list[str]:
        """Every violation of ``schema`` by ``instance`` (empty when valid)."""
        if schema is True:
            return []
        if schema is False:
            return [f"{path}: no value is allowed here"]
        found: list[str] = []
        if "type" in schema:
            types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            if not any(_type_ok(instance, t) for t in types):
                return [
                    f"{path}: expected {' or '.join(types)}, got {_json_type(instance)} {_clip(json.dumps(instance), 40)}"
                ]
        if "const" in schema and instance != schema["const"]:
            found.append(f"{path}: expected {json.dumps(schema['const'])}")
        if "enum" in schema and instance not in schema["enum"]:
            found.append(f"{path}: expected one of {_clip(json.dumps(schema['enum']), 60)}")
        if _json_type(instance) in ("number", "integer"):
            if "minimum" in schema and instance < schema["minimum"]:
                found.append(f"{path}: {instance} is below the minimum {schema['minimum']}")
            if "maximum" in schema and instance > schema["maximum"]:
                found.append(f"{path}: {instance} is above the maximum {schema['maximum']}")
            if "exclusiveMinimum" in schema and instance <= schema["exclusiveMinimum"]:
                found.append(f"{path}: {instance} must be above {schema['exclusiveMinimum']}")
            if "exclusiveMaximum" in schema and instance >= schema["exclusiveMaximum"]:
                found.append(f"{path}: {instance} must be below {schema['exclusiveMaximum']}")
            if "multipleOf" in schema:
                ratio = instance / schema["multipleOf"]
                if not math.isclose(ratio, round(ratio), rel_tol=1e-9, abs_tol=1e-9):
                    found.append(f"{path}: {instance} is not a multiple of {schema['multipleOf']}")
        if isinstance(instance, str):
            if "minLength" in schema and len(instance) < schema["minLength"]:
                found.append(f"{path}: shorter than {schema['minLength']} characters")
            if "maxLength" in schema and len(instance) > schema["maxLength"]:
                found.append(f"{path}: longer than {schema['maxLength']} characters")
            if "pattern" in schema and re.search(schema["pattern"], instance) is None:
                found.append(f"{path}: does not match {schema['pattern']!r}")
        if isinstance(instance, list):
            if "minItems" in schema and len(instance) < schema["minItems"]:
                found.append(f"{path}: fewer than {schema['minItems']} items")
            if "maxItems" in schema and len(instance) > schema["maxItems"]:
                found.append(f"{path}: more than {schema['maxItems']} items")
            if schema.get("uniqueItems"):
                seen = [json.dumps(item, sort_keys=True) for item in instance]
                if len(set(seen)) != len(seen):
                    found.append(f"{path}: items are not unique")
            if "items" in schema:
                for i, item in enumerate(instance):
                    found += cls.errors(item, schema["items"], f"{path}[{i}]")
        if isinstance(instance, dict):
            props = schema.get("properties", {})
            for name in schema.get("required", ()):
                if name not in instance:
                    found.append(f"{path}: missing required property {name!r}")
            if "minProperties" in schema and len(instance) < schema["minProperties"]:
                found.append(f"{path}: fewer than {schema['minProperties']} properties")
            if "maxProperties" in schema and len(instance) > schema["maxProperties"]:
                found.append(f"{path}: more than {schema['maxProperties']} properties")
            for name, value in instance.items():
                if name in props:
                    found += cls.errors(value, props[name], f"{path}.{name}")
                elif "additionalProperties" in schema:
                    extra = schema["additionalProperties"]
                    if extra is False:
                        found.append(f"{path}: unexpected property {name!r}")
                    elif extra is not True:
                        found += cls.errors(value, extra, f"{path}.{name}")
        if "allOf" in schema:
            for sub in schema["allOf"]:
                found += cls.errors(instance, sub, path)
        if "anyOf" in schema and not any(not cls.errors(instance, sub, path) for sub in schema["anyOf"]):
            found.append(f"{path}: matches none of anyOf")
        if "oneOf" in schema:
            matches = sum(1 for sub in schema["oneOf"] if not cls.errors(instance, sub, path))
            if matches != 1:
                found.append(f"{path}: matches {matches} of oneOf, expected exactly 1")
        if "not" in schema and not cls.errors(instance, schema["not"], path):
            found.append(f"{path}: must not match the 'not' schema")
        return found

    def _verify(self, candidate: str, reference: Any) -> VerifierResult:
        if reference is not self.reference:
            self.check_schema(reference)
        text = candidate.strip()
        if self.allow_fence:
            fence = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.DOTALL | re.IGNORECASE)
            if fence:
                text = fence.group(1)
        try:
            instance = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as err:
            return _fail(f"not valid JSON: {err}.")
        problems = self.errors(instance, reference)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            return _fail(problems[0] + more + ".")
        return _pass()
