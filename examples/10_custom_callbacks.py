"""Tutorial: write a bending callback, load drop-in callbacks, bend a model block by block.

Run: python examples/10_custom_callbacks.py [--out DIR]

It writes a callback (``Tremolo``) in this file, loads the drop-in callbacks of the repository's
``callbacks/`` folder with ``load_callbacks``, bends a small (untrained) convolutional model
with them, plays a synthesized sine through it in blocks, as an audio host would, turns a knob
halfway, and writes ``dry.wav`` and ``bent.wav`` (16-bit mono) to DIR (default
``out/examples/10``). See docs/callbacks.md for the authoring contract.
"""

from __future__ import annotations

import argparse
import math
import wave
from pathlib import Path

import torch
from torch import nn

import torchbend as tb
from torchbend.callbacks import load_callbacks

SAMPLE_RATE = 16000
BLOCK = 2048
REPO = Path(__file__).resolve().parents[1]


# -- 1. Write a callback ------------------------------------------------------------------------


class Tremolo(tb.BendingCallback):
    """Modulate the amplitude of an activation with a slow sine, continuous across calls.

    Args:
        rate: the sine's frequency, in cycles per sample of the activation (4 Hz at 16 kHz is
            ``4 / 16000``), ``>= 0``.
        depth: how deep the modulation goes, from 0 (the identity) to 1 (down to silence).
            May be a control; while it ramps, the change is spread along time.

    Shape:
        - Input: ``[..., time]``.
        - Output: same as input.
    """

    # A per-target phase is kept in a Python-side update (add_state at each call): not
    # scriptable, and saying so lets exporters refuse it with a clear message.
    scriptable = False

    # Each numeric argument is declared once: its kind, bounds, and the value at which the
    # callback is the identity. That gives the checks, the repr, and control support.
    rate = tb.Argument(float, low=0.0, meaning="a frequency in cycles per sample")
    depth = tb.Argument(float, low=0.0, high=1.0, neutral=0.0, ramps=True)

    def __init__(self, rate: float = 4 / SAMPLE_RATE, depth: float | tb.BendingParameter = 0.5):
        super().__init__()
        self.rate = rate  # checked against the declaration, kept as a plain float
        self.depth = depth  # a number, or a control that pushes its values in

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        # Called once per bent target: allocate its state (a buffer, moved by .to(device)).
        self.add_state(name, torch.zeros((), dtype=torch.float64, device=device))

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        # along(): the depth as a number, or, while its control ramps, a tensor along time.
        depth = self.along("depth", x)
        if isinstance(depth, float) and depth == 0.0:
            return x  # neutral setting: exactly the identity
        phase = self.state(name)
        t = torch.arange(x.shape[-1], dtype=torch.float64, device=x.device)
        lfo = torch.sin(2 * math.pi * (phase + self.rate * t)).to(x.dtype)
        self.add_state(name, (phase + self.rate * x.shape[-1]) % 1.0)  # carry the phase on
        return x * (1 - depth * (0.5 + 0.5 * lfo))


# -- 2. A model, a sound, a WAV writer -----------------------------------------------------------


def small_model() -> nn.Module:
    """An untrained 1-D conv net, from and to one channel (its sound is its own)."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv1d(1, 8, 9, padding=4),
        nn.Tanh(),
        nn.Conv1d(8, 8, 9, padding=4),
        nn.Tanh(),
        nn.Conv1d(8, 1, 9, padding=4),
    )


def sine(seconds: float = 3.0, freq: float = 220.0) -> torch.Tensor:
    """A sine with a slow fade in, ``[1, 1, time]``."""
    t = torch.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (0.8 * torch.sin(2 * math.pi * freq * t) * (t / 0.2).clamp(max=1.0))[None, None]


def write_wav(path: Path, audio: torch.Tensor) -> None:
    audio = audio.flatten() / audio.abs().max().clamp(min=1e-9) * 0.9
    data = (audio.clamp(-1, 1) * 32767).to(torch.int16).numpy().tobytes()
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(SAMPLE_RATE)
        f.writeframes(data)


def play(bended: tb.BendedModule, signal: torch.Tensor, at_half=None) -> torch.Tensor:
    """Run ``signal`` through ``bended`` block by block (calling ``at_half`` halfway)."""
    blocks = list(signal.split(BLOCK, -1))
    out = []
    with torch.no_grad():
        for i, block in enumerate(blocks):
            if at_half is not None and i == len(blocks) // 2:
                at_half()
            out.append(bended(block))
    return torch.cat(out, -1)


# -- 3. Load the drop-in callbacks and bend ------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/examples/10"))
    parser.add_argument("--smoke", action="store_true", help="(already fast: same as normal)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    found = load_callbacks(REPO / "callbacks")  # every BendingCallback defined in those files
    print("loaded:", ", ".join(sorted(found)))
    BitCrusher, WaveFolder, FeedbackDelay = (
        found["BitCrusher"],
        found["WaveFolder"],
        found["FeedbackDelay"],
    )

    signal = sine()
    bended = tb.BendedModule(small_model())
    bended.trace(input=signal[..., :BLOCK])  # one block: later blocks reuse the graph
    dry = play(bended, signal)

    # A knob, ramped over one block so that turning it does not click.
    mix = tb.BendingParameter("mix", 0.0, range=(0.0, 1.0), ramp=1)
    bended.bend(WaveFolder(0.3), "_1$")  # fold the first hidden layer
    bended.bend(FeedbackDelay(delay=3000, feedback=0.5, mix=mix), "_2$")  # echoes, mix on a knob
    bended.bend(Tremolo(depth=0.8), "_3$")  # our own callback
    bended.bend(BitCrusher(bits=5, hold=3), r"4\.weight")  # crush a weight (bent once)
    for b in bended.bendings:
        print(f"  {b.callback!r:50} on {', '.join(b.patterns)}")

    bent = play(bended, signal, at_half=lambda: bended.update("mix", 0.7))

    for name, audio in (("dry", dry), ("bent", bent)):
        path = args.out / f"{name}.wav"
        write_wav(path, audio)
        print(f"wrote {path} ({audio.shape[-1] / SAMPLE_RATE:.1f} s)")


if __name__ == "__main__":
    main()
