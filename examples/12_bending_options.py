"""Tutorial: how a bending applies: blend, window, subset, guard; an alias; time callbacks.

Run: python examples/12_bending_options.py [--out DIR] [--smoke]

Any callback can be applied partially, with the options of ``bended.bend`` (see
docs/bending.md). On the character model (TinyDDSP, ``torchbend.models.load()``) and the sung
line of ``assets/sounds``, this renders:

1. the plain model, then ``Noise`` on the latent (activation ``cat``, 8 named channels, one
   frame per 256 samples) at full strength and with ``blend=0.3`` (30 % wet);
2. the same noise inside ``window=tb.Window(..., unit="seconds")``: the middle of the sound,
   faded in and out, in seconds at the model's sample rate (the latent's frames are counted at
   the latent's own rate, 256 times lower);
3. ``Scale(4)`` on a quarter of the decoder's hidden channels (``decoder_1``),
   ``subset=tb.Subset(0.25, dim=-2, seed=0)``;
4. ``Scale(50)`` on the same layer, then the same with ``guard=True``, which brings the bent
   value's spread back within 4 times the unbent one's;
5. the latent named with an alias, ``bended.mark("latent", "cat")``, and bent as ``"#latent"``
   with a ``Filter`` (a low-pass along the latent's time axis), and ``Reverse`` playing blocks
   of the decoder's hidden frames backwards.

Each render is written to DIR (default ``out/examples/12``) as ``<name>.wav``, turned down to
peak at 1 if louder, and measured before: RMS and peak (dBFS) and its distance to the plain
render (the RMS of the difference, in dB relative to the plain render's RMS; ``-inf`` for the
same samples). The lines also go to ``options.txt``. ``--smoke`` crops the sound to one second.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch

import torchbend as tb
from torchbend.audio import load as load_audio
from torchbend.audio import save

REPO = Path(__file__).resolve().parents[1]
LATENT = "cat"  # TinyDDSP's latent: [1, 8, frames], pitch, loudness, ... (model.latent_names)
HIDDEN = "decoder_1"  # the decoder's first hidden layer, after its LeakyReLU: [1, 64, frames]


def db(value: float) -> float:
    return 20 * math.log10(value) if value > 0 else -math.inf


def measure(y: torch.Tensor, plain: torch.Tensor) -> str:
    """RMS and peak of ``y`` in dBFS, and its distance to ``plain`` in dB (relative RMS)."""
    rms = float(y.pow(2).mean().sqrt())
    peak = float(y.abs().max())
    reference = float(plain.pow(2).mean().sqrt())
    distance = float((y - plain).pow(2).mean().sqrt())
    relative = distance / reference if reference > 0 else math.inf
    return (
        f"rms {db(rms):6.1f} dBFS  peak {db(peak):6.1f} dBFS  "
        f"distance to plain {db(relative):6.1f} dB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/examples/12"))
    parser.add_argument("--smoke", action="store_true", help="one second of audio")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    model = tb.models.load("tiny_ddsp")
    sr = model.sample_rate
    seconds = 1.0 if args.smoke else 4.0
    length = int(seconds * sr) // model.ratio * model.ratio
    audio, _ = load_audio(REPO / "assets/sounds/voice.wav", sample_rate=sr, mono=True)
    x = audio[None, :, :length]  # [batch, channels, time]
    bended = tb.BendedModule(model)
    bended.trace(x=torch.zeros(1, 1, length))
    bended.sample_rate = sr  # what windows in seconds count with (read from the model too)

    report: list[str] = []
    plain = torch.zeros(0)

    def render(name: str) -> None:
        nonlocal plain
        with torch.no_grad():
            y = bended(x)
        if name == "plain":
            plain = y
        line = f"{name:>12}: {measure(y, plain)}"
        report.append(line)
        print(line)
        save(args.out / f"{name}.wav", y[0] / max(1.0, float(y.abs().max())), sr)
        bended.reset()

    render("plain")

    # 1. Dry/wet: noise on the latent, all of it, then 30 % of it.
    def noise() -> tb.Noise:  # a fresh one each time: the same draws from the seed
        # In the latent's units: a tenth of an octave of pitch, of log10 RMS, ... per frame.
        return tb.Noise(std=0.1, seed=0)

    bended.bend(noise(), f"{LATENT}$")
    render("noise")
    bended.bend(noise(), f"{LATENT}$", blend=0.3)
    render("blend_0.3")

    # 2. A window in seconds: the noise in the middle of the sound only, faded over 50 ms.
    window = tb.Window(0.25 * seconds, 0.75 * seconds, fade=0.05, unit="seconds")
    bended.bend(noise(), f"{LATENT}$", window=window)
    render("window")

    # 3. A quarter of the decoder's hidden channels, drawn from the seed, boosted.
    bended.bend(tb.Scale(4.0), f"{HIDDEN}$", subset=tb.Subset(0.25, dim=-2, seed=0))
    render("subset")

    # 4. A bending that blows the output up, without and with the guard.
    bended.bend(tb.Scale(50.0), f"{HIDDEN}$")
    render("scale_50")
    bended.bend(tb.Scale(50.0), f"{HIDDEN}$", guard=True)  # spread kept within 4x the unbent
    render("guarded")

    # 5. An alias for the latent, and two callbacks along time.
    bended.mark("latent", LATENT)  # "#latent" now stands for forward:cat, exactly
    bended.bend(tb.Filter("lowpass", cutoff=0.02, resonance=4.0), "#latent")
    render("filter")
    block = 8  # frames: 8 x 256 samples
    bended.bend(tb.Reverse(block=block), f"{HIDDEN}$")
    render("reverse")

    (args.out / "options.txt").write_text("\n".join(report) + "\n")
    print(f"wrote {args.out / 'options.txt'} and {len(list(args.out.glob('*.wav')))} WAVs")


if __name__ == "__main__":
    main()
