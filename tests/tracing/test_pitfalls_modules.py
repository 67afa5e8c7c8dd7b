"""Pitfalls of module code: factories and shapes, modes and attributes, Python state, seeds,
``isinstance`` of tensors, and a real model (see ``test_pitfalls.py`` for the check)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import is_tensor as imported_is_tensor
from torch import nn

import torchbend as tb
from tests.conftest import assert_same
from tests.tracing.test_pitfalls import check_calls

# -- shapes, factories, items --------------------------------------------------------------


class Factories(nn.Module):
    def forward(self, x):
        b, c, t = x.shape
        noise = torch.randn(b, c, t) * 0 + torch.rand(b, c, t) * 0
        ones = torch.ones(b, c) + torch.zeros(size=(b, c)) + torch.empty(b, c).fill_(1)
        full = torch.full((b, c), 2.0) + x.new_ones(b, c) + x.new_zeros((b, c))
        ramp = torch.arange(t) + torch.arange(0, t, 1) + torch.ones(*x.shape[1:]).sum(0)
        like = torch.zeros_like(x) + torch.ones_like(x)
        return x + noise + (ones + full)[..., None] + ramp + like + torch.tensor(x.shape).sum()


def test_factories_with_traced_sizes():
    check_calls(Factories, {"x": torch.randn(2, 3, 4)}, {"x": torch.randn(3, 2, 5)})


class TensorOfSizes(nn.Module):
    def forward(self, x):
        return torch.tensor([x.shape[0], 5]) * torch.tensor(x.shape[1])


def test_tensor_of_traced_sizes():
    check_calls(TensorOfSizes, {"x": torch.randn(2, 3)}, {"x": torch.randn(4, 1)})


class ItemShape(nn.Module):
    def forward(self, x, n):
        return x[: int(n.item())].reshape(-1, n.item())


def test_item_used_for_shapes():
    x = torch.randn(6, 2)
    check_calls(ItemShape, {"x": x, "n": torch.tensor(2)}, {"x": x, "n": torch.tensor(4)})


class Route(nn.Module):
    """Mixture-of-experts routing (mambapy's Jamba): a branch on how many items
    ``torch.where`` selected."""

    def forward(self, x):
        (idx,) = torch.where(x > 0)
        if idx.shape[0] == 0:
            return x
        return x.index_add(0, idx, x[idx])


def test_branch_on_the_size_of_a_selection():
    check_calls(Route, {"x": -torch.ones(4)}, {"x": torch.tensor([1.0, -1.0, 2.0, -2.0])})


class InplaceOnInput(nn.Module):
    def forward(self, x):
        x.mul_(2)
        x[0] = 0
        return x + 1


def test_in_place_on_inputs():
    check_calls(InplaceOnInput, {"x": torch.randn(3)}, {"x": torch.randn(5)})


# -- training modes ---------------------------------------------------------------------------


class ByMode(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.training_only = False

    def forward(self, x):
        return x * 2 if self.training else x


class WithSubmodule(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.sub = ByMode()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.sub(x))


class WeightedSubmodule(WithSubmodule):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(8)

    def forward(self, x):
        return self.drop(self.sub(self.norm(x)))


@pytest.mark.parametrize("backend", ["concrete", "export"])
@pytest.mark.parametrize("bent", [False, True], ids=["unbent", "weights bent"])
def test_submodules_switched_to_train_mode_after_tracing(bent, backend):
    """Also once weights are bent, when graphs run on a view of the module."""
    for strict in (False, True):
        module = WeightedSubmodule().eval()
        bended = tb.BendedModule(module, strict=strict, backend=backend)
        x = torch.randn(4, 8)
        bended.trace(x=x)
        if bent:  # the view copies the modules on the path to a bent weight: norm and the root
            bended.bend(tb.Scale(1.0), r"norm\.weight")
        module.norm.train()
        module.sub.train()
        module.drop.train()
        torch.manual_seed(0)
        expected = module(x)
        torch.manual_seed(0)
        try:
            got = bended(x)
        except tb.TorchbendError:
            continue
        assert_same(got, expected)
        module.eval()
        assert_same(bended(x), module(x))


# -- isinstance, sets and state --------------------------------------------------------------


class TensorOrNumber(nn.Module):
    def forward(self, x, bias=0.5):
        if isinstance(bias, torch.Tensor):
            return x + bias.mean()
        return x - bias


def test_isinstance_of_a_tensor_argument():
    x = torch.randn(3)
    check_calls(
        TensorOrNumber,
        {"x": x, "bias": torch.ones(2)},
        {"x": x},
        {"x": x, "bias": 2},
        {"x": x, "bias": torch.ones(5)},
    )


class InSet(nn.Module):
    def forward(self, x, n: int = 1):
        if n in {1, 2}:
            return x * n
        return x


def test_int_argument_looked_up_in_a_set():
    x = torch.randn(3)
    check_calls(InSet, {"x": x}, {"x": x, "n": 3}, {"x": x, "n": 2})


class ScalarsInADict(nn.Module):
    def forward(self, batch):
        scale = batch["scale"]
        if isinstance(scale, int) and scale > 1:
            return batch["x"] * scale
        return batch["x"]


def test_scalars_inside_a_dict_argument():
    x = torch.randn(3)
    check_calls(
        ScalarsInADict,
        {"batch": {"x": x, "scale": 2}},
        {"batch": {"x": x, "scale": 1}},
        {"batch": {"x": x, "scale": 1.5}},
    )


class Counter(nn.Module):
    """Python state changed by ``forward``: graphs do not record it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.calls


@pytest.mark.parametrize("backend", ["concrete", "export", "auto"])
def test_python_state_changed_in_forward_is_an_error(backend):
    """torch.export puts such state back itself and bakes one value in: the check sees it."""
    module = Counter()
    with pytest.raises(tb.TracingError, match="calls"):
        tb.BendedModule(module, backend=backend).trace(x=torch.ones(2))
    assert module.calls == 0


class LeafCounter(nn.Module):
    """The error's advice taken: the counter is a leaf, its code runs at every call."""

    def __init__(self) -> None:
        super().__init__()
        self.counter = Counter()
        self.counter.torchbend_leaf = True
        self.scale = nn.Linear(2, 2)

    def forward(self, x):
        return self.scale(self.counter(x))


def test_python_state_changed_by_a_leaf_is_state_it_changes_at_every_call():
    module = LeafCounter()
    bended = tb.BendedModule(module)
    bended.trace(x=torch.ones(2))
    for _ in range(3):
        before = module.counter.calls
        out = bended(torch.ones(2))
        assert module.counter.calls == before + 1
        with torch.no_grad():
            assert torch.equal(out, module.scale(torch.ones(2) * module.counter.calls))


class ModeInADict(nn.Module):
    def forward(self, batch):
        x = batch["x"][None, None]
        if batch["mode"] == "nearest":
            return F.interpolate(x, scale_factor=2, mode=batch["mode"])
        return F.interpolate(x, scale_factor=2, mode=batch["mode"], align_corners=True)


def test_string_mode_inside_a_dict_argument():
    x = torch.randn(5)
    check_calls(
        ModeInADict,
        {"batch": {"x": x, "mode": "nearest"}},
        {"batch": {"x": x, "mode": "linear"}},
        {"batch": {"x": x, "mode": "nearest"}},
    )


class OptionalInAList(nn.Module):
    def forward(self, xs):
        out = xs[0]
        if xs[1] is not None:
            out = out + xs[1]
        return out


def test_none_inside_a_list_argument():
    a = torch.randn(3)
    check_calls(OptionalInAList, {"xs": [a, None]}, {"xs": [a, a]}, {"xs": [a, None]})


class IsTensor(nn.Module):
    def forward(self, x, offset=1):
        if torch.is_tensor(offset):
            return x + offset.sum()
        if hasattr(offset, "shape"):
            return x * 0
        return x + getattr(offset, "real", 0)


def test_is_tensor_and_hasattr_of_arguments():
    x = torch.randn(3)
    check_calls(IsTensor, {"x": x}, {"x": x, "offset": torch.ones(2)}, {"x": x, "offset": 2.5})
    check_calls(IsTensor, {"x": x, "offset": torch.ones(2)}, {"x": x, "offset": 3})


def _default(value, fallback):
    return value() if callable(value) else value if value is not None else fallback


class LibraryIdioms(nn.Module):
    """Idioms of x-transformers and transformers: ``callable`` of a maybe-lazy default,
    ``is_tensor`` imported by name, an activation module built in forward."""

    def forward(self, x, context=None):
        kv = _default(context, x)
        first = next(a for a in (None, 3, kv) if imported_is_tensor(a))
        return nn.SiLU()(first) + nn.GELU(approximate="tanh")(x)


def test_library_idioms():
    x = torch.randn(2, 3)
    check_calls(LibraryIdioms, {"x": x}, {"x": x, "context": torch.ones(2, 3)})


class ChecksAndNumPy(nn.Module):
    """transformers' VITS: ``torch._check_tensor_all`` on traced values, NumPy scalars."""

    def forward(self, x):
        torch._check_tensor_all(x > 0, lambda: "x must be positive")
        torch._check(bool((x < 10).all()))
        return x * np.prod([2, 3]) + np.float64(0.5)


def test_checks_on_traced_values_and_numpy_scalars():
    check_calls(
        ChecksAndNumPy, {"x": torch.rand(3) + 1}, {"x": -torch.ones(3)}, {"x": torch.ones(3) * 20}
    )


class Configured(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = ByMode()
        self.causal = True
        self.temperature = 1.0

    def forward(self, x):
        if self.causal:
            x = x.cumsum(-1)
        return self.inner(x / self.temperature)


def test_plain_attributes_changed_after_tracing():
    for strict in (False, True):
        module = Configured().eval()
        bended = tb.BendedModule(module, strict=strict)
        x = torch.randn(4)
        bended.trace(x=x)
        for change in ({"causal": False}, {"temperature": 0.5}, {"causal": True}):
            for name, value in change.items():
                setattr(module, name, value)
            module.inner.training_only = not module.inner.training_only
            try:
                got = bended(x)
            except tb.GuardError:
                assert strict
                continue
            assert_same(got, module(x))


# -- a real model ----------------------------------------------------------------------------


def _tiny_llama() -> nn.Module:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=50,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
    )
    return transformers.LlamaForCausalLM(config).eval()


class LlamaLogits(nn.Module):
    """transformers' Llama: ``logits_to_keep: int = 0`` sliced by ``isinstance``."""

    def __init__(self) -> None:
        super().__init__()
        self.model = _tiny_llama()

    def forward(self, input_ids, logits_to_keep=0, attention_mask=None):
        return self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            logits_to_keep=logits_to_keep,
            use_cache=False,
        ).logits


