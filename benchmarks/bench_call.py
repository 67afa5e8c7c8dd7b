"""Per-call overhead of BendedModule against the plain module, and trace time against torch.fx.

Run: python benchmarks/bench_call.py [--quick] [--trace-only] [--write ../docs/benchmarks.md]

Prints, for each model and thread setting, the median time of interleaved calls and the ratio
of each bended variant to the plain module measured in the same run.
"""

from __future__ import annotations

import argparse
import platform
import random
import re
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

import torchbend as tb


class ConvStack(nn.Module):
    """A conv1d audio model: ``layers`` conv + activation blocks of ``channels`` channels."""

    def __init__(self, layers: int, channels: int) -> None:
        super().__init__()
        self.inp = nn.Conv1d(1, channels, 3, padding=1)
        self.convs = nn.ModuleList(
            nn.Conv1d(channels, channels, 3, padding=1) for _ in range(layers - 2)
        )
        self.out = nn.Conv1d(channels, 1, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.inp(x))
        for conv in self.convs:
            x = torch.tanh(conv(x)) + x
        return self.out(x)


def interleaved(
    fns: dict[str, Callable[[], object]],
    rounds: int,
    pairs: Sequence[tuple[str, str]] = (),
    warmup: int = 1,
    burst: int = 1,
) -> tuple[dict[str, float], dict[str, float]]:
    """Median seconds per call of each function, and median ratio to the first function.

    Each round calls every function, in a shuffled order (seeded); the ratio of a function
    is taken within each round, then the median over rounds is reported. Each ``(a, b)`` of
    ``pairs`` adds the ratio ``"a / b"`` measured the same way. With ``burst > 1`` a round
    calls each function once untimed then ``burst`` times in a row, and times the mean of
    those: each runs with its own data in the caches, as it would alone, while the rounds
    still interleave the functions against drifts of the machine.
    """
    times: dict[str, list[float]] = {k: [] for k in fns}
    rng = random.Random(0)
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    for _ in range(rounds):
        order = list(fns)
        rng.shuffle(order)
        for name in order:
            fn = fns[name]
            if burst > 1:
                fn()
            t0 = time.perf_counter()
            for _ in range(burst):
                fn()
            times[name].append((time.perf_counter() - t0) / burst)
    base = next(iter(fns))
    medians = {k: statistics.median(v) for k, v in times.items()}
    ratios = {k: statistics.median(a / b for a, b in zip(v, times[base])) for k, v in times.items()}
    for a, b in pairs:
        ratios[f"{a} / {b}"] = statistics.median(x / y for x, y in zip(times[a], times[b]))
    return medians, ratios


def bended_variants(package: Any, model: nn.Module, x: torch.Tensor) -> dict[str, nn.Module]:
    """``model`` wrapped by ``package`` (torchbend, or another version of it) three ways:
    nothing bent, an activation masked, a weight scaled."""
    variants = {}
    for label in ("nothing bent", "activation masked", "weight scaled"):
        bended = package.BendedModule(model)
        bended.trace(x=x)
        if label == "activation masked":
            bended.bend(package.Mask(0.3, dim=-2, seed=0), "convs_3$")
        elif label == "weight scaled":
            bended.bend(package.Scale(0.5), r"convs\.3\.weight")
        variants[label] = bended
    return variants


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else the platform's."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def write_section(path: Path, name: str, lines: list[str]) -> None:
    """Replace what lies between the markers ``<!-- name: ... -->`` and ``<!-- /name -->`` in
    Markdown file ``path`` with ``lines`` (how the benchmarks write their tables into docs)."""
    text = path.read_text()
    start = re.search(rf"<!-- {name}:[^>]*-->", text)
    end = text.find(f"<!-- /{name} -->")
    if start is None or end < start.end():
        raise SystemExit(f"{path} has no '<!-- {name}: ... -->' ... '<!-- /{name} -->' section")
    path.write_text(text[: start.end()] + "\n" + "\n".join(lines) + "\n" + text[end:])


