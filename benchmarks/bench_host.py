"""The figures of docs/hosts.md: the delay of the README's nn~ file at each buffer size, and
what it costs and gives in the real nn~ inside Pure Data on this machine.

Run: python benchmarks/bench_host.py [--write docs/hosts.md docs/benchmarks.md]

Exports the README's model (``torchbend export tiny_ddsp --format nntilde``), prints
``tb.export.latency`` of the file (what ``torchbend check FILE --latency`` prints), then plays
the shipped voice through it in headless Pd (nn~'s external from ``TORCHBEND_NNTILDE``, see
tests/pdhost.py) at each buffer size, one nn~ object per run: Pd's time per second of audio
against the same file called the same way in Python on one thread in the same run (the
ratio), and the largest difference from the file called as nn~ calls it and from Python's
stream. With ``--write``, replaces the sections ``latency`` and ``pd-cost`` of the page.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from bench_call import cpu_name, write_sections  # noqa: E402

import torchbend as tb  # noqa: E402
from tests.pdhost import delays, missing, nn_emulation, play  # noqa: E402
from torchbend.audio import io  # noqa: E402
from torchbend.cli import main as torchbend  # noqa: E402

BUFFERS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)
SECONDS = 3.0


def export(folder: Path) -> Path:
    """The README's command's file (its bendings change no delay)."""
    file = folder / "bended.ts"
    code = torchbend(["export", "tiny_ddsp", "--format", "nntilde", "-o", str(file)])
    if code != 0:
        raise SystemExit(f"torchbend export failed with {code}")
    return file


def latency_lines(file: Path) -> list[str]:
    """The latency table, as ``torchbend check --latency`` prints it (the file named
    ``bended.ts``)."""
    table = str(tb.export.latency(file)).replace(str(file), "bended.ts")
    return ["```", "$ torchbend check bended.ts --latency", *table.splitlines()[1:], "```"]


def cost_lines(file: Path, folder: Path) -> list[str]:
    """Pd's time per second of audio and the differences, per buffer size."""
    length = int(SECONDS * 44100) // 8192 * 8192
    audio, _ = io.load(ROOT / "assets" / "sounds" / "voice.wav", 44100)
    voice = audio.mean(0, keepdim=True)[:, :length].numpy().astype(np.float32)
    model = tb.models.load("tiny_ddsp").set_streaming(True)
    with torch.no_grad():
        python = tb.audio.Stream(model, block_size=2048).process(torch.from_numpy(voice)).numpy()
    late = delays(file)
    lines = [
        f"Measured by `python benchmarks/bench_host.py` on {cpu_name()} ({platform.machine()}, "
        f"{os.cpu_count()} cores), Pd 0.53.1 and nn~ 1.6 with one libtorch thread, "
        f"{length / 44100:.2f} s of the shipped voice through the README's file; Python: the "
        "same file called buffer by buffer on one thread, in the same run:",
        "",
        "| buffer | Pd's time per second of audio | x realtime in Pd | Pd / Python "
        "| Pd vs the file as nn~ calls it | Pd vs Python's stream |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    seconds = length / 44100
    threads = torch.get_num_threads()
    for n in BUFFERS:
        run = play(file, voice, folder / f"pd{n}", buffers=(n,))
        played = run.outputs[n]
        torch.set_num_threads(1)
        start = time.perf_counter()
        called = np.abs(played - nn_emulation(file, voice, n)).max()
        in_python = (time.perf_counter() - start) * 1000 / seconds
        torch.set_num_threads(threads)
        streamed = np.abs(played[:, late[n] :] - python[:, : length - late[n]]).max()
        in_pd = (run.elapsed_ms or float("nan")) / seconds
        lines.append(
            f"| {n} | {in_pd:.0f} ms | {1000 / in_pd:.1f} | {in_pd / in_python:.2f} "
            f"| {called:.1e} | {streamed:.1e} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", type=Path, nargs="+", help="the pages whose sections to replace")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        file = export(folder)
        sections = {"latency": latency_lines(file)}
        reason = missing()
        if reason is None:
            sections["pd-cost"] = cost_lines(file, folder)
        else:
            print(f"no real host here ({reason}): the Pd figures are left as they are")
        for lines in sections.values():
            print("\n".join(lines), end="\n\n")
        if args.write:
            write_sections(args.write, sections)


if __name__ == "__main__":
    main()
