"""A sweep's description: the model, its inputs, a base bending and the axes to explore.

A specification is a JSON or YAML object (see docs/sweeps.md)::

    {"model": "tiny_rave", "inputs": ["sounds/*.wav"],
     "base": {"bendings": [{"callback": {"class": "Noise", "args": {"std": 0.1}},
                            "patterns": ["decoder_1"]}]},
     "axes": {"bendings.0.callback.args.std": {"range": [0.0, 1.0], "steps": 5},
              "bendings.0.patterns": {"targets": "activations", "pattern": "coder"}},
     "sample": "grid"}

Each axis sets one field of the base configuration, named by its path (``controls.NAME``
finds a control by name); a point of the space is one value per axis, and a render is one
point applied to one input. ``sample: grid`` takes every combination; ``sample: random``
draws ``count`` renders' worth of points, point ``i`` from its own seeded generator (so a
larger count keeps the first points). :func:`read_spec` checks everything that can be checked
without the model, and names the field, the value and what was expected.
"""

from __future__ import annotations

import copy
import glob
import hashlib
import json
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import FORMAT, VERSION
from ..config_schema import parse
from ..errors import BendingError, SweepError, did_you_mean

__all__ = ["MAX_RENDERS", "SAMPLINGS", "Axis", "SweepSpec", "read_spec"]

MAX_RENDERS = 1_000_000
"""The most renders a sweep may make. Its manifest is read whole when it resumes and mapped
whole by the atlas: a million rows is some gigabytes of memory, and already hours of renders
and hundreds of gigabytes of audio; a larger space is sampled at random, or split in sweeps."""
SAMPLINGS = ("grid", "random")
AUDIO_FORMATS = ("wav", "flac")
TARGET_KINDS = ("activations", "weights", "all")
_FIELDS = {
    "model": "the model: a shipped name, a TorchScript file or module:factory",
    "checkpoint": "a state dict file for a module:factory model",
    "method": "the method to run (forward by default)",
    "inputs": "audio files, folders or globs, relative to the specification's folder",
    "block_size": "samples per block (null: one pass; default: 8192 for a model that streams)",
    "base": "the bending configuration every render starts from (an object or a file)",
    "axes": "the fields to vary, by path",
    "sample": "grid or random",
    "count": "how many renders (required with random sampling)",
    "seed": "the seed of random sampling",
    "format": "wav or flac (16-bit)",
    "threads": "torch threads per worker (1 by default)",
    "safety": "pass each render through the files' safety stage (true by default)",
}
_AXIS_KINDS = ("values", "range", "seeds", "targets")
_AXIS_FIELDS = {
    "values": ("values",),
    "range": ("range", "steps", "log", "integer"),
    "seeds": ("seeds", "start"),
    "targets": ("targets", "pattern", "method"),
}
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg")


def _show(value: Any) -> str:
    text = json.dumps(value) if _jsonable(value) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


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


