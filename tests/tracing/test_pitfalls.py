"""Pitfalls of third-party model code: every call of a bended module equals eager, or raises.

Each module below is written the way model code is written (optional arguments, ``isinstance``
on scalars, string modes, dict keys...). Each is traced on some inputs, then called with those
and with other ones; every call must give what the eager module gives, or raise a torchbend
error (a :class:`GuardError` in strict mode), never return something else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torchbend as tb
from tests.conftest import assert_same

# -- the check -------------------------------------------------------------------------------


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


def check_calls(
    make: Callable[[], nn.Module],
    traced: dict[str, Any],
    *calls: dict[str, Any],
    errors: tuple[int, ...] = (),
    atol: float = 0.0,
    **options: Any,
) -> None:
    """Trace ``make()`` on ``traced``, call it with ``traced`` and each of ``calls``: each call
    equals eager, except the calls numbered in ``errors`` (0 for ``traced``), which raise a
    torchbend error. In strict mode, a call may also raise :class:`GuardError`, and nothing
    else. A call that eager code refuses must raise the same error, or a torchbend one.
    ``options`` go to :class:`BendedModule`."""
    for strict in (False, True):
        torch.manual_seed(0)
        module = make()
        bended = tb.BendedModule(module, strict=strict, **options)
        bended.trace(**_clone(traced))
        for i, inputs in enumerate((traced, *calls)):
            torch.manual_seed(1)
            try:
                expected = module(**_clone(inputs))
            except Exception as e:
                with pytest.raises((type(e), tb.TorchbendError)):
                    bended(**_clone(inputs))
                continue
            torch.manual_seed(1)
            try:
                got = bended(**_clone(inputs))
            except tb.GuardError:
                assert strict or i in errors, f"call {i}: GuardError without strict mode"
                continue
            except tb.TorchbendError:
                assert i in errors, f"call {i} raised"
                continue
            assert i not in errors, f"call {i} should raise"
            assert_same(got, expected, atol=atol, rtol=atol, path=f"call {i}")


x3 = torch.randn(1, 5, 4)

# -- scalar and optional arguments -----------------------------------------------------------


class LogitsHead(nn.Module):
    """An LLM head keeping the last ``num_logits_to_keep`` positions (0: all of them)."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(4, 7)

    def forward(self, h, num_logits_to_keep: int = 0):
        keep = num_logits_to_keep
        return self.head(h[:, slice(-keep, None) if isinstance(keep, int) else keep])


def test_isinstance_and_slice_of_an_int_argument():
    check_calls(LogitsHead, {"h": x3}, {"h": x3, "num_logits_to_keep": 2}, {"h": x3})


def test_an_int_argument_given_as_a_tensor_of_positions():
    check_calls(
        LogitsHead,
        {"h": x3, "num_logits_to_keep": 1},
        {"h": x3, "num_logits_to_keep": torch.tensor([0, 3])},
        {"h": x3, "num_logits_to_keep": 3},
    )


class Optional(nn.Module):
    def forward(self, y, cond=None):
        return y * 2 if cond is not None else y


def test_optional_argument_traced_with_a_tensor_called_without():
    y = torch.ones(3)
    check_calls(Optional, {"y": y, "cond": torch.ones(1)}, {"y": y}, {"y": y, "cond": y})


def test_optional_argument_traced_without_called_with_a_tensor():
    y = torch.ones(3)
    check_calls(Optional, {"y": y}, {"y": y, "cond": torch.ones(1)})


class ScalarKinds(nn.Module):
    """Branches on the type, truth and value of a scalar argument."""

    def forward(self, x, scale=1):
        if isinstance(scale, float):
            x = x + 0.5
        if scale:
            x = x * scale
        if scale > 2:
            x = -x
        return x + scale // 2


@pytest.mark.parametrize("other", [0, 3, 2.5, True, 1.0, None])
def test_scalar_argument_of_another_value_or_type(other):
    x = torch.randn(3)  # None: eager raises (``None > 2``), so must the bended module
    check_calls(ScalarKinds, {"x": x, "scale": 1}, {"x": x, "scale": other})


