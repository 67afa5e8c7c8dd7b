"""Folding static channel bendings into the layers that read them: same output as the slots."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrizations

import torchbend as tb
from torchbend.engine.folding import channel_vector, layer_kind
from torchbend.models import TinyRave


class Convs(nn.Module):
    """An activation read by a grouped conv, another by a transposed conv, one by a Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Conv1d(2, 8, 3, padding=1)
        self.grouped = nn.Conv1d(8, 6, 3, padding=1, groups=2)
        self.up = nn.ConvTranspose1d(6, 4, 4, stride=2)
        self.lin = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.tanh(self.inp(x))
        b = torch.relu(self.grouped(a))
        c = torch.sin(self.up(b))
        return self.lin(c.transpose(1, 2))


class Images(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")
        self.b = nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.c = nn.ConvTranspose2d(4, 2, 2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(torch.tanh(self.b(torch.tanh(self.a(x)))))


def both(bended: tb.BendedModule, *args: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The bended output through the slots (with autograd) and through the folds (without)."""
    with torch.enable_grad():
        slots = bended(*args).detach()
    with torch.no_grad():
        folded = bended(*args)
    return slots, folded


def folds(bended: tb.BendedModule, fn: str = "forward") -> list[str]:
    """The layers a graph of ``fn`` reads with bendings folded into their weights."""
    folded = bended._engine.table.current(fn).folded
    return [] if folded is None else [f.path for f in folded.folds]


@pytest.mark.parametrize(
    ("callback", "pattern", "exact"),
    [
        (tb.Mask(0.5, dim=-2, seed=1), "tanh$", True),  # read by a grouped conv
        (tb.Mask(0.5, dim=-2, seed=1), "relu$", True),  # read by a transposed conv
        (tb.Mask(0.5, dim=-1, seed=1), "transpose$", True),  # read by a Linear
        (tb.Scale(-0.7), "tanh$|relu$|transpose$", False),
        (tb.Mask(0.3, dim=-2, seed=2) >> tb.Scale(1.5), "tanh$|relu$", False),
    ],
)
def test_folded_graphs_compute_what_the_slots_compute(
    callback: tb.BendingCallback, pattern: str, exact: bool
) -> None:
    torch.manual_seed(0)
    module = Convs()
    before = copy.deepcopy(module.state_dict())
    bended = tb.BendedModule(module)
    x = torch.randn(2, 2, 10)
    bended.trace(x=x)
    bended.bend(callback, pattern)
    assert folds(bended)
    slots, folded = both(bended, x)
    if exact:  # a 0/1 mask scales the same products either way
        assert torch.equal(slots, folded)
    else:
        torch.testing.assert_close(folded, slots, rtol=1e-5, atol=1e-6)
    assert not torch.equal(slots, module(x))  # something is bent
    for name, value in module.state_dict().items():  # the model's own weights are untouched
        assert torch.equal(value, before[name])
    # Other lengths and batch sizes use the same folds (the mask is per channel).
    slots, folded = both(bended, torch.randn(3, 2, 7))
    torch.testing.assert_close(folded, slots, rtol=1e-5, atol=1e-6)


def test_2d_convolutions_fold_grouped_depthwise_reflect_padded_and_transposed() -> None:
    torch.manual_seed(0)
    bended = tb.BendedModule(Images())
    x = torch.randn(1, 3, 6, 5)
    bended.trace(x=x)
    bended.bend(tb.Mask(0.5, dim=-3, seed=3), "tanh")
    bended.bend(tb.Scale(0.5), "^x$")
    assert sorted(folds(bended)) == ["a", "b", "c"]
    slots, folded = both(bended, x)
    torch.testing.assert_close(folded, slots, rtol=1e-5, atol=1e-6)


class Readers(nn.Module):
    """Activations read by what cannot fold: a nonlinearity, the output, a time-varying mask."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv1d(2, 4, 1)
        self.b = nn.Conv1d(4, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        return self.b(h) + torch.relu(h) + self.b(torch.tanh(h))


@pytest.mark.parametrize(
    ("callback", "pattern", "why"),
    [
        (tb.Mask(0.5, dim=-2, seed=0), "^a$", "also read by relu"),
        (tb.Mask(0.5, seed=0), "tanh$", "varies along time"),
        (tb.Mask(0.5, dim=-1, seed=0), "tanh$", "per time step"),
        (tb.Bias(0.5), "tanh$", "adds, not multiplies"),
        (tb.Mask(0.5, dim=-2, seed=0) >> tb.Bias(0.1), "tanh$", "a chain that adds"),
        (tb.Mask(0.5, dim=-2, seed=0), "^add_1$", "the output"),
    ],
)
def test_what_cannot_fold_keeps_its_slot(
    callback: tb.BendingCallback, pattern: str, why: str
) -> None:
    torch.manual_seed(0)
    bended = tb.BendedModule(Readers())
    x = torch.randn(1, 2, 5)
    bended.trace(x=x)
    bended.bend(callback, pattern)
    assert folds(bended) == [], why
    slots, unfolded = both(bended, x)
    assert torch.equal(slots, unfolded)


class CustomConv(nn.Conv1d):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x * x)  # not linear in its input: must not fold


def test_layers_fold_only_when_linear_in_their_own_plain_weight() -> None:
    assert layer_kind(nn.Conv1d(2, 2, 1)) == "conv"
    assert layer_kind(nn.ConvTranspose3d(2, 2, 1)) == "transposed"
    assert layer_kind(nn.Linear(2, 2)) == "linear"
    assert layer_kind(CustomConv(2, 2, 1)) is None
    assert layer_kind(parametrizations.weight_norm(nn.Conv1d(2, 2, 1))) is None
    hooked = nn.Conv1d(2, 2, 1)
    hooked.register_forward_pre_hook(lambda m, args: None)
    assert layer_kind(hooked) is None
    assert layer_kind(nn.ReLU()) is None
    # A per-channel factor, against one that varies along another axis.
    shape = torch.Size([2, 3, 5])
    assert torch.equal(channel_vector(torch.tensor(2.0), shape, 1), torch.full((3,), 2.0))
    assert channel_vector(torch.ones(3, 1), shape, 1) is not None
    assert channel_vector(torch.ones(1, 3, 5), shape, 1) is None
    assert channel_vector(torch.ones(2, 1, 1), shape, 1) is None


def test_a_custom_or_parametrized_conv_reading_a_mask_keeps_the_slot() -> None:
    torch.manual_seed(0)
    for layer in (CustomConv(4, 4, 1), parametrizations.weight_norm(nn.Conv1d(4, 4, 1))):
        module = nn.Sequential(nn.Conv1d(2, 4, 1), nn.Tanh(), layer)
        bended = tb.BendedModule(module)
        x = torch.randn(1, 2, 5)
        bended.trace(input=x)
        bended.bend(tb.Mask(0.5, dim=-2, seed=0), "^_1$")
        assert folds(bended) == []
        slots, unfolded = both(bended, x)
        assert torch.equal(slots, unfolded)


def test_folds_follow_arguments_set_directly_controls_given_later_and_bent_weights() -> None:
    torch.manual_seed(0)
    bended = tb.BendedModule(Convs())
    x = torch.randn(1, 2, 10)
    bended.trace(x=x)
    mask, scale = tb.Mask(0.2, dim=-2, seed=1), tb.Scale(0.5)
    bended.bend(mask, "tanh$")
    bended.bend(scale, "relu$")
    assert sorted(folds(bended)) == ["grouped", "up"]
    mask.prob = 0.7  # draws the mask again: folded again on the next call
    slots, folded = both(bended, x)
    torch.testing.assert_close(folded, slots)
    bended.bend(tb.Scale(-2.0), r"grouped\.weight")  # a bent weight of a folded layer
    slots, folded = both(bended, x)
    torch.testing.assert_close(folded, slots)
    folded = bended._engine.table.current("forward").folded
    assert folded is not None and folded.ready()
    gain = tb.BendingParameter("gain", 0.5)
    scale.scale = gain  # a control now drives it: its slot runs again, live
    assert not folded.ready()
    bended.update("gain", 3.0, ramp=False)
    slots, unfolded = both(bended, x)
    assert torch.equal(unfolded, slots)
    scale.scale = 3.0  # no control again: folded again
    slots, folded_ = both(bended, x)
    assert folded.ready() and not torch.equal(folded_, unfolded)
    torch.testing.assert_close(folded_, slots)


def test_bendings_driven_by_controls_keep_their_slots_as_in_the_export() -> None:
    torch.manual_seed(0)
    bended = tb.BendedModule(Convs())
    x = torch.randn(1, 2, 10)
    bended.trace(x=x)
    bended.bend(tb.Mask(tb.BendingParameter("prob", 0.2), dim=-2, seed=1), "tanh$")
    bended.bend(tb.Scale(tb.BendingParameter("gain", 1.0)), "relu$")
    assert folds(bended) == []
    outputs = []
    for prob, gain in ((0.2, 1.0), (0.6, 1.0), (0.6, -1.0)):
        bended.update("prob", prob)
        bended.update("gain", gain)
        slots, unfolded = both(bended, x)
        assert torch.equal(slots, unfolded)
        outputs.append(unfolded)
    assert not torch.equal(outputs[0], outputs[1]) and not torch.equal(outputs[1], outputs[2])


def test_gradients_reach_the_weights_of_layers_whose_input_folds() -> None:
    torch.manual_seed(0)
    module = Convs()
    bended = tb.BendedModule(module)
    x = torch.randn(1, 2, 10)
    bended.trace(x=x)
    bended.bend(tb.Mask(0.5, dim=-2, seed=1), "tanh$")
    assert folds(bended) == ["grouped"]
    bended(x).square().sum().backward()  # with autograd: through the slot
    grad = module.grouped.weight.grad
    assert grad is not None and grad.abs().sum() > 0


def test_streaming_a_folded_model_matches_its_slots_block_by_block() -> None:
    torch.manual_seed(0)
    model = TinyRave().eval()
    blocks = torch.randn(6, 1, 1, 256, generator=torch.Generator().manual_seed(1))
    runs = []
    for grad in (True, False):
        streaming = copy.deepcopy(model)
        streaming.set_streaming(True)
        bended = tb.BendedModule(streaming)
        bended.trace(x=torch.zeros(1, 1, 256))
        # Bent (graphs compiled) while offline: the folded copies must take the flag the
        # layers have when called, as the graph traced while streaming runs again.
        streaming.set_streaming(False)
        bended.bend(tb.Mask(0.4, dim=-2, seed=0), "decoder_1$|encoder_0$")
        bended.bend(tb.Scale(0.5), "encoder_2$")
        assert sorted(folds(bended)) == ["decoder.0", "decoder.2"]  # encoder_0: tanh reads it
        streaming.set_streaming(True)
        with torch.set_grad_enabled(grad):
            runs.append(torch.cat([bended(b).detach() for b in blocks], -1))
    torch.testing.assert_close(runs[1], runs[0], rtol=1e-5, atol=1e-6)
    offline = tb.BendedModule(copy.deepcopy(model))
    offline.trace(x=torch.zeros(1, 1, 256))
    offline.bend(tb.Mask(0.4, dim=-2, seed=0), "decoder_1$|encoder_0$")
    offline.bend(tb.Scale(0.5), "encoder_2$")
    with torch.no_grad():  # streamed blocks are the offline run of the whole
        torch.testing.assert_close(runs[1], offline(blocks.permute(1, 2, 0, 3).reshape(1, 1, -1)))


def test_folds_follow_a_dtype_move() -> None:
    torch.manual_seed(0)
    bended = tb.BendedModule(Convs())
    x = torch.randn(1, 2, 10)
    bended.trace(x=x)
    bended.bend(tb.Mask(0.5, dim=-2, seed=1), "tanh$")
    bended.to(torch.float64)
    slots, folded = both(bended, x.double())
    assert folded.dtype == torch.float64
    assert torch.equal(slots, folded)


def test_the_nntilde_export_folds_static_channel_bendings(tmp_path) -> None:
    torch.manual_seed(0)
    model = TinyRave().eval().set_streaming(True)  # nn~ calls the file buffer by buffer
    bended = tb.BendedModule(model)
    x = torch.randn(1, 1, 512)
    bended.trace(x=x)
    bended.bend(tb.Mask(0.4, dim=-2, seed=0) >> tb.Scale(0.7), "decoder_1$")
    bended.bend(tb.Scale(tb.BendingParameter("gain", 0.5)), "encoder_2$")  # stays a slot
    path = tmp_path / "bent.ts"
    tb.export.nntilde(bended, path, methods=["forward"])
    loaded = torch.jit.load(str(path))
    code = loaded.tb_method_forward.inner.code  # in the FIFO: forward alone needs blocks of 16
    assert "_tb_folded_decoder_2" in code and "decoder_1 = " in code
    assert "_tb_slots.encoder_2" in code  # the controlled bending is called
    with torch.no_grad():  # the same folds: the same outputs, bit for bit
        assert torch.equal(loaded(x), bended(x))
        loaded.set_gain(2.0)
        bended.update("gain", 2.0, ramp=False)
        assert torch.equal(loaded(x), bended(x))


class ReadsItsLength(nn.Module):
    """A decision on the input's length: new lengths are traced on their first call."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv1d(1, 8, 3, padding=1)
        self.b = nn.Conv1d(8, 1, 3, padding=1)

    def forward(self, x):
        h = self.a(x)
        if x.shape[-1] > 4096:
            h = h * 0.5
        return self.b(h)


def test_the_first_call_at_new_sizes_runs_the_folded_graph_as_later_calls_do() -> None:
    torch.manual_seed(0)
    bended = tb.BendedModule(ReadsItsLength().eval())
    bended.trace(x=torch.randn(1, 1, 16))
    bended.bend(tb.Scale(0.3), "a$")
    assert folds(bended) == ["b"]
    x = torch.randn(1, 1, 32, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        first, second = bended(x), bended(x)
    assert torch.equal(first, second)
    assert torch.equal(tb.export.torchscript(bended)(x), second)
