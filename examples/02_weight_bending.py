"""Tutorial: bend the weights of the shipped model and listen to what each bending does.

Run: python examples/02_weight_bending.py [--out DIR] [--smoke]

Loads TinyDDSP (``torchbend.models.load("tiny_ddsp")``) and the sung line of
``assets/sounds``, lists the model's weights (``weights.txt``), then renders the voice through
the model once as it is (``original.wav``) and once per weight bending of its decoder: the
latent read twice as hard (``Scale``), noise on the head that spreads the power over the
harmonics and the noise bands (``Noise``), rows of that head left out (``Mask`` with ``dim``),
rows swapped (``Permute``) and all of them at once (``all.wav``). The pitch and the level stay
the voice's (they are measured, not decoded): what changes is the timbre. WAVs go to DIR
(default ``out/examples/02``). ``--smoke`` crops the voice to one second.
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

    model = load("tiny_ddsp")
    sr = model.sample_rate
    audio, _ = load_audio(REPO / "assets/sounds/voice.wav", sample_rate=sr, mono=True)
    seconds = 1.0 if args.smoke else 4.0
    length = int(seconds * sr) // model.ratio * model.ratio  # a multiple of the model's ratio
    x = audio[None, :, :length]  # [batch, channels, time]

    bended = tb.BendedModule(model)
    bended.trace(x=x)
    bended.print_weights(out=args.out / "weights.txt")  # names, shapes: what we can bend

    # Each bending: a name, a callback, and a regular expression over weight names.
    bendings = {
        # decoder.0 reads the pitch, the loudness and the four timbres of the latent: read
        # twice as hard, they call for another spread of the harmonics (the level stays: the
        # synthesizer sets it from the loudness channel itself).
        "scale": (tb.Scale(2.0), r"decoder\.0\.weight"),
        # decoder.6 is the head, [32 harmonics + 16 noise bands + 1 balance, 64, 1]:
        # multiplicative noise (1 + N(0, 0.5)) on it colours each harmonic and band anew.
        "noise": (tb.Noise(std=0.5, op="mul", seed=0), r"decoder\.6\.weight"),
        # With dim=0 each row is dropped whole with probability 0.3: those harmonics and bands
        # fall back to the same share, the others keep theirs.
        "mask": (tb.Mask(prob=0.3, dim=0, seed=0), r"decoder\.6\.weight"),
        # Half of the rows swapped: a harmonic's share goes to another harmonic or to a noise
        # band, and the voice's formants move.
        "permute": (tb.Permute(dim=0, seed=0, amount=0.5), r"decoder\.6\.weight"),
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
