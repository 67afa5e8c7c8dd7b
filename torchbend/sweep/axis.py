"""One axis of a sweep: the field of the base configuration it sets, and the values it takes."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..config.sweep_schema import AXIS_FIELDS
from ..config.validate import show_json, where
from ..errors import SweepError, did_you_mean

__all__ = ["Axis", "locate", "parse_path", "read_axis"]


@dataclass(frozen=True)
class Axis:
    """One field of the base configuration and the values it takes.

    ``kind`` is ``values`` (a list), ``range`` (numbers from ``low`` to ``high``: ``steps``
    of them on a grid, evenly or geometrically with ``log``; any in between when drawn at
    random without ``steps``), ``seeds`` (``steps`` integers from ``start``) or ``targets``
    (the names of the model's activations or weights that ``pattern`` matches, resolved when
    the model is loaded: see :meth:`with_targets`).
    """

    name: str
    path: tuple[str | int, ...]
    kind: str
    values: tuple[Any, ...] = ()
    low: float = 0.0
    high: float = 0.0
    steps: int | None = None
    log: bool = False
    integer: bool = False
    start: int = 0
    targets: str = ""
    pattern: str = ""
    method: str | None = None

    @property
    def size(self) -> int | None:
        """How many values the axis takes on a grid, counted without listing them (``None``
        for a range without steps, which only random sampling takes)."""
        if self.kind in ("range", "seeds"):
            return self.steps
        return len(self.values)

    def value(self, index: int) -> Any:
        """The ``index``-th value of the grid, computed alone: an axis of a billion steps
        gives any of them without listing the others."""
        steps = self.steps
        if self.kind == "seeds":
            return self.start + index
        if self.kind != "range":
            return self.values[index]
        if steps is None:
            raise SweepError(
                f"axis {self.name!r}: a range needs 'steps' for a grid; give steps, or sample "
                "at random"
            )
        if steps == 1:
            return self._cast(self.low)
        if self.log:
            return self._cast(self.low * (self.high / self.low) ** (index / (steps - 1)))
        return self._cast(self.low + (self.high - self.low) * index / (steps - 1))

    def grid(self) -> list[Any]:
        """Every value the axis takes on a grid, as a list (see :meth:`value` for one)."""
        size = self.size
        if size is None:
            return [self.value(0)]  # raises: a range without steps has no grid
        return [self.value(i) for i in range(size)]

    def draw(self, rng: random.Random) -> Any:
        """One value drawn at random: uniform among the values, or within the range."""
        if self.kind != "range" or self.steps is not None:
            size = self.size
            assert size is not None
            return self.value(rng.randrange(size))
        u = rng.random()
        if self.log:
            return self._cast(self.low * (self.high / self.low) ** u)
        return self._cast(self.low + (self.high - self.low) * u)

    def probes(self) -> list[Any]:
        """The values to try on the model before a sweep: every value of a list (each may be
        of its own kind), both ends of a range or of a run of seeds (every value between is
        of the same kind, within them)."""
        if self.kind == "range":
            return [self._cast(self.low), self._cast(self.high)]
        if self.kind == "seeds":
            assert self.steps is not None
            return [self.start, self.start + self.steps - 1]
        return list(self.values)

    def _cast(self, value: float) -> float | int:
        return round(value) if self.integer else float(value)

    def with_targets(self, names: Sequence[str]) -> Axis:
        """This ``targets`` axis with the names the model gave it as its values."""
        return Axis(**{**self.__dict__, "values": tuple(names)})


def read_axis(
    name: str, data: dict[str, Any], base: dict[str, Any], source: str, sample: str
) -> Axis:
    """The axis ``name`` of a specification that fits its schema, checked for what the schema
    cannot say: its path into ``base``, its kind (exactly one of ``values``, ``range``,
    ``seeds``, ``targets``) and the fields that go with it, a range's order and, on a grid,
    its steps."""
    at = where(source, ("axes", name))
    path = parse_path(name)
    container, key = locate(base, path, name)
    kinds = [k for k in AXIS_FIELDS if k in data]
    if len(kinds) != 1:
        raise SweepError(
            f"{at}: expected exactly one of {', '.join(map(repr, AXIS_FIELDS))}, got "
            f"{sorted(data) or 'none'}"
        )
    kind = kinds[0]
    extra = [k for k in data if k not in AXIS_FIELDS[kind]]
    if extra:
        raise SweepError(
            f"{at}: {extra[0]!r} does not go with {kind!r}; a {kind} axis takes "
            f"{', '.join(AXIS_FIELDS[kind])}"
        )
    if kind == "values":
        return Axis(name, path, kind, values=tuple(data["values"]))
    if kind == "seeds":
        return Axis(name, path, kind, steps=data["seeds"], start=data.get("start", 0), integer=True)
    if kind == "targets":
        if not (
            isinstance(container, list) or key == "patterns" or isinstance(container.get(key), str)
        ):
            raise SweepError(
                f"{at}: a targets axis sets a bending's patterns (bendings.N.patterns) or one "
                "pattern (bendings.N.patterns.K)"
            )
        pattern, method = data.get("pattern", "."), data.get("method")
        return Axis(name, path, kind, targets=data["targets"], pattern=pattern, method=method)
    (low, high), steps, log = data["range"], data.get("steps"), data.get("log", False)
    if low > high:
        raise SweepError(
            f"{at}, range: expected [low, high], two finite numbers, low <= high, got "
            f"{show_json(data['range'])}"
        )
    if log and low <= 0:
        raise SweepError(f"{at}: a log range needs low > 0, got {show_json(data['range'])}")
    if sample == "grid" and steps is None:
        raise SweepError(
            f"{at}: a range needs 'steps' on a grid (how many values from low to high); or "
            "sample at random"
        )
    integer = data.get("integer", False)
    return Axis(
        name, path, kind, low=float(low), high=float(high), steps=steps, log=log, integer=integer
    )


def parse_path(name: str) -> tuple[str | int, ...]:
    """``'bendings.0.callback.args.std'`` as keys and indices."""
    return tuple(int(p) if p.isdigit() else p for p in name.split("."))


def locate(config: dict[str, Any], path: tuple[str | int, ...], name: str) -> tuple[Any, Any]:
    """The container holding the last step of ``path`` in ``config`` and the key to set there;
    a step into a list of named objects (controls) may be the name."""
    node: Any = config
    for depth, step in enumerate(path[:-1]):
        node = _step(node, step, path[: depth + 1], name)
    last = path[-1]
    if isinstance(node, list):
        return node, _list_index(node, last, path, name)
    if not isinstance(node, dict):
        raise SweepError(f"axis {name!r}: {_dotted(path[:-1])} is {show_json(node)}, not an object")
    return node, str(last)


def _step(node: Any, step: str | int, upto: tuple[str | int, ...], name: str) -> Any:
    if isinstance(node, list):
        return node[_list_index(node, step, upto, name)]
    if isinstance(node, dict):
        key = str(step)
        if key not in node:
            raise SweepError(
                f"axis {name!r}: the base configuration has no {_dotted(upto)}"
                f"{did_you_mean(key, [str(k) for k in node])}; an axis sets a field whose "
                "parent the base holds"
            )
        return node[key]
    raise SweepError(f"axis {name!r}: {_dotted(upto[:-1])} is {show_json(node)}, not an object")


def _list_index(node: list[Any], step: str | int, upto: tuple[str | int, ...], name: str) -> int:
    if isinstance(step, int):
        if step >= len(node):
            raise SweepError(
                f"axis {name!r}: {_dotted(upto[:-1])} holds {len(node)} item(s), so "
                f"{_dotted(upto)} does not exist (indices start at 0)"
            )
        return step
    named = [
        i for i, item in enumerate(node) if isinstance(item, dict) and item.get("name") == step
    ]
    if not named:
        names = [str(item["name"]) for item in node if isinstance(item, dict) and "name" in item]
        raise SweepError(
            f"axis {name!r}: no item named {step!r} in {_dotted(upto[:-1])}"
            f"{did_you_mean(step, names)}"
        )
    return named[0]


def _dotted(path: Sequence[str | int]) -> str:
    return ".".join(map(str, path)) or "the configuration"
