"""A sweep's space resolved against its model: the axes' values, the points they make, the
jobs over the inputs, and the check of every value on the model before any render."""

from __future__ import annotations

import copy
import json
import math
import random
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..audio.render import STREAM_BLOCK, streams
from ..config import BendingConfig
from ..errors import SweepError
from .axis import Axis, locate
from .effects import describe
from .jobs import Job, Setup, load_bended, run_audio, with_threads
from .spec import SweepSpec, check_size, read_spec

__all__ = ["Sweep", "load"]


@dataclass
class Sweep:
    """A specification with its model loaded: the axes resolved against the model, the inputs
    read, and the jobs the space makes."""

    spec: SweepSpec
    axes: list[Axis]
    inputs: list[Path]
    audio: list[torch.Tensor]
    sample_rate: int
    block_size: int | None
    bended: Any

    @property
    def points(self) -> int:
        if self.spec.sample == "random":
            assert self.spec.count is not None
            return math.ceil(self.spec.count / len(self.inputs))
        return math.prod(a.size or 1 for a in self.axes)

    @property
    def renders(self) -> int:
        if self.spec.sample == "random":
            assert self.spec.count is not None
            return self.spec.count
        return self.points * len(self.inputs)

    def values(self, point: int) -> dict[str, Any]:
        """The value of each axis at ``point``."""
        if self.spec.sample == "random":
            rng = random.Random(f"torchbend-sweep:{self.spec.seed}:{point}")
            return {a.name: a.draw(rng) for a in self.axes}
        values: dict[str, Any] = {}
        rest = point
        for axis in reversed(self.axes):  # the last axis varies fastest
            rest, i = divmod(rest, axis.size or 1)
            values[axis.name] = axis.value(i)
        return {a.name: values[a.name] for a in self.axes}

    def config(self, values: dict[str, Any]) -> dict[str, Any]:
        """The base configuration with each axis set to its value, as a row holds it."""
        config = copy.deepcopy(self.spec.base)
        for axis in self.axes:
            container, key = locate(config, axis.path, axis.name)
            value = values[axis.name]
            if axis.kind == "targets":
                pattern = "^" + re.escape(value) + "$"
                value = pattern if isinstance(container[key], str) else [pattern]
            container[key] = copy.deepcopy(value)
        return config

    def keys(self) -> Iterator[tuple[str, int, int]]:
        """Every render's id, point and input, in the sweep's order: point by point, each
        input in turn (computed one at a time: a million renders are never listed)."""
        width = max(5, len(str(self.points - 1)))
        count = 0
        for point in range(self.points):
            for i, path in enumerate(self.inputs):
                if count == self.renders:
                    return
                count += 1
                yield f"{point:0{width}d}-{i:02d}-{path.stem}", point, i

    def jobs(self, keep: Callable[[str], bool] = lambda key: True) -> Iterator[Job]:
        """Every render whose id ``keep`` keeps, in the order of :meth:`keys`."""
        made: tuple[int, dict[str, Any], dict[str, Any]] | None = None
        for key, point, i in self.keys():
            if not keep(key):
                continue
            if made is None or made[0] != point:
                values = self.values(point)
                made = (point, values, self.config(values))
            _, values, config = made
            path = self.inputs[i]
            yield Job(
                id=key,
                point=point,
                input_index=i,
                input=self._shown(path),
                audio=f"renders/{key}.{self.spec.format}",
                axes=values,
                config=config,
                seed=zlib.crc32(f"{self.spec.seed}:{key}".encode()),
            )

    def _shown(self, path: Path) -> str:
        """An input as rows name it: relative to the specification's folder if the
        specification names its inputs so, else absolute."""
        if any(Path(entry).expanduser().is_absolute() for entry in self.spec.inputs):
            return str(path)
        try:
            return str(path.relative_to(self.spec.root))
        except ValueError:
            return str(path)

    def check(self) -> None:
        """Refuse a space with a value the bending refuses, before any render: the first point,
        then each value of each axis (both ends of a range drawn at random) in it, applied to
        the model once each."""
        first = self.values(0)
        tried: list[tuple[str, dict[str, Any]]] = [("the first point", first)]
        for axis in self.axes:
            tried += [
                (f"axis {axis.name!r} = {json.dumps(v)}", {**first, axis.name: v})
                for v in axis.probes()
            ]
        seen: set[str] = set()
        for label, values in tried:
            config = self.config(values)
            text = json.dumps(config, sort_keys=True)
            if text in seen:
                continue
            seen.add(text)
            try:
                self.bended.bend(BendingConfig.from_dict(config, source=label))
            except Exception as e:
                raise SweepError(
                    f"{label}: the bending fails: {' '.join(str(e).split())}"
                ) from None
            finally:
                self.bended.reset()

    def setup(self, unbent: list[torch.Tensor]) -> Setup:
        """What the workers need, with the unbent renders ``unbent`` of the inputs (and, when
        the sweep takes effects, their descriptors, read here once for every worker)."""
        described = None
        if self.spec.effects:
            with with_threads(self.spec.threads):
                described = tuple(describe(u, self.sample_rate) for u in unbent)
        return Setup(
            model=self.spec.model_reference(),
            checkpoint=self.spec.checkpoint_path(),
            method=self.spec.method,
            block_size=self.block_size,
            sample_rate=self.sample_rate,
            threads=self.spec.threads,
            safety=self.spec.safety,
            format=self.spec.format,
            inputs=tuple(a.numpy() for a in self.audio),
            unbent=tuple(u.numpy() for u in unbent),
            described=described,
        )

    def render_unbent(self) -> list[torch.Tensor]:
        """Each input through the unbent model, as the workers render."""
        setup = self.setup([])
        with with_threads(self.spec.threads), torch.inference_mode():
            return [run_audio(self.bended, setup, a)[0].contiguous() for a in self.audio]


