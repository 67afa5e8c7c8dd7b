"""Realtime factor of streaming the shipped models block by block, bent and unbent, on one thread.

Run: python benchmarks/bench_realtime.py [--quick] [--sample-rate 44100]
     [--models tiny_ddsp tiny_rave] [--write docs/realtime.md] [--profile]

For each block size, one round processes a burst of 8 consecutive blocks with each variant
(after one untimed block, so that each runs with its own weights in the caches, as a stream
does), the variants in a shuffled order (seeded): the plain model, the BendedModule with
nothing bent, the BendedModule with a Mask on an activation and a Scale on a weight (the Mask
folded into the weights of the layer reading the activation: ``torchbend.engine.folding``), the same
with a Clamp instead of the Mask (which cannot fold: its slot runs on every block), and the
bent and unbent models exported for nn~ (``tb.export.nntilde``) and loaded back with
``torch.jit.load`` (the bending's cost without Python's per-call cost).
Reported: the median compute time per block (mean over a burst), the realtime factor (block
duration / median time) and the median over rounds of each variant's time over the plain
model's in the same round. Each model is
``torchbend.models.load(name)`` (trained weights); without them, the same architecture untrained
(same cost); without ``torchbend.models``, a conv stack (printed). ``--profile`` prints
instead where the plain model's time goes (torch's profiler, operators by self time) at
blocks of 256 and 2048, how many framework calls a block makes, and this machine's floor per
call (a scripted addition of a small tensor): what the calls cost whatever they compute.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import platform
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from bench_call import cpu_name, interleaved, write_sections
from torch import nn

import torchbend as tb
from torchbend.audio.stream import Stream

BLOCK_SIZES = (256, 512, 1024, 2048, 4096, 8192)
BURST = 8  # consecutive blocks per variant and round, as a stream runs them


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


TARGETS = {
    "tiny_ddsp": (r"decoder_1$", r"decoder\.2\.weight"),
    "tiny_rave": (r"decoder_1$", r"decoder\.2\.weight"),
}
"""What each shipped model is bent on: an activation (masked) and a weight (scaled)."""


def load_model(name: str) -> tuple[nn.Module, str, str, str]:
    """The model, its description, an activation pattern and a weight pattern to bend."""
    try:
        from torchbend import models
    except ImportError:
        return CausalConvStack().eval(), "fallback causal conv stack", r"tanh_2$", r"convs\.2\."
    try:
        model = models.load(name)
        label = f"torchbend.models.load({name!r}) (trained weights)"
    except Exception as e:  # missing weights file: same architecture, same cost
        model = models.MODELS[name]().eval()
        label = f"{name}, untrained (models.load({name!r}) failed: {type(e).__name__})"
    set_streaming = getattr(model, "set_streaming", None)
    if callable(set_streaming):
        set_streaming(True)
    return model, label, *TARGETS[name]


def variants(
    model: nn.Module, block: int, activation: str, weight: str, folder: Path
) -> dict[str, Callable[[], object]]:
    x = torch.randn(1, block, generator=torch.Generator().manual_seed(0)) * 0.1
    unbent = tb.BendedModule(model)
    unbent.trace(x=torch.zeros(1, 1, block))
    bent = tb.BendedModule(model)
    bent.trace(x=torch.zeros(1, 1, block))
    bent.bend(tb.Mask(0.3, dim=-2, seed=0), activation)
    bent.bend(tb.Scale(0.8), weight)
    # A Clamp instead of the Mask cannot be folded into weights: its slot runs on every block.
    slot = tb.BendedModule(model)
    slot.trace(x=torch.zeros(1, 1, block))
    slot.bend(tb.Clamp(-0.5, 0.5), activation)
    slot.bend(tb.Scale(0.8), weight)
    ratio = int(getattr(model, "ratio", 1))
    files = {}
    for label, bended in (("bent", bent), ("unbent", unbent)):
        path = folder / f"{label}_{block}.ts"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tb.export.nntilde(bended, path, methods=["forward"])
        files[label] = Stream(torch.jit.load(path), block_size=block, ratio=ratio)
    streams = {
        "plain module": Stream(model, block_size=block),
        "bended, nothing bent": Stream(unbent, block_size=block),
        "bended, Mask + Scale": Stream(bent, block_size=block),
        "bended, Clamp + Scale": Stream(slot, block_size=block),
        "nn~ file of the bent model": files["bent"],
        "nn~ file of the unbent model": files["unbent"],
    }
    return {k: functools.partial(s.process_block, x) for k, s in streams.items()}


def op_floor() -> float:
    """Microseconds per framework call of this machine's floor: a scripted loop of additions
    on a ``[1, 49, 1]`` tensor (no arithmetic to speak of: dispatch, allocation, the
    interpreter), the best of 5 rounds."""

    @torch.jit.script
    def adds(x: torch.Tensor) -> torch.Tensor:
        for _ in range(100):
            x = x + 1.0
        return x

    x = torch.zeros(1, 49, 1)
    with torch.no_grad():
        for _ in range(50):
            adds(x)
        best = math.inf
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(200):
                adds(x)
            best = min(best, (time.perf_counter() - start) / 200 / 100)
    return 1e6 * best


def profile(model: nn.Module) -> None:
    """Operators by self time when streaming ``model`` at blocks of 256 and 2048 samples, the
    framework calls a block makes (those not made by another call: the ones that pay the
    dispatch) and what they cost at this machine's floor (:func:`op_floor`)."""
    from torch.profiler import profile as profiler

    floor = op_floor()
    print(f"floor: {floor:.2f} us per framework call (a scripted addition on [1, 49, 1])")
    for block in (256, 2048):
        stream = Stream(model, block_size=block)
        x = torch.randn(1, block) * 0.1
        for _ in range(20):
            stream.process_block(x)
        with profiler() as prof:
            for _ in range(200):
                stream.process_block(x)
        calls = sum(
            1
            for e in prof.events()
            if e.name.startswith("aten::")
            and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))
        )
        per_block = calls / 200
        budget = 1e6 * block / 44100
        print(
            f"\nblock {block}, 200 blocks: {per_block:.0f} framework calls a block, "
            f"{per_block * floor / 1000:.2f} ms at the floor (the block lasts {budget / 1000:.2f} "
            f"ms: {budget / 10 / floor:.0f} calls fit in a tenth of it)"
        )
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


