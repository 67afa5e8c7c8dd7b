"""Tests of the BendedModule facade: calling, inspecting, bending, resetting."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn

import torchbend as tb
from tests.conftest import FlipsOnConv


class Greg(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv_module = nn.Conv1d(1, 4, 3)

    def forward(self, x):
        return self.conv_module(x)


class AutoEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Conv1d(1, 8, 4, stride=4)
        self.dec = nn.ConvTranspose1d(8, 1, 4, stride=4)

    def encode(self, x):
        return torch.tanh(self.enc(x))

    def decode(self, z):
        return self.dec(z)

    def forward(self, x):
        return self.decode(self.encode(x))

    def latent_norm(self, x):
        return self.encode(x).norm()


class Counting(tb.BendingCallback):
    """Scales by 2 and counts how often it bends."""

    def __init__(self) -> None:
        super().__init__()
        self.weight_calls = 0
        self.activation_calls = 0

    def bend(self, x, name):
        self.activation_calls += 1
        return x * 2

    def bend_weight(self, weight, name):
        self.weight_calls += 1
        return weight * 2


@pytest.fixture
def greg():
    torch.manual_seed(0)
    return Greg()


def snapshot(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def assert_untouched(module: nn.Module, before: dict[str, torch.Tensor]) -> None:
    for k, v in module.state_dict().items():
        assert torch.equal(v, before[k]), f"{k} of the wrapped module changed"


def test_is_an_nn_module_sharing_the_wrapped_parameters(greg):
    bended = tb.BendedModule(greg)
    assert isinstance(bended, nn.Module)
    assert {id(p) for p in bended.parameters()} == {id(p) for p in greg.parameters()}
    assert set(bended.state_dict()) == {"module.conv_module.weight", "module.conv_module.bias"}
    bended.eval()
    assert not greg.training
    bended.train()
    assert greg.training


def test_trace_returns_graph_and_outputs(greg):
    x = torch.randn(1, 1, 16)
    bended = tb.BendedModule(greg)
    graph = bended.trace(x=x)
    assert isinstance(graph, torch.fx.Graph)
    assert graph.flow_steps == []
    _, out = bended.trace(x=x, _return_out=True)
    assert torch.equal(out, greg(x))
    _, out = bended.trace(x=x, return_out=True)
    assert torch.equal(out, greg(x))


def test_call_forms(greg):
    x = torch.randn(2, 1, 16)
    bended = tb.BendedModule(greg)
    bended.trace(x=x)
    assert torch.equal(bended(x), greg(x))
    assert torch.equal(bended.forward(x), greg(x))
    assert torch.equal(bended(x=x), greg(x))
    assert torch.equal(bended.call("forward", x), greg(x))


def test_trace_input_errors_name_the_signature(greg):
    bended = tb.BendedModule(greg)
    with pytest.raises(tb.TracingError, match=r"Greg.forward\(x\) has no argument 'y'"):
        bended.trace(y=torch.randn(1, 1, 16))
    with pytest.raises(tb.TracingError, match=r"missing argument 'x'"):
        bended.trace()
    with pytest.raises(tb.TracingError, match="has no method 'encod'"):
        bended.trace("encod", x=torch.randn(1, 1, 16))
    bended.trace(x=torch.randn(1, 1, 16))
    with pytest.raises(tb.TracingError, match="positional"):
        bended(torch.randn(1, 1, 16), torch.randn(1))


def test_traced_and_untraced_methods():
    torch.manual_seed(0)
    model = AutoEncoder()
    x = torch.randn(1, 1, 32)
    bended = tb.BendedModule(model)
    bended.trace("encode", x=x)
    z = model.encode(x)
    bended.trace("decode", z=z)
    assert bended.traced_methods == ["encode", "decode"]
    assert torch.equal(bended.encode(x), z)
    assert torch.equal(bended.decode(z), model.decode(z))
    # forward is not traced: it runs the module's own method, with bended weights
    assert torch.equal(bended(x), model(x))
    bended.bend(tb.Scale(0.0), r"enc\.weight")
    latent = torch.tanh(model.enc.bias)[None, :, None].expand(1, 8, 8)
    assert torch.allclose(bended.latent_norm(x), latent.norm())
    assert torch.allclose(bended(x), model.decode(latent))
    with pytest.raises(AttributeError):
        bended.not_a_method


def test_inspection(greg, tmp_path):
    x = torch.randn(1, 1, 16)
    bended = tb.BendedModule(greg)
    bended.trace(x=x)
    assert bended.weight_names == ["conv_module.weight", "conv_module.bias"]
    assert bended.weight_shape("conv_module.weight") == torch.Size([4, 1, 3])
    with pytest.raises(tb.SelectionError, match=r"did you mean 'conv_module\.weight'"):
        bended.weight_shape("conv_module.weigth")
    assert bended.activation_names() == ["x", "conv_module"]
    assert bended.activation_shape("conv_module") == torch.Size([1, 4, 14])
    with pytest.raises(tb.SelectionError, match="did you mean 'conv_module'"):
        bended.activation_shape("conv_modul")
    assert [a.name for a in bended.activations(op="call_module")] == ["conv_module"]
    assert [a.name for a in bended.activations(flt="conv")] == ["conv_module"]
    assert [a.name for a in bended.activations(exclude="conv")] == ["x"]
    table = bended.print_activations()
    assert "conv_module" in table and "call_module" in table and "[1, 4, 14]" in table
    assert "<table>" in table._repr_html_()
    weights = bended.print_weights(out=tmp_path / "w.txt")
    assert (tmp_path / "w.txt").read_text().strip() == weights.strip()
    assert "conv_module.bias" in weights and "std" in weights
    assert "conv_module.bias" not in bended.print_weights(flt="conv_module.weight")
    assert "call_module[target=conv_module]" in bended.print_graph()
    assert isinstance(bended.graph_module(), torch.fx.GraphModule)
    with pytest.raises(tb.TracingError, match="not traced"):
        bended.graph("encode")


def test_print_activations_matches_the_seed_table(greg, capsys):
    bended = tb.BendedModule(greg)
    bended.trace(x=torch.randn(1, 1, 16))
    bended.print_activations()
    printed = capsys.readouterr().out.splitlines()
    assert printed[2].split()[:2] == ["x", "placeholder"]
    assert printed[3].split()[:2] == ["conv_module", "call_module"]


def test_bend_selects_by_regex_and_returns_keys(greg):
    x = torch.randn(1, 1, 16)
    bended = tb.BendedModule(greg)
    bended.trace(x=x)
    assert bended.bend(tb.Bias(1.0), "conv_module$") == ["forward:conv_module"]
    assert torch.allclose(bended(x), greg(x) + 1)
    assert bended.bend(tb.Scale(2.0), "conv_module.w") == ["conv_module.weight"]
    assert bended.bended_keys() == ["forward:conv_module", "conv_module.weight"]
    assert bended.bend(tb.Scale(1.0), "conv") == [
        "conv_module.weight",
        "conv_module.bias",
        "forward:conv_module",
    ]
    assert bended.bend(tb.Scale(1.0), "forward:x$") == ["forward:x"]


def test_bend_errors(greg):
    bended = tb.BendedModule(greg)
    bended.trace(x=torch.randn(1, 1, 16))
    with pytest.raises(
        tb.SelectionError,
        match=r"matched no weight or activation of Greg; did you mean 'conv_module",
    ):
        bended.bend(tb.Mask(0.3), "conv_modul$")
    with pytest.raises(tb.SelectionError, match="not a valid regular expression"):
        bended.bend(tb.Mask(0.3), "conv[")
    with pytest.raises(tb.SelectionError, match="at least one pattern"):
        bended.bend(tb.Mask(0.3))
    with pytest.raises(tb.BendingError, match=r"call it: Mask\(...\)"):
        bended.bend(tb.Mask, "conv")
    with pytest.raises(tb.BendingError, match="takes a BendingCallback"):
        bended.bend(lambda x: x, "conv")
    with pytest.raises(tb.SelectionError, match="were not traced"):
        bended.bend(tb.Mask(0.3), "conv", fn="encode")
    assert bended.bended_keys() == []


def test_scoped_patterns_and_fn_restriction():
    torch.manual_seed(0)
    model = AutoEncoder()
    x = torch.randn(1, 1, 32)
    bended = tb.BendedModule(model)
    bended.trace("encode", x=x)
    bended.trace("decode", z=model.encode(x))
    bended.trace("forward", x=x)
    assert bended.bend(tb.Scale(1.0), "encode:enc$") == ["encode:enc"]
    assert bended.bend(tb.Scale(1.0), "enc$", fn="forward") == ["forward:enc"]
    assert bended.bend(tb.Scale(1.0), "dec$") == ["decode:dec", "forward:dec"]


def test_bending_never_touches_the_wrapped_module_and_reset_is_exact(greg):
    x = torch.randn(3, 1, 16)
    before = snapshot(greg)
    expected = greg(x)
    bended = tb.BendedModule(greg)
    bended.trace(x=x)
    bended.bend(tb.Noise(0.5, seed=0), "conv_module.weight")
    bended.bend(tb.Mask(0.5, seed=0), "conv_module")
    assert not torch.equal(bended(x), expected)
    assert_untouched(greg, before)
    assert torch.equal(greg(x), expected)
    bended.reset()
    assert bended.bended_keys() == []
    assert torch.equal(bended(x), expected)
    assert_untouched(greg, before)


def test_several_callbacks_apply_in_order_and_chain(greg):
    x = torch.randn(1, 1, 16)
    bended = tb.BendedModule(greg)
    bended.trace(x=x)
    bended.bend(tb.Bias(1.0), "conv_module$")
    bended.bend(tb.Scale(2.0), "conv_module$")
    expected = (greg(x) + 1) * 2
    assert torch.allclose(bended(x), expected)
    bended.reset()
    bended.bend(tb.Bias(1.0) >> tb.Scale(2.0), "conv_module$")
    assert torch.allclose(bended(x), expected)


def test_weight_bending_is_computed_once_and_graphs_are_not_rebuilt(greg):
    x = torch.randn(1, 1, 16)
    bended = tb.BendedModule(greg)
    bended.trace(x=x)
    weights, activations = Counting(), Counting()
    bended.bend(weights, "conv_module.weight")
    bended.bend(activations, "conv_module$")
    gm = bended.graph_module()
    for _ in range(5):
        bended(x)
    assert weights.weight_calls == 1
    assert activations.activation_calls == 5
    assert bended.graph_module() is gm
    assert torch.allclose(
        bended(x), 2 * nn.functional.conv1d(x, 2 * greg.conv_module.weight, greg.conv_module.bias)
    )


def test_bendings_apply_to_graphs_traced_later():
    torch.manual_seed(0)
    model = AutoEncoder()
    x = torch.randn(1, 1, 32)
    bended = tb.BendedModule(model)
    bended.trace("encode", x=x)
    bended.bend(tb.Scale(0.0), "enc$")
    assert torch.equal(bended.encode(x), torch.zeros(1, 8, 8))
    bended.trace("forward", x=x)
    assert bended.bended_keys() == ["encode:enc", "forward:enc"]
    assert torch.equal(bended(x), model.decode(torch.zeros(1, 8, 8)))


def test_full_shape_mask_fails_on_other_shapes_with_the_dim_fix(greg):
    x = torch.randn(1, 1, 16)
    bended = tb.BendedModule(greg)
    bended.trace(x=x)
    bended.bend(tb.Bias(1.0), "conv_module$")
    bended(torch.randn(4, 1, 32))
    bended.reset()
    bended.bend(tb.Mask(0.3), "conv_module$")
    bended(x)
    with pytest.raises(tb.BendingError, match=r"\[1, 4, 14\].*\[4, 4, 30\].*dim="):
        bended(torch.randn(4, 1, 32))
    bended.reset()
    bended.bend(tb.Mask(prob=0.3, dim=-2), "conv_module$")
    assert bended(torch.randn(4, 1, 32)).shape == (4, 4, 30)


def test_device_and_dtype_moves_keep_bendings(greg):
    x = torch.randn(1, 1, 16)
    bended = tb.BendedModule(greg)
    bended.trace(x=x)
    bended.bend(tb.Scale(2.0), "conv_module.weight")
    bended.bend(tb.Mask(0.5, seed=1), "conv_module$")
    expected = bended(x)
    bended.double()
    out = bended(x.double())
    assert out.dtype == torch.float64
    assert torch.allclose(out.float(), expected, atol=1e-6)
    assert greg.conv_module.weight.dtype == torch.float64


def test_tied_weights_are_bent_together():
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(4, 4, bias=False)
            self.b = nn.Linear(4, 4, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    bended = tb.BendedModule(Tied())
    x = torch.randn(2, 4)
    bended.trace(x=x)
    assert bended.weight_names == ["a.weight"]
    bended.bend(tb.Scale(0.0), "a.weight")
    assert torch.equal(bended(x), torch.zeros(2, 4))


def test_bended_state_dict_holds_bent_weights(greg):
    bended = tb.BendedModule(greg)
    bended.bend(tb.Scale(2.0), "conv_module.weight")
    state = bended.bended_state_dict()
    assert torch.equal(state["conv_module.weight"], 2 * greg.conv_module.weight)
    assert torch.equal(state["conv_module.bias"], greg.conv_module.bias)


def test_torch_compile_gives_the_same_outputs(greg):
    x = torch.randn(1, 1, 16)
    bended = tb.BendedModule(greg)
    bended.trace(x=x)
    bended.bend(tb.Bias(1.0), "conv_module$")
    compiled = torch.compile(bended, backend="eager")
    assert torch.allclose(compiled(x), bended(x))


def test_leaf_set_is_configurable():
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return torch.relu(self.lin(x))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = Block()

        def forward(self, x):
            return self.block(x) * 2

    x = torch.randn(2, 3)
    traced_through = tb.BendedModule(Net())
    traced_through.trace(x=x)
    assert "block_lin" in traced_through.activation_names()
    for leaves in ((Block,), ("block",)):
        leaf = tb.BendedModule(traced_through.module, leaves=leaves)
        leaf.trace(x=x)
        assert [a.name for a in leaf.activations(op="call_module")] == ["block"]
        assert torch.equal(leaf(x), traced_through.module(x))


def test_state_registered_while_tracing_another_method_is_concrete():
    class AE(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv1d(1, 4, 3)

        def encode(self, x):
            return self.conv(x)

        def forward(self, x):
            return self.conv(x) * 2

    x = torch.randn(1, 1, 16)
    bended = tb.BendedModule(AE())
    bended.trace(x=x)
    mask = tb.Mask(0.5, dim=-2, seed=0)
    bended.bend(mask, "conv$")
    bended.trace("encode", x=x)
    state = mask.state("encode:conv")
    assert type(state) is torch.Tensor
    assert copy.deepcopy(mask).state("encode:conv").shape == state.shape


def test_string_annotations_do_not_reach_generated_code():
    class Annotated(nn.Module):  # this file has `from __future__ import annotations`
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv1d(1, 2, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.conv(x)

    x = torch.randn(1, 1, 16)
    bended = tb.BendedModule(Annotated())
    bended.trace(x=x)
    assert torch.equal(tb.export.torchscript(bended)(x), bended(x))


class InPlaceScale(tb.BendingCallback):
    """A careless user callback: it scales its input in place."""

    scale = tb.callbacks.Argument(float, neutral=1.0)

    def __init__(self, scale: float | tb.BendingParameter = 0.5) -> None:
        super().__init__()
        self.scale = scale

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return x.mul_(self.scale)


class WeightReader(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 4, 3, padding=1)
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.conv(x)).transpose(1, 2) @ self.w.t()


def test_callbacks_editing_their_input_in_place_never_reach_the_models_tensors(tmp_path):
    torch.manual_seed(0)
    model = WeightReader()
    before = copy.deepcopy(model.state_dict())
    x = torch.randn(1, 1, 8)
    expected = model(x).detach()
    bended = tb.BendedModule(model)
    bended.trace(x=x)
    gain = tb.BendingParameter("gain", 0.5)
    bended.bend(InPlaceScale(gain), r"conv\.weight")  # weights: bent from a copy
    bended.bend(InPlaceScale(0.5), "^w$|^t$")  # activations computed from weights alone
    for value in (0.5, 2.0, 0.5):
        bended.update("gain", value, ramp=False)
        for _ in range(3):
            y = bended(x)
    assert not torch.equal(y, expected)
    scripted = tb.export.torchscript(bended)
    for value in (2.0, 2.0, 0.5):  # the export rebends from a copy of its cached base
        assert scripted.set_gain(value) == 0
        bended.update("gain", value, ramp=False)
        with torch.no_grad():
            assert torch.equal(scripted(x), bended(x))
    for name, value in model.state_dict().items():
        assert torch.equal(value, before[name]), name
    bended.reset()
    assert torch.equal(bended(x), expected)


def test_flags_set_on_the_model_after_a_weight_bending_reach_the_bent_copies():
    torch.manual_seed(0)
    model = tb.models.TinyRave().eval()
    bended = tb.BendedModule(model)
    bended.trace(x=torch.zeros(1, 1, 256))
    bended.bend(tb.Scale(0.5), r"decoder\.2\.weight")  # the decoder's modules are copies now
    x = torch.randn(1, 1, 1024, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        offline = bended(x)
        model.set_streaming(True)  # set on the model: streamed output is the offline one
        model.reset_cache()
        streamed = torch.cat([bended(b) for b in x.split(256, -1)], -1)
    torch.testing.assert_close(streamed, offline)
    norm = nn.Sequential(nn.Conv1d(1, 4, 1), nn.BatchNorm1d(4)).train()
    bended = tb.BendedModule(norm)
    bended.trace(input=torch.randn(8, 1, 16))
    bended.bend(tb.Scale(0.5), r"1\.weight")
    norm.eval()  # the bent copy of the batch norm leaves the model's statistics alone now
    kept = copy.deepcopy(norm[1].state_dict())
    for _ in range(3):
        bended(torch.randn(8, 1, 16) * 5)
    for name, value in norm[1].state_dict().items():
        assert torch.equal(value, kept[name]), name


def test_streaming_switched_through_the_bended_module_survives_the_next_bending():
    torch.manual_seed(0)
    model = tb.models.TinyRave().eval()
    x = torch.randn(1, 1, 1024, generator=torch.Generator().manual_seed(1))

    def streamed(through_bended: bool) -> torch.Tensor:
        own = copy.deepcopy(model)
        weights = {n: p.detach().clone() for n, p in own.named_parameters()}
        bended = tb.BendedModule(own)
        bended.trace(x=torch.zeros(1, 1, 256))
        bended.bend(tb.Scale(0.5), r"decoder\.0\.weight")  # decoder.0 runs on a copy now
        (bended if through_bended else own).set_streaming(True)
        bended.bend(tb.Scale(0.9), r"encoder\.0\.weight")  # makes the copies again
        with torch.no_grad():
            out = torch.cat([bended(b) for b in x.split(256, -1)], -1)
        for name, value in own.named_parameters():  # flags given back, never weights
            assert torch.equal(value, weights[name]), name
        return out

    assert torch.equal(streamed(True), streamed(False))


def small() -> tuple[tb.BendedModule, nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv1d(1, 4, 3, padding=1), nn.Tanh(), nn.Conv1d(4, 1, 3, padding=1))
    bended = tb.BendedModule(model)
    x = torch.randn(1, 1, 16)
    bended.trace(input=x)
    return bended, model, x


def test_reset_returns_to_the_original_after_interpolate_used_without_with():
    bended, model, x = small()
    expected = model(x)
    bended.bend(tb.Scale(-1.0), r"0\.weight")
    bended.write("flipped")
    bended.reset()
    bended.interpolate(1.0, flipped=1.0)  # no `with`: stays mixed until reset
    assert bended.version == "original" and not torch.equal(bended(x), expected)
    bended.reset()
    assert torch.equal(bended(x), expected)


def test_writing_or_importing_the_active_version_makes_bendings_apply_to_its_new_weights():
    bended, model, x = small()
    zeros = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    bended.create_version("v", model)
    with bended.set_version("v"):
        bended.create_version("v", zeros)  # over the active version
        assert torch.equal(bended(x), torch.zeros_like(x))
        bended.bend(tb.Bias(1.0), r"2\.bias")
        bended.write("v")  # the bent weights frozen into the active version: bent again
        assert torch.equal(bended(x), torch.full_like(x, 2.0))


def test_a_weight_change_during_a_crossfade_is_not_undone_by_it():
    bended, model, x = small()
    depth = tb.BendingParameter("depth", 1.0, ramp=4)
    bended.bend(tb.Scale(depth), r"0\.weight")
    bended.create_version("zero", {k: torch.zeros_like(v) for k, v in model.state_dict().items()})
    bended.update("depth", 0.5)  # a crossfade over 4 calls
    bended(x)
    bended.set_version("zero")  # mid-fade: the weights of another version, bent again
    for _ in range(6):
        y = bended(x)
    assert torch.equal(y, torch.zeros_like(x))
    assert torch.equal(bended.weight("0.weight"), torch.zeros_like(model[0].weight))


def test_a_crossfade_ends_on_weights_bent_from_the_current_bendings():
    bended, model, x = small()
    depth = tb.BendingParameter("depth", 1.0, ramp=3)
    bended.bend(tb.Scale(depth), r"0\.weight")
    bended.update("depth", 0.5)
    bended(x)
    bended.bend(tb.Scale(2.0), r"0\.weight")  # mid-fade: another bending of the same weight
    for _ in range(5):
        bended(x)
    assert torch.equal(bended.weight("0.weight"), model[0].weight * 0.5 * 2.0)


def test_a_bend_that_fails_half_way_leaves_the_module_as_it_was():
    class Refuses(tb.BendingCallback):  # takes weights, refuses activations
        def register_target(self, name, shape, dtype, device):
            if ":" in name:
                raise tb.BendingError(f"cannot bend {name}")

        def bend(self, x, name):
            return x * 0

        @classmethod
        def neutral_setting(cls):
            return None

    bended, _, x = small()
    bended.bend(tb.Scale(0.5), r"2\.weight")
    before = (bended.bended_keys(), dict(bended.bending_config().to_dict()), bended(x))
    with pytest.raises(tb.BendingError, match="cannot bend"):
        bended.bend(Refuses(), r"0\.weight", "_1$")
    assert bended.bended_keys() == before[0]
    assert bended.bending_config().to_dict() == before[1]
    assert torch.equal(bended(x), before[2]) and len(bended.bendings) == 1


def test_a_refused_bend_leaves_its_callback_no_target_to_derive_state_for():
    bended, model, x = small()
    p = tb.BendingParameter("p", 0.5)
    bended.bend(tb.Mask(p, seed=0), r"0\.weight")
    ablate = tb.Ablate(fraction=p, dim=-2, seed=0)  # follows p too, refuses 1-d biases
    with pytest.raises(tb.BendingError, match="dim=-2 is out of range"):
        bended.bend(ablate, r"2\.weight", r"0\.bias")  # the weight registers, the bias not
    assert not ablate._targets and not list(ablate.buffers())
    bended.update("p", 0.0)  # the refused Ablate derives nothing: no error
    assert torch.equal(bended(x), model(x))
    chain = tb.Scale(2.0) >> tb.Ablate(fraction=0.5, dim=-2, seed=0)
    with pytest.raises(tb.BendingError, match="dim=-2 is out of range"):
        bended.bend(chain, r"0\.bias")
    assert not any(cb._targets for cb in chain.chained())


def test_controls_at_rest_do_not_ramp_and_reset_ends_ramps_under_way():
    bended, model, x = small()
    gain = tb.BendingParameter("gain", 1.0, ramp=8)
    assert not gain.ramping()  # nothing to spread before a change
    bended.bend(tb.Scale(gain), "_1$")
    assert torch.equal(bended(x), model(x))  # neutral: the identity, bit for bit
    bended.update("gain", 0.0)
    bended(x)
    assert gain.ramping()
    bended.reset()
    assert not gain.ramping() and gain.get() == 0.0
    bended.bend(tb.Scale(gain), "_1$")  # the control reused: at its value at once
    bended.update("gain", 1.0, ramp=False)
    assert torch.equal(bended(x), model(x))


def test_calls_that_trace_a_new_graph_move_ramps_on():
    bended, _, _ = small()
    gain = tb.BendingParameter("gain", 1.0, ramp=2)
    bended.bend(tb.Scale(gain), "_1$")
    bended.update("gain", 0.0)
    bended(torch.randn(1, 1, 8))  # a new length: traced, and one step of the ramp
    bended(torch.randn(1, 1, 12))
    assert not gain.ramping()


def test_a_retrace_leaves_what_seeded_bendings_draw_next_as_it_was():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
    x = torch.ones(2, 4)

    def second_call(retrace: bool) -> torch.Tensor:
        bended = tb.BendedModule(net)
        bended.trace(input=torch.randn(2, 4))
        bended.bend(tb.Noise(0.5, seed=3), "_0$")
        bended(x)
        if retrace:
            bended.trace(input=torch.randn(3, 4))
        return bended(x)

    assert torch.equal(second_call(False), second_call(True))


def test_a_seeded_noise_that_flips_a_decision_is_drawn_once_whatever_was_traced():
    x = torch.randn(1, 1, 16, generator=torch.Generator().manual_seed(1))

    def first_call(traced_its_branch: bool) -> tuple[torch.Tensor, int]:
        bended = tb.BendedModule(FlipsOnConv().eval())
        bended.trace(x=x)
        bended.bend(tb.Noise(3.0, seed=0), "conv$")  # its first draw flips h.mean() > 0
        if traced_its_branch:
            bended.trace(x=x)  # draws as the call will, and puts the generator back
        return bended(x=x).detach(), len(bended.graphs())

    fresh, graphs = first_call(False)
    assert graphs == 2  # the call found the decision flipped and traced the other branch
    assert torch.equal(fresh, first_call(True)[0])


def test_a_call_that_flips_a_decision_leaves_a_carried_filter_as_one_run_would():
    x = torch.randn(1, 1, 16, generator=torch.Generator().manual_seed(1))

    def calls(traced_its_branch: bool) -> list[torch.Tensor]:
        bended = tb.BendedModule(FlipsOnConv().eval())
        bended.trace(x=x)
        bended.bend(tb.Filter("lowpass", cutoff=0.1, carry=True), "conv$")
        bended.bend(tb.Scale(-1.0), r"conv\.(weight|bias)$")  # flips h.mean() > 0
        if traced_its_branch:
            bended.trace(x=x)  # a trace leaves the filter's memory as it found it
        with torch.no_grad():  # the first call stops, traces, runs again: the memory moves once
            return [bended(x=x) for _ in range(2)]

    for fresh, traced in zip(calls(False), calls(True)):
        assert torch.equal(fresh, traced)


class OnlyDecided(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(4, 4)
        self.m = nn.Linear(4, 4)

    def forward(self, x):
        y, z = self.l(x), self.m(x)
        if y.sum() > 0:
            return z * 2
        return z


def test_bend_warns_about_bendings_that_change_nothing_or_stack():
    bended = tb.BendedModule(OnlyDecided())
    bended.trace(x=torch.randn(1, 4))
    with pytest.warns(UserWarning, match=r"forward:l changes nothing on the inputs traced: only"):
        bended.bend(tb.Scale(2.0), "l$")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bended.bend(tb.Scale(2.0), "m$")
    with pytest.warns(UserWarning, match=r"Scale\(scale=2.0\) already bends forward:m"):
        bended.bend(tb.Scale(2.0), "m$")  # the same notebook cell, run again


def test_bend_warns_that_decisions_only_change_nothing_only_when_it_is_so():
    bended = tb.BendedModule(FlipsOnConv().eval())
    x = torch.randn(1, 1, 16, generator=torch.Generator().manual_seed(1))
    bended.trace(x=x)
    before = bended(x=x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # it flips the decision: the output changes
        bended.bend(tb.Scale(-1.0), "mean$")
    assert not torch.equal(bended(x=x), before)

    class Lacking(nn.Module):  # the node only exists in the graph of long inputs
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv1d(1, 4, 3, padding=1)

        def forward(self, x):
            h = self.conv(x)
            if x.shape[-1] > 16:
                m = h.mean()
                if m > 100:
                    h = h * 2
            return torch.tanh(h)

    bended = tb.BendedModule(Lacking())
    bended.trace(x=torch.randn(1, 1, 32))
    bended.trace(x=torch.randn(1, 1, 16))
    with pytest.warns(UserWarning, match=r"forward:mean changes nothing.*1 graph\(s\) traced"):
        bended.bend(tb.Scale(2.0), "mean$")


def test_selection_mistakes_are_clear_errors():
    attention = nn.MultiheadAttention(8, 2, batch_first=True)

    class Attend(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = attention

        def forward(self, x):
            return self.a(x, x, x)[0]

    bended = tb.BendedModule(Attend())
    with pytest.raises(tb.TracingError, match=r"by a string, got Tensor of shape \(1, 3, 8\)"):
        bended.trace(torch.randn(1, 3, 8))
    bended.trace(x=torch.randn(1, 3, 8))
    with pytest.raises(tb.SelectionError, match="the empty pattern '' would match every"):
        bended.bend(tb.Scale(2.0), "")
    # listed activations are the ones bend() takes; a tuple output says why it is not one
    assert "a" not in bended.activation_names() and "getitem" in bended.activation_names()
    assert any(a.name == "a" and not a.is_tensor for a in bended.activations())
    with pytest.raises(tb.SelectionError, match=r"'a' of forward is not one tensor .*\(getitem\)"):
        bended.bend(tb.Scale(2.0), "a$")
    assert bended.bended_keys() == []


class Refuses(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(4, 4)

    def forward(self, x):
        if x.dim() != 3:
            raise ValueError(f"Refuses expects (batch, time, 4), got {list(x.shape)}")
        return self.l(x)


def test_a_module_refusing_its_inputs_is_reported_with_its_own_values():
    bended = tb.BendedModule(Refuses())
    with pytest.raises(tb.TracingError, match=r"itself raises .* got \[2, 4\]$") as info:
        bended.trace(x=torch.randn(2, 4))
    assert "Proxy" not in str(info.value) and isinstance(info.value.__cause__, ValueError)
