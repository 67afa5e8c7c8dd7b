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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import FORMAT, VERSION, BendingConfig
from ..config.sweep_schema import SWEEP
from ..config.validate import parse, show_json, validate
from ..errors import SweepError
from .axis import Axis, read_axis

__all__ = ["MAX_RENDERS", "SweepSpec", "check_size", "read_spec"]

MAX_RENDERS = 1_000_000
"""The most renders a sweep may make. Its manifest is read whole when it resumes and mapped
whole by the atlas: a million rows is some gigabytes of memory, and already hours of renders
and hundreds of gigabytes of audio; a larger space is sampled at random, or split in sweeps."""
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg")


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
    effects: bool = True
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
    paths are read from).

    The specification is checked against :data:`~torchbend.config.sweep_schema.SWEEP_SCHEMA`
    by the validator configurations go through; then what the schema cannot say: the base
    configuration, each axis (:func:`~torchbend.sweep.axis.read_axis`) and the size of the
    space (:func:`check_size`)."""
    source = "the specification"
    if isinstance(spec, (str, Path)):
        path = Path(spec)
        source = str(path)
        data = _read_file(path)
        root = path.resolve().parent if root is None else root
    else:
        data = copy.deepcopy(spec)
    if not isinstance(data, dict):
        raise SweepError(f"{source} must be an object of fields, got {show_json(data)}")
    validate(data, SWEEP, source)
    root_path = Path.cwd() if root is None else Path(root)
    base = _base(data.get("base"), source, root_path)
    sample = data.get("sample", "grid")
    axes = [read_axis(name, a, base, source, sample) for name, a in data.get("axes", {}).items()]
    check_size(axes, 1, sample, data.get("count"), source)
    inputs = data["inputs"]
    fields = {k: v for k, v in data.items() if k not in ("inputs", "axes", "base")}
    return SweepSpec(
        **fields,
        inputs=[inputs] if isinstance(inputs, str) else list(inputs),
        axes=axes,
        base=base,
        root=root_path.resolve(),
        source={**data, "base": base},
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
    return parse(text, str(path), SweepError)


def _base(base: Any, source: str, root: Path) -> dict[str, Any]:
    """The base configuration as a dict a BendingConfig reads (format and version filled in)."""
    if base is None:
        return {"format": FORMAT, "version": VERSION, "bendings": []}
    if isinstance(base, str):
        path = Path(base) if Path(base).is_absolute() else root / base
        if not path.is_file():
            raise SweepError(f"{source}, base: no bending configuration file {base!r}")
        base = parse(path.read_text(), f"{source}, base: {base}", SweepError)
    if not isinstance(base, dict):
        raise SweepError(
            f"{source}, base: expected a bending configuration (an object with 'bendings', or "
            f"a file holding one), got {show_json(base)}"
        )
    base = {"format": FORMAT, "version": VERSION, "bendings": [], **base}
    try:
        BendingConfig.from_dict(copy.deepcopy(base), source=f"{source}, base")
    except Exception as e:
        raise SweepError(str(e)) from None
    return base
