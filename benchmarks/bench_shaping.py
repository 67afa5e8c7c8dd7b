"""Cost of the bending options (blend, subset, window, guard) on the shipped model, streamed.

Run: python benchmarks/bench_shaping.py [--quick] [--write docs/benchmarks.md]

Every activation of the encoder and the decoder is bent by ``Scale(1.5)``; each row applies it
with other options, by blocks of 2048 samples (the model streaming), one thread. Ratios are
paired medians against the plain bending measured in the same run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from bench_call import cpu_name, interleaved, write_section

import torchbend as tb

BLOCK = 2048
PATTERN = r"(encoder|decoder)_\d+$"


def bended(**options: object) -> tb.BendedModule:
    model = tb.models.load("tiny_rave").set_streaming(True)
    b = tb.BendedModule(model)
    b.trace(x=torch.zeros(1, 1, BLOCK))
    b.bend(tb.Scale(1.5), PATTERN, **options)  # type: ignore[arg-type]
    return b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--write", type=Path, help="a Markdown file with a 'bench_shaping' section to rewrite"
    )
    args = parser.parse_args()
    rounds = 5 if args.quick else 300
    torch.manual_seed(0)
    torch.set_num_threads(1)
    x = torch.randn(1, 1, BLOCK) * 0.1
    cases = {
        "Scale(1.5), no option": bended(),
        "blend=0.5": bended(blend=0.5),
        "subset=tb.Subset(0.5, dim=-2)": bended(subset=tb.Subset(0.5, dim=-2)),
        "window=tb.Window(256, 1792, fade=128)": bended(window=tb.Window(256, 1792, fade=128)),
        "guard=True (finite, std <= 4x)": bended(guard=True),
        "guard=tb.Guard(std=None) (finite only)": bended(guard=tb.Guard(std=None)),
        "all four": bended(
            blend=0.5, subset=tb.Subset(0.5, dim=-2), window=(256, 1792), guard=True
        ),
    }
    nodes = len(cases["guard=True (finite, std <= 4x)"].bended_keys())
    with torch.inference_mode():
        med, ratio = interleaved({k: (lambda b=b: b(x)) for k, b in cases.items()}, rounds)
    lines = [
        f"| tiny_rave, {nodes} activations bent, blocks of {BLOCK}, one thread of {cpu_name()}, "
        f"torch {torch.__version__}, {rounds} rounds | median per block | ratio (paired) |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {t * 1e3:.3f} ms | {ratio[name]:.3f}x |" for name, t in med.items()]
    block_ms = BLOCK / 44100 * 1e3
    extra = med["guard=True (finite, std <= 4x)"] - med["Scale(1.5), no option"]
    lines += [
        "",
        f"guard=True on {nodes} activations adds {extra * 1e3:.3f} ms per block, "
        f"{extra * 1e3 / block_ms:.1%} of a block's {block_ms:.1f} ms at 44.1 kHz.",
    ]
    print("\n".join(lines))
    if args.write is not None:
        write_section(args.write, "bench_shaping", lines)


if __name__ == "__main__":
    main()
