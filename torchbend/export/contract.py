"""Check an nn~ TorchScript file the way nn~ calls it, before opening it in Max or Pure Data."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..audio.stream_check import StreamCheck, StreamWarning, probe_streaming
from ..errors import ExportError
from .fifo import fifo_latency

__all__ = [
    "MAX_BUFFER_SIZE",
    "TEST_BATCHES",
    "FileContract",
    "MethodCheck",
    "NNTildeReport",
    "buffer_sizes",
    "check_file_streams",
    "check_method",
    "check_nntilde",
    "check_params",
    "error_summary",
    "refuse_clicks",
]

MAX_BUFFER_SIZE = 8192
"""The largest buffer size tested, in samples (nn~'s own registration test uses it)."""

TEST_BATCHES = (1, 4)
"""Batch sizes tested: ``nn~`` runs batch 1, ``mc.nn~`` several channels as a batch."""


@dataclass(frozen=True)
class MethodCheck:
    """One nn~ method as checked."""

    name: str
    in_channels: int
    in_ratio: int
    out_channels: int
    out_ratio: int
    buffer_sizes: tuple[int, ...]
    """Buffer sizes (audio samples) it was run on, for each of :data:`TEST_BATCHES`."""


@dataclass(frozen=True)
class NNTildeReport:
    """What :func:`check_nntilde` found in a file that passed every check."""

    path: str
    methods: tuple[MethodCheck, ...]
    attributes: tuple[str, ...]
    """The nn~ attributes (torchbend controls), each with a working getter and setter."""
    sample_rate: int | None
    model_latency: int = 0
    """The model's own delay in samples (the file's ``latency`` attribute)."""
    fifo_block: int = 0
    """The block of the FIFO the file carries, in samples (``0``: none): buffers of fewer
    samples are delayed by one block."""
    streaming: tuple[StreamCheck, ...] = ()
    """Per method, its output buffer by buffer against one pass (:func:`check_file_streams`)."""

    def latency(self, buffer: int) -> int:
        """The samples the file delays its output by when called with buffers of ``buffer``
        samples: its FIFO's (one block below ``fifo_block``) and the model's."""
        return fifo_latency(self.fifo_block, buffer) + self.model_latency

    def __str__(self) -> str:
        lines = [f"{self.path}: nn~ file, sample rate {self.sample_rate}"]
        for m in self.methods:
            lines.append(
                f"  {m.name}: {m.in_channels} in (ratio {m.in_ratio}) -> {m.out_channels} out "
                f"(ratio {m.out_ratio}), buffers {m.buffer_sizes[0]}..{m.buffer_sizes[-1]}, "
                f"batches {', '.join(map(str, TEST_BATCHES))}: ok"
            )
        sizes = sorted({n for m in self.methods for n in m.buffer_sizes})
        spans: list[list[int]] = []
        for n in sizes:
            if spans and self.latency(spans[-1][0]) == self.latency(n):
                spans[-1][1] = n
            else:
                spans.append([n, n])
        said = [f"{self.latency(a)} at buffers {a}..{b}" for a, b in spans]
        lines.append(
            f"  latency (samples, model {self.model_latency} + FIFO of {self.fifo_block} below "
            f"its block): {'; '.join(said) or 'none'}"
        )
        lines.append(f"  attributes: {', '.join(self.attributes) or 'none'}")
        return "\n".join(lines)


def is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def buffer_sizes(ratio: int) -> list[int]:
    """Powers of two from ``ratio`` up to :data:`MAX_BUFFER_SIZE` (``[ratio]`` past it)."""
    sizes = []
    size = ratio
    while size <= MAX_BUFFER_SIZE:
        sizes.append(size)
        size *= 2
    return sizes or [ratio]


def check_params(method: str, params: Any) -> tuple[int, int, int, int]:
    """Check ``[in_channels, in_ratio, out_channels, out_ratio]`` of ``method``."""
    values = [int(v) for v in params]
    if len(values) != 4 or min(values) < 1:
        raise ExportError(
            f"method {method!r}: params must be [in_channels, in_ratio, out_channels, "
            f"out_ratio], all >= 1, got {values}"
        )
    for label, ratio in (("in_ratio", values[1]), ("out_ratio", values[3])):
        if not is_power_of_two(ratio):
            raise ExportError(
                f"method {method!r}: {label} {ratio} is not a power of two; nn~ runs buffers "
                f"whose sizes are powers of two, which a ratio of {ratio} does not divide. "
                "Change the model's time compression (or pass params= with the true ratios)."
            )
    return values[0], values[1], values[2], values[3]


def check_method(module: Any, method: str, params: Any, higher: int = 1) -> MethodCheck:
    """Run ``module.<method>`` as nn~ does and raise :class:`ExportError` on any mismatch;
    ``higher``: the largest ratio of the file's methods, the smallest buffer nn~ gives."""
    in_channels, in_ratio, out_channels, out_ratio = check_params(method, params)
    # nn~ calls every method with its buffer N (its argument or ``bufsize``), raised only to
    # the largest ratio of the file's methods: it never reads ``min_buffer_size``. A model
    # that needs larger blocks must take any N (torchbend's files carry a FIFO for it).
    least = int(getattr(module, "min_buffer_size", torch.ones(1)).item())
    fifo = int(getattr(module, "fifo_block", 0))
    sizes = buffer_sizes(max(in_ratio, out_ratio, higher))
    fn = getattr(module, method)
    for batch in TEST_BATCHES:
        # Up, then down on another batch (which starts a FIFO over): both ways between buffers.
        for size in sizes if batch == TEST_BATCHES[0] else sizes[::-1]:
            shape = [batch, in_channels, size // in_ratio]
            expected = [batch, out_channels, size // out_ratio]
            where = f"method {method!r} on a float32 input of shape {shape} (buffer {size})"
            try:
                with torch.no_grad():
                    y = fn(torch.zeros(shape))
            except Exception as e:
                if size < least and not fifo:
                    raise ExportError(
                        f"{where} failed: {error_summary(e)}. nn~ calls it with any power-of-"
                        f"two buffer size from {sizes[0]} up and does not read the file's "
                        f"min_buffer_size ({least}): re-export it with this torchbend, which "
                        f"puts a FIFO in the file (latency {least} samples below buffers of "
                        f"{least})"
                    ) from e
                raise ExportError(
                    f"{where} failed: {error_summary(e)}. If its graph depends on the input's "
                    "length or batch size, trace it on inputs nn~ gives, or fix the decision."
                ) from e
            if not isinstance(y, torch.Tensor):
                raise ExportError(
                    f"{where}: nn~ expects one tensor [batch, channels, time], got "
                    f"{type(y).__name__}"
                )
            if y.dim() != 3:
                raise ExportError(
                    f"{where}: expected a 3-D output {expected}, got {y.dim()}-D {list(y.shape)}"
                )
            if y.dtype != torch.float32:
                raise ExportError(f"{where}: expected a float32 output, got {y.dtype}")
            if list(y.shape) != expected:
                raise ExportError(
                    f"{where}: expected output shape {expected} (batch, out_channels, "
                    f"buffer // out_ratio), got {list(y.shape)}"
                )
    return MethodCheck(method, in_channels, in_ratio, out_channels, out_ratio, tuple(sizes))


def check_nntilde(path: str | Path) -> NNTildeReport:
    """Load an nn~ ``.ts`` file and check it the way nn~ will use it.

    Every method listed by ``get_methods()`` must have its ``<method>_params`` buffer
    (power-of-two ratios) and as many input and output labels as channels, and must return a
    float32 ``[batch, out_channels, buffer // out_ratio]`` tensor for batch 1 and 4 and every
    power-of-two buffer size from the file's largest ratio (nn~ raises smaller buffers to it,
    and calls with any larger one: it does not read ``min_buffer_size``) up to 8192, in
    increasing sizes on batch 1 and decreasing ones on batch 4. A file whose model needs
    larger blocks works there only with the FIFO torchbend's exports carry; an older file
    fails, naming the buffer. The report gives the latency at each buffer
    (:meth:`NNTildeReport.latency`). Every attribute listed by
    ``get_attributes()`` must have its ``<name>_params`` buffer, a getter returning a tuple and
    a setter accepting that value (returning 0); every buffer attribute ``NAME#0`` of
    ``get_buffer_attributes()`` (a tensor control) must name one of type code 5, and the file
    must have ``set_buffer_attribute``.

    Raises:
        ExportError: naming the method or attribute, what was expected and what was got.

    Example:
        >>> report = check_nntilde("bent.ts")  # doctest: +SKIP
        >>> print(report)  # doctest: +SKIP
    """
    try:
        module = torch.jit.load(str(path))
    except Exception as e:
        raise ExportError(f"{path}: torch.jit.load failed: {error_summary(e)}") from e
    for needed in ("get_methods", "get_attributes"):
        if not hasattr(module, needed):
            raise ExportError(f"{path} is not an nn~ file: it has no {needed}() method")
    names = list(module.get_methods())
    for method in names:
        if not hasattr(module, f"{method}_params"):
            raise ExportError(f"{path}: method {method!r} has no {method}_params buffer")
    params = {m: getattr(module, f"{m}_params").tolist() for m in names}
    higher = max((int(p[i]) for p in params.values() if len(p) == 4 for i in (1, 3)), default=1)
    methods = []
    for method in names:
        check = check_method(module, method, params[method], higher)
        for side, count in (("input", check.in_channels), ("output", check.out_channels)):
            labels = getattr(module, f"{method}_{side}_labels", None)
            if labels is None or len(labels) != count:
                raise ExportError(
                    f"{path}: method {method!r} has {count} {side} channels, expected as many "
                    f"{method}_{side}_labels, got {labels!r}"
                )
        methods.append(check)
    attributes = list(module.get_attributes())
    for name in attributes:
        for needed in (f"get_{name}", f"set_{name}", f"{name}_params"):
            if not hasattr(module, needed):
                raise ExportError(f"{path}: attribute {name!r} has no {needed}")
        value = getattr(module, f"get_{name}")()
        if not isinstance(value, tuple):
            raise ExportError(
                f"{path}: get_{name}() must return a tuple, got {type(value).__name__}"
            )
        status = getattr(module, f"set_{name}")(*value)
        if status != 0:
            raise ExportError(f"{path}: set_{name}{value} returned {status}, expected 0")
    buffers = (
        list(module.get_buffer_attributes()) if hasattr(module, "get_buffer_attributes") else []
    )
    for buffer in buffers:  # a tensor control: an attribute of type 5, set from a buffer
        name = buffer.partition("#")[0]
        if name not in attributes or getattr(module, f"{name}_params").tolist() != [5]:
            raise ExportError(
                f"{path}: buffer attribute {buffer!r} must name an attribute {name!r} of type "
                "code 5 (a buffer) listed by get_attributes()"
            )
        if not hasattr(module, "set_buffer_attribute"):
            raise ExportError(f"{path}: buffer attribute {buffer!r} has no set_buffer_attribute")
    rate = int(module.get_sample_rate()) if hasattr(module, "get_sample_rate") else None
    least = int(getattr(module, "min_buffer_size", torch.ones(1)).item())
    delay, fifo = (int(getattr(module, a, 0)) for a in ("latency", "fifo_block"))
    declared = getattr(module, "latency", 0)  # the probe shifts by an int latency only
    shift = declared if isinstance(declared, int) else 0
    streaming = check_file_streams(path, params, max(least, higher), shift)
    for method, result in zip(names, streaming):
        if not result.ok:
            warnings.warn(
                f"{path}: {result.describe(method)}; nn~ calls it buffer by buffer",
                StreamWarning,
                stacklevel=2,
            )
    return NNTildeReport(str(path), tuple(methods), tuple(attributes), rate, delay, fifo, streaming)


def check_file_streams(
    path: str | Path, params: Mapping[str, Sequence[int]], least: int, latency: int | None = None
) -> tuple[StreamCheck, ...]:
    """Run each method of the file at ``path`` on noise in one pass and buffer by buffer
    (buffers of ``least`` samples or 256, each pass on a fresh load) and compare
    (:func:`~torchbend.audio.stream_check.probe_streaming`): a method that keeps no state
    from one buffer to the next clicks at every buffer in nn~. ``latency``: the file's own
    delay in samples (read from the file when left out)."""
    if latency is None:
        declared = getattr(torch.jit.load(str(path)), "latency", 0)
        latency = declared if isinstance(declared, int) else 0
    checks = []
    for method, values in params.items():
        in_channels, in_ratio = int(values[0]), int(values[1])

        def fresh(method: str = method) -> Any:
            return getattr(torch.jit.load(str(path)), method)

        block = max(least, 256) // in_ratio
        checks.append(probe_streaming(fresh, block, in_channels, latency // in_ratio))
    return tuple(checks)


def refuse_clicks(report: NNTildeReport, allow: bool = False) -> None:
    """Raise :class:`ExportError` if a method of the file checked in ``report`` gives
    another output buffer by buffer than in one pass (it would click at every nn~ buffer);
    with ``allow``, warn instead."""
    for method, check in zip(report.methods, report.streaming):
        if not check.ok and allow:
            what = f"{report.path}: {check.describe(method.name)}; nn~ calls it buffer by buffer"
            warnings.warn(what, StreamWarning, 3)
        elif not check.ok:
            raise ExportError(
                f"{report.path}: {check.describe(method.name)}; nn~ calls it buffer by "
                "buffer, so the file is not written (clicks='warn' writes it anyway)"
            )


def error_summary(e: BaseException) -> str:
    """The line of an error message that says what went wrong (TorchScript errors open with
    a header and a traceback, and end with the error itself)."""
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    if not lines:
        return type(e).__name__
    if len(lines) > 1 and lines[0].startswith("The following operation failed"):
        return lines[-1]
    return lines[0]


class FileContract:
    """What an nn~ TorchScript file declares (methods, their params and labels, sample rate,
    attributes): the defaults of an nn~ export of the file bent."""

    def __init__(self, file: torch.jit.ScriptModule) -> None:
        self.file = file
        names = file.get_methods() if hasattr(file, "get_methods") else ["forward"]
        self.methods = list(names)
        self.params = {
            m: [int(v) for v in getattr(file, f"{m}_params").tolist()]
            for m in self.methods
            if hasattr(file, f"{m}_params")
        }
        self.input_labels = self._labels("input")
        self.output_labels = self._labels("output")
        rate = getattr(file, "sr", None)
        if rate is None and hasattr(file, "get_sample_rate"):
            rate = file.get_sample_rate()
        self.sample_rate = int(rate) if isinstance(rate, int) else None
        ratios = [r for p in self.params.values() for r in (p[1], p[3])]
        least = getattr(file, "min_buffer_size", None)  # torchbend's own nn~ files say
        self.min_buffer_size = int(least) if least is not None else max(ratios, default=1)
        """The smallest buffer nn~ may run the file's methods on (at least their ratios)."""
        self.attributes = list(file.get_attributes()) if hasattr(file, "get_attributes") else []

    def _labels(self, side: str) -> dict[str, list[str]]:
        return {
            m: list(getattr(self.file, f"{m}_{side}_labels"))
            for m in self.methods
            if hasattr(self.file, f"{m}_{side}_labels")
        }

    def warn_dropped(self) -> None:
        if self.attributes:
            warnings.warn(
                f"the file's nn~ attributes {self.attributes} are not in the bent file: its "
                "methods are written from the graphs converted with the attributes' present "
                "values (set them before tracing to keep others)",
                stacklevel=3,
            )
