"""The demo: the shipped model bent several ways on the shipped sounds, rendered to files."""

from __future__ import annotations

from pathlib import Path

import torch

from .bended import BendedModule
from .callbacks import BendingCallback, Mask, Noise, Scale
from .controls import BendingParameter

__all__ = ["BENDINGS", "SOUNDS", "run_demo"]

SOUNDS = Path(__file__).resolve().parents[1] / "assets" / "sounds"

BENDINGS = {
    "noisy_decoder_weight": "Noise(std=0.3, seed=0) on the weight of decoder block 5",
    "masked_hidden_channels": "Mask(prob=0.5, dim=-2, seed=1) on the channels of encoder_8",
    "latent_sweep": "Scale(depth) on the latent (encoder_11), depth swept 1 -> -2 across the file",
}


def _spectrogram(audio: torch.Tensor) -> torch.Tensor:
    window = torch.hann_window(1024)
    spec = torch.stft(audio.flatten(), 1024, 256, window=window, return_complex=True).abs()
    return 20 * torch.log10(spec + 1e-5)


def _picture(renders: dict[str, dict[str, torch.Tensor]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sounds, variants = list(renders), list(next(iter(renders.values())))
    fig, axes = plt.subplots(
        len(sounds), len(variants), figsize=(3.2 * len(variants), 2.4 * len(sounds)), squeeze=False
    )
    for i, sound in enumerate(sounds):
        for j, variant in enumerate(variants):
            ax = axes[i][j]
            ax.imshow(
                _spectrogram(renders[sound][variant]).numpy(),
                origin="lower",
                aspect="auto",
                vmin=-80,
                vmax=20,
                cmap="magma",
            )
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                ax.set_title(variant.replace("_", " "), fontsize=9)
            if j == 0:
                ax.set_ylabel(sound, fontsize=9)
    fig.suptitle("torchbend demo: spectrograms of the shipped sounds, original and bended")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def run_demo(out: Path, seconds: float | None = None) -> dict[str, dict[str, torch.Tensor]]:
    """Bend the shipped model on the shipped sounds and write WAVs and a picture to ``out``.

    ``seconds`` crops the sounds (for quick runs). Returns the renders by sound and bending.
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
    bended.trace("forward", x=example)
    print("Activations of the shipped model's forward (call_module nodes):")
    bended.print_activations(op="call_module")

    depth = BendingParameter("depth", 1.0, range=(-4.0, 4.0), ramp=1)
    setups: dict[str, list[tuple[BendingCallback, str]]] = {
        "original": [],
        "noisy_decoder_weight": [(Noise(std=0.3, seed=0), r"decoder\.5\.weight")],
        "masked_hidden_channels": [(Mask(prob=0.5, dim=-2, seed=1), "encoder_8$")],
        "latent_sweep": [(Scale(depth), "encoder_11$")],
    }
    renders: dict[str, dict[str, torch.Tensor]] = {name: {"input": a} for name, a in sounds.items()}

    def sweep(i: int, count: int) -> None:
        bended.update("depth", 1.0 - 3.0 * i / max(count - 1, 1))

    timings: dict[str, float] = {}
    with torch.inference_mode():
        for label, todo in setups.items():
            bended.reset()
            for cb, pattern in todo:
                bended.bend(cb, pattern)
            for name, audio in sounds.items():
                stream = Stream(bended, method="forward", block_size=block, sample_rate=rate)
                stream.reset()
                if label == "latent_sweep":
                    y = stream.process(audio, before_block=sweep)
                    bended.update("depth", 1.0)
                else:
                    y = stream.process(audio)
                renders[name][label] = y
                save(out / f"{name}_{label}.wav", y, rate)
                timings[label] = stream.stats.realtime_factor
    _picture(renders, out / "spectrograms.png")
    print("\nBendings:")
    for label, text in BENDINGS.items():
        print(f"  {label:>24}: {text}")
    print("\nRealtime factor of the streamed renders (block 2048):")
    for label, factor in timings.items():
        print(f"  {label:>24}: {factor:.0f}x realtime")
    count = sum(len(v) for v in renders.values())
    print(f"\nWrote {count} WAV files and spectrograms.png to {out}/")
    return renders
