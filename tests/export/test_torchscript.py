"""TorchScript export: scripted == bended, controls as set_/get_ methods, no torchbend to load."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from unittest import mock

import pytest
import torch
from torch import nn

import torchbend as tb
from tests.conftest import FlipsOnConv
from torchbend.errors import ExportError
from torchbend.export import torchscript

BLOCK_TORCHBEND = "import sys; sys.modules['torchbend'] = None\n"


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 8, 3, padding=1)
        self.out = nn.Conv1d(8, 2, 3, padding=1)

    def forward(self, x):
        return self.out(torch.tanh(self.conv(x)))

    def encode(self, x):
        return torch.tanh(self.conv(x))


def bended_net(encode: bool = False) -> tuple[tb.BendedModule, dict[str, tb.BendingParameter]]:
    torch.manual_seed(0)
    bended = tb.BendedModule(Net())
    bended.trace(x=torch.randn(1, 1, 32))
    if encode:
        bended.trace("encode", x=torch.randn(1, 1, 32))
    gain = tb.BendingParameter("gain", 1.0, range=(0.0, 4.0))
    depth = tb.BendingParameter("depth", 0.5, range=(0.0, 1.0), clamp=True)
    bended.bend(tb.Scale(gain), "tanh$")  # activation, live
    bended.bend(tb.Affine(1.0 - depth, 0.05), r"out\.weight")  # weight, recomputed
    bended.bend(tb.Mask(0.25, dim=-2, seed=0), "conv$")  # activation, fixed state
    bended.bend(tb.Scale(2.0) >> tb.Bias(depth), r"conv\.bias")  # a chain on a weight
    return bended, bended.controllables


def test_scripted_matches_bended_bit_for_bit():
    bended, _ = bended_net()
    scripted = torchscript(bended)
    x = torch.randn(3, 1, 48)
    with torch.no_grad():
        assert torch.equal(scripted(x), bended(x))


def test_set_control_has_the_effect_of_update():
    bended, _ = bended_net()
    scripted = tb.export.torchscript(bended)
    x = torch.randn(2, 1, 32)
    for name, value in [("gain", 2.5), ("depth", 0.9), ("gain", 0.0), ("depth", 0.0)]:
        assert getattr(scripted, f"set_{name}")(value) == 0
        bended.update(name, value)
        assert getattr(scripted, f"get_{name}")() == value
        with torch.no_grad():
            assert torch.equal(scripted(x), bended(x)), (name, value)


def test_out_of_range_is_refused_or_clamped():
    bended, _ = bended_net()
    scripted = torchscript(bended)
    assert scripted.set_gain(3.0) == 0
    assert scripted.set_gain(5.0) == -1
    assert scripted.set_gain(float("nan")) == -1
    assert scripted.get_gain() == 3.0
    assert scripted.set_depth(7.0) == 0  # clamp=True
    assert scripted.get_depth() == 1.0


def test_setters_refuse_or_clamp_what_the_arguments_they_drive_refuse():
    # Controls with no range of their own: the bounds come from Noise.std (>= 0) and from
    # Dilate.size (>= 1), through a view for the second.
    bended, _ = bended_net()
    depth = tb.BendingParameter("d", 0.1)
    size = tb.BendingParameter("s", 2, clamp=True)
    bended.bend(tb.Noise(std=depth, seed=0), "conv$")
    bended.bend(tb.Dilate(size=size * 2), "tanh$")
    scripted = torchscript(bended)
    for value in (-0.5, float("inf")):
        with pytest.raises(tb.BendingError):
            bended.update("d", value)
        assert scripted.set_d(value) == -1 and scripted.get_d() == 0.1
    bended.update("s", -3)  # clamps: the smallest size Dilate takes is 1, so s = 1
    assert scripted.set_s(-3) == 0 and scripted.get_s() == size.get() == 1
    x = torch.randn(2, 1, 32)
    with torch.no_grad():
        assert torch.equal(scripted(x), bended(x))


def test_seeded_noise_on_a_weight_follows_its_control_when_scripted():
    bended, _ = bended_net()
    bended.bend(tb.Noise(std=tb.BendingParameter("std", 0.1), seed=3), r"out\.weight")
    scripted = torchscript(bended)
    x = torch.randn(2, 1, 32)
    for value in (0.1, 0.4, 0.0):
        assert scripted.set_std(value) == 0
        bended.update("std", value)
        with torch.no_grad():
            assert torch.equal(scripted(x), bended(x)), value


def test_a_callback_that_does_not_compile_says_why_every_time():
    class Imports(tb.BendingCallback):
        def bend(self, x, name):
            import math

            return x * math.pi

        @classmethod
        def neutral_setting(cls):
            return None

    bended, _ = bended_net()
    bended.bend(Imports(), "tanh$")
    for _ in range(2):  # TorchScript keeps the class half-compiled: the reason is kept
        with pytest.raises(ExportError, match="import statements aren't supported"):
            torchscript(bended)


def test_every_traced_method_is_exported():
    bended, _ = bended_net(encode=True)
    scripted = torchscript(bended)
    x = torch.randn(1, 1, 32)
    with torch.no_grad():
        assert torch.equal(scripted.encode(x), bended.encode(x))
        assert torch.equal(scripted(x), bended(x))
    only = torchscript(bended, methods=["encode"])
    with torch.no_grad():
        assert torch.equal(only.encode(x), bended.encode(x))
    with pytest.raises(Exception, match="forward"):
        only(x)


def test_export_is_a_snapshot():
    bended, _ = bended_net()
    scripted = torchscript(bended)
    x = torch.randn(1, 1, 32)
    with torch.no_grad():
        before = scripted(x)
        bended.update("gain", 0.0)
        bended.reset()
        assert torch.equal(scripted(x), before)


@pytest.mark.slow
def test_saved_file_loads_and_runs_without_torchbend(tmp_path):
    bended, _ = bended_net()
    path = tmp_path / "bent.pt"
    torchscript(bended, path)
    x = torch.randn(2, 1, 32)
    with torch.no_grad():
        first = bended(x)
        bended.update("gain", 3.0)
        bended.update("depth", 0.25)
        second = bended(x)
    torch.save({"x": x, "first": first, "second": second}, tmp_path / "expected.pt")
    code = BLOCK_TORCHBEND + textwrap.dedent(
        f"""
        import torch
        m = torch.jit.load({str(path)!r})
        d = torch.load({str(tmp_path / "expected.pt")!r})
        with torch.no_grad():
            assert torch.equal(m(d["x"]), d["first"])
            assert m.set_gain(3.0) == 0 and m.set_depth(0.25) == 0 and m.set_gain(9.0) == -1
            assert torch.equal(m(d["x"]), d["second"])
        try:
            import torchbend
        except ImportError:
            print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_unscriptable_callback_is_named_before_scripting():
    bended, _ = bended_net()
    bended.bend(tb.Lambda(torch.sin), "tanh$")
    with mock.patch("torch.jit.script") as script:
        with pytest.raises(ExportError, match=r"Lambda\(.*forward:tanh.*scriptable = False"):
            torchscript(bended)
    script.assert_not_called()