def load(spec: str | Path | dict[str, Any] | SweepSpec) -> Sweep:
    """The sweep ``spec`` describes, its model loaded and its space checked against it."""
    from ..audio import load as load_audio

    spec = spec if isinstance(spec, SweepSpec) else read_spec(spec)
    inputs = spec.input_files()
    check_size(spec.axes, len(inputs), spec.sample, spec.count, "the sweep")
    bended = load_bended(spec.model_reference(), spec.checkpoint_path(), spec.method, None)
    block_size: int | None
    if spec.block_size == "auto":
        block_size = STREAM_BLOCK if streams(bended.module) else None
    else:
        block_size = spec.block_size  # type: ignore[assignment]
    sample_rate = int(getattr(bended.module, "sample_rate", 44100))
    audio = [load_audio(p, sample_rate=sample_rate, mono=True)[0].contiguous() for p in inputs]
    axes = [_resolve(a, bended, spec.method) for a in spec.axes]
    check_size(axes, len(inputs), spec.sample, spec.count, "the sweep")
    sweep = Sweep(spec, axes, inputs, audio, sample_rate, block_size, bended)
    if spec.sample == "grid" and spec.count is not None and spec.count != sweep.renders:
        raise SweepError(
            f"count is {spec.count}, but the grid makes {sweep.points} point(s) x "
            f"{len(inputs)} input(s) = {sweep.renders} renders: remove count, set it to "
            f"{sweep.renders}, or sample at random"
        )
    sweep.check()
    return sweep


def _resolve(axis: Axis, bended: Any, method: str) -> Axis:
    """A ``targets`` axis with the model's names that its pattern matches."""
    if axis.kind != "targets":
        return axis
    fn = axis.method or method
    names: list[str] = []
    if axis.targets in ("activations", "all"):
        try:
            names += bended.activation_names(fn)
        except Exception as e:
            raise SweepError(f"axis {axis.name!r}: no activations of {fn!r}: {e}") from None
    if axis.targets in ("weights", "all"):
        names += bended.weight_names
    pattern = re.compile(axis.pattern)
    kept = [n for n in names if pattern.search(n)]
    if not kept:
        raise SweepError(
            f"axis {axis.name!r}: pattern {axis.pattern!r} matches none of the {len(names)} "
            f"{axis.targets} of {fn} (such as {', '.join(names[:5])}); see `torchbend inspect`"
        )
    return axis.with_targets(kept)
