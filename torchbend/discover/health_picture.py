"""The health probe as a picture: nodes against growth, dead channels and NaN/Inf, drawn with
matplotlib as the atlas is."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .health_stats import HealthRow, first_problem

__all__ = ["draw_health"]

GROWTH_SPAN_DB = 60.0
"""Growth is coloured from -60 dB (blue) to +60 dB (red); beyond, it takes the end colour."""


def draw_health(rows: Sequence[HealthRow], path: Path, title: str) -> None:
    """Draw ``rows`` into ``path`` (a PNG): one row a node, in graph order, and three
    columns: growth in dB, the bent run's dead-channel fraction and its NaN/Inf fraction;
    cells that do not apply are grey, the first problem's name is red."""
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError(
            "the health picture needs matplotlib: pip install 'torchbend[plot]' "
            "(report.table() and report.to_records() need nothing more)"
        ) from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    decibels, dead, broken = (np.full(len(rows), np.nan) for _ in range(3))
    for i, row in enumerate(rows):
        if row.growth_db is not None:
            decibels[i] = row.growth_db
        if row.bended is not None:
            if row.bended.dead is not None:
                dead[i] = row.bended.dead
            broken[i] = (row.bended.nans + row.bended.infs) / max(row.bended.size, 1)
    columns = [
        ("growth dB", decibels, "RdBu_r", -GROWTH_SPAN_DB, GROWTH_SPAN_DB),
        ("dead (bent)", dead, "Greys", 0.0, 1.0),
        ("NaN/Inf (bent)", broken, "Reds", 0.0, 1.0),
    ]
    height = max(3.0, 0.28 * len(rows) + 1.6)
    fig, axes = plt.subplots(1, 3, figsize=(9, height), sharey=True)
    for ax, (label, values, cmap, low, high) in zip(axes, columns):
        colours = plt.get_cmap(cmap).with_extremes(bad="#cccccc")
        shown = np.clip(values, low, high)  # -inf dB (silenced) takes the end colour
        image = ax.imshow(
            np.ma.masked_invalid(shown)[:, None], aspect="auto", cmap=colours, vmin=low, vmax=high
        )
        ax.set_xticks([0], [label])
        ax.xaxis.tick_top()
        fig.colorbar(image, ax=ax, orientation="horizontal", fraction=0.05, pad=0.02)
        if len(rows) <= 80:
            for i, v in enumerate(values):
                if not math.isnan(v):
                    text = f"{v:+.0f}" if label == "growth dB" else f"{v:.2f}"
                    dark = abs(shown[i] - low) / (high - low) > 0.6 if low == 0 else abs(v) > 40
                    colour = "white" if dark else "black"
                    ax.text(0, i, text, ha="center", va="center", fontsize=7, color=colour)
    axes[0].set_yticks(range(len(rows)), [row.node for row in rows], fontsize=8)
    first = first_problem(rows)
    for tick, row in zip(axes[0].get_yticklabels(), rows):
        if row is first:
            tick.set_color("#d62728")
            tick.set_fontweight("bold")
    found = f"first problem: {first.node} ({first.problem})" if first else "no problem"
    fig.suptitle(f"{title}\n{found}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
