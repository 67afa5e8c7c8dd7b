"""Tables of weights, activations and controls, as text for terminals and HTML for notebooks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
from tabulate import tabulate

from ..tracing import record_of
from ..tracing.compat import target_name
from .selection import filter_names

if TYPE_CHECKING:
    from ..controls import BendingParameter
    from .weights import WeightBank

__all__ = [
    "ActivationInfo",
    "Table",
    "activation_infos",
    "activations_table",
    "controls_table",
    "latent_names",
    "show",
    "weights_table",
]


class Table(str):
    """A table rendered as text; notebooks display it as HTML."""

    headers: Sequence[str]
    rows: Sequence[Sequence[Any]]

    def __new__(cls, rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> Table:
        self = super().__new__(cls, tabulate(rows, headers=headers))
        self.headers, self.rows = headers, rows
        return self

    def _repr_html_(self) -> str:
        return str(tabulate(self.rows, headers=self.headers, tablefmt="html"))


def show(table: Table, out: str | Path | None) -> Table:
    """Print ``table``, or write it to ``out`` when given; return it."""
    if out is None:
        print(table)
    else:
        Path(out).write_text(str(table) + "\n")
    return table


@dataclass(frozen=True)
class ActivationInfo:
    """One activation of a traced method, as recorded at trace time."""

    name: str
    """Graph node name (what ``bend`` patterns match)."""
    op: str
    """Graph op: ``placeholder``, ``call_module``, ``call_function``, ``call_method``..."""
    target: str
    """The module path, function or method the node calls."""
    shape: Any
    """``torch.Size`` of a tensor, or a tuple of shapes for tuple outputs."""
    dtype: Any
    """``torch.dtype`` of a tensor, or a tuple of dtypes."""
    is_tensor: bool = True
    """Whether the value is one tensor, which ``bend`` can take; a tuple output cannot be
    bent: bend the items taken from it (``getitem`` nodes)."""


def weights_table(
    bank: WeightBank,
    flt: str | Sequence[str] | None = None,
    exclude: str | Sequence[str] | None = None,
    aliases: Mapping[str, Sequence[str]] | None = None,
) -> Table:
    """Name, shape, dtype, min, max, mean, std of the current weights, whether bent, and
    their aliases (``#name``, by weight name) when some have one."""
    rows = []
    names = filter_names(bank.names(), flt, exclude)
    for name in names:
        w = bank.current(name).detach()
        f = w.float()
        std = f.std().item() if w.numel() > 1 else 0.0
        dtype = str(w.dtype).removeprefix("torch.")
        stats = [f.min().item(), f.max().item(), f.mean().item(), std]
        rows.append([name, list(w.shape), dtype, *stats, "yes" if name in bank.bent else ""])
    headers = ["name", "shape", "dtype", "min", "max", "mean", "std", "bent"]
    if aliases and any(aliases.get(n) for n in names):
        rows = [[*row, " ".join(aliases.get(n, ()))] for row, n in zip(rows, names)]
        headers.append("alias")
    return Table(rows, headers)


def activation_infos(
    nodes: Sequence[torch.fx.Node],
    op: str | Sequence[str] | None = None,
    flt: str | Sequence[str] | None = None,
    exclude: str | Sequence[str] | None = None,
) -> list[ActivationInfo]:
    """The activations of a traced graph (its ``nodes`` with a recorded shape), filtered by
    op and by name patterns."""
    ops = {op} if isinstance(op, str) else set(op or ())
    by_name = {n.name: n for n in nodes}
    return [
        ActivationInfo(
            n.name, n.op, target_name(n.target), record.shape, record.dtype, record.is_tensor
        )
        for name in filter_names(by_name, flt, exclude)
        for n in [by_name[name]]
        for record in [record_of(n)]
        if not ops or n.op in ops
    ]


def latent_names(module: object) -> list[str] | None:
    """The names of a model's latent channels, in order, if it declares them: a
    ``latent_names`` attribute holding a sequence of strings (``None`` otherwise)."""
    names = getattr(module, "latent_names", None)
    if isinstance(names, str) or not isinstance(names, Sequence) or not names:
        return None
    return [str(n) for n in names] if all(isinstance(n, str) for n in names) else None


def _carries(info: ActivationInfo, names: Sequence[str]) -> bool:
    """Whether an activation has as many channels (axis 1) as the latent has names."""
    shape = info.shape
    return info.is_tensor and len(shape) >= 2 and int(shape[1]) == len(names)


def activations_table(
    infos: Sequence[ActivationInfo],
    aliases: Mapping[str, Sequence[str]] | None = None,
    latent: Sequence[str] | None = None,
) -> Table:
    """Name, op, shape, dtype of activations, as the seed's table shows them, their aliases
    (``#name``, by activation name) when some have one, and the names of the model's latent
    channels (``latent``, see :func:`latent_names`) on the activations with that many
    channels."""
    rows = [[a.name, a.op, _fmt(a.shape), _fmt(a.dtype)] for a in infos]
    headers = ["name", "op", "shape", "dtype"]
    if aliases and any(aliases.get(a.name) for a in infos):
        rows = [[*row, " ".join(aliases.get(a.name, ()))] for row, a in zip(rows, infos)]
        headers.append("alias")
    if latent and any(_carries(a, latent) for a in infos):
        named = ", ".join(latent)
        rows = [[*row, named if _carries(a, latent) else ""] for row, a in zip(rows, infos)]
        headers.append("latent channels")
    return Table(rows, headers)


def controls_table(controls: Iterable[BendingParameter]) -> Table:
    """Name, type, value, the values taken (range and the bounds of the arguments driven),
    clamp, ramp, and the widget (kind, unit, curve, label, group) of each control.

    Example:
        >>> import torchbend as tb
        >>> from torchbend.controls import Widget
        >>> gain = tb.BendingParameter("gain", 0.5, range=(0.0, 2.0), widget=Widget(unit="dB"))
        >>> controls_table([gain]).rows[0]
        ['gain', 'float', 0.5, '[0.0, 2.0]', 'no', 0, 'knob', 'dB', 'linear', 'gain', '']
    """
    rows = []
    for c in controls:
        d = c.describe()
        widget = d["widget"]
        kind = widget["kind"]
        if widget["choices"]:
            kind += f" ({', '.join(widget['choices'])})"
        low, high = d["limits"] or (None, None)
        values = (
            "True, False"
            if d["type"] == "bool"
            else f"[{_bound(low, '-inf')}, {_bound(high, 'inf')}]"
        )
        value = d["value"]
        if d["type"] == "tensor":  # a vector: its length, not its values
            value, values = f"<{d['length']} values>", "finite floats"
        rows.append(
            [
                d["name"],
                d["type"],
                str(value) if d["type"] == "bool" else value,
                values,
                "yes" if d["clamp"] else "no",
                d["ramp"],
                kind,
                widget["unit"],
                widget["curve"],
                widget["label"],
                widget["group"],
            ]
        )
    headers = "name type value values clamp ramp widget unit curve label group".split()
    return Table(rows, headers)


def _bound(value: float | None, unbounded: str) -> str:
    return unbounded if value is None else str(value)


def _fmt(value: Any) -> str:
    if isinstance(value, torch.Size):
        return f"torch.Size({list(value)})"
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, tuple):
        return "(" + ", ".join(_fmt(v) for v in value) + ")"
    return str(value)
