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
from tests.conftest import assert_same, clone

# -- the check -------------------------------------------------------------------------------


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
        bended.trace(**clone(traced))
        for i, inputs in enumerate((traced, *calls)):
            torch.manual_seed(1)
            try:
                expected = module(**clone(inputs))
            except Exception as e:
                with pytest.raises((type(e), tb.TorchbendError)):
                    bended(**clone(inputs))
                continue
            torch.manual_seed(1)
            try:
                got = bended(**clone(inputs))
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
    check_calls(GradBranch, {"x": x}, {"x": x.clone().requires_grad_()}, {"x": x})


def test_entries_say_what_of_a_call_differs():
    bended = tb.BendedModule(Optional())
    y = torch.ones(3)
    bended.trace(y=y, cond=torch.ones(1))
    entry = bended.view().current("forward")
    assert entry.mismatch({"y": y, "cond": torch.ones(1)}) is None
    assert entry.mismatch({"y": y, "cond": None}) == ("argument 'cond' is None, traced as a Tensor")
