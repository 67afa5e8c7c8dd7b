"""Time to rank every hidden activation of each shipped model for one descriptor, on one thread,
and its growth with nodes and probes.

Run: python benchmarks/bench_discover.py [--quick] [--models tiny_ddsp tiny_rave]
     [--write docs/benchmarks.md docs/discover.md]

Each model (``tb.models.load(name)``, trained weights) is wrapped and traced once on the sound
(not timed), then ranked once untimed on its narrowest node (so that the timed runs find warm
caches). Timed: ``tb.discover.rank(bended, sound, "brightness", targets=...)`` with the default
probe (a push both ways on each channel) and 8 random directions per node, on one second of
assets/sounds/voice.wav (from 1 s, cut to a multiple of 256 samples: TinyDDSP's hop), one torch
thread, in this process. The targets grow: the 1, 2, 4, 8... narrowest candidate nodes, then
every candidate (every hidden activation with a channel axis: what ``targets=None`` probes).
A probe render is one item of a batch (a sound with one probe), described and compared with the
render without the probe; a ranking renders ``sounds x 2 x (channels + randoms)`` per node.

Reported per run: the nodes, the channels, the probe renders, the seconds and the seconds per
render; per model, the least-squares fit ``seconds = fixed + per render x renders`` and the
ratio of the largest to the smallest per-render cost net of the fixed part (1 for a cost that
grows exactly linearly with the renders). The load average is read before and after: on a
shared machine the figures say so.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch
from bench_call import cpu_name, write_sections

import torchbend as tb
from torchbend.discover import rank
from torchbend.discover.rank import candidate_nodes

MODELS = ("tiny_ddsp", "tiny_rave")
DESCRIPTOR = "brightness"
RANDOMS = 8
SOUND = Path(__file__).resolve().parents[1] / "assets" / "sounds" / "voice.wav"


def excerpt(seconds: float) -> tuple[torch.Tensor, int]:
    """``seconds`` of the voice from 1 s in, cut to a multiple of 256 samples."""
    voice, rate = tb.audio.io.load(str(SOUND))
    length = int(seconds * rate) // 256 * 256
    return voice[0, rate : rate + length], rate


def exact(nodes: list[str]) -> list[str]:
    return [f"^{n}$" for n in nodes]


def bench_model(
    name: str, x: torch.Tensor, rate: int, quick: bool
) -> tuple[list[dict], dict[str, int]]:
    """One row per ranking of ``name`` (its nodes, channels, probe renders and seconds), and
    the width (channels) of each candidate node."""
    bended = tb.BendedModule(tb.models.load(name))
    bended.trace(x=x[None, None])
    nodes = candidate_nodes(bended, "forward", None, 1)
    width = {n: bended.activation_shape(n)[1] for n in nodes}
    narrow = sorted(nodes, key=lambda n: width[n])  # stable: graph order among equals
    rank(bended, x, DESCRIPTOR, targets=exact(narrow[:1]), rate=rate, randoms=RANDOMS)
    counts = [1]
    while counts[-1] * 2 < len(nodes) and not (quick and counts[-1] >= 2):
        counts.append(counts[-1] * 2)
    if not quick:
        counts.append(len(nodes))
    rows = []
    for count in counts:
        chosen = narrow[:count]
        channels = sum(width[n] for n in chosen)
        renders = 2 * (channels + RANDOMS * count)  # one sound
        start = time.perf_counter()
        rank(bended, x, DESCRIPTOR, targets=exact(chosen), rate=rate, randoms=RANDOMS)
        seconds = time.perf_counter() - start
        row = {
            "model": name,
            "nodes": count,
            "of": len(nodes),
            "channels": channels,
            "renders": renders,
            "seconds": seconds,
        }
        rows.append(row)
        print(
            f"{name}: {count}/{len(nodes)} nodes, {channels} channels, {renders} renders, "
            f"{seconds:.1f} s ({1000 * seconds / renders:.1f} ms per render)",
            flush=True,
        )
    return rows, width


def fit(rows: list[dict]) -> tuple[float, float, float]:
    """``(fixed s, s per render, largest / smallest net per-render cost)`` over ``rows``."""
    renders = np.array([r["renders"] for r in rows], dtype=float)
    seconds = np.array([r["seconds"] for r in rows])
    if len(rows) < 2:
        return 0.0, float(seconds[0] / renders[0]), 1.0
    slope, fixed = np.polyfit(renders, seconds, 1)
    net = (seconds - fixed) / renders
    return float(fixed), float(slope), float(net.max() / net.min())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a quarter second, 1 and 2 nodes")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument(
        "--write",
        type=Path,
        nargs="+",
        default=[],
        help="Markdown files with a 'bench_discover' section (the table) or a "
        "'bench_discover_summary' one (a sentence), e.g. docs/benchmarks.md docs/discover.md",
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    x, rate = excerpt(0.25 if args.quick else 1.0)
    load_before = os.getloadavg()
    began = time.perf_counter()
    results = {name: bench_model(name, x, rate, args.quick) for name in args.models}
    total = time.perf_counter() - began
    load_after = os.getloadavg()
    command = "python benchmarks/bench_discover.py" + (" --quick" if args.quick else "")
    loaded = max(load_before[0], load_after[0]) > 0.5 * (os.cpu_count() or 1)
    load = (
        f"load average {load_before[0]:.1f} before and {load_after[0]:.1f} after on "
        f"{os.cpu_count()} cores"
        + (": the machine was shared with other work, and the times are longer" if loaded else "")
    )
    lines = [
        f"Measured by `{command} --write docs/benchmarks.md docs/discover.md` on one thread of "
        f"{cpu_name()} ({platform.machine()}, {os.cpu_count()} cores), torch "
        f'{torch.__version__}, {load}. `tb.discover.rank(bended, sound, "{DESCRIPTOR}", '
        f"targets=...)`: push probes both ways, {RANDOMS} random directions a node, on "
        f"{x.numel() / rate:.2f} s of assets/sounds/voice.wav at {rate} Hz, in this process; "
        "the targets are the 1, 2, 4... narrowest candidate nodes, then all of them (the "
        "model traced before, not timed). A probe render is a sound with one probe, rendered "
        "in a batch, described and compared with the unprobed render.",
        "",
        "| model | nodes | channels | probe renders | seconds | ms per render |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    summary, fits = [], []
    for name, (rows, width) in results.items():
        for r in rows:
            lines.append(
                f"| {name} | {r['nodes']} of {r['of']} | {r['channels']} | {r['renders']} | "
                f"{r['seconds']:.1f} | {1000 * r['seconds'] / r['renders']:.1f} |"
            )
        fixed, slope, ratio = fit(rows)
        fits.append(
            f"{name}: {fixed:.2f} s + {1000 * slope:.1f} ms x renders, net per-render cost "
            f"largest / smallest {ratio:.2f}"
        )
        full = rows[-1]
        wide = sorted(width, key=lambda n: -width[n])[:2]
        share = sum(2 * (width[n] + RANDOMS) for n in wide) / (
            2 * (sum(width.values()) + RANDOMS * len(width))
        )
        done = (
            f"every hidden activation ({full['of']} nodes, {full['channels']} channels, "
            f"{full['renders']} probe renders) in {full['seconds']:.0f} s"
            if full["nodes"] == full["of"]
            else f"{full['nodes']} of its {full['of']} nodes in {full['seconds']:.0f} s"
        )
        summary.append(
            f"`{name}`, {done}: {1000 * slope:.1f} ms per probe render plus {fixed:.1f} s "
            f"fixed, the net cost of a render within {ratio:.2f}x from {rows[0]['renders']} to "
            f"{full['renders']} renders; its two widest nodes ("
            + ", ".join(f"`{n}`, {width[n]} channels" for n in wide)
            + f") make {100 * share:.0f}% of a full ranking's renders"
        )
    lines += [
        "",
        "Fitted, seconds = fixed + per render x renders: "
        + "; ".join(fits)
        + f". Whole benchmark: {total:.0f} s.",
    ]
    summary_text = [
        f"On one thread of {cpu_name()} ({load}), ranking the channels of a shipped model for "
        f"one descriptor ({DESCRIPTOR}, {RANDOMS} random directions a node) on "
        f"{x.numel() / rate:.2f} s of sound: "
        + "; ".join(summary)
        + ". The cost grows linearly with the probe renders, sounds x 2 x (channels + "
        "randoms) a node, whatever the node: a node whose channel axis is long (time frames "
        "taken as channels) costs most; `targets=` skips it. Measured by "
        f"`{command} --write docs/benchmarks.md docs/discover.md` "
        "([docs/benchmarks.md](benchmarks.md)).",
    ]
    print("\n".join([*lines, "", *summary_text]))
    write_sections(args.write, {"bench_discover": lines, "bench_discover_summary": summary_text})


if __name__ == "__main__":
    main()