@dataclass
class SweepSpec:
    """A sweep, as :func:`read_spec` checked it. ``root`` is the folder relative paths are
    read from (the specification file's own)."""

    model: str
    inputs: list[str]
    axes: list[Axis]
    base: dict[str, Any]
    root: Path
    checkpoint: str | None = None
    method: str = "forward"
    block_size: int | str | None = "auto"
    sample: str = "grid"
    count: int | None = None
    seed: int = 0
    format: str = "wav"
    threads: int = 1
    safety: bool = True
    source: dict[str, Any] = field(default_factory=dict)
    """The specification as written."""

    def input_files(self) -> list[Path]:
        """The audio files the inputs name, in order, each once (a folder gives its audio
        files, a glob its matches, each sorted)."""
        found: list[Path] = []
        for entry in self.inputs:
            path = Path(entry).expanduser()
            path = path if path.is_absolute() else self.root / path
            if any(c in entry for c in "*?["):
                matches = sorted(Path(p) for p in glob.glob(str(path), recursive=True))
                files = [p for p in matches if p.suffix.lower() in AUDIO_SUFFIXES]
                if not files:
                    raise SweepError(
                        f"inputs: {entry!r} matches no audio file ({', '.join(AUDIO_SUFFIXES)}) "
                        f"in {self.root}"
                    )
            elif path.is_dir():
                files = sorted(p for p in path.rglob("*") if p.suffix.lower() in AUDIO_SUFFIXES)
                if not files:
                    raise SweepError(f"inputs: the folder {entry!r} holds no audio file")
            elif path.is_file():
                if path.suffix.lower() not in AUDIO_SUFFIXES:
                    raise SweepError(
                        f"inputs: {entry!r} is not an audio file; give files ending in "
                        f"{', '.join(AUDIO_SUFFIXES)}, folders or globs"
                    )
                files = [path]
            else:
                raise SweepError(f"inputs: no file or folder {entry!r} (read from {self.root})")
            found += [f.resolve() for f in files if f.resolve() not in found]
        return found

    def model_reference(self) -> str:
        """The model as :func:`~torchbend.models.reference.load_model` takes it, a file's path
        made absolute."""
        path = Path(self.model)
        if path.suffix in (".ts", ".pt", ".jit") and not path.is_absolute():
            return str(self.root / path)
        return self.model

    def checkpoint_path(self) -> str | None:
        if self.checkpoint is None:
            return None
        path = Path(self.checkpoint)
        return str(path if path.is_absolute() else self.root / path)

    def fingerprint(self) -> str:
        """What decides the renders, hashed: two specifications with the same fingerprint
        render the same files (``count`` is left out: a larger count extends a sweep)."""
        kept = {k: v for k, v in self.source.items() if k not in ("count",)}
        kept["base"] = self.base
        text = json.dumps(kept, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_spec(spec: str | Path | dict[str, Any], root: str | Path | None = None) -> SweepSpec:
    """Read and check a sweep specification: a JSON or YAML file, or the object itself
    (``root``, by default the file's folder or the working directory, is where relative
    paths are read from)."""
    source = "the specification"
    if isinstance(spec, (str, Path)):
        path = Path(spec)
        source = str(path)
        data = _read_file(path)
        root = path.resolve().parent if root is None else root
    else:
        data = copy.deepcopy(spec)
    if not isinstance(data, dict):
        raise SweepError(f"{source} must be an object of fields, got {_show(data)}")
    root_path = Path.cwd() if root is None else Path(root)
    unknown = [k for k in data if k not in _FIELDS]
    if unknown:
        raise SweepError(
            f"{source}: unknown field {unknown[0]!r}{did_you_mean(str(unknown[0]), _FIELDS)}; "
            f"the fields are {', '.join(_FIELDS)}"
        )
    for required in ("model", "inputs"):
        if required not in data:
            raise SweepError(f"{source}: missing field {required!r} ({_FIELDS[required]})")
    model = _string(data, "model", source)
    method = _string(data, "method", source, "forward")
    checkpoint = data.get("checkpoint")
    if checkpoint is not None:
        checkpoint = _string(data, "checkpoint", source)
    inputs = data["inputs"]
    if isinstance(inputs, str):
        inputs = [inputs]
    if not isinstance(inputs, list) or not inputs or not all(isinstance(i, str) for i in inputs):
        raise SweepError(
            f"{source}, inputs: expected a file, folder or glob, or a non-empty list of them, "
            f"got {_show(data['inputs'])}"
        )
    block_size: int | str | None = data.get("block_size", "auto")
    if block_size not in ("auto", None) and not (_is_int(block_size) and int(block_size) > 0):
        raise SweepError(
            f"{source}, block_size: expected a positive number of samples, or null for one "
            f"pass, got {_show(block_size)}"
        )
    sample = data.get("sample", "grid")
    if sample not in SAMPLINGS:
        raise SweepError(f"{source}, sample: expected 'grid' or 'random', got {_show(sample)}")
    count = data.get("count")
    if count is not None and not (_is_int(count) and count > 0):
        raise SweepError(
            f"{source}, count: expected a positive number of renders, got {_show(count)}"
        )
    if sample == "random" and count is None:
        raise SweepError(f"{source}: random sampling needs 'count', the number of renders")
    seed = data.get("seed", 0)
    if not _is_int(seed):
        raise SweepError(f"{source}, seed: expected an integer, got {_show(seed)}")
    fmt = data.get("format", "wav")
    if fmt not in AUDIO_FORMATS:
        raise SweepError(f"{source}, format: expected 'wav' or 'flac', got {_show(fmt)}")
    threads = data.get("threads", 1)
    if not (_is_int(threads) and threads > 0):
        raise SweepError(f"{source}, threads: expected a positive integer, got {_show(threads)}")
    safety = data.get("safety", True)
    if not isinstance(safety, bool):
        raise SweepError(f"{source}, safety: expected true or false, got {_show(safety)}")
    base = _base(data.get("base"), source, root_path)
    axes_data = data.get("axes", {})
    if not isinstance(axes_data, dict):
        raise SweepError(
            f"{source}, axes: expected an object of axes by path (such as "
            f"{{'bendings.0.callback.args.std': {{'range': [0, 1], 'steps': 5}}}}), got "
            f"{_show(axes_data)}"
        )
    axes = [_axis(name, a, base, source, sample) for name, a in axes_data.items()]
    check_size(axes, 1, sample, count, source)
    normalized = {**data, "base": base}
    return SweepSpec(
        model=model,
        inputs=list(inputs),
        axes=axes,
        base=base,
        root=root_path.resolve(),
        checkpoint=checkpoint,
        method=method,
        block_size=block_size,
        sample=sample,
        count=count,
        seed=seed,
        format=fmt,
        threads=threads,
        safety=safety,
        source=normalized,
    )


def check_size(
    axes: Sequence[Axis], inputs: int, sample: str, count: int | None, source: str
) -> None:
    """Refuse a sweep of more than :data:`MAX_RENDERS` renders, counted from the sizes of its
    axes (never listed) and its ``inputs`` (a ``targets`` axis not yet resolved against the
    model counts as one value): before the model is loaded, a value bent or a job made."""
    if sample == "random":
        if count is not None and count > MAX_RENDERS:
            raise SweepError(
                f"{source}, count: {count:,} renders, more than the {MAX_RENDERS:,} a sweep "
                "may make; lower count, or split the sweep in several"
            )
        return
    sizes = {a.name: (1 if a.kind == "targets" and not a.values else a.size or 1) for a in axes}
    points = math.prod(sizes.values())
    if points * inputs <= MAX_RENDERS:
        return
    largest = max(sizes, key=lambda name: sizes[name])
    raise SweepError(
        f"{source}: the grid makes {points:,} point(s) x {inputs} input(s) = "
        f"{points * inputs:,} renders, more than the {MAX_RENDERS:,} a sweep may make; narrow "
        f"it: fewer steps or values on axis {largest!r} ({sizes[largest]:,} now), fewer axes "
        "or inputs, or sample: random with a count"
    )


def _read_file(path: Path) -> Any:
    if not path.is_file():
        raise SweepError(f"no sweep specification {str(path)!r}")
    text = path.read_text()
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as e:
            raise ImportError(
                f"{path} is YAML, which needs PyYAML: pip install 'torchbend[sweep]', or write "
                "the specification as JSON"
            ) from e
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise SweepError(f"{path} is not valid YAML: {' '.join(str(e).split())}") from None
        except RecursionError:
            raise SweepError(f"{path}: lists and mappings nest too deep to read") from None
    if path.suffix.lower() != ".json":
        raise SweepError(f"{path}: a sweep specification is a .json, .yaml or .yml file")
    return _json(text, str(path))


def _json(text: str, source: str) -> Any:
    """``text`` read as JSON by the parser bending configurations use (which refuses nesting too
    deep for Python's parser), its refusal raised as a :class:`SweepError`."""
    try:
        return parse(text, source)
    except BendingError as e:
        raise SweepError(str(e)) from None


def _string(data: dict[str, Any], key: str, source: str, default: str | None = None) -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or not value:
        raise SweepError(
            f"{source}, {key}: expected {_FIELDS[key]} as a string, got {_show(value)}"
        )
    return value


def _base(base: Any, source: str, root: Path) -> dict[str, Any]:
    """The base configuration as a dict a BendingConfig reads (format and version filled in)."""
    if base is None:
        return {"format": FORMAT, "version": VERSION, "bendings": []}
    if isinstance(base, str):
        path = Path(base) if Path(base).is_absolute() else root / base
        if not path.is_file():
            raise SweepError(f"{source}, base: no bending configuration file {base!r}")
        base = _json(path.read_text(), f"{source}, base: {base}")
    if not isinstance(base, dict):
        raise SweepError(
            f"{source}, base: expected a bending configuration (an object with 'bendings', or "
            f"a file holding one), got {_show(base)}"
        )
    base = {"format": FORMAT, "version": VERSION, "bendings": [], **base}
    from ..config import BendingConfig

    try:
        BendingConfig.from_dict(copy.deepcopy(base), source=f"{source}, base")
    except Exception as e:
        raise SweepError(str(e)) from None
    return base


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
        raise SweepError(f"axis {name!r}: {_dotted(path[:-1])} is {_show(node)}, not an object")
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
    raise SweepError(f"axis {name!r}: {_dotted(upto[:-1])} is {_show(node)}, not an object")


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


def _axis(name: Any, data: Any, base: dict[str, Any], source: str, sample: str) -> Axis:
    where = f"{source}, axis {name!r}"
    if not isinstance(name, str) or not name or any(not p for p in name.split(".")):
        raise SweepError(
            f"{where}: expected a path of fields such as 'bendings.0.callback.args.std'"
        )
    path = parse_path(name)
    container, key = locate(base, path, name)
    if not isinstance(data, dict):
        raise SweepError(
            f"{where}: expected an object with one of {', '.join(_AXIS_KINDS)}, got {_show(data)}"
        )
    kinds = [k for k in _AXIS_KINDS if k in data]
    if len(kinds) != 1:
        raise SweepError(
            f"{where}: expected exactly one of {', '.join(map(repr, _AXIS_KINDS))}, got "
            f"{sorted(data) or 'none'}"
        )
    kind = kinds[0]
    extra = [k for k in data if k not in _AXIS_FIELDS[kind]]
    if extra:
        raise SweepError(
            f"{where}: {extra[0]!r} does not go with {kind!r}; a {kind} axis takes "
            f"{', '.join(_AXIS_FIELDS[kind])}"
        )
    if kind == "values":
        values = data["values"]
        if not isinstance(values, list) or not values or not _jsonable(values):
            raise SweepError(
                f"{where}, values: expected a non-empty list of JSON values, got {_show(values)}"
            )
        return Axis(name, path, kind, values=tuple(values))
    if kind == "seeds":
        count, start = data["seeds"], data.get("start", 0)
        if not (_is_int(count) and count > 0) or not _is_int(start):
            raise SweepError(
                f"{where}: expected 'seeds' a positive count and 'start' an integer, got "
                f"{_show(count)} and {_show(start)}"
            )
        return Axis(name, path, kind, steps=count, start=start, integer=True)
    if kind == "targets":
        targets, pattern = data["targets"], data.get("pattern", ".")
        method = data.get("method")
        if targets not in TARGET_KINDS:
            raise SweepError(
                f"{where}, targets: expected one of {', '.join(TARGET_KINDS)}, got {_show(targets)}"
            )
        if not isinstance(pattern, str):
            raise SweepError(
                f"{where}, pattern: expected a regular expression, got {_show(pattern)}"
            )
        try:
            re.compile(pattern)
        except re.error as e:
            raise SweepError(
                f"{where}, pattern: {pattern!r} is not a regular expression ({e})"
            ) from None
        if method is not None and not isinstance(method, str):
            raise SweepError(f"{where}, method: expected a method's name, got {_show(method)}")
        sets_patterns = isinstance(container, list) or key == "patterns"
        if not sets_patterns and not isinstance(container.get(key), str):
            raise SweepError(
                f"{where}: a targets axis sets a bending's patterns (bendings.N.patterns) "
                "or one pattern (bendings.N.patterns.K)"
            )
        return Axis(name, path, kind, targets=targets, pattern=pattern, method=method)
    low_high, steps = data["range"], data.get("steps")
    log, integer = data.get("log", False), data.get("integer", False)
    if (
        not isinstance(low_high, list)
        or len(low_high) != 2
        or not all(_is_number(v) for v in low_high)
        or low_high[0] > low_high[1]
    ):
        raise SweepError(
            f"{where}, range: expected [low, high], two finite numbers, low <= high, got "
            f"{_show(low_high)}"
        )
    if steps is not None and not (_is_int(steps) and steps > 0):
        raise SweepError(f"{where}, steps: expected a positive integer, got {_show(steps)}")
    if not isinstance(log, bool) or not isinstance(integer, bool):
        raise SweepError(f"{where}: log and integer are true or false")
    if log and low_high[0] <= 0:
        raise SweepError(f"{where}: a log range needs low > 0, got {_show(low_high)}")
    if sample == "grid" and steps is None:
        raise SweepError(
            f"{where}: a range needs 'steps' on a grid (how many values from low to high); "
            "or sample at random"
        )
    return Axis(
        name,
        path,
        "range",
        low=float(low_high[0]),
        high=float(low_high[1]),
        steps=steps,
        log=log,
        integer=integer,
    )
