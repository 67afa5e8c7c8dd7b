"""The one check of the files users write against their JSON schema, and its error messages."""

from __future__ import annotations

import json
import math
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..errors import BendingError, TorchbendError, did_you_mean

__all__ = ["MAX_DEPTH", "Document", "parse", "show_json", "show_repr", "validate", "where"]

MAX_DEPTH = 32
"""How deep lists and objects nest in a configuration (and in any JSON torchbend reads: sweep
specifications, the studio's requests and messages), at most. A configuration nests about
five levels, and three more for each callback given as an argument of another: deeper is
garbage, which the check refuses before it recurses into it."""

ENTRIES = {"bendings": "bending", "controls": "control", "axes": "axis"}
"""The lists and objects whose items an error names as entries: ``bends.json, bending 2``
(an item of a list, by index), ``sweep.json, axis 'bendings.0.patterns'`` (of an object, by
key)."""


def show_repr(value: Any) -> str:
    """``value`` for an error about a bending configuration: its repr, shortened."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def show_json(value: Any) -> str:
    """``value`` for an error about a sweep specification: as JSON (as the file writes it)
    where JSON reads it back as it is, else its repr (a tuple, NaN); shortened."""
    try:
        text = json.dumps(value, allow_nan=False)
        if json.loads(text) != value:
            text = repr(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True, eq=False)
class Document:
    """A kind of file users write: its JSON schema (draft 2020-12), the error that refuses a
    file that does not fit, and how that error shows values."""

    schema: Mapping[str, Any]
    error: type[TorchbendError]
    show: Callable[[Any], str] = show_repr


def validate(data: Any, document: Document, source: str) -> None:
    """Raise ``document.error`` unless ``data`` fits ``document.schema``.

    The error names ``source`` (the file), the entry and the field, the value, and what was
    expected, in one line: ``"bends.json, bending 2, callback.args: expected an object of
    arguments by name, got [2.0]"``. What is expected is the failing schema's
    ``description``, else its type. Besides the standard formats, two are torchbend's own:
    ``"finite"`` (a number that is neither infinite, nor NaN, nor beyond any float) and
    ``"regex"`` (a regular expression Python's ``re`` compiles); and ``"int"``, an integer
    written as one (``2``, not ``2.0``, which JSON Schema's ``integer`` takes).
    """
    check_sizes(data, source, document.error)
    error = _best_error(data, document)
    if error is not None:
        raise document.error(f"{where(source, error.absolute_path)}: {_message(error, document)}")


def parse(text: str | bytes, source: str, error: type[TorchbendError] = BendingError) -> Any:
    """``text`` read as JSON, refused with ``error`` naming ``source`` when it is not JSON,
    nests deeper than :data:`MAX_DEPTH` or holds an int beyond any float.

    Python's parser recurses: JSON nested a few thousand levels deep makes it raise a
    ``RecursionError`` that says nothing of the input, so the depth is refused here, once for
    every reader (bending configuration files, sweep specifications, the studio's request
    bodies and live messages).
    """
    try:
        data = json.loads(text)
    except RecursionError:
        raise error(_too_deep(source)) from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, ints Python will not read
        raise error(f"{source} is not valid JSON: {e}") from None
    check_sizes(data, source, error)
    return data


def _too_deep(at: str) -> str:
    return (
        f"{at}: lists and objects nest more than {MAX_DEPTH} levels deep, the most torchbend "
        "reads (a bending configuration nests about five)"
    )


def check_sizes(data: Any, source: str, error: type[TorchbendError] = BendingError) -> None:
    """Refuse what would make the schema's check recurse too deep, or fail to print: nesting
    deeper than :data:`MAX_DEPTH`, and ints beyond any float (JSON parses ``1e999`` to
    ``inf``, but ``10...0`` to an int)."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, int) and not isinstance(value, bool):
            if value.bit_length() > 1024:
                digits = int(value.bit_length() * math.log10(2))
                raise error(
                    f"{where(source, path)}: expected a number, got an int of about "
                    f"{digits} digits, beyond any float or 64-bit int"
                )
        elif isinstance(value, (dict, list)):
            if len(path) >= MAX_DEPTH:
                raise error(_too_deep(where(source, path[:3])))
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((item, (*path, key)) for key, item in items)


@cache
def _validator(document: Document) -> Any:
    # Imported here: reading a file users write is rare, importing torchbend is not.
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

    @formats.checks("int")
    def _int(value: object) -> bool:
        return not isinstance(value, float)

    Draft202012Validator.check_schema(document.schema)
    return Draft202012Validator(document.schema, format_checker=formats)


def _best_error(data: Any, document: Document) -> Any:
    """The error of ``data`` to report, if any: one of its first entry with errors (bending 0
    before bending 1), the most relevant there (jsonschema's choice: the shallowest)."""
    from jsonschema.exceptions import relevance

    def rank(error: Any) -> tuple[list[int], Any]:
        entry = [-step if isinstance(step, int) else 0 for step in error.absolute_path][:2]
        return entry + [0] * (2 - len(entry)), relevance(error)

    return max(_validator(document).iter_errors(data), key=rank, default=None)


_KINDS = {
    "object": "an object",
    "array": "a list",
    "string": "a string",
    "number": "a number",
    "integer": "an int",
    "boolean": "a bool",
    "null": "null",
}


def _message(error: Any, document: Document) -> str:
    """What the schema's ``error`` says, as torchbend says it."""
    instance, schema, keyword, show = error.instance, error.schema, error.validator, document.show
    if keyword == "required":
        missing = [name for name in error.validator_value if name not in instance]
        field = schema.get("properties", {}).get(missing[0], {})
        described = schema.get("description") or field.get("description", "an object")
        return f"missing field {missing[0]!r} ({described})"
    if keyword == "additionalProperties":
        known = list(schema.get("properties", {}))
        unknown = [str(name) for name in instance if name not in known]
        fields = ", ".join(map(repr, known))
        return f"unknown field {unknown[0]!r}{did_you_mean(unknown[0], known)} (fields: {fields})"
    if keyword == "format" and error.cause is not None:
        return f"{show(instance)} is not a regular expression: {error.cause}"
    kinds = schema.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else kinds
    expected = schema.get("description") or " or ".join(_KINDS[k] for k in kinds)
    hint = ""
    if keyword == "type" and isinstance(instance, str) and "array" in kinds:
        hint = f"; write [{instance!r}] for a list of one"
    return f"expected {expected or 'something else'}, got {show(instance)}{hint}"


def where(source: str, path: Iterable[str | int]) -> str:
    """``"bends.json, bending 2, callback.args"``: where ``path`` leads in a file (its first
    step names an entry when it is one of :data:`ENTRIES`)."""
    steps = deque(path)
    entry = ""
    if len(steps) >= 2 and str(steps[0]) in ENTRIES:
        name = ENTRIES[str(steps.popleft())]
        key = steps.popleft()
        entry = f", {name} {key if isinstance(key, int) else repr(key)}"
    elif steps:
        entry = f", {steps.popleft()}"
    field = ""
    for step in steps:
        field += f"[{step}]" if isinstance(step, int) else f".{step}"
    return f"{source}{entry}{', ' + field.lstrip('.') if field else ''}"
