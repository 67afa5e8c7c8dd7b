"""Activations in and out: get, inject, capture, mix."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchbend as tb


class AE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Conv1d(1, 4, 4, stride=4)
        self.dec = nn.ConvTranspose1d(4, 1, 4, stride=4)

    def forward(self, x):
        z = torch.tanh(self.enc(x))
        return self.dec(z) + 0 * x


@pytest.fixture
def ae():
    torch.manual_seed(0)
    return AE()


def test_get_activations_stops_after_the_last_one(ae):
    x = torch.randn(2, 1, 32)
    bended = tb.BendedModule(ae)
    bended.trace(x=x)
    acts = bended.get_activations("enc$", "tanh$", x=x)
    assert list(acts) == ["enc", "tanh"]
    assert torch.equal(acts["tanh"], torch.tanh(ae.enc(x)))
    bended.bend(tb.Scale(0.0), "tanh$")
    assert torch.equal(bended.get_activations("tanh", x=x)["tanh"], torch.zeros(2, 4, 8))
    assert torch.equal(bended.get_activations("tanh", x=x, bended=False)["tanh"], acts["tanh"])
    td = bended.get_activations("enc$", x=x, as_tensordict=True)
    assert tuple(td.batch_size) == (2,)
    with pytest.raises(tb.SelectionError, match="did you mean"):
        bended.get_activations("tahn$", x=x)


def test_from_activations_decodes_an_edited_latent(ae):
    x = torch.randn(1, 1, 32)
    bended = tb.BendedModule(ae)
    bended.trace(x=x)
    z = bended.get_activations("tanh$", x=x)["tanh"]
    out = bended.from_activations("tanh", tanh=z, x=x)
    assert torch.allclose(out, ae(x))
    with pytest.raises(tb.TracingError, match=r"missing \['x'\]"):
        bended.from_activations("tanh", tanh=z)


def test_saved_derived_method_is_bent_like_its_source():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv1d(1, 4, 4, stride=4), nn.Tanh(), nn.ConvTranspose1d(4, 1, 4, stride=4)
    )
    x = torch.randn(1, 1, 32)
    bended = tb.BendedModule(model)
    bended.trace(input=x)
    z = bended.get_activations("_1$", input=x, save_as="encode")["_1"]
    assert torch.equal(bended.encode(input=x)["_1"], z)
    bended.from_activations("_1", _1=z, save_as="decode_from_latent")
    assert torch.allclose(bended.decode_from_latent(z * 2), model[2](z * 2))
    bended.bend(tb.Scale(0.0), "_2$")
    assert torch.equal(bended.decode_from_latent(z), torch.zeros(1, 1, 32))


def test_capture_records_while_capturing_and_mixes_back(ae, tmp_path):
    a, b = torch.randn(2, 1, 32), torch.randn(3, 1, 32)
    bended = tb.BendedModule(ae)
    bended.trace(x=a)
    capture = tb.Capture()
    bended.bend(capture, "tanh$")
    bended(a)
    assert capture.captures == {}
    with bended.capture():
        bended(a)
        bended(b)
    bended(a)
    captured = capture.captures["forward:tanh"]
    assert captured.shape == (5, 4, 8)
    assert torch.equal(captured[:2], torch.tanh(ae.enc(a)))
    capture.save(tmp_path / "caps")
    loaded = tb.Capture.load(tmp_path / "caps")
    assert torch.equal(loaded["forward:tanh"], captured)
    bended.reset()
    bended.bend(tb.InterpolationFromCapture(capture, weight=1.0, index=0), "tanh$")
    assert torch.allclose(
        bended.get_activations("tanh$", x=b)["tanh"], captured[0:1].expand(3, 4, 8)
    )
    bended.reset()
    bended.bend(tb.InterpolateActivation({"tanh": torch.zeros(1, 4, 8)}, weight=0.5), "tanh$")
    assert torch.allclose(bended.get_activations("tanh$", x=a)["tanh"], torch.tanh(ae.enc(a)) / 2)


class Branchy(nn.Module):
    """Decisions on values before and after ``m``, an optional argument with a default."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(4, 4)
        self.m = nn.Linear(4, 4)

    def forward(self, x, mask=None, k: int = 2):
        y = self.l(x)
        if mask is not None:
            y = y * mask
        y = y * k if y.sum() > 0 else y - 1
        z = self.m(y)
        if z.mean() > 0:
            return z + 100
        return z


def test_get_activations_fills_defaults_and_follows_decisions_on_values():
    torch.manual_seed(0)
    net = Branchy()
    bended = tb.BendedModule(net)
    x = torch.randn(1, 4)
    bended.trace(x=x)
    for xx in (x, -x, 10 * x, -10 * x):
        y = net.l(xx)
        want = net.m(y * 2 if y.sum() > 0 else y - 1)
        assert torch.equal(bended.get_activations("m$", x=xx)["m"], want)


