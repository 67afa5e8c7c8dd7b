"""The health probe: each activation of a bent run against the unbent run, to find the
bending that made a render silent, NaN or exploded."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from ..bended import BendedModule
from ..engine.tables import Table
from ..errors import SelectionError

__all__ = [
    "DEAD_STD",
    "EXPLODED_DB",
    "SILENT_RATIO",
    "HealthReport",
    "HealthRow",
    "RunStats",
    "health",
    "run_stats",
]

DEAD_STD = 1e-7
"""A channel is dead when its std is below this times the unbent node's std (or it is all 0)."""
SILENT_RATIO = 1e-6
"""A bent node is silent when its RMS is below this times the unbent node's RMS."""
EXPLODED_DB = 40.0
"""A bent node has exploded when its RMS grew by more than this many dB over the unbent one."""


@dataclass(frozen=True)
class RunStats:
    """What one run gave at one node. Mean, std and RMS are over the finite values only, so
    that one NaN does not hide the rest; ``nans`` and ``infs`` count the others."""

    mean: float
    """Mean of the finite values (NaN if there are none)."""
    std: float
    """Standard deviation (population) of the finite values."""
    rms: float
    """Root mean square of the finite values."""
    nans: int
    """How many values are NaN."""
    infs: int
    """How many values are infinite (either sign)."""
    size: int
    """How many values the node holds."""
    dead: float | None
    """Fraction of dead channels (axis 1), or ``None`` for a node without a channel axis."""


@dataclass(frozen=True)
class HealthRow:
    """One node: its unbent and bent statistics side by side, and how its RMS grew."""

    node: str
    """Graph node name (what ``bend`` patterns match)."""
    shape: tuple[int, ...] | None
    """Shape of the bent value (``None`` if it is not a tensor)."""
    bent: str
    """What is bent at this node: ``"activation"``, ``"weight"`` (a weight of the module the
    node calls), both, or ``""``."""
    unbent: RunStats | None
    """The unbent run's statistics (``None`` if the value is not a tensor)."""
    bended: RunStats | None
    """The bent run's statistics (``None`` if the value is not a tensor)."""
    growth: float | None
    """Bent RMS / unbent RMS (1 where both are 0, ``inf`` where only the unbent one is)."""

    @property
    def growth_db(self) -> float | None:
        """``growth`` in dB (``20 log10``; ``-inf`` for a silenced node)."""
        if self.growth is None:
            return None
        return 20 * math.log10(self.growth) if self.growth > 0 else -math.inf

    @property
    def problem(self) -> str | None:
        """``"NaN"`` or ``"Inf"`` (more of them bent than unbent), ``"silent"`` (bent RMS below
        :data:`SILENT_RATIO` times the unbent one), ``"exploded"`` (growth above
        :data:`EXPLODED_DB`), or ``None``."""
        a, b = self.unbent, self.bended
        if a is None or b is None:
            return None
        if b.nans > a.nans:
            return "NaN"
        if b.infs > a.infs:
            return "Inf"
        if a.rms > 0 and b.rms < SILENT_RATIO * a.rms:
            return "silent"
        db = self.growth_db
        if db is not None and db > EXPLODED_DB:
            return "exploded"
        return None


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
        return next((row for row in self.rows if row.problem is not None), None)

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
        draw_health(self, path, title or f"health of {self.fn}: bent against unbent")
        return path

    def __repr__(self) -> str:
        first = self.first_problem()
        found = f"first problem: {first.node} ({first.problem})" if first else "no problem"
        return f"<HealthReport of {self.fn}: {len(self.rows)} nodes, {found}>"


_STAT_FIELDS = list(RunStats.__dataclass_fields__)


def health(
    bended: BendedModule, *inputs: Any, fn: str = "forward", nodes: str | None = None
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

    Returns:
        HealthReport: one row per node, in graph order.

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
        clean = bended.get_activations(*patterns, fn=fn, bended=False, **named)
        bent = bended.get_activations(*patterns, fn=fn, **named)
    where = _bent_nodes(bended, fn)
    rows = [_row(name, clean.get(name), value, where.get(name, "")) for name, value in bent.items()]
    return HealthReport(fn, rows)


def run_stats(value: torch.Tensor, reference_std: float | None = None) -> RunStats:
    """The statistics of one tensor; channels are dead against ``reference_std`` (the unbent
    node's std, see :func:`health`; the tensor's own std if ``None``)."""
    x = value.detach()
    x = x.abs() if x.is_complex() else x
    x = x.to(torch.float64)
    finite = x[torch.isfinite(x)]
    n = finite.numel()
    mean = finite.mean().item() if n else math.nan
    std = finite.std(correction=0).item() if n else math.nan
    rms = finite.square().mean().sqrt().item() if n else math.nan
    if reference_std is None:
        reference_std = std
    return RunStats(
        mean=mean,
        std=std,
        rms=rms,
        nans=int(torch.isnan(x).sum()),
        infs=int(torch.isinf(x).sum()),
        size=x.numel(),
        dead=_dead_fraction(x, reference_std),
    )


def _dead_fraction(x: torch.Tensor, reference_std: float) -> float | None:
    if x.dim() < 2 or x.shape[1] == 0:
        return None
    channels = x.transpose(0, 1).reshape(x.shape[1], -1)
    dead = (channels == 0).all(1)
    if channels.shape[1] > 1:
        dead |= channels.std(1, correction=0) < DEAD_STD * reference_std
    return float(dead.double().mean())


def _row(name: str, clean: Any, bent: Any, where: str) -> HealthRow:
    if not isinstance(bent, torch.Tensor) or not isinstance(clean, torch.Tensor):
        shape = tuple(bent.shape) if isinstance(bent, torch.Tensor) else None
        return HealthRow(name, shape, where, None, None, None)
    reference = run_stats(clean)
    stats = run_stats(bent, reference.std)
    return HealthRow(name, tuple(bent.shape), where, reference, stats, _growth(reference, stats))


def _growth(unbent: RunStats, bent: RunStats) -> float:
    if unbent.rms == 0:
        return 1.0 if bent.rms == 0 else math.inf
    return bent.rms / unbent.rms


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
