"""TorchScript export: one ScriptModule holding every traced method, the callbacks and controls."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..errors import ExportError
from .build import build, script
from .contract import error_summary
from .metadata import CONTROLS_METHOD
from .plan import ExportPlan
from .reader import CONTROLS_FILE
from .verify import check_export

if TYPE_CHECKING:
    from ..bended import BendedModule

__all__ = ["save", "torchscript"]


def torchscript(
    bended: BendedModule,
    path: str | Path | None = None,
    methods: Sequence[str] | None = None,
) -> torch.jit.ScriptModule:
    """Export ``bended`` as one TorchScript module, saved to ``path`` if given.

    The module holds the bended graph of every traced method (the graph the bended module
    runs now on the inputs it was last traced with: a bending that flips a decision on tensor
    values exports the branch it takes), each under its own name (``forward`` as
    ``forward``), the bending callbacks, and for every control of ``bended.controllables``
    a ``set_<name>(value) -> int`` (``0``: accepted; ``-1``: refused, out of range) and
    ``get_<name>()``. Setting a control has the effect of ``bended.update``: activation
    callbacks read the new value at the next call, and weights bent with the control are bent
    again from cached copies of their originals.
    Loading the file needs torch only (``torch.jit.load``), not torchbend.

    The controls' metadata (type, range, widget, setter and getter of each) is returned by
    ``get_controls_json()`` and, in a saved file, written as its extra file
    ``torchbend/controls.json``, which :func:`torchbend.export.reader.read_controls` reads
    without torch (docs/export.md, "Control metadata").

    Args:
        bended: the bended module; its state is copied, later changes do not reach the export.
        path: where to save the module (``torch.jit.save``), or ``None``.
        methods: the methods to export (default: every traced method).

    Raises:
        ExportError: a method is not traced, its export does not give what the bended module
            gives on the inputs it was traced with (checked before saving), a callback the
            file runs cannot be scripted (``Lambda``, ``Capture``... on an activation), or a
            control drives the seed of a seeded callback that draws outside
            :meth:`~torchbend.callbacks.seeded.Seeded.draw`.

    Example:
        >>> import torch, torchbend as tb
        >>> bended = tb.BendedModule(torch.nn.Sequential(torch.nn.Conv1d(1, 2, 3)))
        >>> _ = bended.trace(input=torch.randn(1, 1, 16))
        >>> gain = tb.BendingParameter("gain", 1.0, range=(0.0, 2.0))
        >>> _ = bended.bend(tb.Scale(gain), "_0$")
        >>> scripted = torchscript(bended)
        >>> scripted.set_gain(1.5), scripted.set_gain(3.0), scripted.get_gain()
        (0, -1, 1.5)

    Notes:
        Ramps are not exported: ``set_<name>`` applies at once. Decisions read from tensor
        values are not checked: the branches taken when tracing are kept.
    """
    plan = ExportPlan(bended, methods)
    if path is not None:
        plan.check_savable()
    container = build(plan)
    check_export(plan, container)
    scripted = script(plan, container)
    if path is not None:
        save(scripted, path)
    return scripted


def save(scripted: torch.jit.ScriptModule, path: str | Path) -> None:
    """``torch.jit.save``, then load the file back: TorchScript may write code that it then
    refuses to load, and that must fail here rather than where the file is used.

    A module exported by torchbend (one with ``get_controls_json``) is saved with its
    controls' metadata as the extra file ``torchbend/controls.json`` too, for hosts that read
    the file without loading it."""
    extra = {}
    if hasattr(scripted, CONTROLS_METHOD):
        text = getattr(scripted, CONTROLS_METHOD)()
        if isinstance(text, str):
            extra[CONTROLS_FILE] = text
    torch.jit.save(scripted, str(path), _extra_files=extra)
    try:
        torch.jit.load(str(path))
    except Exception as e:
        Path(path).unlink(missing_ok=True)
        raise ExportError(
            f"{path} was written but does not load back with torch.jit.load (deleted): "
            f"{error_summary(e)}"
        ) from e
