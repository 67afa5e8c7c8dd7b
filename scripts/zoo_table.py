"""Write the table of the tracing zoo (``tests/conftest.py``) into ``docs/tracing.md``.

Runs every zoo entry through plain ``torch.fx.symbolic_trace`` and through torchbend (the
checks of ``check_traced``), and writes what happened between the table markers of the page,
so that the page says what the code does. ``--check`` only reports whether the page is up to
date (exit status 1 if not).

Usage:
    python scripts/zoo_table.py [--check]
"""

from __future__ import annotations

import argparse
import collections
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "tracing.md"
START, END = "<!-- zoo-table:start -->", "<!-- zoo-table:end -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _quote(text: str, limit: int = 90) -> str:
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return "`" + text.replace("`", "'") + "`"


def _torchbend_result(entry) -> str:
    from conftest import check_traced, count_traces

    calls = 1 + len(entry.extra)
    try:
        with count_traces() as traces:
            bended = check_traced(
                entry.module(), entry.inputs, entry.extra, atol=entry.atol, rtol=entry.rtol
            )
    except Exception as e:  # the table reports failures rather than stopping at one
        return f"✗ {_quote(f'{type(e).__name__}: {e}'.splitlines()[0])}"
    checked = collections.Counter(s.checked for s in bended.flow_steps())
    decisions = ", ".join(f"{n} {kind}" for kind, n in sorted(checked.items())) or "none"
    graphs = f"{traces[0]} trace{'s' * (traces[0] > 1)} for {calls} input sets"
    tolerance = f", atol={entry.atol:g}" if entry.atol or entry.rtol else ""
    return f"✓ same as eager{tolerance}; {graphs}; decisions: {decisions}"


def _fx_result(entry) -> str:
    from conftest import fx_failure

    failure = fx_failure(
        entry.module(), entry.inputs, entry.extra, atol=entry.atol, rtol=entry.rtol
    )
    return "✓ correct" if failure is None else f"✗ {_quote(failure)}"


def table() -> str:
    """The markdown table of the zoo, computed by running it."""
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import ZOO

    rows = [
        "| module | what makes it tricky | plain `torch.fx.symbolic_trace` | torchbend |",
        "|---|---|---|---|",
    ]
    for entry in ZOO:
        cells = [f"`{entry.name}`", entry.tricky, _fx_result(entry), _torchbend_result(entry)]
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check the page is current")
    args = parser.parse_args()
    page = PAGE.read_text()
    head, found, rest = page.partition(START)
    _, found_end, tail = rest.partition(END)
    if not found or not found_end:
        print(f"{PAGE} has no {START} ... {END} markers", file=sys.stderr)
        return 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        new = f"{head}{START}\n{table()}\n{END}{tail}"
    if args.check:
        if new != page:
            print(f"{PAGE} is out of date: run python scripts/zoo_table.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
