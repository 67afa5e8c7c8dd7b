"""The read-only view of a bended module (``bended.view()``), for the exporters and the command."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..controls import BendingParameter
from ..errors import TracingError
from .bendings import Bending, BendingSet
from .board import ControlBoard
from .dispatch import Entry, Signature, signature_of
from .methods import MethodTable
from .weights import WeightBank

__all__ = ["BendedView", "Restore"]


class BendedView:
    """What code outside the facade reads of a :class:`~torchbend.BendedModule`.

    Exporters and the command line take this view instead of reaching into the facade's
    parts. Nothing read through it changes the module: :meth:`entry_for` traces inputs that
    no graph fits without keeping the new graph, so that a failing export leaves the module
    as it was.
    """

    def __init__(
        self,
        module: nn.Module,
        table: MethodTable,
        bendings: BendingSet,
        board: ControlBoard,
        weights: WeightBank,
    ) -> None:
        self.module = module
        self._table = table
        self._bendings = bendings
        self._board = board
        self._weights = weights

    @property
    def owner(self) -> str:
        """The wrapped module's class name."""
        return type(self.module).__name__

    def traced(self) -> list[str]:
        """Methods that have a graph."""
        return [m.name for m in self._table if m.current is not None]

    def current(self, fn: str) -> Entry:
        """The last graph traced for ``fn``."""
        return self._table.current(fn)

    def key(self, fn: str) -> str:
        """The name bending keys use for the activations of ``fn``."""
        method = self._table.get(fn)
        return fn if method is None else method.key

    def signature(self, fn: str) -> Signature:
        """The signature of ``fn`` (traced or not)."""
        method = self._table.get(fn)
        if method is not None:
            return method.signature
        impl = getattr(self.module, fn, None)
        if not callable(impl) or isinstance(impl, nn.Module):
            raise TracingError(f"{self.owner} has no method {fn!r}")
        return Signature(self.owner, fn, signature_of(impl))

    def entry_for(self, fn: str, inputs: dict[str, Any]) -> Entry:
        """The graph that runs ``fn`` for ``inputs`` (by name), traced but not kept if none
        fits."""
        method = self._table.get(fn)
        if method is None or method.current is None:
            raise TracingError(
                f"method {fn!r} of {self.owner} is not traced (traced: "
                f"{self.traced() or 'none'}); call bended.trace({fn!r}, ...) first"
            )
        return self._table.entry_for(method, method.signature.bind((), inputs), keep=False)

    def example(self, fn: str) -> dict[str, Any] | None:
        """The inputs ``fn``'s current graph was last traced with (by name), or ``None``."""
        method = self._table.get(fn)
        return None if method is None else method.example

    def running(self, fn: str, inputs: dict[str, Any]) -> tuple[Entry, Any]:
        """The graph a call of ``fn`` on ``inputs`` (by name) runs now, decisions on tensor
        values included, and its output without autograd; traced but not kept if none
        fits, leaving the module as it was."""
        method = self._table.get(fn)
        if method is None or method.current is None:
            raise TracingError(
                f"method {fn!r} of {self.owner} is not traced (traced: "
                f"{self.traced() or 'none'}); call bended.trace({fn!r}, ...) first"
            )
        return self._table.running(method, method.signature.bind((), inputs))

    @property
    def bendings(self) -> list[Bending]:
        return list(self._bendings)

    @property
    def controllables(self) -> dict[str, BendingParameter]:
        return self._board.controllables()

    def fades(self) -> dict[str, tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]]:
        """The weight crossfades under way: per control, the weights before and after its
        change, by name."""
        return self._board.fades()

    @property
    def weights_view(self) -> nn.Module:
        """The module as the bended graphs see it (bent weights in place)."""
        return self._weights.bent_module

    def base_weight(self, name: str) -> torch.Tensor:
        """The weight bendings of ``name`` apply to (the active version's)."""
        return self._weights.base_weight(name)


class Restore:
    """Returned by switches that apply at once and, used with ``with``, undo on exit."""

    def __init__(self, undo: Callable[[], Any]) -> None:
        self._undo = undo

    def __enter__(self) -> Restore:
        return self

    def __exit__(self, *exc: object) -> None:
        self._undo()
