"""Folding: a static channel-wise bending of an activation moved into the layers that read it.

A bending that multiplies an activation by a tensor that does not change between calls
(``Mask(dim=...)``, ``Scale`` without controls) and that varies along channels only costs an
elementwise product on every call, which on small streaming blocks is a sizeable part of the
model's time. When every reader of the activation is a layer linear in its input channels
through its own ``weight`` (a convolution, transposed or not, or ``nn.Linear``), the product
can be folded into that weight instead: ``conv(x * s, W)`` is ``conv(x, W * s)`` with ``s``
scaling ``W``'s input channels, zero padding included. The folded graph then runs at the
speed of the unbent one.

The folded weights are copies: the layer itself, and any other graph that reads it unbent,
keep their weights. Each folded layer is a shallow copy of the layer (sharing its buffers, a
streaming cache included) given the attributes of its original before every call; the folds
are made again when a callback's state changes (``revision``) or the weights the graph reads
do (:meth:`FoldedGraph.install`). Gradients would not reach the original weights through a
folded copy, so the folded graph only runs without autograd (see
:meth:`torchbend.engine.methods.MethodTable.call`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.fx
from torch import nn

from ..callbacks.base import BendingCallback
from ..tracing import record_of
from ..tracing.objects import attribute_at
from ..tracing.surgery import is_slot
from .rewriting import ActivationSlot, graph_module_record, install_module
from .weights import CopySync, module_with

__all__ = ["Fold", "FoldedGraph", "can_fold", "fold_slots", "layer_kind"]

_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_TRANSPOSED = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
_FORWARDS = {cls.forward for cls in (*_CONV, *_TRANSPOSED, nn.Linear)}


def layer_kind(module: nn.Module) -> str | None:
    """``"conv"``, ``"transposed"`` or ``"linear"`` if ``module`` is a layer whose output is
    linear in its input's channels through its own ``weight`` parameter; else ``None``.

    That is a convolution or ``nn.Linear`` whose ``forward`` is torch's own, or whose class
    says it keeps that property (``torchbend_linear = True``, as the cached convolutions of
    :mod:`torchbend.models` do), with a plain ``weight`` parameter (not a parametrization)
    and no hook that could change it.
    """
    if module._forward_hooks or module._forward_pre_hooks:
        return None
    if not isinstance(module._parameters.get("weight"), nn.Parameter):
        return None
    own = type(module).forward in _FORWARDS or getattr(type(module), "torchbend_linear", False)
    if not own:
        return None
    if isinstance(module, _CONV):
        return "conv"
    if isinstance(module, _TRANSPOSED):
        return "transposed"
    return "linear" if isinstance(module, nn.Linear) else None


def _channel_axis(module: nn.Module, kind: str, rank: int) -> int | None:
    """The axis of the input's channels for a ``rank``-dim input of ``module``."""
    if kind == "linear":
        return rank - 1 if rank >= 1 else None
    spatial = len(module.kernel_size)  # type: ignore[arg-type]
    axis = rank - spatial - 1
    return axis if axis in (0, 1) else None


def channel_vector(factor: torch.Tensor, shape: torch.Size, axis: int) -> torch.Tensor | None:
    """``factor``, which multiplies tensors of ``shape``, as one value per channel (along
    ``axis``), if it is constant along every other axis; else ``None``."""
    rank = len(shape)
    if factor.dim() > rank:
        return None
    factor = factor.reshape((1,) * (rank - factor.dim()) + tuple(factor.shape))
    if any(size != 1 for i, size in enumerate(factor.shape) if i != axis):
        return None
    channels = shape[axis]
    if factor.shape[axis] == channels:
        return factor.reshape(channels)
    return factor.reshape(1).expand(channels) if factor.shape[axis] == 1 else None


