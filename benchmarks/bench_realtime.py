"""Realtime factor of streaming the shipped model block by block, bent and unbent, on one thread.

Run: python benchmarks/bench_realtime.py [--quick] [--sample-rate 44100]

For each block size, one round processes one block with each variant, in a shuffled order
(seeded): the plain model, the BendedModule with nothing bent, and the BendedModule with a
Mask on an activation and a Scale on a weight. Reported: the median compute time per block,
the realtime factor (block duration / median time) and the median over rounds of each
variant's time over the plain model's in the same round. The model is
``torchbend.models.load()`` (trained weights); without them, the same architecture untrained
(same cost); without ``torchbend.models``, a conv stack (printed).
"""

from __future__ import annotations

import argparse
import functools
import platform
from collections.abc import Callable

import torch
from bench_call import interleaved
from torch import nn

import torchbend as tb
from torchbend.audio.stream import Stream

BLOCK_SIZES = (256, 512, 1024, 2048, 4096, 8192)


class CausalConvStack(nn.Module):
    """Fallback model: causal 1d convolutions that keep their past input between calls."""

    def __init__(self, layers: int = 6, channels: int = 32) -> None:
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv1d(1 if i == 0 else channels, channels, 3) for i in range(layers - 1)
        )
        self.out = nn.Conv1d(channels, 1, 3)
        for i, conv in enumerate([*self.convs, self.out]):
            self.register_buffer(f"past_{i}", torch.zeros(1, conv.in_channels, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, conv in enumerate([*self.convs, self.out]):
            past = getattr(self, f"past_{i}")
            full = torch.cat([past, x], -1)
            past.copy_(full[..., -2:])
            x = conv(full)
            if i < len(self.convs):
                x = torch.tanh(x)
        return x


def load_model() -> tuple[nn.Module, str, str, str]:
    """The model, its description, an activation pattern and a weight pattern to bend."""
    try:
        from torchbend import models
    except ImportError:
        return CausalConvStack().eval(), "fallback causal conv stack", r"tanh_2$", r"convs\.2\."
    try:
        model = models.load()
        label = "torchbend.models.load() (trained tiny_rave)"
    except Exception as e:  # missing weights file: same architecture, same cost
        model = models.TinyRave().eval()
        label = f"TinyRave, untrained (models.load() failed: {type(e).__name__})"
    set_streaming = getattr(model, "set_streaming", None)
    if callable(set_streaming):
        set_streaming(True)
    return model, label, r"decoder_4$", r"decoder\.5\.weight"


def variants(
    model: nn.Module, block: int, activation: str, weight: str
) -> dict[str, Callable[[], object]]:
    x = torch.randn(1, block, generator=torch.Generator().manual_seed(0)) * 0.1
    unbent = tb.BendedModule(model)
    unbent.trace(x=torch.zeros(1, 1, block))
    bent = tb.BendedModule(model)
    bent.trace(x=torch.zeros(1, 1, block))
    bent.bend(tb.Mask(0.3, dim=-2, seed=0), activation)
    bent.bend(tb.Scale(0.8), weight)
    streams = {
        "plain module": Stream(model, block_size=block),
        "bended, nothing bent": Stream(unbent, block_size=block),
        "bended, Mask + Scale": Stream(bent, block_size=block),
    }
    return {k: functools.partial(s.process_block, x) for k, s in streams.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few rounds (a smoke test)")
    parser.add_argument("--sample-rate", type=int, default=44100)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model, label, activation, weight = load_model()
    print(f"model: {label}")
    print(f"bent: Mask(0.3, dim=-2) on activation {activation!r}, Scale(0.8) on {weight!r}")
    print(
        f"torch {torch.__version__}, 1 thread, {platform.processor() or platform.machine()}, "
        f"{args.sample_rate} Hz\n"
    )
    print(
        "| block | latency (ms) | plain: ms / block | plain: x realtime "
        "| nothing bent: x realtime | bent: x realtime | nothing bent / plain | bent / plain "
        "| bent / nothing bent |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    # Stream runs the model under torch.no_grad, as live() does.
    for block in BLOCK_SIZES:
        seconds = 1.0 if args.quick else 20.0  # audio per variant
        rounds = max(5, int(seconds * args.sample_rate / block))
        fns = variants(model, block, activation, weight)
        last, previous = list(fns)[-1], list(fns)[-2]
        medians, ratios = interleaved(fns, rounds, pairs=[(last, previous)], warmup=3)
        budget = block / args.sample_rate
        plain, unbent, bent = medians.values()
        _, r_unbent, r_bent, r_bending = ratios.values()
        print(
            f"| {block} | {1000 * budget:.1f} | {1000 * plain:.3f} | {budget / plain:.1f} "
            f"| {budget / unbent:.1f} | {budget / bent:.1f} | {r_unbent:.3f} | {r_bent:.3f} "
            f"| {r_bending:.3f} |"
        )


if __name__ == "__main__":
    main()
