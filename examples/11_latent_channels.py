"""Tutorial: what each latent channel of the shipped model does, measured.

Run: python examples/11_latent_channels.py [--out DIR] [--smoke]

TinyRave's latent (activation ``encoder_2``, 16 channels, one frame per 16 samples) has its
channels ordered by the variance they carry on the training sounds, channel 0 the most. For
the pad and the bass line of ``assets/sounds``, this bends one latent channel at a time
(channels 0 to 3), then all of them, with a small callback written here (``ChannelScale``):
each is removed (x0) and boosted (x8). Every render is measured against the unbent one: the
change of loudness in LU (``torchbend.audio.quality.loudness_lufs``) and of spectral centroid
in Hz (the power-weighted mean frequency, a measure of brightness). It prints a table per
sound, with the share of the latent's power each channel carries, and writes every render
(``<sound>_original.wav``, ``<sound>_ch<k>_x<scale>.wav``, ``<sound>_all_x<scale>.wav``) and
the tables (``channels.txt``) to DIR (default ``out/examples/11``). A render louder than full
scale is turned down to peak at 1 in its WAV; the measures are taken before. ``--smoke``
crops the sounds to one second.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch

import torchbend as tb
from torchbend.audio import load as load_audio
from torchbend.audio import save
from torchbend.audio.quality import loudness_lufs
from torchbend.models import load

REPO = Path(__file__).resolve().parents[1]
LATENT = "encoder_2"  # the encoder's last convolution in TinyRave's forward: [1, 16, frames]
CHANNELS = (0, 1, 2, 3)
SCALES = (0.0, 8.0)  # the channel removed, and boosted by 18 dB
# What a change "reads as": a change of loudness of 1 LU or more (about the smallest one
# hears), a move of the centroid by 10 % or more of its unbent value.
LOUDNESS_STEP = 1.0
BRIGHTNESS_STEP = 0.10


class ChannelScale(tb.BendingCallback):
    """Multiply chosen channels of a ``[batch, channels, time]`` activation by ``scale``.

    Args:
        channels: the channels to scale; ``None`` for all of them.
        scale: the factor, ``1`` being the identity.

    Shape:
        - Input: ``[..., channels, time]``.
        - Output: same as input.
    """

    scale = tb.Argument(float, neutral=1.0, meaning="a factor")

    def __init__(self, channels: list[int] | None = None, scale: float = 1.0) -> None:
        super().__init__()
        self.channels = channels
        self.scale = scale

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        if self.scale == 1.0:
            return x  # the identity, bit for bit
        if self.channels is None:
            return x * self.scale
        gain = torch.ones(x.shape[-2], 1, dtype=x.dtype, device=x.device)
        gain[self.channels] = self.scale
        return x * gain


def centroid_hz(y: torch.Tensor, rate: int) -> float:
    """Spectral centroid of ``y``: the mean frequency, weighted by the power of each STFT bin
    (2048-sample Hann windows, hop 512) summed over the whole signal."""
    y = y.reshape(-1).double()
    window = torch.hann_window(2048, dtype=torch.float64)
    power = torch.stft(y, 2048, 512, window=window, return_complex=True).abs().pow(2).sum(-1)
    freqs = torch.fft.rfftfreq(2048, 1.0 / rate, dtype=torch.float64)
    return float((power * freqs).sum() / power.sum())


def reads_as(d_lu: float, d_centroid: float, centroid: float) -> str:
    louder = abs(d_lu) >= LOUDNESS_STEP
    brighter = abs(d_centroid) >= BRIGHTNESS_STEP * centroid
    if louder and brighter:
        return "loudness and brightness"
    if louder:
        return "loudness"
    if brighter:
        return "brightness"
    return "little"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/examples/11"))
    parser.add_argument("--smoke", action="store_true", help="one second of audio")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    model = load("tiny_rave")
    sr = model.sample_rate
    length = int((1.0 if args.smoke else 4.0) * sr) // model.ratio * model.ratio
    bended = tb.BendedModule(model)
    bended.trace(x=torch.zeros(1, 1, length))

    def write(name: str, y: torch.Tensor) -> None:
        peak = float(y.abs().max())
        save(args.out / f"{name}.wav", y[0] / max(1.0, peak), sr)

    header = (
        f"{'channel':>7}  {'power':>6}  {'scale':>5}  {'loudness':>9}  {'centroid':>9}  reads as"
    )
    report = []
    with torch.no_grad():
        for sound in ("pad", "bass"):
            audio, _ = load_audio(REPO / f"assets/sounds/{sound}.wav", sample_rate=sr, mono=True)
            x = audio[None, :, :length]  # [batch, channels, time]
            bended.reset()
            y0 = bended(x)
            write(f"{sound}_original", y0)
            lufs0, centroid0 = loudness_lufs(y0, sr), centroid_hz(y0, sr)
            z = bended.get_activations(f"{LATENT}$", x=x)[LATENT]  # stops at the latent
            power = z.pow(2).mean((0, 2))
            share = power / power.sum()  # each channel's share of the latent's power

            lines = [
                f"{sound}: {lufs0:.1f} LUFS, centroid {centroid0:.0f} Hz, unbent",
                header,
            ]
            for channel in (*CHANNELS, None):
                for scale in SCALES:
                    bended.reset()
                    chosen = None if channel is None else [channel]
                    bended.bend(ChannelScale(chosen, scale), f"{LATENT}$")
                    y = bended(x)
                    label = "all" if channel is None else f"ch{channel}"
                    write(f"{sound}_{label}_x{scale:g}", y)
                    part = 1.0 if channel is None else float(share[channel])
                    row = f"{label:>7}  {100 * part:5.1f}%  {'x' + format(scale, 'g'):>5}"
                    if not bool(y.abs().max() > 0):
                        # No bias anywhere: a latent of zeros decodes to exact silence.
                        lines.append(f"{row}  {'silence':>9}  {'':>9}  silence")
                        continue
                    d_lu = loudness_lufs(y, sr) - lufs0
                    if math.isinf(d_lu):
                        lines.append(f"{row}  {'-inf LU':>9}  {'':>9}  loudness")
                        continue
                    d_centroid = centroid_hz(y, sr) - centroid0
                    lines.append(
                        f"{row}  {d_lu:+6.1f} LU  {d_centroid:+6.0f} Hz  "
                        f"{reads_as(d_lu, d_centroid, centroid0)}"
                    )
            report += [*lines, ""]
            print("\n".join(lines), end="\n\n")

    report.append(
        f"power: the channel's share of the latent's power on the sound. loudness, centroid: "
        f"change from the unbent render. reads as: loudness for {LOUDNESS_STEP:g} LU or more, "
        f"brightness for a centroid moved by {100 * BRIGHTNESS_STEP:g}% or more."
    )
    print(report[-1])
    (args.out / "channels.txt").write_text("\n".join(report) + "\n")
    print(f"wrote {args.out / 'channels.txt'} and {len(list(args.out.glob('*.wav')))} WAVs")


if __name__ == "__main__":
    main()