class ScalarFormat(nn.Module):
    """A scalar argument read through a string (a name, a key)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleDict({f"l{i}": nn.Linear(4, 4) for i in range(3)})

    def forward(self, x, layer: int = 0):
        return self.layers[f"l{layer}"](x)


def test_scalar_argument_formatted_into_a_key():
    x = torch.randn(2, 4)
    check_calls(ScalarFormat, {"x": x}, {"x": x, "layer": 2}, {"x": x, "layer": 1})


class Mode(nn.Module):
    def forward(self, x, mode: str = "nearest"):
        if mode == "nearest":
            return F.interpolate(x, scale_factor=2, mode=mode)
        return F.interpolate(x, scale_factor=2, mode=mode, align_corners=False)


def test_string_mode():
    x = torch.randn(1, 2, 5)
    check_calls(Mode, {"x": x}, {"x": x, "mode": "linear"}, {"x": x, "mode": "nearest"})


class Flags(nn.Module):
    def forward(self, x, normalize: bool = False, eps: float = 1e-5):
        if normalize:
            x = x / (x.norm() + eps)
        return x


def test_bool_and_float_arguments():
    x = torch.randn(4)
    check_calls(
        Flags,
        {"x": x},
        {"x": x, "normalize": True},
        {"x": x, "normalize": True, "eps": 1.0},
        atol=1e-6,
    )


# -- containers -----------------------------------------------------------------------------


class ListLength(nn.Module):
    def forward(self, xs):
        if len(xs) > 1:
            return torch.stack(xs).sum(0)
        return xs[0] * 10


def test_list_lengths():
    a, b = torch.randn(3), torch.randn(3)
    check_calls(ListLength, {"xs": [a, b]}, {"xs": [a]}, {"xs": [a, b, a]})


class DictKeys(nn.Module):
    def forward(self, batch):
        out = batch["x"] * 2
        mask = batch.get("mask")
        if mask is not None:
            out = out * mask
        if "bias" in batch:
            out = out + batch["bias"]
        return out


def test_dict_keys():
    x, m = torch.randn(3), torch.randn(3)
    check_calls(
        DictKeys,
        {"batch": {"x": x}},
        {"batch": {"x": x, "mask": m}},
        {"batch": {"x": x, "bias": m}},
        {"batch": {"x": x, "mask": m, "bias": m}},
    )


class FirstOf(nn.Module):
    def forward(self, xs):
        first = next(iter(xs), None)
        if first is None:
            return torch.zeros(1)
        return first + len(xs)


def test_next_of_iter_and_stop_iteration():
    a = torch.randn(2)
    check_calls(FirstOf, {"xs": [a, a]}, {"xs": [a]}, {"xs": []})


class Exhaust(nn.Module):
    def forward(self, x):
        rows = iter(x)
        total = next(rows)
        while True:
            try:
                total = total + next(rows)
            except StopIteration:
                return total


def test_stop_iteration_over_a_tensor():
    check_calls(Exhaust, {"x": torch.randn(3, 2)}, {"x": torch.randn(5, 2)})


def test_len_of_a_zero_dim_tensor_raises_as_eager():
    class Len(nn.Module):
        def forward(self, x):
            return len(x.sum())

    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        Len()(torch.ones(2))
    with pytest.raises((TypeError, tb.TracingError), match="0-d tensor"):
        tb.BendedModule(Len()).trace(x=torch.ones(2))


# -- tensors' dtype, device, requires_grad --------------------------------------------------


class DtypeBranch(nn.Module):
    def forward(self, x):
        if x.dtype == torch.float64:
            return x * 2
        if not x.is_floating_point():
            return x.float() + 1
        return x - 1


def test_dtype_branches():
    check_calls(
        DtypeBranch,
        {"x": torch.randn(3)},
        {"x": torch.randn(3, dtype=torch.float64)},
        {"x": torch.arange(3)},
    )


class DeviceBranch(nn.Module):
    def forward(self, x):
        return x * 2 if x.device.type == "cpu" else x


def test_device_branch():
    check_calls(DeviceBranch, {"x": torch.randn(3)}, {"x": torch.randn(4)})


class GradBranch(nn.Module):
    def forward(self, x):
        if x.requires_grad:
            return x * 2
        return x + 1


# The check of new graphs against the module runs both under ``torch.no_grad()``, where
# ``requires_grad`` and ``torch.is_grad_enabled()`` read otherwise than in the call: these
# tests check the guards themselves, without it.


def test_requires_grad_branch():
    x = torch.randn(3)
    check_calls(GradBranch, {"x": x}, {"x": x.clone().requires_grad_()}, {"x": x}, check=False)


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


def test_submodules_switched_to_train_mode_after_tracing():
    for strict in (False, True):
        module = WithSubmodule().eval()
        bended = tb.BendedModule(module, strict=strict)
        x = torch.randn(8)
        bended.trace(x=x)
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


def test_python_state_changed_in_forward_is_an_error():
    with pytest.raises(tb.TracingError, match="calls"):
        tb.BendedModule(Counter()).trace(x=torch.ones(2))


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
def test_llama_cache_objects_are_a_clear_error():
    with pytest.raises(tb.TracingError, match=r"DynamicCache.*use_cache=False"):
        tb.BendedModule(_tiny_llama()).trace(input_ids=torch.zeros(1, 3, dtype=torch.long))


class GradMode(nn.Module):
    def forward(self, x):
        return x * 2 if torch.is_grad_enabled() else x


def test_grad_mode_read_in_forward():
    for strict in (False, True):
        bended = tb.BendedModule(GradMode(), strict=strict, check=False)  # see GradBranch
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


def test_entries_say_what_of_a_call_differs():
    bended = tb.BendedModule(Optional())
    y = torch.ones(3)
    bended.trace(y=y, cond=torch.ones(1))
    (entry,) = bended._methods.get("forward").entries
    assert entry.mismatch({"y": y, "cond": torch.ones(1)}) is None
    assert entry.mismatch({"y": y, "cond": None}) == ("argument 'cond' is None, traced as a Tensor")
