"""Tutorial: bend the activations of the shipped model, as audio flows through it.

Run: python examples/03_activation_bending.py [--out DIR] [--smoke]

Loads TinyDDSP, the character model (``torchbend.models.load("tiny_ddsp")``), and the sung line
of ``assets/sounds``, writes the table of its activations (``activations.txt``, the latent's
channels named) and renders the voice through the model as it is (``original.wav``), then with
one activation bending at a time: channels of the learned timbre masked (``mask_latent.wav``),
the latent read at half speed (``timestretch.wav``), the decoder's hidden layer driven into a
soft clipper (``softclip.wav``) and quantized to eight levels (``quantize.wav``). It also draws
the original and masked latents (``latents.png``). Files go to DIR (default
``out/examples/03``). ``--smoke`` crops the voice to one second.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # draw to files, no window
import matplotlib.pyplot as plt
import torch

import torchbend as tb
from torchbend.audio import load as load_audio
from torchbend.audio import save
from torchbend.audio.safety import FILE_CEILING
from torchbend.models import load

REPO = Path(__file__).resolve().parents[1]
# Activations are named after graph nodes (see activations.txt). In TinyDDSP's forward, cat
# is the 8-channel latent, one frame per 256 samples: pitch, loudness, brightness, noisiness
# (measured by its encoder) and four learned timbre channels, which encoder_3 (a tanh) gives.
# decoder_1 is the activation after the decoder's first convolution (64 channels). The
# decoder reads the latent and sets the harmonics and noise bands the synthesizer plays.
LATENT = "cat$"
TIMBRE = "encoder_3$"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/examples/03"))
    parser.add_argument("--smoke", action="store_true", help="one second of audio")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    model = load("tiny_ddsp")
    sr = model.sample_rate
    audio, _ = load_audio(REPO / "assets/sounds/voice.wav", sample_rate=sr, mono=True)
    seconds = 1.0 if args.smoke else 4.0
    x = audio[None, :, : int(seconds * sr) // model.ratio * model.ratio]

    bended = tb.BendedModule(model)
    bended.trace(x=x)
    bended.print_activations(out=args.out / "activations.txt")

    bendings = {
        # Each of the 4 learned timbre channels silenced with probability 0.5, for the whole
        # sound (dim=-2: channels): the decoder reads another timbre, the pitch and loudness
        # stay as sung.
        "mask_latent": (tb.Mask(prob=0.5, dim=-2, seed=1), TIMBRE),
        # Each latent frame t reads frame t / 2: the first half of the sound spread over its
        # whole length. The synthesizer plays the latent's pitch at its own pace, so the
        # melody slows down and keeps its pitch (a waveform autoencoder would drop it).
        "timestretch": (tb.TimeStretch(0.5), LATENT),
        # tanh(4 x) / tanh(4): the hidden layer's larger values squashed. Chained (>>) with
        # a Scale that takes the gain of 4 back from the small ones.
        "softclip": (tb.SoftClip(drive=4.0) >> tb.Scale(1 / 4), "decoder_1$"),
        # 3 bits: eight levels over the whole hidden layer's range.
        "quantize": (tb.Quantize(bits=3), "decoder_1$"),
    }

    with torch.no_grad():
        renders = {"original": bended(x)}
        for name, (callback, pattern) in bendings.items():
            bended.reset()
            print(f"{name:12} {callback!r} on {bended.bend(callback, pattern)}")
            renders[name] = bended(x)
        # get_activations runs the graph only up to the latent; bended=True applies the mask.
        bended.reset()
        bended.bend(*bendings["mask_latent"])
        latents = {
            "original": bended.get_activations(LATENT, bended=False, x=x)["cat"],
            "masked": bended.get_activations(LATENT, x=x)["cat"],
        }

    for name, y in renders.items():
        # For listening: the safety stage (a soft limiter within -0.3 dBFS), not a hard clip.
        safety = tb.audio.Safety(sr, ceiling=FILE_CEILING)
        print(f"wrote {save(args.out / f'{name}.wav', safety(y[0].detach()), sr)} ({safety.stats})")

    fig, axes = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
    for ax, (name, z) in zip(axes, latents.items()):
        ax.imshow(z[0].numpy(), aspect="auto", origin="lower", cmap="magma")
        ax.set(title=f"latent, {name}", ylabel="channel")
        ax.set_yticks(range(len(model.latent_names)), model.latent_names, fontsize=7)
    axes[-1].set_xlabel(f"frame ({model.ratio} samples)")
    fig.tight_layout()
    fig.savefig(args.out / "latents.png", dpi=80)
    print(f"wrote {args.out / 'latents.png'} and {args.out / 'activations.txt'}")


if __name__ == "__main__":
    main()
