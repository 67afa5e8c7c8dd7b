"""A ranking as a picture: nodes x descriptors, and the channels of each node."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..audio.perceptual import NAMES

__all__ = ["draw_ranking"]


def draw_ranking(
    nodes: list[str], best: np.ndarray, channels: np.ndarray, title: str, path: str | Path
) -> None:
    """Write into ``path`` (PNG), for ``nodes``: on the left, each node's best channel's
    change of every descriptor (``best``, ``[nodes, descriptors]``, sizes in steps per probe);
    on the right, the ranked descriptor's signed change of every channel of each node
    (``channels``, ``[nodes, channels]``, NaN past a node's last channel)."""
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError(
            "the ranking's picture needs matplotlib: pip install 'torchbend[plot]'"
        ) from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    height = 1.5 + 0.35 * len(nodes)
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(14, height), gridspec_kw={"width_ratios": [1, 2]}
    )
    shown = left.imshow(best, aspect="auto", cmap="magma")
    left.set_xticks(range(len(NAMES)), NAMES, rotation=45, ha="right")
    left.set_yticks(range(len(nodes)), nodes)
    left.set_title("best channel of each node: |change| (steps)")
    fig.colorbar(shown, ax=left, fraction=0.05)
    limit = float(np.nanmax(np.abs(channels))) if np.isfinite(channels).any() else 1.0
    signed = right.imshow(channels, aspect="auto", cmap="coolwarm", vmin=-limit, vmax=limit)
    right.set_yticks(range(len(nodes)), nodes)
    right.set_xlabel("channel")
    right.set_title(title)
    fig.colorbar(signed, ax=right, fraction=0.05)
    fig.tight_layout()
    fig.savefig(str(path), dpi=110)
    plt.close(fig)
