"""What the studio's page is sent about a model: its graph, its tables, statistics and pictures
of a weight or an activation, and the registry's callbacks as forms. Plain JSON-able data."""

from __future__ import annotations

import base64
import dataclasses
import inspect
import math
import re
from typing import Any

import torch

from ..bended import BendedModule
from ..callbacks.argument import NO_NEUTRAL, declared
from ..callbacks.base import BendingCallback
from ..callbacks.registry import CALLBACKS
from ..discover.health_stats import HealthRow
from ..engine.selection import filter_names
from ..errors import StudioError, did_you_mean
from ..tracing.facts import describe_fact
from ..tracing.records import record_of

__all__ = [
    "FORM_CALLBACKS",
    "NOT_IN_A_FORM",
    "activation_rows",
    "callback_forms",
    "graph_json",
    "health_json",
    "pattern",
    "picture",
    "statistics",
    "weight_rows",
]

_NOT_FROM_A_FORM = {
    "Capture": "records activations for InterpolationFromCapture, which a form cannot give",
    "Chain": "takes callbacks: attach them one after the other instead",
    "InterpolateActivation": "takes tensors",
    "InterpolationFromCapture": "takes a Capture",
    "Lambda": "takes a Python function: the page never sends code",
}
"""Registry callbacks the page does not offer, and why."""

FORM_CALLBACKS: dict[str, type[BendingCallback]] = {
    name: cls for name, cls in sorted(CALLBACKS.items()) if name not in _NOT_FROM_A_FORM
}
"""The callbacks the server builds: the registry's, less those whose arguments are no plain
data."""

NOT_IN_A_FORM = {
    "Gains": "takes a vector fitted to a node: the Discover tab's knobs make one",
    "Steer": "takes a vector fitted to a node: the Discover tab's knobs make one",
}
"""Callbacks the server builds (from a configuration, a knob) but the page's form does not
offer: their arguments are numbers fitted to a node, which nobody types."""


def pattern(text: str | None, what: str) -> str | None:
    """``text`` checked as a regular expression (``None`` or empty: no filter)."""
    if not text:
        return None
    try:
        re.compile(text)
    except re.error as e:
        raise StudioError(f"{what} {text!r} is not a regular expression: {e}") from None
    return text


def _shape(value: Any) -> Any:
    if isinstance(value, torch.Size):
        return list(value)
    if isinstance(value, (tuple, list)):
        return [_shape(v) for v in value]
    return None


def _dtype(value: Any) -> Any:
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if isinstance(value, (tuple, list)):
        return [_dtype(v) for v in value]
    return None


def _module_of(node: torch.fx.Node) -> str:
    if node.op == "call_module":
        return str(node.target)
    stack = node.meta.get("nn_module_stack")
    if stack:
        path = list(stack.values())[-1]
        return str(path[0] if isinstance(path, tuple) else path)
    return ""


def _bent_nodes(bended: BendedModule, fn: str) -> set[str]:
    prefix = f"{fn}:"
    return {k[len(prefix) :] for k in bended.bended_keys() if k.startswith(prefix)}


def graph_json(bended: BendedModule, fn: str) -> dict[str, Any]:
    """The last graph traced for ``fn``: nodes in order (with the module they belong to, their
    shapes and what they read), the decisions baked in and the facts they read."""
    graph = bended.graph(fn)
    bent = _bent_nodes(bended, fn)
    nodes = []
    for node in graph.nodes:
        record = record_of(node)
        nodes.append(
            {
                "name": node.name,
                "op": node.op,
                "target": node.target if isinstance(node.target, str) else _target(node),
                "module": _module_of(node),
                "shape": _shape(record.shape),
                "dtype": _dtype(record.dtype),
                "tensor": record.is_tensor,
                "bent": node.name in bent,
                "inputs": [n.name for n in node.all_input_nodes],
            }
        )
    return {
        "fn": fn,
        "nodes": nodes,
        "flow_steps": [
            {
                "kind": s.kind,
                "name": s.name,
                "value": s.value if isinstance(s.value, (bool, int, float, str)) else repr(s.value),
                "file": s.file,
                "function": s.function,
                "checked": s.checked,
            }
            for s in graph.flow_steps
        ],
        "guards": [describe_fact(f) for f in graph.guard_facts],
        "runtime_guards": graph.runtime_guards,
    }


def _target(node: torch.fx.Node) -> str:
    target = node.target
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    module = getattr(target, "__module__", None)
    if name and module in ("_operator", "operator", "builtins"):
        return str(name)
    return f"{module}.{name}" if name and module else str(target)


def weight_rows(bended: BendedModule, flt: str | None) -> list[dict[str, Any]]:
    """The weights matching ``flt`` (``re.match``, as in Python), as bent now."""
    bent = set(bended.bended_keys())
    rows = []
    for name in filter_names(bended.weight_names, pattern(flt, "pattern")):
        w = bended.weight(name).detach()
        rows.append(
            {
                "name": name,
                "shape": list(w.shape),
                "dtype": _dtype(w.dtype),
                **_moments(w.float()),
                "bent": name in bent,
            }
        )
    return rows


def activation_rows(bended: BendedModule, fn: str, flt: str | None) -> list[dict[str, Any]]:
    """The activations of ``fn`` matching ``flt``."""
    bent = _bent_nodes(bended, fn)
    return [
        {
            "name": a.name,
            "op": a.op,
            "target": a.target,
            "shape": _shape(a.shape),
            "dtype": _dtype(a.dtype),
            "tensor": a.is_tensor,
            "bent": a.name in bent,
        }
        for a in bended.activations(fn, flt=pattern(flt, "pattern"))
    ]


