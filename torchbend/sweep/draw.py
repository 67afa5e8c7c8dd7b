"""The atlas of a sweep's folder: the rows of its manifest mapped, written next to them."""

from __future__ import annotations

from pathlib import Path

from .atlas import Atlas, atlas
from .manifest import read_rows

__all__ = ["draw_map"]


def draw_map(
    folder: str | Path, png: bool = True, html: bool = True, colour: str | None = None
) -> Atlas:
    """Map the renders of the sweep in ``folder``: ``atlas.png`` and ``atlas.html`` written
    there (see :func:`torchbend.sweep.atlas.atlas`); what ``torchbend sweep map`` does.

    Args:
        folder (str | Path): the sweep's folder (as ``tb.sweep.run`` writes it).
        png (bool): write ``atlas.png`` (needs matplotlib: ``pip install 'torchbend[plot]'``).
        html (bool): write ``atlas.html``, a page to hover, filter and play the renders.
        colour (str | None): the measure or descriptor effect that colours the renders
            (``"effect_brightness"``...; by default ``"distance"``).

    Returns:
        Atlas: the files written, each render's position, and what the axes mean.
    """
    return atlas(read_rows(folder), folder, png=png, html=html, colour=colour)
