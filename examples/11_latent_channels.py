"""Tutorial: what each named latent channel of the character model does, measured.

Run: python examples/11_latent_channels.py [--out DIR] [--smoke]

TinyDDSP's latent (activation ``cat`` of its forward, 8 channels, one frame per 256 samples)
names its channels: ``model.latent_names`` is pitch, loudness, brightness, noisiness (what its
encoder measured of each frame) and four learned timbre channels; the activation table shows
the names next to the latent. For the pad and the sung line of ``assets/sounds``, this moves
one named channel at a time down and up (``torchbend.demo.OnChannel``: a bending of one
channel of an activation), by the step of ``STEPS`` in the channel's own units, and measures
each render against the unbent one, frame by frame: the change of pitch in semitones (where
both renders are pitched), of loudness in dB, of spectral centroid in percent and of
noisiness (0 to 1), with the analysis the model's encoder runs
(``torchbend.models.FrameAnalysis``). It prints a table per sound, in which each channel
should move its own measure the most, and writes every render (``<sound>_original.wav``,
``<sound>_<channel>_<down|up>.wav``) and the tables (``channels.txt``) to DIR (default
``out/examples/11``). A render louder than full scale is turned down to peak at 1 in its
WAV; the measures are taken before. ``--smoke`` crops the sounds to one second.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import torchbend as tb
from torchbend.audio import load as load_audio
from torchbend.audio import save
from torchbend.demo import OnChannel
from torchbend.demo.listening import changes, hear
from torchbend.models import load

REPO = Path(__file__).resolve().parents[1]
STEPS = {"pitch": 0.5, "loudness": 0.3, "brightness": 1.0, "noisiness": 0.4}
"""How far each named channel moves, either way, in its units: half an octave of pitch, 6 dB
of loudness (a log10 RMS), an octave of brightness, 0.4 of noisiness (a share from 0 to 1)."""
MEASURES = ("pitch (st)", "loudness (dB)", "centroid (%)", "noisiness")


def fmt(value: float | None, form: str) -> str:
    return "-" if value is None else format(value, form)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/examples/11"))
    parser.add_argument("--smoke", action="store_true", help="one second of audio")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    model = load("tiny_ddsp")
    sr, names = model.sample_rate, model.latent_names
    length = int((1.0 if args.smoke else 4.0) * sr) // model.ratio * model.ratio
    bended = tb.BendedModule(model)
    bended.trace(x=torch.zeros(1, 1, length))
    latent = "cat"  # the activation whose channels are the latent: the table names them
    table = bended.print_activations(flt=f"{latent}$", out=args.out / "latent.txt")
    print(table, end="\n\n")

    def write(name: str, y: torch.Tensor) -> None:
        peak = float(y.abs().max())
        save(args.out / f"{name}.wav", y[0] / max(1.0, peak), sr)

    header = f"{'channel':>10}  {'move':>6}  " + "  ".join(f"{m:>13}" for m in MEASURES)
    report = [str(table), ""]
    with torch.no_grad():
        for sound in ("pad", "voice"):
            audio, _ = load_audio(REPO / f"assets/sounds/{sound}.wav", sample_rate=sr, mono=True)
            x = audio[None, :, :length]  # [batch, channels, time]
            bended.reset()
            y0 = bended(x)
            write(f"{sound}_original", y0)
            unbent = hear(y0, sr)
            lines = [f"{sound}: {unbent.lufs:.1f} LUFS unbent; change from the unbent render:"]
            lines.append(header)
            for channel, step in STEPS.items():
                for way, offset in (("down", -step), ("up", step)):
                    bended.reset()
                    bended.bend(OnChannel(names.index(channel), bias=offset), f"{latent}$")
                    y = bended(x)
                    write(f"{sound}_{channel}_{way}", y)
                    pitch, loudness, octaves, noisiness = changes(hear(y, sr), unbent)
                    centroid = None if octaves is None else 100 * (2**octaves - 1)
                    cells = [
                        fmt(pitch, "+.1f"),
                        fmt(loudness, "+.1f"),
                        fmt(centroid, "+.0f"),
                        fmt(noisiness, "+.2f"),
                    ]
                    lines.append(
                        f"{channel:>10}  {offset:+6.2f}  " + "  ".join(f"{c:>13}" for c in cells)
                    )
            report += [*lines, ""]
            print("\n".join(lines), end="\n\n")

    report.append(
        "move: the offset added to the channel, in its units (octaves of pitch, log10 RMS, "
        "octaves of centroid, share of noise). Measures: medians over the frames sounding in "
        "both renders."
    )
    print(report[-1])
    (args.out / "channels.txt").write_text("\n".join(report) + "\n")
    print(f"wrote {args.out / 'channels.txt'} and {len(list(args.out.glob('*.wav')))} WAVs")


if __name__ == "__main__":
    main()