def measure(
    model: nn.Module,
    name: str,
    args: argparse.Namespace,
    activation: str,
    weight: str,
    lines: list[str],
) -> str:
    """Add ``model``'s rows to ``lines``; return its summary (the slowest variant's realtime
    factor at blocks of 2048 and 256, and what bending costs)."""
    # Stream runs the model under torch.no_grad, as live() does.
    slowest: dict[int, float] = {}  # the lowest realtime factor of the variants, per block
    bending: dict[int, float] = {}  # bent / nothing bent, per block
    slots: dict[int, float] = {}  # bent with a slot / nothing bent, per block
    with tempfile.TemporaryDirectory() as folder:
        for block in args.blocks:
            seconds = 1.0 if args.quick else 20.0  # audio per variant
            rounds = max(5, int(seconds * args.sample_rate / block / BURST))
            fns = variants(model, block, activation, weight, Path(folder))
            plain, unbent, bent, slot, file, file_unbent = fns
            pairs = [(bent, unbent), (slot, unbent), (file, bent), (file, file_unbent)]
            medians, ratios = interleaved(fns, rounds, pairs=pairs, warmup=3, burst=BURST)
            budget = block / args.sample_rate
            factor = {k: budget / medians[k] for k in (plain, unbent, bent, file)}
            lines.append(
                f"| {name} | {block} | {1000 * budget:.1f} | {1000 * medians[plain]:.3f} "
                + "".join(f"| {factor[k]:.1f} " for k in (plain, unbent, bent, file))
                + "".join(f"| {ratios[k]:.3f} " for k in (unbent, bent))
                + "".join(f"| {ratios[f'{a} / {b}']:.3f} " for a, b in pairs)
                + "|"
            )
            print(lines[-1], flush=True)
            slowest[block] = min(factor.values())
            bending[block] = ratios[f"{bent} / {unbent}"]
            slots[block] = ratios[f"{slot} / {unbent}"]
    return (
        f"`{name}` streams at "
        + " and ".join(
            f"{slowest[b]:.0f}x realtime or more at blocks of {b} samples"
            for b in (2048, 256)
            if b in slowest
        )
        + f" (bending costs {100 * (max(bending.values()) - 1):+.0f}% at most, folded into "
        f"the weights; {100 * (max(slots.values()) - 1):+.0f}% at most for a bending that runs "
        "in its slot)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few rounds (a smoke test)")
    parser.add_argument("--sample-rate", type=int, default=44100)
    parser.add_argument("--blocks", type=int, nargs="+", default=list(BLOCK_SIZES))
    parser.add_argument(
        "--write",
        type=Path,
        nargs="+",
        default=[],
        help="Markdown files with a 'bench_realtime' section (the table) or a "
        "'bench_realtime_summary' one (a sentence), e.g. docs/realtime.md README.md",
    )
    parser.add_argument("--profile", action="store_true", help="where the plain model's time goes")
    parser.add_argument("--models", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    if args.profile:
        for name in args.models:
            print(f"\n{name}:")
            profile(load_model(name)[0])
        return
    lines = [
        f"Measured by `python benchmarks/bench_realtime.py --write docs/realtime.md README.md` on "
        f"one thread of {cpu_name()} ({platform.machine()}, {os.cpu_count()} cores), torch "
        f"{torch.__version__}, {args.sample_rate} Hz, the shipped models with their trained "
        "weights; bent: Mask(0.3, dim=-2) on an activation and Scale(0.8) on a weight (named "
        "below); bent, slot: Clamp(-0.5, 0.5) instead of the Mask, which cannot fold.",
        "",
        "| model | block | latency (ms) | plain: ms / block | plain: x realtime "
        "| nothing bent: x realtime | bent: x realtime | nn~ file: x realtime "
        "| nothing bent / plain | bent / plain | bent / nothing bent "
        "| bent, slot / nothing bent | nn~ file / bent | nn~ files: bent / unbent |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    print("\n".join(lines), flush=True)
    notes, summary = [], []
    for name in args.models:
        model, label, activation, weight = load_model(name)
        notes.append(f"`{name}`: {label}; bent on activation `{activation}` and weight `{weight}`.")
        summary.append(measure(model, name, args, activation, weight, lines))
    lines += ["", *notes]
    summary = [
        f"On one thread of {cpu_name()}, "
        + "; ".join(summary)
        + " (plain, bended, bent and exported for nn~ alike), measured by "
        "`python benchmarks/bench_realtime.py` ([docs/realtime.md](docs/realtime.md)).",
    ]
    write_sections(args.write, {"bench_realtime": lines, "bench_realtime_summary": summary})


if __name__ == "__main__":
    main()
