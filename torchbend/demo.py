"""The demo: the shipped model bent several ways on the shipped sounds, rendered to files."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from .audio.safety import FILE_CEILING, Safety
from .bended import BendedModule
from .callbacks import BendingCallback, Mask, Noise, Scale
from .controls import BendingParameter

__all__ = ["BENDINGS", "SOUNDS", "run_demo"]

SOUNDS = Path(__file__).resolve().parents[1] / "assets" / "sounds"

BENDINGS = {
    "reconstruction": "none: the shipped model unbent (compare with the input)",
    "noisy_decoder_weight": "Noise(std=0.3 x the weight's std, seed=0) on the decoder's last "
    "weight (decoder.2, hidden layer to bands)",
    "masked_hidden_channels": "Mask(prob=0.5, dim=-2, seed=1) on the channels of the encoder's "
    "hidden layer (encoder_1)",
    "latent_sweep": "Scale(depth) on the latent (encoder_2), depth swept 1 -> -2 across the file",
}


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


def _picture(renders: dict[str, dict[str, torch.Tensor]], path: Path, rate: int) -> None:
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
    fig, axes = plt.subplots(
        len(sounds), len(variants), figsize=(3.2 * len(variants), 2.4 * len(sounds)), squeeze=False
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
            ax.set_yscale("log")
            ax.set_ylim(_LOWEST, rate / 2)
            ax.set_yticks([50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000])
            ax.yaxis.set_major_formatter(hertz)
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda f, _: ""))
            ax.tick_params(labelsize=7)
            if i == 0:
                ax.set_title(variant.replace("_", " "), fontsize=9)
            if i == len(sounds) - 1:
                ax.set_xlabel("time (s)", fontsize=8)
            if j == 0:
                ax.set_ylabel(f"{sound}\nfrequency (Hz)", fontsize=8)
    fig.suptitle(
        "torchbend demo: spectrograms of the shipped sounds: the input, the model's "
        "reconstruction (unbent) and three bendings"
    )
    fig.tight_layout(rect=(0.0, 0.0, 0.93, 1.0))
    assert image is not None
    bar = fig.colorbar(image, ax=axes, fraction=0.02, pad=0.01)
    bar.set_label("level (dB re full scale)")
    fig.savefig(path, dpi=80)
    plt.close(fig)


def run_demo(
    out: Path, seconds: float | None = None, safety: bool = True
) -> dict[str, dict[str, torch.Tensor]]:
    """Bend the shipped model on the shipped sounds and write WAVs and a picture to ``out``.

    ``seconds`` crops the sounds (for quick runs). With ``safety`` (the default: the files
    are for listening), each render goes through the safety stage of live play
    (:class:`~torchbend.audio.Safety`), and what it did is printed; without, the model's
    output is written as it is. Returns the renders by sound and bending, as written.
    """
    from . import models
    from .audio import load, save
    from .audio.stream import Stream

    out.mkdir(parents=True, exist_ok=True)
    model = models.load("tiny_rave")
    assert isinstance(model, models.TinyRave)
    model.set_streaming(True)  # read before tracing: the graph keeps the streaming branch
    rate = int(getattr(model, "sample_rate", 44100))
    ratio = int(getattr(model, "ratio", 1))
    sounds = {}
    for path in sorted(SOUNDS.glob("*.wav")):
        audio, _ = load(path, sample_rate=rate, mono=True)
        if seconds is not None:
            audio = audio[:, : int(seconds * rate)]
        sounds[path.stem] = audio[:, : audio.shape[-1] // ratio * ratio]
    if not sounds:
        raise FileNotFoundError(f"no sounds in {SOUNDS}; run scripts/make_assets.py")

    bended = BendedModule(model)
    block = 2048
    example = next(iter(sounds.values()))[None, :, :block]
    print(f"Tracing the shipped model on a {block}-sample block...", flush=True)
    bended.trace("forward", x=example)
    print("Activations of the shipped model's forward (call_module nodes):")
    bended.print_activations(op="call_module")

    depth = BendingParameter("depth", 1.0, range=(-4.0, 4.0), ramp=1)
    spread = float(bended.weight("decoder.2.weight").detach().std())
    setups: dict[str, list[tuple[BendingCallback, str]]] = {
        "reconstruction": [],
        "noisy_decoder_weight": [(Noise(std=0.3 * spread, seed=0), r"decoder\.2\.weight")],
        "masked_hidden_channels": [(Mask(prob=0.5, dim=-2, seed=1), "encoder_1$")],
        "latent_sweep": [(Scale(depth), "encoder_2$")],
    }
    renders: dict[str, dict[str, torch.Tensor]] = {name: {"input": a} for name, a in sounds.items()}
    written = []
    for name, audio in sounds.items():
        written.append(out / f"{name}_input.wav")
        save(written[-1], audio, rate)

    def sweep(i: int, count: int) -> None:
        bended.update("depth", 1.0 - 3.0 * i / max(count - 1, 1))

    timings: dict[str, float] = {}
    with torch.inference_mode():
        for label, todo in setups.items():
            bended.reset()
            for cb, pattern in todo:
                bended.bend(cb, pattern)
            for name, audio in sounds.items():
                print(f"  rendering {name} ({label.replace('_', ' ')})...", end="", flush=True)
                stage = Safety(rate, ceiling=FILE_CEILING) if safety else False
                stream = Stream(
                    bended, method="forward", block_size=block, sample_rate=rate, safety=stage
                )
                stream.reset()
                if label == "latent_sweep":
                    bended.update("depth", 1.0, ramp=False)  # no ramp left from the last sound
                    y = stream.process(audio, before_block=sweep)
                else:
                    y = stream.process(audio)
                renders[name][label] = y
                stats = stream.stats.safety
                print(f" {stats}" if stats is not None and stats.acted else "", flush=True)
                written.append(out / f"{name}_{label}.wav")
                save(written[-1], y, rate)
                timings[label] = stream.stats.realtime_factor
    _picture(renders, out / "spectrograms.png", rate)
    print("\nBendings:")
    for label, text in BENDINGS.items():
        print(f"  {label:>24}: {text}")
    print(f"\nRealtime factor of the streamed renders (block {block}):")
    for label, factor in timings.items():
        print(f"  {label:>24}: {factor:.1f}x realtime")
    print(f"\nWrote {len(written)} WAV files and spectrograms.png to {out}/")
    return renders
