"""What the docs tests of the shipped models share: the report scripts, and doc sections."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def report_script(name: str) -> ModuleType:
    """``scripts/<name>.py``, imported as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / f"scripts/{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_section_is(name: str, lines: list[str]) -> None:
    """Check that the section ``<!-- name: ... -->`` ... ``<!-- /name -->`` of docs/model.md
    holds ``lines``, the report of the shipped weights."""
    text = (ROOT / "docs/model.md").read_text()
    section = text[text.index(f"<!-- {name}:") : text.index(f"<!-- /{name} -->")]
    assert "\n".join(lines) in section, "run: python scripts/model_report.py --write docs/model.md"