def write_sections(paths: list[Path], sections: dict[str, list[str]]) -> None:
    """Write into each of ``paths`` the ``sections`` (by name) it has markers for; a file with
    none of them is an error (a mistyped path)."""
    for path in paths:
        text = path.read_text()
        found = [name for name in sections if f"<!-- {name}:" in text]
        if not found:
            raise SystemExit(f"{path} has none of the sections {', '.join(sections)}")
        for name in found:
            write_section(path, name, sections[name])


def bench_calls(layers: int, channels: int, length: int, rounds: int) -> list[str]:
    torch.manual_seed(0)
    model = ConvStack(layers, channels).eval()
    x = torch.randn(1, 1, length)
    variants: dict[str, nn.Module] = {"plain": model, **bended_variants(tb, model, x)}
    lines = []
    for threads in (1, torch.get_num_threads()):
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        with torch.inference_mode():
            med, ratio = interleaved({k: (lambda m=m: m(x)) for k, m in variants.items()}, rounds)
        torch.set_num_threads(previous)
        for k, v in med.items():
            lines.append(
                f"| conv {layers}x{channels}, [1, 1, {length}] | {threads} | {k} | "
                f"{v * 1e3:.3f} ms | {ratio[k]:.3f}x |"
            )
    return lines


def bench_trace(layers: int, channels: int, length: int, rounds: int) -> str:
    model = ConvStack(layers, channels).eval()
    x = torch.randn(1, 1, length)

    def fx() -> None:
        torch.fx.symbolic_trace(model)
        model(x)

    def bend() -> None:
        tb.BendedModule(model).trace(x=x)

    def unchecked() -> None:
        tb.BendedModule(model, check=False).trace(x=x)

    fns = {"fx": fx, "torchbend": bend, "unchecked": unchecked}
    med, ratio = interleaved(fns, rounds, pairs=[("torchbend", "unchecked")])
    return (
        f"| conv {layers}x{channels}, [1, 1, {length}] | {med['fx'] * 1e3:.2f} ms | "
        f"{med['torchbend'] * 1e3:.2f} ms | {ratio['torchbend']:.2f}x | "
        f"{med['unchecked'] * 1e3:.2f} ms | {ratio['torchbend / unchecked']:.2f}x |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few rounds (smoke test)")
    parser.add_argument("--trace-only", action="store_true", help="only the trace table")
    parser.add_argument("--write", type=Path, help="write the tables into this Markdown file")
    args = parser.parse_args()
    rounds = 5 if args.quick else 200
    configs = [(8, 32, 4096), (16, 128, 16384)]
    if args.trace_only:
        lines = trace_table(configs, rounds)
        print("\n".join(lines))
        if args.write:
            write_section(args.write, "bench_trace", lines)
        return
    calls = [
        "| model | threads | variant | median call | median ratio to plain (paired) |",
        "|---|---|---|---|---|",
    ]
    for layers, channels, length in configs:
        for line in bench_calls(
            layers, channels, length, rounds if channels < 128 else rounds // 4
        ):
            calls.append(line)
            print(line, flush=True)
    if args.write:
        write_section(args.write, "bench_calls", calls)
    print()
    trace = trace_table(configs, rounds)
    print("\n".join(trace))
    if args.write:
        write_section(args.write, "bench_trace", trace)


def trace_table(configs: list[tuple[int, int, int]], rounds: int) -> list[str]:
    lines = [
        "| model | fx.symbolic_trace + eager call | BendedModule.trace | ratio to fx "
        "| trace, check=False | cost of the check (paired) |",
        "|---|---|---|---|---|---|",
    ]
    for layers, channels, length in configs:
        lines.append(bench_trace(layers, channels, length, max(3, rounds // 20)))
    return lines


if __name__ == "__main__":
    main()
