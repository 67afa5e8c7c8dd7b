"""The JSON schema of bending configurations, and the rules a configuration follows beyond it."""

from __future__ import annotations

from typing import Any

from ..controls import CURVES, MAX_RAMP, WIDGETS
from ..errors import BendingError
from .tensors import DTYPES, SIDE_FILE
from .validate import Document, show_repr, validate

__all__ = ["CONFIG", "FORMAT", "SCHEMA", "VERSION", "check"]

FORMAT = "torchbend.bending-config"
VERSION = 1

_IDENTIFIER = r"^[^\W\d]\w*\Z"
_DOTTED = r"[^\W\d]\w*(\.[^\W\d]\w*)*"
_CLASS = rf"^{_DOTTED}(:{_DOTTED})?\Z"
_VALUES = "a number, a string, a bool, null, a list, or an object"

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "torchbend bending configuration",
    "description": "a torchbend bending configuration",
    "type": "object",
    "required": ["bendings"],
    "properties": {
        "format": {"const": FORMAT, "description": repr(FORMAT)},
        "version": {"const": VERSION, "description": f"version {VERSION}"},
        "controls": {
            "type": "array",
            "items": {"$ref": "#/$defs/control"},
            "description": "a list of controls",
        },
        "aliases": {
            "type": "object",
            "propertyNames": {"pattern": _IDENTIFIER, "description": "an alias (a name)"},
            "additionalProperties": {"type": "string", "description": "a target's name"},
            "description": "an object of targets by alias",
        },
        "bendings": {
            "type": "array",
            "items": {"$ref": "#/$defs/bending"},
            "description": "a list of bendings",
        },
    },
    "$defs": {
        "finite": {"type": "number", "format": "finite", "description": "a finite number"},
        "control": {
            "type": "object",
            "required": ["name", "value"],
            "additionalProperties": False,
            "description": "a control: an object with a name and a value",
            "properties": {
                "name": {
                    "type": "string",
                    "pattern": _IDENTIFIER,
                    "description": "a control's name (an identifier)",
                },
                "value": {
                    "type": ["number", "boolean", "array"],
                    "format": "finite",
                    "items": {"$ref": "#/$defs/finite"},
                    "minItems": 1,
                    "description": "a finite number, a bool or a list of finite numbers",
                },
                "range": {
                    "type": ["array", "null"],
                    "items": {"$ref": "#/$defs/finite"},
                    "minItems": 2,
                    "maxItems": 2,
                    "description": "null or [low, high], two finite numbers",
                },
                "clamp": {"type": "boolean", "description": "true or false"},
                "ramp": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_RAMP,
                    "description": f"a number of calls from 0 to {MAX_RAMP}",
                },
                "widget": {"$ref": "#/$defs/widget"},
            },
        },
        # What BendingParameter.widget_changes gives: the fields that differ from the widget
        # derived from the control. Null is the field left out, derived as well.
        "widget": {
            "type": "object",
            "additionalProperties": False,
            "description": "a control's widget: an object of interface hints",
            "properties": {
                "kind": {
                    "enum": [*WIDGETS, None],
                    "description": f"one of {', '.join(map(repr, WIDGETS))}, or null",
                },
                "unit": {"type": "string", "description": "a unit: a string ('Hz', 'dB', '')"},
                "curve": {
                    "enum": list(CURVES),
                    "description": f"one of {', '.join(map(repr, CURVES))}",
                },
                "label": {
                    "type": ["string", "null"],
                    "minLength": 1,
                    "description": "a label: a non-empty string, or null",
                },
                "group": {"type": "string", "description": "a group: a string (or '')"},
                "choices": {
                    "type": "array",
                    "items": {
                        "type": "string",
                        "minLength": 1,
                        "description": "a menu's entry (a non-empty string)",
                    },
                    "minItems": 1,
                    "uniqueItems": True,
                    "description": "a list of distinct menu entries",
                },
                "step": {
                    "type": ["number", "null"],
                    "format": "finite",
                    "exclusiveMinimum": 0,
                    "description": "a finite number > 0, or null",
                },
            },
        },
        "bending": {
            "type": "object",
            "required": ["callback", "patterns"],
            "additionalProperties": False,
            "description": "a bending: an object with a callback and patterns",
            "properties": {
                "callback": {"$ref": "#/$defs/callback"},
                "patterns": {
                    "type": "array",
                    "items": {
                        "type": "string",
                        "format": "regex",
                        "description": "a regular expression",
                    },
                    "minItems": 1,
                    "description": "a list of one or more regular expressions",
                },
                "fn": {
                    "type": ["null", "string", "array"],
                    "pattern": _IDENTIFIER,
                    "items": {
                        "type": "string",
                        "pattern": _IDENTIFIER,
                        "description": "a method's name",
                    },
                    "minItems": 1,
                    "description": "null, a method's name or a list of methods' names",
                },
                "keys": {
                    "type": "array",
                    "items": {"type": "string", "description": "a target's name"},
                    "description": "a list of targets' names",
                },
                "blend": {
                    "$ref": "#/$defs/value",
                    "description": "a dry/wet mix: a number from 0 to 1, or a control",
                },
                "subset": {
                    "type": "object",
                    "required": ["fraction"],
                    "additionalProperties": False,
                    "description": "{'fraction': ..., 'dim': ..., 'seed': ...}",
                    "properties": {
                        "fraction": {"$ref": "#/$defs/value"},
                        "dim": {
                            "type": ["null", "integer", "array"],
                            "items": {"type": "integer", "description": "an axis"},
                            "description": "null, an axis or a list of axes",
                        },
                        "seed": {"type": "integer", "description": "an integer seed"},
                    },
                },
                "window": {
                    "type": "object",
                    "additionalProperties": False,
                    "description": "{'start', 'end', 'unit', 'fade', 'period', 'stream'}",
                    "properties": {
                        "start": {"type": "number", "description": "a number"},
                        "end": {"type": ["null", "number"], "description": "null or a number"},
                        "unit": {
                            "enum": ["samples", "seconds", "calls"],
                            "description": "'samples', 'seconds' or 'calls'",
                        },
                        "fade": {"type": "number", "description": "a number"},
                        "period": {"type": ["null", "integer"], "description": "null or an int"},
                        "stream": {"type": "boolean", "description": "true or false"},
                    },
                },
                "guard": {
                    "type": ["object", "boolean"],
                    "not": {"const": True},
                    "additionalProperties": False,
                    "description": "false, or {'finite', 'std', 'norm'}",
                    "properties": {
                        "finite": {"type": "boolean", "description": "true or false"},
                        "std": {"type": ["null", "number"], "description": "null or a number"},
                        "norm": {"type": "boolean", "description": "true or false"},
                    },
                },
            },
        },
        "callback": {
            "type": "object",
            "required": ["class"],
            "additionalProperties": False,
            "description": "a callback: an object with a class and its args",
            "properties": {
                "class": {
                    "type": "string",
                    "pattern": _CLASS,
                    "description": "a callback's class ('Scale', or 'module.path:ClassName')",
                },
                "args": {"type": "object", "description": "an object of arguments by name"},
            },
            # A chain's argument is the list of its callbacks; other callbacks take arguments.
            "if": {"properties": {"class": {"const": "Chain"}}},
            "then": {
                "required": ["args"],
                "properties": {
                    "args": {
                        "required": ["callbacks"],
                        "additionalProperties": False,
                        "properties": {
                            "callbacks": {
                                "type": "array",
                                "items": {"$ref": "#/$defs/callback"},
                                "description": "a list of callbacks",
                            }
                        },
                        "description": "{'callbacks': [...]}",
                    }
                },
            },
            "else": {
                "properties": {
                    "args": {
                        "propertyNames": {
                            "pattern": _IDENTIFIER,
                            "description": "an argument's name (an identifier)",
                        },
                        "additionalProperties": {"$ref": "#/$defs/value"},
                    }
                }
            },
        },
        # An argument: a plain value (a number may be infinite: Clamp's bounds), a list of
        # arguments, or an object that names a control, a tuple or a callback.
        "value": {
            "if": {"type": "object"},
            "then": {"$ref": "#/$defs/object_value"},
            "else": {
                "if": {"type": "array"},
                "then": {"items": {"$ref": "#/$defs/value"}},
                "else": {
                    "type": ["number", "string", "boolean", "null"],
                    "description": _VALUES,
                },
            },
        },
        "object_value": {
            "if": {"required": ["control"]},
            "then": {
                "additionalProperties": False,
                "properties": {
                    "control": {
                        "type": "string",
                        "pattern": _IDENTIFIER,
                        "description": "a control's name (an identifier)",
                    },
                    "scale": {"$ref": "#/$defs/finite"},
                    "offset": {"$ref": "#/$defs/finite"},
                },
            },
            "else": {
                "if": {"required": ["tensor"]},
                "then": {
                    "additionalProperties": False,
                    "properties": {"tensor": {"$ref": "#/$defs/tensor"}},
                },
                "else": {"$ref": "#/$defs/other_object_value"},
            },
        },
        # A tensor argument (Steer's vector): its numbers, or where they are in the side file.
        "tensor": {
            "type": "object",
            "required": ["dtype", "shape"],
            "additionalProperties": False,
            "description": "{'dtype', 'shape', 'values'} or {'dtype', 'shape', 'file', 'key'}",
            "properties": {
                "dtype": {
                    "enum": list(DTYPES),
                    "description": f"one of {', '.join(map(repr, DTYPES))}",
                },
                "shape": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 0, "description": "a size"},
                    "description": "a list of sizes",
                },
                "values": {
                    "type": "array",
                    "items": {"$ref": "#/$defs/finite"},
                    "description": "a list of finite numbers",
                },
                "file": {
                    "type": "string",
                    "pattern": SIDE_FILE.pattern,
                    "description": "a safetensors file beside the configuration (a file name)",
                },
                "key": {"type": "string", "description": "a tensor's key in the side file"},
            },
            "oneOf": [{"required": ["values"]}, {"required": ["file", "key"]}],
        },
        "other_object_value": {
            "if": {"required": ["tuple"]},
            "then": {
                "additionalProperties": False,
                "properties": {
                    "tuple": {
                        "type": "array",
                        "items": {"$ref": "#/$defs/value"},
                        "description": "a list of arguments",
                    }
                },
            },
            "else": {
                "if": {"required": ["callback"]},
                "then": {
                    "additionalProperties": False,
                    "properties": {"callback": {"$ref": "#/$defs/callback"}},
                },
                "else": {
                    "not": {},
                    "description": (
                        "{'control': name}, {'tensor': {...}}, {'tuple': [...]} or "
                        "{'callback': {...}} (an argument that is an object)"
                    ),
                },
            },
        },
    },
}
"""The JSON schema (draft 2020-12) of what :meth:`BendingConfig.to_dict` writes. Two formats are
torchbend's own: ``"finite"`` (a number that is neither infinite, nor NaN, nor beyond any float)
and ``"regex"`` (a regular expression Python's ``re`` compiles)."""