def test_method_not_traced_lists_the_traced_ones():
    bended, _ = bended_net()
    with pytest.raises(ExportError, match=r"'encode'.*traced: \['forward'\]"):
        torchscript(bended, methods=["encode"])


def test_noise_std_is_a_live_control_and_a_seeded_noise_is_not_saved(tmp_path):
    bended, _ = bended_net()
    std = tb.BendingParameter("std", 0.1, range=(0.0, 1.0))
    bended.bend(tb.Noise(std), "tanh$")  # torch's global generator
    path = tmp_path / "noise.pt"
    scripted = torchscript(bended, path)
    loaded = torch.jit.load(str(path))
    x = torch.randn(2, 1, 32)
    for value in (0.1, 0.7):
        bended.update("std", value)
        assert scripted.set_std(value) == 0 and loaded.set_std(value) == 0
        with torch.no_grad():
            outputs = []
            for m in (bended, scripted, loaded):
                torch.manual_seed(1)
                outputs.append(m(x))
        assert torch.equal(outputs[1], outputs[0]) and torch.equal(outputs[2], outputs[0])
    bended.bend(tb.Noise(0.1, seed=3), "conv$")
    with pytest.raises(ExportError, match=r"torch.Generator.*seed=None"):
        torchscript(bended, tmp_path / "seeded.pt")
    torchscript(bended)  # in memory, a generator is fine


