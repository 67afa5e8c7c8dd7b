"""nn~ export: a TorchScript file that the nn~ external of Max/MSP and Pure Data loads and runs."""

from __future__ import annotations

import copy
import io
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.fx

from ..audio.safety import Safety, safety_stage
from ..audio.stream_check import StreamWarning
from ..bended import BendedModule
from ..errors import ExportError
from .build import build, script
from .calls import check_one_graph, default_labels, infer_params, least_buffer
from .contract import (
    MAX_BUFFER_SIZE,
    FileContract,
    NNTildeReport,
    check_nntilde,
    check_params,
    is_power_of_two,
    refuse_clicks,
)
from .fifo import append_fifo, fifo_block
from .nn_inputs import bended_for_export, checked_labels, checked_params, method_names, whole
from .plan import ExportPlan
from .source import contract_source
from .tensor_attributes import add_buffer_state, buffer_attributes, buffer_source
from .text_attributes import attribute_type
from .torchscript import save
from .verify import check_export

if TYPE_CHECKING:
    from ..engine.readonly import BendedView

__all__ = ["MAX_SAMPLE_RATE", "MIN_SAMPLE_RATE", "TYPE_HASH", "nntilde"]

TYPE_HASH = {"bool": 0, "int": 1, "float": 2, "str": 3, "tensor": 4, "buffer": 5}
"""nn~'s codes for attribute types, as in its ``<attribute>_params`` buffers (``buffer``: a Pd
array or Max buffer~ the patch names; nn~ 1.6)."""

MIN_SAMPLE_RATE = 1_000
"""The lowest sample rate :func:`nntilde` takes, in Hz."""

MAX_SAMPLE_RATE = 768_000
"""The highest sample rate :func:`nntilde` takes, in Hz (the fastest sound cards')."""

RESERVED = {"sr", "get_methods", "get_attributes", "get_sample_rate", "set_sample_rate"}


