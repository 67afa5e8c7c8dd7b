"""Inspection: the weights, activations and graphs of a bended module, as lists and tables."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.fx

from ..errors import SelectionError, did_you_mean
from ..tracing import TracedGraph, record_of
from ..tracing.surgery import insert_slots
from .methods import MethodTable
from .rewriting import graph_module_record
from .tables import ActivationInfo, Table, activation_infos, show, weights_table
from .weights import WeightBank

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

    def why_not_bendable(self, patterns: Sequence[str]) -> str:
        """``"; 'a' of forward is ..."``: why activations ``patterns`` match cannot be bent
        (values that are not one tensor), or ``""``."""
        for method in self.table:
            if method.current is None or method.source is not None:
                continue
            entry = method.current
            tensors = {n.name for n in entry.nodes(True)}
            for node in entry.nodes(False):
                if node.name in tensors:
                    continue
                if any(isinstance(p, str) and p and re.match(p, node.name) for p in patterns):
                    items = [u.name for u in node.users if u.name in tensors]
                    shape = record_of(node).shape
                    shapes = ", ".join(
                        str(tuple(s)) if isinstance(s, torch.Size) else str(s) for s in shape
                    )
                    return (
                        f"; {node.name!r} of {method.name} is not one tensor but a "
                        f"{type(shape).__name__} of shapes {shapes}: bend the tensors taken "
                        "from it instead" + (f" ({', '.join(items)})" if items else "")
                    )
        return ""