def test_int_and_bool_controls():
    bended, _ = bended_net()
    on = tb.BendingParameter("on", False)
    bits = tb.BendingParameter("bits", 8, range=(1, 16))
    bended.bend(tb.Tanh(active=on), "conv$")
    bended.bend(tb.Quantize(bits), "tanh$")
    scripted = torchscript(bended)
    x = torch.randn(2, 1, 32)
    assert scripted.set_on(True) == 0 and scripted.set_bits(3) == 0
    assert scripted.set_bits(20) == -1 and scripted.get_bits() == 3
    bended.update("on", True)
    bended.update("bits", 3)
    with torch.no_grad():
        assert torch.equal(scripted(x), bended(x))


@pytest.mark.parametrize(
    "make",
    [
        lambda c: tb.Clamp(-c, c),
        lambda c: tb.SoftClip(c),
        lambda c: tb.Spread(c - 0.5),
        lambda c: tb.Threshold(0.1 * c),
        lambda c: tb.Bias(c) >> tb.Scale(2 * c),
    ],
)
def test_weight_bendings_driven_by_a_control(make):
    bended, _ = bended_net()
    amount = tb.BendingParameter("amount", 0.5, range=(0.0, 2.0))
    bended.bend(make(amount), r"conv\.weight")
    scripted = torchscript(bended)
    x = torch.randn(2, 1, 32)
    for value in (1.5, 0.25):
        assert scripted.set_amount(value) == 0
        bended.update("amount", value)
        with torch.no_grad():
            assert torch.equal(scripted(x), bended(x)), value