def nntilde(
    bended: BendedModule | torch.nn.Module,
    path: str | Path,
    methods: Sequence[str] | str | None = None,
    sample_rate: int | None = None,
    *,
    params: Mapping[str, Sequence[int]] | None = None,
    input_labels: Mapping[str, Sequence[str]] | None = None,
    output_labels: Mapping[str, Sequence[str]] | None = None,
    min_buffer_size: int | None = None,
    safety: bool | Safety = False,
    clicks: str = "refuse",
) -> NNTildeReport:
    """Write ``bended`` as an nn~ ``.ts`` file, check it as nn~ will use it, and report.

    Follows nn~'s Python contract (``nn_tilde``'s ``Module``, without depending on it): each
    method gets a ``<method>_params`` buffer ``[in_channels, in_ratio, out_channels,
    out_ratio]`` and ``<method>_input_labels`` / ``<method>_output_labels``; ``get_methods()``
    and ``get_attributes()`` list them; each control of ``bended.controllables`` is an nn~
    attribute with its ``<name>_params`` type buffer, ``get_<name>()`` (a tuple) and
    ``set_<name>(value)`` (``0``, or ``-1`` when out of range); ``get_sample_rate()`` gives
    ``sample_rate``. Bool controls and menus (int controls with ``widget.choices``) are text
    attributes, whose setters read what a patch sends (``[set flip 0(`` arrives as
    ``"0.000000"``; ``[set wave saw(`` names an entry) and whose getters give text
    (:mod:`~torchbend.export.text_attributes`; docs/export.md, "Setting controls from a
    patch").

    A bended TorchScript file is written back as itself with its weights bent when it has
    weight bendings only (and no ``safety``); with activation bendings, from its graphs, the
    file's methods, params, labels, sample rate and smallest buffer being the defaults (its
    nn~ attributes are not carried over: a warning names them).

    Channels and ratios are read from the traced shapes of each method: an input
    ``[B, C_in, T]`` and an output ``[B, C_out, T / r]`` give out_ratio ``r`` (and an output
    ``[B, C_out, T * r]`` gives in_ratio ``r``). The written file is then run as nn~ runs it
    (:func:`~torchbend.export.check_nntilde`); a file that fails is deleted.

    nn~ calls the file buffer by buffer, so a model that can stream (it has
    ``set_streaming``) must be exported streaming: the file starts from silence (the model's
    ``reset_cache()`` on the exported copy) and carries its state from one buffer to the
    next. A plain module given ``params`` is put in streaming mode before it is traced here,
    as ``torchbend export`` does. Every file is run on noise in one pass and buffer by buffer
    (:func:`~torchbend.export.contract.check_file_streams`): a model that keeps no state (a
    convolution stack, a GRU, a streaming model traced offline) gives another output buffer by
    buffer, with a click at every buffer: the export refuses it, with the size of the
    difference, naming ``set_streaming(True)`` and :func:`~torchbend.audio.make_streaming`,
    which converts such a model (``clicks="warn"`` writes it anyway and warns with a
    :class:`~torchbend.audio.StreamWarning`).

    With ``safety``, each method whose output is audio (``out_ratio`` 1: ``forward``,
    ``decode``) ends with the safety stage of live play (:class:`~torchbend.audio.Safety`,
    scripted: NaN silenced, DC removed, a soft limiter within ``[-1, 1]``), so that a bending
    that blows the model up does not reach nn~'s outlets at full scale. Each method has its
    own stage, whose state follows nn~'s calls (and starts over when the batch changes).

    The file records its delays without being run: ``latency`` (the model's own, its
    ``latency`` attribute), ``fifo_block`` (the FIFO's block, 0 for none) and the same in its
    metadata (:func:`~torchbend.export.reader.read_latency`); :func:`~torchbend.export.latency`
    adds nn~'s buffering, per buffer size and sample rate.

    Args:
        bended: the bended module, with every exported method traced on a ``[B, C, T]`` input;
            or a plain module (a TorchScript file, or a ``torch.nn.Module`` given ``params``
            for each method, traced here on a random input of that shape).
        path: the ``.ts`` file to write.
        methods: the methods nn~ may call (default ``("forward",)``).
        sample_rate: the sample rate the model works at, in Hz (default 44100), a whole
            number from :data:`MIN_SAMPLE_RATE` to :data:`MAX_SAMPLE_RATE`.
        params: per method, ``[in_channels, in_ratio, out_channels, out_ratio]`` replacing
            the inferred ones.
        input_labels: per method, one label per input channel (nn~ shows them on inlets).
        output_labels: per method, one label per output channel.
        min_buffer_size: the block, in samples, the model needs per call, a power of two
            (default: the wrapped module's ``ratio`` attribute, else 1), raised to the
            largest in or out ratio of the exported methods. nn~ does not read it: it calls
            with any power-of-two buffer from that largest ratio up, so a larger block puts
            a FIFO in the file (:class:`~torchbend.export.fifo.BlockFifo`: the output delayed
            by one block at buffers that hold no whole block); checks run at every buffer
            from the largest ratio up to :data:`~torchbend.export.contract.MAX_BUFFER_SIZE`.
        safety: ``True``: the safety stage with its default settings at ``sample_rate``;
            a :class:`~torchbend.audio.Safety` (at ``sample_rate``) for other settings;
            ``False``: the methods' outputs as they are.
        clicks: what to do with a file whose methods give another output buffer by buffer
            than in one pass: ``"refuse"`` (delete it and raise :class:`ExportError`, the
            default) or ``"warn"`` (write it and warn).

    Raises:
        ExportError: for a sample rate, buffer size, params or labels out of their bounds
            (or given for a method not exported), a plain module without ``params``, a
            method not traced or not ``[B, C, T] -> [B, C, T']``, a ratio that
            is not a power of two, a graph that depends on the input's length, an unscriptable
            callback, or any failure of the checks, naming the method, expected and got.
    """
    if clicks not in ("warn", "refuse"):
        raise ExportError(f"clicks must be 'warn' or 'refuse', got {clicks!r}")
    names = method_names(methods)
    params = checked_params(params)
    input_labels = checked_labels(input_labels, "input_labels")
    output_labels = checked_labels(output_labels, "output_labels")
    if sample_rate is not None:
        sample_rate = whole(sample_rate, "sample_rate", MIN_SAMPLE_RATE, MAX_SAMPLE_RATE, "Hz")
    if min_buffer_size is not None:
        min_buffer_size = whole(min_buffer_size, "min_buffer_size", 1, MAX_BUFFER_SIZE, "samples")
        if not is_power_of_two(min_buffer_size):
            raise ExportError(
                f"min_buffer_size must be a power of two (nn~ runs buffers of 2**k samples), "
                f"got {min_buffer_size}"
            )
    overrides = {"params": params, "input_labels": input_labels, "output_labels": output_labels}
    module = bended_for_export(bended, names, params)
    if isinstance(module.module, torch.jit.ScriptModule):
        view = module.view()
        if not _activation_keys(view) and safety is False:
            report = _rewrite_scripted(view, Path(path))
            try:
                refuse_clicks(report, clicks == "warn")
            except ExportError:
                Path(path).unlink(missing_ok=True)
                raise
            return report
        contract = FileContract(module.module)
        names = names or contract.methods
        sample_rate = sample_rate or contract.sample_rate
        params = {**contract.params, **(params or {})}
        input_labels = {**contract.input_labels, **(input_labels or {})}
        output_labels = {**contract.output_labels, **(output_labels or {})}
        min_buffer_size = min_buffer_size or contract.min_buffer_size
        contract.warn_dropped()
    names = names or ["forward"]
    for what, keys in overrides.items():
        unknown = sorted(set(keys or {}) - set(names))
        if unknown:
            raise ExportError(
                f"{what} given for {unknown}, which are not exported (methods: {names}); "
                "pass methods= to export them"
            )
    plan = ExportPlan(module, names)
    clash = sorted(set(plan.controls) & (RESERVED | set(plan.methods)))
    if clash:
        raise ExportError(f"controls {clash} have names nn~ reserves; rename them")
    plan.check_savable()
    stage = safety_stage(safety, int(sample_rate or 44100), "the export", ExportError)
    method_params = {
        method: check_params(
            method,
            (params or {}).get(method)
            or infer_params(method, plan.entries[method], plan.arguments[method]),
        )
        for method in plan.methods
    }
    least = least_buffer(module.module, min_buffer_size, method_params.values())
    # nn~ calls with any buffer from the largest ratio up: a model needing more gets a FIFO.
    higher = max(max(p[1], p[3]) for p in method_params.values())
    block = fifo_block(least, higher)
    container = build(plan)
    check_export(plan, container)
    for method in plan.methods:
        entry = plan.entries[method]
        values = method_params[method]
        check_one_graph(plan.bended, method, entry, values, least)
        if stage is not None and values[3] == 1:
            _append_safety(container, plan, method, stage)
        if block:
            passed = [a.name for a in plan.arguments[method] if a.in_graph]
            append_fifo(container, method, passed, block, values)
        container.register_buffer(f"{method}_params", torch.tensor(values))
        for side, count, given in (
            ("input", values[0], input_labels),
            ("output", values[2], output_labels),
        ):
            labels = list((given or {}).get(method) or default_labels(side, count))
            if len(labels) != count:
                raise ExportError(
                    f"method {method!r}: expected {count} {side} labels (one per channel), "
                    f"got {len(labels)}"
                )
            setattr(container, f"{method}_{side}_labels", labels)
    for name, c in plan.controls.items():
        container.register_buffer(
            f"{name}_params", torch.tensor([TYPE_HASH[attribute_type(c.control)]])
        )
    if stage is not None and not any(isinstance(m, SafeOutput) for m in container.modules()):
        raise ExportError(
            f"safety=True limits audio outputs, and no exported method gives audio (methods "
            f"{plan.methods}, none with out_ratio 1); export forward or decode with it"
        )
    container.sr = int(sample_rate or 44100)  # type: ignore[assignment]
    container.register_buffer("min_buffer_size", torch.tensor([least]))
    delay = getattr(module.module, "latency", 0)  # the model's own delay, as Stream reads it
    delay = delay if isinstance(delay, int) and not isinstance(delay, bool) else 0
    container.latency = delay  # type: ignore[assignment]
    container.fifo_block = block  # type: ignore[assignment]
    plan.latency = {"model": delay, "fifo_block": block, "smallest_buffer": higher}
    add_buffer_state(container, plan)
    extra = contract_source(plan.methods, list(plan.controls), buffer_attributes(plan))
    extra += buffer_source(plan)
    scripted = script(plan, container, getters="tuple", extra=extra)
    report = _save_checked(scripted, Path(path))
    try:
        refuse_clicks(report, clicks == "warn")
    except ExportError:
        Path(path).unlink(missing_ok=True)
        raise
    return report


