"""Tutorial: pull the latent out of a sound, operate on it, decode it; morph with Capture.

Run: python examples/05_capture_and_latent_surgery.py [--out DIR] [--smoke]

With TinyDDSP, the character model (``torchbend.models.load()``), whose latent names its
channels (``model.latent_names``: pitch, loudness, brightness, noisiness, four learned timbre
channels): ``get_activations`` runs the model only as far as the latent of the sung line and
of the bass line; we edit the latents by name (the voice's pitch and loudness kept, every
other channel taken from the bass; the voice's timbre channels held at their average over the
sound; the two latents mixed half and half) and ``from_activations`` runs the rest of the
model from the edited latent (``graft.wav``, ``held.wav``, ``mix.wav``). Then a
``tb.Capture`` records the bass's latent as the model runs, and ``tb.InterpolationFromCapture``
pulls the voice's latent towards it, on a knob (``morph_25.wav`` ... ``morph_100.wav``).
``latents.png`` shows the latents, channels named. Files go to DIR (default
``out/examples/05``). ``--smoke`` crops the sounds to one second.
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
LATENT = "cat"  # TinyDDSP's latent in its forward: [1, 8, frames], one frame per 256 samples


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

    model = load("tiny_ddsp")
    sr, names = model.sample_rate, model.latent_names
    length = int((1.0 if args.smoke else 4.0) * sr) // model.ratio * model.ratio
    voice, bass = (
        load_audio(REPO / f"assets/sounds/{name}.wav", sample_rate=sr, mono=True)[0]
        for name in ("voice", "bass")
    )
    voice, bass = voice[None, :, :length], bass[None, :, :length]  # [batch, channels, time]
    sung = [names.index("pitch"), names.index("loudness")]
    timbre = [i for i, name in enumerate(names) if name.startswith("timbre")]

    bended = tb.BendedModule(model)
    bended.trace(x=voice)
    with torch.no_grad():
        # 1. Latent surgery: out at the latent, edit, back in from the latent.
        z_voice = bended.get_activations(f"{LATENT}$", x=voice)[LATENT]  # stops at the latent
        z_bass = bended.get_activations(f"{LATENT}$", x=bass)[LATENT]
        graft = z_bass.clone()
        graft[:, sung] = z_voice[:, sung]  # the voice's pitch and loudness, the rest the bass's
        held = z_voice.clone()
        held[:, timbre] = z_voice[:, timbre].mean(-1, keepdim=True)  # one timbre all along
        edits = {"graft": graft, "held": held, "mix": 0.5 * z_voice + 0.5 * z_bass}
        for name, z in edits.items():
            y = bended.from_activations(LATENT, **{LATENT: z})  # decode from the latent
            print(f"wrote {save(args.out / f'{name}.wav', listenable(y[0], sr), sr)}")

        # 2. Capture the bass's latent as it flows, then pull the voice's latent towards it.
        capture = tb.Capture()
        bended.bend(capture, f"{LATENT}$")
        with bended.capture():  # records while inside
            bended(bass)
        morph = tb.BendingParameter("morph", 0.0, range=(0.0, 1.0))
        bended.bend(tb.InterpolationFromCapture(capture, weight=morph), f"{LATENT}$")
        for amount in (0.25, 0.5, 0.75, 1.0):
            bended.update("morph", amount)  # (1 - morph) * voice + morph * bass, per frame
            y = bended(voice)
            path = save(args.out / f"morph_{int(amount * 100)}.wav", listenable(y[0], sr), sr)
            print(f"wrote {path}")

    fig, axes = plt.subplots(1, 3, figsize=(10, 3), sharey=True)
    shown = [("voice", z_voice), ("bass", z_bass), ("graft", graft)]
    for ax, (name, z) in zip(axes, shown):
        ax.imshow(z[0].numpy(), aspect="auto", origin="lower", cmap="magma")
        ax.set(title=name, xlabel=f"frame ({model.ratio} samples)")
    axes[0].set_yticks(range(len(names)), names, fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out / "latents.png", dpi=80)
    print(f"wrote {args.out / 'latents.png'}")


if __name__ == "__main__":
    main()