class Options(nn.Module):
    """Methods with non-tensor and optional arguments, with defaults."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 2, 3, padding=1)

    def forward(self, x: torch.Tensor, gain: float = 1.0, mask: torch.Tensor | None = None):
        y = torch.tanh(self.conv(x)) * gain
        if mask is not None:
            y = y * mask
        return y

    def encode(
        self,
        x: torch.Tensor,
        k: int = 1,
        mode: str = "tanh",
        flip: bool = False,
        size: int | None = None,
        dims: tuple[int, int] = (1, 2),
        offset: float = -math.inf,
    ):
        y = self.conv(x)[:, :k] + (0.0 if math.isinf(offset) else offset)
        y = torch.tanh(y) if mode == "tanh" else torch.sigmoid(y)
        if flip:
            y = y.flip(-1)
        if size is not None:
            y = y[..., :size]
        return y.sum(dims[0], keepdim=True)

    def untyped(self, x, gain=1.0, mask=None):
        y = self.conv(x) * gain
        return y if mask is None else y * mask


def bended_options(**forward: torch.Tensor) -> tb.BendedModule:
    torch.manual_seed(0)
    bended = tb.BendedModule(Options())
    bended.trace(x=torch.randn(1, 1, 16), **forward)
    bended.trace("encode", x=torch.randn(1, 1, 16))
    bended.trace("untyped", x=torch.randn(1, 1, 16), **forward)
    bended.bend(tb.Scale(tb.BendingParameter("amount", 0.5, range=(0.0, 2.0))), "tanh$")
    return bended


def test_methods_keep_argument_types_and_defaults(tmp_path):
    bended = bended_options()
    path = tmp_path / "options.pt"
    torchscript(bended, path)
    loaded = torch.jit.load(str(path))
    assert str(loaded.forward.schema).endswith(
        "Tensor x, float gain=1., Tensor? mask=None) -> Tensor"
    )
    assert 'int k=1, str mode="tanh", bool flip=False, int? size=None, (int, int) dims=(1, 2)' in (
        str(loaded.encode.schema)
    )
    assert "Tensor x, float gain=1., Tensor? mask=None" in str(loaded.untyped.schema)
    x = torch.randn(3, 1, 24)
    with torch.no_grad():
        for scripted in (torchscript(bended), loaded):
            assert torch.equal(scripted(x), bended(x))
            assert torch.equal(scripted(x, 2.5), bended(x, 2.5))
            assert torch.equal(scripted(x, gain=0.5, mask=None), bended(x, gain=0.5))
            assert torch.equal(scripted.encode(x), bended.encode(x))
            assert torch.equal(scripted.encode(x, 2, "tanh"), bended.encode(x, 2, "tanh"))
            assert torch.equal(scripted.untyped(x, 3.0), bended.untyped(x, 3.0))


def test_an_optional_traced_with_a_value_takes_one():
    mask = torch.rand(1, 2, 16)
    bended = bended_options(mask=mask)
    scripted = torchscript(bended)
    x = torch.randn(1, 1, 16)
    with torch.no_grad():
        assert torch.equal(scripted(x, 2.0, mask), bended(x, 2.0, mask))
        assert torch.equal(scripted.untyped(x, mask=mask), bended.untyped(x, mask=mask))
    with pytest.raises(torch.jit.Error, match=r"exported for a mask .* got None"):
        scripted(x)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s, x: s(x, mask=torch.ones(1, 2, 16)), "forward was exported for mask=None"),
        (lambda s, x: s.encode(x, mode="sigmoid"), r"encode was exported for mode='tanh' only"),
        (lambda s, x: s.encode(x, flip=True), "encode was exported for flip=False only"),
        (lambda s, x: s.encode(x, size=4), "encode was exported for size=None"),
        (lambda s, x: s.encode(x, dims=(2, 1)), r"encode was exported for dims=\(1, 2\) only"),
    ],
)
def test_values_the_graph_was_not_traced_for_are_refused(call, message):
    scripted = torchscript(bended_options())
    with pytest.raises(torch.jit.Error, match=message):
        call(scripted, torch.randn(1, 1, 16))


class Unexportable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 2, 3, padding=1)

    def forward(self, x: torch.Tensor, phase: complex = 1j):
        return self.conv(x) * abs(phase)

    def shifted(self, x: torch.Tensor, bias: torch.Tensor = torch.zeros(1)):  # noqa: B008
        return self.conv(x) + bias

    def scaled(self, x: torch.Tensor, *, gain: float = 1.0, k: int):
        return self.conv(x) * gain * k


@pytest.mark.parametrize(
    ("method", "inputs", "message"),
    [
        ("forward", {}, r"argument 'phase' of Unexportable.forward: its type complex has no"),
        ("shifted", {}, r"argument 'bias' of Unexportable.shifted: its default tensor"),
        ("scaled", {"k": 2}, r"Unexportable.scaled: its argument 'k' has no default but"),
    ],
)
def test_arguments_torchscript_cannot_take_are_named(method, inputs, message):
    bended = tb.BendedModule(Unexportable())
    bended.trace(method, x=torch.randn(1, 1, 8), **inputs)
    with pytest.raises(ExportError, match=message):
        torchscript(bended)


def test_ramps_of_controls_apply_in_the_exported_module_as_in_python():
    # A set_ from Max or Pd fades over the next calls as update() does: activation arguments
    # along time, weights crossfaded (two controls fading one weight land together).
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv1d(1, 4, 3, padding=1), nn.Tanh(), nn.Conv1d(4, 1, 3, padding=1))
    bended = tb.BendedModule(model)
    x = torch.randn(1, 1, 32)
    bended.trace(input=x)
    gain = tb.BendingParameter("gain", 1.0, ramp=3)
    depth = tb.BendingParameter("depth", 1.0, ramp=2)
    bits = tb.BendingParameter("bits", 8, ramp=2, range=(2, 16))
    flip = tb.BendingParameter("flip", False, ramp=2)
    bended.bend(tb.Scale(gain), "_1$")
    bended.bend(tb.Scale(depth), r"2\.weight")
    bended.bend(tb.Bias(0.5 * depth), r"2\.weight")  # a second fade of the same weight
    bended.bend(tb.Quantize(bits), "_0$")
    bended.bend(tb.Flip(dim=-1, active=flip), r"0\.weight")
    bended.bend(tb.Noise(std=0.1, seed=0), "_0$", blend=gain * 0.5)
    scripted = tb.export.torchscript(bended)
    changes = {
        0: [("gain", 2.0), ("depth", 0.5)],
        2: [("gain", 0.5), ("bits", 3)],
        3: [("flip", True)],
        4: [("depth", 1.5)],
    }
    for step in range(9):
        for name, value in changes.get(step, []):
            assert getattr(scripted, f"set_{name}")(value) == 0
            bended.update(name, value)
        torch.manual_seed(step)
        with torch.no_grad():
            got = scripted(x)
        torch.manual_seed(step)
        with torch.no_grad():
            assert torch.equal(got, bended(x)), step


def test_a_module_exported_mid_ramp_ramps_on_as_in_python():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv1d(1, 4, 3, padding=1), nn.Tanh(), nn.Conv1d(4, 1, 3, padding=1))
    bended = tb.BendedModule(model)
    x = torch.randn(1, 1, 32)
    bended.trace(input=x)
    bended.bend(tb.Scale(tb.BendingParameter("gain", 1.0, ramp=4)), "_1$")
    bended.bend(tb.Scale(tb.BendingParameter("depth", 1.0, ramp=3)), r"2\.weight")
    bended.update("gain", 3.0)
    bended.update("depth", 0.25)
    with torch.no_grad():
        bended(x)  # one call into both ramps
        scripted = tb.export.torchscript(bended)
        for step in range(5):
            assert torch.equal(scripted(x), bended(x)), step


@pytest.mark.parametrize("called", [True, False])
def test_a_bending_that_flips_a_decision_exports_the_branch_it_takes(called):
    x = torch.randn(1, 1, 16, generator=torch.Generator().manual_seed(1))
    bended = tb.BendedModule(FlipsOnConv().eval())
    bended.trace(x=x)
    bended.bend(tb.Scale(-1.0), r"conv\.(weight|bias)$")  # h.mean() changes sign
    if called:  # the call traces the other branch; the export must not keep the old one
        bended(x=x)
    with pytest.warns(UserWarning, match="decision"):
        scripted = torchscript(bended)
    with torch.no_grad():
        assert torch.equal(scripted(x=x), bended(x=x))


def test_an_export_that_differs_from_the_module_on_its_traced_inputs_is_refused():
    x = torch.randn(1, 1, 16, generator=torch.Generator().manual_seed(1))
    bended = tb.BendedModule(FlipsOnConv().eval())
    bended.trace(x=x)
    bended.bend(tb.Scale(-1.0), r"conv\.(weight|bias)$")
    view = type(bended.view())
    stale = view.running

    def old_branch(self, fn, inputs):  # the graph traced before bending, as exports took
        return self.current(fn), stale(self, fn, inputs)[1]

    with mock.patch.object(view, "running", old_branch), pytest.warns(UserWarning):
        with pytest.raises(ExportError, match=r"does not compute what the bended module"):
            torchscript(bended)


def test_checking_an_export_leaves_its_generators_and_counters_as_they_were():
    x = torch.randn(1, 1, 16, generator=torch.Generator().manual_seed(1))
    bended = tb.BendedModule(FlipsOnConv().eval())
    bended.trace(x=x)
    bended.bend(tb.Scale(-1.0), r"conv\.(weight|bias)$")  # flips the decision, as above
    bended.bend(tb.Noise(0.1, seed=2), "conv$")
    bended.bend(tb.Scale(3.0), "conv$", window=tb.Window(1, 2, unit="calls"))
    with pytest.warns(UserWarning, match="decision"):
        scripted = torchscript(bended)
    with torch.no_grad():
        for _ in range(3):  # the first call draws and counts as the module's first call does
            assert torch.equal(scripted(x=x), bended(x=x))
