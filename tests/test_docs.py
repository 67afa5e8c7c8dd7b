"""The Python blocks of the docs run as written: each page's blocks in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).parents[1] / "docs"
PAGES = {
    "bending.md": "",
    "callbacks.md": "### Time, filters and snapshots",
    "callbacks.md#control-metadata": "## Control metadata",
    "export.md": "### Reading it without torch",
    "realtime.md": "## Safety stage",
    "studio.md": "### The studio from Python",
    "sweeps.md": "## Python",
}
"""The pages, or their sections (from a heading to the next of its level or above), whose
blocks run: each one's first block builds what its next ones use."""


def python_blocks(page: Path, heading: str = "") -> list[tuple[int, str]]:
    """The ```python blocks of ``page`` (of its section under ``heading``, if given), each
    with the line it starts on."""
    text = page.read_text()
    start, end = 0, len(text)
    if heading:
        start = text.index(f"\n{heading}\n")
        level = heading.split(" ")[0]
        # headings outside code blocks (a "# comment" in a block is none)
        prose = re.sub(r"^```.*?^```", lambda m: " " * len(m.group()), text, flags=re.S | re.M)
        later = re.search(rf"^#{{1,{len(level)}}} ", prose[start + len(heading) + 2 :], re.M)
        end = start + len(heading) + 2 + later.start() if later else len(text)
    return [
        (text.count("\n", 0, m.start(1)) + 1, m.group(1))
        for m in re.finditer(r"^```python\n(.*?)^```", text[:end], re.S | re.M)
        if m.start() >= start
    ]


@pytest.mark.parametrize("name", PAGES)
def test_python_blocks_run_in_order(name, tmp_path, monkeypatch):
    page = DOCS / name.partition("#")[0]
    blocks = python_blocks(page, PAGES[name])
    assert blocks, f"{name} has no Python block"
    for folder in ("assets",):  # what blocks read, from the repository
        (tmp_path / folder).symlink_to(DOCS.parent / folder)
    monkeypatch.chdir(tmp_path)  # what a block writes lands here
    namespace: dict[str, object] = {"__name__": f"__docs_{page.stem}__"}
    for line, block in blocks:
        # Blank lines first: errors then name the page's own line numbers.
        code = compile("\n" * (line - 1) + block, str(page), "exec")
        exec(code, namespace)
