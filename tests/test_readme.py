"""The README's blocks run as written: its Python and bash blocks in order, in one fresh folder
(tests/test_docs.py says how; each Python block in a namespace of its own, as each stands
alone)."""

from __future__ import annotations

import pytest
import torch

from tests.test_docs import ROOT, blocks, check_not_run, run_blocks
from torchbend.errors import ExportError

README = ROOT / "README.md"


@pytest.mark.slow
def test_readme_blocks_run_in_order_in_a_fresh_folder(tmp_path):
    run_blocks(README, tmp_path, session=False)


def test_the_readme_blocks_not_run_are_marked_and_listed():
    check_not_run([README])


def live_controls_block() -> str:
    (code,) = [b.code for b in blocks(README) if 'tb.export.nntilde(bended, "depth.ts")' in b.code]
    return code


def test_the_live_controls_example_exports_to_nntilde_and_its_knob_follows(tmp_path, monkeypatch):
    # The knob drives a Scale on an activation and a seeded Offset on a weight: the nn~ file
    # holds both, and its set_depth gives what update gives.
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__readme__"}
    exec(compile(live_controls_block(), str(README), "exec"), namespace)
    bended, exported = namespace["bended"], torch.jit.load("depth.ts")
    assert exported.get_attributes() == ["depth"]
    x = torch.randn(1, 1, 256, generator=torch.Generator().manual_seed(0))
    for value in (0.3, 1.0):
        bended.update("depth", value)
        assert exported.set_depth(value) == 0
        with torch.no_grad():
            for _ in range(2):  # the ramp over the next block, then the value
                assert torch.equal(exported(x), bended(x))


def test_a_seeded_noise_on_the_knob_is_refused_for_files_as_the_readme_says(tmp_path, monkeypatch):
    # The README's first version of the example: a seeded Noise on the weight. Its generator
    # cannot be written to a file: refused with the way out; in memory it exports.
    code = live_controls_block()
    offset = "tb.Offset(0.5 * depth, seed=0)"
    assert offset in code
    code = code.replace(offset, "tb.Noise(std=0.5 * depth, seed=0)")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ExportError, match=r"Noise\(.*torch\.Generator.*seed=None.*in memory"):
        exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
    assert not (tmp_path / "depth.ts").exists()
