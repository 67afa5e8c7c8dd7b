"""Write the table of the third-party zoo (``tests/zoo/models.py``) into ``docs/tracing.md``.

Builds every model of the zoo (those that trace and those known to fail), traces it with
torchbend's backends (``concrete``, ``export``, ``auto``), with plain ``torch.fx.symbolic_trace``
and with ``torch.export.export(strict=False)``, times each trace and compares its output with
the eager one, and writes the page. ``--only NAME`` runs some models and prints their rows.

Usage:
    python scripts/zoo_third_party.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "tracing.md"
SECTION = "zoo_third_party"
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "zoo"), str(ROOT / "benchmarks")]

from bench_call import write_section  # noqa: E402
from models import ALL, KNOWN_FAILING, ZooModel  # noqa: E402
from zoo_helpers import same  # noqa: E402

import torchbend as tb  # noqa: E402

BACKENDS = ("concrete", "export", "auto")


def _first_line(e: BaseException, limit: int = 110) -> str:
    lines = str(e).strip().splitlines()
    text = f"{type(e).__name__}: {lines[0] if lines else ''}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _timed(run: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = run()
    return out, time.perf_counter() - start


def _cell(ok: bool, seconds: float | None, error: str = "") -> str:
    if not ok:
        return "✗ `" + error.replace("`", "'").replace("|", "\\|") + "`"
    return f"✓ {seconds:.1f} s"


def _seeded(run: Callable[[], Any]) -> Any:
    """``run()`` from the same random state as every other call (VITS draws noise)."""
    torch.manual_seed(0)
    return run()


def try_torchbend(model: ZooModel, backend: str) -> tuple[str, str | None]:
    """The cell of one backend, and the backend that traced (``None`` if it failed)."""
    module, inputs = model.build()
    expected = _seeded(lambda: getattr(module, model.method)(**inputs))
    try:
        bended = tb.BendedModule(module, backend=backend)
        _, seconds = _timed(lambda: bended.trace(model.method, **inputs))
        got = _seeded(lambda: bended.call(model.method, **inputs))
    except Exception as e:  # the table reports failures rather than stopping at one
        return _cell(False, None, _first_line(e)), None
    if not same(got, expected):
        return _cell(False, None, "the output differs from eager"), None
    traced_by = bended.traced_by(model.method)
    return _cell(True, seconds) + (f" ({traced_by})" if backend == "auto" else ""), traced_by


def try_fx(model: ZooModel) -> str:
    module, inputs = model.build()
    expected = _seeded(lambda: getattr(module, model.method)(**inputs))
    try:
        gm, seconds = _timed(lambda: torch.fx.symbolic_trace(module, concrete_args=None))
        got = _seeded(lambda: gm(**inputs))
    except Exception as e:
        return _cell(False, None, _first_line(e))
    return _cell(True, seconds) if same(got, expected) else _cell(False, None, "wrong output")


def try_export(model: ZooModel) -> str:
    module, inputs = model.build()
    expected = _seeded(lambda: getattr(module, model.method)(**inputs))
    try:
        program, seconds = _timed(
            lambda: torch.export.export(module, (), dict(inputs), strict=False)
        )
        got = _seeded(lambda: program.module()(**inputs))
    except Exception as e:
        return _cell(False, None, _first_line(e))
    return _cell(True, seconds) if same(got, expected) else _cell(False, None, "wrong output")


def _version(library: str) -> str:
    try:
        return importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def row(model: ZooModel) -> tuple[str, str | None]:
    """The table row of ``model``, and the backend ``auto`` chose (``None`` if it failed)."""
    if not model.available:
        cells = [f"`{model.name}`", model.library, model.family, *["not installed"] * 5]
        return "| " + " | ".join(cells) + " |", None
    try:
        module, inputs = model.build()
        getattr(module, model.method)(**inputs)
    except Exception as e:
        cells = [
            f"`{model.name}`",
            model.library,
            model.family,
            *["✗ build: " + _first_line(e)] * 5,
        ]
        return "| " + " | ".join(cells) + " |", None
    results = {b: try_torchbend(model, b) for b in BACKENDS}
    cells = [
        f"`{model.name}`",
        model.library,
        model.family.replace("|", "\\|"),
        *(results[b][0] for b in BACKENDS),
        try_fx(model),
        try_export(model),
    ]
    return "| " + " | ".join(cells) + " |", results["auto"][1]


HEADER = """\
Tiny, randomly initialised models from public libraries (nothing is downloaded), built by
`tests/zoo/models.py` and traced by `tests/zoo/test_third_party.py`: the traced output equals
eager, a bent activation changes it, `reset()` is bit-exact, and a saved configuration
reproduces the bent output in a fresh `BendedModule`.

Each cell gives the time of one trace (on the machine that wrote the table) or the first line
of the error; "auto" says which backend it chose. Plain `torch.fx.symbolic_trace` and
`torch.export.export(strict=False)` are shown for comparison.

"""

COLUMNS = (
    "| model | library | family | concrete | export | auto | `torch.fx.symbolic_trace` "
    "| `torch.export` |\n|---|---|---|---|---|---|---|---|\n"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="run only these models and print their rows")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    chosen = [m for m in ALL if not args.only or m.name in args.only]
    rows, passing, failing = [], [], []
    for model in chosen:
        line, backend = row(model)
        print(line, flush=True)
        rows.append(line)
        (passing if backend else failing).append(model)
    if args.only:
        return 0
    libraries = sorted({m.library for m in ALL})
    versions = ", ".join(f"{lib} {_version(lib)}" for lib in libraries)
    summary = (
        f"{len(passing)} models trace, from {len({m.library for m in passing})} libraries; "
        f"{len(failing)} fail on both backends (`KNOWN_FAILING` in `tests/zoo/models.py`). "
        f"Written with torch {torch.__version__}, {versions}.\n\n"
    )
    reasons = "".join(f"- `{name}`: {reason}\n" for name, reason in sorted(KNOWN_FAILING.items()))
    table = HEADER + summary + COLUMNS + "\n".join(rows) + "\n"
    if reasons:
        table += "\nKnown failures:\n\n" + reasons
    write_section(PAGE, SECTION, table.rstrip("\n").split("\n"))
    print(f"wrote the {SECTION} section of {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
