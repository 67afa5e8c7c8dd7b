"""Tables of weights and activations, as text for terminals and HTML for notebooks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tabulate import tabulate

__all__ = ["Table", "show"]


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
