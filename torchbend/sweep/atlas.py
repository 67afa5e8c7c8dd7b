"""The atlas: a 2-D map of a sweep's renders, as a PNG and as a self-contained HTML page.

The map is a principal component analysis (PCA) of the renders' measures, each standardised
(z-scored) over the renders. PCA rather than t-SNE or UMAP: it is deterministic (the same
manifest gives the same map, byte for byte), needs nothing beyond numpy, and its two axes are
linear mixtures of the measures, so they can be named by their loadings
(``PC1 (41 %): loudness_lufs +0.61, rms_dbfs +0.58``) where a nonlinear embedding has axes
with no meaning. Renders that failed (no measures) are not fed to the PCA; they are lined up
in a strip to the right of the map, where they can still be inspected.

The renders are coloured by one measure, or by one descriptor effect (``effect_brightness``...,
see :mod:`torchbend.sweep.effects`: the effects colour the map but do not place it). An effect
is drawn on a diverging scale centred on 0, symmetric about it: blue for less of the
descriptor than the unbent render, white for no change, red for more.

The HTML page works from disk (``file://``) with no network: its script, style and data are
inline. It lives in the sweep's folder, so the renders' ``audio`` paths, relative to that
folder, play as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SweepError, did_you_mean
from .atlas_html import page, page_data
from .atlas_map import measure_names, number, pca, strip
from .atlas_png import draw_png

__all__ = ["Atlas", "atlas"]


@dataclass
class Atlas:
    """What :func:`atlas` made: the files it wrote and the map behind them."""

    png: Path | None
    """The picture, ``out_dir/atlas.png``; ``None`` when not asked for."""
    html: Path | None
    """The page, ``out_dir/atlas.html``; ``None`` when not asked for."""
    coords: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Each render's position, by row id; failed renders sit in the strip right of the map."""
    explained: tuple[float, float] = (0.0, 0.0)
    """The fraction of the standardised measures' variance each axis explains."""
    loadings: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Each measure's weight on each axis (unit-norm components); constant measures are left
    out."""

    def axis_label(self, axis: int) -> str:
        """The name of axis 0 or 1: its share of variance and its two largest loadings."""
        weights = sorted(self.loadings.items(), key=lambda kv: -abs(kv[1][axis]))
        terms = ", ".join(f"{name} {w[axis]:+.2f}" for name, w in weights[:2] if w[axis] != 0)
        head = f"PC{axis + 1} ({100 * self.explained[axis]:.0f} %)"
        return f"{head}: {terms}" if terms else f"{head}: no varying measure"


def atlas(
    rows: list[dict[str, Any]],
    out_dir: str | Path,
    *,
    png: bool = True,
    html: bool = True,
    title: str = "torchbend sweep",
    colour: str | None = None,
) -> Atlas:
    """Map a sweep's renders in 2-D and write the map as a picture and as an interactive page.

    Args:
        rows (list[dict]): the manifest's rows (``manifest.jsonl``), one per render.
        out_dir (str | Path): the sweep's folder, which the rows' ``audio`` paths are relative
            to; ``atlas.png`` and ``atlas.html`` are written there.
        png (bool): write ``atlas.png`` (needs matplotlib: ``pip install 'torchbend[plot]'``).
        html (bool): write ``atlas.html``, a page to hover, filter and play the renders.
        title (str): the title of both.
        colour (str | None): what colours the renders: a measure (``"distance"``, the
            default, or the first measure when the rows lack it) or a descriptor effect
            (``"effect_brightness"``: blue less, red more than the unbent render). The page
            starts coloured by it and can switch to any other.

    Returns:
        Atlas: the files written, each row's position, and what the axes mean.

    Raises:
        SweepError: ``colour`` is neither a measure nor an effect of any row.

    Example:
        >>> import tempfile
        >>> rows = [{"id": f"r{i}", "measures": {"rms_dbfs": -20.0 + i, "flatness": i % 2}}
        ...         for i in range(4)]
        >>> result = atlas(rows, tempfile.mkdtemp(), png=False)
        >>> result.html.name, len(result.coords), round(sum(result.explained), 6)
        ('atlas.html', 4, 1.0)
    """
    out = Path(out_dir)
    ids = [str(row.get("id", i)) for i, row in enumerate(rows)]
    names = measure_names(rows)
    values = np.array(
        [[number((row.get("measures") or {}).get(n)) for n in names] for row in rows],
        dtype=float,
    ).reshape(len(rows), len(names))
    effect_names = measure_names(rows, "effects")
    shades = np.array(
        [[number((row.get("effects") or {}).get(n)) for n in effect_names] for row in rows],
        dtype=float,
    ).reshape(len(rows), len(effect_names))
    usable = np.isfinite(values).any(axis=1)
    positions, explained, loadings = pca(values[usable], names)
    xy = np.zeros((len(rows), 2))
    xy[usable] = positions
    xy[~usable], border = strip(positions, int((~usable).sum()))
    result = Atlas(
        png=None,
        html=None,
        coords={i: (float(x), float(y)) for i, (x, y) in zip(ids, xy)},
        explained=explained,
        loadings=loadings,
    )
    kinds = [
        "failed" if not ok else "broken" if row.get("broken") else "ok"
        for row, ok in zip(rows, usable)
    ]
    channels = names + effect_names
    if colour is None:
        colour = "distance" if "distance" in names else names[0] if names else None
    elif colour not in channels:
        raise SweepError(
            f"cannot colour the atlas by {colour!r}: no render has it; the measures and effects "
            f"are {', '.join(channels) or 'none (every render failed)'}"
            f"{did_you_mean(colour, channels)}"
        )
    every = np.concatenate([values, shades], axis=1)
    axes = (result.axis_label(0), result.axis_label(1))
    if png or html:
        out.mkdir(parents=True, exist_ok=True)
    if png:
        result.png = out / "atlas.png"
        colours = every[:, channels.index(colour)] if colour else np.full(len(rows), np.nan)
        diverging = colour in effect_names
        draw_png(result.png, axes, ids, xy, kinds, colours, colour, border, title, diverging)
    if html:
        result.html = out / "atlas.html"
        data = page_data(
            rows, out, axes, explained, loadings, ids, xy, kinds, every, channels, colour, border,
            title, effect_names,
        )  # fmt: skip
        result.html.write_text(page(data, title), encoding="utf-8")
    return result