def test_unbent_activations_follow_the_decisions_the_unbent_model_takes():
    # A bent weight flips a decision on values: the kept graphs take the other branch, and the
    # unbent activations come from the module's own decisions (a trace without bendings).
    net = identity_branchy()
    bended = tb.BendedModule(net)
    x = torch.ones(1, 4)
    bended.trace(x=x)
    bended.bend(tb.Bias(-10.0), r"^l\.bias$")
    bent = bended.get_activations("m$", x=x)["m"]
    assert torch.equal(bent, net.m(net.l(x) - 10 - 1))  # the bent branch: y - 1
    plain = bended.get_activations("m$", bended=False, x=x)["m"]
    assert torch.equal(plain, net.m(net.l(x) * 2))  # the module's own: y * k
    assert torch.equal(bended.get_activations("m$", x=x)["m"], bent)  # nothing kept unbent


def identity_branchy() -> Branchy:
    net = Branchy()
    with torch.no_grad():
        for layer in (net.l, net.m):
            layer.weight.copy_(torch.eye(4))
            layer.bias.zero_()
    return net


def test_from_activations_runs_the_graph_traced_for_such_activations():
    bended = tb.BendedModule(identity_branchy())
    z = torch.ones(1, 4)
    bended.trace(x=z)  # m = 2: the branch that adds 100
    assert torch.equal(bended.from_activations("m", m=z), z + 100)
    # The other branch after m was never traced: an error, not the traced branch's result.
    with pytest.raises(tb.TracingError, match="no traced graph of forward"):
        bended.from_activations("m", m=-z)
    # nothing after m reads a size: another batch size runs the same graph
    assert torch.equal(bended.from_activations("m", m=torch.ones(3, 4)), torch.ones(3, 4) + 100)
    bended.trace(x=-z)  # once a graph took that branch, it is the one that runs
    assert torch.equal(bended.from_activations("m", m=-z), -z)
    assert torch.equal(bended.from_activations("m", m=z), z + 100)


def test_a_saved_cut_graph_refuses_inputs_that_take_other_decisions():
    bended = tb.BendedModule(identity_branchy())
    z = torch.ones(1, 4)
    bended.trace(x=z)
    first = bended.from_activations("m", m=z, save_as="tail")
    assert torch.equal(bended.tail(m=z), first)
    with pytest.raises(tb.TracingError, match="was cut from a graph of forward"):
        bended.tail(m=-z)


class Sums(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(4, 4)

    def forward(self, x):
        y = self.l(x)
        total = y[:, :1]
        for i in range(1, y.shape[1]):  # a loop as long as a size: unrolled when traced
            total = total + y[:, i : i + 1]
        return total


def test_from_activations_refuses_shapes_a_graph_baked_sizes_for():
    torch.manual_seed(0)
    bended = tb.BendedModule(Sums())
    bended.trace(x=torch.randn(1, 4))
    assert torch.equal(bended.from_activations("l", l=torch.ones(1, 4)), torch.full((1, 1), 4.0))
    with pytest.raises(tb.TracingError, match=r"l: \(1, 8\).*traced with: l: \(1, 4\)"):
        bended.from_activations("l", l=torch.ones(1, 8))  # the graph would add 4 columns


class LengthAfter(nn.Module):
    """Reads its input's length past the activation injected, in a decision."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Conv1d(1, 4, 3, padding=1)
        self.dec = nn.Conv1d(4, 1, 3, padding=1)

    def forward(self, x):
        y = self.dec(self.enc(x[..., :16]))
        n = x.shape[-1]
        y = torch.nn.functional.interpolate(y, size=n, mode="linear")
        if n > 20:
            y = y * 2
        return y + x


def test_from_activations_runs_the_graph_traced_for_every_input_it_reads():
    torch.manual_seed(0)
    model = LengthAfter().eval()
    bended = tb.BendedModule(model)
    short, long = torch.randn(1, 1, 16), torch.randn(1, 1, 32)
    bended.trace(x=short)
    z = bended.get_activations("enc$", x=short)["enc"]  # the same shape for both lengths
    with pytest.raises(tb.TracingError, match=r"traced with: x.shape\[-1\] 16 \(given 32\)"):
        bended.from_activations("enc", enc=z, x=long)
    z_long = bended.get_activations("enc$", x=long)["enc"]  # traces the graph of long inputs
    out = bended.from_activations("enc", enc=z_long, x=long)
    assert torch.equal(out, bended(x=long))
    assert torch.equal(bended.from_activations("enc", enc=z, x=short), bended(x=short))
