"""The atlas's map: the renders' measures, z-scored, projected on their first two principal
components, and a strip beside the map for the renders that failed."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["measure_names", "number", "pca", "strip"]

_CONSTANT = 1e-12
"""A measure whose spread is below this fraction of its magnitude counts as constant: its
z-scores would be rounding noise blown up to unit variance."""


def number(value: Any) -> float:
    """``value`` as a finite float, or NaN (a bool, a string, an infinity are no measure)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value) if math.isfinite(value) else math.nan


def measure_names(rows: list[dict[str, Any]], field: str = "measures") -> list[str]:
    """The numeric measures (or, with ``field="effects"``, the descriptor effects) of any
    row, in order of first appearance."""
    names: dict[str, None] = {}
    for row in rows:
        for name, value in (row.get(field) or {}).items():
            if not math.isnan(number(value)):
                names.setdefault(str(name), None)
    return list(names)


def pca(
    values: np.ndarray, names: list[str]
) -> tuple[np.ndarray, tuple[float, float], dict[str, tuple[float, float]]]:
    """The first two principal components of the z-scored measures, with fixed signs.

    A measure a row lacks takes the measure's mean (a z-score of 0: no pull either way). Each
    component's sign makes its largest loading positive, so the map never flips at random.
    """
    coords = np.zeros((values.shape[0], 2))
    if values.size == 0:
        return coords, (0.0, 0.0), {}
    present = np.isfinite(values)
    counts = present.sum(axis=0)
    means = np.where(present, values, 0.0).sum(axis=0) / np.maximum(counts, 1)
    filled = np.where(present, values, means)
    spread = filled.max(axis=0) - filled.min(axis=0)
    scale = np.maximum(np.abs(filled).max(axis=0), 1.0)
    keep = spread > _CONSTANT * scale
    if not keep.any():
        return coords, (0.0, 0.0), {}
    kept = filled[:, keep]
    z = (kept - kept.mean(axis=0)) / kept.std(axis=0)
    _, s, vt = np.linalg.svd(z, full_matrices=False)
    variance = s**2
    explained = [0.0, 0.0]
    components = np.zeros((2, z.shape[1]))
    for c in range(min(2, len(s))):
        if s[c] <= _CONSTANT * s[0]:
            break  # the rows span fewer dimensions: this direction is arbitrary
        component = vt[c] * (1.0 if vt[c][np.argmax(np.abs(vt[c]))] > 0 else -1.0)
        components[c] = component
        explained[c] = float(variance[c] / variance.sum())
    coords = z @ components.T
    kept_names = [n for n, k in zip(names, keep) if k]
    loadings = {
        n: (float(components[0, j]), float(components[1, j])) for j, n in enumerate(kept_names)
    }
    return coords, (explained[0], explained[1]), loadings


def strip(positions: np.ndarray, count: int) -> tuple[np.ndarray, float | None]:
    """Places for ``count`` failed renders: columns right of the map, and the x of the border."""
    if count == 0:
        return np.zeros((0, 2)), None
    if len(positions):
        (x0, y0), (x1, y1) = positions.min(axis=0), positions.max(axis=0)
    else:
        x0, y0, x1, y1 = -1.0, -1.0, 1.0, 1.0
    width = x1 - x0 if x1 > x0 else 1.0
    if y1 <= y0:
        y0, y1 = y0 - 1.0, y1 + 1.0
    per_column = max(40, math.ceil(count / 4))  # at most four columns, however many failed
    tall = min(count, per_column)
    place = np.zeros((count, 2))
    for i in range(count):
        column, row = divmod(i, per_column)
        place[i, 0] = x1 + width * (0.1 + 0.035 * column)
        place[i, 1] = y1 - (y1 - y0) * (row / (tall - 1) if tall > 1 else 0.5)
    return place, float(x1 + width * 0.06)