@pytest.mark.slow
def test_llama_logits_to_keep():
    ids = torch.randint(0, 50, (1, 7), generator=torch.Generator().manual_seed(0))
    check_calls(
        LlamaLogits,
        {"input_ids": ids},
        {"input_ids": ids, "logits_to_keep": 1},
        {"input_ids": torch.cat([ids, ids], 1)},
        {"input_ids": ids, "attention_mask": torch.ones_like(ids)},
        atol=1e-5,
    )


@pytest.mark.slow
def test_llama_cache_objects_passed_in_are_a_clear_error():
    """The cache a call returns is rebuilt from the graph; one passed in is refused."""
    model = _tiny_llama()
    ids = torch.zeros(1, 3, dtype=torch.long)
    with torch.no_grad():
        cache = model(input_ids=ids).past_key_values
    with pytest.raises(tb.TracingError, match=r"DynamicCache holding tensors"):
        tb.BendedModule(model, backend="concrete").trace(input_ids=ids[:, :1], cache=cache)


class GradMode(nn.Module):
    def forward(self, x):
        return x * 2 if torch.is_grad_enabled() else x


def test_grad_mode_read_in_forward():
    for strict in (False, True):
        bended = tb.BendedModule(GradMode(), strict=strict)
        x = torch.randn(3)
        bended.trace(x=x)
        with torch.no_grad():
            try:
                assert_same(bended(x), x)
            except tb.GuardError:
                assert strict
        assert_same(bended(x), x * 2)


class Seeded(nn.Module):
    def forward(self, x):
        torch.manual_seed(3)
        return x + torch.randn(x.shape)


def test_seeding_in_forward():
    check_calls(Seeded, {"x": torch.zeros(3)}, {"x": torch.zeros(5)})
