"""Trace time of torchbend's backends against torch.export alone, on third-party models.

Run: cd benchmarks && python bench_backends.py [--rounds N] [--write ../docs/benchmarks.md]

For each model of a representative set from the third-party zoo (``tests/zoo/models.py``:
tiny, randomly initialised, nothing downloaded), times in interleaved rounds:

- ``torch.export.export(strict=False)`` alone (the baseline of the ratios),
- ``BendedModule(backend="concrete").trace`` and ``BendedModule(backend="export").trace``
  (each with torchbend's self-check, as users run them),
- one eager call of the model, to show what a trace costs in calls.

Prints the median of each and the ratio of each backend to torch.export measured in the same
rounds; ``--write`` puts the table into the ``bench_backends`` section of a Markdown file.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from bench_call import cpu_name, write_section

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "zoo")]

from models import ALL, ZooModel  # noqa: E402

import torchbend as tb  # noqa: E402

MODELS = (
    "LlamaModel",
    "BertModel",
    "T5Model",
    "Wav2Vec2Model",
    "EncodecModel",
    "SpeechT5HifiGan",
    "UNet2DModel",
    "AutoencoderKL",
    "TransformerWrapper(Decoder)",
)
"""One or two per family: decoder, encoder, encoder-decoder, speech, codec, vocoder,
diffusion, VAE, einops."""


class _Call(torch.nn.Module):
    def __init__(self, root: torch.nn.Module, method: str) -> None:
        super().__init__()
        self.root, self.method = root, method

    def forward(self, **inputs: Any) -> Any:
        return getattr(self.root, self.method)(**inputs)


def _timed(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def _runs(model: ZooModel) -> dict[str, Callable[[], Any]]:
    module, inputs = model.build()

    def export() -> Any:
        return torch.export.export(_Call(module, model.method), (), inputs, strict=False)

    def backend(name: str) -> Callable[[], Any]:
        return lambda: tb.BendedModule(module, backend=name).trace(model.method, **inputs)

    def eager() -> Any:
        with torch.no_grad():
            return getattr(module, model.method)(**inputs)

    return {
        "torch.export": export,
        "concrete": backend("concrete"),
        "export": backend("export"),
        "eager call": eager,
    }


def bench(model: ZooModel, rounds: int) -> dict[str, float | None]:
    """Median seconds of each run over ``rounds`` interleaved rounds (``None``: it fails)."""
    runs = _runs(model)
    times: dict[str, list[float]] = {k: [] for k in runs}
    failed: set[str] = set()
    for _ in range(rounds):
        for name, run in runs.items():
            if name in failed:
                continue
            try:
                times[name].append(_timed(run))
            except Exception:
                failed.add(name)
    return {k: None if k in failed else statistics.median(v) for k, v in times.items()}


def _cell(seconds: float | None) -> str:
    return "fails" if seconds is None else f"{seconds * 1000:.0f} ms"


def _ratio(seconds: float | None, base: float | None) -> str:
    return "-" if seconds is None or base is None else f"{seconds / base:.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", type=Path, help="a Markdown file with the section")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    logging.disable(logging.CRITICAL)  # torch.export logs the graphs it fails on
    torch.set_num_threads(1)
    lines = [
        f"Measured on {cpu_name()} ({os.cpu_count()} cores), one thread, "
        f"torch {torch.__version__}, median of {args.rounds} interleaved rounds.",
        "",
        "| model | eager call | torch.export alone | concrete backend | ratio | export backend "
        "| ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    by_name = {m.name: m for m in ALL}
    for name in MODELS:
        t = bench(by_name[name], args.rounds)
        base = t["torch.export"]
        lines.append(
            f"| `{name}` | {_cell(t['eager call'])} | {_cell(base)} | {_cell(t['concrete'])} | "
            f"{_ratio(t['concrete'], base)} | {_cell(t['export'])} | {_ratio(t['export'], base)} |"
        )
        print(lines[-1], flush=True)
    if args.write:
        write_section(args.write, "bench_backends", lines)
        print(f"wrote the bench_backends section of {args.write}")


if __name__ == "__main__":
    main()
