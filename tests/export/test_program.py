"""torch.export (.pt2) and ONNX export of bended methods, loaded without torchbend."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

import torchbend as tb
from tests.conftest import FlipsOnConv
from torchbend.errors import ExportError
from torchbend.export.program import onnx, pt2

BLOCK_TORCHBEND = "import sys; sys.modules['torchbend'] = None\n"


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 8, 3, padding=1)
        self.out = nn.Conv1d(8, 1, 3, padding=1)

    def forward(self, x):
        return self.out(torch.tanh(self.conv(x)))


def bended_net() -> tuple[tb.BendedModule, torch.Tensor]:
    torch.manual_seed(0)
    bended = tb.BendedModule(Net())
    x = torch.randn(1, 1, 64)
    bended.trace(x=x)
    bended.bend(tb.Mask(0.5, dim=-2, seed=0), "conv$")
    bended.bend(tb.Scale(tb.BendingParameter("gain", 0.5)), "tanh$")
    bended.bend(tb.Noise(0.2, seed=1), r"out\.weight")
    return bended, x


def run_without_torchbend(code: str, tmp_path) -> str:
    script = tmp_path / "run.py"
    script.write_text(BLOCK_TORCHBEND + textwrap.dedent(code))
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
def test_pt2_runs_without_torchbend(tmp_path):
    bended, x = bended_net()
    path = tmp_path / "model.pt2"
    pt2(bended, path, x=x)
    expected = bended(x)
    torch.save({"x": x, "y": expected}, tmp_path / "io.pt")
    out = run_without_torchbend(
        f"""
        import torch
        io = torch.load({str(tmp_path / "io.pt")!r})
        m = torch.export.load({str(path)!r}).module()
        y = m(x=io["x"])
        print(float((y - io["y"]).abs().max()))
        """,
        tmp_path,
    )
    assert float(out) < 1e-6


def test_pt2_controls_as_inputs_and_dynamic_time():
    bended, x = bended_net()
    bended.reset()
    bended.bend(tb.Scale(tb.BendingParameter("gain", 0.5)), "tanh$")
    program = pt2(bended, controls_as_inputs=True, x=x)
    module = program.module()
    for gain in (0.0, 0.5, 2.0):
        bended.update("gain", gain)
        assert torch.allclose(module(x=x, gain=torch.tensor(gain)), bended(x), atol=1e-6)
    time = torch.export.Dim("time", min=8, max=4096)
    program = pt2(bended, dynamic_shapes={"x": {2: time}}, x=x)
    longer = torch.randn(1, 1, 200)
    assert torch.allclose(program.module()(x=longer), bended(longer), atol=1e-6)


def test_pt2_errors():
    bended, x = bended_net()
    with pytest.raises(ExportError, match="not traced"):
        pt2(bended, fn="encode", x=x)
    with pytest.raises(ExportError, match="has no argument 'y'"):
        pt2(bended, y=x)
    bended.bend(tb.Scale(tb.BendingParameter("w", 1.0)), r"conv\.weight")
    with pytest.raises(ExportError, match=r"controls \['w'\] drive weight bendings"):
        pt2(bended, controls_as_inputs=True, x=x)


@pytest.mark.slow
def test_onnx_matches_with_onnxruntime_in_a_fresh_process(tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    bended, x = bended_net()
    path = onnx(bended, tmp_path / "model.onnx", x=x)
    torch.save({"x": x, "y": bended(x)}, tmp_path / "io.pt")
    out = run_without_torchbend(
        f"""
        import onnxruntime, torch
        io = torch.load({str(tmp_path / "io.pt")!r})
        session = onnxruntime.InferenceSession({str(path)!r})
        (y,) = session.run(None, {{session.get_inputs()[0].name: io["x"].numpy()}})
        print(float((torch.from_numpy(y) - io["y"]).abs().max()))
        """,
        tmp_path,
    )
    assert float(out) < 1e-5  # the tolerance ONNX export is held to


def test_tensordict_module_exports_with_keyword_inputs(tmp_path):
    pytest.importorskip("tensordict")
    from tensordict import TensorDict
    from tensordict.nn import NormalParamExtractor
    from tensordict.nn import TensorDictModule as Mod
    from tensordict.nn import TensorDictSequential as Seq

    torch.manual_seed(0)
    model = Seq(
        Mod(nn.Linear(3, 4), in_keys=["x"], out_keys=["hidden"]),
        Mod(nn.ReLU(), in_keys=["hidden"], out_keys=["hidden"]),
        Mod(nn.Linear(4, 4), in_keys=["hidden"], out_keys=["latent"]),
        Mod(NormalParamExtractor(), in_keys=["latent"], out_keys=["loc", "scale"]),
    )
    x = torch.randn(1, 3)
    bended = tb.BendedModule(model)
    bended.trace(tensordict=TensorDict({"x": x}, batch_size=[]))
    bended.bend(tb.Scale(2.0), "module_0_module$")
    path = tmp_path / "td.pt2"
    pt2(bended, path, x=x)
    expected = bended(TensorDict({"x": x}, batch_size=[]))
    module = torch.export.load(str(path)).module()
    _, _, loc, scale = module(x=x)
    assert torch.allclose(loc, expected["loc"]) and torch.allclose(scale, expected["scale"])


def test_pt2_exports_the_branch_a_bending_makes_the_module_take():
    x = torch.randn(1, 1, 16, generator=torch.Generator().manual_seed(1))
    bended = tb.BendedModule(FlipsOnConv().eval())
    bended.trace(x=x)
    bended.bend(tb.Scale(-1.0), r"conv\.(weight|bias)$")  # h.mean() changes sign
    program = pt2(bended, x=x)
    with torch.no_grad():
        assert torch.equal(program.module()(x=x), bended(x=x))
