"""Inspection: the weights, activations and graphs of a bended module, as lists and tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.fx

from ..errors import SelectionError, did_you_mean
from ..rewriting import graph_module_record
from ..tables import ActivationInfo, Table, activation_infos, show, weights_table
from ..tracing import TracedGraph
from ..tracing.surgery import insert_slots
from ..weights import WeightBank
from .methods import MethodTable

__all__ = ["Inspector"]

Patterns = str | Sequence[str] | None


class Inspector:
    """Answers what the facade's inspection methods ask, reading the table and the bank."""

    def __init__(self, table: MethodTable, weights: WeightBank) -> None:
        self.table = table
        self.weights = weights

    def weight(self, name: str) -> torch.Tensor:
        names = self.weights.names()
        if name not in names:
            raise SelectionError(
                f"{self.table.owner} has no weight {name!r}" + did_you_mean(name, names, 3)
            )
        return self.weights.current(name)

    def print_weights(
        self,
        flt: Patterns,
        exclude: Patterns,
        out: str | Path | None,
        aliases: Mapping[str, Sequence[str]] | None = None,
    ) -> Table:
        return show(weights_table(self.weights, flt, exclude, aliases), out)

    def activations(
        self, fn: str, op: Patterns, flt: Patterns, exclude: Patterns
    ) -> list[ActivationInfo]:
        return activation_infos(self.table.current(fn).nodes(False), op, flt, exclude)

    def activation_shape(self, name: str, fn: str) -> Any:
        infos = self.activations(fn, None, None, None)
        for a in infos:
            if a.name == name:
                return a.shape
        raise SelectionError(
            f"{fn} of {self.table.owner} has no activation {name!r}"
            + did_you_mean(name, [a.name for a in infos], 3)
        )

    def graphs(self, fn: str) -> list[TracedGraph]:
        self.table.current(fn)
        method = self.table.get(fn)
        return [] if method is None else [e.graph for e in method.entries]

    def graph_module(self, fn: str) -> torch.fx.GraphModule:
        gm = self.table.current(fn).gm
        assert gm is not None
        return gm

    def print_graph(self, fn: str, out: str | Path | None) -> str:
        entry = self.table.current(fn)
        assert entry.gm is not None
        bent = list(graph_module_record(entry.gm).slots)
        text = f"# {fn}: traced by the {entry.backend} backend\n" + str(
            insert_slots(entry.graph, bent)
        )
        if out is None:
            print(text)
        else:
            Path(out).write_text(text + "\n")
        return text
