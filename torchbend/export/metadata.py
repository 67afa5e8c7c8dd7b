"""The controls' metadata of an export: what :func:`controls_metadata` gives, and the method of
the exported module that returns it as JSON text."""

from __future__ import annotations

import json
from typing import Any

from ..errors import ExportError
from .plan import ExportPlan
from .reader import FORMAT, VERSION

__all__ = ["CONTROLS_METHOD", "controls_metadata", "metadata_source"]

CONTROLS_METHOD = "get_controls_json"
"""The method of an exported module that returns its controls' metadata, as JSON text."""


def controls_metadata(plan: ExportPlan, getters: str = "value") -> dict[str, Any]:
    """The controls' metadata of an export (docs/export.md, "Control metadata"): each
    control as :meth:`~torchbend.BendingParameter.describe` gives it, with the names of its
    setter and getter."""
    controls = []
    for name, c in plan.controls.items():
        described = c.control.describe()
        controls.append({**described, "setter": f"set_{name}", "getter": f"get_{name}"})
    metadata = {"format": FORMAT, "version": VERSION, "getters": getters, "controls": controls}
    if plan.latency is not None:  # nn~ files: the delays they add (export/latency.py)
        metadata["latency"] = dict(plan.latency)
    return metadata


def metadata_source(plan: ExportPlan, getters: str) -> list[str]:
    """:data:`CONTROLS_METHOD`, returning the metadata as a string constant."""
    clash = CONTROLS_METHOD.removeprefix("get_")
    if clash in plan.controls:
        raise ExportError(
            f"control {clash!r} would have a getter {CONTROLS_METHOD}, the method exports keep "
            "for their controls' metadata; rename the control"
        )
    # ASCII on one line: Python's repr of it is then a string literal TorchScript reads back
    # as it is (non-ASCII characters are escaped by JSON, quotes and backslashes by repr).
    text = json.dumps(controls_metadata(plan, getters), ensure_ascii=True, separators=(",", ":"))
    return [f"def {CONTROLS_METHOD}(self) -> str:", f"    return {text!r}"]
