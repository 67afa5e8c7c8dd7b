"""The README's Python blocks run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


@pytest.mark.slow
def test_readme_python_blocks_run(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "the README has no Python block"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {"__name__": "__readme__"})
    assert "conv_module" in capsys.readouterr().out