CONFIG = Document(SCHEMA, BendingError, show_repr)
"""Bending configurations, as :func:`~torchbend.config.validate.validate` checks them: refused
with a :class:`BendingError` that shows values as Python writes them."""


def check(data: Any, source: str) -> None:
    """Raise a :class:`BendingError` unless ``data`` is a bending configuration that
    :data:`SCHEMA` describes, whose controls have distinct names.

    What the schema cannot say is checked here, around it: the format and version first, with
    their own words (a file of something else is not a configuration with odd fields), and
    the controls' names, distinct, after.
    """
    if not isinstance(data, dict):
        raise BendingError(
            f"{source} is not a torchbend bending configuration: expected an object with "
            f"'bendings', got {show_repr(data)}"
        )
    # "format" and "version" may be left out (as the studio and sweeps take configurations
    # written by hand): they are checked when given.
    if data.get("format", FORMAT) != FORMAT:
        raise BendingError(
            f"{source} is not a torchbend bending configuration (format "
            f"{show_repr(data['format'])}, expected {FORMAT!r})"
        )
    version = data.get("version", VERSION)
    if type(version) is not int or version != VERSION:
        raise BendingError(
            f"{source} has format version {show_repr(version)}; this torchbend reads version "
            f"{VERSION}"
        )
    validate(data, CONFIG, source)
    seen: dict[str, int] = {}
    for i, control in enumerate(data.get("controls", [])):
        first = seen.setdefault(control["name"], i)
        if first != i:
            raise BendingError(
                f"{source}, control {i}: control {first} is already named "
                f"{control['name']!r}; give each control its own name"
            )
