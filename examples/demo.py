"""Demo: trace a small audio autoencoder, inspect it, bend it several ways, render the results.

Run: bash scripts/demo.sh [--out DIR]   (or: python examples/demo.py --out DIR)

Writes one WAV file per bending (16-bit, 44.1 kHz) into DIR and prints the activation table,
what each bending touched, and how long a bended call takes against the plain module.
"""

from __future__ import annotations

import argparse
import math
import time
import wave
from pathlib import Path

import torch
from torch import nn

import torchbend as tb

SAMPLE_RATE = 44100


class TinyAutoencoder(nn.Module):
    """A waveform autoencoder: 3 strided convs down (ratio 64), 3 transposed convs up."""

    def __init__(self, channels: int = 16, latent: int = 8) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv1d(1, channels, 8, stride=4, padding=2),
            nn.LeakyReLU(0.2),
            nn.Conv1d(channels, channels, 8, stride=4, padding=2),
            nn.LeakyReLU(0.2),
            nn.Conv1d(channels, latent, 8, stride=4, padding=2),
        )
        self.decoder = nn.Sequential(
            nn.ConvTranspose1d(latent, channels, 8, stride=4, padding=2),
            nn.LeakyReLU(0.2),
            nn.ConvTranspose1d(channels, channels, 8, stride=4, padding=2),
            nn.LeakyReLU(0.2),
            nn.ConvTranspose1d(channels, 1, 8, stride=4, padding=2),
            nn.Tanh(),
        )

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.decoder(z)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))


def synth(seconds: float = 2.0) -> torch.Tensor:
    """A plucked bass line: decaying saw-ish notes, [1, 1, time]."""
    t = torch.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    out = torch.zeros_like(t)
    for i, midi in enumerate([40, 43, 47, 45, 40, 38, 43, 45]):
        start = i * seconds / 8
        f = 440 * 2 ** ((midi - 69) / 12)
        env = torch.where(t >= start, torch.exp(-(t - start) * 6), torch.zeros_like(t))
        out += env * sum(torch.sin(2 * math.pi * f * k * t) / k for k in range(1, 6))
    return (0.3 * out / out.abs().max())[None, None]


def write_wav(path: Path, audio: torch.Tensor) -> None:
    data = (audio.detach().clamp(-1, 1).flatten() * 32767).to(torch.int16).numpy().tobytes()
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(SAMPLE_RATE)
        f.writeframes(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/demo"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    torch.manual_seed(0)
    model = TinyAutoencoder().eval()
    x = synth()
    bended = tb.BendedModule(model)
    bended.trace("forward", x=x)
    print("Activations of forward:")
    bended.print_activations()

    bendings = {
        "original": [],
        "mask_latent_channels": [(tb.Mask(0.5, dim=-2, seed=1), "encoder_4$")],
        "scale_first_weight": [(tb.Scale(-1.5), r"encoder\.0\.weight")],
        "noisy_decoder": [(tb.Noise(0.3, seed=2), r"decoder\.2\.weight")],
        "permuted_hidden": [(tb.Permute(dim=-2, seed=3), "decoder_1$")],
        "clamped_latent": [(tb.Clamp(-0.05, 0.05), "encoder_4$")],
    }
    with torch.inference_mode():
        reference = model(x)
        for name, todo in bendings.items():
            bended.reset()
            keys = [k for cb, pattern in todo for k in bended.bend(cb, pattern)]
            y = bended(x)
            write_wav(args.out / f"{name}.wav", y)
            change = (y - reference).abs().max().item()
            print(f"{name:>22}: bent {keys or 'nothing'}; largest change {change:.4f}")
        write_wav(args.out / "input.wav", x)

        rounds, timings = 30, {"plain": 0.0, "bended": 0.0}
        for _ in range(rounds):
            for label, fn in (("plain", model), ("bended", bended)):
                t0 = time.perf_counter()
                fn(x)
                timings[label] += (time.perf_counter() - t0) / rounds
    seconds = x.shape[-1] / SAMPLE_RATE
    print(
        f"\nOne call on {seconds:.1f} s of audio: plain {timings['plain'] * 1e3:.2f} ms, "
        f"bended {timings['bended'] * 1e3:.2f} ms "
        f"({seconds / timings['bended']:.0f}x realtime)."
    )
    print(f"Wrote {len(bendings) + 1} WAV files to {args.out}/")


if __name__ == "__main__":
    main()
