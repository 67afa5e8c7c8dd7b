"""Tutorial: bend the weights of the shipped model and listen to what each bending does.

Run: python examples/02_weight_bending.py [--out DIR] [--smoke]

Loads TinyRave (``torchbend.models.load()``) and the drum loop of ``assets/sounds``, lists the
model's weights (``weights.txt``), then renders the loop through the model once as it is
(``original.wav``) and once per weight bending: a louder latent read-out (``Scale``), noise on
the layer that writes the 16 bands (``Noise``), bands left out of the filter bank's merge
(``Mask`` with ``dim``), bands merged through other bands' filters (``Permute``) and all of
them at once (``all.wav``). WAVs go to DIR (default ``out/examples/02``). ``--smoke`` crops
the loop to one second.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import torchbend as tb
from torchbend.audio import load as load_audio
from torchbend.audio import save
from torchbend.audio.safety import FILE_CEILING
from torchbend.models import load

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/examples/02"))
    parser.add_argument("--smoke", action="store_true", help="one second of audio")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    model = load("tiny_rave")
    sr = model.sample_rate
    audio, _ = load_audio(REPO / "assets/sounds/drums.wav", sample_rate=sr, mono=True)
    seconds = 1.0 if args.smoke else 4.0
    length = int(seconds * sr) // model.ratio * model.ratio  # a multiple of the model's ratio
    x = audio[None, :, :length]  # [batch, channels, time]

    bended = tb.BendedModule(model)
    bended.trace(x=x)
    bended.print_weights(out=args.out / "weights.txt")  # names, shapes: what we can bend

    # Each bending: a name, a callback, and a regular expression over weight names.
    bendings = {
        # decoder.0 reads the 16-channel latent. The decoder's hidden values are small, so its
        # tanh stays nearly linear: doubling this weight mostly doubles the output (+6 dB).
        "scale": (tb.Scale(2.0), r"decoder\.0\.weight"),
        # Multiplicative noise (1 + N(0, 0.5)) on decoder.2, which writes the 16 bands.
        "noise": (tb.Noise(std=0.5, op="mul", seed=0), r"decoder\.2\.weight"),
        # pqmf.merge.weight is [output phase, band, tap]: with dim=1 each of the 16 bands
        # (1378 Hz wide at 44.1 kHz) is dropped whole with probability 0.3: spectral holes.
        "mask": (tb.Mask(prob=0.3, dim=1, seed=0), r"pqmf\.merge\.weight"),
        # Half of the bands merged through another band's filter: their content moves up or
        # down the spectrum.
        "permute": (tb.Permute(dim=1, seed=0, amount=0.5), r"pqmf\.merge\.weight"),
    }

    with torch.no_grad():
        renders = {"original": bended(x)}
        for name, (callback, pattern) in bendings.items():
            bended.reset()  # back to the original weights, bit for bit
            bent = bended.bend(callback, pattern)
            print(f"{name:8} {callback!r} on {bent}")
            renders[name] = bended(x)
        bended.reset()
        for callback, pattern in bendings.values():  # several bendings stack
            bended.bend(callback, pattern)
        renders["all"] = bended(x)

    for name, y in renders.items():
        # For listening: the safety stage (a soft limiter within -0.3 dBFS), not a hard clip.
        safety = tb.audio.Safety(sr, ceiling=FILE_CEILING)
        path = save(args.out / f"{name}.wav", safety(y[0].detach()), sr)
        print(f"wrote {path}  (rms {y.pow(2).mean().sqrt():.3f}; {safety.stats})")


if __name__ == "__main__":
    main()
