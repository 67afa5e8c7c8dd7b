"""Sweeps: render thousands of bendings of a model over a folder of sounds, measure each
render, and map them (docs/sweeps.md).

>>> import torchbend as tb
>>> tb.sweep.plan  # doctest: +ELLIPSIS
<function plan at ...>
"""

import warnings
from typing import Any

from .atlas import Atlas
from .best import best, describe_config
from .draw import draw_map
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
    "draw_map",
    "plan",
    "read_rows",
    "read_spec",
    "row_config",
    "run",
    "table",
]


def __getattr__(name: str) -> Any:
    # ``map``, the old name of ``draw_map``, is answered here rather than bound in this module,
    # where it would shadow the builtin for the code below it.
    if name == "map":
        warnings.warn(
            "torchbend.sweep.map is deprecated; use torchbend.sweep.draw_map (the old name "
            "shadowed the builtin map)",
            DeprecationWarning,
            stacklevel=2,
        )
        return draw_map
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
