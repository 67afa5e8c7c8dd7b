"""The JSON schema of bending configurations, and the check of a configuration against it."""

from __future__ import annotations

import json
import math
import re
from collections import deque
from collections.abc import Iterable
from functools import cache
from typing import Any

from .controls import CURVES, MAX_RAMP, WIDGETS
from .errors import BendingError, did_you_mean

__all__ = ["FORMAT", "MAX_DEPTH", "SCHEMA", "VERSION", "check", "parse"]

FORMAT = "torchbend.bending-config"
VERSION = 1

MAX_DEPTH = 32
"""How deep lists and objects nest in a configuration (and in any JSON torchbend reads: the
studio's requests and messages), at most. A configuration nests about five levels, and three
more for each callback given as an argument of another: deeper is garbage, which the check
refuses before it recurses into it."""

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
                    "type": ["number", "boolean"],
                    "format": "finite",
                    "description": "a finite number or a bool",
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
                            "{'control': name}, {'tuple': [...]} or {'callback': {...}} (an "
                            "argument that is an object)"
                        ),
                    },
                },
            },
        },
    },
}
"""The JSON schema (draft 2020-12) of what :meth:`BendingConfig.to_dict` writes. Two formats are
torchbend's own: ``"finite"`` (a number that is neither infinite, nor NaN, nor beyond any float)
and ``"regex"`` (a regular expression Python's ``re`` compiles)."""


def check(data: Any, source: str) -> None:
    """Raise a :class:`BendingError` unless ``data`` is a bending configuration that
    :data:`SCHEMA` describes, whose controls have distinct names.

    The error names ``source`` (the file), the entry and the field, the value, and what was
    expected: ``"bends.json, bending 2, callback.args: expected an object of arguments by
    name, got [2.0]"``.
    """
    if not isinstance(data, dict):
        raise BendingError(
            f"{source} is not a torchbend bending configuration: expected an object with "
            f"'bendings', got {_show(data)}"
        )
    # "format" and "version" may be left out (as the studio and sweeps take configurations
    # written by hand): they are checked when given.
    if data.get("format", FORMAT) != FORMAT:
        raise BendingError(
            f"{source} is not a torchbend bending configuration (format "
            f"{_show(data['format'])}, expected {FORMAT!r})"
        )
    version = data.get("version", VERSION)
    if type(version) is not int or version != VERSION:
        raise BendingError(
            f"{source} has format version {_show(version)}; this torchbend reads version {VERSION}"
        )
    _check_sizes(data, source)
    error = _best_error(data)
    if error is not None:
        raise BendingError(f"{_where(source, error.absolute_path)}: {_message(error)}")
    seen: dict[str, int] = {}
    for i, control in enumerate(data.get("controls", [])):
        first = seen.setdefault(control["name"], i)
        if first != i:
            raise BendingError(
                f"{source}, control {i}: control {first} is already named "
                f"{control['name']!r}; give each control its own name"
            )


def parse(text: str | bytes, source: str) -> Any:
    """``text`` read as JSON, refused with a :class:`BendingError` naming ``source`` when it is
    not JSON, nests deeper than :data:`MAX_DEPTH` or holds an int beyond any float.

    Python's parser recurses: JSON nested a few thousand levels deep makes it raise a
    ``RecursionError`` that says nothing of the input, so the depth is refused here, once for
    every reader (bending configuration files, the studio's request bodies and live messages).
    """
    try:
        data = json.loads(text)
    except RecursionError:
        raise BendingError(_too_deep(source)) from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, ints Python will not read
        raise BendingError(f"{source} is not valid JSON: {e}") from None
    _check_sizes(data, source)
    return data


def _too_deep(where: str) -> str:
    return (
        f"{where}: lists and objects nest more than {MAX_DEPTH} levels deep, the most torchbend "
        "reads (a bending configuration nests about five)"
    )