def _moments(x: torch.Tensor) -> dict[str, float | None]:
    finite = x[torch.isfinite(x)]
    if finite.numel() == 0:
        return {"min": None, "max": None, "mean": None, "std": None}
    return {
        "min": _number(finite.min()),
        "max": _number(finite.max()),
        "mean": _number(finite.mean()),
        "std": _number(finite.std()) if finite.numel() > 1 else 0.0,
    }


def _number(x: torch.Tensor) -> float:
    return float(f"{x.item():.6g}")


def picture(x: torch.Tensor, rows: int = 64, columns: int = 256) -> dict[str, Any]:
    """``x`` as a grid of bytes the page colours: its last axis (time, or a weight's inputs)
    across, everything before it folded into rows (channels; a batch of one is dropped),
    each axis shrunk to at most ``rows`` x ``columns`` by averaging the magnitude; levels
    from the smallest to the largest magnitude as 0 to 255, base64-coded."""
    x = torch.nan_to_num(x.detach().float(), nan=0.0, posinf=0.0, neginf=0.0)
    while x.dim() > 1 and x.shape[0] == 1:
        x = x[0]
    if x.dim() == 0:
        x = x.reshape(1, 1)
    elif x.dim() == 1:
        x = x[None]
    grid = x.reshape(-1, x.shape[-1]).abs()
    grid = torch.nn.functional.adaptive_avg_pool2d(
        grid[None], (min(rows, grid.shape[0]), min(columns, grid.shape[1]))
    )[0]
    low, high = float(grid.min()), float(grid.max())
    scaled = (grid - low) / (high - low) if high > low else torch.zeros_like(grid)
    data = (scaled * 255).round().to(torch.uint8).contiguous().numpy().tobytes()
    return {
        "rows": grid.shape[0],
        "cols": grid.shape[1],
        "low": low,
        "high": high,
        "data": base64.b64encode(data).decode("ascii"),
    }


def statistics(name: str, kind: str, x: torch.Tensor) -> dict[str, Any]:
    """Mean, deviation, range and a picture of a weight or an activation."""
    return {
        "name": name,
        "kind": kind,
        "shape": list(x.shape),
        "dtype": _dtype(x.dtype),
        **_moments(x.detach().float()),
        "nonfinite": int((~torch.isfinite(x.detach())).sum()),
        # a weight: its outputs down, everything each output reads across
        "picture": picture(x.reshape(x.shape[0], -1) if kind == "weight" and x.dim() > 1 else x),
    }


def health_json(row: HealthRow) -> dict[str, Any]:
    """A node's health, the bent run against the unbent one (``tb.discover.health``): its
    growth in dB (as text too, since JSON has no infinity), each run's mean, std, RMS, NaN and
    Inf counts and dead-channel fraction, and the problem it shows (``None`` if none)."""
    db = row.growth_db
    return {
        "growth_db": db,
        "growth": "" if db is None else f"{db:+.1f} dB",
        "problem": row.problem,
        "bent": row.bent,
        "unbent": None if row.unbent is None else dataclasses.asdict(row.unbent),
        "bended": None if row.bended is None else dataclasses.asdict(row.bended),
    }


def callback_forms() -> list[dict[str, Any]]:
    """Each callback the page offers, with the form of its arguments: kind, default, bounds,
    neutral value and whether a control can drive it, from the callback's declarations."""
    return [
        {"name": name, "doc": _summary(cls), "args": _arguments(cls)}
        for name, cls in FORM_CALLBACKS.items()
        if name not in NOT_IN_A_FORM
    ]


def form_callback(name: str) -> type[BendingCallback]:
    """The class a request names, if the page may build it."""
    cls = FORM_CALLBACKS.get(name)
    if cls is None:
        why = _NOT_FROM_A_FORM.get(name)
        if why:
            raise StudioError(f"the studio does not build {name}: it {why}")
        raise StudioError(
            f"no callback {name!r} in the studio{did_you_mean(name, FORM_CALLBACKS)}; it builds "
            f"{', '.join(FORM_CALLBACKS)} (torchbend's registry), never a class a request names "
            "by module"
        )
    return cls


def _summary(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    summary = doc.split("\n\n")[0].replace("\n", " ").strip()
    return re.sub(r":\w+:`~?([^`]+)`", r"\1", summary).replace("``", "")  # reST to text


def _arguments(cls: type) -> list[dict[str, Any]]:
    arguments = declared(cls)
    form = []
    for p in inspect.signature(cls).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or "Tensor" in str(p.annotation):
            continue
        required = p.default is inspect.Parameter.empty
        default = None if required else p.default
        if p.name == "seed" and default is None:
            default = 0  # a seeded draw replays the same in a saved configuration
        argument = arguments.get(p.name)
        if argument is None:
            kind = "bool" if isinstance(default, bool) else "json"
            form.append(
                {
                    "name": p.name,
                    "kind": kind,
                    "default": default,
                    "required": required,
                    "low": None,
                    "high": None,
                    "neutral": None,
                    "meaning": "",
                    "ramps": False,
                    "nullable": default is None,
                    "controllable": False,
                }
            )
            continue
        neutral = None if argument.neutral is NO_NEUTRAL else argument.neutral
        form.append(
            {
                "name": p.name,
                "kind": argument.kind.__name__,
                "default": default,
                "required": required,
                "low": _finite(argument.low),
                "high": _finite(argument.high),
                "neutral": neutral if not isinstance(neutral, float) else _finite(neutral),
                "meaning": argument.meaning,
                "ramps": argument.ramps,
                "nullable": argument.none is not None,
                "controllable": True,
            }
        )
    return form


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