def folded_weight(layer: nn.Module, kind: str, vector: torch.Tensor) -> torch.Tensor:
    """``layer``'s weight with its input channels scaled by ``vector``."""
    weight = layer.get_parameter("weight").detach()
    vector = vector.to(weight)
    if kind == "linear":  # [out, in]
        return weight * vector
    spatial = [1] * (weight.dim() - 2)
    if kind == "transposed":  # [in, out / groups, *kernel]
        return weight * vector.reshape(-1, 1, *spatial)
    groups = layer.groups  # [out, in / groups, *kernel]: input channel g * per + i
    assert isinstance(groups, int)
    out, per = weight.shape[:2]
    grouped = weight.reshape(groups, out // groups, per, *weight.shape[2:])
    return (grouped * vector.reshape(groups, 1, per, *spatial)).reshape(weight.shape)


@dataclass
class Fold:
    """One layer of a folded graph whose weight carries the bending of its input."""

    slot: ActivationSlot
    """The slot of the activation the layer reads (the bending folded in)."""
    path: str
    """The layer's path in the module the graph reads from."""
    attribute: str
    """The attribute of the folded GraphModule that holds the layer's folded copy."""
    kind: str
    """The layer's kind (see :func:`layer_kind`)."""
    shape: torch.Size
    """The traced shape of the activation."""
    axis: int
    """The axis of the activation's channels."""

    def vector(self) -> torch.Tensor | None:
        """The slot's factor per channel now, if it still has one (see :func:`_factor`)."""
        factor = _factor(self.slot)
        return None if factor is None else channel_vector(factor, self.shape, self.axis)


def _factor(slot: ActivationSlot) -> torch.Tensor | None:
    """What ``slot`` multiplies its activation by, if that is all it does and no control
    drives it (see :func:`fold_slots`)."""
    if any(cb.controls() for cb in slot.originals()):
        return None
    return slot.static_factor()


class FoldedGraph:
    """A bended GraphModule whose foldable slots are folded into the layers that read them.

    Args:
        gm: the GraphModule, as :func:`fold_slots` rewrote it.
        folds: its folded layers.
    """

    def __init__(self, gm: torch.fx.GraphModule, folds: Sequence[Fold]) -> None:
        self.gm = gm
        self.folds = list(folds)
        callbacks = {
            id(m): m
            for fold in self.folds
            for cb in fold.slot.originals()
            for m in cb.modules()
            if isinstance(m, BendingCallback)
        }
        self._callbacks = list(callbacks.values())
        self._sync = CopySync([])
        self._revision = -1
        self._module: nn.Module | None = None
        self.valid = False
        """Whether every fold holds (a callback given a control since cannot be folded)."""

    def revision(self) -> int:
        """Changes its callbacks have seen: each callback's count only grows, so the sum
        changes whenever one of them does."""
        return sum(cb.revision for cb in self._callbacks)

    def install(self, module: nn.Module) -> bool:
        """Read modules and weights from ``module`` (after weight bending changed) and fold
        again, into copies of its layers; whether every fold holds."""
        install_module(self.gm, module)
        return self._fold(module)

    def _fold(self, module: nn.Module) -> bool:
        self._module = module
        self._revision = self.revision()
        copies: list[tuple[nn.Module, nn.Module]] = []
        self.valid = False
        for fold in self.folds:
            vector = fold.vector()
            layer = attribute_at(module, fold.path)
            if vector is None or layer_kind(layer) != fold.kind:
                return False
            weight = nn.Parameter(folded_weight(layer, fold.kind, vector), requires_grad=False)
            setattr(self.gm, fold.attribute, module_with(layer, {"weight": weight}, copies))
        self._sync = CopySync(copies)
        self.valid = True
        return True

    def ready(self) -> bool:
        """Whether the folded graph may run now: folds made again if a callback changed, and
        the folded copies given the attributes their layers have now (modes, flags)."""
        if self._revision != self.revision():
            assert self._module is not None
            self._fold(self._module)
        if self.valid:
            self._sync()
        return self.valid


def fold_slots(gm: torch.fx.GraphModule, module: nn.Module) -> FoldedGraph | None:
    """Fold the slots of ``gm`` (made by :func:`~torchbend.engine.rewriting.build_graph_module`
    from ``module``) that can be: ``gm`` is rewritten in place, and ``None`` returned if no
    slot folds (``gm`` is then left as it was).

    Bendings driven by controls keep their slots: an export's controls set numbers in its
    callbacks, which folded weights would not follow, and a bended module folds exactly
    what its export folds, so that both give the same outputs, bit for bit.
    """
    folds: list[Fold] = []
    for node, readers in _plan(gm):
        for reader, fold in readers:
            reader.target = fold.attribute
            folds.append(fold)
        source = node.args[0]
        assert isinstance(source, torch.fx.Node)
        node.replace_all_uses_with(source)
        gm.graph.erase_node(node)
    if not folds:
        return None
    folded = FoldedGraph(gm, folds)
    folded._fold(module)
    gm.recompile()
    return folded


def can_fold(gm: torch.fx.GraphModule) -> bool:
    """Whether :func:`fold_slots` would fold a slot of ``gm`` (which it leaves as it is)."""
    return bool(_plan(gm))


def _plan(gm: torch.fx.GraphModule) -> list[tuple[torch.fx.Node, list[tuple[torch.fx.Node, Fold]]]]:
    """Each slot node of ``gm`` that folds, with the folds of its readers."""
    paths = graph_module_record(gm).paths
    plan = []
    for node in gm.graph.nodes:
        if is_slot(node):
            slot = gm.get_submodule(str(node.target))
            assert isinstance(slot, ActivationSlot)
            readers = _foldable_readers(gm, node, slot, paths)
            if readers is not None:
                plan.append((node, readers))
    return plan


def _foldable_readers(
    gm: torch.fx.GraphModule,
    node: torch.fx.Node,
    slot: ActivationSlot,
    paths: Mapping[str, str],
) -> list[tuple[torch.fx.Node, Fold]] | None:
    """The folds of the readers of slot ``node``, if every reader is a layer it folds into."""
    shape = record_of(node.args[0]).shape  # type: ignore[arg-type]
    factor = _factor(slot)
    if not node.users or factor is None or not isinstance(shape, torch.Size):
        return None
    readers = []
    for reader in node.users:
        if reader.op != "call_module" or reader.args != (node,) or reader.kwargs:
            return None
        path = paths.get(str(reader.target))
        layer = gm.get_submodule(str(reader.target))
        kind = layer_kind(layer)
        if path is None or kind is None:
            return None
        axis = _channel_axis(layer, kind, len(shape))
        if axis is None or channel_vector(factor, shape, axis) is None:
            return None
        channels = layer.in_features if kind == "linear" else layer.in_channels
        if shape[axis] != channels:
            return None
        fold = Fold(slot, path, f"_tb_folded_{reader.name}", kind, shape, axis)
        readers.append((reader, fold))
    return readers
