"""The Python blocks of docs/model.md run as written (from the repository root)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_model_doc_python_blocks_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    text = (ROOT / "docs/model.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "docs/model.md has no Python block"
    for block in blocks:
        namespace: dict[str, object] = {"__name__": "__model_doc__"}
        exec(compile(block, "docs/model.md", "exec"), namespace)
    assert namespace["y_bent"].shape == namespace["y"].shape  # type: ignore[attr-defined]
