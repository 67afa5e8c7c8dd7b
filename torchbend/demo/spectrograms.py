"""The demo's picture: spectrograms of every render on a logarithmic frequency axis."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import torch

__all__ = ["picture"]

_FFT, _HOP = 4096, 512
"""Long frames: the picture's frequency axis is logarithmic, and its bass needs fine bins."""
_LOWEST = 30.0
"""The lowest frequency the picture shows, in Hz."""
_ROWS = 160
"""Rows of the picture's frequency axis, spaced evenly in log frequency (about 16 an octave)."""


def _spectrogram(audio: torch.Tensor) -> torch.Tensor:
    """Magnitude in dB re full scale (a full-scale sine reads 0 dB), ``[bins, frames]``."""
    window = torch.hann_window(_FFT)
    spec = torch.stft(audio.flatten(), _FFT, _HOP, window=window, return_complex=True).abs()
    return 20 * torch.log10(spec * 2 / window.sum() + 1e-5)


def picture(
    renders: Mapping[str, Mapping[str, torch.Tensor]], path: Path, rate: int, title: str
) -> None:
    """Draw each render's spectrogram (a row a sound, a column a variant) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    sounds, variants = list(renders), list(next(iter(renders.values())))
    # A logarithmic frequency axis, as we hear (an octave is as tall at 50 Hz as at 5 kHz):
    # a linear one squeezes bass and pad into its bottom. Each row reads the STFT bin nearest
    # its centre (rows are finer than the bins below ~350 Hz, coarser above), so that the
    # mesh has _ROWS rows, not _FFT / 2: drawing that many takes half a minute.
    edges = torch.logspace(math.log10(_LOWEST), math.log10(rate / 2), _ROWS + 1)
    centres = (edges[:-1] * edges[1:]).sqrt()
    nearest = (centres * _FFT / rate).round().long()
    hertz = FuncFormatter(lambda f, _: f"{f / 1000:g}k" if f >= 1000 else f"{f:g}")
    # Shared axes: the ticks are laid out once, not once a panel (most of the drawing time).
    fig, axes = plt.subplots(
        len(sounds),
        len(variants),
        figsize=(2.6 * len(variants), 2.2 * len(sounds)),
        squeeze=False,
        sharex=True,
        sharey=True,
    )
    image = None
    for i, sound in enumerate(sounds):
        for j, variant in enumerate(variants):
            ax = axes[i][j]
            spec = _spectrogram(renders[sound][variant])[nearest]
            times = torch.arange(spec.shape[-1] + 1) * _HOP / rate  # the frames' edges
            image = ax.pcolormesh(
                times.numpy(),
                edges.numpy(),
                spec.numpy(),
                shading="flat",
                vmin=-100,
                vmax=0,
                cmap="magma",
                rasterized=True,
            )
            ax.tick_params(labelsize=7)
            if i == 0:
                ax.set_title(variant.replace("_", " "), fontsize=9)
            if i == len(sounds) - 1:
                ax.set_xlabel("time (s)", fontsize=8)
            if j == 0:
                ax.set_ylabel(f"{sound}\nfrequency (Hz)", fontsize=8)
    first = axes[0][0]
    first.set_yscale("log")
    first.set_ylim(_LOWEST, rate / 2)
    first.set_yticks([50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000])
    first.yaxis.set_major_formatter(hertz)
    first.yaxis.set_minor_formatter(FuncFormatter(lambda f, _: ""))
    for ax in axes.flat:
        ax.label_outer()
    fig.suptitle(title)
    fig.subplots_adjust(left=0.05, right=0.93, bottom=0.07, top=0.9, wspace=0.08, hspace=0.12)
    assert image is not None
    bar = fig.colorbar(image, ax=axes, fraction=0.02, pad=0.01)
    bar.set_label("level (dB re full scale)")
    fig.savefig(path, dpi=80)
    plt.close(fig)
