"""The delay an nn~ file adds in Pure Data, per buffer size and sample rate, as hosts report it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import ExportError
from .contract import MAX_BUFFER_SIZE, FileContract, buffer_sizes, error_summary, is_power_of_two
from .fifo import fifo_latency
from .reader import read_latency

__all__ = ["PD_BLOCK", "SAMPLE_RATES", "LatencyRow", "LatencyTable", "latency"]

PD_BLOCK = 64
"""Pure Data's block, in samples: nn~ gets its input 64 samples at a time."""

SAMPLE_RATES = (44100, 48000, 96000)
"""The sample rates :func:`latency` gives milliseconds at by default, in Hz."""


@dataclass(frozen=True)
class LatencyRow:
    """The delay of one buffer size, in samples (the same at every sample rate)."""

    buffer: int
    """nn~'s buffer ``N`` (its argument or ``bufsize``), in samples."""
    host: int | None
    """nn~'s own buffering with its compute thread, ``2N - 64`` (measured in Pd 0.53: a
    buffer is gathered, then computed while the next one is gathered); ``None`` below Pd's
    64-sample block, where nn~ loses samples whatever the file."""
    fifo: int
    """The file's FIFO: its block when ``N`` holds no whole block, else 0."""
    model: int
    """The model's own delay (the file's ``latency``)."""

    @property
    def total(self) -> int | None:
        """Input to output, in samples, or ``None`` where nn~ cannot run the buffer."""
        return None if self.host is None else self.host + self.fifo + self.model


@dataclass(frozen=True)
class LatencyTable:
    """What :func:`latency` gives: one :class:`LatencyRow` per buffer size."""

    path: str
    rows: tuple[LatencyRow, ...]
    sample_rates: tuple[int, ...]

    def ms(self, samples: int | None, sample_rate: int) -> float | None:
        """``samples`` in milliseconds at ``sample_rate``."""
        return None if samples is None else 1000.0 * samples / sample_rate

    def records(self) -> list[dict[str, Any]]:
        """One dict per buffer size and sample rate (DataFrame-ready): the delays in samples
        (``host``, ``fifo``, ``model``, ``total``) and in milliseconds (``*_ms``)."""
        out = []
        for r in self.rows:
            for rate in self.sample_rates:
                parts = {"host": r.host, "fifo": r.fifo, "model": r.model, "total": r.total}
                ms = {f"{k}_ms": self.ms(v, rate) for k, v in parts.items()}
                out.append({"buffer": r.buffer, "sample_rate": rate, **parts, **ms})
        return out

    def __str__(self) -> str:
        rates = "".join(f"{f'ms @{r}':>11}" for r in self.sample_rates)
        lines = [
            f"{self.path}: delay in nn~ inside Pure Data (samples, then total in ms)",
            f"{'buffer':>7}{'nn~':>7}{'FIFO':>7}{'model':>7}{'total':>7}{rates}",
        ]
        for r in self.rows:
            ms = "".join(
                f"{_shown(self.ms(r.total, rate), '.2f'):>11}" for rate in self.sample_rates
            )
            cells = (r.buffer, r.host, r.fifo, r.model, r.total)
            lines.append("".join(f"{_shown(c, 'd'):>7}" for c in cells) + ms)
        if any(r.host is None for r in self.rows):
            lines.append(
                f"  -: nn~ in Pd cannot run buffers under Pd's {PD_BLOCK}-sample block (it "
                "loses samples); send [bufsize 64( or more"
            )
        return "\n".join(lines)


def latency(
    path: str | Path,
    buffers: Sequence[int] | None = None,
    sample_rates: Sequence[int] = SAMPLE_RATES,
) -> LatencyTable:
    """The delay the nn~ file at ``path`` adds in Pure Data, for each buffer size nn~ may run
    it with: nn~'s own buffering, the file's FIFO and the model's delay, apart and in total.

    The file's delays are read from its metadata (:func:`~torchbend.export.reader.read_latency`),
    without running it; for a file without them, from its attributes (``latency``,
    ``fifo_block``, ``min_buffer_size``, the methods' ratios).

    Args:
        path: the ``.ts`` file.
        buffers: the buffer sizes, in samples (default: every power of two from the
            smallest buffer nn~ gives the file, its largest ratio, up to 8192).
        sample_rates: the rates to give milliseconds at, in Hz.

    Raises:
        ExportError: the file cannot be read, or a buffer is not a power of two its ratios
            divide.

    Example:
        >>> table = latency("bent.ts")  # doctest: +SKIP
        >>> print(table)  # doctest: +SKIP
    """
    model, block, smallest = _declared(path)
    sizes = list(buffers) if buffers is not None else buffer_sizes(smallest)
    for n in sizes:
        if not (is_power_of_two(n) and smallest <= n <= MAX_BUFFER_SIZE):
            raise ExportError(
                f"buffers must be powers of two from {smallest} (the file's smallest) to "
                f"{MAX_BUFFER_SIZE} samples, got {n}"
            )
    rates = tuple(int(r) for r in sample_rates)
    if not rates or min(rates) < 1:
        raise ExportError(f"sample_rates must be positive rates in Hz, got {list(sample_rates)}")
    rows = tuple(
        LatencyRow(n, 2 * n - PD_BLOCK if n >= PD_BLOCK else None, fifo_latency(block, n), model)
        for n in sizes
    )
    return LatencyTable(str(path), rows, rates)


def _declared(path: str | Path) -> tuple[int, int, int]:
    """The model's delay, the FIFO's block and the smallest buffer that works, in samples."""
    try:
        found = read_latency(path)
        return found["model"], found["fifo_block"], found["smallest_buffer"]
    except ValueError:
        pass
    except OSError as e:
        raise ExportError(f"cannot read {path}: {e}") from e
    try:
        file = torch.jit.load(str(path))
    except Exception as e:
        raise ExportError(f"{path}: torch.jit.load failed: {error_summary(e)}") from e
    contract = FileContract(file)
    ratios = [r for p in contract.params.values() for r in (p[1], p[3])]
    delay, block = (getattr(file, a, 0) for a in ("latency", "fifo_block"))
    least = max(ratios, default=1) if block else contract.min_buffer_size
    return int(delay), int(block), max(int(least), *ratios, 1)


def _shown(value: float | int | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)
