"""The renders of a sweep ranked by a measure: the most different, the loudest, the
brightest... listed, or copied out to listen to."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ..errors import SweepError, did_you_mean
from .manifest import read_rows

__all__ = ["best", "describe_config"]


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


def best(
    folder: str | Path,
    by: str = "distance",
    top: int = 20,
    lowest: bool = False,
    broken: bool = False,
    copy_to: str | Path | None = None,
) -> list[dict[str, Any]]:
    """The ``top`` renders of the sweep in ``folder`` with the highest measure ``by`` (the
    lowest with ``lowest``), leaving out broken and failed renders unless ``broken``; with
    ``copy_to``, their audio files are copied there as ``01_<id>.wav``... in rank order."""
    if top < 1:
        raise SweepError(f"top must be at least 1, got {top}")
    rows = read_rows(folder)
    measures = sorted({k for r in rows for k in r.get("measures", {})})
    if by not in measures:
        raise SweepError(
            f"no measure {by!r} in {folder}: the measures are "
            f"{', '.join(measures) or 'none (every render failed)'}{did_you_mean(by, measures)}"
        )
    kept = [r for r in rows if by in r.get("measures", {}) and (broken or not r.get("broken"))]
    kept.sort(key=lambda r: (r["measures"][by] if lowest else -r["measures"][by], r["id"]))
    chosen = kept[:top]
    if copy_to is not None:
        target = Path(copy_to)
        if target.exists() and not target.is_dir():
            raise SweepError(f"--copy {str(target)!r} is a file; give a folder")
        target.mkdir(parents=True, exist_ok=True)
        width = len(str(len(chosen)))
        for rank, row in enumerate(chosen, 1):
            source = Path(folder) / row["audio"]
            shutil.copyfile(source, target / f"{rank:0{width}d}_{Path(row['audio']).name}")
    return chosen
