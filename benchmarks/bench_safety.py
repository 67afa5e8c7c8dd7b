"""Cost of the safety stage (``tb.audio.Safety``) per block, against the shipped model's block.

Run: python benchmarks/bench_safety.py [--quick] [--block 2048] [--write docs/benchmarks.md]

On one thread, at blocks of 2048 samples (44.1 kHz, mono), each round runs a burst of 8
consecutive blocks of each variant, the variants in a shuffled order (seeded), after one
untimed block: the shipped model streamed alone (``Stream(model)``, the baseline), the same
stream with the stage (``Stream(model, safety=True)``), and the stage alone, eager and
scripted (as the nn~ export runs it), on the model's output (where it only removes DC: the
limiter skips blocks below its threshold) and on that output times 1e6 (a blown-up bending:
the limiter works on every sample). Reported: the median time per block (mean over a burst),
that time over the block's duration (its time budget, live), and the median over rounds of
each variant's time over the baseline's in the same round.
The model is TinyRave, ``torchbend.models.load("tiny_rave")`` (trained weights; without them,
the same architecture untrained, which costs the same).
"""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path

import torch
from bench_call import cpu_name, interleaved, write_section

from torchbend import models
from torchbend.audio.safety import Safety
from torchbend.audio.stream import Stream

BURST = 8  # consecutive blocks per variant and round, as a stream runs them
SAMPLE_RATE = 44100


def load_model() -> tuple[torch.nn.Module, str]:
    try:
        model, label = models.load("tiny_rave"), 'torchbend.models.load("tiny_rave") (trained)'
    except Exception as e:  # missing weights file: same architecture, same cost
        model = models.TinyRave().eval()
        label = f"TinyRave, untrained (models.load('tiny_rave') failed: {type(e).__name__})"
    model.set_streaming(True)
    return model, label


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few rounds (a smoke test)")
    parser.add_argument("--block", type=int, default=2048, help="samples per block")
    parser.add_argument(
        "--write", type=Path, help="a Markdown file with a 'bench_safety' section to rewrite"
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model, label = load_model()
    block = args.block
    x = torch.randn(1, block, generator=torch.Generator().manual_seed(0)) * 0.1
    plain = Stream(model, block_size=block, sample_rate=SAMPLE_RATE)
    safe = Stream(model, block_size=block, sample_rate=SAMPLE_RATE, safety=True)
    with torch.no_grad():
        y = plain.process_block(x)[None]
    loud = y * 1e6
    eager, eager_loud = Safety(SAMPLE_RATE), Safety(SAMPLE_RATE)
    scripted, scripted_loud = (torch.jit.script(Safety(SAMPLE_RATE)) for _ in range(2))
    fns = {
        "model block (Stream)": lambda: plain.process_block(x),
        "model block, safety=True (Stream)": lambda: safe.process_block(x),
        "stage alone, eager, model output": lambda: eager(y),
        "stage alone, eager, output x 1e6": lambda: eager_loud(loud),
        "stage alone, scripted, model output": lambda: scripted(y),
        "stage alone, scripted, output x 1e6": lambda: scripted_loud(loud),
    }
    seconds = 1.0 if args.quick else 120.0  # audio per variant
    rounds = max(5, int(seconds * SAMPLE_RATE / block / BURST))
    with torch.no_grad():
        medians, ratios = interleaved(fns, rounds, warmup=3, burst=BURST)
    lines = [
        f"Measured by `python benchmarks/bench_safety.py` on one thread of {cpu_name()} "
        f"({platform.machine()}, {os.cpu_count()} cores, no GPU), torch {torch.__version__}, "
        f"blocks of {block} samples at {SAMPLE_RATE} Hz ({1000 * block / SAMPLE_RATE:.1f} ms), "
        f"mono; model: {label}; {rounds} rounds of {BURST} blocks.",
        "",
        "| variant | ms / block | share of the block's time budget "
        "| ratio to the model's block (paired median) |",
        "|---|---:|---:|---:|",
    ]
    budget = block / SAMPLE_RATE
    lines += [
        f"| {k} | {1000 * medians[k]:.3f} | {100 * medians[k] / budget:.2f}% | {ratios[k]:.3f} |"
        for k in fns
    ]
    print("\n".join(lines))
    if args.write is not None:
        write_section(args.write, "bench_safety", lines)


if __name__ == "__main__":
    main()
