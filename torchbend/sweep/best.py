"""The renders of a sweep ranked by a measure or a descriptor effect: the most different, the
loudest, the most brightened... listed, or copied out to listen to."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ..errors import SweepError, did_you_mean
from .manifest import read_rows
from .measure import BROKEN

__all__ = ["Ranked", "best", "describe_config", "flags_of", "score"]


def describe_config(config: dict[str, Any]) -> str:
    """A bending configuration in one line: ``Noise(std=0.3, seed=3) @ ^decoder_1$; ...``."""
    parts = []
    for bending in config.get("bendings", []):
        callback = bending.get("callback", {})
        args = ", ".join(f"{k}={_value(v)}" for k, v in callback.get("args", {}).items())
        parts.append(f"{callback.get('class')}({args}) @ {' '.join(bending.get('patterns', []))}")
    return "; ".join(parts) or "no bending"


def _value(value: Any) -> str:
    if isinstance(value, dict) and "control" in value:
        return f"<{value['control']}>"
    if isinstance(value, dict) and "class" in value:
        return f"{value['class']}(...)"
    return f"{value:g}" if isinstance(value, float) else repr(value)


class Ranked(list[dict[str, Any]]):
    """The rows :func:`best` chose, in rank order, and what it left out: ``left_out`` counts
    the renders it did not rank, by reason (each flag of
    :data:`~torchbend.sweep.measure.BROKEN`, and ``failed`` for a render that failed and has
    no measures; a render with two flags counts under both)."""

    def __init__(self, rows: list[dict[str, Any]], left_out: dict[str, int], excluded: int):
        super().__init__(rows)
        self.left_out = left_out
        self.excluded = excluded
        """How many renders were left out."""


def score(row: dict[str, Any], by: str) -> float | None:
    """The measure or descriptor effect ``by`` of ``row``; ``None`` where it has none (a
    failed render, an effect that is undefined on it)."""
    value = (row.get("measures") or {}).get(by, (row.get("effects") or {}).get(by))
    return None if value is None else float(value)


def flags_of(row: dict[str, Any]) -> list[str]:
    """What makes ``row`` broken: the broken flags it raises, and ``failed`` if it failed
    (read from the flags themselves, not only the row's ``broken``)."""
    raised = [name for name in BROKEN if row.get("flags", {}).get(name)]
    if row.get("error") or (row.get("broken") and not raised):
        raised.append("failed" if row.get("error") else "broken")
    return raised


def best(
    folder: str | Path,
    by: str = "distance",
    top: int = 20,
    lowest: bool = False,
    broken: bool = False,
    copy_to: str | Path | None = None,
) -> Ranked:
    """The ``top`` renders of the sweep in ``folder`` with the highest measure ``by`` (the
    lowest with ``lowest``), or the highest descriptor effect (``by="effect_brightness"``:
    the renders made brightest; see :mod:`torchbend.sweep.effects`); with ``copy_to``, their
    audio files are copied there as ``01_<id>.wav``... in rank order.

    Broken renders (clipping, silent, with an offset or non-finite samples) are left out, and
    counted in the result's ``left_out``; with ``broken``, they are ranked too, but after every
    clean render whatever their measure: a clipped render is loud and far from the unbent
    one, and would otherwise top the lists it spoils. Failed renders have no measures and are
    never ranked; nor are renders on which the effect ``by`` is undefined (counted as
    ``undefined``).
    """
    if top < 1:
        raise SweepError(f"top must be at least 1, got {top}")
    rows = read_rows(folder)
    measures = sorted({k for r in rows for k in r.get("measures", {})})
    measures += sorted({k for r in rows for k in r.get("effects") or {}} - set(measures))
    if by not in measures:
        raise SweepError(
            f"no measure {by!r} in {folder}: the measures and effects are "
            f"{', '.join(measures) or 'none (every render failed)'}{did_you_mean(by, measures)}"
        )
    kept: list[tuple[bool, float, dict[str, Any]]] = []
    left_out: dict[str, int] = {}
    excluded = 0
    for row in rows:
        flags = flags_of(row)
        value = score(row, by)
        if value is not None and (broken or not flags):
            kept.append((bool(flags), value, row))
            continue
        excluded += 1
        for flag in flags or ["undefined"]:
            left_out[flag] = left_out.get(flag, 0) + 1
    kept.sort(key=lambda k: (k[0], k[1] * (1 if lowest else -1), k[2]["id"]))
    chosen = [row for _, _, row in kept[:top]]
    if copy_to is not None:
        target = Path(copy_to)
        if target.exists() and not target.is_dir():
            raise SweepError(f"--copy {str(target)!r} is a file; give a folder")
        target.mkdir(parents=True, exist_ok=True)
        width = len(str(len(chosen)))
        for rank, row in enumerate(chosen, 1):
            source = Path(folder) / row["audio"]
            shutil.copyfile(source, target / f"{rank:0{width}d}_{Path(row['audio']).name}")
    return Ranked(chosen, left_out, excluded)
