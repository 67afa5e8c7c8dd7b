"""``torchbend callbacks``: list the bending callbacks, their arguments and what each does."""

from __future__ import annotations

import argparse
import inspect
from typing import Any

from ..options import subcommand

__all__ = ["add_parser", "run", "summary"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = subcommand(sub, "callbacks", "list the bending callbacks: name, arguments, what each does")
    p.set_defaults(run=run)
    return p


def summary(obj: Any) -> str:
    """The first paragraph of ``obj``'s docstring, on one line."""
    doc = inspect.getdoc(obj) or ""
    return doc.split("\n\n")[0].replace("\n", " ")


def run(args: argparse.Namespace) -> int:
    from ...callbacks.registry import ALIASES, CALLBACKS

    for name, cls in sorted(CALLBACKS.items()):
        parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
        aliases = [a for a, c in ALIASES.items() if c is cls]
        also = f" (also {', '.join(aliases)})" if aliases else ""
        shown = ", ".join(_parameter(p) for p in parameters)
        print(f"{name}({shown}){also}\n    {summary(cls)}")
    return 0


def _parameter(p: inspect.Parameter) -> str:
    """``prob: float | Control = 0.3``, whether the module annotates with strings or not."""
    text = p.name
    if p.annotation is not p.empty:
        annotation = p.annotation
        if not isinstance(annotation, str):
            annotation = inspect.formatannotation(annotation)
        for long, short in [
            (
                "torchbend.controls.parameter.BendingParameter"
                " | torchbend.controls.parameter.ControlView",
                "Control",
            ),
            ("collections.abc.", ""),
            ("typing.", ""),
        ]:
            annotation = annotation.replace(long, short)
        text += f": {annotation}"
    if p.default is not p.empty:
        text += f" = {p.default!r}"
    return text
