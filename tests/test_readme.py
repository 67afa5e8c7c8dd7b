"""The README's blocks run as written: its Python and bash blocks in order, in one fresh folder
(tests/test_docs.py says how; each Python block in a namespace of its own, as each stands
alone)."""

from __future__ import annotations

import pytest
import torch

from tests.test_docs import ROOT, blocks, check_not_run, run_blocks

README = ROOT / "README.md"


@pytest.mark.slow
def test_readme_blocks_run_in_order_in_a_fresh_folder(tmp_path):
    run_blocks(README, tmp_path, session=False)


def test_the_readme_blocks_not_run_are_marked_and_listed():
    check_not_run([README])


def test_the_live_controls_example_exports_to_nntilde_and_its_knob_follows(tmp_path, monkeypatch):
    # The knob drives a Scale on an activation and a seeded Noise on a weight: the nn~ file
    # holds both, and its set_depth gives what update gives.
    (code,) = [b.code for b in blocks(README) if 'tb.export.nntilde(bended, "depth.ts")' in b.code]
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__readme__"}
    exec(compile(code, str(README), "exec"), namespace)
    bended, exported = namespace["bended"], torch.jit.load("depth.ts")
    assert exported.get_attributes() == ["depth"]
    x = torch.randn(1, 1, 256, generator=torch.Generator().manual_seed(0))
    for value in (0.3, 1.0):
        bended.update("depth", value)
        assert exported.set_depth(value) == 0
        with torch.no_grad():
            for _ in range(2):  # the ramp over the next block, then the value
                assert torch.equal(exported(x), bended(x))
