"""The README's blocks run as written: its Python and bash blocks in order, in one fresh folder
(tests/test_docs.py says how; each Python block in a namespace of its own, as each stands
alone)."""

from __future__ import annotations

import pytest

from tests.test_docs import ROOT, check_not_run, run_blocks

README = ROOT / "README.md"


@pytest.mark.slow
def test_readme_blocks_run_in_order_in_a_fresh_folder(tmp_path):
    run_blocks(README, tmp_path, session=False)


def test_the_readme_blocks_not_run_are_marked_and_listed():
    check_not_run([README])
