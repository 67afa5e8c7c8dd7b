"""Tutorial: pull the latent out of a sound, operate on it, decode it; morph with Capture.

Run: python examples/05_capture_and_latent_surgery.py [--out DIR] [--smoke]

With TinyRave (``torchbend.models.load()``): ``get_activations`` runs the model only as far
as the latent of the drum loop and of the bass line; we edit the latents (swap two halves of
the channels, average all channels, mix the two sounds' latents) and ``from_activations``
runs the rest of the model from the edited latent (``swap.wav``, ``average.wav``,
``mix.wav``). Then a ``tb.Capture`` records the bass's latent as the model runs, and
``tb.InterpolationFromCapture`` pulls the drums' latent towards it, on a knob
(``morph_25.wav`` ... ``morph_100.wav``). ``latents.png`` shows the latents. Files go to DIR
(default ``out/examples/05``). ``--smoke`` crops the sounds to one second.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

import torchbend as tb
from torchbend.audio import load as load_audio
from torchbend.audio import save
from torchbend.audio.safety import FILE_CEILING
from torchbend.models import load

REPO = Path(__file__).resolve().parents[1]
LATENT = "encoder_2"  # the encoder's last convolution in TinyRave's forward: [1, 16, frames]


def listenable(audio: torch.Tensor, sr: int) -> torch.Tensor:
    """``audio`` through the safety stage (a soft limiter within -0.3 dBFS) for a file to
    listen to, rather than a hard clip; says what it did when it acted."""
    safety = tb.audio.Safety(sr, ceiling=FILE_CEILING)
    out = safety(audio.detach())
    if safety.stats.acted:
        print(f"  {safety.stats}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/examples/05"))
    parser.add_argument("--smoke", action="store_true", help="one second of audio")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    model = load("tiny_rave")
    sr = model.sample_rate
    length = int((1.0 if args.smoke else 4.0) * sr) // model.ratio * model.ratio
    drums, bass = (
        load_audio(REPO / f"assets/sounds/{name}.wav", sample_rate=sr, mono=True)[0]
        for name in ("drums", "bass")
    )
    drums, bass = drums[None, :, :length], bass[None, :, :length]  # [batch, channels, time]

    bended = tb.BendedModule(model)
    bended.trace(x=drums)
    with torch.no_grad():
        # 1. Latent surgery: out at the latent, edit, back in from the latent.
        z_drums = bended.get_activations(f"{LATENT}$", x=drums)[LATENT]  # stops at the latent
        z_bass = bended.get_activations(f"{LATENT}$", x=bass)[LATENT]
        half = z_drums.shape[1] // 2
        edits = {
            "swap": torch.cat([z_drums[:, half:], z_drums[:, :half]], 1),  # channels 8-15 <-> 0-7
            "average": z_drums.mean(1, keepdim=True).expand_as(z_drums),  # one shared channel
            "mix": 0.5 * z_drums + 0.5 * z_bass,  # halfway between the two sounds
        }
        for name, z in edits.items():
            y = bended.from_activations(LATENT, **{LATENT: z})  # decode from the latent
            print(f"wrote {save(args.out / f'{name}.wav', listenable(y[0], sr), sr)}")

        # 2. Capture the bass's latent as it flows, then pull the drums' latent towards it.
        capture = tb.Capture()
        bended.bend(capture, f"{LATENT}$")
        with bended.capture():  # records while inside
            bended(bass)
        morph = tb.BendingParameter("morph", 0.0, range=(0.0, 1.0))
        bended.bend(tb.InterpolationFromCapture(capture, weight=morph), f"{LATENT}$")
        for amount in (0.25, 0.5, 0.75, 1.0):
            bended.update("morph", amount)  # (1 - morph) * drums + morph * bass, per frame
            y = bended(drums)
            path = save(args.out / f"morph_{int(amount * 100)}.wav", listenable(y[0], sr), sr)
            print(f"wrote {path}")

    fig, axes = plt.subplots(1, 3, figsize=(10, 3), sharey=True)
    for ax, (name, z) in zip(axes, [("drums", z_drums), ("bass", z_bass), ("mix", edits["mix"])]):
        ax.imshow(z[0].numpy(), aspect="auto", origin="lower", cmap="magma")
        ax.set(title=name, xlabel="frame")
    axes[0].set_ylabel("latent channel")
    fig.tight_layout()
    fig.savefig(args.out / "latents.png", dpi=80)
    print(f"wrote {args.out / 'latents.png'}")


if __name__ == "__main__":
    main()
