"""Sweeps: render thousands of bendings of a model over a folder of sounds, measure each
render, and map them (docs/sweeps.md).

>>> import torchbend as tb
>>> tb.sweep.plan  # doctest: +ELLIPSIS
<function plan at ...>
"""

from pathlib import Path

from .atlas import Atlas, atlas
from .best import best, describe_config
from .engines import ENGINES, Engine, InProcess, LocalPool, RayEngine
from .estimate import Plan, plan
from .manifest import Manifest, read_rows, row_config, table
from .run import SweepResult, SweepStopped, run
from .spec import SweepSpec, read_spec

__all__ = [
    "ENGINES",
    "Atlas",
    "Engine",
    "InProcess",
    "LocalPool",
    "Manifest",
    "Plan",
    "RayEngine",
    "SweepResult",
    "SweepSpec",
    "SweepStopped",
    "best",
    "describe_config",
    "map",
    "plan",
    "read_rows",
    "read_spec",
    "row_config",
    "run",
    "table",
]


def map(folder: str | Path, png: bool = True, html: bool = True) -> Atlas:
    """The atlas of the sweep in ``folder``: ``atlas.png`` and ``atlas.html`` written there
    (see :func:`torchbend.sweep.atlas.atlas`)."""
    return atlas(read_rows(folder), folder, png=png, html=html)
