"""The JSON schema of sweep specifications (docs/sweeps.md), checked as configurations are."""

from __future__ import annotations

from typing import Any

from ..errors import SweepError
from .validate import Document, show_json

__all__ = ["AUDIO_FORMATS", "AXIS_FIELDS", "SAMPLINGS", "SWEEP", "SWEEP_SCHEMA", "TARGET_KINDS"]

SAMPLINGS = ("grid", "random")
AUDIO_FORMATS = ("wav", "flac")
TARGET_KINDS = ("activations", "weights", "all")
AXIS_FIELDS = {
    "values": ("values",),
    "range": ("range", "steps", "log", "integer"),
    "seeds": ("seeds", "start"),
    "targets": ("targets", "pattern", "method"),
}
"""The kinds of axes, each by the field that names it, and the fields that go with each."""

# Written for any regex engine (an editor's, ECMA's), not Python's alone: no \Z.
_PATH = r"^[^.\n]+(\.[^.\n]+)*$"
_AXIS_EXAMPLE = "{'bendings.0.callback.args.std': {'range': [0, 1], 'steps': 5}}"

_FIELD_SCHEMAS: dict[str, Any] = {
    "values": {
        "type": "array",
        "items": {"$ref": "#/$defs/json"},
        "minItems": 1,
        "description": "a non-empty list of JSON values",
    },
    "range": {
        "type": "array",
        "items": {"type": "number", "format": "finite", "description": "a finite number"},
        "minItems": 2,
        "maxItems": 2,
        "description": "[low, high], two finite numbers, low <= high",
    },
    "steps": {
        "type": ["integer", "null"],
        "format": "int",
        "minimum": 1,
        "description": "a positive integer (how many values from low to high)",
    },
    "log": {"type": "boolean", "description": "true or false (geometric steps)"},
    "integer": {"type": "boolean", "description": "true or false (values rounded)"},
    "seeds": {
        "type": "integer",
        "format": "int",
        "minimum": 1,
        "description": "a positive count of seeds",
    },
    "start": {"type": "integer", "format": "int", "description": "an integer (the first seed)"},
    "targets": {
        "enum": list(TARGET_KINDS),
        "description": f"one of {', '.join(TARGET_KINDS)}",
    },
    "pattern": {
        "type": "string",
        "format": "regex",
        "description": "a regular expression (the targets' names it matches)",
    },
    "method": {"type": ["string", "null"], "description": "a method's name, or null"},
}

SWEEP_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "torchbend sweep specification",
    "type": "object",
    "additionalProperties": False,
    "required": ["model", "inputs"],
    "properties": {
        "model": {
            "type": "string",
            "minLength": 1,
            "description": "the model as a string: a shipped name, a TorchScript file or "
            "module:factory",
        },
        "checkpoint": {
            "type": ["string", "null"],
            "minLength": 1,
            "description": "a state dict file for a module:factory model as a string, or null",
        },
        "method": {
            "type": "string",
            "minLength": 1,
            "description": "the method to run (forward by default) as a string",
        },
        "inputs": {
            "anyOf": [
                {"type": "string"},
                {"type": "array", "items": {"type": "string"}, "minItems": 1},
            ],
            "description": "a file, folder or glob, or a non-empty list of them (audio, "
            "relative to the specification's folder)",
        },
        "block_size": {
            "anyOf": [
                {"type": "integer", "format": "int", "minimum": 1},
                {"type": "null"},
                {"const": "auto"},
            ],
            "description": "a positive number of samples, or null for one pass ('auto', the "
            "default: 8192 for a model that streams)",
        },
        "base": {
            "type": ["object", "string", "null"],
            "description": "a bending configuration (an object with 'bendings', or a file "
            "holding one)",
        },
        "axes": {
            "type": "object",
            "propertyNames": {
                "type": "string",
                "pattern": _PATH,
                "description": "a path of fields such as 'bendings.0.callback.args.std'",
            },
            "additionalProperties": {"$ref": "#/$defs/axis"},
            "description": f"an object of axes by path (such as {_AXIS_EXAMPLE})",
        },
        "sample": {"enum": list(SAMPLINGS), "description": "'grid' or 'random'"},
        "count": {
            "type": ["integer", "null"],
            "format": "int",
            "minimum": 1,
            "description": "a positive number of renders",
        },
        "seed": {
            "type": "integer",
            "format": "int",
            "description": "an integer (the seed of random sampling)",
        },
        "format": {"enum": list(AUDIO_FORMATS), "description": "'wav' or 'flac' (16-bit)"},
        "threads": {
            "type": "integer",
            "format": "int",
            "minimum": 1,
            "description": "a positive integer (torch threads per worker)",
        },
        "safety": {"type": "boolean", "description": "true or false"},
        "effects": {"type": "boolean", "description": "true or false"},
    },
    "if": {"required": ["sample"], "properties": {"sample": {"const": "random"}}},
    "then": {
        "required": ["count"],
        "properties": {
            "count": {
                "type": "integer",
                "description": "a number of renders (random sampling needs one)",
            }
        },
        "description": "random sampling needs 'count', the number of renders",
    },
    "$defs": {
        # An axis's kind (exactly one of values, range, seeds, targets) and the fields that go
        # with it are checked after the schema, with the base configuration it sets.
        "axis": {
            "type": "object",
            "additionalProperties": False,
            "properties": {f: _FIELD_SCHEMAS[f] for fs in AXIS_FIELDS.values() for f in fs},
            "description": f"an object with one of {', '.join(AXIS_FIELDS)}",
        },
        "json": {
            "type": ["null", "boolean", "number", "string", "array", "object"],
            "format": "finite",
            "items": {"$ref": "#/$defs/json"},
            "additionalProperties": {"$ref": "#/$defs/json"},
            "description": "a JSON value: null, a bool, a finite number, a string, a list or "
            "an object",
        },
    },
}
"""The JSON schema (draft 2020-12) of a sweep specification. What it cannot say is checked
after it, by :func:`torchbend.sweep.spec.read_spec`: the base configuration (against its own
schema), each axis's kind and path into the base, a range's order, and the size of the space."""

SWEEP = Document(SWEEP_SCHEMA, SweepError, show_json)
"""Sweep specifications, as :func:`~torchbend.config.validate.validate` checks them: refused
with a :class:`SweepError` that shows values as JSON writes them."""
