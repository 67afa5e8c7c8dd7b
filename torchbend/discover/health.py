"""The health probe: each activation of a bent run against the unbent run, to find the
bending that made a render silent, NaN or exploded."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from ..bended import BendedModule
from ..engine.tables import Table
from ..errors import SelectionError
from .health_stats import HealthRow, RunStats, first_problem, growth, run_stats

__all__ = ["HealthReport", "health"]

HEADERS = [
    "node",
    "shape",
    "bent",
    "mean",
    "mean (bent)",
    "std",
    "std (bent)",
    "NaN/Inf",
    "NaN/Inf (bent)",
    "dead",
    "dead (bent)",
    "growth dB",
    "problem",
]


class HealthReport:
    """The health of every probed node of one method, in graph order (see :func:`health`)."""

    def __init__(self, fn: str, rows: Sequence[HealthRow]) -> None:
        self.fn = fn
        self.rows = list(rows)

    def first_problem(self) -> HealthRow | None:
        """The first node, in graph order, where the bent run turns NaN or Inf, silent or
        explodes (see :attr:`HealthRow.problem`): the one to blame; ``None`` if none does."""
        return first_problem(self.rows)

    def table(self) -> Table:
        """The rows as a :class:`~torchbend.Table` (unbent, then bent, column by column)."""
        return Table([_cells(row) for row in self.rows], HEADERS)

    def to_records(self) -> list[dict[str, Any]]:
        """One flat dict per node (``pandas.DataFrame(report.to_records())``): ``node``,
        ``shape``, ``bent``, ``unbent_<stat>`` and ``bent_<stat>`` for each field of
        :class:`RunStats`, ``growth``, ``growth_db`` and ``problem``."""
        records = []
        for row in self.rows:
            record: dict[str, Any] = {"node": row.node, "shape": row.shape, "bent": row.bent}
            for prefix, stats in (("unbent", row.unbent), ("bent", row.bended)):
                fields = asdict(stats) if stats is not None else dict.fromkeys(_STAT_FIELDS)
                record.update({f"{prefix}_{k}": v for k, v in fields.items()})
            record.update(growth=row.growth, growth_db=row.growth_db, problem=row.problem)
            records.append(record)
        return records

    def picture(self, path: str | Path, title: str | None = None) -> Path:
        """Write a PNG heatmap of the nodes (rows) against growth in dB, dead-channel fraction
        and NaN/Inf fraction of the bent run (columns), the first problem marked; needs
        matplotlib (``pip install 'torchbend[plot]'``). Returns the path written."""
        from .health_picture import draw_health

        path = Path(path)
        draw_health(self.rows, path, title or f"health of {self.fn}: bent against unbent")
        return path

    def __repr__(self) -> str:
        first = self.first_problem()
        found = f"first problem: {first.node} ({first.problem})" if first else "no problem"
        return f"<HealthReport of {self.fn}: {len(self.rows)} nodes, {found}>"


_STAT_FIELDS = list(RunStats.__dataclass_fields__)


def health(
    bended: BendedModule,
    *inputs: Any,
    fn: str = "forward",
    nodes: str | None = None,
    reset: Callable[[], object] | None = None,
) -> HealthReport:
    """Run method ``fn`` of ``bended`` on ``inputs`` unbent and bent, and compare every
    activation (or those ``nodes`` matches) of the two runs.

    The unbent run is ``get_activations(..., bended=False)``: the wrapped module's weights
    (the active version's) and no activation bending; the bent run is the module as bent now.
    Nothing is changed: neither the wrapped module's weights nor the bendings.

    Dead channels: along axis 1 of a node of two axes or more (``[batch, channels, ...]``), a
    channel is dead when every value is exactly 0, or, when it holds more than one value, when
    its std is below :data:`DEAD_STD` (1e-7) times the std of the unbent run at that node: a
    constant channel carries nothing. Both runs are judged against the unbent std, so an
    unbent run has its own dead channels too (a ReLU's). A node of fewer axes has no dead
    fraction (``None``).

    Args:
        bended: the bended module; ``fn`` is traced on ``inputs`` if it was not yet.
        inputs: the arguments of ``fn``, in order (e.g. the audio ``[batch, channels, time]``).
        fn: the method to run.
        nodes: a pattern (``re.match``, as ``bend`` takes) choosing the nodes; all by default.
        reset: called before each of the two runs, so that a model that keeps state between
            calls starts both from the same one (``lambda: tb.audio.stream.reset_cache(m)``).

    Returns:
        HealthReport: one row per node, in graph order.

    Notes:
        A model in streaming mode carries its caches from one call to the next: without
        ``reset`` the bent run would start where the unbent run left off, and differ from it
        even with no bending.

    Example:
        >>> import torch, torchbend as tb
        >>> from torch import nn
        >>> net = nn.Sequential(nn.Conv1d(1, 4, 3), nn.Tanh(), nn.Conv1d(4, 1, 3))
        >>> bended = tb.BendedModule(net)
        >>> x = torch.randn(1, 1, 64)
        >>> _ = bended.trace(input=x)
        >>> _ = bended.bend(tb.Scale(0.0), "_1$")
        >>> tb.discover.health(bended, x).first_problem().node
        '_1'
    """
    if not isinstance(bended, BendedModule):
        raise TypeError(f"health() takes a BendedModule, got {type(bended).__name__}")
    if nodes is not None and not isinstance(nodes, str):
        raise SelectionError(f"nodes is one pattern (a string), got {nodes!r}")
    named = bended.view().signature(fn).bind(inputs, {})
    patterns = [".*" if nodes is None else nodes]
    with torch.no_grad():
        if reset is not None:
            reset()
        clean = bended.get_activations(*patterns, fn=fn, bended=False, **named)
        if reset is not None:
            reset()
        bent = bended.get_activations(*patterns, fn=fn, **named)
    where = _bent_nodes(bended, fn)
    rows = [_row(name, clean.get(name), value, where.get(name, "")) for name, value in bent.items()]
    return HealthReport(fn, rows)


def _row(name: str, clean: Any, bent: Any, where: str) -> HealthRow:
    if not isinstance(bent, torch.Tensor) or not isinstance(clean, torch.Tensor):
        shape = tuple(bent.shape) if isinstance(bent, torch.Tensor) else None
        return HealthRow(name, shape, where, None, None, None)
    reference = run_stats(clean)
    stats = run_stats(bent, reference.std)
    return HealthRow(name, tuple(bent.shape), where, reference, stats, growth(reference, stats))


def _bent_nodes(bended: BendedModule, fn: str) -> dict[str, str]:
    """What is bent at each node of ``fn``: its activation, a weight of the module it calls."""
    keys = bended.bended_keys()
    activations = {k.split(":", 1)[1] for k in keys if k.startswith(f"{fn}:")}
    weights = [k for k in keys if ":" not in k]
    where = {}
    for info in bended.activations(fn):
        kinds = []
        if info.name in activations:
            kinds.append("activation")
        if info.op == "call_module" and any(w.startswith(f"{info.target}.") for w in weights):
            kinds.append("weight")
        if kinds:
            where[info.name] = ", ".join(kinds)
    return where


def _cells(row: HealthRow) -> list[Any]:
    a, b = row.unbent, row.bended
    shape = "" if row.shape is None else "x".join(map(str, row.shape))
    if a is None or b is None:
        return [row.node, shape, row.bent, *[""] * (len(HEADERS) - 4), row.problem or ""]
    db = row.growth_db
    return [
        row.node,
        shape,
        row.bent,
        _num(a.mean),
        _num(b.mean),
        _num(a.std),
        _num(b.std),
        f"{a.nans}/{a.infs}",
        f"{b.nans}/{b.infs}",
        _fraction(a.dead),
        _fraction(b.dead),
        "" if db is None else f"{db:+.1f}",
        row.problem or "",
    ]


def _num(value: float) -> str:
    return f"{value:.4g}"


def _fraction(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"
