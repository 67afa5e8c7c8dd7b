"""Streaming a model that keeps no state: what the streaming check measures, what
``tb.audio.make_streaming`` gives, and what the check costs on the shipped models.

Run: python benchmarks/bench_streaming.py [--write docs/realtime.md]

The three models of ``tests/audio/stateless.py`` (random weights, seed 0): a WaveNet-style
stack of causal dilated convolutions with residual adds, convolutions with centred padding, a
GRU. For each, at blocks of 64, 256 and 1024 samples: the check on the model as it is
(``Stream(model).check_streaming()``: the largest difference between block by block and one
pass, its mean within a few samples of block edges and elsewhere), then the converted model
block by block against the original in one pass, shifted by the latency it reports. Then the
check's time on the shipped models streaming (median of 5 fresh streams after one, one thread).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/audio/stateless.py

from bench_call import cpu_name, write_section

from tests.audio.stateless import Centred, Recurrent, WaveNet, built, converted_error
from torchbend import models
from torchbend.audio import Stream, make_streaming

BLOCKS = (64, 256, 1024)


def check_time(name: str, block: int) -> float:
    model = models.load(name).set_streaming(True)
    Stream(model, block_size=block).check_streaming()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        Stream(model, block_size=block).check_streaming()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--write", type=Path, help="a Markdown file with a 'bench_streaming' section"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    lines = [
        f"Measured by `python benchmarks/bench_streaming.py --write docs/realtime.md` on one "
        f"thread of {cpu_name()}, torch {torch.__version__}.",
        "",
        "| model | block | as it is: max difference | mean near block edges | elsewhere "
        "| converted: latency | max difference |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for kind in (WaveNet, Centred, Recurrent):
        for block in BLOCKS:
            check = Stream(built(kind), block_size=block, check=False).check_streaming()
            model = built(kind)
            streaming = make_streaming(model)
            latency, error = streaming.latency, converted_error(model, streaming, block, 8)
            lines.append(
                f"| {kind.__name__} | {block} | {check.max_error:.3g} | {check.edge_error:.3g} "
                f"| {check.inner_error:.3g} | {latency} | {error:.2g} |"
            )
    lines += ["", "| shipped model | block | check's time (s) |", "|---|---:|---:|"]
    for name, block in (
        ("tiny_ddsp", 256),
        ("tiny_ddsp", 2048),
        ("tiny_rave", 256),
        ("tiny_rave", 2048),
    ):
        lines.append(f"| {name} | {block} | {check_time(name, block):.3f} |")
    print("\n".join(lines))
    if args.write:
        write_section(args.write, "bench_streaming", lines)


if __name__ == "__main__":
    main()