def _check_sizes(data: Any, source: str) -> None:
    """Refuse what would make the schema's check recurse too deep, or fail to print: nesting
    deeper than :data:`MAX_DEPTH`, and ints beyond any float (JSON parses ``1e999`` to
    ``inf``, but ``10...0`` to an int)."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, int) and not isinstance(value, bool):
            if value.bit_length() > 1024:
                digits = int(value.bit_length() * math.log10(2))
                raise BendingError(
                    f"{_where(source, path)}: expected a number, got an int of about "
                    f"{digits} digits, beyond any float or 64-bit int"
                )
        elif isinstance(value, (dict, list)):
            if len(path) >= MAX_DEPTH:
                raise BendingError(_too_deep(_where(source, path[:3])))
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((item, (*path, key)) for key, item in items)


@cache
def _validator() -> Any:
    # Imported here: reading a configuration is rare, importing torchbend is not.
    from jsonschema import Draft202012Validator, FormatChecker

    formats = FormatChecker(formats=())

    @formats.checks("finite")
    def _finite(value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return True  # the type is checked on its own
        try:
            return math.isfinite(value)
        except OverflowError:  # an int beyond any float
            return False

    @formats.checks("regex", raises=(re.error, RecursionError, OverflowError))
    def _regex(value: object) -> bool:
        if isinstance(value, str):
            re.compile(value)
        return True

    Draft202012Validator.check_schema(SCHEMA)
    return Draft202012Validator(SCHEMA, format_checker=formats)


def _best_error(data: Any) -> Any:
    """The error of ``data`` to report, if any: one of its first entry with errors (bending 0
    before bending 1), the most relevant there (jsonschema's choice: the shallowest)."""
    from jsonschema.exceptions import relevance

    def rank(error: Any) -> tuple[list[int], Any]:
        entry = [-step if isinstance(step, int) else 0 for step in error.absolute_path][:2]
        return entry + [0] * (2 - len(entry)), relevance(error)

    return max(_validator().iter_errors(data), key=rank, default=None)


_KINDS = {
    "object": "an object",
    "array": "a list",
    "string": "a string",
    "number": "a number",
    "integer": "an int",
    "boolean": "a bool",
    "null": "null",
}


def _message(error: Any) -> str:
    """What the schema's ``error`` says, as torchbend says it."""
    instance, schema, keyword = error.instance, error.schema, error.validator
    if keyword == "required":
        missing = [name for name in error.validator_value if name not in instance]
        return f"missing field {missing[0]!r} ({schema.get('description', 'an object')})"
    if keyword == "additionalProperties":
        known = list(schema.get("properties", {}))
        unknown = [str(name) for name in instance if name not in known]
        fields = ", ".join(map(repr, known))
        return f"unknown field {unknown[0]!r}{did_you_mean(unknown[0], known)} (fields: {fields})"
    if keyword == "format" and error.cause is not None:
        return f"{_show(instance)} is not a regular expression: {error.cause}"
    kinds = schema.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else kinds
    expected = schema.get("description") or " or ".join(_KINDS[k] for k in kinds)
    hint = ""
    if keyword == "type" and isinstance(instance, str) and "array" in kinds:
        hint = f"; write [{instance!r}] for a list of one"
    return f"expected {expected or 'something else'}, got {_show(instance)}{hint}"


_ENTRIES = {"bendings": "bending", "controls": "control"}


def _where(source: str, path: Iterable[str | int]) -> str:
    """``"bends.json, bending 2, callback.args"``: where ``path`` leads in a configuration."""
    steps = deque(path)
    entry = ""
    if len(steps) >= 2 and str(steps[0]) in _ENTRIES and isinstance(steps[1], int):
        entry = f", {_ENTRIES[str(steps.popleft())]} {steps.popleft()}"
    elif steps:
        entry = f", {steps.popleft()}"
    field = ""
    for step in steps:
        field += f"[{step}]" if isinstance(step, int) else f".{step}"
    return f"{source}{entry}{', ' + field.lstrip('.') if field else ''}"


def _show(value: Any) -> str:
    """``value`` for an error: its repr, shortened."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