class SafeOutput(torch.nn.Module):
    """An exported method's graph, then the safety stage (``nntilde(..., safety=True)``)."""

    def __init__(self, graph: torch.nn.Module, safety: Safety) -> None:
        super().__init__()
        self.graph = graph
        self.safety = safety

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.safety(self.graph(x))


def _append_safety(
    container: torch.nn.Module, plan: ExportPlan, method: str, stage: Safety
) -> None:
    """Run a fresh copy of ``stage`` on what ``method``'s graph returns."""
    passed = [a.name for a in plan.arguments[method] if a.in_graph]
    if len(passed) != 1:
        raise ExportError(
            f"safety=True appends the safety stage to graphs of one input; the graph of "
            f"{method!r} takes {passed}"
        )
    own = copy.deepcopy(stage)
    own.reset()
    name = f"tb_method_{method}"
    setattr(container, name, SafeOutput(getattr(container, name), own))


def _save_checked(scripted: torch.jit.ScriptModule, path: Path) -> NNTildeReport:
    """Write ``scripted`` to ``path`` and check it as nn~ runs it; a file that fails is
    deleted."""
    save(scripted, path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StreamWarning)  # nntilde warns or refuses itself
            return check_nntilde(path)
    except ExportError:
        path.unlink(missing_ok=True)
        raise


def _activation_keys(view: BendedView) -> list[str]:
    return [k for b in view.bendings for k in b.keys() if ":" in k]


def _rewrite_scripted(view: BendedView, path: Path) -> NNTildeReport:
    """The TorchScript file ``view`` wraps, written to ``path`` with its weights bent."""
    buffer = io.BytesIO()
    torch.jit.save(view.module, buffer)
    buffer.seek(0)
    copy = torch.jit.load(buffer)
    bent = dict(view.weights_view.named_parameters())
    with torch.no_grad():
        for name, p in copy.named_parameters():
            p.copy_(bent[name])
    return _save_checked(copy, path)
