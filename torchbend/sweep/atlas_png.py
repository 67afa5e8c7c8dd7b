"""The atlas as a picture: the map of a sweep's renders drawn with matplotlib."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["draw_png"]


def draw_png(
    path: Path,
    axes: tuple[str, str],
    ids: list[str],
    xy: np.ndarray,
    kinds: list[str],
    colours: np.ndarray,
    colour: str | None,
    strip: float | None,
    title: str,
    diverging: bool = False,
) -> None:
    """Draw the map into ``path`` (a PNG), each render coloured by ``colour``'s value: on
    viridis, or, ``diverging``, on a scale centred on 0 and symmetric about it (blue below,
    white at 0, red above: what a descriptor effect reads)."""
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError(
            "the atlas picture needs matplotlib: pip install 'torchbend[plot]' "
            "(or call atlas(..., png=False) for the page alone)"
        ) from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kind = np.array(kinds)
    size = 36 if len(ids) <= 300 else 14
    fig, ax = plt.subplots(figsize=(10, 7.5))
    ax.axhline(0, color="#dddddd", lw=0.8, zorder=0)
    ax.axvline(0, color="#dddddd", lw=0.8, zorder=0)
    ok = kind == "ok"
    coloured = ok & np.isfinite(colours)
    if coloured.any():
        shades = colours[coloured]
        reach = float(np.abs(shades).max()) or 1.0
        low, high = (-reach, reach) if diverging else (None, None)
        points = ax.scatter(
            xy[coloured, 0],
            xy[coloured, 1],
            c=shades,
            cmap="RdBu_r" if diverging else "viridis",
            vmin=low,
            vmax=high,
            s=size,
            edgecolors="#888888" if diverging else "white",
            linewidths=0.4,
            label=f"render (colour: {colour})",
        )
        label = f"{colour}: steps, blue less, red more" if diverging else str(colour)
        fig.colorbar(points, ax=ax, fraction=0.04, pad=0.02).set_label(label)
    if (ok & ~coloured).any():
        plain = ok & ~coloured
        ax.scatter(xy[plain, 0], xy[plain, 1], c="#999999", s=size, label="render (no colour)")
    broken = kind == "broken"
    if broken.any():
        ax.scatter(
            xy[broken, 0], xy[broken, 1], marker="x", c="#d62728", s=size * 1.3, lw=1.4,
            label="broken (flagged)",
        )  # fmt: skip
    failed = kind == "failed"
    if failed.any():
        ax.scatter(
            xy[failed, 0], xy[failed, 1], marker="s", facecolors="none", edgecolors="#555555",
            s=size, label="failed (no measures)",
        )  # fmt: skip
    if strip is not None:
        ax.axvline(strip, color="#888888", ls="--", lw=0.8)
        ax.text(strip, 0.99, " failed", transform=ax.get_xaxis_transform(), va="top",
                ha="left", fontsize=8, color="#555555")  # fmt: skip
        left, right = ax.get_xlim()  # no ticks over the strip: its x means nothing
        ax.set_xticks([t for t in ax.get_xticks() if left <= t < strip])
        ax.set_xlim(left, right)
    ax.set_xlabel(axes[0])
    ax.set_ylabel(axes[1])
    counts = {k: kinds.count(k) for k in ("broken", "failed")}
    ax.set_title(
        f"{title}: {len(ids)} render{'s' * (len(ids) != 1)} "
        f"({counts['broken']} broken, {counts['failed']} failed)"
    )
    if len(ids):
        ax.legend(loc="best", fontsize=8, framealpha=0.9)
    ax.grid(True, color="#f0f0f0", lw=0.6)
    ax.set_axisbelow(True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
